"""PettingZoo ``ParallelEnv`` adapter of ``marl_sched/ClusterPlacement-v1``
(:mod:`envs.cluster_env` is the reference), Ray-free.

Every live agent gets an observation, the team reward and flags every cycle; all leave
together at the end. Only the acting agent observes the cluster; the others get an
all-zero observation whose ``action_mask`` (``int8``) allows only their no-op slot, and
their actions are ignored. ``action_space(agent).sample()`` is legal. In a move the
acting agent's keep is also its own slot: read ``acting_agent``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo.utils.env import ParallelEnv

from envs.cluster_env import DEFAULT_CONFIG, ClusterPlacementCore, MaskedDiscrete
from marl_sched.config import ExperimentConfig


class ClusterPlacementParallelEnv(ParallelEnv):
    """The parallel-API view of :class:`ClusterPlacementEnv` (same arguments), over its
    Ray-free core."""

    metadata = {"render_modes": [], "name": "cluster_placement_v1", "is_parallelizable": True}

    def __init__(
        self, config: str | Path | ExperimentConfig | Mapping = DEFAULT_CONFIG, **kwargs: Any
    ) -> None:
        self.env = ClusterPlacementCore(config, **kwargs)
        self.possible_agents = list(self.env.possible_agents)
        self.agents: list[str] = []
        base = self.env.builder.observation_space
        n = int(self.env.builder.action_space.n)
        self._obs_space = gym.spaces.Dict(
            {**base.spaces, "action_mask": gym.spaces.Box(0, 1, shape=(n,), dtype=np.int8)}
        )
        self._obs_spaces = {a: self._obs_space for a in self.possible_agents}
        self._idle = {
            a: _idle_obs(self._obs_space, self.env.builder.noop_mask(k))
            for k, a in enumerate(self.possible_agents)
        }
        self._act_spaces = {a: MaskedDiscrete(n, self._mask_of(a)) for a in self.possible_agents}
        self.render_mode = None

    def observation_space(self, agent: str) -> gym.spaces.Dict:
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> gym.spaces.Discrete:
        return self._act_spaces[agent]

    @property
    def acting_agent(self) -> str | None:
        return self.env.acting_agent

    def reset(
        self, seed: int | None = None, options: dict | None = None
    ) -> tuple[dict[str, dict], dict[str, dict]]:
        obs, _ = self.env.reset(seed=seed, options=options)
        self.agents = list(self.possible_agents)
        return self._observations(obs), {a: {} for a in self.agents}

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            raise RuntimeError("step() after the episode ended: call reset()")
        acting = self.env.acting_agent
        if acting not in actions:
            raise ValueError(f"no action for the acting agent {acting}")
        obs_a, rew, term, trunc, info = self.env.step({acting: actions[acting]})
        reward = float(rew.get(acting, 0.0))  # the team reward
        agents = self.agents
        terminated, truncated = bool(term["__all__"]), bool(trunc["__all__"])
        rewards = {a: reward for a in agents}
        terminations = {a: terminated for a in agents}
        truncations = {a: truncated for a in agents}
        if terminated or truncated:
            obs = {a: _copy(self._idle[a]) for a in agents}
            final = self.env.final_info()
            infos = {a: dict(final) for a in agents}
            self.agents = []
        else:
            obs = self._observations(obs_a)
            infos = {a: {} for a in agents}
        return obs, rewards, terminations, truncations, infos

    def _observations(self, acting_obs: dict) -> dict[str, dict[str, np.ndarray]]:
        out = {a: _copy(self._idle[a]) for a in self.agents}
        for a, obs in acting_obs.items():
            out[a] = {**obs, "action_mask": obs["action_mask"].astype(np.int8)}
        return out

    def _mask_of(self, agent: str):
        """The mask ``action_space(agent).sample()`` draws under: the acting agent's
        legal actions, another live agent's no-op; none once the episode is over."""
        idle = self._idle[agent]["action_mask"]

        def mask() -> np.ndarray | None:
            if not self.agents:
                return None
            if agent == self.env.acting_agent:
                return self.env.action_spaces[agent]._current_mask()
            return idle

        return mask

    def close(self) -> None:
        pass


def _idle_obs(space: gym.spaces.Dict, mask: np.ndarray) -> dict[str, np.ndarray]:
    out = {k: np.zeros(sp.shape, dtype=sp.dtype) for k, sp in space.spaces.items()}
    out["action_mask"][:] = mask
    return out


def _copy(obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v.copy() for k, v in obs.items()}
