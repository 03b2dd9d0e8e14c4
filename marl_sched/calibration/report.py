"""``python -m marl_sched.calibration report``: the shipped performance model against
every calibration point of the measured data, per source (docs/performance-model.md).

Each point goes through :class:`~marl_sched.perf.PerformanceModel` with the shipped
``calibration.json``; the last line is one JSON object of headline errors
(:func:`summary`). Sources: ``pollux_sync`` (exposed sync of Pollux's placements),
``gavel_spread`` (consolidated/unconsolidated ratios), ``dl2_speed`` (per-worker
speed scaling), ``gavel_colocation`` (same-GPU pairs through the simulator with
``gpu_sharing`` 2), ``gavel_colocation_vectors`` (the same pairs vs ``1 + s_i · p_j``)
and ``gpu_speed`` (P100/K80 ÷ V100 ratios)."""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from marl_sched.calibration.constants import DL2_MODELS, GAVEL_COLOCATION_GPUS, GAVEL_SPEED_MAP
from marl_sched.calibration.data import load_dl2, load_gavel, load_pollux, profiles_dir
from marl_sched.calibration.dl2 import fit_dl2_bandwidth
from marl_sched.calibration.gavel import fit_gavel_interference, gavel_pairs, gavel_prediction
from marl_sched.calibration.holdout import HoldoutErrors, format_holdout, holdout_summary
from marl_sched.calibration.pollux import pollux_sync_points
from marl_sched.calibration.spread import gavel_consolidation
from marl_sched.calibration.topologies import (
    dl2_topology,
    pollux_groups,
    pollux_topology,
    unit_spec,
)
from marl_sched.catalogue import CALIBRATION, CATALOGUE, N_RESOURCES, ModelSpec
from marl_sched.config import TopologyConfig
from marl_sched.perf import PerformanceModel
from marl_sched.topology import GBPS, Topology

#: a row of a table: (source, point label, model value, measured value)
Row = tuple[str, str, float, float]


def alone_comm_and_overhead(perf: PerformanceModel, spec: ModelSpec, workers, ps) -> float:
    """Iteration time minus compute of one job alone (interference factor 1)."""
    topo = perf.topology
    layout = perf.layout(spec, workers, ps)
    t = perf.iteration_time(
        spec,
        layout,
        len(ps),
        np.zeros(topo.n_links),
        np.zeros((topo.n_groups, N_RESOURCES)),
        np.zeros((topo.n_sockets, N_RESOURCES)),
        np.zeros((topo.n_servers, N_RESOURCES)),
    )
    return t - spec.compute_s / layout.speed


def pollux_sync_rows(shared: Path) -> list[Row]:
    """``pollux_sync`` points, labelled ``model placement``."""
    topo = pollux_topology()
    perf = PerformanceModel(topo)
    t4 = CALIBRATION.gpu_speed["t4"]
    out = []
    for p in pollux_sync_points(load_pollux(shared)):
        spec = dataclasses.replace(CATALOGUE[p.model], compute_s=p.compute * t4)
        pred = alone_comm_and_overhead(perf, spec, pollux_groups(topo, p.placement), [])
        out.append(("pollux_sync", f"{p.model} {p.placement}", pred, p.measured))
    return out


def gavel_spread_rows(shared: Path, nic_efficiency_scale: float = 1.0) -> list[Row]:
    """``gavel_spread`` points, labelled ``job xscale`` (``nic_efficiency_scale``: as
    ``simulation.nic_efficiency_scale``)."""
    topo = Topology.from_config(TopologyConfig()).with_network_efficiency(nic_efficiency_scale)
    perf = PerformanceModel(topo)
    gavel = load_gavel(shared)
    out = []
    for job, scale, measured in gavel_consolidation(gavel):
        mb = (11.7e6 if job.startswith("ResNet-18") else 25.6e6) * 4 / 1e6
        spec = unit_spec(mb, compute_s=1.0 / gavel["v100"][(job, 1)][None])
        packed = [int(g) for g in topo.gpu_group[:scale]]
        spread = [int(topo.server_groups_start[s]) for s in range(scale)]
        t_packed = perf.alone_iteration_time(spec, perf.layout(spec, packed, []), 0)
        t_spread = perf.alone_iteration_time(spec, perf.layout(spec, spread, []), 0)
        out.append(("gavel_spread", f"{job} x{scale}", t_spread / t_packed, measured))
    return out


