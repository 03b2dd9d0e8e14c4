"""``marl_sched/ClusterPlacement-v1``: cooperative multi-agent task placement;
``marl_sched/ClusterPlacement-v2``: the same with migration (``env.migration: on``).

This docstring is the environment's reference; its options are ``env:``
(:class:`envs.config.EnvConfig`). RLlib: ``envs.make_env(config)``
(:class:`envs.rllib_env.ClusterPlacementEnv`, this module's :class:`ClusterPlacementCore`
with RLlib's base); PettingZoo: ``envs.make_parallel_env(config)`` (:mod:`envs.parallel`).
``config`` is a YAML path or an ``ExperimentConfig``. :class:`agents.policy.MarlPolicy`
drives the same :class:`~envs.session.PlacementSession` behind ``simulate`` / ``compare``.

Agents
------
One per subcluster (``"sc0"``, ``"sc1"``, ...); with ``env.central`` one agent
``"central"`` over the whole datacenter. ``A`` = the agent count.

Decisions
---------
The simulator (ordering and backfill from ``simulation:``; ``ordering: own`` is FIFO)
offers the next queued job that could fit. Its tasks are placed **one per step, workers
first, then parameter servers**; exactly one agent acts per step. The first task goes
to the job's home agent (``crc32(vc) mod A``, else ``job_id mod A``); each later task
starts at the agent that placed the previous one. When every task is placed the env
calls ``sim.apply``; when the next task fits nowhere, or the job waits
(``wait_to_fit``), it stays queued (``sim.apply(None)``).

Actions
-------
``Discrete(G + A + H)`` for every agent, ``G`` = padded group count (``env.pad[0]``),
``H`` = ``len(env.hints)``:

- ``0 .. G-1``: put the task on the scope's ``i``-th GPU group (id order);
- ``G + k``: forward the task to agent ``k``. ``env.forward_rule: must``
  (:func:`envs.rules.forward_targets`): only to an unvisited agent when (a) this scope
  cannot host the task and ``k``'s can, (b) it can host the task but not the job's
  remaining tasks and ``k``'s can host them all, or (c) no task is placed yet and
  ``k``'s scope can host the whole job. ``free``: any unvisited agent with room.
  ``G + k`` for the acting agent is the no-op slot (never legal for it; the only legal
  action of an idle agent and of terminal observations); in a move, before its first
  task, it is **keep**;
- ``G + A + i``: follow hint ``i``: where heuristic ``env.hints[i]``'s plan for the job
  in this scope puts its next task of that kind, while every placed task agrees with
  that plan and the group has room. A *plan hint* (``masked:lookahead-learned``,
  :data:`marl_sched.policies.heuristics.PLAN_HINTS`) has one datacenter-wide plan for
  every agent, its policy's placement of the job inside these masks from the home
  agent; when another scope holds its next task, its follow action forwards the task
  there (legal when that forward is).

``action_mask`` is 1 exactly for legal actions. A slot is legal iff it is a real group
with room for the task (worker: a free GPU slot, ``cpu_worker`` cores, ``mem_gb``
memory on its server, counting the job's tasks placed; PS: cores and memory), narrowed
by the rule options:

- ``consolidate``: a multi-worker job's first task at an agent none of whose servers
  takes all its workers, while an unvisited scope has one, may only be forwarded there;
- ``keep_together``: while a server of the job's scope has a worker slot, the next
  worker goes there and cannot be forwarded; a newly opened server must take every
  remaining worker if the scope has such a server;
- ``speed_floor = f``: with ``v*`` the fastest GPU type with worker slots for all
  remaining workers (capped at the slowest GPU the job holds), workers go only to GPUs
  of speed ``>= f · v*`` (lifted if nothing is legal); ``speed_floor_min_work = T``:
  only for jobs of at least ``T`` estimated GPU-seconds;
- ``wait_to_fit = c``: a job of >= 2 workers that an empty server could hold but no
  server can take now stays queued while it has waited less than ``c ×`` its isolated
  runtime (re-offered at the next job completion);
- ``ps_rule``: after the last worker, PS go where
  :func:`marl_sched.policies.heuristics.ps_near_workers` puts them, if they fit.

An illegal action (masked, out of range, or from an agent not acting) raises
``ValueError``. ``action_spaces[agent].sample()`` draws a legal action
(:class:`MaskedDiscrete`).

Migration (v2)
--------------
After every event time with job completions, each agent whose scope held a worker of a
completed job (in agent order) is offered one move; with ``env.migration_tick_s = T > 0``
every agent also is at each multiple of ``T`` while jobs run. The job offered: of the
running jobs with a worker in the scope, not paying a restart delay, moved fewer than
``env.migration_max_moves`` times, not moved in the last ``env.migration_min_interval_s``
and not offered to another agent at this trigger, the one of highest slowdown (capped
at 100), then lowest id (:class:`envs.session.MoveBook`); with
``env.migration_offer: remaining``, of the jobs anywhere in the cluster, the ``upgrade``
rule's candidate (longest estimated remaining work first; its first paying move, else
the nearest) with its estimated net saving as a feature; with also
``env.migration_where: rule`` the move is that option, and the agent chooses only keep
or the action towards the option's first task, which places it whole. A move is a placement session
on the cluster with the job's own resources counted free (``Simulator.group_free_for``);
the own forward slot is keep until a task is placed. After the last task the env calls
``Simulator.migrate`` (the job keeps its progress and pays the restart delay); the same
groups as now is no move; a next task that fits nowhere abandons the move. Behind
``simulate``, ``MarlPolicy.rebalance`` offers the same moves at completions (no ticks).

Observation (``gymnasium.spaces.Dict``, the same space for every agent)
----------------------------------------------------------------------------
The acting agent's scope as a padded graph, the pending task's job and one row per
scope. ``G, S, R`` = padded group, server, rack counts; padding rows are 0 with mask 0.
Column names: ``ObservationBuilder.features``. "Tentative" = counting the job's tasks
placed so far; pressure = the catalogue's per-task pressure units of resident jobs; GPU
speed (V100 = 1) is the type's, or with ``model_speed`` the job's model's on that type.
Lengths are the workload's duration estimate (:mod:`marl_sched.duration`), never the
trace's.

================  ===========  ===  ==============================================
key               shape        dt   content
================  ===========  ===  ==============================================
``group_x``       (G, 10+)     f32  per GPU group: tentative free GPU fraction; free
                                    GPUs / 8; GPU speed; a worker fits (0/1); a PS
                                    fits (0/1); interference the task would suffer;
                                    interference it would cause; ln(1 + jobs on its
                                    PCIe link); job's tasks in the group / its tasks;
                                    job's tasks in its socket / its tasks.
                                    ``+resident_features``: ln(1 + worker-weighted
                                    slowdown added to residents). ``+migration``:
                                    ln(mean slowdown of running workers here);
                                    log10(1 + their mean attained GPU-s per worker)/7;
                                    the moving job's workers here / its workers.
                                    ``+hints``: per hint, tasks of the current kind
                                    the plan still puts here / the job's tasks of
                                    that kind
``group_mask``    (G,)         f32  1 for real groups
``group_server``  (G,)         i64  local index of the group's server (pad 0)
``server_x``      (S, 10)      f32  tentative free GPU fraction; CPU free fraction;
                                    memory free fraction; ln(1 + jobs on NIC);
                                    ln(1 + jobs on QPI); job's tasks here / its tasks;
                                    GPU speed; GPUs / 8; summed pressure / 5; NIC
                                    Gbit/s / 100
``server_mask``   (S,)         f32  1 for real servers
``server_rack``   (S,)         i64  local index of the server's rack (pad 0)
``rack_x``        (R, 5)       f32  tentative free GPU fraction; ln(1 + jobs on the
                                    uplink); job's tasks here / its tasks; min(free
                                    GPUs / workers left, 4) / 4; uplink Gbit/s / 1000
``rack_mask``     (R,)         f32  1 for real racks
``job_x``         (20+,)       f32  log2(workers)/6; PS/4; task is a worker; tasks
                                    placed / tasks; workers left / workers; reference
                                    s per iteration (≤ 4); model GB; communication
                                    ratio (≤ 4); forwards of this task / A; job's
                                    tasks in this scope / tasks; sensitivity (5);
                                    pressure (5). ``+job_length``: log10(1 + work
                                    s)/7. ``+migration``: is a move; ln(slowdown);
                                    log10(1 + attained GPU-s per worker)/7; moves so
                                    far. ``+remaining`` offer: the offer's estimated
                                    net saving / its remaining run (in [-1, 1]);
                                    log10(1 + estimated remaining work s)/7.
                                    ``+hints``: per hint, 1 while the job agrees
                                    with its plan
``peers_x``       (A, 9+)      f32  per scope: free GPU fraction; ln(1 + free GPUs);
                                    mean speed of free GPUs; best server's free GPUs
                                    / 8; ln(1 + jobs on its uplink); job's tasks there
                                    / tasks; is the observer; can host the task;
                                    visited by the task. ``+hints``: one server there
                                    takes all remaining workers. ``+global_hints``:
                                    per heuristic, its share of the job there
``peers_mask``    (A,)         f32  1 (every scope's row is exchanged)
``action_mask``   (G + A + H,) f32  legal actions (above)
================  ===========  ===  ==============================================

Reward (:mod:`envs.rewards`)
----------------------------
One team reward per step, ``r = -(ΔC + ΔW) / (time_scale_s · n)``: ``C`` the
job-seconds spent in the system, ``W`` the predicted remaining run time (and restart
delay) of the running jobs, ``n`` the episode's jobs; an episode run to its end returns
``-avg JCT / env.reward.time_scale_s``. An RLlib step pays the agent that acted;
PettingZoo: every agent gets the team reward every step.

Episodes
--------
An episode is ``env.window_jobs`` consecutive jobs of the config's window (null = the
whole window, keeping ``workload.warmup_jobs`` placed but not scored), starting at
``reset(options={"window_start": i})`` or a start drawn from the seed. A slice is
renumbered ``0..n-1`` from its first job's submit time, after ``env.window_warmup_jobs``
unscored jobs before it. ``terminated`` when every job is done or can never be placed;
the terminal ``infos[agent]`` carries ``avg_jct_s``, ``team_return`` and ``metrics``.

Arguments
---------
``ClusterPlacementEnv(config, *, env=None, jobs=None, windows=None, seed=0)``: ``env``
``env:`` overrides; ``jobs`` the window's jobs instead of the workload's; ``windows``
more episode sources, each ``(jobs, share)`` or ``{"trace", "start", "max_jobs",
"load", "share"}`` (the config's own weighs ``workload_share``, default 1). RLlib
passes one dict ``{"config", "env", "seed", "windows", "workload_share"}``.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from envs.config import (
    EnvConfig,
    drop_retired_options,
    env_config,
    reward_shorthand,
)
from envs.observations import ObservationBuilder
from envs.rewards import CustomReward, TeamReward, episode_reward
from envs.rules import home_agent
from envs.session import MoveBook, PlacementSession, placement_steps
from marl_sched.config import REPO_ROOT, ExperimentConfig, load_config, parse_section
from marl_sched.duration import workload_predictor
from marl_sched.errors import InputError
from marl_sched.jobs import Job, Placement
from marl_sched.runner import make_simulator
from marl_sched.simulator import ClusterView, Simulator

DEFAULT_CONFIG = REPO_ROOT / "configs" / "default.yaml"

Step = tuple[dict, dict, dict, dict, dict]


def resolve_config(config: Any) -> tuple[ExperimentConfig, dict]:
    """``(ExperimentConfig, extra keyword arguments)`` from a path, a config, or an
    RLlib env-config dict ``{"config": ..., "env": ..., "seed": ..., "windows": ...}``."""
    if isinstance(config, Mapping):
        extra = {k: v for k, v in config.items() if k != "config"}
        config = config.get("config", DEFAULT_CONFIG)
    else:
        extra = {}
    if not isinstance(config, ExperimentConfig):
        config = load_config(config)
    return config, extra


def with_overrides(cfg: ExperimentConfig, overrides: Mapping | None) -> EnvConfig:
    """``cfg``'s env section with ``overrides`` applied (checked like the YAML)."""
    raw = reward_shorthand(dict(cfg.env or {}))
    for key, value in reward_shorthand(dict(overrides or {})).items():
        if key == "reward" and isinstance(value, Mapping):
            value = {**(raw.get("reward") or {}), **value}
        raw[key] = value
    return parse_section(EnvConfig, drop_retired_options(raw, cfg.source), cfg.source, "env")


