"""Fixtures of the agents tests: one Ray session for the whole test session."""

from __future__ import annotations

import pytest

from tests.agents.crafted import ReachedRay


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray (2 CPUs, no dashboard) shared by every test that needs one."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture
def own_key(tmp_path, monkeypatch):
    """This test's own signing key (``MARL_SCHED_KEY_FILE``), never the user's."""
    monkeypatch.setenv("MARL_SCHED_KEY_FILE", str(tmp_path / "keys" / "resume.key"))


@pytest.fixture
def ray_calls(monkeypatch):
    """Ray's start replaced: records the call and stops the command there."""
    calls = []

    def fake_start(*args, **kwargs):
        calls.append(args)
        raise ReachedRay

    monkeypatch.setattr("agents.commands.start_ray", fake_start)
    return calls