def dl2_speed_rows(shared: Path) -> list[Row]:
    """``dl2_speed`` points, labelled ``model ps=p workers=w``."""
    rows, _ = load_dl2(shared)
    bw, _, points = fit_dl2_bandwidth(
        rows,
        {m: CATALOGUE[m].model_mb for m in DL2_MODELS},
        {m: CATALOGUE[m].compute_s for m in DL2_MODELS},
        CALIBRATION.sync_overhead_s,
    )
    nodes = max(p.num_workers + p.num_ps for p in points)
    topo = dl2_topology(nodes, bw / (GBPS * CALIBRATION.link_efficiency["nic"]))
    perf = PerformanceModel(topo)
    cache: dict[tuple[str, int, int], float] = {}

    def t(model: str, w: int, p: int) -> float:
        if (model, w, p) not in cache:
            spec = dataclasses.replace(CATALOGUE[model], compute_s=CATALOGUE[model].compute_s / w)
            comm = alone_comm_and_overhead(perf, spec, list(range(w)), list(range(w, w + p)))
            cache[(model, w, p)] = spec.compute_s + comm
        return cache[(model, w, p)]

    return [
        (
            "dl2_speed",
            f"{pt.model} ps={pt.num_ps} workers={pt.num_workers}",
            t(pt.model, 1, pt.num_ps) / (pt.num_workers * t(pt.model, pt.num_workers, pt.num_ps)),
            pt.measured,
        )
        for pt in points
    ]


def gavel_colocation_rows(shared: Path) -> list[Row]:
    """``gavel_colocation`` points (the simulator's slowdown vs Gavel's)."""
    from marl_sched.interference.real_data import load_gavel_colocations  # noqa: PLC0415

    samples = load_gavel_colocations(
        profiles_dir(shared) / "gavel_physical_cluster_throughputs.json"
    )
    return [
        ("gavel_colocation", f"{GAVEL_COLOCATION_GPUS[g - 1_000_000]} pair {i}", float(m), float(y))
        for i, (m, y, g) in enumerate(zip(samples.simulated, samples.y, samples.group, strict=True))
    ]


def gavel_vector_rows(shared: Path) -> list[Row]:
    """``gavel_colocation_vectors``: Gavel's V100 same-GPU pairs vs ``1 + s_i · p_j``."""
    gavel = load_gavel(shared)
    types, s_mat, p_mat, _ = fit_gavel_interference(gavel)
    pred, meas = gavel_prediction(types, s_mat, p_mat, gavel)
    _, pairs = gavel_pairs(gavel)
    return [
        ("gavel_colocation_vectors", f"{types[i]} | {types[j]}", float(m), float(y))
        for (i, j, _), m, y in zip(pairs, pred, meas, strict=True)
    ]


def gpu_speed_rows(shared: Path) -> list[Row]:
    """``gpu_speed`` (per-model) and ``gpu_speed_per_type`` points per Gavel job type."""
    gavel = load_gavel(shared)
    v100 = {job: row[None] for (job, scale), row in gavel["v100"].items() if scale == 1}
    by_type: dict[str, str] = {}
    for model, (kind, key) in sorted(GAVEL_SPEED_MAP.items()):
        for job in v100:
            if (job == key) if kind == "type" else job.startswith(key):
                by_type.setdefault(job, model)
    out = []
    for gpu in ("p100", "k80"):
        for job in sorted(v100):
            measured = gavel[gpu][(job, 1)][None] / v100[job]
            out.append(("gpu_speed_per_type", f"{job} {gpu}", CALIBRATION.gpu_speed[gpu], measured))
            if job in by_type:
                model = by_type[job]
                label = f"{job} {gpu} ({model})"
                out.append(("gpu_speed", label, CATALOGUE[model].speed_on(gpu), measured))
    return out


