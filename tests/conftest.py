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
