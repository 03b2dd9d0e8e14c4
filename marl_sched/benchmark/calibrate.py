"""Load tiers: the arrival-rate multiplier that gives a window a target under
first-fit, by bisection on log(load) within :data:`LOAD_RANGE` (the closest load when
out of reach). Utilisation tiers target the steady GPU utilisation
(:func:`calibrate_load`); queue tiers the share of job completion time spent queued,
mean queue time / mean JCT over the scored jobs (:func:`calibrate_queue_share`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from marl_sched.config import ExperimentConfig
from marl_sched.runner import build_cluster, load_workload, simulate

LOAD_RANGE = (0.02, 200.0)
#: how far above its target a queue tier's share may end (a load whose share is in
#: [target, target + QUEUE_SLACK] is accepted)
QUEUE_SLACK = 0.05


def first_fit_metrics(cfg: ExperimentConfig, load: float, policy: str = "first-fit") -> dict:
    """The metrics ``simulate`` returns for ``policy`` on ``cfg``'s window at ``load``."""
    cfg = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, load=load))
    topo, perf = build_cluster(cfg)
    metrics, _, _ = simulate(cfg, policy, load_workload(cfg, perf), topo, perf)
    return metrics


def steady_utilization(cfg: ExperimentConfig, load: float, policy: str = "first-fit") -> float:
    """``gpu_utilization_steady`` of ``policy`` on ``cfg``'s window at ``load``."""
    return float(first_fit_metrics(cfg, load, policy)["gpu_utilization_steady"])


def queue_share(metrics: dict[str, Any]) -> float:
    """Mean queue time / mean JCT of a run's scored jobs (0 when none completed)."""
    jct = float(metrics["avg_jct_s"])
    queue = float(metrics["avg_queue_s"])
    return queue / jct if jct > 0 and math.isfinite(jct) and math.isfinite(queue) else 0.0


def _bisect(
    measure: Callable[[float], float], low: float, high: float, steps: int
) -> list[tuple[float, float]]:
    """(load, value) at each step of a bisection on log(load) over :data:`LOAD_RANGE`
    (3 significant digits of load) for a value rising with load, stopping at the first
    value in [low, high]."""
    lo, hi = (math.log(x) for x in LOAD_RANGE)
    seen = []
    for _ in range(steps):
        mid = (lo + hi) / 2
        load = float(f"{math.exp(mid):.3g}")
        value = measure(load)
        seen.append((load, value))
        if low <= value <= high:
            break
        lo, hi = (mid, hi) if value < low else (lo, mid)
    return seen


def calibrate_load(
    cfg: ExperimentConfig, target: float, *, steps: int = 9, tolerance: float = 0.015
) -> tuple[float, float]:
    """(load, utilisation reached) for a target steady utilisation (3 significant
    digits of load)."""
    seen = _bisect(
        lambda load: steady_utilization(cfg, load), target - tolerance, target + tolerance, steps
    )
    best = min((abs(util - target), load, util) for load, util in seen)
    return best[1], best[2]


def calibrate_queue_share(
    cfg: ExperimentConfig, target: float, *, steps: int = 12, slack: float = QUEUE_SLACK
) -> tuple[float, float, float]:
    """(load, queue share reached, steady utilisation there) for a target first-fit
    queue share (:func:`queue_share`): the first load of the bisection whose share lies
    in [target, target + slack], else the closest one (out of reach: the caller checks)."""
    runs: dict[float, dict] = {}

    def share(load: float) -> float:
        if load not in runs:  # rounded loads repeat as the bisection narrows
            runs[load] = first_fit_metrics(cfg, load)
        return queue_share(runs[load])

    seen = _bisect(share, target, target + slack, steps)
    inside = [(load, s) for load, s in seen if target <= s <= target + slack]
    load, reached = inside[0] if inside else min(seen, key=lambda p: abs(p[1] - target))
    return load, reached, float(runs[load]["gpu_utilization_steady"])
