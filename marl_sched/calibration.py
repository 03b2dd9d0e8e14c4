"""Fit every constant of ``marl_sched/data/calibration.json`` from measured data.

Run::

    python -m marl_sched.calibration --shared ../shared/data \\
        --out marl_sched/data/calibration.json

Inputs (``<shared>/profiles``, see ``<shared>/PROVENANCE.md``):

- ``gavel_simulation_throughputs.json``: isolated throughputs of 26 job types on
  K80/P100/V100 (→ ``gpu_speed``), throughputs of job pairs sharing one GPU
  (→ the interference vectors), consolidated vs ``*_unconsolidated`` (a check);
- ``pollux/<model>/placements.csv`` + ``scalability.csv``: T4 step and sync times of
  six models over placements on 4-GPU AWS g4dn.12xlarge nodes (→ ``gpu_speed.t4``,
  ``link_efficiency``, ``sync_overhead_s``, Pollux ``compute_s`` / ``model_mb``);
- ``dl2_ps_worker_config_speed.txt``: MXNet PS/worker speeds and CPU use
  (→ ``cpu_worker``/``cpu_ps``; a check of PS-bound scaling);
- the DL2/Harmony published catalogue (model size, compute time) quoted in
  PROVENANCE.md (→ the eight DL2 models' ``model_mb`` and ``compute_s``).

Everything is pure numpy/stdlib and deterministic: ``fit_all(shared)`` run twice
gives the same dictionary, and ``tests/marl_sched/test_calibration.py`` checks that
the shipped file equals a fresh refit. The link fits and the checks go through the
real :class:`~marl_sched.perf.PerformanceModel` code path (``layout`` on a small
:class:`~marl_sched.topology.Topology`) so they fit the code, not a copy of its
formula. The whole derivation is written up in ``docs/performance-model.md``.
"""

from __future__ import annotations

import argparse
import ast
import csv
import dataclasses
import json
import math
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from marl_sched.catalogue import RESOURCES, ModelSpec
from marl_sched.config import ServerTypeConfig, TopologyConfig
from marl_sched.perf import LEVEL_RESOURCES, PS_PRESSURE_MASK, JobLayout, PerformanceModel
from marl_sched.topology import GBPS, LINK_KINDS, Topology

# --------------------------------------------------------------------------- constants

DL2_MODELS = (
    "resnet-50",
    "vgg-16",
    "resnext-110",
    "inception-bn",
    "seq2seq",
    "cnn-text-classification",
    "dssm",
    "wlm",
)
POLLUX_MODELS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")

#: DL2 / Harmony published catalogue (PROVENANCE.md): model size MB, compute s/iter
PUBLISHED = {
    "resnet-50": (102.2, 0.449),
    "vgg-16": (553.4, 0.535),
    "resnext-110": (6.92, 0.226),
    "inception-bn": (42.1, 0.815),
    "seq2seq": (36.5, 0.075),
    "cnn-text-classification": (24.0, 0.585),
    "dssm": (6.0, 0.567),
    "wlm": (19.2, 0.154),
}

#: parameter counts of the Pollux models' architectures (fp32 → 4 bytes each)
PARAM_COUNTS = {
    "bert": (110e6, "BERT-base 110M parameters"),
    "cifar10": (11.7e6, "ResNet-18 11.7M parameters"),
    "imagenet": (25.6e6, "ResNet-50 25.6M parameters"),
    "yolov3": (61.9e6, "YOLOv3 61.9M parameters"),
}
#: NeuMF of adaptdl's examples/NCF with its defaults (MovieLens-1M: 6,040 users,
#: 3,706 items, factor_num 32, 3 MLP layers): (6040+3706)·(32+128) embeddings +
#: 32,896 + 8,256 + 2,080 + 65 MLP/predict weights = 1.60M parameters. A cross-check
#: of the sync-fitted size only (the Pollux runs' data set is not recorded).
NCF_PARAMS = (6040 + 3706) * (32 + 128) + 32896 + 8256 + 2080 + 65

#: the batch a 1-GPU Pollux job starts with: the smallest validated batch size of
#: adaptdl osdi21-artifact ``simulator/traces/<model>/validation-*.csv`` (= the
#: simulator's ``init_batch_size``), capped at the largest profiled local batch
POLLUX_INIT_BATCH = {
    "bert": 12,
    "cifar10": 256,
    "deepspeech2": 160,
    "imagenet": 200,
    "ncf": 256,
    "yolov3": 8,
}

#: Pollux model → the same architecture among Gavel's job types (for the T4 speed)
POLLUX_GAVEL_ARCH = {"imagenet": "ResNet-50", "cifar10": "ResNet-18"}

#: Pollux model → DL2 model whose measured CPU use it borrows (same family)
POLLUX_CPU_FROM = {
    "bert": "seq2seq",  # attention NLP model
    "cifar10": "resnext-110",  # CIFAR-10 CNN
    "deepspeech2": "wlm",  # recurrent sequence model
    "imagenet": "resnet-50",  # same architecture
    "ncf": "dssm",  # embedding-based ranking model
    "yolov3": "resnet-50",  # ImageNet-scale CNN backbone
}

#: catalogue model → nearest Gavel job type (interference vectors come from it)
GAVEL_MAP = {
    "resnet-50": "ResNet-50 (batch size 32)",  # same net, DL2 batch 32
    "vgg-16": "ResNet-50 (batch size 32)",  # ImageNet CNN, batch 32
    "resnext-110": "ResNet-18 (batch size 128)",  # CIFAR ResNet, DL2 batch 128
    "inception-bn": "ResNet-50 (batch size 128)",  # ImageNet CNN, DL2 batch 128
    "seq2seq": "Transformer (batch size 64)",  # translation, DL2 batch 64
    "cnn-text-classification": "A3C",  # Harmony: CTC is CPU-heavy; A3C is Gavel's CPU-bound type
    "dssm": "Recommendation (batch size 512)",  # embedding ranking model
    "wlm": "LM (batch size 80)",  # word LM, largest LM batch
    "bert": "Transformer (batch size 16)",  # Pollux local batch 12
    "cifar10": "ResNet-18 (batch size 256)",  # Pollux local batch 256
    "deepspeech2": "LM (batch size 20)",  # recurrent model
    "imagenet": "ResNet-50 (batch size 128)",  # Pollux local batch 200
    "ncf": "Recommendation (batch size 512)",  # Pollux local batch 256
    "yolov3": "ResNet-50 (batch size 16)",  # detection CNN, local batch 8
}

#: resource profiles (cpu, pcie, membw, disk, net) a priori, by Gavel job family:
#: Harmony — CNNs on images are data-loading (CPU decode + disk) heavy, AlexNet
#: disk-heavy, VGG-16 network-heavy, CTC CPU-heavy; language models press on memory
#: bandwidth; A3C simulates its environment on the CPU; recommendation models do
#: embedding look-ups (memory bandwidth, host↔GPU copies).
FAMILY_PRIOR = {
    "ResNet-18": (0.7, 0.4, 0.4, 0.4, 0.1),
    "ResNet-50": (0.8, 0.4, 0.5, 0.8, 0.1),
    "CycleGAN": (0.6, 0.4, 0.5, 0.5, 0.1),
    "Transformer": (0.3, 0.3, 0.8, 0.1, 0.1),
    "LM": (0.2, 0.3, 0.9, 0.1, 0.1),
    "Recommendation": (0.4, 0.5, 0.8, 0.2, 0.1),
    "A3C": (1.0, 0.2, 0.3, 0.1, 0.1),
}

