"""The multi-agent placement environment over the simulator, ``ClusterPlacement-v1``.

``make_env(config)`` returns the RLlib ``MultiAgentEnv``
(:class:`envs.rllib_env.ClusterPlacementEnv`; :mod:`envs.cluster_env`'s docstring is the
environment's reference); ``make_parallel_env(config)`` the PettingZoo
``ParallelEnv`` adapter. ``config`` is a path to a YAML experiment config or a loaded
``ExperimentConfig``.

Importing this package is cheap, and only the RLlib env imports Ray: the PettingZoo
adapter wraps the Ray-free core (:class:`envs.cluster_env.ClusterPlacementCore`).
``ENV_ID`` is registered with gymnasium here (``gymnasium.make(ENV_ID, config=...)``)
and with RLlib by :func:`register_rllib` (which imports Ray); RLlib's env config
is a dict ``{"config": <path or ExperimentConfig>, "env": {<env: overrides>}}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium

from envs.config import ENV_ID, ENV_ID_V2, ENV_VERSION, EnvConfig, env_config

if TYPE_CHECKING:
    from envs.parallel import ClusterPlacementParallelEnv
    from envs.rllib_env import ClusterPlacementEnv
    from marl_sched.config import ExperimentConfig


def make_env(config: str | Path | ExperimentConfig, **kwargs: Any) -> ClusterPlacementEnv:
    """The RLlib ``MultiAgentEnv`` (keyword arguments: ``env=`` overrides, ``jobs=``,
    ``windows=``, ``seed=``; :class:`envs.rllib_env.ClusterPlacementEnv`). Imports Ray."""
    from envs.rllib_env import ClusterPlacementEnv

    return ClusterPlacementEnv(config, **kwargs)


def make_parallel_env(
    config: str | Path | ExperimentConfig, **kwargs: Any
) -> ClusterPlacementParallelEnv:
    """The PettingZoo ``ParallelEnv`` adapter (same keyword arguments as :func:`make_env`).
    Does not import Ray."""
    from envs.parallel import ClusterPlacementParallelEnv

    return ClusterPlacementParallelEnv(config, **kwargs)


def _rllib_creator(env_ctx: Any) -> ClusterPlacementEnv:
    return make_env(dict(env_ctx or {}))


def register_rllib() -> str:
    """Register ``ENV_ID`` with RLlib's ``register_env``; returns ``ENV_ID``."""
    from ray.tune.registry import register_env

    register_env(ENV_ID, _rllib_creator)
    return ENV_ID


if ENV_ID not in gymnasium.registry:
    gymnasium.register(
        id=ENV_ID,
        entry_point="envs.rllib_env:ClusterPlacementEnv",
        disable_env_checker=True,  # a multi-agent env: gymnasium's checker is single-agent
        order_enforce=False,
    )
# v2: v1 with env.migration on (an ``env=`` given to gymnasium.make replaces it whole)
if ENV_ID_V2 not in gymnasium.registry:
    gymnasium.register(
        id=ENV_ID_V2,
        entry_point="envs.rllib_env:ClusterPlacementEnv",
        disable_env_checker=True,
        order_enforce=False,
        kwargs={"env": {"migration": True}},
    )

__all__ = [
    "ENV_ID",
    "ENV_ID_V2",
    "ENV_VERSION",
    "EnvConfig",
    "env_config",
    "make_env",
    "make_parallel_env",
    "register_rllib",
]
