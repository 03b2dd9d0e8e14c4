"""``ClusterPlacement-v1`` served in groups: each episode window several times in a row.

What ``train.advantage: group`` (:mod:`agents.group_baseline`) trains on: the same
environment (:class:`~envs.rllib_env.ClusterPlacementEnv`, same dynamics,
observations and rewards), whose windows come ``group_size`` times each, and whose
infos tell the learner when (simulated time) each decision was taken, its index in
the episode, the job it concerns and the episode's window; the terminal infos also
give each job's share of the team return (``train.advantage: job``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envs.rllib_env import ClusterPlacementEnv

#: per-step info keys :class:`GroupRolloutEnv` adds (with each observation)
SIM_TIME = "sim_time"
ENV_T = "env_t"
EPISODE_KEY = "episode_key"
JOB_ID = "job_id"
#: terminal info key: ``[(job id, share of the team return), ...]`` in arrival order
#: (:meth:`envs.rewards.TeamReward.job_shares`)
JOB_SHARES = "job_shares"


class GroupRolloutEnv(ClusterPlacementEnv):
    """``ClusterPlacement-v1`` that serves each episode ``group_size`` times in a row
    and tags every observation's info with ``sim_time`` (s), ``env_t`` (the decision's
    index in the episode), ``job_id`` (the job the decision is about; -1 in the
    terminal infos) and ``episode_key``; the terminal infos also carry ``job_shares``.

    A reset with a seed or options starts a new group (the window the seed draws);
    the next ``group_size - 1`` resets without them replay its window. The
    environment's dynamics and observations are those of the parent; only the order
    of the windows differs. ``group_size`` comes in the RLlib env-config dict
    (``{"config": ..., "group_size": K, ...}``).
    """

    def __init__(self, config: Mapping | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        self.group_size = int(config.pop("group_size", 1))
        if self.group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {self.group_size}")
        super().__init__(config, **kwargs)
        self._replays_left = 0
        self._env_t = 0

    def reseed(self, seed: int) -> None:
        """The parent's :meth:`reseed`, and the next reset starts a new group."""
        super().reseed(seed)
        self._replays_left = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is None and not options and self._replays_left > 0:
            self._replays_left -= 1
            options = {"source": self.source, "window_start": self.window_start}
        else:
            self._replays_left = self.group_size - 1
        obs, infos = super().reset(seed=seed, options=options)
        self._env_t = 0
        return obs, self._tagged(obs, infos)

    def step(self, action_dict):
        obs, rewards, terminated, truncated, infos = super().step(action_dict)
        self._env_t += 1
        end = bool(terminated.get("__all__"))
        return obs, rewards, terminated, truncated, self._tagged(obs, infos, end)

    def _tagged(self, obs: dict, infos: dict, end: bool = False) -> dict:
        tag = {
            SIM_TIME: float(self.sim.now),
            ENV_T: self._env_t,
            EPISODE_KEY: self.episode_key,
            JOB_ID: -1 if end else int(self.session.job.job_id),
        }
        if end:
            tag[JOB_SHARES] = self.reward.job_shares()
        return {a: {**infos.get(a, {}), **tag} for a in obs}
