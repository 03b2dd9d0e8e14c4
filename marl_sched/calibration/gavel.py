"""Interference vectors: the ANLS fit of Gavel's same-GPU pairs and the catalogue
models' pressure and sensitivity derived from it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np

from marl_sched.calibration.constants import ANLS_ITERS, ANLS_RIDGE, FAMILY_PRIOR, GAVEL_MAP
from marl_sched.calibration.numerics import _nnls, relative_errors
from marl_sched.catalogue import RESOURCES

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
    keep: Callable[[str, str], bool] | None = None,
) -> tuple[list[str], np.ndarray, np.ndarray, dict[str, Any]]:
    """Rank-5 non-negative fit ``slowdown_ij - 1 ≈ s_i · p_j`` of Gavel's V100 pairs
    (:func:`fit_pair_factors` at the shipped ridge). Returns types, S, P (rows =
    types), and fit errors. ``keep(type_i, type_j)``, when given, fits only the pairs
    it accepts.
    """
    types, pairs = gavel_pairs(gavel)
    if keep is not None:
        pairs = [(i, j, s) for i, j, s in pairs if keep(types[i], types[j])]
    s_mat, p_mat, info = fit_pair_factors(types, pairs)
    return types, s_mat, p_mat, info


def fit_pair_factors(
    types: list[str],
    pairs: list[tuple[int, int, float]],
    ridge: float = ANLS_RIDGE,
    scale: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Rank-5 non-negative fit ``slowdown_ij - 1 ≈ c · s_i · p_j`` by alternating NNLS,
    rows weighted by ``1/slowdown_ij``, a ``ridge`` towards each family prior; ``scale``
    is the fixed ``c`` per pair (default 1). Returns S, P (rows = types) and fit errors."""
    n, r = len(types), len(RESOURCES)
    prior = np.array([FAMILY_PRIOR[_family(t)] for t in types], dtype=np.float64)
    ii = np.array([i for i, _, _ in pairs])
    jj = np.array([j for _, j, _ in pairs])
    slow = np.array([s for _, _, s in pairs])
    y = slow - 1.0
    wt = 1.0 / slow
    cw = wt if scale is None else wt * scale
    # scale the prior so that its products match the data's median (at scale 1)
    y1 = y if scale is None else y / scale
    scale0 = math.sqrt(float(np.median(y1)) / float(np.median(np.sum(prior[ii] * prior[jj], 1))))
    s0 = p0 = prior * scale0
    s_mat, p_mat = s0.copy(), p0.copy()
    mu = math.sqrt(ridge)
    eye = np.eye(r)
    for _ in range(ANLS_ITERS):
        old = (s_mat.copy(), p_mat.copy())
        for k in range(n):
            m = ii == k
            a = np.vstack([p_mat[jj[m]] * cw[m, None], mu * eye])
            s_mat[k] = _nnls(a, np.concatenate([y[m] * wt[m], mu * s0[k]]))
        for k in range(n):
            m = jj == k
            a = np.vstack([s_mat[ii[m]] * cw[m, None], mu * eye])
            p_mat[k] = _nnls(a, np.concatenate([y[m] * wt[m], mu * p0[k]]))
        if max(np.abs(s_mat - old[0]).max(), np.abs(p_mat - old[1]).max()) < 1e-10:
            break
    pred = 1.0 + (1.0 if scale is None else scale) * np.sum(s_mat[ii] * p_mat[jj], axis=1)
    rel = relative_errors(pred, slow)
    info = {
        "n_pairs": len(pairs),
        "mre": float(rel.mean()),
        "median_re": float(np.median(rel)),
        "measured_median": float(np.median(slow)),
        "prior_mre": float(relative_errors(1.0 + np.sum(s0[ii] * p0[jj], 1), slow).mean()),
    }
    return s_mat, p_mat, info


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
    """Pressure and sensitivity of each catalogue model from its Gavel type; ``net``
    from the model's MB per compute-second relative to the catalogue median (sqrt,
    clipped to [0.25, 3]) times the median fitted entry."""
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
