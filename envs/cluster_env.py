"""``marl_sched/ClusterPlacement-v0``: cooperative multi-agent task placement.

This docstring is the environment's reference. RLlib ``MultiAgentEnv`` (new API
stack): :class:`ClusterPlacementEnv`, built by ``envs.make_env(config)``; PettingZoo
``ParallelEnv`` adapter: ``envs.make_parallel_env(config)`` (:mod:`envs.parallel`).
``config`` is a path to a YAML experiment config or a loaded ``ExperimentConfig``.

Agents
------
One per subcluster: ``"sc0"``, ``"sc1"``, ... (``A`` = ``topology.subclusters``).
``possible_agents == agents`` for the whole episode (agents never leave).

Decisions
---------
The simulator (:class:`marl_sched.simulator.Simulator`, ordering and backfill from
``simulation:``) yields the next queued job that could fit (enough free GPUs in the
datacenter); simulated time advances inside it, between decisions, never inside a
job's placement. The job's tasks are placed **one per env step, workers first, then
parameter servers** (a PS is best placed once its workers' locations are known, as
the heuristics do). Exactly one agent acts per step; only it appears in the obs dict.

- The first task goes to the job's **home agent** (``env.home_rule``): ``vc`` — the
  trace's virtual cluster, ``zlib.crc32(vc) mod A`` (jobs without a vc:
  least-loaded); ``round-robin`` — the k-th job decided (counting retries) goes to
  agent ``k mod A``; ``least-loaded`` — the subcluster with the most free GPUs
  (ties: lowest index).
- Each later task of the job starts at the agent that placed the previous one.
- When all tasks are placed the env applies the whole placement
  (``sim.apply(Placement(worker_groups, ps_groups))``, tasks in the order placed).

Actions and cooperation
-----------------------
Every agent has the same space ``Discrete(G + A)``, ``G = max_groups`` (the largest
subcluster's GPU-group count unless ``env.max_groups`` pads further):

- ``0 .. G-1``: put the task on local GPU-group slot ``i`` of the agent's subcluster
  (slot ``i`` = the subcluster's ``i``-th group in id order);
- ``G + k``: **forward** the task to agent ``k`` — the cooperative mechanism,
  **forward when you must**: on the next step agent ``k`` acts on the same task, with
  its own subcluster's observation, so a job may use GPUs of several subclusters when
  no single one can hold the rest of it; a job that one subcluster can hold is never
  split (it may move there whole), because spreading a job over subclusters puts its
  synchronisation traffic on the slowest links. A task can be forwarded at most
  ``A - 1`` times (then forward actions are masked), so forwarding cannot loop.

``action_mask`` (in the observation) is 1 exactly for the legal actions:

- slot ``i`` iff it is a real group (not padding) with room for the task: a worker
  needs a free GPU in the group (counting this job's tasks already placed there) and
  ``cpu_worker`` cores and ``mem_gb`` memory free on the group's server; a PS needs
  ``cpu_ps`` cores and ``mem_gb`` on the server (same tolerance as the simulator);
- ``G + k`` iff ``k`` is not the acting agent, the task has been forwarded fewer than
  ``A - 1`` times, and either
  (a) the acting agent's subcluster has no group with room for the task and
  subcluster ``k`` has one, or
  (b) the acting agent's subcluster has room for the task but cannot host all of the
  job's remaining (not yet placed) tasks, and subcluster ``k`` can host them all, or
  (c) no task of the job is placed yet and subcluster ``k`` can host the whole job
  (a job may move whole to balance load; it is never spread needlessly).
  "Can host all" is a greedy capacity check on the tentative free GPUs, cores and
  memory (``envs.observations.scopes_can_host_rest``: workers fill the servers with
  the most room first, the PS must fit in what is left). In every other case forward
  actions are masked: the agent places the task itself. ``env.forward_rule: free``
  restores the unrestricted rule (forward to any subcluster with room for the task),
  which :meth:`ClusterPlacementEnv.replay_placement` needs to replay placements that
  spread a job needlessly. The agents' own decision process
  (``agents.single_agent.PlacementSession``) applies the same rule.

A forward is legal only if the task fits locally (then a local slot is legal too) or
forward targets have room, so the acting agent always has a legal action, unless
no group of the datacenter has room for the task (possible only through CPU or
memory, since the simulator offers a job only when enough GPUs are free): then the
job's tentative placement is dropped (``sim.apply(None)``: the job stays queued and
is offered again after the next event) and the env moves to the next decision; no
agent acts on it. An illegal action (masked, out of range, or an action from an
agent that is not acting) raises ``ValueError`` naming the agent, the action and why.

``action_spaces[agent].sample()`` without a mask draws a legal action for the acting
agent (RLlib's env checker and random-action warm-up call it; see
:class:`MaskedDiscrete`).

Slot ``G + k`` of agent ``k`` itself (forward to self) is the **no-op** slot: it is
never legal for an acting agent, and it is the only 1 in the mask of an observation
that asks for no decision (the terminal observations here; idle agents of the
PettingZoo adapter).

Observation (``gymnasium.spaces.Dict``; the same space object for every call)
------------------------------------------------------------------------------
The acting agent's own subcluster as a padded hierarchical graph, plus the pending
task's job and the exchanged summaries of every subcluster. ``G``, ``S``, ``R`` =
``max_groups``, ``max_servers``, ``max_racks``; padding rows are 0 with mask 0. All
features are float32; "tentative" = after this job's tasks placed so far; pressure
vectors are the catalogue's per-task pressure units summed over resident tasks of
*running* jobs, in resource order (cpu, pcie, membw, disk, net); ``ln1p(x)`` =
``ln(1 + x)``; "jobs on a link" = running jobs whose traffic crosses it.

================  =============  ======  =================================================
key               shape          dtype   content
================  =============  ======  =================================================
``group_x``       (G, 25)        f32     per GPU group, columns ``GROUP_FEATURES``:
                                         0 tentative free GPUs / group GPUs; 1 group GPUs /
                                         max group GPUs in the DC; 2 GPU speed (V100 = 1);
                                         3 this job's workers here / its workers; 4 its PS
                                         here / max(its PS, 1); 5-9 group pressure (5);
                                         10-14 the group's socket pressure (5); 15-19 its
                                         server pressure (5); 20 ln1p(jobs on its PCIe
                                         link); 21 server CPU free fraction (tentative);
                                         22 server memory free fraction (tentative);
                                         23 ln1p(jobs on the server NIC); 24 1 if the
                                         task fits here (= the slot's mask)
``group_mask``    (G,)           f32     1 for real groups
``group_server``  (G,)           i64     local index of the group's server (pad: 0)
``server_x``      (S, 14)        f32     per server, ``SERVER_FEATURES``: 0 tentative free
                                         GPU fraction; 1 server GPUs / max in DC; 2 GPU
                                         speed; 3 CPU free fraction; 4 memory free fraction
                                         (tentative); 5-9 server pressure (5); 10 ln1p(jobs
                                         on NIC); 11 ln1p(jobs on QPI); 12 NIC Gbit/s / 100;
                                         13 this job's tasks here / its tasks
``server_mask``   (S,)           f32     1 for real servers
``server_rack``   (S,)           i64     local index of the server's rack (pad: 0)
``rack_x``        (R, 12)        f32     per rack, ``RACK_FEATURES``: 0 tentative free GPU
                                         fraction; 1 rack GPUs / max in DC; 2 ln1p(jobs on
                                         uplink); 3 uplink Gbit/s / 1000; 4 mean server CPU
                                         free fraction; 5 mean memory free fraction;
                                         6-10 mean server pressure (5); 11 this job's tasks
                                         here / its tasks
``rack_mask``     (R,)           f32     1 for real racks
``job_x``         (24,)          f32     the pending task's job, ``JOB_FEATURES``: 0-4
                                         pressure (5); 5-9 sensitivity (5); 10 log10(s per
                                         iteration on a V100); 11 log10(model MB);
                                         12 log10(iterations x s per iteration, s);
                                         13 ln1p(workers); 14 ln1p(PS); 15 tasks left to
                                         place incl. this one / tasks; 16 task is a
                                         worker; 17 task is a PS; 18 tasks placed in this
                                         subcluster / tasks; 19 placed elsewhere / tasks;
                                         20 ln1p(queued jobs); 21 (now - episode's first
                                         submit) / episode's arrival span (s/s, > 1 after
                                         the last arrival); 22 forwards of this task /
                                         max(A - 1, 1); 23 this agent is the job's home
``peers_x``       (A, 16)        f32     the exchanged summary of every subcluster (row k =
                                         agent k; refreshed every step), ``PEER_FEATURES``:
                                         0 row is the observer; 1 row is the job's home;
                                         2 tentative free GPU fraction; 3 ln1p(free GPUs);
                                         4 CPU free fraction; 5 memory free fraction;
                                         6-10 mean server pressure (5); 11 ln1p(jobs on the
                                         subcluster uplink); 12 mean ln1p(jobs on rack
                                         uplinks); 13 mean ln1p(jobs on NICs); 14 this
                                         job's tasks there / its tasks; 15 1 if a group
                                         there fits the task
``peers_mask``    (A,)           f32     rows visible (all; only own with exchange false)
``action_mask``   (G + A,)       f32     legal actions (see above)
================  =============  ======  =================================================

An observation's size is bounded by the largest subcluster, not the datacenter (a
4,000-server, 16-agent datacenter: ``G`` = 1,000). Arrays are freshly allocated
every step; nothing handed out is a live simulator object or a view of its arrays.

Reward (cooperative; :mod:`envs.rewards`)
-----------------------------------------
Each env step has one team reward ``r_t = r_time + r_shape`` with ``n`` the jobs
of the episode:

- ``r_time = -(∫ N(t) dt over the step's simulated time) / (time_scale_s · n)``,
  ``N(t)`` = jobs submitted and not finished. ``Σ JCT = ∫ N dt``, so over a finished
  episode the time terms sum to exactly ``-avg JCT / time_scale_s``.
- ``r_shape = -w · ((ŝ_job - 1) + Σ_neighbours (ŝ_after - ŝ_before)) / n`` on the
  step that completes a job's placement, ``w = slowdown_weight``, ``ŝ`` the predicted
  interference slowdown (iteration time in the current cluster / iteration time of
  the same placement alone, ≥ 1) of the placed job and of the running jobs it now
  shares a server or a link with: from the learned interference model
  (``marl_sched.interference``) when ``use_learned_reward`` and its model file
  exists, else from the simulator's performance model (``env.reward_model`` says
  which, and why).

Delivery (RLlib semantics: a reward reaches an agent with its next observation):
every agent that has acted in the episode accumulates every team reward from then
on; an agent's entry in the reward dict, present whenever it is in the obs dict and
has acted before, is the sum of team rewards since its previous action. At the end
of the episode every agent that acted gets a last (terminal) observation and the rest
of its sum. So each agent's return is the team return from its first action on.
The PettingZoo adapter gives every agent ``r_t`` every step.

Episodes
--------
The config's trace window (``workload.start``/``max_jobs``) is loaded once; an
episode is a slice of ``env.window_jobs`` consecutive jobs of it (whole window if
null), chosen at ``reset`` by ``env.window_sampling``/``env.window_starts`` from the
``reset`` seed, or exactly with ``reset(options={"window_start": i})``. Job ids are
re-numbered 0..n-1; submit times are kept (time features count from the slice's
first submit). ``terminated`` when the simulator has nothing left (every job done, or
never placeable); ``truncated`` at the first decision ``max_sim_time`` seconds after
the slice's first submit, or once ``max_placed_jobs`` jobs are placed. The terminal
``infos[agent]["metrics"]`` is ``marl_sched.metrics.compute_metrics`` of the episode
(``avg_jct_s``, ``p95_jct_s``, ``makespan_s``, ``jobs_completed``, ...), with
``team_return`` and ``window_start``.

Arguments
---------
``ClusterPlacementEnv(config="configs/default.yaml", *, env=None, jobs=None)``:
``config`` a YAML path, an ``ExperimentConfig``, or an RLlib ``EnvContext``/dict with
keys ``config`` and optional ``env``; ``env`` overrides keys of the config's ``env:``
section (validated: a bad key raises ``InputError`` naming ``env.<key>``); ``jobs``
replaces the config's trace window (dense ``job_id`` 0..n-1, sorted by submit).
``env:`` keys are those of :class:`envs.config.EnvConfig`.

Seeding: ``reset(seed=s)`` seeds the slice choice; everything else is deterministic,
so equal seeds and actions give identical observations, rewards and metrics.

Version history
---------------
- v0: first version.
- v0, revised: forward when you must (``env.forward_rule``, default ``must``); the
  first version's rule is ``forward_rule: free``.
"""

