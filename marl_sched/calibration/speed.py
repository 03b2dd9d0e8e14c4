"""Relative GPU speeds (``gpu_speed``) from Gavel's and Pollux's throughputs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from marl_sched.calibration.constants import POLLUX_GAVEL_ARCH
from marl_sched.calibration.data import PolluxProfile
from marl_sched.calibration.numerics import geomean

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
