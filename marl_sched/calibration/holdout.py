"""Fit and held-out error per source: every constant refitted on about three
quarters of its source and measured on the rest, split by group (a group is held out
when the CRC-32 of its key is divisible by :data:`HOLD_EVERY`): Pollux by (model,
placement class), Gavel spread pairs by job type, Gavel co-location pairs by unordered
pair, DL2 by (model, PS count)."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numpy as np

from marl_sched.calibration.constants import DL2_MODELS, PUBLISHED
from marl_sched.calibration.data import load_dl2, load_gavel, load_pollux
from marl_sched.calibration.dl2 import DL2Point, fit_dl2_bandwidth
from marl_sched.calibration.gavel import fit_gavel_interference, gavel_pairs, gavel_prediction
from marl_sched.calibration.pollux import (
    fit_links,
    pollux_sync_points,
    predicted_sync,
    sync_overhead,
)
from marl_sched.calibration.spread import GavelSpread

#: figure -> (value on the FIT subset, value on the HELD-OUT subset, n fit, n held)
HoldoutErrors = dict[str, tuple[float, float, int, int]]

#: one group in HOLD_EVERY (by CRC-32 of its key) is held out
HOLD_EVERY = 4


def _held(key: str) -> bool:
    return zlib.crc32(key.encode("utf-8")) % HOLD_EVERY == 0


def pollux_held_out(model: str, placement: str) -> bool:
    """Whether a Pollux (model, placement) row is in the held-out subset."""
    return _held(f"{model}:{''.join(sorted(placement))}")


def spread_held_out(job: str) -> bool:
    """Whether a Gavel consolidated/unconsolidated job type is held out."""
    return "(batch size 64)" in job


def gavel_pair_held_out(a: str, b: str) -> bool:
    """Whether the Gavel co-location pair of job types ``a`` and ``b`` is held out."""
    return _held("|".join(sorted((a, b))))


def dl2_held_out(point: DL2Point) -> bool:
    """Whether a DL2 point (model, PS count, workers) is held out."""
    return _held(f"{point.model}:{point.num_ps}")


def _split(err: np.ndarray, held: np.ndarray, stat) -> tuple[float, float, int, int]:
    return (float(stat(err[~held])), float(stat(err[held])), int((~held).sum()), int(held.sum()))


def holdout_errors(shared: str | Path) -> HoldoutErrors:
    """Figure -> (fit-subset value, held-out value, n fit, n held) of the constants
    refitted on the FIT subsets (see the module docstring)."""
    shared = Path(shared)
    gavel = load_gavel(shared)
    pollux = load_pollux(shared)
    dl2, _ = load_dl2(shared)
    overhead, _ = sync_overhead(pollux)
    out: HoldoutErrors = {}

    # links, overlap and Pollux model sizes (jointly with Gavel's spread pairs)
    eff, mb, info = fit_links(
        pollux,
        overhead,
        GavelSpread(gavel, keep=lambda job: not spread_held_out(job)),
        keep=lambda m, pl: not pollux_held_out(m, pl),
    )
    eff = {**eff, "qpi": eff["pcie"]}
    points = pollux_sync_points(pollux)
    pred = predicted_sync(points, mb, eff, overhead, info["gamma"])
    meas = np.array([p.measured for p in points])
    err = np.abs(pred - meas) / meas
    held = np.array([pollux_held_out(p.model, p.placement) for p in points])
    multi = np.array([p.multi_node for p in points])
    out["pollux_sync_median_rel_err"] = _split(err, held, np.median)
    out["pollux_sync_single_node_median_rel_err"] = _split(err[~multi], held[~multi], np.median)
    out["pollux_sync_multi_node_median_rel_err"] = _split(err[multi], held[multi], np.median)

    spread = GavelSpread(gavel)
    ratios = spread.ratios(eff, overhead, info["gamma"])
    held = np.array([spread_held_out(job) for job, _, _ in spread.points])
    out["gavel_spread_ratio_median_model"] = _split(ratios, held, np.median)
    out["gavel_spread_ratio_median_measured"] = _split(spread.measured, held, np.median)

    # interference vectors (same-GPU pairs; the vectors, not the simulator's levels)
    types, s_mat, p_mat, _ = fit_gavel_interference(
        gavel, keep=lambda a, b: not gavel_pair_held_out(a, b)
    )
    pred, meas = gavel_prediction(types, s_mat, p_mat, gavel)
    _, pairs = gavel_pairs(gavel)
    held = np.array([gavel_pair_held_out(types[i], types[j]) for i, j, _ in pairs])
    out["gavel_colocation_vector_mre"] = _split(np.abs(pred - meas) / meas, held, np.mean)

    # DL2's testbed bandwidth
    _, err, dl2_pts = fit_dl2_bandwidth(
        dl2,
        {m: PUBLISHED[m][0] for m in DL2_MODELS},
        {m: PUBLISHED[m][1] for m in DL2_MODELS},
        overhead,
        keep=lambda p: not dl2_held_out(p),
    )
    held = np.array([dl2_held_out(p) for p in dl2_pts])
    out["dl2_speed_median_rel_err"] = _split(err, held, np.median)
    return out


def holdout_summary(errors: HoldoutErrors) -> dict[str, Any]:
    """The JSON keys of :func:`holdout_errors`: ``<figure>_fit`` and ``<figure>_heldout``."""
    out: dict[str, Any] = {}
    for key, (fit_value, held_value, _, _) in errors.items():
        out[f"{key}_fit"] = fit_value
        out[f"{key}_heldout"] = held_value
    return out


def format_holdout(errors: HoldoutErrors) -> list[str]:
    """Report lines: one per figure, fit-subset and held-out value with their sizes."""
    lines = [
        "refitted on the FIT subset of each source (held out: 1 group in "
        f"{HOLD_EVERY}; marl_sched/calibration/holdout.py)",
        f"{'figure':<44} {'fit':>8} {'held-out':>9} {'n fit':>6} {'n held':>6}",
    ]
    for key, (f, h, nf, nh) in errors.items():
        lines.append(f"{key:<44} {f:>8.3f} {h:>9.3f} {nf:>6} {nh:>6}")
    return lines
