"""Checks reported in the notes, not fitted: Pollux sync errors, Gavel's
consolidation ratio and the noise floors of the Pollux and DL2 data."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from marl_sched.calibration.constants import DL2_MODELS, POLLUX_MODELS
from marl_sched.calibration.data import DL2Row, PolluxProfile
from marl_sched.calibration.pollux import SyncPoint, pollux_sync_points
from marl_sched.calibration.topologies import comm_time_at, kind_seconds, unit_spec
from marl_sched.config import TopologyConfig
from marl_sched.perf import PerformanceModel
from marl_sched.topology import Topology

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
