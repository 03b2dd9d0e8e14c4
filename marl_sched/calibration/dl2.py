"""DL2 fits: CPU use per task and the effective bandwidth of its testbed (from its
PS-bound scaling)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from marl_sched.calibration.constants import DL2_MODELS
from marl_sched.calibration.data import DL2Row
from marl_sched.calibration.numerics import _minimize_log_scalar, relative_errors
from marl_sched.calibration.topologies import dl2_topology, kind_seconds, unit_spec
from marl_sched.catalogue import ModelSpec
from marl_sched.perf import JobLayout, PerformanceModel
from marl_sched.topology import GBPS

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
    rows: Sequence[DL2Row],
    model_mb: dict[str, float],
    compute: dict[str, float],
    overhead: float,
    keep: Callable[[DL2Point], bool] | None = None,
) -> tuple[float, np.ndarray, list[DL2Point]]:
    """The one effective NIC bandwidth (bytes/s) of DL2's testbed that best explains
    its PS-bound scaling, with per-point relative errors at that bandwidth (every
    point; the bandwidth is fitted on the points ``keep`` accepts, all by default)."""
    points = dl2_points(rows)
    fit_mask = np.array([keep is None or keep(p) for p in points])
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
        return float(np.mean(np.log(preds(bw)[fit_mask] / measured[fit_mask]) ** 2))

    bw = _minimize_log_scalar(loss, lo=1e6, hi=1e11)
    return bw, relative_errors(preds(bw), measured), points
