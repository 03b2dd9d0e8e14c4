"""Fixtures of the marl_sched tests."""

from __future__ import annotations

import pytest

from tests.marl_sched.benchmark_helpers import HAS_MIGRATION


@pytest.fixture
def benchmark_tracks(monkeypatch, tmp_path) -> None:
    """Until ``simulation.migration`` exists, the benchmark tracks' plumbing runs with
    stand-in overrides of another key (placement: backfill on, full: off); once it
    exists the real ``TRACKS`` run. The content fingerprints of the test split are
    cached in a temporary folder."""
    from marl_sched.benchmark.suite import TRACKS

    if not HAS_MIGRATION:
        monkeypatch.setitem(TRACKS, "placement", ("simulation.backfill=true",))
        monkeypatch.setitem(TRACKS, "full", ("simulation.backfill=false",))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
