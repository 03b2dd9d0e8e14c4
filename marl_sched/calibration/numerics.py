"""Small deterministic numerical helpers: geometric mean, a scalar search in log
space, non-negative least squares, relative errors."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np

# --------------------------------------------------------------------------- helpers


def geomean(values: Iterable[float]) -> float:
    v = np.asarray(list(values), dtype=np.float64)
    return float(np.exp(np.mean(np.log(v))))


def _minimize_log_scalar(
    loss: Callable[[float], float], lo: float = 1e-3, hi: float = 1e3, grid: int = 400
) -> float:
    """Minimise ``loss(x)`` over ``x > 0``: a log-spaced grid, then golden section."""
    xs = np.exp(np.linspace(math.log(lo), math.log(hi), grid))
    values = [loss(float(x)) for x in xs]
    k = int(np.argmin(values))
    a = math.log(xs[max(k - 1, 0)])
    b = math.log(xs[min(k + 1, grid - 1)])
    g = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = loss(math.exp(c)), loss(math.exp(d))
    for _ in range(80):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = loss(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = loss(math.exp(d))
    return math.exp((a + b) / 2.0)


def _nnls(a: np.ndarray, b: np.ndarray, max_iter: int = 200) -> np.ndarray:
    """Non-negative least squares ``min ||a x - b||, x >= 0`` (Lawson–Hanson)."""
    n = a.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    w = a.T @ (b - a @ x)
    tol = 1e-12 * max(1.0, float(np.abs(a).max()) * float(np.abs(b).max()))
    for _ in range(max_iter):
        if passive.all() or (w[~passive] <= tol).all():
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        for _ in range(max_iter):
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            mask = passive & (z <= 0)
            alpha = float(np.min(x[mask] / (x[mask] - z[mask])))
            x = x + alpha * (z - x)
            passive &= x > tol
            x[~passive] = 0.0
        w = a.T @ (b - a @ x)
    return x


def relative_errors(pred: Sequence[float], meas: Sequence[float]) -> np.ndarray:
    p, m = np.asarray(pred, dtype=np.float64), np.asarray(meas, dtype=np.float64)
    return np.abs(p - m) / m