from __future__ import annotations

import dataclasses
import operator
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from ray.rllib.env.multi_agent_env import MultiAgentEnv

from envs import ENV_ID
from envs.config import env_config
from envs.observations import (
    WORKER,
    ClusterLayout,
    ClusterSummary,
    DecisionContext,
    JobDraft,
    ObservationBuilder,
    StepState,
)
from envs.rewards import (
    JobsInSystem,
    default_predictor,
    shaping_reward,
    snapshot_view,
    time_reward,
)
from marl_sched.config import ExperimentConfig, load_config
from marl_sched.errors import InputError
from marl_sched.jobs import Job, Placement
from marl_sched.metrics import compute_metrics
from marl_sched.runner import build_cluster, load_workload
from marl_sched.simulator import ClusterView, Simulator

DEFAULT_CONFIG = "configs/default.yaml"
Step = tuple[dict, dict, dict, dict, dict]


def _resolve_config(
    config: str | Path | ExperimentConfig | Mapping, env: Mapping | None
) -> ExperimentConfig:
    if isinstance(config, Mapping):  # an RLlib EnvContext
        env = {**(config.get("env") or {}), **(env or {})}
        config = config.get("config", DEFAULT_CONFIG)
    cfg = load_config(config)
    if env:
        cfg = dataclasses.replace(cfg, env={**cfg.env, **env})
    return cfg


