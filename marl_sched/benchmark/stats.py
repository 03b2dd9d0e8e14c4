"""Interval estimates over scenarios, training runs and seeds, after Agarwal et al.
(NeurIPS'21; rliable's definitions), with a hierarchical bootstrap.

Scores are lower-is-better; a policy's scores are given per scenario, as one array over
seeds or a list of such arrays, one per training run (:data:`Scores`).

- IQM: the interquartile mean of all scores pooled (``trim_mean(..., 0.25)``).
- Worst case: the largest per-scenario mean score, with the scenario's index.
- 95 % CIs: a hierarchical percentile bootstrap: scenarios with replacement, then each
  drawn scenario's runs, then each run's seeds. ``None`` when every scenario holds a
  single score. :func:`zero_width_strata` flags scenarios whose scores are all equal.
- P(X < Y): per scenario the share of pairs with ``x < y`` (ties 1/2), averaged over
  scenarios; its interval resamples scenarios paired, runs and seeds independently.

rliable itself is not used: it does not import beside pandas 3 here and cannot resample
scenarios."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95

#: per scenario: an array over seeds (one training run), or one such array per run
Scores = Sequence[np.ndarray | Sequence[float] | Sequence[np.ndarray]]


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its 95 % interval (``None`` when there is none to give)."""

    point: float
    low: float | None
    high: float | None

    @property
    def has_interval(self) -> bool:
        return self.low is not None

    def __iter__(self):  # (point, low, high), as before the dataclass
        return iter((self.point, self.low, self.high))

    def __getitem__(self, i: int) -> float | None:
        return (self.point, self.low, self.high)[i]

    def format(self, digits: int = 3, none: str = "1 seed: no interval") -> str:
        """``0.850 [0.820, 0.880]``, or ``0.850 (1 seed: no interval)``."""
        if not self.has_interval:
            return f"{self.point:.{digits}f} ({none})"
        return f"{self.point:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def iqm(values: np.ndarray, axis: int | None = None) -> np.ndarray:
    """Interquartile mean (25 % trimmed from each end)."""
    return stats.trim_mean(values, 0.25, axis=axis)


def _runs(stratum) -> list[np.ndarray]:
    """One scenario's scores as a list of per-run 1-D arrays (each non-empty)."""
    if isinstance(stratum, np.ndarray) and stratum.ndim == 1:
        runs = [stratum]
    elif isinstance(stratum, np.ndarray):
        runs = list(stratum)
    elif len(stratum) and np.ndim(stratum[0]) == 1:
        runs = list(stratum)
    else:
        runs = [stratum]
    out = [np.asarray(r, dtype=float).ravel() for r in runs]
    out = [r for r in out if r.size]
    if not out:
        raise ValueError("a scenario has no scores")
    return out


def _strata(scores: Scores) -> list[list[np.ndarray]]:
    strata = [_runs(s) for s in scores]
    if not strata:
        raise ValueError("no scenarios")
    return strata


def _pooled(strata: list[list[np.ndarray]]) -> np.ndarray:
    return np.concatenate([r for runs in strata for r in runs])


def single_sample(scores: Scores) -> bool:
    """True when every scenario holds one score (one seed of one run)."""
    return all(sum(r.size for r in runs) == 1 for runs in _strata(scores))


def zero_width_strata(scores: Scores) -> list[int]:
    """Indices of the scenarios with several scores, all equal: their seeds (and runs)
    vary nothing, so the seed level of the bootstrap has nothing to resample there."""
    out = []
    for i, runs in enumerate(_strata(scores)):
        pooled = np.concatenate(runs)
        if pooled.size > 1 and np.all(pooled == pooled[0]):
            out.append(i)
    return out


def _within(runs: list[np.ndarray], reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, n) resamples of one scenario: its runs with replacement, then, in each
    slot of run k, a seed drawn with replacement from the run drawn for k."""
    sizes = [r.size for r in runs]
    n = sum(sizes)
    flat = np.concatenate(runs)
    offsets = np.cumsum([0, *sizes[:-1]])
    sizes_a = np.asarray(sizes)
    chosen = rng.integers(0, len(runs), size=(reps, len(runs)))  # run drawn per run slot
    slot_run = np.repeat(np.arange(len(runs)), sizes)  # which run slot each position is
    src = chosen[:, slot_run]  # (reps, n) source run per position
    pick = np.floor(rng.random((reps, n)) * sizes_a[src]).astype(int)
    return flat[offsets[src] + pick]


def _two_stage(strata: list[list[np.ndarray]], reps: int, rng) -> np.ndarray:
    """(reps, S, n_max) hierarchical resamples, NaN-padded: each slot draws a scenario
    with replacement and resamples its runs and seeds afresh."""
    n_max = max(sum(r.size for r in runs) for runs in strata)
    drawn = rng.integers(0, len(strata), size=(reps, len(strata)))
    out = np.full((reps, len(strata), n_max), np.nan)
    for s, runs in enumerate(strata):
        mask = drawn == s
        count = int(mask.sum())
        if count:
            res = _within(runs, count, rng)
            block = np.full((count, n_max), np.nan)
            block[:, : res.shape[1]] = res
            out[mask] = block
    return out


def _nan_trim_mean(x: np.ndarray) -> np.ndarray:
    """Row-wise IQM of ``x`` (reps, m) ignoring NaN, trimming ``int(0.25 k)`` values
    from each end of a row's ``k`` valid ones, as ``scipy.stats.trim_mean`` does."""
    x = np.sort(x, axis=1)  # NaN last
    k = np.sum(~np.isnan(x), axis=1)
    g = (0.25 * k).astype(int)
    pos = np.arange(x.shape[1])[None, :]
    keep = (pos >= g[:, None]) & (pos < (k - g)[:, None])
    return np.where(keep, x, 0.0).sum(axis=1) / keep.sum(axis=1)


