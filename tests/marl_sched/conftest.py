"""Fixtures of the marl_sched tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def fingerprint_cache(monkeypatch, tmp_path) -> None:
    """The test split's content fingerprints cached in a temporary folder, not in the
    user's ``~/.cache`` (``marl_sched.benchmark.suite.copied_test_rows``)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
