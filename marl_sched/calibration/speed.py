"""Relative GPU speeds (``gpu_speed``) from Gavel's and Pollux's throughputs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from marl_sched.calibration.constants import GAVEL_SPEED_MAP, POLLUX_GAVEL_ARCH
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


def fit_model_gpu_speed(
    gavel: dict[str, dict[tuple[str, int], dict[Any, Any]]], models: Any
) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """Per-model P100 and K80 speeds (V100 = 1) from Gavel's isolated throughputs (its
    job type's ratio, or its family's geometric mean; unmapped models get none). Returns
    the table and each entry's source."""
    v100 = {job: row[None] for (job, scale), row in gavel["v100"].items() if scale == 1}
    table: dict[str, dict[str, float]] = {}
    how: dict[str, str] = {}
    for model in models:
        if model not in GAVEL_SPEED_MAP:
            how[model] = "per-type figure (no matching Gavel job type)"
            continue
        kind, key = GAVEL_SPEED_MAP[model]
        jobs = [key] if kind == "type" else sorted(j for j in v100 if j.startswith(key))
        table[model] = {
            gpu: geomean(gavel[gpu][(job, 1)][None] / v100[job] for job in jobs)
            for gpu in ("p100", "k80")
        }
        how[model] = f"Gavel '{key}'" if kind == "type" else f"Gavel family '{key[:-2]}' (geomean)"
    return table, how


def gavel_unfit(
    gavels: Any, models: Any
) -> tuple[dict[str, list[str]], dict[str, list[tuple[str, str]]]]:
    """GPU types each model's memory does not fit, from Gavel's zero isolated throughputs
    (any scale factor), inherited only through an exact job-type mapping of
    :data:`GAVEL_SPEED_MAP`. Returns ``{model: [gpu types]}`` and the evidence."""
    zero: dict[str, set[str]] = {}
    for gavel in gavels:
        for gpu, table in gavel.items():
            if gpu.endswith("_unconsolidated"):
                continue
            for (job, _), row in table.items():
                if row.get(None, 1.0) <= 0:
                    zero.setdefault(job, set()).add(gpu)
    unfit: dict[str, list[str]] = {}
    for model in models:
        kind, job = GAVEL_SPEED_MAP.get(model, ("none", ""))
        if kind == "type" and job in zero:
            unfit[model] = sorted(zero[job])
    return unfit, {m: [(g, GAVEL_SPEED_MAP[m][1]) for g in gpus] for m, gpus in unfit.items()}


def gavel_share_conflicts(gavels: Any, models: Any) -> dict[str, list[list[str]]]:
    """Pairs of catalogue models that cannot share one GPU (Gavel's ``[0, 0]`` scale-1
    pairs, exact mappings only), per GPU type: ``{gpu: [[a, b], ...]}``, each pair sorted."""
    exact: dict[str, list[str]] = {}
    for model in models:
        kind, job = GAVEL_SPEED_MAP.get(model, ("none", ""))
        if kind == "type":
            exact.setdefault(job, []).append(model)
    pairs: dict[str, set[tuple[str, str]]] = {}
    for gavel in gavels:
        for gpu, table in gavel.items():
            if gpu.endswith("_unconsolidated"):
                continue
            for (job, scale), row in table.items():
                for other, value in row.items():
                    if other is None or scale != 1 or other[1] != 1:
                        continue
                    if float(value[0]) > 0 or float(value[1]) > 0:
                        continue
                    for a in exact.get(job, ()):
                        for b in exact.get(other[0], ()):
                            pairs.setdefault(gpu, set()).add((min(a, b), max(a, b)))
    return {gpu: [list(p) for p in sorted(ps)] for gpu, ps in sorted(pairs.items())}
