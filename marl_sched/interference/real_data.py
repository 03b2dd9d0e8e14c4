"""Evaluation samples from real measurements (Gavel, Pollux, DL2 profiles), in the
form of :class:`~marl_sched.interference.samples.Samples` (:func:`real_samples`)."""

from __future__ import annotations

import ast
import csv
import dataclasses
import json
from pathlib import Path

import numpy as np

from marl_sched.calibration.constants import GAVEL_COLOCATION_GPUS
from marl_sched.calibration.topologies import DL2_SERVER, POLLUX_SERVER
from marl_sched.catalogue import CALIBRATION, CATALOGUE, GPU_SPEED, MODEL_NAMES
from marl_sched.config import ServerTypeConfig, TopologyConfig
from marl_sched.errors import InputError
from marl_sched.interference.features import job_features, true_slowdown
from marl_sched.interference.samples import Samples, _samples_from_rows
from marl_sched.jobs import Job, Placement
from marl_sched.perf import PerformanceModel
from marl_sched.simulator import Simulator
from marl_sched.topology import GBPS, Topology

# --------------------------------------------------------------------------- real data

#: Gavel job types → the catalogue model they are mapped to (others are skipped)
GAVEL_MODELS = {
    "ResNet-18": "cifar10",
    "ResNet-50": "resnet-50",
    "Transformer": "seq2seq",
    "LM": "wlm",
    "Recommendation": "ncf",
}


def _one_rack(server: ServerTypeConfig, n_servers: int, gpu_sharing: int = 1) -> TopologyConfig:
    return TopologyConfig(
        subclusters=1,
        racks_per_subcluster=1,
        servers_per_rack=n_servers,
        server_types=(dataclasses.replace(server, count=n_servers),),
        rack_oversubscription=1.0,
        gpu_sharing=gpu_sharing,
    )


def _place(sim: Simulator, job: Job, placement: Placement) -> None:
    """Start ``job`` now at ``placement`` (its arrival must be the next event)."""
    got = sim.next_decision()
    if got is None or got.job_id != job.job_id:
        raise AssertionError("measurement replay got out of step")
    sim.apply(placement)


def _features_alone(topo_cfg: TopologyConfig, job: Job, placement: Placement):
    """(features, alone iteration time) of a job alone on a fresh topology."""
    topo = Topology.from_config(topo_cfg)
    perf = PerformanceModel(topo)
    sim = Simulator(topo, [job], perf=perf)
    _place(sim, job, placement)
    run = sim.running[job.job_id]
    view = sim.view()
    alone = perf.alone_iteration_time(CATALOGUE[job.model], run.layout, job.num_ps)
    return job_features(view, job, placement, run.layout), alone


def load_gavel_colocations(path: str | Path) -> Samples:
    """Gavel's measured same-GPU co-location pairs as slowdown samples: both jobs'
    workers on one GPU of a one-server cluster with ``gpu_sharing`` 2. Target: isolated /
    co-located throughput. Scale-factor-1 pairs of :data:`GAVEL_MODELS` only; ``[0, 0]``
    entries are skipped."""
    where = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{where}: cannot read Gavel throughputs: {exc}") from None
    rows, ys, models, groups, sims = [], [], [], [], []
    for gi, gpu in enumerate(GAVEL_COLOCATION_GPUS):
        if gpu not in data or gpu not in GPU_SPEED:
            continue
        server = ServerTypeConfig(
            name=gpu, count=1, gpu_type=gpu, sockets=1, groups_per_socket=1, gpus_per_group=1
        )
        topo_cfg = _one_rack(server, 1, gpu_sharing=2)
        topo = Topology.from_config(topo_cfg)
        perf = PerformanceModel(topo)
        for key, entry in sorted(data[gpu].items()):
            own_type, own_scale = ast.literal_eval(key)
            own_model = GAVEL_MODELS.get(own_type.split(" (")[0])
            iso = float(entry.get("null", 0.0))
            if own_scale != 1 or own_model is None or iso <= 0:
                continue
            for other_key, pair in sorted(entry.items()):
                if other_key == "null":
                    continue
                other_type, other_scale = ast.literal_eval(other_key)
                other_model = GAVEL_MODELS.get(other_type.split(" (")[0])
                if other_scale != 1 or other_model is None or float(pair[0]) <= 0:
                    continue
                a = Job(0, "a", own_model, 1, 0, 1e6, 0.0, 0.0)
                b = Job(1, "b", other_model, 1, 0, 1e6, 0.0, 0.0)
                sim = Simulator(topo, [a, b], perf=perf)
                _place(sim, a, Placement((0,), ()))
                _place(sim, b, Placement((0,), ()))
                view = sim.view()
                layout = sim.running[0].layout
                rows.append(job_features(view, a, Placement((0,), ()), layout))
                sims.append(true_slowdown(view, a, layout))
                ys.append(iso / float(pair[0]))
                models.append(CATALOGUE[own_model].index)
                groups.append(1_000_000 + gi)
    return _samples_from_rows(rows, ys, models, groups, "gavel", simulated=sims)


def _pollux_placement(digits: str) -> tuple[Placement, int]:
    """Workers by node from Pollux's placement string (``"13"`` = 1 GPU on one node,
    3 on another); Pollux's jobs are all-reduce jobs: no PS (``num_ps`` 0)."""
    per_node = [int(c) for c in digits]
    gps = POLLUX_SERVER.sockets * POLLUX_SERVER.groups_per_socket
    wg = [node * gps + i for node, k in enumerate(per_node) for i in range(k)]
    return Placement(tuple(wg), ()), 0