def all_rows(shared: Path) -> list[Row]:
    shared = Path(shared)
    return (
        gpu_speed_rows(shared)
        + pollux_sync_rows(shared)
        + gavel_spread_rows(shared)
        + dl2_speed_rows(shared)
        + gavel_colocation_rows(shared)
        + gavel_vector_rows(shared)
    )


def _rel(rows: list[Row], source: str, label_filter=None) -> np.ndarray:
    return np.array(
        [
            abs(m - y) / y
            for s, label, m, y in rows
            if s == source and (label_filter is None or label_filter(label))
        ]
    )


def summary(rows: list[Row]) -> dict[str, Any]:
    """The headline errors (the report's last line)."""

    def multi(label: str) -> bool:
        return len(label.split()[-1]) > 1

    by_gpu = {
        f"gavel_colocation_mre_{gpu}": float(
            np.mean(_rel(rows, "gavel_colocation", lambda lab, gpu=gpu: lab.startswith(gpu)))
        )
        for gpu in GAVEL_COLOCATION_GPUS
    }
    spread_model = [m for s, _, m, _ in rows if s == "gavel_spread"]
    spread_meas = [y for s, _, _, y in rows if s == "gavel_spread"]
    return {
        "gavel_colocation_mre": float(np.mean(_rel(rows, "gavel_colocation"))),
        "gavel_colocation_vector_mre": float(np.mean(_rel(rows, "gavel_colocation_vectors"))),
        "pollux_sync_median_rel_err": float(np.median(_rel(rows, "pollux_sync"))),
        "pollux_sync_single_node_median_rel_err": float(
            np.median(_rel(rows, "pollux_sync", lambda lab: not multi(lab)))
        ),
        "pollux_sync_multi_node_median_rel_err": float(np.median(_rel(rows, "pollux_sync", multi))),
        "gavel_spread_ratio_median_model": statistics.median(spread_model),
        "gavel_spread_ratio_median_measured": statistics.median(spread_meas),
        "dl2_speed_median_rel_err": float(np.median(_rel(rows, "dl2_speed"))),
        "gpu_speed_per_model_median_rel_err": float(np.median(_rel(rows, "gpu_speed"))),
        "gpu_speed_per_type_median_rel_err": float(np.median(_rel(rows, "gpu_speed_per_type"))),
    } | by_gpu


def format_report(rows: list[Row], holdout: HoldoutErrors | None = None) -> str:
    """Every point, then per source count / median / mean relative error, then (with
    ``holdout``) each figure's fit and held-out value, then the JSON summary line."""
    lines = [f"{'source':<24} {'point':<52} {'model':>10} {'measured':>10} {'rel.err':>8}"]
    for source, label, m, y in rows:
        lines.append(f"{source:<24} {label:<52} {m:>10.4g} {y:>10.4g} {abs(m - y) / y:>8.3f}")
    lines.append("")
    lines.append(f"{'source':<24} {'n':>6} {'median':>8} {'mean':>8}")
    for source in dict.fromkeys(s for s, _, _, _ in rows):
        err = _rel(rows, source)
        lines.append(f"{source:<24} {len(err):>6} {np.median(err):>8.3f} {np.mean(err):>8.3f}")
        if source == "gavel_colocation":  # per GPU type
            for gpu in GAVEL_COLOCATION_GPUS:
                err = _rel(rows, source, lambda lab, gpu=gpu: lab.startswith(gpu))
                name = f"  {gpu}"
                lines.append(
                    f"{name:<24} {len(err):>6} {np.median(err):>8.3f} {np.mean(err):>8.3f}"
                )
    head = summary(rows)
    if holdout is not None:
        lines.append("")
        lines += format_holdout(holdout)
        head |= holdout_summary(holdout)
    lines.append(json.dumps(head, sort_keys=True))
    return "\n".join(lines)
