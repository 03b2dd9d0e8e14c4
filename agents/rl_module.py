"""The RLlib side: the ``TorchRLModule`` around the GNN, and the ``MultiAgentEnv``.

:class:`HierarchicalGNNModule` wraps :class:`agents.gnn.HierarchicalGNN`;
:class:`SchedulingEnv` runs the task-by-task decision process of
:mod:`agents.single_agent` over the simulator (its reward is documented there).

Action masking happens inside the network: masked actions leave it with
:data:`agents.gnn.MASKED_LOGIT`, so exploration, greedy inference and the PPO loss
all see the same masked categorical. The value comes out of the same forward pass
in ``_forward_train`` (passed to ``compute_values`` as the "embeddings"), so a PPO
update runs the GNN once per minibatch.

``model_config`` holds the fields of :class:`agents.config.ModelConfig` (``hidden``,
``layers``, ``exchange``); the feature dimensions are read from the observation
space, never hard-coded.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.env.multi_agent_env import MultiAgentEnv

from agents.config import BUILDER_OPTIONS
from agents.gnn import build_gnn
from agents.single_agent import (
    ObservationBuilder,
    PlacementSession,
    feature_dims,
    home_agent,
)
from marl_sched.jobs import Job
from marl_sched.simulator import Simulator


class HierarchicalGNNModule(TorchRLModule, ValueFunctionAPI):
    """PPO-ready module: masked logits over ``G_max + A + H`` actions and a value."""

    def setup(self) -> None:
        self.dims = feature_dims(self.observation_space)
        n_actions = self.dims["G_max"] + self.dims["A"] + self.dims["H"]
        if getattr(self.action_space, "n", None) != n_actions:
            raise ValueError(
                f"action space {self.action_space} does not match G_max + A + H = {n_actions}"
            )
        self.gnn = build_gnn(self.dims, self.model_config or {})

    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        logits, _ = self.gnn.forward_padded(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: logits}

    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        logits, values = self.gnn.forward_padded(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: logits, Columns.EMBEDDINGS: values}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if embeddings is not None:
            return embeddings
        _, values = self.gnn.forward_padded(batch[Columns.OBS])
        return values


class SchedulingEnv(MultiAgentEnv):
    """RLlib multi-agent env: agents place the tasks of arriving jobs (module docstring).

    Args:
        config: ``{"experiment": ExperimentConfig or path, "central": bool,
            "hints": [heuristic names], "consolidate": bool, "global_hints": [names]
            (:data:`agents.config.BUILDER_OPTIONS`), "episode_jobs": int,
            "time_scale_s": float, "seed": int,
            "extra_windows": [{"trace", "start", "max_jobs", "load", "share"}, ...],
            "workload_share": float}`` — each episode is a slice of the config's
            workload or of an extra window, picked in proportion to the shares.
    """

    def __init__(self, config: dict | None = None) -> None:
        super().__init__()
        from marl_sched.config import load_config
        from marl_sched.runner import TraceOptions, build_cluster, load_workload

        config = dict(config or {})
        cfg = load_config(config.get("experiment", "configs/default.yaml"))
        self.cfg = cfg
        self.topology, self.perf = build_cluster(cfg)
        sources = [load_workload(cfg, self.perf).jobs]
        shares = [float(config.get("workload_share", 1.0))]
        for w in config.get("extra_windows") or ():
            options = TraceOptions(
                trace=w["trace"], start=w["start"], max_jobs=w["max_jobs"], load=w["load"]
            )
            sources.append(load_workload(cfg, self.perf, options).jobs)
            shares.append(float(w["share"]))
        self.sources = sources
        self.source_p = np.asarray(shares) / sum(shares)
        self.builder = ObservationBuilder(
            self.topology, self.perf, **{k: config[k] for k in BUILDER_OPTIONS if k in config}
        )
        self.episode_jobs = int(config.get("episode_jobs", 200))
        self.time_scale_s = float(config.get("time_scale_s", 3600.0))
        self.rng = np.random.default_rng(config.get("seed", 0))
        ids = self.builder.agent_ids
        self.agents = self.possible_agents = list(ids)
        self.observation_spaces = {a: self.builder.observation_space for a in ids}
        self.action_spaces = {a: self.builder.action_space for a in ids}
        self.sim: Simulator | None = None
        self.session: PlacementSession | None = None

    # ------------------------------------------------------------------ episode

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        k = 0
        if len(self.sources) > 1:
            k = int(self.rng.choice(len(self.sources), p=self.source_p))
        source = self.sources[k]
        size = min(self.episode_jobs, len(source))
        start = int(self.rng.integers(0, len(source) - size + 1))
        window = source[start : start + size]
        self.episode_key = (k, start, size)  # (source, first job, jobs): same key, same episode
        t0 = window[0].submit_time
        jobs = [
            Job(i, j.name, j.model, j.num_workers, j.num_ps, j.iterations,
                j.submit_time - t0, j.duration, j.vc, j.line)
            for i, j in enumerate(window)
        ]  # fmt: skip
        self.sim = Simulator(
            self.topology,
            jobs,
            perf=self.perf,
            ordering=self.cfg.simulation.ordering,
            backfill=self.cfg.simulation.backfill,
        )
        self._submits = np.array([j.submit_time for j in jobs])
        self._submit_cumsum = np.concatenate([[0.0], np.cumsum(self._submits)])
        self._done_jct = 0.0
        self._done_submit = 0.0
        self._done_n = 0
        self._last_obs: dict[str, dict] = {}
        self._potential = self._job_seconds() + self._remaining_work()
        ok = self._next_session()
        assert ok, "an episode has at least one decision"
        return self._obs_of_actor(), {}

    def step(self, action_dict: dict):
        s = self.session
        actor = self.builder.agent_ids[s.agent]
        s.act(int(action_dict[actor]))
        finished = False
        if s.done:
            self.sim.apply(s.placement())
            finished = not self._next_session()
        elif not s.feasible():  # the next task fits nowhere: the job stays queued
            self.sim.apply(None)
            finished = not self._next_session()
        potential = self._job_seconds() + self._remaining_work()
        reward = -(potential - self._potential) / (self.time_scale_s * len(self.sim.jobs))
        self._potential = potential
        if finished:
            obs = dict(self._last_obs)
            rewards = {a: 0.0 for a in obs}
            rewards[actor] = reward
            return obs, rewards, {"__all__": True}, {"__all__": False}, {}
        return self._obs_of_actor(), {actor: reward}, {"__all__": False}, {"__all__": False}, {}

    def _obs_of_actor(self) -> dict:
        s = self.session
        agent = self.builder.agent_ids[s.agent]
        obs = self.builder.observe(s, s.agent)
        self._last_obs[agent] = obs
        return {agent: obs}

    def _next_session(self) -> bool:
        """Open a session for the next job that can be placed; False at the end."""
        while (job := self.sim.next_decision()) is not None:
            home = home_agent(job, self.builder.n_agents)
            session = PlacementSession(self.builder, job, self.sim.view(), home)
            if session.feasible() and not session.waits():
                if not session.action_mask(home).any():
                    raise AssertionError("a feasible task must leave an action")
                self.session = session
                return True
            self.sim.apply(None)
        self.session = None
        return False

    # ------------------------------------------------------------------ reward terms

    def _job_seconds(self) -> float:
        """Σ over submitted jobs of ``min(finish, now) - submit``."""
        sim = self.sim
        recs = sim.records
        if len(recs) != self._done_n:
            new = len(recs) - self._done_n
            for rec in list(reversed(recs.values()))[:new]:
                self._done_jct += rec.finish_time - rec.job.submit_time
                self._done_submit += rec.job.submit_time
            self._done_n = len(recs)
        now = sim.now
        n_sub = int(np.searchsorted(self._submits, now, side="right"))
        open_n = n_sub - self._done_n
        open_submit = self._submit_cumsum[n_sub] - self._done_submit
        return self._done_jct + open_n * now - open_submit

    def _remaining_work(self) -> float:
        """Predicted remaining run time (s) of the running jobs, Σ over jobs."""
        now = self.sim.now
        total = 0.0
        for run in self.sim.running.values():
            if run.iter_time < math.inf:
                left = max(run.remaining - (now - run.last_update) / run.iter_time, 0.0)
                total += left * run.iter_time
        return total
