"""Checks reported in the notes, not fitted: Pollux sync errors, Gavel's
consolidation ratio and the noise floors of the Pollux and DL2 data."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from marl_sched.calibration.constants import DL2_MODELS, POLLUX_MODELS
from marl_sched.calibration.data import DL2Row, PolluxProfile
from marl_sched.calibration.pollux import SyncPoint, pollux_sync_points, predicted_sync
from marl_sched.calibration.spread import GavelSpread

# --------------------------------------------------------------------------- Gavel check


def gavel_consolidation_model(
    gavel, efficiency: dict[str, float], overhead: float, gamma: float = 1.0
) -> list[tuple[str, int, float]]:
    """Model's consolidated/unconsolidated ratio of every :func:`gavel_consolidation`
    pair (see :class:`GavelSpread`)."""
    spread = GavelSpread(gavel)
    ratios = spread.ratios(efficiency, overhead, gamma)
    return [
        (job, scale, float(r)) for (job, scale, _), r in zip(spread.points, ratios, strict=True)
    ]


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
    gamma: float = 1.0,
) -> dict[str, Any]:
    """Relative errors of perf.py's exposed sync time against the measured one: at
    each placement's smallest local batch (``single`` / ``multi`` node,
    ``per_model`` multi-node) and at every profiled batch (``every_batch``)."""
    points = pollux_sync_points(pollux)
    pred = predicted_sync(points, model_mb, efficiency, overhead, gamma)
    meas = np.array([p.measured for p in points])
    err = np.abs(pred - meas) / meas
    multi = np.array([p.multi_node for p in points])
    per_model = {m: err[multi & np.array([p.model == m for p in points])] for m in POLLUX_MODELS}
    every = pollux_sync_points(pollux, every_batch=True)
    pred_e = predicted_sync(every, model_mb, efficiency, overhead, gamma)
    meas_e = np.array([p.measured for p in every])
    return {
        "single": err[~multi],
        "multi": err[multi],
        "per_model": per_model,
        "every_batch": np.abs(pred_e - meas_e) / meas_e,
        "points": points,
        "predicted": pred,
    }
