"""marl_sched.benchmark.stats: interval estimates against small cases worked by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from marl_sched.benchmark.stats import (
    _nan_trim_mean,
    _two_stage,
    interval,
    iqm,
    iqm_interval,
    performance_profile,
    probability_of_improvement,
    worst_case,
    zero_width_strata,
)


def test_iqm_drops_a_quarter_at_each_end() -> None:
    assert iqm(np.array([100.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, -50.0])) == pytest.approx(3.5)


def test_the_bootstraps_iqm_trims_floor_k_over_4_like_scipy() -> None:
    """The resampled IQM of a NaN-padded row of ``k`` valid values trims ``floor(k/4)``
    from each end, as ``scipy.stats.trim_mean(row, 0.25)`` does. Catches ``ceil(k/4)``
    (or any other rounding) in ``_nan_trim_mean``: every ``k`` here but 4 and 8 is not
    a multiple of 4."""
    from scipy.stats import trim_mean

    rng = np.random.default_rng(3)
    width = 11
    rows, want = [], []
    for k in range(1, width + 1):
        valid = rng.normal(size=k) * 10.0
        row = np.full(width, np.nan)
        row[rng.permutation(width)[:k]] = valid  # NaN anywhere in the row
        rows.append(row)
        want.append(trim_mean(valid, 0.25))
    assert _nan_trim_mean(np.array(rows)) == pytest.approx(want, rel=1e-12, abs=1e-12)


def _exact_two_stage(strata: list[np.ndarray]) -> list[float]:
    """Every equally likely two-stage resample's IQM: scenarios drawn with replacement,
    then each drawn slot's seeds drawn with replacement from its scenario."""
    out = []
    for drawn in itertools.product(range(len(strata)), repeat=len(strata)):
        slots = [list(itertools.product(strata[d], repeat=len(strata[d]))) for d in drawn]
        for combo in itertools.product(*slots):
            out.append(float(iqm(np.concatenate([np.array(c) for c in combo]))))
    return out


def test_hierarchical_bootstrap_matches_the_exact_two_stage_distribution() -> None:
    strata = [np.array([1.0, 2.0]), np.array([3.0, 7.0])]
    exact = _exact_two_stage(strata)  # 2^2 scenario draws x 4 x 4 seed draws
    rng = np.random.default_rng(3)
    reps = 40000
    resampled = _two_stage([[s] for s in strata], reps, rng).reshape(reps, -1)
    values = iqm(resampled, axis=1)
    for v in sorted(set(exact)):
        want = exact.count(v) / len(exact)
        assert np.mean(np.isclose(values, v)) == pytest.approx(want, abs=0.01), v
    point, low, high = iqm_interval(strata, reps=20000, seed=1)
    assert point == pytest.approx(2.5)  # middle two of 1, 2, 3, 7
    # scenarios are resampled too: the interval reaches a draw of scenario 1 twice
    assert low == pytest.approx(np.percentile(exact, 2.5), abs=0.26)
    assert high == pytest.approx(np.percentile(exact, 97.5), abs=0.26)
    assert low <= 1.5 and high >= 5.0


def test_constant_strata_still_vary_through_the_scenario_level() -> None:
    est = iqm_interval([np.array([2.0, 2.0]), np.array([4.0, 4.0])], reps=4000)
    assert est.point == 3.0
    assert est.low == pytest.approx(2.0) and est.high == pytest.approx(4.0)
    assert zero_width_strata([np.array([2.0, 2.0]), np.array([4.0, 5.0])]) == [0]
    assert zero_width_strata([np.array([2.0]), np.array([4.0, 5.0])]) == []  # one seed


