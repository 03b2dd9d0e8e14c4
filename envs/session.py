"""The placement session of ``ClusterPlacement-v1``: one job's tentative placement,
task by task, and the action masks that follow from the environment's rules.

A :class:`PlacementSession` is opened when the simulator offers a job; it holds the
tasks placed so far and the GPUs, cores and memory they take (the simulator learns of
the job only when its whole placement is applied), answers which actions are legal
for any agent (:meth:`PlacementSession.action_mask`), and applies them
(:meth:`PlacementSession.act`). The rules are documented in :mod:`envs.cluster_env`.

With ``env.migration: on`` a session may instead re-place a running job (a *move*):
it is opened on the cluster with that job's own GPUs, cores and memory counted free
(:func:`released_view`), and until its first task is placed the acting agent's own
forward slot is **keep** (leave the job where it is).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import numpy as np

from envs.observations import ObservationBuilder
from envs.rules import (
    forward_targets,
    placement_key,
    scope_view,
    scopes_can_host_rest,
    server_worker_slots,
)
from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job, Placement
from marl_sched.policies.heuristics import ps_near_workers
from marl_sched.policies.load_control import given_back
from marl_sched.simulator import ClusterView, RunningInfo, harm_to_residents

#: a running job's slowdown is capped here in the features (an unbounded one is not)
MAX_SLOWDOWN = 100.0


class PlacementSession:
    """The tentative placement of one job, task by task (a draft over a view).

    Args:
        builder: the observation builder of the topology.
        job: the job to place.
        view: the cluster when the job came up (not modified); for a move, the
            cluster with the job's own resources free (:func:`released_view`).
        home: the agent the job arrives at (for a move, the agent offered it).
        moving: for a move, the running job as the simulator shows it (its current
            placement, slowdown and attained service); None for an arriving job.
        moves: for a move, how often the job has moved before.
    """

    def __init__(
        self,
        builder: ObservationBuilder,
        job: Job,
        view: ClusterView,
        home: int,
        moving: RunningInfo | None = None,
        moves: int = 0,
    ):
        self.builder = builder
        self.job = job
        self.view = view
        self.moving = moving
        self.moves = int(moves)
        self.kept = False  # a move declined (the keep action)
        spec = CATALOGUE[job.model]
        self.spec = spec
        w = view.perf.level_weights
        self.cost_weights = (w * spec.sensitivity, w * spec.pressure)
        self.group_free = np.asarray(view.group_free, dtype=np.float64).copy()
        self.cpu = np.array(view.server_cpu_free, dtype=np.float64)
        self.mem = np.array(view.server_mem_free, dtype=np.float64)
        self.job_groups = np.zeros(builder.topology.n_groups)
        self.workers: list[int] = []
        self.ps: list[int] = []
        self.agent = home
        self.visited = {home}
        self.hops = 0
        self._fits: tuple[np.ndarray, np.ndarray] | None = None
        self._hosts: np.ndarray | None = None
        self._rest: np.ndarray | None = None
        self._one: np.ndarray | None = None
        self._slots: np.ndarray | None = None
        self._fast: np.ndarray | None = None
        self._floor_lifted = False  # the speed floor left no legal action (this task)
        self._global: np.ndarray | None = None
        self._masks: dict[int, np.ndarray] = {}  # per agent, until the next action
        self._capacity: np.ndarray | None = None  # per agent, on the view (fixed for the job)
        self._harm: dict[bool, np.ndarray] = {}  # task kind (is PS) -> per-group harm
        self._together: dict[int, tuple[np.ndarray, bool] | None] = {}  # per agent
        # per agent: the hints' plans and their per-group counts (fixed for the job);
        # the hint features and follow targets (until the next task is placed)
        self._plans: dict[int, list[Placement | None]] = {}
        self._plan_counts: dict[int, list[tuple[np.ndarray, np.ndarray] | None]] = {}
        self._hints: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._follow: dict[int, list[int | None]] = {}
        self._residents: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        # the learned model's features of candidate placements, shared by every hint
        # of this job (InterferenceAwarePolicy.candidate_cache)
        self._candidates: dict = {}

    # ------------------------------------------------------------------ state

    @property
    def can_keep(self) -> bool:
        """A move before its first task is placed: the acting agent may keep the job
        where it is (its own forward slot)."""
        return self.moving is not None and self.task == 0 and not self.kept

    def resident_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What a load controller reads of the running jobs (:meth:`ClusterView.running`):
        per GPU group, ln of the worker-weighted mean slowdown of the running jobs with
        a worker there and ``log10(1 + their mean attained GPU-s per worker) / 7``;
        per server, ln of the worker-weighted mean slowdown of the jobs with a worker
        on it (MLF-H's overload signal, ``agents.baselines.load_control``); 0 where
        none runs. The running jobs do not change while a session is open."""
        if self._residents is None:
            t = self.builder.topology
            groups, slow, attained = [], [], []
            for info in self.view.running():
                g = info.placement.worker_groups
                groups.extend(g)
                slow.extend([min(info.slowdown, MAX_SLOWDOWN)] * len(g))
                attained.extend([info.attained_gpu_s / max(info.num_workers, 1)] * len(g))
            g = np.asarray(groups, dtype=np.int64)
            n, srv = t.n_groups, t.group_server
            w = np.bincount(g, minlength=n).astype(np.float64)
            s_sum = np.bincount(g, weights=np.asarray(slow), minlength=n)
            a_sum = np.bincount(g, weights=np.asarray(attained), minlength=n)
            mean = np.divide(s_sum, w, out=np.ones(n), where=w > 0)
            att = np.divide(a_sum, w, out=np.zeros(n), where=w > 0)
            sw = np.bincount(srv, weights=w, minlength=t.n_servers)
            ss = np.bincount(srv, weights=s_sum, minlength=t.n_servers)
            srv_mean = np.divide(ss, sw, out=np.ones(t.n_servers), where=sw > 0)
            self._residents = (np.log(mean), np.log10(1.0 + att) / 7.0, np.log(srv_mean))
        return self._residents

    def mover_groups(self) -> np.ndarray:
        """Per GPU group (global): the moving job's current workers there over its
        workers (0 for an arriving job)."""
        n = self.builder.topology.n_groups
        if self.moving is None:
            return np.zeros(n)
        g = np.asarray(self.moving.placement.worker_groups, dtype=np.int64)
        return np.bincount(g, minlength=n) / max(len(g), 1)

    @property
    def task(self) -> int:
        return len(self.workers) + len(self.ps)

    def harm_to_residents(self) -> np.ndarray:
        """Per GPU group (whole datacenter), the size-weighted slowdown the current
        task would add to the resident jobs near it
        (:func:`marl_sched.simulator.harm_to_residents`). The residents do not change
        while a job is placed, so one array per task kind."""
        ps = not self.is_worker
        if ps not in self._harm:
            self._harm[ps] = harm_to_residents(self.view, self.spec.pressure, ps=ps)
        return self._harm[ps]

    @property
    def is_worker(self) -> bool:
        return len(self.workers) < self.job.num_workers

    @property
    def workers_left(self) -> int:
        return self.job.num_workers - len(self.workers)

    @property
    def done(self) -> bool:
        return self.kept or self.task >= self.job.num_tasks

    def fits(self) -> tuple[np.ndarray, np.ndarray]:
        """Per GPU group (global): can it take a worker / a PS now (0/1 floats)."""
        if self._fits is None:
            t, s = self.builder.topology, self.spec
            srv = t.group_server
            cpu_ok_w = self.cpu[srv] + 1e-9 >= s.cpu_worker
            cpu_ok_p = self.cpu[srv] + 1e-9 >= s.cpu_ps
            mem_ok = self.mem[srv] + 1e-9 >= s.mem_gb
            fw = (self.group_free > 0) & cpu_ok_w & mem_ok
            fp = cpu_ok_p & mem_ok
            self._fits = (fw.astype(np.float32), fp.astype(np.float32))
        return self._fits

    def _task_fits(self) -> np.ndarray:
        fw, fp = self.fits()
        return fw if self.is_worker else fp

    def scope_can_host(self) -> np.ndarray:
        """Per agent: does any of its groups have room for the current task (0/1)."""
        if self._hosts is None:
            b = self.builder
            hosts = np.maximum.reduceat(self._task_fits(), b.scope_group_start)
            self._hosts = (hosts > 0).astype(np.float32)
        return self._hosts

    def scope_can_host_rest(self) -> np.ndarray:
        """Per agent: can its scope alone host all of the job's remaining tasks (bool)."""
        if self._rest is None:
            b, s = self.builder, self.spec
            self._rest = scopes_can_host_rest(
                b.topology,
                b.scope_group_start,
                self.group_free,
                self.cpu,
                self.mem,
                (s.cpu_worker, s.cpu_ps, s.mem_gb),
                self.workers_left,
                self.job.num_ps - len(self.ps),
            )
        return self._rest

    def one_server_scopes(self) -> np.ndarray:
        """Per agent: can one server of its scope take all of the job's remaining workers
        (GPUs, cores and memory; bool)."""
        if self._one is None:
            self._one = self._scopes_with_one_server(self.worker_slots())
        return self._one

    def _scopes_with_one_server(self, slots: np.ndarray) -> np.ndarray:
        """Per agent: does one server of its scope have ``slots`` (per server, global)
        for all of the job's remaining workers (bool)."""
        best = np.maximum.reduceat(slots, self.builder.scope_server_start)
        return best >= max(self.workers_left, 1)

    def worker_slots(self) -> np.ndarray:
        """Per server (global): workers of this job it can take now (GPUs, cores and
        memory; :func:`envs.observations.server_worker_slots`), until the next task
        is placed."""
        if self._slots is None:
            s = self.spec
            self._slots = server_worker_slots(
                self.builder.topology, self.group_free, self.cpu, self.mem, s.cpu_worker, s.mem_gb
            )
        return self._slots

    def fast_servers(self) -> np.ndarray | None:
        """With ``builder.speed_floor``, for a worker: per server (global), do its GPUs
        clear the job's speed floor (:mod:`envs.cluster_env`); None when no floor applies."""
        b = self.builder
        if not b.speed_floor or not self.is_worker or self._floor_lifted:
            return None
        if self.job.gpu_work_s < b.speed_floor_min_work:  # an unknown (nan) length binds
            return None
        if self._fast is None:
            t = b.topology
            speed, slots = t.server_gpu_speed, self.worker_slots()
            top = 0.0  # no type has room for the rest: no floor
            for v in np.unique(speed)[::-1]:  # fastest type first
                if slots[speed >= v].sum() >= self.workers_left:
                    top = float(v)
                    break
            if self.workers:
                top = min(top, float(speed[t.group_server[self.workers]].min()))
            self._fast = speed >= b.speed_floor * top - 1e-9
        return self._fast

    def must_consolidate(self, agent: int) -> np.ndarray | None:
        """With ``builder.consolidate``: the agents a multi-worker job's first task must
        be forwarded to — those whose scope has one server for all of its workers, when
        ``agent``'s has none — else None (no constraint). Under a speed floor only the
        servers that clear it count."""
        if not self.builder.consolidate or self.task > 0 or self.job.num_workers < 2:
            return None
        one = self.one_server_scopes()
        fast = self.fast_servers()
        if fast is not None:
            one = self._scopes_with_one_server(self.worker_slots() * fast)
        if one[agent]:
            return None
        targets = self.forward_targets(agent) & one
        return targets if targets.any() else None

    def together(self, agent: int) -> tuple[np.ndarray, bool] | None:
        """With ``builder.keep_together`` or ``builder.speed_floor``, for a worker:
        ``(servers, stay)`` — the servers (bool, global) ``agent`` may put it on, and
        whether it must stay in the scope (no forwarding); None when no rule applies
        (:mod:`envs.cluster_env`)."""
        b = self.builder
        fast = self.fast_servers()
        if not self.is_worker or (not b.keep_together and fast is None):
            return None
        if agent not in self._together:
            t, slots = b.topology, self.worker_slots()
            mine = (b.server_scope == agent) & (slots >= 1)
            rule = None
            if b.keep_together:
                fill = np.zeros(t.n_servers, dtype=bool)
                fill[t.group_server[self.workers]] = True
                fill &= mine  # these clear the floor: it is at most the job's slowest GPU
                whole = mine & (slots >= self.workers_left)
                if fast is not None:
                    whole &= fast
                rule = (fill, True) if fill.any() else (whole, False) if whole.any() else None
            if rule is None and fast is not None:
                rule = (mine & fast, False)  # may be empty: then forward
            self._together[agent] = rule
        return self._together[agent]

    def fast_scopes(self) -> np.ndarray | None:
        """Per agent: does its scope have a server with a worker slot that clears the
        speed floor; None when no floor applies."""
        fast = self.fast_servers()
        if fast is None:
            return None
        ok = (fast & (self.worker_slots() >= 1)).astype(np.float32)
        return np.maximum.reduceat(ok, self.builder.scope_server_start) > 0

    def forward_targets(self, agent: int) -> np.ndarray:
        """Per agent: may ``agent`` forward the current task there (forward when you
        must; :meth:`action_mask` narrows it with :meth:`must_consolidate`)."""
        allowed = np.ones(self.builder.n_agents, dtype=bool)
        allowed[list(self.visited)] = False
        if self.builder.forward_rule == "free":
            return allowed & (self.scope_can_host() > 0)
        return forward_targets(
            self.scope_can_host() > 0,
            self.scope_can_host_rest(),
            agent,
            allowed,
            whole=self.task == 0,
        )

    def plans(self, agent: int) -> list[Placement | None]:
        """Per hint heuristic: its placement of the job inside ``agent``'s scope (on the
        view the job arrived on), or None."""
        if agent not in self._plans:
            b = self.builder
            if self._cannot_host(b.hint_policies, self.arrival_capacity()[agent]):
                plans = [None] * len(b.hint_policies)  # no heuristic can place it there
            else:
                view = self.view if b.central else scope_view(b, self.view, agent)
                plans = self._ask(b.hint_policies, view)
            self._plans[agent] = plans
            self._plan_counts[agent] = [
                None if p is None else (_PlanCounts(p.worker_groups), _PlanCounts(p.ps_groups))
                for p in plans
            ]
        return self._plans[agent]

    def arrival_capacity(self) -> np.ndarray:
        """Per agent: an upper bound on the workers of this job its scope could take on
        the view the job came up on — the sum over its servers of min(free GPUs,
        cores // cores per worker, memory // memory per task). Every heuristic respects
        GPU, CPU and memory capacity and returns None for a job it cannot place whole,
        so a scope (or a datacenter) below the job's workers gets no plan from any of
        them, and :meth:`plans` and :meth:`global_shares` skip asking (unless one of
        them draws random numbers, :meth:`_cannot_host`): the same features, without
        walking every server of a full cluster (tens of ms at 2,000 servers). Fixed
        for the job."""
        if self._capacity is None:
            b, s = self.builder, self.spec
            v = self.view
            slots = server_worker_slots(
                b.topology, np.asarray(v.group_free, dtype=np.float64), v.server_cpu_free,
                v.server_mem_free, s.cpu_worker, s.mem_gb,
            )  # fmt: skip
            self._capacity = np.add.reduceat(slots, b.scope_server_start)
        return self._capacity

    def _cannot_host(self, policies, capacity: float) -> bool:
        """May asking ``policies`` be skipped: ``capacity`` (:meth:`arrival_capacity`)
        is below the job's workers, and none of them draws random numbers (the random
        heuristic's generator advances even when it returns None: skipping it would
        change its later plans)."""
        return capacity < self.job.num_workers and not any(hasattr(h, "rng") for h in policies)

    def _ask(self, policies, view: ClusterView) -> list[Placement | None]:
        """Each policy's placement of the job on ``view``, the candidate features
        shared between them and every other hint of the job."""
        for h in policies:
            if hasattr(h, "candidate_cache"):
                h.candidate_cache = self._candidates
        try:
            return [h.place(self.job, view) for h in policies]
        finally:
            for h in policies:
                if hasattr(h, "candidate_cache"):
                    h.candidate_cache = None

    def global_shares(self) -> np.ndarray:
        """``(H_global, A)``: per global hint, the share of the job's tasks its
        placement in the whole datacenter puts in each agent's scope (0 if it cannot
        place the job); fixed for the job."""
        if self._global is None:
            b = self.builder
            out = np.zeros((len(b.global_policies), b.n_agents))
            skip = self._cannot_host(b.global_policies, self.arrival_capacity().sum())
            for i, p in enumerate(() if skip else self._ask(b.global_policies, self.view)):
                if p is not None:
                    groups = np.asarray([*p.worker_groups, *p.ps_groups], dtype=np.int64)
                    scopes = b.group_scope[groups]
                    out[i] = np.bincount(scopes, minlength=b.n_agents) / len(groups)
            self._global = out
        return self._global

    def follow_targets(self, agent: int) -> list[int | None]:
        """Per hint: the global group its follow action puts the current task on, or
        None when the action is not legal (:mod:`envs.cluster_env`)."""
        if not self.builder.hints:
            return []
        if agent not in self._follow:
            _, agrees = self.hints(agent)
            fits = self._task_fits()
            placed = self.workers if self.is_worker else self.ps
            out = []
            for plan, ok in zip(self.plans(agent), agrees, strict=True):
                target = None
                if plan is not None and ok:
                    todo = list(plan.worker_groups if self.is_worker else plan.ps_groups)
                    for g in placed:  # the plan's tasks already placed, in its order
                        todo.remove(g)
                    if todo and fits[todo[0]] > 0:
                        target = int(todo[0])
                out.append(target)
            self._follow[agent] = out
        return self._follow[agent]

    def hints(self, agent: int) -> tuple[np.ndarray, np.ndarray]:
        """``(H, n_groups)`` remaining planned tasks of the current kind per group (over
        the job's tasks of that kind) and ``(H,)`` does the job so far agree with each
        plan (:mod:`envs.cluster_env`)."""
        if agent in self._hints:
            return self._hints[agent]
        self.plans(agent)
        counts = self._plan_counts[agent]
        n = self.builder.topology.n_groups
        placed_w, placed_p = Counter(self.workers), Counter(self.ps)
        worker = self.is_worker
        total = self.job.num_workers if worker else max(self.job.num_ps, 1)
        left = np.zeros((len(counts), n))
        agrees = np.zeros(len(counts), dtype=np.float32)
        placed = placed_w if worker else placed_p
        for i, plan in enumerate(counts):
            if plan is None:
                continue
            w, q = plan
            # the job agrees with a plan when no group holds more of its tasks than planned
            if w.covers(placed_w) and q.covers(placed_p):
                agrees[i] = 1.0
            # max(planned - placed, 0) / total, nonzero only on the plan's own groups
            mine = w if worker else q
            if len(mine.groups):
                have = np.array([placed[g] for g in mine.group_list], dtype=np.int64)
                left[i, mine.groups] = np.maximum(mine.counts - have, 0) / total
        self._hints[agent] = (left, agrees)
        return left, agrees

    def feasible(self) -> bool:
        """Can the current task go anywhere?"""
        return bool(self._task_fits().any())

    def waits(self) -> bool:
        """With ``builder.wait_to_fit = c``, before the job's first task: does the job
        stay queued rather than split? Yes when it has at least 2 workers, an empty
        server could take all of them (GPUs, cores and memory), no server can take all
        of them now, and it has waited less than ``c ×`` its isolated runtime
        (:mod:`envs.cluster_env`)."""
        b, job = self.builder, self.job
        if not b.wait_to_fit or self.task > 0 or job.num_workers < 2:
            return False
        if self.empty_server_slots().max() < job.num_workers:
            return False  # no server can ever hold the job whole: waiting gains nothing
        if self.worker_slots().max() >= job.num_workers:
            return False
        iso = b.perf.isolated_iteration_time(job.model, job.num_workers, job.num_ps)
        # the estimated iterations (the job as the agents see it); unknown (nan): no wait
        return self.view.now - job.submit_time < b.wait_to_fit * iso * job.iterations

    def empty_server_slots(self) -> np.ndarray:
        """Per server (global): workers of this job it could take if it were empty."""
        t, s = self.builder.topology, self.spec
        return server_worker_slots(
            t, t.group_capacity, t.server_cpu, t.server_memory_gb, s.cpu_worker, s.mem_gb
        )

    def action_mask(self, agent: int) -> np.ndarray:
        """``agent``'s action mask now (a fresh array; computed once per agent until
        :meth:`act` changes the session, so the observation's mask and the check in
        :meth:`act` cost one computation)."""
        mask = self._masks.get(agent)
        if mask is None:
            mask = self._action_mask(agent)
            if not mask.any() and self.fast_servers() is not None:
                self._floor_lifted = True  # the floor left nothing legal: lift it
                self._together = {}
                self._masks = {}  # any computed under the floor is stale
                mask = self._action_mask(agent)
            if self.can_keep:
                mask[self.builder.pad[0] + agent] = 1.0  # keep: the agent's own forward slot
            self._masks[agent] = mask
        return mask.copy()

    def _action_mask(self, agent: int) -> np.ndarray:
        b = self.builder
        g_max, a = b.pad[0], b.n_agents
        mask = np.zeros(g_max + a + len(b.hints), dtype=np.float32)
        must = self.must_consolidate(agent)
        if must is not None:  # forward only
            mask[g_max : g_max + a] = must
            return mask
        groups = b.scopes[agent].groups
        local = self._task_fits()[groups]
        servers, stay = self.together(agent) or (None, False)
        if servers is not None:
            local = local * servers[b.topology.group_server[groups]]
        mask[: len(local)] = local
        if not stay:
            forward = self.forward_targets(agent)
            fast = self.fast_scopes()
            if fast is not None:
                if fast[agent]:
                    forward = forward & fast
                else:  # no server here clears the floor: forward to any scope with one
                    forward = fast.copy()
                    forward[list(self.visited)] = False
            mask[g_max : g_max + a] = forward
        mask[g_max + a : g_max + a + len(b.hints)] = [
            g is not None and (servers is None or servers[b.topology.group_server[g]])
            for g in self.follow_targets(agent)
        ]
        if b.follow_only and mask[g_max + a :].any():
            mask[:g_max] = 0.0  # a plan to follow here: follow one, or forward the job
        return mask

    def job_features(self, agent: int, agrees: np.ndarray | None = None) -> np.ndarray:
        job, s = self.job, self.spec
        n = job.num_tasks
        in_scope = self.job_groups[self.builder.scopes[agent].groups].sum() / n
        comm = min(2.0 * s.model_bytes / max(s.compute_s, 1e-6) / 1e10, 4.0)
        return np.concatenate(
            [
                [
                    math.log2(job.num_workers) / 6.0,
                    job.num_ps / 4.0,
                    float(self.is_worker),
                    self.task / n,
                    self.workers_left / job.num_workers,
                    min(s.compute_s, 4.0),
                    s.model_mb / 1000.0,
                    comm,
                    self.hops / max(self.builder.n_agents, 1),
                    in_scope,
                ],
                s.sensitivity,
                s.pressure,
                [_log_work(job.work_s)] * self.builder.job_length,
                self._move_features() if self.builder.migration else [],
                agrees if agrees is not None else [],
            ]
        ).astype(np.float32)

    def _move_features(self) -> list[float]:
        """``is_move, log_slowdown, attained, moves`` of the job (0 for an arrival)."""
        m = self.moving
        if m is None:
            return [0.0, 0.0, 0.0, 0.0]
        per_worker = m.attained_gpu_s / max(m.num_workers, 1)
        slow = math.log(max(min(m.slowdown, MAX_SLOWDOWN), 1e-9))
        return [1.0, slow, math.log10(1.0 + per_worker) / 7.0, float(self.moves)]

    # ------------------------------------------------------------------ actions

    def act(self, action: int) -> None:
        """Apply the acting agent's action (local group slot, forward or follow); with
        ``builder.follow_commits`` a follow action goes on placing the job's later tasks
        the same way while it stays legal for the same agent."""
        self._act(action)
        b = self.builder
        if b.follow_commits and action >= b.pad[0] + b.n_agents:
            while not self.done and self.feasible():
                mask = self.action_mask(self.agent)
                if action >= len(mask) or mask[action] == 0:
                    break
                self._act(action)

    def _act(self, action: int) -> None:
        b = self.builder
        g_max = b.pad[0]
        mask = self.action_mask(self.agent)
        if not (0 <= action < len(mask)) or mask[action] == 0:
            raise ValueError(f"agent {b.agent_ids[self.agent]}: action {action} is masked")
        self._masks = {}  # every action below changes what is legal
        if action >= g_max + b.n_agents:  # follow a hint's plan
            g = self.follow_targets(self.agent)[action - g_max - b.n_agents]
        elif action == g_max + self.agent and self.can_keep:
            self.kept = True  # the move is declined
            return
        elif action >= g_max:
            self.agent = action - g_max
            self.visited.add(self.agent)
            self.hops += 1
            return
        else:
            g = int(b.scopes[self.agent].groups[action])
        self._add(g)
        if b.ps_rule and self.job.num_ps and not self.ps and not self.is_worker:
            ps = ps_near_workers(self.job, self.view, self.workers)
            for p in ps or ():
                self._add(p)
        self.visited = {self.agent}
        self.hops = 0
        self._fits = None
        self._hosts = None
        self._rest = None
        self._one = None
        self._slots = None
        self._fast = None
        self._floor_lifted = False
        self._together = {}
        self._hints = {}
        self._follow = {}

    def _add(self, g: int) -> None:
        """Put the current task on global group ``g`` (the job's own accounting)."""
        t, s = self.builder.topology, self.spec
        srv = t.group_server[g]
        if self.is_worker:
            self.group_free[g] -= 1
            self.cpu[srv] -= s.cpu_worker
            self.workers.append(g)
        else:
            self.cpu[srv] -= s.cpu_ps
            self.ps.append(g)
        self.mem[srv] -= s.mem_gb
        self.job_groups[g] += 1

    def placement(self) -> Placement:
        return Placement(tuple(self.workers), tuple(self.ps))

    def moved(self) -> bool:
        """A finished move that changes where the job runs (not kept, and not the
        same groups as now, as multisets of workers and of PS)."""
        if self.moving is None or self.kept or not self.done:
            return False
        old = self.moving.placement
        return sorted(self.workers) != sorted(old.worker_groups) or sorted(self.ps) != sorted(
            old.ps_groups
        )