#: AWS g4dn.12xlarge as a topology: 4 T4 on one PCIe 3.0 host, 50 Gbit/s NIC.
#: One GPU group per GPU, so a placement's workers are in distinct groups.
POLLUX_PCIE_GBPS = 128.0
POLLUX_NIC_GBPS = 50.0
POLLUX_MAX_NODES = 16  # scalability.csv goes up to 16 nodes

#: ridge weight pulling the Gavel factors towards their priors (keeps the columns'
#: meaning: same-GPU pairs alone cannot tell the resources apart). 0.05 fits to MRE
#: 0.07 but scrambles the columns (median cosine to the prior 0.4); 1.0 keeps them
#: (cosine 0.85-0.9) at MRE 0.16; 5 is the prior again (MRE 0.22, cosine 0.99).
ANLS_RIDGE = 1.0
ANLS_ITERS = 300

#: interference targets: the median one-neighbour slowdown at the server level we
#: aim for, and the ceiling of a fully packed 8-GPU server (7 workers of the
#: heaviest job around the median victim); the smaller λ of the two wins
TARGET_SERVER_NEIGHBOUR = 1.10
PACKED_CEILING = 2.0
#: per-unit coupling of the socket and group levels relative to the server level
#: (no data separates them; closer neighbours already hurt more because they share
#: more resources: a same-socket one adds caches/membw, a same-group one PCIe)
SOCKET_TO_SERVER = 1.0
GROUP_TO_SERVER = 1.0

SIG_DIGITS = 6


def _round(x: float) -> float:
    return float(f"{x:.{SIG_DIGITS}g}")


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class PolluxRow:
    """One measured configuration: placement digits, local batch, step and sync s."""

    placement: str
    local_bsz: int
    step_time: float
    sync_time: float

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(int(c) for c in self.placement)


@dataclass(frozen=True)
class PolluxProfile:
    model: str
    placements: tuple[PolluxRow, ...]
    #: scalability rows as placements (replicas dealt evenly over the nodes)
    scalability: tuple[PolluxRow, ...]


@dataclass(frozen=True)
class DL2Row:
    model: str
    total_batch: int
    num_ps: int
    num_workers: int
    speeds: tuple[float, ...]
    ps_cpu: tuple[float, ...]
    worker_cpu: tuple[float, ...]


def profiles_dir(shared: Path) -> Path:
    shared = Path(shared)
    return shared / "profiles" if (shared / "profiles").is_dir() else shared


def load_gavel(shared: Path) -> dict[str, dict[tuple[str, int], dict[Any, Any]]]:
    """``{gpu: {(job_type, scale): {None: isolated, (type, scale): [own, other]}}}``."""
    path = profiles_dir(shared) / "gavel_simulation_throughputs.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, dict[tuple[str, int], dict[Any, Any]]] = {}
    for gpu, table in raw.items():
        parsed: dict[tuple[str, int], dict[Any, Any]] = {}
        for key, entries in table.items():
            job = ast.literal_eval(key)
            row: dict[Any, Any] = {}
            for other, value in entries.items():
                row[None if other == "null" else ast.literal_eval(other)] = value
            parsed[(str(job[0]), int(job[1]))] = row
        out[gpu] = parsed
    return out


def _even_placement(nodes: int, replicas: int) -> str:
    base, extra = divmod(replicas, nodes)
    return "".join(str(base + (1 if i < extra else 0)) for i in range(nodes))


def load_pollux(shared: Path) -> dict[str, PolluxProfile]:
    """Placement and scalability profiles of the six Pollux models."""
    root = profiles_dir(shared) / "pollux"
    out = {}
    for model in POLLUX_MODELS:
        with open(root / model / "placements.csv", newline="", encoding="utf-8") as f:
            placements = tuple(
                PolluxRow(
                    r["placement"].strip(),
                    int(r["local_bsz"]),
                    float(r["step_time"]),
                    float(r["sync_time"]),
                )
                for r in csv.DictReader(f)
            )
        with open(root / model / "scalability.csv", newline="", encoding="utf-8") as f:
            scal = []
            for r in csv.DictReader(f):
                nodes, replicas = int(r["num_nodes"]), int(r["num_replicas"])
                if replicas > 9 * nodes:  # not expressible as digits; none in the data
                    continue
                scal.append(
                    PolluxRow(
                        _even_placement(nodes, replicas),
                        int(r["local_bsz"]),
                        float(r["step_time"]),
                        float(r["sync_time"]),
                    )
                )
        out[model] = PolluxProfile(model, placements, tuple(scal))
    return out


def load_dl2(shared: Path) -> tuple[list[DL2Row], int]:
    """DL2's PS/worker measurements; rows whose speeds are all zero (failed runs) or
    partly zero (a worker that never ran) are skipped. Returns (rows, skipped)."""
    path = profiles_dir(shared) / "dl2_ps_worker_config_speed.txt"
    rows, skipped = [], 0
    # the last line has no newline: split on lines, not on "\n"-terminated records
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        model, _mode, batch, n_ps, n_w, speeds, ps_cpu, w_cpu = ast.literal_eval(line.strip())
        if any(float(s) <= 0.0 for s in speeds):
            skipped += 1
            continue
        rows.append(
            DL2Row(
                str(model),
                int(batch),
                int(n_ps),
                int(n_w),
                tuple(map(float, speeds)),
                tuple(map(float, ps_cpu)),
                tuple(map(float, w_cpu)),
            )
        )
    return rows, skipped


# --------------------------------------------------------------------------- helpers


def geomean(values: Iterable[float]) -> float:
    v = np.asarray(list(values), dtype=np.float64)
    return float(np.exp(np.mean(np.log(v))))


