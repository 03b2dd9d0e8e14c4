"""PettingZoo ``ParallelEnv`` adapter of ``marl_sched/ClusterPlacement-v0``.

Same agents, decisions, observations and rewards as
:class:`envs.cluster_env.ClusterPlacementEnv` (its docstring is the reference), with
the parallel API's conventions:

- every live agent gets an observation, a reward and flags every cycle; agents stay
  live until the episode ends, then all leave together (``agents`` becomes empty);
- only the acting agent decides: its ``action_mask`` is the RLlib env's; every other
  agent's mask allows only its **no-op** slot ``max_groups + k`` (forward to itself).
  The actions of non-acting agents are ignored, whatever they are; the acting
  agent's action is checked as in the RLlib env (``ValueError`` if illegal or
  missing). Find the acting agent as the one whose mask is not the no-op one, or
  via ``env.acting_agent``;
- ``action_mask`` is ``int8`` (PettingZoo's convention, what
  ``Discrete.sample(mask=...)`` takes) instead of float32; the other fields and their
  spaces are the RLlib env's;
- every agent receives the step's team reward ``r_t`` (no accumulation is needed,
  since every agent observes every cycle);
- at the end every agent's ``infos[agent]["metrics"]`` carries the episode metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo.utils.env import ParallelEnv

from envs.cluster_env import DEFAULT_CONFIG, ClusterPlacementEnv
from marl_sched.config import ExperimentConfig


class ClusterPlacementParallelEnv(ParallelEnv):
    """The parallel-API view of :class:`ClusterPlacementEnv` (same arguments)."""

    metadata = {"render_modes": [], "name": "cluster_placement_v0", "is_parallelizable": True}

    def __init__(
        self, config: str | Path | ExperimentConfig | Mapping = DEFAULT_CONFIG, **kwargs: Any
    ) -> None:
        self.env = ClusterPlacementEnv(config, **kwargs)
        self.possible_agents = list(self.env.possible_agents)
        self.agents: list[str] = []
        base = self.env.builder.space
        n = self.env.layout.n_actions
        self._obs_space = gym.spaces.Dict(
            {**base.spaces, "action_mask": gym.spaces.Box(0, 1, shape=(n,), dtype=np.int8)}
        )
        self._obs_spaces = {a: self._obs_space for a in self.possible_agents}
        self._act_spaces = {a: gym.spaces.Discrete(n) for a in self.possible_agents}
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
        self.env.reset(seed=seed, options=options)
        self.agents = list(self.possible_agents)
        return self._observations(), {a: {} for a in self.agents}

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            raise RuntimeError("step() after the episode ended: call reset()")
        acting = self.env.acting_agent
        if acting not in actions:
            raise ValueError(f"no action for the acting agent {acting}")
        _, _, term, trunc, _ = self.env.step({acting: actions[acting]})
        reward = float(self.env.last_team_reward)
        obs = self._observations()
        agents = self.agents
        rewards = {a: reward for a in agents}
        terminated, truncated = bool(term["__all__"]), bool(trunc["__all__"])
        terminations = {a: terminated for a in agents}
        truncations = {a: truncated for a in agents}
        if terminated or truncated:
            metrics = self.env.metrics()
            infos = {a: {"metrics": metrics} for a in agents}
            self.agents = []
        else:
            infos = {a: {} for a in agents}
        return obs, rewards, terminations, truncations, infos

    def _observations(self) -> dict[str, dict[str, np.ndarray]]:
        out = self.env.observe_all()
        for obs in out.values():
            obs["action_mask"] = obs["action_mask"].astype(np.int8)
        return out

    def close(self) -> None:
        pass
