"""Fixtures of the environment tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.envs.helpers import TINY


@pytest.fixture
def tiny_env() -> Callable[..., Any]:
    """``tiny_env(**env_overrides)`` builds the RLlib env on configs/tiny.yaml."""
    from envs import make_env

    def build(**overrides: Any):
        return make_env(TINY, env=overrides or None)

    return build
