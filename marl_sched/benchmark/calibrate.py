"""Load tiers: the arrival-rate multiplier that gives a window a target steady GPU
utilisation under first-fit, by bisection on log(load) within :data:`LOAD_RANGE` (the
closest load when out of reach)."""

from __future__ import annotations

import dataclasses
import math

from marl_sched.config import ExperimentConfig
from marl_sched.runner import build_cluster, load_workload, simulate

LOAD_RANGE = (0.02, 200.0)


def steady_utilization(cfg: ExperimentConfig, load: float, policy: str = "first-fit") -> float:
    """``gpu_utilization_steady`` of ``policy`` on ``cfg``'s window at ``load``."""
    cfg = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, load=load))
    topo, perf = build_cluster(cfg)
    metrics, _, _ = simulate(cfg, policy, load_workload(cfg, perf), topo, perf)
    return float(metrics["gpu_utilization_steady"])


def calibrate_load(
    cfg: ExperimentConfig, target: float, *, steps: int = 9, tolerance: float = 0.015
) -> tuple[float, float]:
    """(load, utilisation reached) for a target steady utilisation (3 significant
    digits of load)."""
    lo, hi = (math.log(x) for x in LOAD_RANGE)
    best = (math.inf, 1.0, 0.0)
    for _ in range(steps):
        mid = (lo + hi) / 2
        load = float(f"{math.exp(mid):.3g}")
        util = steady_utilization(cfg, load)
        best = min(best, (abs(util - target), load, util))
        if abs(util - target) <= tolerance:
            break
        lo, hi = (mid, hi) if util < target else (lo, mid)
    return best[1], best[2]
