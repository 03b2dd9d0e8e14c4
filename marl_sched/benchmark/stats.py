"""Interval estimates over scenarios, training runs and seeds, after Agarwal et al.,
"Deep RL at the Edge of the Statistical Precipice" (NeurIPS'21; rliable's definitions),
with a hierarchical bootstrap in place of rliable's stratified one.

Scores are lower-is-better (normalised average JCT). A policy's scores are given per
scenario, each either one array over seeds (one training run) or a list of such arrays,
one per training run (:data:`Scores`); scenarios may hold different numbers of runs
and seeds.

- IQM: the interquartile mean of all scores pooled over scenarios, runs and seeds
  (``scipy.stats.trim_mean(..., 0.25)``, rliable's ``aggregate_iqm``); the mean is
  the plain mean of the same pool.
- Worst case: the largest per-scenario mean score (the scenario where the policy is
  furthest behind the reference), with the scenario's index.
- 95 % confidence intervals: a **hierarchical** percentile bootstrap. Each replicate
  draws the scenarios with replacement (as many as there are), then, inside each drawn
  scenario, its training runs with replacement and each run's seeds with
  replacement; the statistic is taken over the replicate's pooled scores. So the
  interval covers which scenarios were drawn, which training runs and which seeds,
  not seed noise alone (Davison & Hinkley 1997, §3.8, two-stage sampling). Scenarios
  with one seed and scenarios with several mix freely.
- No interval from one sample: when every scenario holds a single score (one seed,
  one run) the interval is ``None`` ("1 seed: no interval"), never the degenerate
  ``[x, x]`` — resampling one value per scenario would describe scenario choice only
  and be read as a seed interval.
- Zero-width strata: a scenario whose several scores are all equal gives the seed
  level nothing to resample (:func:`zero_width_strata`); reports flag them.
- Probability of improvement P(X < Y): per scenario the share of (x, y) score pairs
  with ``x < y`` (ties count 1/2), averaged over scenarios; its interval resamples
  scenarios (paired: X and Y draw the same ones), then X's and Y's runs and seeds
  independently within each.

Why not rliable itself (tried): rliable 1.2.0 (the newest) pins
``arch < 8``; ``arch`` 7.2 does not import beside pandas 3 in this environment, and
with ``arch`` 8.0.0 installed beside pandas 3.1 rliable's ``get_interval_estimates``
fails at once (``TypeError``: arch 8 no longer accepts the ``random_state`` keyword
rliable passes to ``IIDBootstrap``). rliable also needs a rectangular
runs x tasks matrix (one seed count for every scenario) and only resamples runs within
tasks, never tasks, so it could not give the hierarchical interval above even where it
imports. The definitions (IQM, P(X < Y), profiles) are rliable's; the bootstrap is
written here in NumPy, vectorised over replicates.
"""

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
    """(reps, S, n_max) hierarchical resamples, NaN-padded to the largest scenario:
    each replicate's S slots draw a scenario with replacement, and every slot resamples
    its scenario's runs and seeds afresh (a scenario drawn twice gets two resamples)."""
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
    """The geometric mean of paired ratios (a candidate's score over a reference's in
    the same scenario, training seed and evaluation seed), given as their logs in
    :data:`Scores` layout, with the hierarchical interval of the mean log mapped through
    ``exp`` (monotone, so the percentile interval maps exactly). What a recipe change
    is judged by: below 1 is better, and an interval that holds 1 does not say which."""
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