class ClusterPlacementEnv(MultiAgentEnv):
    """The RLlib multi-agent placement environment (see the module docstring)."""

    metadata = {"render_modes": [], "name": ENV_ID}

    def __init__(
        self,
        config: str | Path | ExperimentConfig | Mapping = DEFAULT_CONFIG,
        *,
        env: Mapping[str, Any] | None = None,
        jobs: Sequence[Job] | None = None,
    ) -> None:
        super().__init__()
        cfg = _resolve_config(config, env)
        self.cfg = cfg
        self.env_config = ec = env_config(cfg)
        self.topology, self.perf = build_cluster(cfg)
        if jobs is None:
            workload = load_workload(cfg, self.perf)
            self._all_jobs, self.trace_path = workload.jobs, workload.trace_path
        else:
            self._all_jobs, self.trace_path = _checked_jobs(jobs), "<jobs>"
        self._window = min(ec.window_jobs or len(self._all_jobs), len(self._all_jobs))
        self._starts = self._window_starts(cfg.source)
        self.layout = ClusterLayout(
            self.topology, ec.max_groups, ec.max_servers, ec.max_racks, cfg.source
        )
        self.builder = ObservationBuilder(
            self.layout, exchange=ec.exchange, forward_rule=ec.forward_rule
        )
        n_agents = self.layout.n_agents
        self.possible_agents = [f"sc{k}" for k in range(n_agents)]
        self.agents = list(self.possible_agents)
        self._index = {a: k for k, a in enumerate(self.possible_agents)}
        self.observation_space = self.builder.space
        self.action_space = gym.spaces.Discrete(self.layout.n_actions)
        self.observation_spaces = {a: self.builder.space for a in self.possible_agents}
        self.action_spaces = {
            a: MaskedDiscrete(self.layout.n_actions, self._current_mask_of(k))
            for k, a in enumerate(self.possible_agents)
        }
        self._predictor, self.reward_model = default_predictor(ec.use_learned_reward)
        self._draft = JobDraft(self.layout)
        self._summary_key: tuple[int, int, int] | None = None
        self._sim: Simulator | None = None
        self._resets = 0
        self._done = True

    # ------------------------------------------------------------------ episodes

    def _window_starts(self, where: str) -> list[int]:
        ec, n, w = self.env_config, len(self._all_jobs), self._window
        for i, s in enumerate(ec.window_starts):
            if s + w > n:
                raise InputError(
                    f"{where}: env.window_starts[{i}]: a slice of {w} jobs from {s} passes "
                    f"the end of the config's {n}-job window"
                )
        if ec.window_starts:
            return list(ec.window_starts)
        if ec.window_sampling == "sequential":
            return list(range(0, n - w + 1, w))
        return list(range(n - w + 1)) if ec.window_sampling == "random" else [0]

    def _pick_start(self, options: dict | None) -> int:
        if options and options.get("window_start") is not None:
            start = operator.index(options["window_start"])
            if not 0 <= start <= len(self._all_jobs) - self._window:
                raise ValueError(
                    f"reset: options['window_start'] must be in [0, "
                    f"{len(self._all_jobs) - self._window}], got {start}"
                )
            return start
        mode = self.env_config.window_sampling
        if mode == "random":
            return self._starts[int(self.np_random.integers(len(self._starts)))]
        if mode == "sequential":
            return self._starts[(self._resets - 1) % len(self._starts)]
        return self._starts[0]

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed, options=options)
        self._resets += 1
        start = self._pick_start(options)
        chunk = self._all_jobs[start : start + self._window]
        if start:
            chunk = [dataclasses.replace(j, job_id=i) for i, j in enumerate(chunk)]
        self.window_start = start
        self._jobs = chunk
        self._n_jobs = len(chunk)
        self._t0 = chunk[0].submit_time
        self._span = max(chunk[-1].submit_time - self._t0, 1.0)
        sim = Simulator(
            self.topology,
            chunk,
            perf=self.perf,
            ordering=self.cfg.simulation.ordering,
            backfill=self.cfg.simulation.backfill,
        )
        self._sim = sim
        self._integral = JobsInSystem(np.array([j.submit_time for j in chunk]))
        self._last_integral = 0.0
        self._draft.clear()
        self._acted: dict[str, float] = {}  # agent -> reward accumulated since its action
        self._team_return = 0.0
        self.last_team_reward = 0.0
        self._round_robin = 0
        self._done = False
        self._terminated = self._truncated = False
        self._metrics: dict[str, Any] | None = None
        self._wall0 = time.perf_counter()
        self._advance(first=True)
        if self._done:
            raise RuntimeError(
                f"episode from job {start} of {self.trace_path} has no decision to make "
                "(no job of the slice can ever be placed)"
            )
        agent = self.possible_agents[self._acting]
        return {agent: self._observe_acting()}, {agent: {}}

    # ------------------------------------------------------------------ stepping

    def step(self, action_dict: Mapping[str, Any]) -> Step:
        if self._done:
            raise RuntimeError("step() after the episode ended: call reset()")
        agent = self.possible_agents[self._acting]
        others = sorted(set(action_dict) - {agent})
        if others:
            raise ValueError(
                f"actions for {others}, but only {agent} acts now (obs dict = acting agent)"
            )
        if agent not in action_dict:
            raise ValueError(f"no action for the acting agent {agent}")
        action = self._checked_action(agent, action_dict[agent])
        k = self._acting
        lay = self.layout
        reward = 0.0
        self._acted.setdefault(agent, 0.0)
        if action >= lay.max_groups:
            self._acting = action - lay.max_groups
            self._hops += 1
            self._state = self._state.with_context(self._context())
        else:
            self._draft.add(int(lay.group_start[k] + action))
            if self._draft.complete:
                reward += self._commit()
            else:
                self._hops = 0
                self._state = self._step_state()
                if not self._state.sc_room.any():
                    self._sim.apply(None)
                    self._draft.clear()
                    self._advance()
        integral = self._integral.value(self._sim)
        reward += time_reward(
            integral - self._last_integral, self.env_config.time_scale_s, self._n_jobs
        )
        self._last_integral = integral
        reward = float(reward)
        self.last_team_reward = reward
        self._team_return += reward
        for a in self._acted:
            self._acted[a] += reward
        return self._outputs()

    def _checked_action(self, agent: str, action: Any) -> int:
        try:
            a = operator.index(action)
        except TypeError:
            raise ValueError(f"agent {agent}: action must be an integer, got {action!r}") from None
        if not 0 <= a < self.layout.n_actions or self._mask[a] == 0:
            raise ValueError(f"agent {agent}: illegal action {a}: {self._why_masked(a)}")
        return a

    def _why_masked(self, action: int) -> str:
        lay, k = self.layout, self._acting
        if not 0 <= action < lay.n_actions:
            return f"out of range [0, {lay.n_actions})"
        kind = "worker" if self._draft.next_kind == WORKER else "parameter server"
        if action < lay.max_groups:
            if action >= lay.sc_groups[k]:
                return f"padding slot (subcluster {k} has {lay.sc_groups[k]} GPU groups)"
            g = int(lay.group_start[k] + action)
            s = int(self.topology.group_server[g])
            sim, d = self._sim, self._draft
            return (
                f"GPU group {g} has no room for a {kind} (free GPUs "
                f"{sim.group_free[g] - d.group_used[g]}, server {s} free CPU "
                f"{sim.server_cpu_free[s] - d.cpu_used[s]:g} cores, memory "
                f"{sim.server_mem_free[s] - d.mem_used[s]:g} GB)"
            )
        target = action - lay.max_groups
        if target == k:
            return "forward to self (the no-op slot) is never legal for the acting agent"
        if self._hops >= lay.n_agents - 1:
            return f"the task was already forwarded {self._hops} times (limit {lay.n_agents - 1})"
        st = self._state
        if not st.sc_room[target]:
            return f"subcluster {target} has no GPU group with room for a {kind}"
        if st.sc_room[k]:
            if not st.sc_rest[target]:
                return (
                    f"forward when you must: subcluster {k} can host the {kind}, and "
                    f"subcluster {target} cannot host all of the job's remaining tasks"
                )
            return (
                f"forward when you must: subcluster {k} can host the {kind} and all of "
                "the job's remaining tasks, and part of the job is already placed"
            )
        return f"subcluster {target} cannot take the {kind}"

    def _commit(self) -> float:
        """Apply the completed placement; the shaping reward; move to the next decision."""
        sim, job = self._sim, self._draft.job
        placement = Placement(tuple(self._draft.worker_groups), tuple(self._draft.ps_groups))
        prepared = self._predictor.prepare(sim, job, placement)
        sim.apply(placement)
        estimate = self._predictor.estimate(sim, job, placement, prepared)
        self._draft.clear()
        self._advance()
        return shaping_reward(estimate, self.env_config.slowdown_weight, self._n_jobs)

    def _advance(self, first: bool = False) -> None:
        """Run the simulator to the next decision that some agent can act on."""
        ec, sim = self.env_config, self._sim
        while True:
            if ec.max_placed_jobs is not None and sim.stats.placed >= ec.max_placed_jobs:
                return self._end(truncated=True)
            job = sim.next_decision()
            if job is None:
                return self._end(truncated=False)
            if not first and ec.max_sim_time is not None and sim.now - self._t0 >= ec.max_sim_time:
                return self._end(truncated=True)
            self._draft.start(job)
            self._home = self._acting = self._home_agent(job)
            self._hops = 0
            self._state = self._step_state()
            if self._state.sc_room.any():
                return None
            sim.apply(None)  # no group anywhere has CPU/memory for the first task
            self._draft.clear()

    def _home_agent(self, job: Job) -> int:
        rule = self.env_config.home_rule
        n = self.layout.n_agents
        if rule == "vc" and job.vc:
            return zlib.crc32(job.vc.encode("utf-8")) % n
        if rule == "round-robin":
            self._round_robin += 1
            return (self._round_robin - 1) % n
        free = np.add.reduceat(self._sim.group_free, self.layout.group_start[:-1])
        return int(np.argmax(free))

    def _context(self) -> DecisionContext:
        return DecisionContext(
            home=self._home, hops=self._hops, elapsed=(self._sim.now - self._t0) / self._span
        )

    def _summary(self) -> ClusterSummary:
        sim = self._sim
        key = (self._resets, sim.stats.events, sim.stats.placed)
        if key != self._summary_key:
            self._summary_key = key
            self._summary_cache = ClusterSummary(self.layout, sim)
        return self._summary_cache

    def _step_state(self) -> StepState:
        return StepState(self.layout, self._sim, self._draft, self._context(), self._summary())

    def _end(self, truncated: bool) -> None:
        self._done = True
        self._truncated = truncated
        self._terminated = not truncated
        self._draft.clear()
        self._state = StepState(self.layout, self._sim, self._draft, None, self._summary())

    def _current_mask_of(self, k: int) -> Callable[[], np.ndarray | None]:
        def mask() -> np.ndarray | None:
            return None if self._done or self._acting != k else self._mask

        return mask

    # ------------------------------------------------------------------ outputs

    def _observe_acting(self) -> dict[str, np.ndarray]:
        obs = self.builder.observe(self._state, self._acting, acting=True)
        self._mask = obs["action_mask"]
        return obs

    def _outputs(self) -> Step:
        if not self._done:
            agent = self.possible_agents[self._acting]
            obs = {agent: self._observe_acting()}
            rewards = {}
            if agent in self._acted:
                rewards[agent] = self._acted[agent]
                self._acted[agent] = 0.0
            return obs, rewards, {"__all__": False}, {"__all__": False}, {agent: {}}
        metrics = self.metrics()
        finished = [a for a in self.possible_agents if a in self._acted]
        obs = {a: self.builder.observe(self._state, self._index[a], False) for a in finished}
        rewards = {a: self._acted[a] for a in finished}
        terminateds = {a: self._terminated for a in finished}
        truncateds = {a: self._truncated for a in finished}
        terminateds["__all__"] = self._terminated
        truncateds["__all__"] = self._truncated
        infos = {a: {"metrics": metrics} for a in finished}
        return obs, rewards, terminateds, truncateds, infos

    def observe_all(self) -> dict[str, dict[str, np.ndarray]]:
        """Every agent's observation now: the acting agent's (with its mask), and the
        others' with only their no-op slot legal (all of them once the episode ended)."""
        out = {}
        for k, a in enumerate(self.possible_agents):
            if not self._done and k == self._acting:
                out[a] = self._observe_acting()
            else:
                out[a] = self.builder.observe(self._state, k, acting=False)
        return out

    # ------------------------------------------------------------------ inspection

    @property
    def acting_agent(self) -> str | None:
        """The agent that must act next (``None`` once the episode ended)."""
        return None if self._done else self.possible_agents[self._acting]

    @property
    def done(self) -> bool:
        return self._done

    @property
    def team_return(self) -> float:
        """Sum of the team rewards of the episode so far."""
        return self._team_return

    @property
    def pending_job(self) -> Job | None:
        """The job being placed (an immutable record), or ``None`` once ended."""
        return None if self._done else self._draft.job

    def cluster_view(self) -> ClusterView:
        """A snapshot (copied arrays) of the cluster, as a heuristic policy sees it."""
        return snapshot_view(self._sim.view())

    def metrics(self) -> dict[str, Any]:
        """``compute_metrics`` of the episode so far (final once it ended)."""
        if self._done and self._metrics is not None:
            return self._metrics
        m = compute_metrics(
            self._sim,
            policy="env",
            trace=self.trace_path,
            wall_s=time.perf_counter() - self._wall0,
            jobs_total=self._n_jobs,
        )
        m.update(
            team_return=self._team_return,
            window_start=self.window_start,
            truncated=self._truncated,
            reward_model=self.reward_model,
        )
        if self._done:
            self._metrics = m
        return m

    def placement_actions(self, placement: Placement) -> list[tuple[str, int]]:
        """The (agent, action) steps that place the pending job as ``placement`` does.

        Tasks go in the env's order (workers, then PS, each in ``placement`` order);
        a task whose group lies in another subcluster is first forwarded straight to
        the owning agent. Call it before any task of the job is placed.
        """
        if self._done or self._draft.placed or self._hops:
            raise RuntimeError("placement_actions needs a fresh pending job")
        job, lay, t = self._draft.job, self.layout, self.topology
        if (len(placement.worker_groups), len(placement.ps_groups)) != (
            job.num_workers,
            job.num_ps,
        ):
            raise ValueError(
                f"job {job.name}: placement has {len(placement.worker_groups)} workers / "
                f"{len(placement.ps_groups)} PS, job needs {job.num_workers} / {job.num_ps}"
            )
        steps, k = [], self._acting
        for g in (*placement.worker_groups, *placement.ps_groups):
            owner = int(t.group_subcluster[g])
            if owner != k:
                steps.append((self.possible_agents[k], lay.max_groups + owner))
                k = owner
            steps.append((self.possible_agents[k], int(g - lay.group_start[k])))
        return steps

    def replay_placement(self, placement: Placement) -> Step:
        """Step through :meth:`placement_actions`; returns the last step's outputs."""
        result = None
        for agent, action in self.placement_actions(placement):
            result = self.step({agent: action})
        return result