class MoveBook:
    """The bookkeeping of the migration decision (``env.migration: on``;
    :mod:`envs.cluster_env`, "Migration"): which agents a completion triggers, which
    running job each offered agent is given, and each job's moves so far. The
    environment keeps one per episode; :class:`agents.policy.MarlPolicy` keeps one per
    run, so that behind ``simulate`` a checkpoint is offered the same moves as in the
    environment.

    Args:
        builder: the observation builder (scopes and the cadence options
            ``migration_max_moves`` / ``migration_min_interval_s``).
    """

    def __init__(self, builder: ObservationBuilder) -> None:
        self.builder = builder
        self.scopes: dict[int, frozenset[int]] = {}  # running job -> its workers' agents
        self.moves: dict[int, int] = {}  # job -> moves so far
        self.last_move: dict[int, float] = {}  # job -> time of its last move
        self.offered: set[int] = set()  # jobs offered at the current trigger

    def placed(self, job_id: int, placement: Placement) -> None:
        """A job started (or moved) on ``placement``: its workers' agents are the
        ones its completion triggers."""
        groups = list(placement.worker_groups)
        self.scopes[job_id] = frozenset(self.builder.group_scope[groups].tolist())

    def finished(self, job_ids) -> set[int]:
        """The agents that held a worker of the finished jobs ``job_ids``; a new
        trigger begins (no job offered at it yet)."""
        agents: set[int] = set()
        for jid in job_ids:
            agents |= self.scopes.pop(jid, frozenset())
        self.offered = set()
        return agents

    def pick(self, view: ClusterView, agent: int) -> RunningInfo | None:
        """The running job offered to ``agent`` (marked offered): of those with a
        worker in its scope that may move (not restarting, under the cap, past the
        minimum interval, the simulator's own cap and interval, not offered yet at
        this trigger), the most slowed one (then the lowest id); None when none may."""
        b, now = self.builder, view.now
        best, key = None, None
        for info in view.running():
            jid = info.job_id
            if (
                jid in self.offered
                or info.paused_until > now
                or self.moves.get(jid, 0) >= b.migration_max_moves
                or now - self.last_move.get(jid, -math.inf) < b.migration_min_interval_s
                # the simulator's own cap and interval, where it has them
                or now < getattr(info, "next_move_at", 0.0)
                or agent not in b.group_scope[list(info.placement.worker_groups)]
            ):
                continue
            k = (min(info.slowdown, MAX_SLOWDOWN), -jid)
            if key is None or k > key:
                best, key = info, k
        if best is not None:
            self.offered.add(best.job_id)
        return best

    def session(
        self, view: ClusterView, info: RunningInfo, job: Job, agent: int, group_free: np.ndarray
    ) -> PlacementSession:
        """The move of ``info`` (seen as ``job``) offered to ``agent``, on ``view``
        with the job's own resources free (``group_free``: its usable GPUs were its
        own released, :meth:`marl_sched.simulator.Simulator.group_free_for`)."""
        released = released_view(view, info, group_free)
        return PlacementSession(self.builder, job, released, agent, moving=info,
                                moves=self.moves.get(info.job_id, 0))  # fmt: skip

    def moved(self, job_id: int, placement: Placement, now: float) -> None:
        """The simulator applied a move of ``job_id`` to ``placement`` at ``now``."""
        self.moves[job_id] = self.moves.get(job_id, 0) + 1
        self.last_move[job_id] = now
        self.placed(job_id, placement)


