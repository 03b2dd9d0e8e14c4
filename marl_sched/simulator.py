"""The discrete-event cluster simulator.

The event core is SimPy-small: a heap of ``(time, priority, seq, kind, payload)``
with a counter for deterministic ties, and one handler per event kind
(``ARRIVAL``, ``COMPLETION``, ``TICK``). Completions at a given time are handled
before arrivals, so freed GPUs are visible to the jobs arriving then; a tick (a
running job's attained service crossing a preemptive ordering's threshold) only
wakes the scan.

Scheduling is driven from outside, one decision at a time, so the same engine
serves ``marl-sched simulate`` (a :class:`~marl_sched.policies.Policy` places whole
jobs) and the multi-agent environment (agents place task by task)::

    sim = Simulator(topology, jobs)
    while (job := sim.next_decision()) is not None:
        sim.apply(policy.place(job, sim.view()))   # None = leave it queued
    result = sim.result()

``next_decision`` advances simulated time until some queued job could fit (enough
free GPUs) and returns it; the queue is scanned in the configured ordering
(:mod:`marl_sched.ordering`: keys read the duration predictor's estimate handed in as
``estimate``, never a job's true length), and with ``backfill`` a job that cannot be
placed does not block those behind it. Scans are incremental (only what could have
changed since the last one, :meth:`Simulator._begin_scan`). Load control moves a
running job with :meth:`Simulator.migrate`; a preemptive ordering (``las-2d``)
suspends and resumes jobs with :meth:`Simulator.preempt`, both keeping progress and
charging a restart priced by :class:`~marl_sched.migration.MigrationCost` (a
migration: the model's measured restart plus moving its state; a resume: the restart).
A migrated job holds its new GPUs through its delay; its old ones are free at once
(see :meth:`Simulator.migrate`). The simulator enforces a per-job cap on migrations
and a minimum interval between two of one job; a proposal breaking either is declined
and counted (:attr:`SimStats.migrations_declined`).

Progress is integrated exactly: a running job's iteration time changes only at
events, so remaining iterations fall linearly in between. Whenever a job starts or
ends, the jobs whose neighbourhood changed (sharing a server or a link with it) are
brought up to date and get a new iteration time and completion event; stale
completion events are skipped by a version number.

**GPU sharing** (``topology.gpu_sharing`` k > 1, opt-in): a GPU holds up to k jobs'
workers. Each worker gets a concrete GPU of the group its placement names, the least
loaded first, then the lowest GPU id; two workers of one job never share a GPU, and
neither do workers of two models that cannot (Gavel's ``[0, 0]`` pairs,
:meth:`~marl_sched.catalogue.Calibration.can_share`). Free capacity is then counted
in worker slots (:attr:`Simulator.free_gpus`, :attr:`Simulator.group_unused`), while
:attr:`Simulator.group_free` counts the GPUs a (pending) job may still use, one worker
each: never more than the group's GPUs, so masks, heuristics and observations that
read it respect the limit unchanged. Same-GPU neighbours interfere through the GPU
level of :mod:`marl_sched.perf`. With k = 1 none of this state exists and every run
is what it was without the option.
"""

from __future__ import annotations

import heapq
import math
import time as _time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from marl_sched.catalogue import CATALOGUE, MODEL_NAMES, N_RESOURCES
from marl_sched.errors import InputError
from marl_sched.jobs import Job, Placement
from marl_sched.migration import MigrationCost
from marl_sched.ordering import OrderingContext, QueueOrdering, make_ordering
from marl_sched.perf import PS_PRESSURE_MASK, JobLayout, PerformanceModel
from marl_sched.topology import Topology

ARRIVAL, COMPLETION, TICK = "arrival", "completion", "tick"
# a tick (a running job's attained service crossing a preemptive ordering's
# threshold) only wakes the scan up, after the arrivals of its time
_PRIORITY = {COMPLETION: 0, ARRIVAL: 1, TICK: 2}
_COMPLETION_PRIORITY = _PRIORITY[COMPLETION]

#: what "free" means in a refusal under GPU sharing
_SHARED_FREE = " (GPU sharing: GPUs with a free slot, no worker of a model it cannot share with)"

#: the restart rule of a simulator built without one: ``simulation.migration_cost``'s default
DEFAULT_MIGRATION_COST = MigrationCost()


class NonFiniteError(InputError):
    """A computed time or speed is not finite: the inputs (topology figures, job
    lengths, arrival times) lie outside what the model can compute with. An input
    error, so the command exits 2 with one line instead of spinning forever."""


class PlacementError(ValueError):
    """A policy returned a placement that breaks capacity or the job's shape."""


@dataclass
class RunningJob:
    """Live state of a placed job (internal to the simulator)."""

    job: Job
    placement: Placement
    layout: JobLayout
    start_time: float
    remaining: float  # iterations
    iter_time: float = math.inf
    last_update: float = 0.0
    version: int = 0
    isolated_iter_time: float = 0.0
    paused_until: float = 0.0  # restarting after a migration or resume: no progress before
    stint_start: float = 0.0  # when it last got its GPUs (attained service counts from here)
    # the two state-dependent terms of iter_time, cached: interference changes only
    # when a job on one of its servers comes or goes, comm only when one on its links does
    interference: float = 1.0
    comm: float = 0.0