class ClusterPlacementCore:
    """``ClusterPlacement-v1`` without Ray (the module docstring is its reference): the
    RLlib env :class:`envs.rllib_env.ClusterPlacementEnv` is this core with RLlib's
    ``MultiAgentEnv`` as a second base; the PettingZoo adapter wraps the core."""

    metadata = {"render_modes": [], "name": "cluster_placement_v1"}

    def __init__(
        self,
        config: str | Path | ExperimentConfig | Mapping | None = None,
        *,
        env: Mapping | None = None,
        jobs: Sequence[Job] | None = None,
        windows: Sequence[tuple[Sequence[Job], float]] | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        from marl_sched.runner import TraceOptions, build_cluster, load_workload

        cfg, extra = resolve_config(DEFAULT_CONFIG if config is None else config)
        env = {**(extra.get("env") or {}), **(env or {})}
        windows = windows if windows is not None else extra.get("windows")
        seed = int(extra.get("seed", seed))
        self.cfg = cfg
        self.env_config: EnvConfig = with_overrides(cfg, env) if env else env_config(cfg)
        self.topology, self.perf = build_cluster(cfg)
        own = load_workload(cfg, self.perf) if jobs is None else None
        # an episode source: (jobs, warm-up jobs, a fresh duration predictor per episode)
        self.sources: list[tuple[list[Job], int, Callable]] = [
            (list(jobs), 0, partial(workload_predictor, cfg.workload))
            if own is None
            else (own.jobs, own.warmup, own.predictor)
        ]
        shares = [float(extra.get("workload_share", 1.0))]
        for w in windows or ():
            if isinstance(w, Mapping):  # a trace window: {trace, start, max_jobs, load, share}
                opts = TraceOptions(
                    trace=w["trace"], start=w.get("start"), max_jobs=w.get("max_jobs"),
                    load=w.get("load"),
                )  # fmt: skip
                wl = load_workload(cfg, self.perf, opts)
                self.sources.append((wl.jobs, wl.warmup, wl.predictor))
                shares.append(float(w.get("share", 1.0)))
            else:  # (jobs, share)
                w_jobs, share = w
                self.sources.append((list(w_jobs), 0, partial(workload_predictor, cfg.workload)))
                shares.append(float(share))
        self.source_p = np.asarray(shares) / sum(shares)
        try:
            self.builder = ObservationBuilder(self.topology, self.perf, self.env_config)
        except ValueError as exc:
            raise InputError(f"{cfg.source}: env: {exc}") from None
        ids = list(self.builder.agent_ids)
        self.agents = self.possible_agents = ids
        self.index = {a: k for k, a in enumerate(ids)}
        space = self.builder.observation_space
        self.observation_spaces = {a: space for a in ids}
        n = int(self.builder.action_space.n)
        self.action_spaces = {a: MaskedDiscrete(n, self._mask_of(a)) for a in ids}
        self.rng = np.random.default_rng(seed)
        self.sim: Simulator | None = None
        self.session: PlacementSession | None = None
        self.reward: TeamReward | CustomReward | None = None
        self.window_start = 0
        self.source = 0
        self._last_obs: dict[str, dict] = {}
        self._reset_moves()

    # ------------------------------------------------------------------ episode

    def reseed(self, seed: int) -> None:
        """Seed the env's generator without a reset: the next unseeded reset draws its
        window from it (a seeded reset reseeds as before). For a sampler that passes its
        one seed to every reset (RLlib's env runner does with whole-episode batches),
        which would otherwise replay the same window all along."""
        self.rng = np.random.default_rng(seed)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        options = dict(options or {})
        k = int(options.get("source", 0 if len(self.sources) == 1 else -1))
        if k < 0:
            k = int(self.rng.choice(len(self.sources), p=self.source_p))
        source, warmup, predictor = self.sources[k]
        wj = self.env_config.window_jobs
        size = len(source) if wj is None else min(wj, len(source))
        if "window_start" in options:
            start = int(options["window_start"])
            if not 0 <= start <= len(source) - size:
                raise ValueError(f"window_start {start} outside [0, {len(source) - size}]")
        else:
            start = 0 if size == len(source) else int(self.rng.integers(0, len(source) - size + 1))
        self.source, self.window_start = k, start
        if size == len(source):
            jobs, self.warmup = source, warmup
        else:  # a slice is an episode of its own: its jobs scored, after its warm-up
            first = max(0, start - self.env_config.window_warmup_jobs)
            jobs, self.warmup = _renumbered(source[first : start + size]), start - first
        self.predictor = predictor()
        self.sim = make_simulator(self.cfg, self.topology, self.perf, jobs, self.predictor)
        self.reward = episode_reward(self.sim, self.env_config.reward, self.warmup)
        self._last_obs = {}
        self._reset_moves()
        if not self._next_session():
            raise InputError(f"{self.cfg.source}: no job of the window can ever be placed")
        return self._obs_of_actor(), {}

    def step(self, action_dict: Mapping[str, Any]) -> Step:
        s = self.session
        if s is None:
            raise ValueError("step() after the episode ended: call reset()")
        actor = self.builder.agent_ids[s.agent]
        if actor not in action_dict:
            raise ValueError(f"no action for the acting agent {actor}")
        for agent in action_dict:
            if agent != actor:
                raise ValueError(f"agent {agent} acted, but {actor} is the acting agent")
        s.act(self._checked_action(actor, action_dict[actor]))
        finished = False
        if s.moving is not None:  # a move: kept, finished, or a task that fits nowhere
            if s.done or not s.feasible():
                if s.moved():
                    self._migrate(s)
                finished = not self._next_session()
        elif s.done:
            self.sim.apply(s.placement())
            self._placed(s.job.job_id, s.placement())
            finished = not self._next_session()
        elif not s.feasible():  # the next task fits nowhere: the job stays queued
            self.sim.apply(None)
            finished = not self._next_session()
        reward = self.reward.step()
        if finished:
            noop = self.builder.noop_mask
            obs = {a: {**o, "action_mask": noop(self.index[a])} for a, o in self._last_obs.items()}
            rewards = {a: 0.0 for a in obs}
            rewards[actor] = reward
            info = self.final_info()
            infos = {a: dict(info) for a in obs}
            return obs, rewards, {"__all__": True}, {"__all__": False}, infos
        rewards = {actor: reward}
        return self._obs_of_actor(), rewards, {"__all__": False}, {"__all__": False}, {}

    def _checked_action(self, agent: str, action: Any) -> int:
        try:
            a = operator.index(action)
        except TypeError:
            raise ValueError(f"agent {agent}: action must be an integer, got {action!r}") from None
        mask = self.session.action_mask(self.session.agent)
        if not 0 <= a < len(mask):
            raise ValueError(f"agent {agent}: action {a} out of range [0, {len(mask)})")
        if mask[a] == 0:
            raise ValueError(f"agent {agent}: action {a} is masked ({self._what(a)})")
        return a

    def _what(self, a: int) -> str:
        b = self.builder
        g, n = b.pad[0], b.n_agents
        if a < g:
            return f"GPU-group slot {a}"
        if a < g + n:
            if a - g == self.session.agent:
                return "keep" if self.session.moving is not None else "the no-op slot"
            return f"forward to {a - g}"
        return f"follow hint {b.hints[a - g - n]!r}"

    def _obs_of_actor(self) -> dict:
        s = self.session
        agent = self.builder.agent_ids[s.agent]
        obs = self.builder.observe(s, s.agent)
        self._last_obs[agent] = obs
        return {agent: obs}

    def _next_session(self) -> bool:
        """Open a session for the next job an agent can act on (a move offered at a
        migration trigger first, then the queue); False at the end."""
        migration = self.env_config.migration
        while True:
            while self._offers:
                session = self._move_session(self._offers.pop(0))
                if session is not None:
                    self.session = session
                    return True
            if migration:
                job = self.sim.next_decision_or_stop(self._trigger)
                if job is None and self._offers:
                    continue
            else:
                job = self.sim.next_decision()
            if job is None:
                break
            home = home_agent(job, self.builder.n_agents)
            self.predictor.sync(self.sim.records)  # what the agents may know of its length
            seen = self.predictor.visible_job(job)
            session = PlacementSession(self.builder, seen, self.sim.view(), home)
            if session.feasible() and not session.waits():
                self.session = session
                return True
            self.sim.apply(None)
        self.session = None
        return False

    # ------------------------------------------------------------------ migration

    def _reset_moves(self) -> None:
        self._offers: list[int] = []  # agents still to be offered a move at this trigger
        self._book = MoveBook(self.builder)  # scopes, offers and moves (envs.session)
        self._records_seen = 0
        self._tick_at: float | None = None  # the pending tick's time

    def _placed(self, job_id: int, placement) -> None:
        if self.env_config.migration:
            self._book.placed(job_id, placement)

    def _trigger(self, sim: Simulator) -> bool:
        """After an event time (``Simulator.next_decision_or_stop``): the agents whose
        scopes held a worker of a job that completed then, every agent at a tick;
        True when one of them is to be offered a move (module docstring)."""
        recs = sim.records
        done = [rec.job.job_id for rec in islice(reversed(recs.values()),
                                                 len(recs) - self._records_seen)]  # fmt: skip
        self._records_seen = len(recs)
        agents = self._book.finished(done)
        tick = self.env_config.migration_tick_s
        if tick > 0:
            if self._tick_at is not None and sim.now >= self._tick_at:
                agents = set(range(self.builder.n_agents))
                self._tick_at = None
            if self._tick_at is None and sim.running:  # no tick keeps an idle run alive
                self._tick_at = (math.floor(sim.now / tick) + 1) * tick
                sim.wake_at(self._tick_at)
        self._offers = sorted(agents) if sim.running else []
        return bool(self._offers)

    def _move_session(self, agent: int) -> PlacementSession | None:
        """The move offered to ``agent`` (:meth:`envs.session.MoveBook.pick`), or None."""
        sim = self.sim
        view = sim.view()
        self.predictor.sync(sim.records)

        def known(jid: int) -> Job:  # the running job as the agents know it
            return self.predictor.visible_job(sim.running[jid].job)

        best = self._book.pick(view, agent, known)
        if best is None:
            return None
        jid = best.job_id
        seen = known(jid)
        return self._book.session(view, best, seen, agent, sim.group_free_for(jid))

    def _migrate(self, s: PlacementSession) -> None:
        jid = s.moving.job_id
        if self.sim.migrate(jid, s.placement()) is False:  # declined by the simulator's rules
            return
        self._book.moved(jid, s.placement(), self.sim.now)

    def _mask_of(self, agent: str) -> Callable[[], np.ndarray | None]:
        def mask() -> np.ndarray | None:
            s = self.session
            if s is None or self.builder.agent_ids[s.agent] != agent:
                return None
            return s.action_mask(s.agent)

        return mask

    # ------------------------------------------------------------------ queries

    @property
    def acting_agent(self) -> str | None:
        """The agent that acts next (None once the episode is over)."""
        return None if self.session is None else self.builder.agent_ids[self.session.agent]

    @property
    def episode_key(self) -> tuple[int, int, int]:
        """``(source, window_start, jobs)`` of the current episode: same key, same jobs."""
        return (self.source, self.window_start, len(self.sim.jobs))

    @property
    def done(self) -> bool:
        return self.sim is not None and self.session is None

    @property
    def pending_job(self) -> Job | None:
        return None if self.session is None else self.session.job

    def cluster_view(self) -> ClusterView:
        return self.sim.view()

    def metrics(self) -> dict[str, Any]:
        """``marl_sched.metrics.compute_metrics`` of the episode so far."""
        from marl_sched.metrics import compute_metrics

        return compute_metrics(
            self.sim, policy="env", trace=self.cfg.workload.trace, wall_s=0.0, warmup=self.warmup
        )

    def final_info(self) -> dict[str, Any]:
        """The episode's figures; ``normalised_return`` is ``-avg JCT`` over the mean
        isolated run time of the scored jobs (the default reward's team return in
        units of the window's own job length, so windows of short and long jobs read
        alike: -1 = every job ran alone at once)."""
        m = self.metrics()
        scored = [r for r in self.sim.result() if r.job.job_id >= self.warmup]
        iso = sum(r.isolated_runtime for r in scored) / max(len(scored), 1)
        return {
            "avg_jct_s": m["avg_jct_s"],
            "normalised_return": -m["avg_jct_s"] / iso if iso > 0 else 0.0,
            "team_return": self.reward.total,
            "window_start": self.window_start,
            "source": self.source,
            "metrics": m,
        }

    def placement_actions(self, placement: Placement) -> list[int]:
        """The acting agent's actions (in order, each by the agent then acting) that make
        ``placement`` for the pending job: forward straight to the owner of each task's
        group, then the local slot (the masks decide whether they are legal)."""
        s = self.session
        return placement_steps(self.builder, s.agent, placement)

    def replay_placement(self, placement: Placement | None) -> Step:
        """Step the pending job through ``placement`` (``ValueError`` if a step is
        illegal under the env's rules); returns the last step's outputs."""
        if placement is None:
            raise ValueError("a None placement cannot be replayed (the env queues jobs itself)")
        out = None
        for action in self.placement_actions(placement):
            out = self.step({self.acting_agent: action})
        return out


def _renumbered(window: Sequence[Job]) -> list[Job]:
    t0 = window[0].submit_time
    return [
        dataclasses.replace(j, job_id=i, submit_time=j.submit_time - t0)
        for i, j in enumerate(window)
    ]


class MaskedDiscrete(gym.spaces.Discrete):
    """``Discrete(n)`` whose ``sample()`` without a mask draws a legal action of the
    acting agent (RLlib's env checker and random warm-ups call it); with no decision
    pending, any action (nothing is legal then)."""

    def __init__(self, n: int, current_mask: Callable[[], np.ndarray | None]) -> None:
        super().__init__(n)
        self._current_mask = current_mask

    def sample(self, mask: Any = None, probability: Any = None) -> np.int64:
        if mask is None and probability is None:
            m = self._current_mask()
            if m is not None and m.any():
                mask = m.astype(np.int8)
        return super().sample(mask=mask, probability=probability)

    def __reduce__(self) -> tuple:
        return (gym.spaces.Discrete, (int(self.n),))