def released_view(view: ClusterView, info: RunningInfo, group_free: np.ndarray) -> ClusterView:
    """``view`` with the running job ``info``'s GPUs, cores and memory free, what a
    move is placed on. ``group_free``: the GPUs it could use were its own released
    (:meth:`marl_sched.simulator.Simulator.group_free_for`: GPU memory and sharing
    rules included). Pressures, link counts and exposures still count the job
    where it runs (documented in :mod:`envs.cluster_env`)."""
    cpu, mem = given_back(view, info)
    return dataclasses.replace(
        view,
        group_free=np.asarray(group_free),
        server_cpu_free=cpu,
        server_mem_free=mem,
        free_gpus=view.free_gpus + info.num_workers,
    )


def _log_work(work_s: float) -> float:
    """``log10(1 + work)/7`` of the estimated work; 0 when no estimate exists (nan)."""
    return math.log10(1.0 + work_s) / 7.0 if math.isfinite(work_s) else 0.0


def action_towards(builder: ObservationBuilder, agent: int, g: int) -> int:
    """``agent``'s action that brings a task closer to GPU group ``g``: the local slot
    of ``g`` when ``agent`` owns it, else forwarding straight to its owner."""
    owner = int(builder.group_scope[g])
    if owner != agent:
        return builder.pad[0] + owner
    return int(np.searchsorted(builder.scopes[owner].groups, g))