class MaskedDiscrete(gym.spaces.Discrete):
    """``Discrete(n)`` whose ``sample()`` without a mask respects the acting agent's mask.

    RLlib's env checker and its random-action warm-up call
    ``get_action_space(agent).sample()``; this keeps those actions legal. With an
    explicit ``mask``/``probability``, or for an agent that is not acting, it is
    plain ``Discrete.sample``. Copies and pickles are plain ``Discrete(n)`` (the
    link to the env is not carried along).
    """

    def __init__(self, n: int, current_mask: Callable[[], np.ndarray | None]) -> None:
        super().__init__(n)
        self._current_mask = current_mask

    def sample(self, mask: Any = None, probability: Any = None) -> np.int64:
        if mask is None and probability is None:
            current = self._current_mask()
            if current is not None:
                return super().sample(mask=(current > 0).astype(np.int8))
        return super().sample(mask=mask, probability=probability)

    def __reduce__(self) -> tuple:
        return (gym.spaces.Discrete, (int(self.n), int(self.start)))


def _checked_jobs(jobs: Sequence[Job]) -> list[Job]:
    jobs = list(jobs)
    if not jobs:
        raise ValueError("jobs: empty")
    for i, j in enumerate(jobs):
        if j.job_id != i:
            raise ValueError(f"jobs[{i}]: job_id must be {i} (dense, in order), got {j.job_id}")
        if i and j.submit_time < jobs[i - 1].submit_time:
            raise ValueError(f"jobs[{i}]: submit_time {j.submit_time} < the previous job's")
    return jobs


__all__ = ["ClusterPlacementEnv", "MaskedDiscrete"]