def _minimize_log_scalar(
    loss: Callable[[float], float], lo: float = 1e-3, hi: float = 1e3, grid: int = 400
) -> float:
    """Minimise ``loss(x)`` over ``x > 0``: a log-spaced grid, then golden section."""
    xs = np.exp(np.linspace(math.log(lo), math.log(hi), grid))
    values = [loss(float(x)) for x in xs]
    k = int(np.argmin(values))
    a = math.log(xs[max(k - 1, 0)])
    b = math.log(xs[min(k + 1, grid - 1)])
    g = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = loss(math.exp(c)), loss(math.exp(d))
    for _ in range(80):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = loss(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = loss(math.exp(d))
    return math.exp((a + b) / 2.0)


def _nnls(a: np.ndarray, b: np.ndarray, max_iter: int = 200) -> np.ndarray:
    """Non-negative least squares ``min ||a x - b||, x >= 0`` (Lawson–Hanson)."""
    n = a.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    w = a.T @ (b - a @ x)
    tol = 1e-12 * max(1.0, float(np.abs(a).max()) * float(np.abs(b).max()))
    for _ in range(max_iter):
        if passive.all() or (w[~passive] <= tol).all():
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        for _ in range(max_iter):
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            mask = passive & (z <= 0)
            alpha = float(np.min(x[mask] / (x[mask] - z[mask])))
            x = x + alpha * (z - x)
            passive &= x > tol
            x[~passive] = 0.0
        w = a.T @ (b - a @ x)
    return x


def relative_errors(pred: Sequence[float], meas: Sequence[float]) -> np.ndarray:
    p, m = np.asarray(pred, dtype=np.float64), np.asarray(meas, dtype=np.float64)
    return np.abs(p - m) / m


# --------------------------------------------------------------------------- GPU speed


def fit_gpu_speed(
    gavel: dict[str, dict[tuple[str, int], dict[Any, Any]]], pollux: dict[str, PolluxProfile]
) -> tuple[dict[str, float], dict[str, Any]]:
    """Relative GPU speeds (V100 = 1) and the ratios behind them."""
    v100 = {job: row[None] for (job, scale), row in gavel["v100"].items() if scale == 1}
    speeds = {"v100": 1.0}
    info: dict[str, Any] = {}
    for gpu in ("p100", "k80"):
        ratios = [
            row[None] / v100[job]
            for (job, scale), row in gavel[gpu].items()
            if scale == 1 and v100.get(job, 0) > 0 and row[None] > 0
        ]
        speeds[gpu] = geomean(ratios)
        info[gpu] = {"n": len(ratios), "min": min(ratios), "max": max(ratios)}
    t4_ratios = []
    for model, arch in POLLUX_GAVEL_ARCH.items():
        single = sorted(
            (r.local_bsz, r.local_bsz / r.step_time)
            for r in pollux[model].placements
            if r.placement == "1"
        )
        bsz = np.log([b for b, _ in single])
        thr = np.log([t for _, t in single])
        for job, tput in sorted(v100.items()):
            if not job.startswith(arch + " (batch size "):
                continue
            b = int(job.split("batch size ")[1].rstrip(")"))
            if not single[0][0] <= b <= single[-1][0]:
                continue  # no comparable Pollux batch: no extrapolation
            t4 = math.exp(float(np.interp(math.log(b), bsz, thr)))  # samples/s
            t4_ratios.append((model, b, t4 / (tput * b)))
    speeds["t4"] = geomean(r for _, _, r in t4_ratios)
    info["t4"] = t4_ratios
    return speeds, info


# --------------------------------------------------------------------------- topologies


#: an AWS g4dn.12xlarge, where Pollux measured: 4 T4s, each its own GPU group
POLLUX_SERVER = ServerTypeConfig(
    name="g4dn.12xlarge",
    count=1,
    gpu_type="t4",
    sockets=1,
    groups_per_socket=4,
    gpus_per_group=1,
    cpu_cores=48,
    memory_gb=192.0,
    nic_gbps=POLLUX_NIC_GBPS,
)


def pollux_topology(nodes: int = POLLUX_MAX_NODES) -> Topology:
    """``nodes`` g4dn.12xlarge servers in one rack, one GPU group per T4."""
    cfg = TopologyConfig(
        subclusters=1,
        racks_per_subcluster=1,
        servers_per_rack=nodes,
        server_types=(dataclasses.replace(POLLUX_SERVER, count=nodes),),
        pcie_gbps=POLLUX_PCIE_GBPS,
    )
    return Topology.from_config(cfg)


def pollux_groups(topology: Topology, placement: str) -> list[int]:
    """Worker GPU groups of a Pollux placement (digit i = GPUs on node i)."""
    groups: list[int] = []
    for node, digit in enumerate(placement):
        first = int(topology.server_groups_start[node])
        groups += [first + k for k in range(int(digit))]
    return groups


#: DL2's testbed as the calibration models it: one task per server, one GPU each
DL2_SERVER = ServerTypeConfig(
    name="dl2",
    count=1,
    gpu_type="v100",
    sockets=1,
    groups_per_socket=1,
    gpus_per_group=1,
    cpu_cores=8,
    memory_gb=48.0,
)


def dl2_topology(nodes: int, nic_gbps: float) -> Topology:
    """One task per server (1 GPU each), for the DL2 PS/worker check."""
    cfg = TopologyConfig(
        subclusters=1,
        racks_per_subcluster=1,
        servers_per_rack=nodes,
        server_types=(dataclasses.replace(DL2_SERVER, count=nodes, nic_gbps=nic_gbps),),
        rack_oversubscription=1.0,
    )
    return Topology.from_config(cfg)


def unit_spec(model_mb: float = 1.0, compute_s: float = 0.0) -> ModelSpec:
    """A neutral model for byte accounting."""
    return ModelSpec(
        name="unit",
        index=0,
        compute_s=compute_s,
        model_mb=model_mb,
        cpu_worker=0.0,
        cpu_ps=0.0,
        mem_gb=0.0,
        pressure=np.zeros(len(RESOURCES)),
        sensitivity=np.zeros(len(RESOURCES)),
        source="calibration",
    )


def kind_seconds(topology: Topology, layout: JobLayout) -> dict[str, float]:
    """Per link kind, the largest ``B_l / nominal_l`` (seconds at efficiency 1)."""
    out: dict[str, float] = {}
    for link, nbytes in layout.links.items():
        kind = LINK_KINDS[int(topology.link_kind[link])]
        kind = "nic" if kind in ("rack_uplink", "sc_uplink") else kind
        t = nbytes / (float(topology.link_nominal_gbps[link]) * GBPS)
        out[kind] = max(out.get(kind, 0.0), t)
    return out


def comm_time_at(kind_s: dict[str, float], efficiency: dict[str, float]) -> float:
    """``C = max_l B_l / bw_l`` (one job on its links) at given link efficiencies;
    identical to :meth:`PerformanceModel.comm_time` with ``n_l = 1``."""
    return max((t / efficiency[k] for k, t in kind_s.items()), default=0.0)


# --------------------------------------------------------------------------- Pollux links


@dataclass(frozen=True)
class SyncPoint:
    """A measured communication time and its per-MB byte accounting under perf.py."""

    model: str
    placement: str
    measured: float
    kind_s: dict[str, float]  # seconds per MB of model at efficiency 1, by link kind

    @property
    def multi_node(self) -> bool:
        return len(self.placement) > 1


def sync_statistic(rows: Iterable[PolluxRow]) -> dict[str, float]:
    """Per placement, the sync time at the smallest profiled local batch.

    The smallest batch leaves the least backward compute to hide all-reduce behind;
    Pollux's exposed sync shrinks with batch (cifar10 on ``11``: 0.06 s at batch 32,
    0.003 s at 1024) and perf.py has no overlap term, so this is the figure closest
    to the raw transfer time.
    """
    best: dict[str, tuple[int, float]] = {}
    for r in rows:
        if r.placement not in best or r.local_bsz < best[r.placement][0]:
            best[r.placement] = (r.local_bsz, r.sync_time)
    return {p: s for p, (_, s) in best.items()}


def pollux_sync_points(pollux: dict[str, PolluxProfile]) -> list[SyncPoint]:
    """Every (model, placement with ≥ 2 GPUs) with its perf.py byte accounting.

    Equivalence: a ring all-reduce over ``n`` GPUs is modelled as ``p = n`` PS
    shards co-located one per worker. Under perf.py each (shard, worker) pair moves
    ``2M/n``; a worker's PCIe link carries its ``n`` pairs = ``2M``; a server with
    ``k`` of the ``n`` GPUs has ``2k(n-k)`` remote pairs on its NIC = ``4M·k(n-k)/n``.
    """
    topology = pollux_topology()
    perf = PerformanceModel(topology)
    spec = unit_spec()
    cache: dict[str, dict[str, float]] = {}
    points = []
    for model in POLLUX_MODELS:
        prof = pollux[model]
        stats = sync_statistic(prof.placements)
        scal = sync_statistic(prof.scalability)
        merged = dict(stats)
        merged.update({k: v for k, v in scal.items() if k not in stats})
        for placement, measured in merged.items():
            if sum(int(c) for c in placement) < 2:
                continue
            if placement not in cache:
                groups = pollux_groups(topology, placement)
                layout = perf.layout(spec, groups, groups)
                cache[placement] = kind_seconds(topology, layout)
            points.append(SyncPoint(model, placement, measured, cache[placement]))
    return points


def _log_loss(
    points: Sequence[SyncPoint], mb: dict[str, float], eff: dict[str, float], overhead: float
) -> float:
    err = [
        math.log((comm_time_at(p.kind_s, eff) * mb[p.model] + overhead) / p.measured) ** 2
        for p in points
    ]
    return float(np.mean(err))


def fit_links(
    pollux: dict[str, PolluxProfile], overhead: float
) -> tuple[dict[str, float], dict[str, float], dict[str, Any]]:
    """PCIe and NIC efficiencies (and model sizes of the uncounted models).

    PCIe from single-node placements ``2``/``3``/``4``, NIC from all multi-node
    placements and scalability rows, both on the four models with a known parameter
    count; then ``model_mb`` of every model refitted from its multi-node rows at the
    fitted efficiencies (the only size estimate for deepspeech2 and ncf).
    """
    points = pollux_sync_points(pollux)
    known = {m: n * 4 / 1e6 for m, (n, _) in PARAM_COUNTS.items()}
    single = [p for p in points if not p.multi_node and p.model in known]
    multi = [p for p in points if p.multi_node and p.model in known]
    pcie = _minimize_log_scalar(
        lambda e: _log_loss(single, known, {"pcie": e, "nic": 1e9}, overhead)
    )
    nic = _minimize_log_scalar(
        lambda e: _log_loss(multi, known, {"pcie": pcie, "nic": e}, overhead)
    )
    eff = {"pcie": pcie, "nic": nic}
    fitted_mb = {}
    for model in POLLUX_MODELS:
        rows = [p for p in points if p.multi_node and p.model == model]
        fitted_mb[model] = _minimize_log_scalar(
            lambda m, rows=rows, model=model: _log_loss(rows, {model: m}, eff, overhead),
            lo=0.1,
            hi=1e4,
        )
    info = {
        "n_single": len(single),
        "n_multi": len(multi),
        "fitted_mb": fitted_mb,
        "param_mb": known,
    }
    return eff, fitted_mb, info


def pollux_model_mb(fitted_mb: dict[str, float]) -> dict[str, tuple[float, str]]:
    """Shipped sizes: fitted to the multi-node sync times (what perf.py's NIC term
    needs), with the parameter-count size quoted beside it where known."""
    out = {}
    for model in POLLUX_MODELS:
        fit = f"fitted to Pollux multi-node sync times ({fitted_mb[model]:.1f} MB"
        if model in PARAM_COUNTS:
            n, what = PARAM_COUNTS[model]
            out[model] = (fitted_mb[model], f"{fit}; {what} x 4 B = {n * 4 / 1e6:.1f} MB)")
        elif model == "ncf":
            out[model] = (
                fitted_mb[model],
                f"{fit}; adaptdl's NeuMF on MovieLens-1M has {NCF_PARAMS / 1e6:.2f}M "
                f"parameters = {NCF_PARAMS * 4 / 1e6:.2f} MB)",
            )
        else:
            out[model] = (
                fitted_mb[model],
                f"{fit}; no parameter count recorded for the Pollux DeepSpeech2 run)",
            )
    return out


# --------------------------------------------------------------------------- Pollux compute


def pollux_compute(pollux: dict[str, PolluxProfile], t4: float) -> dict[str, tuple[float, int]]:
    """V100 seconds per iteration at the 1-GPU starting batch (see POLLUX_INIT_BATCH)."""
    out = {}
    for model in POLLUX_MODELS:
        single = [r for r in pollux[model].placements if r.placement == "1"]
        cap = min(POLLUX_INIT_BATCH[model], max(r.local_bsz for r in single))
        row = min(single, key=lambda r: (abs(math.log(r.local_bsz / cap)), r.local_bsz))
        out[model] = ((row.step_time - row.sync_time) * t4, row.local_bsz)
    return out


def sync_overhead(pollux: dict[str, PolluxProfile]) -> tuple[float, dict[str, float]]:
    """Median over models of the median single-GPU sync time (nothing to send)."""
    per_model = {
        m: statistics.median(r.sync_time for r in p.placements if r.placement == "1")
        for m, p in pollux.items()
    }
    return statistics.median(per_model.values()), per_model


# --------------------------------------------------------------------------- DL2


def dl2_cpu(rows: Sequence[DL2Row]) -> dict[str, tuple[float, float, int]]:
    """Median per-task CPU cores of workers and PS over each model's rows."""
    out = {}
    for model in DL2_MODELS:
        mine = [r for r in rows if r.model == model]
        w = [c for r in mine for c in r.worker_cpu]
        p = [c for r in mine for c in r.ps_cpu]
        out[model] = (statistics.median(w), statistics.median(p), len(mine))
    return out


@dataclass(frozen=True)
class DL2Point:
    model: str
    num_ps: int
    num_workers: int
    measured: float  # per-worker speed relative to the 1-worker run with the same PS


def dl2_points(rows: Sequence[DL2Row]) -> list[DL2Point]:
    """Relative per-worker speed ``speed(w)/speed(1)`` at a fixed PS count."""
    mean_speed = {(r.model, r.num_ps, r.num_workers): float(np.mean(r.speeds)) for r in rows}
    out = []
    for (model, ps, w), s in sorted(mean_speed.items()):
        base = mean_speed.get((model, ps, 1))
        if w > 1 and base:
            out.append(DL2Point(model, ps, w, s / base))
    return out


def dl2_layout(perf: PerformanceModel, spec: ModelSpec, workers: int, ps: int) -> JobLayout:
    """Workers on servers ``0..w-1``, PS shards on the next ``p`` servers."""
    return perf.layout(spec, list(range(workers)), list(range(workers, workers + ps)))


def dl2_relative_speed(
    comm_s_per_unit_bw: Callable[[int, int], float],
    compute_s: float,
    overhead: float,
    workers: int,
    ps: int,
) -> float:
    """Model's per-worker speed at ``w`` relative to ``w = 1``.

    DL2 splits a fixed global batch (``tot_batch``) over the workers and reports each
    worker's samples/s, so per-worker speed = ``(B/w) / T(w)`` with the local compute
    ``compute_s / w``: relative speed ``T(1) / (w · T(w))``.
    """

    def t(w: int) -> float:
        return compute_s / w + comm_s_per_unit_bw(w, ps) + overhead

    return t(1) / (workers * t(workers))


def fit_dl2_bandwidth(
    rows: Sequence[DL2Row], model_mb: dict[str, float], compute: dict[str, float], overhead: float
) -> tuple[float, np.ndarray, list[DL2Point]]:
    """The one effective NIC bandwidth (bytes/s) of DL2's testbed that best explains
    its PS-bound scaling, with per-point relative errors at that bandwidth."""
    points = dl2_points(rows)
    nodes = max(p.num_workers + p.num_ps for p in points)
    topology = dl2_topology(nodes, nic_gbps=1.0)
    perf = PerformanceModel(topology)
    spec = unit_spec()
    cache: dict[tuple[int, int], float] = {}

    def bytes_over_nominal(w: int, p: int) -> float:
        # seconds per MB at a unit-efficiency 1 Gbit/s NIC (PCIe is never the bound)
        if (w, p) not in cache:
            cache[(w, p)] = kind_seconds(topology, dl2_layout(perf, spec, w, p))["nic"]
        return cache[(w, p)]

    def preds(bw: float) -> np.ndarray:
        # bw in bytes/s; bytes_over_nominal is in s at 1 Gbit/s = GBPS bytes/s
        return np.array(
            [
                dl2_relative_speed(
                    lambda w, p, m=pt.model: bytes_over_nominal(w, p) * model_mb[m] * GBPS / bw,
                    compute[pt.model],
                    overhead,
                    pt.num_workers,
                    pt.num_ps,
                )
                for pt in points
            ]
        )

    measured = np.array([p.measured for p in points])

    def loss(bw: float) -> float:
        return float(np.mean(np.log(preds(bw) / measured) ** 2))

    bw = _minimize_log_scalar(loss, lo=1e6, hi=1e11)
    return bw, relative_errors(preds(bw), measured), points


# --------------------------------------------------------------------------- Gavel


def gavel_pairs(
    gavel: dict[str, dict[tuple[str, int], dict[Any, Any]]], gpu: str = "v100"
) -> tuple[list[str], list[tuple[int, int, float]]]:
    """Job types and measured same-GPU slowdowns ``(i, j, isolated_i / shared_i)``."""
    table = {job: row for (job, scale), row in gavel[gpu].items() if scale == 1}
    types = sorted(table)
    index = {t: k for k, t in enumerate(types)}
    pairs = []
    for job in types:
        iso = table[job][None]
        for other, value in table[job].items():
            if other is None or other[1] != 1 or other[0] not in index:
                continue
            own = float(value[0])
            if own <= 0.0:  # [0, 0]: the pair cannot share a GPU
                continue
            pairs.append((index[job], index[other[0]], iso / own))
    return types, pairs


def _family(job: str) -> str:
    return job.split(" (")[0]


def fit_gavel_interference(
    gavel: dict[str, dict[tuple[str, int], dict[Any, Any]]],
) -> tuple[list[str], np.ndarray, np.ndarray, dict[str, Any]]:
    """Rank-5 non-negative fit ``slowdown_ij - 1 ≈ s_i · p_j`` by alternating NNLS.

    Rows are weighted by ``1/slowdown_ij`` (relative error), and a ridge of weight
    ``ANLS_RIDGE`` pulls each factor towards its family prior so the five columns keep
    their resource meaning. Returns types, S, P (rows = types), and fit errors.
    """
    types, pairs = gavel_pairs(gavel)
    n, r = len(types), len(RESOURCES)
    prior = np.array([FAMILY_PRIOR[_family(t)] for t in types], dtype=np.float64)
    ii = np.array([i for i, _, _ in pairs])
    jj = np.array([j for _, j, _ in pairs])
    slow = np.array([s for _, _, s in pairs])
    y = slow - 1.0
    wt = 1.0 / slow
    # scale the prior so that its products match the data's median
    scale = math.sqrt(float(np.median(y)) / float(np.median(np.sum(prior[ii] * prior[jj], 1))))
    s0 = p0 = prior * scale
    s_mat, p_mat = s0.copy(), p0.copy()
    mu = math.sqrt(ANLS_RIDGE)
    eye = np.eye(r)
    for _ in range(ANLS_ITERS):
        old = (s_mat.copy(), p_mat.copy())
        for k in range(n):
            m = ii == k
            a = np.vstack([p_mat[jj[m]] * wt[m, None], mu * eye])
            s_mat[k] = _nnls(a, np.concatenate([y[m] * wt[m], mu * s0[k]]))
        for k in range(n):
            m = jj == k
            a = np.vstack([s_mat[ii[m]] * wt[m, None], mu * eye])
            p_mat[k] = _nnls(a, np.concatenate([y[m] * wt[m], mu * p0[k]]))
        if max(np.abs(s_mat - old[0]).max(), np.abs(p_mat - old[1]).max()) < 1e-10:
            break
    pred = 1.0 + np.sum(s_mat[ii] * p_mat[jj], axis=1)
    rel = relative_errors(pred, slow)
    info = {
        "n_pairs": len(pairs),
        "mre": float(rel.mean()),
        "median_re": float(np.median(rel)),
        "measured_median": float(np.median(slow)),
        "prior_mre": float(relative_errors(1.0 + np.sum(s0[ii] * p0[jj], 1), slow).mean()),
    }
    return types, s_mat, p_mat, info


def gavel_prediction(types: list[str], s_mat: np.ndarray, p_mat: np.ndarray, gavel) -> tuple:
    """Predicted and measured slowdowns of all Gavel pairs under given factors."""
    types2, pairs = gavel_pairs(gavel)
    assert types2 == types
    pred = np.array([1.0 + float(s_mat[i] @ p_mat[j]) for i, j, _ in pairs])
    meas = np.array([s for _, _, s in pairs])
    return pred, meas


def net_intensity(model_mb: float, compute_s: float) -> float:
    """PS traffic per second of compute, MB/s (the network-pressure driver)."""
    return model_mb / compute_s


def catalogue_vectors(
    types: list[str],
    s_mat: np.ndarray,
    p_mat: np.ndarray,
    sizes: dict[str, tuple[float, float]],
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Pressure and sensitivity of each catalogue model from its Gavel type.

    The ``net`` column gets no signal from same-GPU pairs, so it is set from the
    model's communication intensity (MB per compute-second), as a square-root ratio
    to the catalogue median (clipped to [0.25, 3]) times the median fitted entry.
    """
    net = RESOURCES.index("net")
    intens = {m: net_intensity(mb, c) for m, (mb, c) in sizes.items()}
    mid = statistics.median(intens.values())
    other = [k for k in range(len(RESOURCES)) if k != net]
    ref_p = float(np.median(p_mat[:, other]))
    ref_s = float(np.median(s_mat[:, other]))
    out = {}
    for model, job in GAVEL_MAP.items():
        k = types.index(job)
        ratio = min(max(math.sqrt(intens[model] / mid), 0.25), 3.0)
        p = p_mat[k].copy()
        s = s_mat[k].copy()
        p[net] = ref_p * ratio
        s[net] = ref_s * ratio
        out[model] = (p, s)
    return out


# --------------------------------------------------------------------------- λ_L


def neighbour_slowdown(
    coupling: np.ndarray, sens: np.ndarray, press: np.ndarray, level: str
) -> float:
    """Slowdown of a worker from one other job's worker at ``level``.

    A neighbour in the same group also shares the socket and server; one on the same
    socket also shares the server (exactly as perf.py sums the three levels).
    """
    levels = {"server": [2], "socket": [1, 2], "group": [0, 1, 2]}[level]
    w = sum(coupling[k] * LEVEL_RESOURCES[k] for k in levels)
    return 1.0 + float(np.sum(sens * w * press))


def packed_server_slowdown(
    coupling: np.ndarray, sens: np.ndarray, press: np.ndarray, with_ps: bool = False
) -> float:
    """A worker on a full default 8-GPU server (2 sockets × 2 groups × 2 GPUs): 1
    neighbour in its group, 3 on its socket, 7 on the server, all workers of other
    jobs of one model; ``with_ps`` puts each neighbour's PS on the server too."""
    extra = press * PS_PRESSURE_MASK if with_ps else np.zeros_like(press)
    group = coupling[0] * LEVEL_RESOURCES[0] * press
    socket = coupling[1] * LEVEL_RESOURCES[1] * 3 * (press + extra)
    server = coupling[2] * LEVEL_RESOURCES[2] * 7 * (press + extra)
    return 1.0 + float(np.sum(sens * (group + socket + server)))


def coupling_stats(
    coupling: np.ndarray, vectors: dict[str, tuple[np.ndarray, np.ndarray]]
) -> dict[str, float]:
    """Slowdowns the coupling gives over all (victim, aggressor) catalogue pairs."""
    names = sorted(vectors)
    pairs = [(vectors[a][1], vectors[b][0]) for a in names for b in names if a != b]
    packed = np.array(
        [
            [packed_server_slowdown(coupling, vectors[a][1], vectors[b][0]) for a in names]
            for b in names
        ]
    )  # rows: aggressor, columns: victim
    packed_ps = [
        packed_server_slowdown(coupling, vectors[a][1], vectors[b][0], with_ps=True)
        for a in names
        for b in names
    ]
    heavy = int(np.argmax(np.median(packed, axis=1)))
    out = {
        f"median_{level}_neighbour": statistics.median(
            neighbour_slowdown(coupling, s, p, level) for s, p in pairs
        )
        for level in ("server", "socket", "group")
    }
    out.update(
        {
            "max_server_neighbour": max(
                neighbour_slowdown(coupling, s, p, "server") for s, p in pairs
            ),
            "median_packed_server": float(np.median(packed)),
            "heaviest_packed_server": float(np.median(packed[heavy])),
            "max_packed_server": float(packed.max()),
            "max_packed_server_with_ps": max(packed_ps),
        }
    )
    out["heaviest"] = names[heavy]  # type: ignore[assignment]
    return out


def fit_level_coupling(
    vectors: dict[str, tuple[np.ndarray, np.ndarray]],
) -> tuple[dict[str, float], dict[str, Any]]:
    """λ_group, λ_socket, λ_server scaled down from the same-GPU (Gavel) level 1.

    With ratios ``GROUP_TO_SERVER : SOCKET_TO_SERVER : 1``, λ is the smaller of
    (a) the λ giving a median one-neighbour server-level slowdown of
    ``TARGET_SERVER_NEIGHBOUR`` over all ordered catalogue pairs and (b) the λ at
    which 7 workers of the heaviest model on a full 8-GPU server slow the median
    victim by ``PACKED_CEILING``. Interference is linear in λ, so both are exact.
    """
    ratio = np.array([GROUP_TO_SERVER, SOCKET_TO_SERVER, 1.0])
    unit = coupling_stats(ratio, vectors)
    lam_target = (TARGET_SERVER_NEIGHBOUR - 1.0) / (unit["median_server_neighbour"] - 1.0)
    lam_cap = (PACKED_CEILING - 1.0) / (unit["heaviest_packed_server"] - 1.0)
    lam = min(lam_target, lam_cap)
    c = lam * ratio
    stats = coupling_stats(c, vectors)
    stats["binding"] = "packed-server ceiling" if lam_cap < lam_target else "neighbour target"
    return {"group": float(c[0]), "socket": float(c[1]), "server": float(c[2])}, stats


# --------------------------------------------------------------------------- Gavel check


def gavel_consolidation(
    gavel: dict[str, dict[tuple[str, int], dict[Any, Any]]],
) -> list[tuple[str, int, float]]:
    """Measured consolidated/unconsolidated throughput ratios on V100 for ResNet-18/50
    (the job types with a known parameter count), scale factors 2, 4, 8."""
    out = []
    for (job, scale), row in sorted(gavel["v100"].items()):
        if scale == 1 or not job.startswith(("ResNet-18 ", "ResNet-50 ")):
            continue
        un = gavel["v100_unconsolidated"].get((job, scale), {}).get(None, 0.0)
        if row[None] > 0 and un > 0:
            out.append((job, scale, row[None] / un))
    return out


def gavel_consolidation_model(
    gavel, efficiency: dict[str, float], overhead: float
) -> list[tuple[str, int, float]]:
    """Model's consolidated/unconsolidated ratio: all-reduce-equivalent PS shards, the
    default topology (8 V100 per server, PCIe 128, NIC 25 Gbit/s), compute from the
    scale-1 throughput; unconsolidated = one GPU per server."""
    topology = Topology.from_config(TopologyConfig())
    perf = PerformanceModel(topology)
    iso = {job: row[None] for (job, scale), row in gavel["v100"].items() if scale == 1}
    out = []
    for job, scale, _ in gavel_consolidation(gavel):
        mb = (11.7e6 if job.startswith("ResNet-18") else 25.6e6) * 4 / 1e6
        compute = 1.0 / iso[job]
        spec = unit_spec(mb)
        packed = [int(g) for g in topology.gpu_group[:scale]]  # first GPUs of server 0
        spread = [int(topology.server_groups_start[s]) for s in range(scale)]  # 1 per server
        t_cons = compute + comm_time_at(
            kind_seconds(topology, perf.layout(spec, packed, packed)), efficiency
        )
        t_un = compute + comm_time_at(
            kind_seconds(topology, perf.layout(spec, spread, spread)), efficiency
        )
        out.append((job, scale, (t_un + overhead) / (t_cons + overhead)))
    return out


# --------------------------------------------------------------------------- noise floors


def pollux_noise_floor(pollux: dict[str, PolluxProfile]) -> float:
    """Best median relative error any model can reach that, like perf.py, depends
    only on the multiset of GPUs per node: points vs the median of their class
    (multi-node placements whose digits sort the same, e.g. ``1122`` and ``1212``)."""
    errs = []
    for point_list in _by_class(pollux_sync_points(pollux)).values():
        if len(point_list) < 2:
            continue
        mid = statistics.median(point_list)
        errs += [abs(v - mid) / v for v in point_list]
    return float(np.median(errs))


def _by_class(points: Sequence[SyncPoint]) -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = {}
    for p in points:
        if p.multi_node:
            out.setdefault((p.model, "".join(sorted(p.placement))), []).append(p.measured)
    return out


def dl2_noise_floor(rows: Sequence[DL2Row]) -> float:
    """DL2's run-to-run jitter: with one worker, perf.py's iteration time is the same
    for every PS count (the worker's NIC carries 2M whatever p is), so the spread of
    the 1-worker speeds around their per-model median is measurement noise."""
    errs = []
    for model in DL2_MODELS:
        speeds = [float(np.mean(r.speeds)) for r in rows if r.model == model and r.num_workers == 1]
        mid = statistics.median(speeds)
        errs += [abs(v - mid) / mid for v in speeds]
    return float(np.median(errs))


# --------------------------------------------------------------------------- all


def mem_rule(model_mb: float) -> float:
    """Host memory per task: 4 GB (runtime, data-loader buffers) + 4 copies of the
    parameters (weights, gradients, two optimizer moments), rounded up to 0.5 GB."""
    return math.ceil((4.0 + 4.0 * model_mb / 1000.0) * 2.0) / 2.0


#: a PS task always uses some CPU; DL2 logs 0.0 cores for dssm's 6 MB model
MIN_PS_CPU = 0.05


@dataclass
class Fit:
    """Everything :func:`fit` derives; :func:`fit_all` turns it into the JSON."""

    speeds: dict[str, float]
    speed_info: dict[str, Any]
    overhead: float
    overhead_per_model: dict[str, float]
    efficiency: dict[str, float]
    fitted_mb: dict[str, float]
    link_info: dict[str, Any]
    pollux_mb: dict[str, tuple[float, str]]
    pollux_compute: dict[str, tuple[float, int]]
    cpu: dict[str, tuple[float, float, int]]
    dl2_rows: int
    dl2_skipped: int
    sizes: dict[str, tuple[float, float]]
    gavel_types: list[str]
    s_mat: np.ndarray
    p_mat: np.ndarray
    gavel_info: dict[str, Any]
    vectors: dict[str, tuple[np.ndarray, np.ndarray]]
    coupling: dict[str, float]
    coupling_info: dict[str, Any]
    dl2_bandwidth: float
    dl2_errors: np.ndarray
    pollux_errors: dict[str, Any]
    pollux_floor: float
    dl2_floor: float
    consolidation: list[tuple[str, int, float, float]]


def fit(shared: str | os.PathLike[str]) -> Fit:
    """Run every fit and check on the data in ``shared``."""
    shared = Path(shared)
    gavel = load_gavel(shared)
    pollux = load_pollux(shared)
    dl2, skipped = load_dl2(shared)

    speeds, speed_info = fit_gpu_speed(gavel, pollux)
    overhead, overhead_per_model = sync_overhead(pollux)
    eff, fitted_mb, link_info = fit_links(pollux, overhead)
    efficiency = {"pcie": eff["pcie"], "qpi": eff["pcie"], "nic": eff["nic"]}
    pollux_mb = pollux_model_mb(fitted_mb)
    pollux_c = pollux_compute(pollux, speeds["t4"])

    sizes = {m: PUBLISHED[m] for m in DL2_MODELS}
    for m in POLLUX_MODELS:
        sizes[m] = (pollux_mb[m][0], pollux_c[m][0])

    types, s_mat, p_mat, gavel_info = fit_gavel_interference(gavel)
    vectors = catalogue_vectors(types, s_mat, p_mat, sizes)
    coupling, coupling_info = fit_level_coupling(vectors)

    dl2_bw, dl2_err, _ = fit_dl2_bandwidth(
        dl2,
        {m: PUBLISHED[m][0] for m in DL2_MODELS},
        {m: PUBLISHED[m][1] for m in DL2_MODELS},
        overhead,
    )
    cons = [
        (job, scale, meas, model)
        for (job, scale, meas), (_, _, model) in zip(
            gavel_consolidation(gavel),
            gavel_consolidation_model(gavel, efficiency, overhead),
            strict=True,
        )
    ]
    return Fit(
        speeds=speeds,
        speed_info=speed_info,
        overhead=overhead,
        overhead_per_model=overhead_per_model,
        efficiency=efficiency,
        fitted_mb=fitted_mb,
        link_info=link_info,
        pollux_mb=pollux_mb,
        pollux_compute=pollux_c,
        cpu=dl2_cpu(dl2),
        dl2_rows=len(dl2),
        dl2_skipped=skipped,
        sizes=sizes,
        gavel_types=types,
        s_mat=s_mat,
        p_mat=p_mat,
        gavel_info=gavel_info,
        vectors=vectors,
        coupling=coupling,
        coupling_info=coupling_info,
        dl2_bandwidth=dl2_bw,
        dl2_errors=dl2_err,
        pollux_errors=pollux_errors(
            pollux, {m: sz[0] for m, sz in sizes.items()}, efficiency, overhead
        ),
        pollux_floor=pollux_noise_floor(pollux),
        dl2_floor=dl2_noise_floor(dl2),
        consolidation=cons,
    )


def fit_all(shared: str | os.PathLike[str]) -> dict[str, Any]:
    """Fit every constant; returns the calibration.json content."""
    f = fit(shared)
    models: dict[str, Any] = {}
    for m in DL2_MODELS + POLLUX_MODELS:
        mb, comp = f.sizes[m]
        press, sens = f.vectors[m]
        if m in DL2_MODELS:
            cw, cp, nrows = f.cpu[m]
            src = (
                "model_mb, compute_s: DL2/Harmony published catalogue (PROVENANCE.md); "
                f"cpu_worker, cpu_ps: median per-task cores over {nrows} DL2 rows "
                "(dl2_ps_worker_config_speed.txt)"
            )
        else:
            cw, cp, _ = f.cpu[POLLUX_CPU_FROM[m]]
            src = (
                f"compute_s: 1-GPU step_time - sync_time at local_bsz "
                f"{f.pollux_compute[m][1]} (pollux/{m}/placements.csv) x t4 speed; "
                f"model_mb: {f.pollux_mb[m][1]}; cpu_worker, cpu_ps: DL2 median of "
                f"{POLLUX_CPU_FROM[m]} (same family; not measured for {m})"
            )
        models[m] = {
            "compute_s": _round(comp),
            "model_mb": _round(mb),
            "cpu_worker": _round(cw),
            "cpu_ps": _round(max(cp, MIN_PS_CPU)),
            "mem_gb": mem_rule(mb),
            "pressure": [_round(x) for x in press],
            "sensitivity": [_round(x) for x in sens],
            "source": (
                f"{src}; mem_gb: rule 4 GB + 4 x model_mb (assumption); pressure, "
                f"sensitivity: Gavel V100 co-location ANLS fit of job type "
                f"'{GAVEL_MAP[m]}', net column from communication intensity "
                "(docs/performance-model.md)"
            ),
        }
    return {
        "version": 1,
        "gpu_speed": {k: _round(f.speeds[k]) for k in ("v100", "p100", "k80", "t4")},
        "link_efficiency": {k: _round(v) for k, v in f.efficiency.items()},
        "sync_overhead_s": _round(f.overhead),
        "level_coupling": {k: _round(v) for k, v in f.coupling.items()},
        "notes": _notes(f),
        "models": models,
    }


def _notes(f: Fit) -> dict[str, str]:
    """The derivation of every global constant and the fit errors, as text."""
    si, li, gi, ci = f.speed_info, f.link_info, f.gavel_info, f.coupling_info
    pe = f.pollux_errors
    t4 = ", ".join(f"{m} batch {b}: {r:.3f}" for m, b, r in si["t4"])
    cons_meas = np.array([c[2] for c in f.consolidation])
    cons_model = np.array([c[3] for c in f.consolidation])
    return {
        "generated_by": (
            "python -m marl_sched.calibration --shared ../shared/data --out "
            "marl_sched/data/calibration.json. Do not edit by hand: "
            "tests/marl_sched/test_calibration.py checks this file equals a refit. "
            "Derivation: docs/performance-model.md."
        ),
        "gpu_speed": (
            f"v100 = 1. p100, k80: geometric mean over the {si['p100']['n']} Gavel job "
            "types at scale 1 of isolated throughput / V100 isolated throughput "
            f"(gavel_simulation_throughputs.json); p100 ratios span "
            f"{si['p100']['min']:.2f}-{si['p100']['max']:.2f}, k80 "
            f"{si['k80']['min']:.2f}-{si['k80']['max']:.2f}. t4: geometric mean of Pollux "
            "T4 1-GPU samples/s (placement 1, local_bsz / step_time, interpolated "
            "log-log at Gavel's batch size) over Gavel V100 samples/s (steps/s x batch) "
            "for the same architecture (imagenet = ResNet-50, cifar10 = ResNet-18), at "
            f"every Gavel batch size inside Pollux's profiled range: {t4}."
        ),
        "link_efficiency": (
            "A ring all-reduce over n GPUs is modelled as perf.py's PS model with p = n "
            "shards, one co-located with each worker: every (shard, worker) pair moves "
            "2M/n, so each worker's PCIe link carries 2M and a server holding k of the n "
            "GPUs carries 4M k(n-k)/n on its NIC (2k(n-k) remote pairs). Bytes per link "
            "come from PerformanceModel.layout on a g4dn.12xlarge topology (one GPU "
            "group per T4, pcie 128, nic 50 Gbit/s nominal). Measured = Pollux "
            "sync_time at the smallest profiled local_bsz (least backward compute to "
            "overlap with); model = C + sync_overhead_s with parameter-count sizes of "
            "bert, cifar10, imagenet, yolov3. pcie: log-least-squares over "
            f"{li['n_single']} single-node points (placements 2, 3, 4); > 1 because "
            "perf.py charges push + pull (2M) to a full-duplex link rated at its "
            "one-direction bandwidth. nic: log-least-squares over "
            f"{li['n_multi']} multi-node points (placements.csv + scalability.csv, "
            "replicas dealt evenly over nodes). qpi: no public measurement crosses a "
            "socket (a g4dn.12xlarge has one); set equal to pcie (assumption)."
        ),
        "sync_overhead_s": (
            "median over the 6 Pollux models of the median 1-GPU sync_time (nothing to "
            "send): "
            + ", ".join(f"{m} {v * 1e3:.2f} ms" for m, v in sorted(f.overhead_per_model.items()))
            + "."
        ),
        "model_mb": (
            "DL2 models: published. Pollux models: fitted to their multi-node sync "
            "times at the fitted nic efficiency (parameter count x 4 B in brackets): "
            + ", ".join(
                f"{m} {f.fitted_mb[m]:.1f}"
                + (f" ({li['param_mb'][m]:.1f})" if m in li["param_mb"] else "")
                for m in POLLUX_MODELS
            )
            + f" MB; ncf's NeuMF on MovieLens-1M would be {NCF_PARAMS * 4 / 1e6:.1f} MB."
        ),
        "compute_s": (
            "DL2 models: published. Pollux models: (step_time - sync_time) on 1 T4 at "
            "the batch a 1-GPU Pollux job starts with (smallest validated batch of "
            "adaptdl's simulator, capped at the largest profiled local_bsz), times the "
            "t4 speed (V100 seconds): "
            + ", ".join(f"{m} local_bsz {b}" for m, (_, b) in f.pollux_compute.items())
            + "."
        ),
        "cpu_mem": (
            "cpu_worker / cpu_ps: median over all tasks of DL2's measured per-task CPU "
            f"cores ({f.dl2_rows} rows kept, {f.dl2_skipped} skipped: all-zero or "
            f"partly-zero speeds = failed runs); PS floor {MIN_PS_CPU} core. Pollux "
            "models borrow the nearest DL2 family's figures. mem_gb: rule 4 GB + 4 x "
            "model_mb, rounded up to 0.5 GB (not measured)."
        ),
        "interference": (
            f"Gavel V100 scale-1 same-GPU pairs ({gi['n_pairs']} pairs, [0,0] excluded): "
            f"slowdown = isolated / co-located throughput, median "
            f"{gi['measured_median']:.2f}. Fit slowdown_ij - 1 = s_i . p_j over the 5 "
            f"resources by alternating NNLS, rows weighted 1/slowdown, ridge "
            f"{ANLS_RIDGE} towards family priors (cpu, pcie, membw, disk, net): "
            + "; ".join(f"{k} {v}" for k, v in FAMILY_PRIOR.items())
            + f". MRE {gi['mre']:.3f} (median {gi['median_re']:.3f}; priors alone "
            f"{gi['prior_mre']:.3f}). Catalogue model -> Gavel job type: "
            + "; ".join(f"{m} -> {j}" for m, j in GAVEL_MAP.items())
            + ". The net column (no signal in same-GPU pairs) is the median fitted "
            "entry x sqrt(model_mb/compute_s over its catalogue median), clipped to "
            "[0.25, 3]."
        ),
        "level_coupling": (
            "lambda_L scale the same-GPU (Gavel) level 1 down to what our placements "
            "allow (same PCIe switch / socket / server, never the same GPU). Ratios "
            f"group:socket:server = {GROUP_TO_SERVER}:{SOCKET_TO_SERVER}:1; lambda = the "
            f"smaller of a median one-neighbour server-level slowdown of "
            f"{TARGET_SERVER_NEIGHBOUR} (Harmony: tens of percent) and 7 workers of the "
            f"heaviest model ({ci['heaviest']}) on a full 8-GPU server slowing the "
            f"median victim {PACKED_CEILING}x; binding: {ci['binding']}. Result over "
            f"all catalogue pairs: one neighbour median server "
            f"{ci['median_server_neighbour']:.3f}, socket "
            f"{ci['median_socket_neighbour']:.3f}, group {ci['median_group_neighbour']:.3f}, "
            f"worst server {ci['max_server_neighbour']:.3f}; packed 8-GPU server median "
            f"{ci['median_packed_server']:.3f}, worst {ci['max_packed_server']:.3f}, "
            f"worst with every neighbour's PS on the server too "
            f"{ci['max_packed_server_with_ps']:.3f}."
        ),
        "fit_errors": (
            "Pollux sync time (C + overhead vs measured), median relative error: "
            f"multi-node {np.median(pe['multi']):.3f} over {len(pe['multi'])} points "
            f"(noise floor of any placement-multiset model {f.pollux_floor:.3f}), "
            f"single-node {np.median(pe['single']):.3f} over {len(pe['single'])}; per "
            "model "
            + ", ".join(f"{m} {np.median(v):.3f}" for m, v in pe["per_model"].items())
            + f". Gavel co-location MRE {gi['mre']:.3f}. DL2 per-worker speed relative "
            f"to 1 worker: median relative error {np.median(f.dl2_errors):.3f} over "
            f"{len(f.dl2_errors)} points (1-worker speed jitter across PS counts "
            f"{f.dl2_floor:.3f}) at a fitted effective testbed bandwidth of "
            f"{f.dl2_bandwidth / 1e6:.1f} MB/s (DL2's own trace.py inter_bws: 10-233 "
            "MB/s, median 92 MB/s). Gavel V100 consolidated/unconsolidated throughput "
            "ratio, ResNet-18/50 x2/x4/x8: measured median "
            f"{np.median(cons_meas):.2f}, model median {np.median(cons_model):.2f} "
            f"(default topology), median |log(model/measured)| "
            f"{np.median(np.abs(np.log(cons_model / cons_meas))):.2f}."
        ),
    }


def pollux_errors(
    pollux: dict[str, PolluxProfile],
    model_mb: dict[str, float],
    efficiency: dict[str, float],
    overhead: float,
) -> dict[str, Any]:
    """Relative errors of C + overhead against the measured sync statistic."""
    single, multi = [], []
    per_model: dict[str, list[float]] = {m: [] for m in POLLUX_MODELS}
    for p in pollux_sync_points(pollux):
        pred = comm_time_at(p.kind_s, efficiency) * model_mb[p.model] + overhead
        e = abs(pred - p.measured) / p.measured
        (multi if p.multi_node else single).append(e)
        if p.multi_node:
            per_model[p.model].append(e)
    return {
        "single": np.array(single),
        "multi": np.array(multi),
        "per_model": {m: np.array(v) for m, v in per_model.items()},
    }


# --------------------------------------------------------------------------- CLI


def write_json_atomic(data: dict[str, Any], out: Path) -> None:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=out.name + ".", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m marl_sched.calibration", description=__doc__)
    parser.add_argument("--shared", required=True, help="the shared data directory")
    parser.add_argument("--out", required=True, help="calibration.json to write")
    args = parser.parse_args(argv)
    shared = Path(args.shared)
    if not (profiles_dir(shared) / "gavel_simulation_throughputs.json").is_file():
        print(f"calibration: no profiles under {shared}", file=sys.stderr)
        return 2
    data = fit_all(shared)
    write_json_atomic(data, Path(args.out))
    print(f"wrote {args.out}")
    for key in ("gpu_speed", "link_efficiency", "sync_overhead_s", "level_coupling"):
        print(f"  {key}: {data[key]}")
    print(f"  {data['notes']['fit_errors']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