_STATISTICS = {
    "iqm": (lambda pooled: float(iqm(pooled)), _nan_trim_mean),
    "mean": (lambda pooled: float(np.mean(pooled)), lambda x: np.nanmean(x, axis=1)),
}


def _percentiles(values: np.ndarray) -> tuple[float, float]:
    alpha = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(values, [alpha, 100 - alpha])
    return float(low), float(high)


def interval(
    scores: Scores, statistic: str = "iqm", *, reps: int = 2000, seed: int = 0
) -> Estimate:
    """``statistic`` (``iqm`` or ``mean``) of the pooled scores with its hierarchical
    bootstrap interval (see the module docstring); no interval for single samples."""
    point_fn, rep_fn = _STATISTICS[statistic]
    strata = _strata(scores)
    point = point_fn(_pooled(strata))
    if single_sample(strata):
        return Estimate(point, None, None)
    resampled = _two_stage(strata, reps, np.random.default_rng(seed))
    low, high = _percentiles(rep_fn(resampled.reshape(reps, -1)))
    return Estimate(point, low, high)


def iqm_interval(scores: Scores, *, reps: int = 2000, seed: int = 0) -> Estimate:
    """(IQM, CI low, CI high) of per-scenario scores; low/high None for one sample."""
    return interval(scores, "iqm", reps=reps, seed=seed)


def geomean_ratio(log_ratios: Scores, *, reps: int = 2000, seed: int = 0) -> Estimate:
    """The geometric mean of paired ratios (given as logs in :data:`Scores` layout)
    with the hierarchical interval of the mean log mapped through ``exp``. Below 1 is
    better."""
    point, low, high = interval(log_ratios, "mean", reps=reps, seed=seed)
    return Estimate(
        float(np.exp(point)),
        None if low is None else float(np.exp(low)),
        None if high is None else float(np.exp(high)),
    )


def worst_case(scores: Scores) -> tuple[float, int]:
    """(the largest per-scenario mean score, that scenario's index)."""
    means = [float(np.mean(np.concatenate(runs))) for runs in _strata(scores)]
    i = int(np.argmax(means))
    return means[i], i


def _pairwise(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(x < y) (ties 1/2) over the last axes' pairs: x (..., n), y (..., m)."""
    xx, yy = x[..., :, None], y[..., None, :]
    return ((xx < yy) + 0.5 * (xx == yy)).mean(axis=(-2, -1))


def probability_of_improvement(
    x: Scores, y: Scores, *, reps: int = 2000, seed: int = 0
) -> Estimate:
    """(P(X < Y), CI low, CI high) over paired scenarios (lower score is better);
    no interval when both have a single score in every scenario."""
    xs, ys = _strata(x), _strata(y)
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} scenarios against {len(ys)}")
    per = [_pairwise(np.concatenate(a), np.concatenate(b)) for a, b in zip(xs, ys, strict=True)]
    point = float(np.mean(per))
    if single_sample(xs) and single_sample(ys):
        return Estimate(point, None, None)
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, len(xs), size=(reps, len(xs)))  # paired: one draw for X and Y
    p = np.empty((reps, len(xs)))
    for s, (a, b) in enumerate(zip(xs, ys, strict=True)):
        mask = drawn == s
        count = int(mask.sum())
        if count:
            p[mask] = _pairwise(_within(a, count, rng), _within(b, count, rng))
    low, high = _percentiles(p.mean(axis=1))
    return Estimate(point, low, high)


def performance_profile(scores: Scores, taus: np.ndarray) -> np.ndarray:
    """Share of all (scenario, run, seed) scores <= each tau (lower-is-better profile)."""
    pooled = _pooled(_strata(scores))
    return (pooled[None, :] <= np.asarray(taus)[:, None]).mean(axis=1)