@dataclass(frozen=True)
class RunningInfo:
    """What a load controller may read of a running job (no true length).

    Attributes:
        slowdown: current iteration time over the isolated one (1 = no interference).
        attained_gpu_s: GPU-seconds the job has held its GPUs so far, all stints.
        paused_until: end of its restart delay (<= now when it is making progress).
        migrations: times it has been migrated so far.
        next_move_at: earliest time the simulator lets it migrate again (``inf``
            once it has reached ``max_migrations_per_job``).
    """

    job_id: int
    model: str
    num_workers: int
    num_ps: int
    placement: Placement
    start_time: float
    iter_time: float
    isolated_iter_time: float
    attained_gpu_s: float
    paused_until: float
    migrations: int = 0
    next_move_at: float = 0.0

    @property
    def slowdown(self) -> float:
        return self.iter_time / self.isolated_iter_time if self.isolated_iter_time > 0 else 1.0


def _no_running() -> tuple[RunningInfo, ...]:
    return ()


@dataclass
class JobRecord:
    """The outcome of one job."""

    job: Job
    start_time: float
    finish_time: float
    isolated_runtime: float
    n_servers: int
    n_racks: int
    n_subclusters: int

    @property
    def jct(self) -> float:
        return self.finish_time - self.job.submit_time

    @property
    def queue_time(self) -> float:
        return self.start_time - self.job.submit_time


@dataclass(frozen=True)
class ClusterView:
    """A read-only snapshot view of the cluster for policies.

    Arrays are views with the write flag off; they reflect the simulator at the
    moment :meth:`Simulator.view` was called and must not be kept across decisions.

    Attributes:
        now: simulated time (s).
        group_free: free GPUs per GPU group (while a job is pending: that the
            pending job's model fits in; see :meth:`Simulator.view`).
        server_cpu_free, server_mem_free: free CPU cores / memory (GB) per server.
        group_pressure, socket_pressure, server_pressure: summed pressure vectors of
            resident tasks, (n, 5) in resource order cpu, pcie, membw, disk, net.
        link_jobs: jobs whose traffic crosses each link.
        link_load: summed share of each link the jobs crossing it would use alone
            (``U_l`` of :mod:`marl_sched.perf`; > 1 = oversubscribed).
        group_exposure, socket_exposure, server_exposure: what resident jobs stand to
            lose to more pressure there, (n, 5): Σ over running jobs with a worker in
            the unit of ``num_workers · λ_L · M^L ⊙ s`` (their level-weighted
            sensitivity, times the GPUs that wait when one of their workers slows —
            a synchronous job runs at its slowest worker's pace). What a scheduler
            knows of its residents (where they run, how big they are, their model);
            :func:`harm_to_residents` turns it into a cost.
        free_gpus: total free GPUs (worker slots with GPU sharing).
        gpu_load, gpu_pressure: with GPU sharing, workers and their summed pressure
            per GPU (None without).
        group_free_for: with GPU sharing, :meth:`Simulator.group_free_for` (a running
            job's usable GPUs were its own released; load control needs it, as free
            slots alone do not say which GPUs a job may use); None without.
        running_fn: the running jobs (:meth:`running`), computed when asked.
    """

    topology: Topology
    perf: PerformanceModel
    now: float
    group_free: np.ndarray
    server_cpu_free: np.ndarray
    server_mem_free: np.ndarray
    group_pressure: np.ndarray
    socket_pressure: np.ndarray
    server_pressure: np.ndarray
    link_jobs: np.ndarray
    link_load: np.ndarray
    group_exposure: np.ndarray
    socket_exposure: np.ndarray
    server_exposure: np.ndarray
    free_gpus: int
    queue_length: int
    running_fn: Callable[[], tuple[RunningInfo, ...]] = field(
        default=_no_running, repr=False, compare=False
    )
    gpu_load: np.ndarray | None = None
    gpu_pressure: np.ndarray | None = None
    group_free_for: Callable[[int], np.ndarray] | None = field(
        default=None, repr=False, compare=False
    )

    def running(self) -> tuple[RunningInfo, ...]:
        """The running jobs, by job id: placement, slowdown, attained service."""
        return self.running_fn()


def harm_to_residents(view: ClusterView, pressure: np.ndarray, ps: bool = False) -> np.ndarray:
    """Per GPU group, the slowdown one more task pressing ``pressure`` (5,) would add
    to the jobs resident near it, each weighted by its workers (GPU-equivalents of
    lost progress): ``Σ_L E^L(g) · p``. A parameter server (``ps``) presses only on
    its socket and server, and only on cpu, membw and net."""
    t = view.topology
    p = pressure * PS_PRESSURE_MASK if ps else pressure
    harm = (view.socket_exposure @ p)[t.group_socket] + (view.server_exposure @ p)[t.group_server]
    if not ps:
        harm = harm + view.group_exposure @ p
    return harm