def load_pollux_placements(root: str | Path) -> Samples:
    """Pollux's step times by placement → the slowdown of spreading a job: each
    placement on more nodes than the fewest-node reference gives ``step_time / reference``.
    The prediction is multiplied by the simulator's alone-time ratio (``reference``
    column); all-reduce jobs on :data:`POLLUX_SERVER`-like servers."""
    root = Path(root)
    rows, ys, models, groups, refs, sims = [], [], [], [], [], []
    for mi, model_dir in enumerate(sorted(p for p in root.iterdir() if p.is_dir())):
        model = model_dir.name
        if model not in CATALOGUE:
            continue
        path = model_dir / "placements.csv"
        table: dict[tuple[int, int], list[tuple[str, float]]] = {}
        with open(path, newline="", encoding="utf-8") as fh:
            for line, rec in enumerate(csv.DictReader(fh), start=2):
                try:
                    digits = rec["placement"].strip()
                    bsz, step = int(rec["local_bsz"]), float(rec["step_time"])
                except (KeyError, ValueError, AttributeError) as exc:
                    raise InputError(f"{path}:{line}: cannot parse row: {exc}") from None
                if not digits.isdigit() or step <= 0:
                    continue
                k = sum(int(c) for c in digits)
                table.setdefault((bsz, k), []).append((digits, step))
        cache: dict[str, tuple[np.ndarray, float]] = {}

        def alone(digits: str, model=model, cache=cache) -> tuple[np.ndarray, float]:
            if digits not in cache:
                n_nodes = len(digits)
                placement, ps = _pollux_placement(digits)
                job = Job(0, "p", model, len(placement.worker_groups), ps, 1e6, 0.0, 0.0)
                cache[digits] = _features_alone(_one_rack(POLLUX_SERVER, n_nodes), job, placement)
            return cache[digits]

        for (_, k), runs in sorted(table.items()):
            fewest = min(len(d) for d, _ in runs)
            ref_digits, ref_step = min((s, d) for d, s in runs if len(d) == fewest)[::-1]
            if k < 2:
                continue
            _, t_ref = alone(ref_digits)
            for digits, step in runs:
                if len(digits) == fewest:
                    continue
                x, t = alone(digits)
                rows.append(x)
                ys.append(step / ref_step)
                refs.append(t / t_ref)
                sims.append(t / t_ref)
                models.append(CATALOGUE[model].index)
                groups.append(2_000_000 + mi)
    return _samples_from_rows(rows, ys, models, groups, "pollux", refs, sims)


#: DL2's testbed: one task per server; its NIC's *effective* bandwidth is the 92 MB/s
#: that DL2's own simulator uses (trace.py inter_bws median) and that
#: marl_sched.calibration fits to this very table (91.9 MB/s)
DL2_EFFECTIVE_NIC_BYTES_S = 92e6
_DL2_SERVER = dataclasses.replace(
    DL2_SERVER,
    nic_gbps=DL2_EFFECTIVE_NIC_BYTES_S / (GBPS * CALIBRATION.link_efficiency["nic"]),
)


def _dl2_spread(model: str, workers: int, ps: int, servers: int) -> tuple[np.ndarray, float]:
    """A DL2 job spread one task per server: workers first, then the PS."""
    first_ps = servers - ps  # one group per server: group id = server id
    placement = Placement(tuple(range(workers)), tuple(range(first_ps, servers)))
    job = Job(0, "d", model, workers, ps, 1e6, 0.0, 0.0)
    return _features_alone(_one_rack(_DL2_SERVER, servers), job, placement)


def load_dl2_speeds(path: str | Path) -> Samples:
    """DL2's PS/worker speed table → the slowdown of adding workers: target
    ``speed(1) / (w · speed(w))`` at the same ``p`` (all-zero rows skipped); the
    prediction is multiplied by the simulator's ratio (``reference``) with the job spread
    one task per server and local compute ``compute_s / w``."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{where}: cannot read DL2 speeds: {exc}") from None
    speed: dict[tuple[str, int, int], float] = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = ast.literal_eval(line.strip())
            model, _, _, p, w, speeds = rec[0], rec[1], rec[2], int(rec[3]), int(rec[4]), rec[5]
            speeds = [float(s) for s in speeds]
        except (ValueError, SyntaxError, IndexError, TypeError) as exc:
            raise InputError(f"{where}:{line_no}: cannot parse row: {exc}") from None
        if model not in CATALOGUE or not speeds or max(speeds) <= 0:
            continue
        speed[(model, p, w)] = float(np.mean(speeds))
    rows, ys, models, groups, refs = [], [], [], [], []
    for (model, p, w), s in sorted(speed.items()):
        base = speed.get((model, p, 1))
        if w < 2 or base is None:
            continue
        x, t = _dl2_spread(model, w, p, w + p)
        _, t1 = _dl2_spread(model, 1, p, w + p)
        compute = CATALOGUE[model].compute_s / GPU_SPEED[_DL2_SERVER.gpu_type]
        rows.append(x)
        ys.append(base / (w * s))
        refs.append((t - compute + compute / w) / t1)
        models.append(CATALOGUE[model].index)
        groups.append(3_000_000 + MODEL_NAMES.index(model))
    return _samples_from_rows(rows, ys, models, groups, "dl2", refs, list(refs))


def real_samples(data_root: str | Path) -> Samples:
    """All real evaluation samples from ``<data_root>/profiles`` (see the loaders)."""
    prof = Path(data_root) / "profiles"
    return Samples.concat(
        [
            load_gavel_colocations(prof / "gavel_physical_cluster_throughputs.json"),
            load_pollux_placements(prof / "pollux"),
            load_dl2_speeds(prof / "dl2_ps_worker_config_speed.txt"),
        ]
    )
