"""Interval estimates over scenarios and seeds, after Agarwal et al., "Deep RL at the
Edge of the Statistical Precipice" (NeurIPS'21; the rliable library's definitions).

Scores are lower-is-better (normalised average JCT). With ``scores[s]`` the array of a
policy's per-seed scores in scenario ``s``:

- IQM: the interquartile mean of all scores pooled over scenarios and seeds
  (``scipy.stats.trim_mean(..., 0.25)``, rliable's ``aggregate_iqm``).
- 95 % confidence intervals: stratified percentile bootstrap — seeds are resampled
  with replacement *within* each scenario (the strata), scenarios kept — computed by
  ``scipy.stats.bootstrap`` with one sample per scenario (it resamples each sample
  independently, which is exactly the stratified bootstrap), ``method="percentile"``.
  (rliable itself does this with ``arch``'s StratifiedBootstrap; ``arch`` 7.2 does
  not import beside pandas 3 in this environment, so scipy, a kept library, does it.)
- Probability of improvement P(X < Y): per scenario the share of seed pairs
  ``(i, j)`` with ``x_i < y_j`` (ties count 1/2), averaged over scenarios; its CI
  resamples X's and Y's seeds independently within each scenario.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

CONFIDENCE = 0.95


def iqm(values: np.ndarray, axis: int | None = None) -> np.ndarray:
    """Interquartile mean (25 % trimmed from each end)."""
    return stats.trim_mean(values, 0.25, axis=axis)


def _pooled_iqm(*strata: np.ndarray, axis: int = -1) -> np.ndarray:
    return iqm(np.concatenate(strata, axis=axis), axis=axis)


def iqm_interval(
    scores: Sequence[np.ndarray], *, reps: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """(IQM, CI low, CI high) of per-scenario score arrays (see the module docstring)."""
    strata = [np.asarray(s, dtype=float) for s in scores]
    return _stratified_interval(strata, _pooled_iqm, reps, seed)


def _stratified_interval(samples, statistic, reps: int, seed: int) -> tuple[float, float, float]:
    """(statistic, CI low, CI high): percentile bootstrap resampling each sample apart."""
    point = float(statistic(*samples))
    if all(len(s) < 2 for s in samples):
        return point, point, point
    res = stats.bootstrap(
        samples,
        statistic,
        n_resamples=reps,
        confidence_level=CONFIDENCE,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    low, high = res.confidence_interval
    return point, float(low), float(high)


def _improvement(n_strata: int):
    def statistic(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        probs = []
        for x, y in zip(samples[:n_strata], samples[n_strata:], strict=True):
            xx, yy = x[..., :, None], y[..., None, :]
            probs.append(((xx < yy) + 0.5 * (xx == yy)).mean(axis=(-2, -1)))
        return np.mean(probs, axis=0)

    return statistic


def probability_of_improvement(
    x: Sequence[np.ndarray], y: Sequence[np.ndarray], *, reps: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """(P(X < Y), CI low, CI high) over paired scenarios (lower score is better)."""
    xs = [np.asarray(s, dtype=float) for s in x]
    ys = [np.asarray(s, dtype=float) for s in y]
    return _stratified_interval(xs + ys, _improvement(len(xs)), reps, seed)


def performance_profile(scores: Sequence[np.ndarray], taus: np.ndarray) -> np.ndarray:
    """Share of all (scenario, seed) scores <= each tau (lower-is-better profile)."""
    pooled = np.concatenate([np.asarray(s, dtype=float) for s in scores])
    return (pooled[None, :] <= np.asarray(taus)[:, None]).mean(axis=1)