def _ro(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.setflags(write=False)
    return v


@dataclass
class SimStats:
    events: int = 0
    recomputes: int = 0
    decisions: int = 0
    placed: int = 0
    migrations: int = 0
    migrations_declined: int = 0  # proposals over the per-job cap or too soon
    migration_delay_s: float = 0.0  # total restart + state-move delay of migrations
    preemptions: int = 0
    busy_gpu_seconds: float = 0.0
    decision_s: list[float] = field(default_factory=list)


class Simulator:
    """Trace-driven simulation of one cluster under externally made decisions.

    Args:
        topology: the datacenter.
        jobs: jobs sorted by submit time with dense ``job_id`` 0..n-1.
        perf: performance model (default: calibrated model on ``topology``).
        ordering: queue ordering, a name in :data:`marl_sched.ordering.ORDERINGS`
            or a :class:`~marl_sched.ordering.QueueOrdering`.
        backfill: skip over queued jobs that cannot be placed now.
        estimate: the duration predictor's estimated *total* iterations of a job
            (``nan`` = no estimate), what length-aware orderings read; without it
            every estimate is ``nan`` (such orderings fall back to FIFO). The true
            length is never read for ordering.
        migration_cost: the restart rule of migrated and resumed jobs (a
            :class:`~marl_sched.migration.MigrationCost`, ``"measured"`` or flat seconds).
        max_migrations_per_job: moves one job may make; more are declined.
        min_migration_interval_s: seconds between two moves of one job; sooner ones
            are declined.
    """

    def __init__(
        self,
        topology: Topology,
        jobs: Sequence[Job],
        *,
        perf: PerformanceModel | None = None,
        ordering: str | QueueOrdering = "fifo",
        backfill: bool = True,
        estimate: Callable[[Job], float] | None = None,
        migration_cost: MigrationCost | float | str = DEFAULT_MIGRATION_COST,
        max_migrations_per_job: int = 1,
        min_migration_interval_s: float = 0.0,
    ) -> None:
        self.topology = topology
        self.perf = perf or PerformanceModel(topology)
        self.jobs = list(jobs)
        self.ordering = make_ordering(ordering)
        self.backfill = backfill
        self._estimate = estimate
        if not isinstance(migration_cost, MigrationCost):
            migration_cost = MigrationCost.parse(migration_cost)
        if max_migrations_per_job < 0 or not min_migration_interval_s >= 0:
            raise ValueError(
                "max_migrations_per_job and min_migration_interval_s must be >= 0, got "
                f"{max_migrations_per_job}, {min_migration_interval_s}"
            )
        self.migration_cost = migration_cost
        self.max_migrations_per_job = int(max_migrations_per_job)
        self.min_migration_interval_s = float(min_migration_interval_s)
        self._moves: dict[int, int] = {}  # job id -> migrations so far
        self._last_move: dict[int, float] = {}  # job id -> time of its last migration
        t = topology
        self.now = 0.0
        self._sharing = int(t.gpu_sharing)
        self._group_free = t.group_slots.astype(np.int64).copy()
        self.server_cpu_free = t.server_cpu.copy()
        self.server_mem_free = t.server_memory_gb.copy()
        self.group_pressure = np.zeros((t.n_groups, N_RESOURCES))
        self.socket_pressure = np.zeros((t.n_sockets, N_RESOURCES))
        self.server_pressure = np.zeros((t.n_servers, N_RESOURCES))
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
        self.queue: list[Job] = []
        self.records: dict[int, JobRecord] = {}
        self.unplaceable: list[Job] = []
        self.stats = SimStats()
        self._events: list[tuple] = []
        self._compact_at = 4096  # heap size that triggers dropping stale completions
        self._seq = 0
        self._scan: list[Job] | None = None
        self._scan_pos = 0
        self._pending: Job | None = None
        self._last_busy_t = 0.0
        # resources only ever come back at a completion, a migration or a preemption
        self._completions = 0
        self._declined: dict[int, int] = {}  # job id -> completions when last declined
        self._arrived: list[Job] = []  # jobs queued since the last scan began
        # static orderings: the queue split by width (each list in queue order) and
        # each queued job's key, so a scan reads only the jobs that could fit
        self._widths: dict[int, list[Job]] = {}
        self._keys: dict[int, tuple] = {}
        self._scanned_at = -1  # self._completions when the last full scan began
        # preempted jobs: job id -> (remaining iterations, first start time, version
        # of their last completion event, so that a stale one is never taken for theirs)
        self._suspended: dict[int, tuple[float, float, int]] = {}
        self._attained: dict[int, float] = {}  # GPU-s of finished stints
        self._last_stop: dict[int, float] = {}  # when a preempted job last stopped
        self._made_room: set[int] = set()  # waiting jobs that already preempted others
        self.after_completions: Callable[[Simulator], None] | None = None
        self._handlers = {
            ARRIVAL: self._on_arrival, COMPLETION: self._on_completion, TICK: self._on_tick,
        }  # fmt: skip
        for job in self.jobs:
            self._push(job.submit_time, ARRIVAL, job)

    # ------------------------------------------------------------------ event core

    def _push(self, when: float, kind: str, payload) -> None:
        heapq.heappush(self._events, (when, _PRIORITY[kind], self._seq, kind, payload))
        self._seq += 1

    def _advance_clock(self, when: float) -> None:
        if not math.isfinite(when):  # never reached: every pushed time is checked
            raise NonFiniteError(f"simulated time became {when!r}")
        if when < self.now:
            raise AssertionError(f"time ran backwards: {when} < {self.now}")
        busy = self.topology.n_gpus - self.free_gpus if self.gpu_load is None else self._busy_gpus
        self.stats.busy_gpu_seconds += busy * (when - self._last_busy_t)
        self._last_busy_t = when
        self.now = when

    def step(self) -> bool:
        """Handle every event at the next event time; False when none is left.

        After completions, :attr:`after_completions` (if set) is called with the
        simulator: the runner's hook for a policy's load control
        (:meth:`migrate`): set only when ``simulation.migration`` is on."""
        if not self._events:
            return False
        when = self._events[0][0]
        self._advance_clock(when)
        done = len(self.records)
        while self._events and self._events[0][0] == when:
            _, _, _, kind, payload = heapq.heappop(self._events)
            self.stats.events += 1
            self._handlers[kind](payload)
        if self.after_completions is not None and len(self.records) != done:
            self.after_completions(self)
        return True

    def _enqueue(self, job: Job) -> None:
        key = self.ordering.key
        ctx = self.ordering_context()
        k = key(job, ctx)
        q = self.queue
        # insert keeping order; arrivals come mostly in order, so search from the end
        i = len(q)
        while i > 0 and key(q[i - 1], ctx) > k:
            i -= 1
        q.insert(i, job)
        self._arrived.append(job)
        if not self.ordering.dynamic:  # the same order, by width (see _begin_scan)
            self._keys[job.job_id] = k
            b = self._widths.setdefault(job.num_workers, [])
            i = len(b)
            while i > 0 and self._keys[b[i - 1].job_id] > k:
                i -= 1
            b.insert(i, job)

    def _on_arrival(self, job: Job) -> None:
        self._enqueue(job)

    def _on_completion(self, payload: tuple[int, int]) -> None:
        job_id, version = payload
        run = self.running.get(job_id)
        if run is None or run.version != version:
            return  # stale event
        self._remove(run)

    def _on_tick(self, payload) -> None:
        """A running job crossed an attained-service threshold: the next scan
        re-ranks it (nothing else to do here)."""

    # ------------------------------------------------------------------ ordering

    def ordering_context(self) -> OrderingContext:
        """What the queue ordering may read now (see :mod:`marl_sched.ordering`)."""
        return OrderingContext(
            now=self.now,
            estimate=self.estimate_remaining_s,
            est_iterations=self.estimate_remaining_iterations,
            attained_gpu_s=self.attained_gpu_s,
            last_run_end=self._last_run_end,
        )

    def estimate_remaining_iterations(self, job: Job) -> float:
        """The predictor's estimated iterations of ``job`` minus those it has done
        (preempted jobs); ``nan`` without an estimate."""
        if self._estimate is None:
            return math.nan
        est = float(self._estimate(job))
        held = self._suspended.get(job.job_id)
        if held is not None and not math.isnan(est):
            est = max(est - (job.iterations - held[0]), 0.0)
        return est

    def estimate_remaining_s(self, job: Job) -> float:
        """Estimated remaining seconds of a queued job at its isolated speed."""
        iso = self.perf.isolated_iteration_time(job.model, job.num_workers, job.num_ps)
        return self.estimate_remaining_iterations(job) * iso

    def attained_gpu_s(self, job_id: int) -> float:
        """GPU-seconds ``job_id`` has held GPUs so far (0 if it never started)."""
        done = self._attained.get(job_id, 0.0)
        run = self.running.get(job_id)
        if run is not None:
            done += run.job.num_workers * (self.now - run.stint_start)
        return done

    def _last_run_end(self, job: Job) -> float:
        """When ``job`` last stopped running: now while it runs, its submit time if
        it never ran (its waiting time is ``now`` minus this)."""
        if job.job_id in self.running:
            return self.now
        return self._last_stop.get(job.job_id, job.submit_time)

    # ------------------------------------------------------------------ decisions

    def next_decision(self) -> Job | None:
        """Advance until a queued job could be placed; None when the run is over."""
        return self.next_decision_or_stop(None)

    def next_decision_or_stop(self, stop: Callable[[Simulator], bool] | None) -> Job | None:
        """:meth:`next_decision` that also hands control back between event times:
        after each event time (its events handled, the scan of the queue begun),
        ``stop(self)`` is asked; when it answers True this returns None with no job
        pending and the run not over (the caller knows why it stopped), and the next
        call carries on with the same scan. While ``stop`` answers False, the same
        jobs are offered at the same times as by :meth:`next_decision`. The
        environment's migration triggers (``envs.cluster_env``) stop here to let an
        agent :meth:`migrate` a running job before the queue is offered. ``stop``
        None: never (:meth:`next_decision`)."""
        if self._pending is not None:
            raise RuntimeError("apply() a decision for the pending job first")
        while True:
            if self._scan is not None:
                while self._scan_pos < len(self._scan) and self.free_gpus > 0:
                    job = self._scan[self._scan_pos]
                    self._scan_pos += 1
                    if job.num_workers <= self.free_gpus and (
                        self._declined.get(job.job_id) != self._completions
                    ):
                        self._pending = job
                        return job
                    if not self.backfill:
                        break
                self._scan = None
            if not self.step():
                self._finish_unplaceable()
                return None
            self._begin_scan()
            if stop is not None and stop(self):
                return None

    def wake_at(self, when: float) -> None:
        """Push a TICK event at ``when`` (>= now): an event time at which
        :meth:`next_decision_or_stop` asks its ``stop`` (nothing else happens then)."""
        if not math.isfinite(when) or when < self.now:
            raise ValueError(f"wake_at({when!r}) before now ({self.now}) or not finite")
        self._push(when, TICK, -1)

    def _begin_scan(self) -> None:
        """The jobs to offer after an event time, in queue order.

        A job already scanned since resources last came back (a completion, a
        migration, a preemption) was either declined or needed more GPUs than were
        free, and free GPUs only shrank since: offering it again cannot change a
        thing. So after an event time with arrivals only, just the arrivals are
        scanned (in queue order); a full scan follows any return of resources, and
        every scan is full without backfill or under a dynamic ordering. With
        backfill, a scan skips the jobs that need more GPUs than are free (free GPUs
        only shrink while it runs). None of this changes which job is offered when:
        the FIFO golden trace is the same bit for bit."""
        if self.ordering.dynamic and self.queue:
            key, ctx = self.ordering.key, self.ordering_context()
            self.queue.sort(key=lambda j: key(j, ctx))
            if self.ordering.preemptive and self.running:
                self._preempt_for_waiting(ctx)
        if not self.backfill:
            self._scan = self.queue[:]  # the head blocks: every scan starts from it
        elif self.ordering.dynamic:
            free = self.free_gpus
            self._scan = [j for j in self.queue if j.num_workers <= free]
        elif self._completions != self._scanned_at:
            # only the jobs that could fit now (free GPUs only shrink during a scan),
            # from the per-width lists, in queue order (the static keys)
            free = self.free_gpus
            lists = [b for w, b in self._widths.items() if w <= free and b]
            if len(lists) == 1:
                self._scan = lists[0][:]
            else:
                keys = self._keys
                self._scan = sorted((j for b in lists for j in b), key=lambda j: keys[j.job_id])
            self._scanned_at = self._completions
        elif len(self._arrived) > 1 and len(self.queue) > len(self._arrived):
            order = {id(j): i for i, j in enumerate(self.queue)}
            self._scan = sorted(self._arrived, key=lambda j: order[id(j)])
        else:
            self._scan = self._arrived[:]
        self._arrived.clear()
        self._scan_pos = 0

    def apply(self, placement: Placement | None, decision_s: float | None = None) -> bool:
        """Place the pending job (or leave it queued with ``None``); True if placed."""
        job = self._pending
        if job is None:
            raise RuntimeError("no pending decision: call next_decision() first")
        self._pending = None
        self.stats.decisions += 1
        if decision_s is not None:
            self.stats.decision_s.append(decision_s)
        if placement is None:
            # not offered again until a completion frees resources
            self._declined[job.job_id] = self._completions
            if not self.backfill:
                self._scan = None  # the head waits; nothing behind it may pass
            return False
        self._check(job, placement)
        # by identity: list.remove would call the dataclass __eq__ on every job queued
        # ahead of it (a third of the whole-Philly run once the queue grows)
        q = self.queue
        del q[next(i for i, other in enumerate(q) if other is job)]
        if not self.ordering.dynamic:
            b = self._widths[job.num_workers]
            del b[next(i for i, other in enumerate(b) if other is job)]
            del self._keys[job.job_id]
        self._declined.pop(job.job_id, None)
        self._made_room.discard(job.job_id)
        self._start(job, placement)
        return True

    # ------------------------------------------------------------------ load control

    def migrate(self, job_id: int, placement: Placement) -> bool:
        """Move the running job ``job_id`` to ``placement``; False if declined.

        A proposal is declined (state unchanged, counted in
        :attr:`SimStats.migrations_declined`) when the job has made
        ``max_migrations_per_job`` moves or its last one was less than
        ``min_migration_interval_s`` ago. Otherwise the job keeps its progress
        (remaining iterations) and makes none for its migration delay
        (:meth:`MigrationCost.migration_s`: its model's restart plus moving its state
        over the bottleneck link of the old→new path, sharing that link with the jobs
        on it now), holding its new GPUs throughout; every job whose neighbourhood
        changed (old or new) gets a new speed.

        The old GPUs are free at once, as in the Sia simulator the restart delays
        were measured by: the job stops and checkpoints first (part of the measured
        restart), and its state then moves from the old servers' host memory, not
        from their GPUs. Holding them too would charge the stop twice. Raises
        :class:`PlacementError` (state unchanged) if ``placement`` does not fit once
        the job's own resources are released."""
        if self._pending is not None:
            raise RuntimeError("migrate() between decisions, not while a job is pending")
        run = self.running.get(job_id)
        if run is None:
            raise KeyError(f"job {job_id} is not running")
        if self.now < self.next_move_at(job_id):
            self.stats.migrations_declined += 1
            return False
        self._progress(run)
        near_srv, near_link, sat = self._release(run)
        try:
            self._check(run.job, placement)
        except PlacementError:
            self._occupy(run.job, run.placement, run.layout)
            raise
        delay = self.migration_cost.migration_s(
            self.perf, self.link_jobs, run.job.model,
            run.placement.worker_groups, placement.worker_groups,
        )  # fmt: skip
        if not math.isfinite(delay):
            self._occupy(run.job, run.placement, run.layout)
            raise NonFiniteError(
                f"job {job_id} ({run.job.model}): migration delay {delay!r} s; a topology "
                "bandwidth is out of range"
            )
        layout = self.perf.layout(CATALOGUE[run.job.model], placement.worker_groups,
                                  placement.ps_groups)  # fmt: skip
        layout = self._with_gpus(run.job, layout)
        new_srv, new_link, new_sat = self._occupy(run.job, placement, layout)
        run.placement, run.layout = placement, layout
        run.paused_until = self.now + delay
        self.running[job_id] = run
        self._completions += 1  # resources moved: declined jobs may fit now
        self.stats.migrations += 1
        self.stats.migration_delay_s += delay
        self._moves[job_id] = self._moves.get(job_id, 0) + 1
        self._last_move[job_id] = self.now
        self._refresh(near_srv | new_srv, near_link | new_link, sat | new_sat, fresh=job_id)
        return True

    def next_move_at(self, job_id: int) -> float:
        """Earliest time the simulator lets ``job_id`` migrate: ``inf`` once it has
        made ``max_migrations_per_job`` moves, else its last move plus
        ``min_migration_interval_s`` (0 if it never moved)."""
        moves = self._moves.get(job_id, 0)
        if moves >= self.max_migrations_per_job:
            return math.inf
        if moves == 0:
            return 0.0
        return self._last_move[job_id] + self.min_migration_interval_s

    def _resume_delay(self, job: Job) -> float:
        """Seconds a preempted job restarts when it is placed again (no state move:
        its checkpoint's whereabouts are not modelled)."""
        return self.migration_cost.restart_s(job.model)

    def preempt(self, job_id: int) -> None:
        """Stop the running job ``job_id`` and queue it again with its progress kept
        (it pays its restart, :meth:`MigrationCost.restart_s`, when placed again)."""
        run = self.running[job_id]
        self._progress(run)
        near_srv, near_link, sat = self._release(run)
        self._attained[job_id] = self.attained_gpu_s(job_id)
        del self.running[job_id]
        self._suspended[job_id] = (run.remaining, run.start_time, run.version)
        self._last_stop[job_id] = self.now
        self._completions += 1
        self.stats.preemptions += 1
        self._enqueue(run.job)
        self._refresh(near_srv, near_link, sat)

    def _preempt_for_waiting(self, ctx: OrderingContext) -> None:
        """Tiresias-style preemption. Waiting jobs are taken in key order; one that
        needs more GPUs than are free (counting those already promised to the
        waiting jobs before it) preempts running jobs of a strictly worse priority
        class (the key's first element: las-2d's queue), worst first, when that makes
        room for it by GPU count; otherwise nobody. Inside a class: FIFO without
        preemption. A waiting job declined since resources last came back preempts
        nobody, and a job preempts at most once until it is placed (a policy may
        decline it on the GPUs freed for it: waiting for a whole server, say)."""
        key = self.ordering.key
        free = self.free_gpus
        victims = sorted(
            ((key(r.job, ctx), jid, r.job.num_workers) for jid, r in self.running.items()),
            reverse=True,
        )  # worst first
        losers: list[int] = []
        for job in self.queue:
            if not victims:
                break
            if self._declined.get(job.job_id) == self._completions or job.job_id in self._made_room:
                continue
            n = job.num_workers
            if n <= free:
                free -= n
                continue
            cls = key(job, ctx)[0]
            take, gain = 0, free
            while take < len(victims) and gain < n and victims[take][0][0] > cls:
                gain += victims[take][2]
                take += 1
            if gain >= n:
                losers.extend(jid for _, jid, _ in victims[:take])
                del victims[:take]
                free = gain - n
                if take:
                    self._made_room.add(job.job_id)
        for jid in losers:
            self.preempt(jid)

    def _schedule_tick(self, run: RunningJob) -> None:
        """Under a preemptive ordering, wake up when ``run``'s attained service
        crosses the next threshold of the ordering."""
        thresholds = getattr(self.ordering, "thresholds", ())
        attained = self.attained_gpu_s(run.job.job_id)
        nxt = next((t for t in thresholds if t > attained), None)
        if nxt is not None:
            self._push(self.now + (nxt - attained) / run.job.num_workers, TICK, run.job.job_id)

    def pending_arrivals(self) -> list[Job]:
        """The jobs whose arrival has not been handled yet, in the order they arrive."""
        arrivals = sorted((e for e in self._events if e[3] == ARRIVAL), key=lambda e: e[:3])
        return [e[4] for e in arrivals]

    def replace_arrivals(self, jobs: Sequence[Job]) -> None:
        """Replace the pending arrivals (:meth:`pending_arrivals`) by ``jobs``: as many,
        with the same job ids in the same order, none submitted before now, in
        submit order (``ValueError`` otherwise). The same state with another future:
        what-if rollouts (``agents.improve.resample_future``). Afterwards the simulator
        runs as one built with the spliced job list would from here."""
        old = self.pending_arrivals()
        if [j.job_id for j in jobs] != [j.job_id for j in old]:
            raise ValueError("replace_arrivals: the job ids must be the pending arrivals' ids")
        times = [j.submit_time for j in jobs]
        if any(t < self.now for t in times) or times != sorted(times):
            raise ValueError("replace_arrivals: submit times must be >= now and in order")
        self._events = [e for e in self._events if e[3] != ARRIVAL]
        heapq.heapify(self._events)
        for job in jobs:
            self.jobs[job.job_id] = job
            self._push(job.submit_time, ARRIVAL, job)

    def fork(self) -> Simulator:
        """An independent copy of the current state (for what-if rollouts).

        Topology, performance model and jobs (immutable) are shared; every piece of
        mutable state is copied, so driving the fork never changes ``self``. The
        fork's decision statistics start empty and it has no completion hook.
        """
        f = object.__new__(Simulator)
        f.__dict__.update(self.__dict__)
        for name in (
            "_group_free", "server_cpu_free", "server_mem_free", "group_pressure",
            "socket_pressure", "server_pressure", "link_jobs", "link_load",
            "group_exposure", "socket_exposure", "server_exposure",
        ):  # fmt: skip
            setattr(f, name, getattr(self, name).copy())
        f._server_jobs = [set(s) for s in self._server_jobs]
        f._link_members = {k: set(v) for k, v in self._link_members.items()}
        for name in ("gpu_load", "gpu_pressure", "_gpu_models"):
            if getattr(self, name) is not None:
                setattr(f, name, getattr(self, name).copy())
        f.running = {k: replace(r) for k, r in self.running.items()}
        f.queue = list(self.queue)
        f.records = dict(self.records)
        f.unplaceable = list(self.unplaceable)
        f.stats = SimStats(self.stats.events, self.stats.recomputes)
        f._events = list(self._events)
        f._scan = None if self._scan is None else list(self._scan)
        f._declined = dict(self._declined)
        f._arrived = list(self._arrived)
        f._widths = {w: list(b) for w, b in self._widths.items()}
        f._keys = dict(self._keys)
        f._suspended = dict(self._suspended)
        f._attained = dict(self._attained)
        f._last_stop = dict(self._last_stop)
        f._made_room = set(self._made_room)
        f._moves = dict(self._moves)
        f._last_move = dict(self._last_move)
        f.after_completions = None
        f._handlers = {ARRIVAL: f._on_arrival, COMPLETION: f._on_completion, TICK: f._on_tick}
        return f

    def estimated_total_jct(self, until: float) -> float:
        """Σ over jobs submitted by ``until`` of their completion time, as far as it
        is known now: finished jobs exactly, running ones at their current speed, and
        queued ones as if they started now at their isolated speed (a lower bound).
        The objective of what-if rollouts (:class:`agents.teachers.RolloutTeacher`)."""
        total = 0.0
        for job in self.jobs:
            if job.submit_time > until:
                break
            rec = self.records.get(job.job_id)
            if rec is not None:
                total += rec.finish_time - job.submit_time
                continue
            run = self.running.get(job.job_id)
            if run is not None:
                begin = max(run.last_update, run.paused_until)
                total += begin + run.remaining * run.iter_time - job.submit_time
                continue
            iso = self.perf.isolated_iteration_time(job.model, job.num_workers, job.num_ps)
            total += max(self.now, job.submit_time) + iso * job.iterations - job.submit_time
        return total

    @property
    def group_free(self) -> np.ndarray:
        """Free GPUs per GPU group; while a job is pending, only those it can use:
        groups whose GPU memory cannot hold one of its workers
        (:meth:`PerformanceModel.group_fits`) show 0, so masks and policies that read
        it respect the constraint. With GPU sharing: the GPUs with a free slot (for a
        pending job, also holding no worker of a model it cannot share with), one
        worker of a job each, so never more than the group's GPUs. Read it, never
        write it."""
        if self.gpu_load is not None:
            return self._usable_gpus(self._pending)
        if self._pending is not None:
            fits = self.perf.group_fits(self._pending.model)
            if not fits.all():
                return np.where(fits, self._group_free, 0)
        return self._group_free

    @property
    def group_unused(self) -> np.ndarray:
        """Free GPUs per GPU group whatever job is pending (capacity accounting; the
        masked figure policies read is :attr:`group_free`); free worker slots with GPU
        sharing. Read it, never write it."""
        return self._group_free

    def view(self) -> ClusterView:
        """Read-only view of the current state for a policy.

        While a job is pending, ``group_free`` counts only the GPUs it can use (see
        :attr:`group_free`); ``free_gpus`` stays the cluster's total.
        """
        free = self.group_free
        return ClusterView(
            topology=self.topology,
            perf=self.perf,
            now=self.now,
            group_free=_ro(free),
            server_cpu_free=_ro(self.server_cpu_free),
            server_mem_free=_ro(self.server_mem_free),
            group_pressure=_ro(self.group_pressure),
            socket_pressure=_ro(self.socket_pressure),
            server_pressure=_ro(self.server_pressure),
            link_jobs=_ro(self.link_jobs),
            link_load=_ro(self.link_load),
            group_exposure=_ro(self.group_exposure),
            socket_exposure=_ro(self.socket_exposure),
            server_exposure=_ro(self.server_exposure),
            free_gpus=self.free_gpus,
            queue_length=len(self.queue),
            running_fn=self.running_info,
            gpu_load=None if self.gpu_load is None else _ro(self.gpu_load),
            gpu_pressure=None if self.gpu_pressure is None else _ro(self.gpu_pressure),
            group_free_for=None if self.gpu_load is None else self.group_free_for,
        )

    def running_info(self) -> tuple[RunningInfo, ...]:
        """The running jobs as a load controller may see them, by job id."""
        return tuple(
            RunningInfo(
                job_id=jid,
                model=r.job.model,
                num_workers=r.job.num_workers,
                num_ps=r.job.num_ps,
                placement=r.placement,
                start_time=r.start_time,
                iter_time=r.iter_time,
                isolated_iter_time=r.isolated_iter_time,
                attained_gpu_s=self.attained_gpu_s(jid),
                paused_until=r.paused_until,
                migrations=self._moves.get(jid, 0),
                next_move_at=self.next_move_at(jid),
            )
            for jid, r in sorted(self.running.items())
        )

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

    @property
    def pending(self) -> Job | None:
        return self._pending

    # ------------------------------------------------------------------ placement

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
        """Give back (``sign`` +1) or take (-1) the GPUs, cores and memory of ``job``
        at ``placement``, task by task in placement order (plain Python: a few tasks;
        the same float operations in the same order as ``np.add.at``)."""
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
        """Take the resources of ``job`` at ``placement``; the running jobs (not
        ``job`` itself) on its servers, whose pressures changed, those on its links,
        whose link loads changed, and those on its links that are oversubscribed
        (load > 1) before or after: only theirs can another job's communication time
        change (``max(1, U)`` stays 1 on the others)."""
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
        """Add (``sign`` +1) or remove (-1) the job's share of each of its links; per
        link, whether it is oversubscribed (load > 1) before or after. A link the job
        leaves to nobody goes back to exactly 0 (no float dust); call it before
        ``link_jobs`` is decremented."""
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
        """GPU sharing: per GPU, whether it holds a worker of a model that cannot
        share a GPU of its type with ``model`` (residents per GPU and catalogue model:
        ``gpu_models``, default the current ones); None if ``model`` shares with all."""
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
        """GPU sharing: per GPU, whether it has a free slot (and, for ``job``, holds
        no worker of a model ``job``'s cannot share with), in the current state or in
        the one ``gpu_load`` / ``gpu_models`` give."""
        ok = (self.gpu_load if gpu_load is None else gpu_load) < self._sharing
        blocked = None if job is None else self._no_share_gpus(job.model, gpu_models)
        return ok if blocked is None else ok & ~blocked

    def _usable_gpus(self, job: Job | None, usable: np.ndarray | None = None) -> np.ndarray:
        """GPU sharing: per group, the GPUs ``job`` may still put one worker on
        (any job's when None): :meth:`_usable` (or ``usable``), with its model's
        memory fit."""
        t = self.topology
        ok = self._usable(job) if usable is None else usable
        free = np.bincount(t.gpu_group, weights=ok, minlength=t.n_groups)
        free = free.astype(np.int64)
        return free if job is None else np.where(self.perf.group_fits(job.model), free, 0)

    def group_free_for(self, job_id: int) -> np.ndarray:
        """Per GPU group, the GPUs the running job ``job_id`` could put one worker on
        were its own workers released (load control: where could it go instead?).
        With GPU sharing: a free slot, no worker of a model it cannot share with, its
        model fits; without: free GPUs plus its own, where its model fits."""
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
        """GPU sharing: ``layout`` with a GPU for each worker (checked to exist by
        :meth:`_check`): in each group the usable GPUs, least loaded first, then
        lowest id, one worker each. Without sharing, ``layout`` itself."""
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
        """Give back the resources of ``run``; the running jobs on its servers and
        those on its links, as :meth:`_occupy` (not ``run`` itself, which stays in
        :attr:`running`)."""
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

    def _refresh(
        self,
        near_srv: set[int],
        near_link: set[int],
        near_sat: set[int],
        fresh: int | None = None,
    ) -> None:
        """Bring affected jobs to ``now`` and give them a new speed and completion.

        ``near_srv``: jobs on a server whose pressures changed (their interference
        factor is recomputed); ``near_link``: jobs on a link whose load changed;
        ``near_sat``: those of them on such a link that is or was oversubscribed (their
        communication time is recomputed); ``fresh``: a job with a new layout (both). A term not
        recomputed keeps its cached value, which is what recomputing it would give bit
        for bit: its inputs, or all the ``max(1, U)`` it reads, did not change. Every
        affected job still gets its progress and completion event anew, as before the
        cache, so that event times stay the same to the last bit."""
        now = self.now
        perf = self.perf
        interference, comm_time, combine = perf.interference, perf.comm_time, perf.combine
        link_load = self.link_load
        pressures = (self.group_pressure, self.socket_pressure, self.server_pressure)
        if self.gpu_pressure is not None:  # GPU sharing: the same-GPU level (same server)
            pressures += (self.gpu_pressure,)
        running, events, progress = self.running, self._events, self._progress
        job_ids = near_srv | near_link
        if fresh is not None:
            job_ids.add(fresh)
        recomputed = 0
        for jid in sorted(job_ids):
            run = running.get(jid)
            if run is None:
                continue
            recomputed += 1
            progress(run)
            job = run.job
            spec = CATALOGUE[job.model]
            layout = run.layout
            new_intf = jid in near_srv or jid == fresh
            if new_intf:
                run.interference = interference(spec, layout, *pressures)
            new_comm = jid == fresh or jid in near_sat
            if new_comm:
                run.comm = comm_time(layout, link_load)
            if new_intf or new_comm:
                run.iter_time = combine(spec, layout, run.interference, run.comm)
            run.version += 1
            begin = now if run.paused_until <= now else run.paused_until
            end = begin + run.remaining * run.iter_time
            if not (0.0 < run.iter_time < math.inf and end < math.inf):
                raise NonFiniteError(
                    f"job {job.job_id} ({job.model}): iteration time {run.iter_time!r} s "
                    f"gives completion time {end!r}; a topology figure (bandwidth, speed, "
                    "oversubscription) or the job's length is out of range"
                )
            # self._push inlined (the hottest loop of a run)
            event = (end, _COMPLETION_PRIORITY, self._seq, COMPLETION, (jid, run.version))
            heapq.heappush(events, event)
            self._seq += 1
        self.stats.recomputes += recomputed
        if len(self._events) > self._compact_at:
            self._compact()

    def _compact(self) -> None:
        """Drop superseded completion events from the heap (every new speed of a job
        pushes a new completion and leaves the old one behind; on the whole Philly
        export the heap would grow to millions). The valid events keep their keys, so
        they come out in the same order; the dropped ones count as handled events, as
        they would have been when popped. The clock no longer stops at their times,
        which only splits the busy-GPU integral at fewer points."""
        running = self.running

        def live(e: tuple) -> bool:
            if e[3] != COMPLETION:
                return True
            run = running.get(e[4][0])
            return run is not None and run.version == e[4][1]

        kept = [e for e in self._events if live(e)]
        self.stats.events += len(self._events) - len(kept)
        heapq.heapify(kept)
        self._events = kept
        self._compact_at = max(4 * len(kept), 4096)

    def _progress(self, run: RunningJob) -> None:
        """Bring ``run``'s remaining iterations to now at its current speed (none
        before the end of a restart delay)."""
        now = self.now
        if run.iter_time < math.inf:
            if run.paused_until <= run.last_update:
                run.remaining = max(run.remaining - (now - run.last_update) / run.iter_time, 0.0)
            elif now > run.paused_until:
                run.remaining = max(run.remaining - (now - run.paused_until) / run.iter_time, 0.0)
        run.last_update = now

    def _finish_unplaceable(self) -> None:
        """Jobs still queued when no event is left can never be placed."""
        self.unplaceable = list(self.queue)

    # ------------------------------------------------------------------ results

    def result(self) -> list[JobRecord]:
        """Records of completed jobs, in job-id order."""
        return [self.records[k] for k in sorted(self.records)]


def _add_rows(target: np.ndarray, rows: np.ndarray, values: np.ndarray) -> None:
    """``target[rows] += values`` for distinct ``rows``: the same additions, row by row
    for the few rows of one job (cheaper than fancy indexing); ``values`` is one row
    per index or one row for all."""
    if len(rows) > 4:
        target[rows] += values
    elif values.ndim == 1:
        for r in rows.tolist():
            target[r] += values
    else:
        for i, r in enumerate(rows.tolist()):
            target[r] += values[i]


def run_policy(
    sim: Simulator,
    place: Callable[[Job, ClusterView], Placement | None],
    progress: Callable[[int], None] | None = None,
) -> list[JobRecord]:
    """Drive ``sim`` to the end with a whole-job placement function, timing decisions."""
    clock = _time.perf_counter
    done = 0
    while (job := sim.next_decision()) is not None:
        t0 = clock()
        placement = place(job, sim.view())
        sim.apply(placement, clock() - t0)
        if progress is not None and len(sim.records) != done:
            done = len(sim.records)
            progress(done)
    if progress is not None:
        progress(len(sim.records))
    return sim.result()
