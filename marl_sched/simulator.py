"""The discrete-event cluster simulator.

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
completion events are skipped by a version number. GPU sharing (``topology.gpu_sharing``
k > 1, opt-in) is described in :mod:`marl_sched.simulation.accounting`.

:class:`Simulator` is one object put together from one part per idea, each in its
own module of :mod:`marl_sched.simulation` and each owning the state its docstring
names (all of it lives on the simulator, so the parts read one another's directly):

- :class:`~marl_sched.simulation.events.EventsMixin`: the clock, the event heap
  (``ARRIVAL``, ``COMPLETION``, ``TICK``) and progress integration;
- :class:`~marl_sched.simulation.accounting.AccountingMixin`: cluster state and
  capacity accounting, placing and removing jobs;
- :class:`~marl_sched.simulation.queueing.QueueMixin`: the queue, its ordering and
  the scan that offers decisions;
- :class:`~marl_sched.simulation.moves.MovesMixin`: migration and preemption;
- :class:`~marl_sched.simulation.fork.ForkMixin`: copies and spliced futures for
  what-if rollouts;
- :class:`~marl_sched.simulation.view.ViewMixin`: the read-only views for policies.

The names other modules use (records, views, errors, event kinds) are re-exported
here.
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable, Sequence

from marl_sched.jobs import Job, Placement
from marl_sched.migration import MigrationCost
from marl_sched.ordering import QueueOrdering
from marl_sched.perf import PerformanceModel
from marl_sched.simulation.accounting import AccountingMixin
from marl_sched.simulation.events import ARRIVAL, COMPLETION, TICK, EventsMixin
from marl_sched.simulation.fork import ForkMixin
from marl_sched.simulation.moves import DEFAULT_MIGRATION_COST, MovesMixin
from marl_sched.simulation.queueing import QueueMixin
from marl_sched.simulation.records import (
    JobRecord,
    NonFiniteError,
    PlacementError,
    RunningJob,
    SimStats,
)
from marl_sched.simulation.view import ClusterView, RunningInfo, ViewMixin, harm_to_residents
from marl_sched.topology import Topology

__all__ = [
    "ARRIVAL",
    "COMPLETION",
    "DEFAULT_MIGRATION_COST",
    "TICK",
    "ClusterView",
    "JobRecord",
    "NonFiniteError",
    "PlacementError",
    "RunningInfo",
    "RunningJob",
    "SimStats",
    "Simulator",
    "harm_to_residents",
    "run_policy",
]


class Simulator(EventsMixin, AccountingMixin, QueueMixin, MovesMixin, ForkMixin, ViewMixin):
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
        self._init_queue(ordering, backfill, estimate)
        self._init_moves(migration_cost, max_migrations_per_job, min_migration_interval_s)
        self._init_cluster()
        self._init_events()  # last: it queues the arrivals

    def result(self) -> list[JobRecord]:
        """Records of completed jobs, in job-id order."""
        return [self.records[k] for k in sorted(self.records)]


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
