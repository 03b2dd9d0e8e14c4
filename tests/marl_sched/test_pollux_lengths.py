"""Tests of marl_sched.pollux_lengths: the shipped table and the interpolation rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marl_sched.pollux_lengths import (
    ITERATIONS_FILE,
    POLLUX_MAX_EPOCHS,
    derive_iterations_table,
    pollux_iterations,
)


def test_interpolates_between_measured_batch_sizes() -> None:
    # yolov3: 64 -> 14577, 128 -> 8075 (validation-<B>.csv, iteration at epoch 50)
    assert pollux_iterations("yolov3", 64) == 14577.0
    assert pollux_iterations("yolov3", 96) == pytest.approx((14577 + 8075) / 2)
    # outside the measured range: the nearest end
    assert pollux_iterations("yolov3", 4) == pollux_iterations("yolov3", 8)
    with pytest.raises(KeyError):
        pollux_iterations("gpt9", 8)


def test_a_bigger_batch_trains_fewer_iterations() -> None:
    table = json.loads(ITERATIONS_FILE.read_text(encoding="utf-8"))
    assert set(table) == set(POLLUX_MAX_EPOCHS)
    for app, points in table.items():
        sizes = [int(b) for b in points]
        assert sizes == sorted(sizes), app
        values = list(points.values())
        assert values == sorted(values, reverse=True), app


@pytest.mark.shared_data
def test_shipped_table_rederives_from_the_profiles(shared_data: Path) -> None:
    derived = derive_iterations_table(shared_data / "profiles" / "pollux")
    assert derived == json.loads(ITERATIONS_FILE.read_text(encoding="utf-8"))
