"""marl_sched.benchmark.stats: interval estimates against small cases worked by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from marl_sched.benchmark.stats import (
    iqm,
    iqm_interval,
    performance_profile,
    probability_of_improvement,
)


def test_iqm_drops_a_quarter_at_each_end() -> None:
    assert iqm(np.array([100.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, -50.0])) == pytest.approx(3.5)


def test_stratified_interval_matches_the_exact_bootstrap_distribution() -> None:
    # two scenarios, two seeds each: 4 x 4 equally likely stratified resamples
    strata = [np.array([1.0, 2.0]), np.array([3.0, 7.0])]
    exact = []
    for a in itertools.product(strata[0], repeat=2):
        for b in itertools.product(strata[1], repeat=2):
            exact.append(iqm(np.array(a + b)))
    point, low, high = iqm_interval(strata, reps=20000, seed=1)
    assert point == pytest.approx(2.5)  # middle two of 1, 2, 3, 7
    assert low == pytest.approx(np.percentile(exact, 2.5), abs=1e-9)
    assert high == pytest.approx(np.percentile(exact, 97.5), abs=1e-9)
    # seeds are never mixed across scenarios: constant strata give a point interval
    assert iqm_interval([np.array([2.0, 2.0]), np.array([4.0, 4.0])]) == (3.0, 3.0, 3.0)


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
