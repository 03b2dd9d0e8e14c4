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
