"""``marl_sched/ClusterPlacement-v1``: cooperative multi-agent task placement;
``marl_sched/ClusterPlacement-v2``: the same with migration (``env.migration: on``).

This docstring is the environment's reference. It is the one decision process of the
project: the agents are trained in it (``marl-sched train``), the behaviour-cloning
teachers label it, and the trained agents act in it behind ``simulate`` / ``compare``
/ ``evaluate`` (:class:`agents.policy.MarlPolicy` drives the same
:class:`~envs.session.PlacementSession` and :class:`~envs.observations.ObservationBuilder`
this env wraps). RLlib ``MultiAgentEnv`` (new API stack):
:class:`envs.rllib_env.ClusterPlacementEnv` (this module's Ray-free
:class:`ClusterPlacementCore` with RLlib's base), built by ``envs.make_env(config)``;
PettingZoo ``ParallelEnv``:
``envs.make_parallel_env(config)`` (:mod:`envs.parallel`). ``config`` is a YAML
experiment config path or a loaded ``ExperimentConfig``; its ``env:`` section
(:class:`envs.config.EnvConfig`) holds every option below.

Code layout: :mod:`envs.observations` (scopes, features, spaces), :mod:`envs.session`
(one job's tentative placement and the masks), :mod:`envs.rules` (capacity checks,
forward rule, home agent), :mod:`envs.rewards` (the team reward), this module (the
episode loop).

Agents
------
One per subcluster: ``"sc0"``, ``"sc1"``, ... (``A`` = ``topology.subclusters``); with
``env.subclusters_per_agent: k``, one per ``k`` consecutive subclusters (agent ``i`` over
subclusters ``i*k .. i*k+k-1``, ``A`` = ceil(subclusters / k)); or, with
``env.central``, one agent ``"central"`` whose scope is the whole datacenter (``A`` = 1;
the single-agent variant). Agents never leave before the episode ends.

Decisions
---------
The simulator (:class:`marl_sched.simulator.Simulator`, ordering and backfill from
``simulation:``; ``ordering: own`` is FIFO here, the agents having no ordering of
their own; length orderings read the workload's duration estimate, as the agents do)
offers the next queued job that could fit; simulated time advances
inside it, between decisions. A job's tasks are placed **one per env step, workers
first, then parameter servers**; exactly one agent acts per step and only it appears
in the RLlib obs dict. The first task goes to the job's **home agent**
(``crc32(vc) mod A``; a job without a virtual cluster: ``job_id mod A``), each later
task starts at the agent that placed the previous one. When every task is placed the
env applies the placement (``sim.apply``). When the next task fits nowhere (cores or
memory), or the job waits (``wait_to_fit``), the job stays queued
(``sim.apply(None)``) and is offered again after the next event; no agent acts on it.

Actions and cooperation
-----------------------
Every agent has the same space ``Discrete(G + A + H)``, ``G`` = the padded group count
(``env.pad[0]``, default the largest scope's), ``H`` = ``len(env.hints)``:

- ``0 .. G-1``: put the task on GPU-group slot ``i`` of the agent's scope (slot ``i`` =
  the scope's ``i``-th group in id order);
- ``G + k``: **forward** the task to agent ``k``; agent ``k`` acts on it next, with its
  own observation. The rule (``env.forward_rule: must``, :func:`envs.rules.forward_targets`)
  is **forward when you must**: legal only to an agent the task has not visited and
  (a) the acting scope cannot host the task and ``k``'s can; or (b) it can host the
  task but not all of the job's remaining tasks and ``k``'s can host them all; or
  (c) no task of the job is placed yet and ``k``'s scope can host the whole job. A job
  one scope can hold is never split over scopes. ``free``: to any unvisited agent whose
  scope has room for the task. Forward to self (``G + k`` for agent ``k``) is the
  **no-op** slot: never legal for the acting agent; the only legal action of an idle
  agent (PettingZoo adapter) and of terminal observations;
- in a move (``env.migration: on``, below), before its first task: ``G + k`` for the
  acting agent ``k`` is **keep** (leave the running job where it is);
- ``G + A + i`` (with hints): **follow** hint ``i``: put the task where heuristic
  ``env.hints[i]``'s plan for the job in this scope puts its next task of that kind —
  legal while every task placed so far agrees with that plan and the group has room.

``action_mask`` is 1 exactly for the legal actions. Slot ``i`` is legal iff it is a
real group with room for the task (a worker: a free GPU, ``cpu_worker`` cores and
``mem_gb`` GB on its server, counting the job's tasks already placed; a PS: cores and
memory), narrowed by the rule options:

- ``consolidate``: a multi-worker job's first task at an agent none of whose servers
  can take all of its workers, while an unvisited agent's scope has such a server, may
  only be forwarded, to those agents;
- ``keep_together``: while a server of the scope already holding the job's workers has
  a worker slot, the next worker goes to one of them and cannot be forwarded; when the
  job opens a server, it must take every remaining worker if the scope has such a one;
- ``speed_floor = f``: with ``v*`` the speed of the fastest GPU type that (over the
  whole datacenter) still has worker slots for all remaining workers (lowered to the
  slowest GPU the job holds), a worker goes only to servers with GPUs at ``>= f · v*``;
  an agent with none forwards to any unvisited scope that has one; lifted for the task
  if it leaves no legal action. ``speed_floor_min_work = T``: only jobs of at least
  ``T`` GPU-seconds (workers × iterations × reference seconds per iteration);
- ``wait_to_fit = c``: a job of at least 2 workers that an empty server could hold
  (GPUs, cores, memory) but no server can take whole now stays queued while it has
  waited less than ``c ×`` its isolated runtime. A declined job is offered again at
  the simulator's next job completion (``Simulator.apply(None)``), so its wait can
  run past ``c ×`` its runtime until a job completes;
- ``ps_rule``: after the last worker, the job's PS go where every heuristic puts them
  (:func:`marl_sched.policies.heuristics.ps_near_workers`), unless they do not fit.

Migration (``env.migration: on``, ``ClusterPlacement-v2``)
-----------------------------------------------------------
**Triggers.** After every simulated event time at which jobs complete, each agent
whose scope held a worker of a completed job (in agent order) is offered one move;
with ``env.migration_tick_s = T > 0`` every agent also is, at every multiple of ``T``
seconds while jobs run (a tick is an event of its own:
``Simulator.wake_at``). Moves come before the queue is offered again at that time
(the simulator stops between event times: ``Simulator.next_decision_or_stop``), as
MLF-H's load control runs after completions before the next placement.

**Which job.** Of the running jobs with a worker in the agent's scope that may move —
not paying a restart delay now, moved fewer than ``env.migration_max_moves`` times
(default 1, as MLF-H: no ping-pong), not moved in the last
``env.migration_min_interval_s`` seconds, not offered to another agent at this
trigger — the one with the highest current slowdown (iteration time over isolated,
capped at 100), then the lowest id. No such job: no offer. The cap and interval are
the env's own rules, on top of the simulator's where it has them
(``RunningInfo.next_move_at``; a move it declines is a keep); a job the simulator
stops (preemptive orderings) is not running and so not offered.

**The move.** A move is a placement session like an arrival's (the same rules,
masks, hints and forwarding; the first task at the agent offered the job), on the
cluster with the job's own GPUs, cores and memory counted free
(``Simulator.group_free_for``: GPU memory and sharing rules included). Until its first
task is placed, the acting agent's own forward slot is **keep**: the job stays, nothing
changes. Once a task is placed the agent is committed: when the last task is placed
the env calls ``Simulator.migrate`` (the job keeps its progress and pays the
simulator's restart delay, whatever the ``simulation:`` section prices it at, holding
its new GPUs; the simulator decides when the old ones are free); a placement on the
same groups as now (as multisets) is no move. A move whose next task fits nowhere is
abandoned (the job stays).
Pressures, link counts and exposures in a move's observation still count the job
where it runs.

**What the agents see of the running jobs** (every running job, the mover included):
per GPU group the worker-weighted mean slowdown (ln) and mean attained GPU-seconds
per worker of the jobs with a worker there; per server MLF-H's overload signal (ln of
the worker-weighted mean slowdown of the jobs with workers on it,
``agents.baselines.load_control.server_slowdown``); for the job of a move its
current workers per group, its slowdown, attained service and moves so far. That is
what MLF-H's load control reads (placement, slowdown, attained service:
``ClusterView.running``), which every policy's ``rebalance`` may read as well. The
columns exist only with migration on (the observation space of v1 is unchanged);
the action space is the same.

**Reward.** The potential ``W`` counts what is left of a running job's restart delay,
so the step that makes a move pays its delay at once (with the change of speed of
the job and its old and new neighbours), and the delay is in the moved job's JCT
(:mod:`envs.rewards`): the return is still ``-avg JCT / time_scale_s``.

**Who else.** ``masked:<heuristic>`` controls and the heuristics are policies, not
agents of this env: they never get an offer (a control stepped through v2 would keep:
it has no migration rule). Behind ``simulate`` / ``compare``, a v2 checkpoint places
arriving jobs and, with ``simulation.migration: on``, moves running ones through the
policies' common migration hook (``MarlPolicy.rebalance``): after each batch of
completions the same agents are offered the same jobs through the same
:class:`envs.session.MoveBook` (no ticks: the simulator's cadence is completions).
PettingZoo: an idle agent's no-op is its own forward slot, as before; for the agent
acting in a move that slot is keep.

What the agents know of a job's length is the workload's duration estimate
(``workload.duration_estimate``, :mod:`marl_sched.duration`): the session holds the job
as ``DurationPredictor.visible_job`` returns it (estimated iterations, no trace
duration), as every policy sees it. ``job_length`` reads the estimated work (0 when
there is none), ``wait_to_fit`` the estimated runtime (no wait without an estimate),
and the speed-floor gate the estimated GPU work (the floor binds a job without one).
Only the simulator, and the behaviour-cloning teacher that forks it (a privileged
teacher, training only), see true lengths.

An illegal action (masked, out of range, or from an agent that is not acting) raises
``ValueError`` naming the agent and the action. ``action_spaces[agent].sample()``
without a mask draws a legal action for the acting agent (:class:`MaskedDiscrete`).

Observation (``gymnasium.spaces.Dict``, the same space for every agent)
----------------------------------------------------------------------------
The acting agent's scope as a padded hierarchical graph, the pending task's job and a
summary row per scope (the exchange). ``G, S, R`` = padded group, server, rack counts;
padding rows are 0 with mask 0; features are float32 ratios or small counts, so a
network trained on one topology reads another. Column names:
``ObservationBuilder.features`` (:data:`envs.observations.FEATURES` plus the options'
columns); "tentative" = counting the job's tasks placed so far; pressure = the
catalogue's per-task pressure units of resident running jobs. GPU speed (V100 = 1) is
the GPU type's catalogue-wide figure, or with ``model_speed`` the job's own model's
speed on that type (the speed it will run at; columns ``model_speed`` and
``free_model_speed``).

================  ===========  ===  ==============================================
key               shape        dt   content
================  ===========  ===  ==============================================
``group_x``       (G, 10+)     f32  per GPU group: tentative free GPU fraction; free
                                    GPUs / 8; GPU speed (V100 = 1); a worker fits
                                    (0/1); a PS fits (0/1); interference the task
                                    would suffer; interference it would cause (both
                                    pressure · level weights · the job's sensitivity
                                    / pressure); ln(1 + jobs on its PCIe link); job's
                                    tasks in the group / its tasks; job's tasks in its
                                    socket / its tasks. ``+resident_features``:
                                    ln(1 + worker-weighted slowdown added to residents).
                                    ``+migration``: ln(mean slowdown of running jobs'
                                    workers here); log10(1 + their mean attained
                                    GPU-s per worker)/7; the moving job's workers here
                                    / its workers (0 for an arrival).
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
                                    far (0 for an arrival). ``+hints``: per hint, 1
                                    while the job agrees with its plan
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

Reward (cooperative; :mod:`envs.rewards`)
-----------------------------------------
One team reward per env step, ``r = -(ΔC + ΔW) / (time_scale_s · n)``: ``C`` the
job-seconds spent in the system, ``W`` the predicted remaining run time of the running
jobs, ``n`` the jobs of the episode. An episode run to its end returns exactly
``-avg JCT / env.reward.time_scale_s``. ``W``'s interference comes from
``env.reward.interference``: ``simulator`` (default: the performance model's iteration
times, the env's own dynamics) or ``learned`` (the learned interference model's
predicted slowdowns, as in the paper). RLlib: with ``env.reward.credit: actor`` (the
default) the step's reward goes to the agent that acted, so RLlib's episode return
(the sum over agents) is the team return for any number of agents; with ``team``
every agent observed so far is paid it (each agent's return is then the team's from
its first decision; the team return is one agent's, not the sum). PettingZoo: every
agent receives the team reward every step.

Episodes
--------
The config's workload window is loaded once; an episode is ``env.window_jobs``
consecutive jobs of it (null = the whole window: what ``marl-sched evaluate`` runs),
starting where ``reset(options={"window_start": i})`` says or at a start drawn from the
``reset`` seed (0 for the whole window). A whole-window episode keeps the workload's
warm-up (``workload.warmup_jobs``): those jobs are simulated and placed by the agents
but not scored — the reward and the final metrics count the window's jobs only; a
slice is an episode of its own, every job scored, after the
``env.window_warmup_jobs`` jobs before it (placed by the agents, not scored; fewer near
the window's start). Extra episode sources (training's ``train.extra_windows``) come in
as ``windows=``. A slice's jobs are renumbered
``0..n-1`` with submit times relative to its first job. ``terminated`` when every job
is done or can never be placed. The terminal ``infos[agent]`` carries
``avg_jct_s``, ``team_return`` and ``metrics`` (``marl_sched.metrics.compute_metrics``);
RLlib's final dicts hold the agents that acted in the episode. The return identity
holds when every job completes; a job that can never be placed counts its time in
the system in ``C`` but not in ``avg_jct_s``.

Arguments
---------
``ClusterPlacementEnv(config, *, env=None, jobs=None, windows=None, seed=0)``:
``env`` a dict of ``env:`` overrides; ``jobs`` the jobs of the window (instead of
the config's workload); ``windows`` more episode sources beside the config's own, each
``(jobs, share)`` or a trace window ``{"trace", "start", "max_jobs", "load",
"share"}``; an episode picks its source in proportion to the shares (the config's own
weighs ``workload_share``, default 1). RLlib passes one dict: ``{"config": ...,
"env": {...}, "seed": s, "windows": [...], "workload_share": x}``. Training only,
``"critic_jobs": N`` (``train.critic: privileged``; absent = 0) adds the key
``critic_x`` to every observation: the queue, the running jobs' true remaining work and
the next ``N`` arrivals (:func:`envs.observations.critic_features`), for a critic the
agents never see; without it the observations and their space are as above.

Version history
---------------
- v2: v1 + the migration decision (``env.migration: on``; "Migration" above): moves
  offered at job completions and ticks, keep or re-place task by task, the running
  jobs' features, the restart delay in the reward's potential. With migration off the
  environment is v1, bit for bit, and v1 checkpoints serve it; a checkpoint records
  ``-v2`` and the migration options when trained with it on.
- v1: the agents' decision process becomes the environment: hints, follow
  actions and every rule option; the potential-based reward with a documented
  interference source; ``window_sampling``, ``home_rule``, ``max_sim_time``,
  ``max_placed_jobs``, ``slowdown_weight`` and ``use_learned_reward`` of v0 are gone.
- v0: a separate environment with its own features and a slowdown-shaping reward; no
  shipped checkpoint acted in it.
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

from envs.config import ENV_ID, ENV_NAME, ENV_VERSION, EnvConfig, env_config, reward_shorthand
from envs.observations import CRITIC_KEY, ObservationBuilder, critic_features, critic_space
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

__all__ = [
    "ENV_ID",
    "ENV_NAME",
    "ENV_VERSION",
    "ClusterPlacementCore",
    "MaskedDiscrete",
]

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
    return parse_section(EnvConfig, raw, cfg.source, "env")


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
        # training only: the privileged critic's input (module docstring, "Arguments")
        self.critic_jobs = int(extra.get("critic_jobs", 0))
        if self.critic_jobs:
            try:
                critic = critic_space(self.critic_jobs)
            except ValueError as exc:
                raise InputError(f"{cfg.source}: train.{exc}") from None
            space = gym.spaces.Dict({**space.spaces, CRITIC_KEY: critic})
        self._arrivals: list[Job] = []
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
        if self.critic_jobs:
            self._arrivals = sorted(self.sim.jobs, key=lambda j: j.submit_time)
            self._submits = np.array([j.submit_time for j in self._arrivals])
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
            if self.env_config.reward.credit == "team":
                rewards = {a: reward for a in obs}
            info = self.final_info()
            infos = {a: dict(info) for a in obs}
            return obs, rewards, {"__all__": True}, {"__all__": False}, infos
        if self.env_config.reward.credit == "team":
            rewards = {a: reward for a in self._last_obs}  # every agent seen so far
        else:
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
        if self.critic_jobs:
            obs[CRITIC_KEY] = self.critic_features()
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
        best = self._book.pick(view, agent)
        if best is None:
            return None
        jid = best.job_id
        self.predictor.sync(sim.records)
        seen = self.predictor.visible_job(sim.running[jid].job)
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

    def critic_features(self) -> np.ndarray:
        """``critic_x`` now (:func:`envs.observations.critic_features`; the arrivals'
        work as the duration estimate will show it)."""

        def work_of(job: Job) -> float:
            return self.predictor.visible_job(job).gpu_work_s

        return critic_features(self.sim, self._arrivals, self._submits, work_of,
                               self.critic_jobs)  # fmt: skip

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