def follow_action(session: PlacementSession, plan: Placement) -> int | None:
    """The acting agent's follow action whose hint plans exactly ``plan`` (the first
    such hint), when it is legal; else None."""
    b = session.builder
    if not b.hints:
        return None
    key = placement_key(plan)
    targets = session.follow_targets(session.agent)
    for i, p in enumerate(session.plans(session.agent)):
        if p is not None and targets[i] is not None and placement_key(p) == key:
            return b.pad[0] + b.n_agents + i
    return None


def plan_action(session: PlacementSession, plan: Placement) -> int | None:
    """The acting agent's action towards ``plan`` for the session's current task, as
    the warm start labels it: the follow action of a hint that plans exactly ``plan``
    (:func:`follow_action`), else the slot of, or the forward towards, the group
    ``plan`` gives this task (:func:`action_towards`); None past the plan's tasks. The
    action may still be masked."""
    groups = (*plan.worker_groups, *plan.ps_groups)
    if session.task >= len(groups):
        return None
    action = follow_action(session, plan)
    if action is None:
        action = action_towards(session.builder, session.agent, groups[session.task])
    return action


def placement_steps(builder: ObservationBuilder, start: int, placement: Placement) -> list[int]:
    """The actions that place ``placement`` task by task, starting at agent ``start``:
    a task whose group lies in another scope is first forwarded straight to its owner."""
    steps, k = [], start
    for g in (*placement.worker_groups, *placement.ps_groups):
        owner = int(builder.group_scope[g])
        if owner != k:
            steps.append(action_towards(builder, k, g))
            k = owner
        steps.append(action_towards(builder, k, g))
    return steps


def follows_forward_rule(
    builder: ObservationBuilder, job: Job, view: ClusterView, home: int, placement: Placement
) -> bool:
    """Can ``placement`` be made through the masks (forward when you must) from ``home``?"""
    session = PlacementSession(builder, job, view, home)
    for action in placement_steps(builder, home, placement):
        if session.action_mask(session.agent)[action] == 0:
            return False
        session.act(action)
    return session.done


class _PlanCounts:
    """A hint plan's tasks of one kind per GPU group: its groups (sorted, as
    ``np.unique``), their task counts, and a count per group for lookups (the job's few
    groups, rather than a count for every group of the datacenter)."""

    def __init__(self, groups) -> None:
        self.by_group = Counter(int(g) for g in groups)
        self.group_list = sorted(self.by_group)
        self.groups = np.array(self.group_list, dtype=np.int64)
        self.counts = np.array([self.by_group[g] for g in self.group_list], dtype=np.int64)

    def covers(self, placed: Counter) -> bool:
        """Does no group hold more of ``placed`` than the plan puts there?"""
        return all(c <= self.by_group.get(g, 0) for g, c in placed.items())
