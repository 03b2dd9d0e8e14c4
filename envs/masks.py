"""The capacity and the masks of a placement session: what the current task fits, which
scopes could take it or the rest of the job, and each agent's legal actions under the
environment's rules (forward when you must, consolidate, keep together, the speed floor,
wait to fit; documented in :mod:`envs.cluster_env`).

:class:`SessionMasks` is a part of :class:`envs.session.PlacementSession`: it reads the
session's draft (``builder``, ``job``, ``spec``, ``view``, ``group_free``, ``cpu``,
``mem``, ``workers``, ``visited``, ``task``, ``is_worker``, ``workers_left``, and
``can_keep`` and ``follow_targets`` for the keep and follow slots) and keeps the caches of
what follows from it. The pure checks over arrays are :mod:`envs.rules`'.
"""

from __future__ import annotations

import numpy as np

from envs.rules import action_towards, forward_targets, scopes_can_host_rest, server_worker_slots


class SessionMasks:
    """Capacity and action masks of a placement session (module docstring)."""

    def _init_masks(self) -> None:
        """The caches fixed for the job, then those of the current task."""
        self._masks: dict[int, np.ndarray] = {}  # per agent, until the next action
        self._capacity: np.ndarray | None = None  # per agent, on the view (fixed for the job)
        self._view_slots: np.ndarray | None = None  # per server, on the view (arrival_capacity)
        self._task_placed_masks()

    def _task_placed_masks(self) -> None:
        """Forget what held for the task just placed."""
        self._fits: tuple[np.ndarray, np.ndarray] | None = None
        self._hosts: np.ndarray | None = None
        self._rest: np.ndarray | None = None
        self._one: np.ndarray | None = None
        self._slots: np.ndarray | None = None
        self._fast: np.ndarray | None = None
        self._floor_lifted = False  # the speed floor left no legal action (this task)
        self._together: dict[int, tuple[np.ndarray, bool] | None] = {}  # per agent

    def fits(self) -> tuple[np.ndarray, np.ndarray]:
        """Per GPU group (global): can it take a worker / a PS now (0/1 floats)."""
        if self._fits is None:
            t, s = self.builder.topology, self.spec
            srv = t.group_server
            # the cores and memory checks per server, then spread to its groups
            mem_ok = self.mem + 1e-9 >= s.mem_gb
            ok_w = (self.cpu + 1e-9 >= s.cpu_worker) & mem_ok
            ok_p = (self.cpu + 1e-9 >= s.cpu_ps) & mem_ok
            fw = (self.group_free > 0) & ok_w[srv]
            self._fits = (fw.astype(np.float32), ok_p[srv].astype(np.float32))
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
            if self.job.num_ps <= len(self.ps):
                # no parameter server left to fit: a scope can when its servers' worker
                # slots add up to the remaining workers (whole numbers: the same sums)
                total = np.add.reduceat(self.worker_slots(), b.scope_server_start)
                self._rest = total >= self.workers_left
                return self._rest
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
        memory; :func:`envs.rules.server_worker_slots`), until the next task
        is placed."""
        if self._slots is None:
            if self.task == 0 and self._view_slots is not None:
                # nothing placed yet: the draft's GPUs, cores and memory are the view's
                self._slots = self._view_slots
            else:
                s = self.spec
                self._slots = server_worker_slots(
                    self.builder.topology, self.group_free, self.cpu, self.mem, s.cpu_worker,
                    s.mem_gb,
                )  # fmt: skip
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
            # the first task's worker slots, when the view's cores and memory are what
            # the draft starts from (float64 or whole numbers: the same arithmetic)
            if all(np.asarray(a).dtype.kind in "iu" or np.asarray(a).dtype == np.float64
                   for a in (v.server_cpu_free, v.server_mem_free)):  # fmt: skip
                self._view_slots = slots
        return self._capacity

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
        b = self.builder
        move = self.move_action() if mask is None and agent == self.agent else None
        if move is not None:  # migration_where: rule: keep, or the rule's option whole
            mask = np.zeros(b.pad[0] + b.n_agents + len(b.hints), dtype=np.float32)
            mask[move] = 1.0
            mask[b.pad[0] + agent] = 1.0
            self._masks[agent] = mask
        if mask is None:
            mask = self._action_mask(agent)
            if not mask.any() and self.fast_servers() is not None:
                self._floor_lifted = True  # the floor left nothing legal: lift it
                self._together = {}
                self._masks = {}  # any computed under the floor is stale
                mask = self._action_mask(agent)
            if self.can_keep:
                mask[b.pad[0] + agent] = 1.0  # keep: the agent's own forward slot
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
        if not self.ask_follows:  # a session that only checks placements: no hint asked
            return mask
        # a follow is legal when the action it takes is: the local slot of its target
        # (which has room for the task), or a plan hint's forward to the target's owner
        mask[g_max + a : g_max + a + len(b.hints)] = [
            g is not None and mask[action_towards(b, agent, g)] > 0
            for g in self.follow_targets(agent)
        ]
        return mask