def test_uneven_and_single_seed_suites_do_not_crash() -> None:
    uneven = [np.array([1.0]), np.array([0.8, 0.9, 1.1]), np.array([0.7, 0.75])]
    est = iqm_interval(uneven, reps=500)
    assert est.has_interval and est.low <= est.point <= est.high
    assert est.point == pytest.approx(iqm(np.concatenate(uneven)))
    # one seed in every scenario: a point, never a zero-width interval
    single = [np.array([0.85]), np.array([0.9]), np.array([1.0]), np.array([1.2])]
    est = iqm_interval(single)
    assert est.low is None and est.high is None
    assert est.format() == "0.950 (1 seed: no interval)"
    assert interval(single, "mean").format() == "0.988 (1 seed: no interval)"
    p = probability_of_improvement(single, [np.array([1.0])] * 4)
    assert p.point == pytest.approx(2.5 / 4) and not p.has_interval
    # uneven against uneven, other seed counts on each side
    p = probability_of_improvement(uneven, [np.array([1.0, 1.0]), np.array([1.0]), np.array([0.6])])
    assert p.has_interval and 0.0 <= p.low <= p.point <= p.high <= 1.0


def test_training_runs_are_a_level_of_their_own() -> None:
    # one scenario, two training runs of two seeds: runs are drawn first, so a
    # resample can be both seeds of run 0 (1, 1) or of run 1 (3, 3) but never 1 and
    # 3 twice over within one run slot; the mean's extremes are reachable
    runs = [[np.array([1.0, 1.0]), np.array([3.0, 3.0])]]
    rng = np.random.default_rng(0)
    res = _two_stage([[np.asarray(r) for r in runs[0]]], 20000, rng).reshape(20000, -1)
    slot0 = res[:, :2]
    assert np.all(slot0[:, 0] == slot0[:, 1])  # both seeds of a slot come from one run
    assert set(np.unique(res.mean(axis=1))) == {1.0, 2.0, 3.0}
    est = interval(runs, "mean", reps=4000)
    assert est.point == 2.0 and est.low == 1.0 and est.high == 3.0


def test_mean_and_worst_case() -> None:
    scores = [np.array([0.8, 1.0]), np.array([1.4]), [np.array([0.5]), np.array([0.7])]]
    assert interval(scores, "mean").point == pytest.approx(np.mean([0.8, 1.0, 1.4, 0.5, 0.7]))
    assert worst_case(scores) == (pytest.approx(1.4), 1)


def test_probability_of_improvement() -> None:
    x = [np.array([1.0, 2.0]), np.array([5.0, 5.0])]
    y = [np.array([2.0, 3.0]), np.array([4.0, 4.0])]
    # scenario 1: pairs (1<2, 1<3, 2=2 -> 1/2, 2<3) = 3.5/4; scenario 2: 0
    point, low, high = probability_of_improvement(x, y, reps=2000)
    assert point == pytest.approx((3.5 / 4 + 0.0) / 2)
    assert 0.0 <= low <= point <= high <= 1.0
    assert probability_of_improvement(y, x)[0] == pytest.approx(1 - point)


def test_performance_profile() -> None:
    prof = performance_profile([np.array([0.5, 1.0]), np.array([1.5, 2.0])], np.array([1.0, 2.0]))
    assert prof.tolist() == [0.5, 1.0]


def test_geomean_ratio_is_the_exp_of_the_mean_log_with_its_interval() -> None:
    from marl_sched.benchmark.stats import geomean_ratio

    rng = np.random.default_rng(4)
    # 11 scenarios x 3 training runs x 1 seed: four 30 % better, one 30 % worse, the
    # rest equal (the shape of the speed-floor ablation on the validation medium tier)
    level = [0.7] * 4 + [1.3] + [1.0] * 6
    logs = [[np.log([level[s]]) + rng.normal(0, 0.02, 1) for _ in range(3)]
            for s in range(11)]  # fmt: skip
    est = geomean_ratio(logs, seed=1)
    pooled = np.concatenate([np.concatenate(r) for r in logs])
    assert est.point == pytest.approx(float(np.exp(pooled.mean())))
    assert est.low < est.point < est.high
    # a 10 % gain carried by four scenarios in eleven: the interval holds 1
    assert est.high > 1.0 > est.point
    # the same gain in every scenario excludes 1
    even = [[np.log([0.9]) + rng.normal(0, 0.02, 1) for _ in range(3)] for _ in range(11)]
    assert geomean_ratio(even, seed=1).high < 1.0
    # one score per scenario: no interval
    assert geomean_ratio([np.log([0.9])] * 5).low is None
