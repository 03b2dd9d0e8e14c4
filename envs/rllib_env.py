"""The RLlib ``MultiAgentEnv`` of ``ClusterPlacement-v1``: the Ray-free
:class:`envs.cluster_env.ClusterPlacementCore` with RLlib's base class, in a module of
its own so that only RLlib users import Ray."""

from __future__ import annotations

from ray.rllib.env.multi_agent_env import MultiAgentEnv

from envs.cluster_env import ClusterPlacementCore


class ClusterPlacementEnv(ClusterPlacementCore, MultiAgentEnv):
    """RLlib multi-agent env ``ClusterPlacement-v1`` (:mod:`envs.cluster_env` is its
    reference). The core's methods come first; ``MultiAgentEnv.__init__`` runs from the
    core's ``super().__init__()``."""
