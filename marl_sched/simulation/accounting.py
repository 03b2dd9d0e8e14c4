"""Cluster state and capacity accounting: free GPUs, cores and memory, pressures and
exposure, link loads, who shares each server and link; placing and removing jobs.

With ``topology.gpu_sharing`` k > 1 a GPU holds up to k jobs' workers: each worker gets
a GPU of its group (least loaded, then lowest id; never two of one job, never models
that cannot share, :meth:`~marl_sched.catalogue.Calibration.can_share`). Free capacity
is then in worker slots (``free_gpus``, ``group_unused``), while ``group_free`` counts
the GPUs a job may still use, one worker each. With k = 1 none of this state exists."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from marl_sched.catalogue import CATALOGUE, MODEL_NAMES, N_RESOURCES
from marl_sched.jobs import Job, Placement
from marl_sched.perf import JobLayout
from marl_sched.simulation.records import JobRecord, PlacementError, RunningJob

#: what "free" means in a refusal under GPU sharing
_SHARED_FREE = " (GPU sharing: GPUs with a free slot, no worker of a model it cannot share with)"


class AccountingMixin:
    """What the cluster has free and who runs where: the capacity, pressure, exposure,
    link and GPU-sharing arrays, memberships, ``running`` and ``records``."""

    def _init_cluster(self) -> None:
        """An empty cluster: everything free, nothing running."""
        t = self.topology
        self._sharing = int(t.gpu_sharing)
        self._group_free = t.group_slots.astype(np.int64).copy()
        self.server_cpu_free = t.server_cpu.copy()
        self.server_mem_free = t.server_memory_gb.copy()
        self.group_pressure = np.zeros((t.n_groups, N_RESOURCES))
        self.socket_pressure = np.zeros((t.n_sockets, N_RESOURCES))
        self.server_pressure = np.zeros((t.n_servers, N_RESOURCES))
        # bumped whenever a group's / socket's pressure row changes: a running job's
        # cached interference terms there are current while the version is the same
        self._group_ver = [0] * t.n_groups
        self._socket_ver = [0] * t.n_sockets
        self.link_jobs = np.zeros(t.n_links, dtype=np.int64)
        self.link_load = np.zeros(t.n_links)
        self.group_exposure = np.zeros((t.n_groups, N_RESOURCES))
        self.socket_exposure = np.zeros((t.n_sockets, N_RESOURCES))
        self.server_exposure = np.zeros((t.n_servers, N_RESOURCES))
        self.free_gpus = int(t.n_gpus) * self._sharing  # free worker slots
        # GPU sharing only (None without): workers, summed pressure and workers of
        # each catalogue model per GPU, and the GPUs holding at least one worker
        self.gpu_load: np.ndarray | None = None
        self.gpu_pressure: np.ndarray | None = None
        self._gpu_models: np.ndarray | None = None
        self._busy_gpus = 0
        self._no_share: dict[str, np.ndarray] = {}
        if self._sharing > 1:
            self.gpu_load = np.zeros(t.n_gpus, dtype=np.int64)
            self.gpu_pressure = np.zeros((t.n_gpus, N_RESOURCES))
            self._gpu_models = np.zeros((t.n_gpus, len(MODEL_NAMES)), dtype=np.int64)
            self._gpu_type = t.server_type[t.group_server[t.gpu_group]]
        self._server_jobs: list[set[int]] = [set() for _ in range(t.n_servers)]
        self._link_members: dict[int, set[int]] = {}
        self.running: dict[int, RunningJob] = {}
        self.records: dict[int, JobRecord] = {}

    @property
    def group_free(self) -> np.ndarray:
        """Free GPUs per GPU group (read-only); while a job is pending, only those it can use
        (0 where its workers do not fit the GPU memory; with sharing, GPUs with a slot and no
        incompatible model, one worker each)."""
        if self.gpu_load is not None:
            return self._usable_gpus(self._pending)
        if self._pending is not None:
            fits = self.perf.group_fits(self._pending.model)
            if not fits.all():
                return np.where(fits, self._group_free, 0)
        return self._group_free

    @property
    def group_unused(self) -> np.ndarray:
        """Free GPUs (with sharing: worker slots) per group whatever job is pending
        (read-only)."""
        return self._group_free

    def jobs_near(self, layout: JobLayout) -> set[int]:
        """Running jobs sharing a server or a link with ``layout`` (placed or not)."""
        near: set[int] = set()
        for s in layout.servers:
            near |= self._server_jobs[int(s)]
        for link in layout.links:
            near |= self._link_members.get(link, set())
        return near

    def neighbours(self, job_id: int) -> list[int]:
        """Running jobs (ids, ascending) sharing a server or a link with ``job_id``."""
        return sorted(self.jobs_near(self.running[job_id].layout) - {job_id})

    def _check(self, job: Job, placement: Placement) -> None:
        t = self.topology
        wg, pg = placement.worker_groups, placement.ps_groups
        if len(wg) != job.num_workers or len(pg) != job.num_ps:
            raise PlacementError(
                f"job {job.name}: placement has {len(wg)} workers / {len(pg)} PS, "
                f"job needs {job.num_workers} / {job.num_ps}"
            )
        # plain Python: placements are small, and this runs at every placement
        n_groups = t.n_groups
        if any(not 0 <= g < n_groups for g in (*wg, *pg)):
            raise PlacementError(f"job {job.name}: GPU group id out of range")
        need: dict[int, int] = {}
        for g in wg:
            need[g] = need.get(g, 0) + 1
        used = sorted(need)
        fits = self.perf.group_fits(job.model)
        for g in used:
            if not fits[g]:
                gpu = t.server_gpu_type[int(t.server_type[t.group_server[g]])]
                raise PlacementError(
                    f"job {job.name}: model {job.model} does not fit in a {gpu} GPU's "
                    f"memory (group {g})"
                )
        shared = self.gpu_load is not None
        free = self._usable_gpus(job) if shared else self._group_free
        for g in used:
            if need[g] > free[g]:
                raise PlacementError(
                    f"job {job.name}: group {g} has {free[g]} free GPUs, needs {need[g]}"
                    + (_SHARED_FREE if shared else "")
                )
        (cpu_w, cpu_p), mem = self.task_demands(job)
        server = t.group_server
        cpu_need: dict[int, float] = {}
        tasks: dict[int, int] = {}
        for groups, cpu in ((wg, cpu_w), (pg, cpu_p)):
            for g in groups:
                s = int(server[g])
                cpu_need[s] = cpu_need.get(s, 0.0) + cpu
                tasks[s] = tasks.get(s, 0) + 1
        for s, c in cpu_need.items():
            if (
                c > self.server_cpu_free[s] + 1e-9
                or tasks[s] * mem > self.server_mem_free[s] + 1e-9
            ):
                raise PlacementError(f"job {job.name}: not enough CPU or memory on a server")

    @staticmethod
    def task_demands(job: Job) -> tuple[tuple[float, float], float]:
        """((cpu per worker, cpu per PS), memory GB per task)."""
        spec = CATALOGUE[job.model]
        return (spec.cpu_worker, spec.cpu_ps), spec.mem_gb

    def _take(self, job: Job, placement: Placement, sign: int) -> None:
        """Give back (``sign`` +1) or take (-1) the GPUs, cores and memory of ``job`` at
        ``placement``, task by task (the same float operations as ``np.add.at``)."""
        server = self.topology.group_server
        gf, cpu_free, mem_free = self._group_free, self.server_cpu_free, self.server_mem_free
        (cpu_w, cpu_p), mem = self.task_demands(job)
        wg, pg = placement.worker_groups, placement.ps_groups
        for g in wg:
            gf[g] += sign
        self.free_gpus += sign * len(wg)
        srv_w = [int(server[g]) for g in wg]
        srv_p = [int(server[g]) for g in pg]
        if sign > 0:
            for s in srv_w:
                cpu_free[s] += cpu_w
            for s in srv_p:
                cpu_free[s] += cpu_p
            for s in (*srv_w, *srv_p):
                mem_free[s] += mem
        else:
            for s in srv_w:
                cpu_free[s] -= cpu_w
            for s in srv_p:
                cpu_free[s] -= cpu_p
            for s in (*srv_w, *srv_p):
                mem_free[s] -= mem

    def _occupy(
        self, job: Job, placement: Placement, layout: JobLayout
    ) -> tuple[set[int], set[int], set[int]]:
        """Take the resources of ``job`` at ``placement``; return the other running jobs
        whose pressures, link loads or oversubscribed links changed."""
        self._take(job, placement, -1)
        if layout.gpus is not None:
            self._take_gpus(job, layout, +1)
        self._add_pressure(layout, +1.0)
        self._add_exposure(job, layout, +1.0)
        near_srv: set[int] = set()
        near_link: set[int] = set()
        for s in layout.servers:
            members = self._server_jobs[int(s)]
            near_srv |= members
            members.add(job.job_id)
        near_sat: set[int] = set()
        over = self._shift_link_load(layout, +1.0)
        for link, sat in zip(layout.links, over, strict=True):
            self.link_jobs[link] += 1
            members = self._link_members.setdefault(link, set())
            near_link |= members
            if sat:
                near_sat |= members
            members.add(job.job_id)
        return near_srv, near_link, near_sat

    def _shift_link_load(self, layout: JobLayout, sign: float) -> list[bool]:
        """Add (+1) or remove (-1) the job's share of its links; per link, whether it is
        oversubscribed before or after. Call before ``link_jobs`` is decremented."""
        ids = layout.link_ids
        if not len(ids):
            return []
        load = self.link_load
        over = load[ids] > 1.0
        if sign > 0:
            load[ids] += layout.link_util
        else:
            load[ids] -= layout.link_util
            load[ids[self.link_jobs[ids] == 1]] = 0.0
        return (over | (load[ids] > 1.0)).tolist()

    def _take_gpus(self, job: Job, layout: JobLayout, sign: int) -> None:
        """GPU sharing: put (``sign`` +1) or take away (-1) the job's workers on
        their GPUs (one worker per GPU)."""
        spec = CATALOGUE[job.model]
        g = layout.gpus
        load = self.gpu_load
        busy_before = int(np.count_nonzero(load[g]))
        load[g] += sign
        self._busy_gpus += int(np.count_nonzero(load[g])) - busy_before
        self.gpu_pressure[g] += sign * spec.pressure
        self._gpu_models[g, spec.index] += sign
        if sign < 0:
            self.gpu_pressure[g[load[g] == 0]] = 0.0  # no float dust on idle GPUs

    def _no_share_gpus(self, model: str, gpu_models: np.ndarray | None = None) -> np.ndarray | None:
        """GPU sharing: per GPU, whether it holds a worker of a model that cannot share
        with ``model``; None if ``model`` shares with all."""
        table = self._no_share.get(model)
        if table is None:  # (server type, catalogue model): cannot share
            can = self.perf.calibration.can_share
            table = np.array(
                [[not can(gpu, model, other) for other in MODEL_NAMES]
                 for gpu in self.topology.server_gpu_type]
            )  # fmt: skip
            self._no_share[model] = table
        if not table.any():
            return None
        held = self._gpu_models if gpu_models is None else gpu_models
        return ((held > 0) & table[self._gpu_type]).any(axis=1)

    def _usable(
        self,
        job: Job | None,
        gpu_load: np.ndarray | None = None,
        gpu_models: np.ndarray | None = None,
    ) -> np.ndarray:
        """GPU sharing: per GPU, a free slot and (for ``job``) no incompatible model."""
        ok = (self.gpu_load if gpu_load is None else gpu_load) < self._sharing
        blocked = None if job is None else self._no_share_gpus(job.model, gpu_models)
        return ok if blocked is None else ok & ~blocked

    def _usable_gpus(self, job: Job | None, usable: np.ndarray | None = None) -> np.ndarray:
        """GPU sharing: per group, the GPUs ``job`` (any job's when None) may still put
        one worker on, memory fit included."""
        t = self.topology
        ok = self._usable(job) if usable is None else usable
        free = np.bincount(t.gpu_group, weights=ok, minlength=t.n_groups)
        free = free.astype(np.int64)
        return free if job is None else np.where(self.perf.group_fits(job.model), free, 0)

    def group_free_for(self, job_id: int) -> np.ndarray:
        """Per GPU group, the GPUs the running job ``job_id`` could put one worker on were
        its own workers released (where its model fits)."""
        run = self.running[job_id]
        if self.gpu_load is None:
            free = self._group_free.copy()
            np.add.at(free, np.asarray(run.placement.worker_groups, dtype=np.int64), 1)
            return np.where(self.perf.group_fits(run.job.model), free, 0)
        gpus = run.layout.gpus
        load, models = self.gpu_load.copy(), self._gpu_models.copy()
        load[gpus] -= 1
        models[gpus, CATALOGUE[run.job.model].index] -= 1
        return self._usable_gpus(run.job, self._usable(run.job, load, models))

    def _with_gpus(self, job: Job, layout: JobLayout) -> JobLayout:
        """GPU sharing: ``layout`` with a GPU for each worker (usable, least loaded, then
        lowest id); without sharing, ``layout`` itself."""
        if self.gpu_load is None:
            return layout
        t = self.topology
        usable, load = self._usable(job), self.gpu_load
        gpus = []
        for g, n in zip(layout.groups, layout.group_workers, strict=True):
            first = int(t.group_first_gpu[g])
            cand = first + np.flatnonzero(usable[first : first + int(t.group_capacity[g])])
            gpus.append(cand[np.lexsort((cand, load[cand]))][:n])
        idx = np.repeat(np.arange(len(layout.groups)), layout.group_workers)
        return replace(layout, gpus=np.concatenate(gpus), gpu_group_idx=idx)

    def _start(self, job: Job, placement: Placement) -> None:
        layout = self.perf.layout(CATALOGUE[job.model], placement.worker_groups,
                                  placement.ps_groups)  # fmt: skip
        layout = self._with_gpus(job, layout)
        near_srv, near_link, sat = self._occupy(job, placement, layout)
        iso = self.perf.isolated_iteration_time(job.model, job.num_workers, job.num_ps)
        held = self._suspended.pop(job.job_id, None)  # a preempted job resumes
        run = RunningJob(
            job=job,
            placement=placement,
            layout=layout,
            start_time=self.now if held is None else held[1],
            remaining=job.iterations if held is None else held[0],
            last_update=self.now,
            isolated_iter_time=iso,
            paused_until=0.0 if held is None else self.now + self._resume_delay(job),
            stint_start=self.now,
            version=0 if held is None else held[2],
        )
        self.running[job.job_id] = run
        self.stats.placed += 1
        self._refresh(near_srv, near_link, sat, fresh=job.job_id)
        if self.ordering.preemptive:
            self._schedule_tick(run)

    def _release(self, run: RunningJob) -> tuple[set[int], set[int], set[int]]:
        """Give back the resources of ``run``; return the affected running jobs, as
        :meth:`_occupy`."""
        job, layout = run.job, run.layout
        self._take(job, run.placement, +1)
        if layout.gpus is not None:
            self._take_gpus(job, layout, -1)
        self._add_pressure(layout, -1.0)
        self._add_exposure(job, layout, -1.0)
        near_srv: set[int] = set()
        near_link: set[int] = set()
        for s in layout.servers:
            members = self._server_jobs[int(s)]
            members.discard(job.job_id)
            near_srv |= members
        near_sat: set[int] = set()
        over = self._shift_link_load(layout, -1.0)
        for link, sat in zip(layout.links, over, strict=True):
            self.link_jobs[link] -= 1
            members = self._link_members[link]
            members.discard(job.job_id)
            near_link |= members
            if sat:
                near_sat |= members
            if not members:
                del self._link_members[link]
        self._clear_idle_servers(layout.servers)
        return near_srv, near_link, near_sat

    def _remove(self, run: RunningJob) -> None:
        t = self.topology
        job = run.job
        near_srv, near_link, sat = self._release(run)
        del self.running[job.job_id]
        self._completions += 1
        racks = set(t.server_rack[run.layout.servers].tolist())
        self.records[job.job_id] = JobRecord(
            job=job,
            start_time=run.start_time,
            finish_time=self.now,
            isolated_runtime=run.isolated_iter_time * job.iterations,
            n_servers=len({int(t.group_server[g]) for g in run.placement.worker_groups}),
            n_racks=len(racks),
            n_subclusters=len({int(t.rack_subcluster[r]) for r in racks}),
        )
        self._refresh(near_srv, near_link, sat)

    def _add_pressure(self, layout: JobLayout, sign: float) -> None:
        _add_rows(self.group_pressure, layout.groups, sign * layout.group_press)
        _add_rows(self.socket_pressure, layout.sockets, sign * layout.socket_press)
        _add_rows(self.server_pressure, layout.servers, sign * layout.server_press)
        group_ver, socket_ver = self._group_ver, self._socket_ver
        for g in layout.groups.tolist():
            group_ver[g] += 1
        for a in layout.sockets.tolist():
            socket_ver[a] += 1

    def _add_exposure(self, job: Job, layout: JobLayout, sign: float) -> None:
        """``num_workers · λ_L M^L ⊙ s`` at every unit holding one of the job's workers
        (once per unit: the job runs at its slowest worker's pace, whichever it is)."""
        w = sign * job.num_workers * layout.weights
        _add_rows(self.group_exposure, layout.groups, w[0])
        _add_rows(self.socket_exposure, layout.worker_socket_set, w[1])
        _add_rows(self.server_exposure, layout.worker_server_set, w[2])

    def _clear_idle_servers(self, servers: np.ndarray) -> None:
        """Zero the pressure and exposure of servers nobody uses any more (no float
        dust)."""
        t = self.topology
        for s in servers:
            if not self._server_jobs[int(s)]:
                a = t.server_first_socket[s]
                g = t.server_groups_start[s]
                for server, socket, group in (
                    (self.server_pressure, self.socket_pressure, self.group_pressure),
                    (self.server_exposure, self.socket_exposure, self.group_exposure),
                ):
                    server[s] = 0.0
                    socket[a : a + t.server_sockets[s]] = 0.0
                    group[g : g + t.server_n_groups[s]] = 0.0
                for i in range(int(a), int(a + t.server_sockets[s])):
                    self._socket_ver[i] += 1
                for i in range(int(g), int(g + t.server_n_groups[s])):
                    self._group_ver[i] += 1


def _add_rows(target: np.ndarray, rows: np.ndarray, values: np.ndarray) -> None:
    """``target[rows] += values`` for distinct ``rows``, row by row (``values``: one row
    per index or one for all)."""
    if len(rows) > 4:
        target[rows] += values
    elif values.ndim == 1:
        for r in rows.tolist():
            target[r] += values
    else:
        for i, r in enumerate(rows.tolist()):
            target[r] += values[i]
