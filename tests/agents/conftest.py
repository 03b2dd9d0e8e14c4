"""Fixtures of the agents tests: one Ray session for the whole test session."""

from __future__ import annotations

import pytest


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
