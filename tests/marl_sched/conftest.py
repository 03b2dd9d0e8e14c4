"""Fixtures of the marl_sched tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def fingerprint_cache(monkeypatch, tmp_path) -> None:
    """The test split's content fingerprints cached in a temporary folder, not in the
    user's ``~/.cache`` (``marl_sched.benchmark.suite.copied_test_rows``)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run the test inside tmp_path so files can be named relatively, as given (the
    ``marl_sched.traces`` tests)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
