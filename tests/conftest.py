"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

# The real data shipped beside the repo: <repo>/../shared/data (see its PROVENANCE.md).
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` beside the repo; skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not found: {SHARED_DATA} does not exist")
    return SHARED_DATA


@pytest.fixture(autouse=True, scope="session")
def _resume_key(tmp_path_factory):
    """Run folders signed during the tests use a throwaway key, not the user's."""
    import os

    old = os.environ.get("MARL_SCHED_KEY_FILE")
    os.environ["MARL_SCHED_KEY_FILE"] = str(tmp_path_factory.mktemp("keys") / "resume.key")
    yield
    if old is None:
        os.environ.pop("MARL_SCHED_KEY_FILE", None)
    else:
        os.environ["MARL_SCHED_KEY_FILE"] = old


@pytest.fixture(autouse=True)
def _benchmark_tracks_until_migration(monkeypatch) -> None:
    """Until ``simulation.migration`` exists (issue 33, branch migsim), the benchmark
    tracks (``marl_sched.benchmark.suite.TRACKS``) run with stand-in overrides of
    another key (placement: backfill on, full: off), so the tracks' plumbing and every
    ``marl-sched benchmark`` call are tested; once the key exists this does nothing
    and the real tracks run."""
    from tests.marl_sched.benchmark_helpers import HAS_MIGRATION

    if not HAS_MIGRATION:
        from marl_sched.benchmark.suite import TRACKS

        monkeypatch.setitem(TRACKS, "placement", ("simulation.backfill=true",))
        monkeypatch.setitem(TRACKS, "full", ("simulation.backfill=false",))
