"""The discrete-event cluster simulator (docs/performance-model.md describes its model).

Scheduling is driven from outside, one decision at a time::

    sim = Simulator(topology, jobs)
    while (job := sim.next_decision()) is not None:
        sim.apply(policy.place(job, sim.view()))   # None = leave it queued
    result = sim.result()

``next_decision`` advances simulated time until a queued job could fit, scanning the
queue in the configured ordering (:mod:`marl_sched.ordering`, on the estimate, never the
true length; ``backfill`` lets later jobs pass). :meth:`Simulator.migrate` moves a
running job and :meth:`Simulator.preempt` suspends one, both keeping progress and paying
a :class:`~marl_sched.migration.MigrationCost` restart; proposals over the per-job cap
or interval are declined (:attr:`SimStats.migrations_declined`). Progress is exact
between events; stale completion events are skipped by version.

The parts, one module each in :mod:`marl_sched.simulation`: ``events`` (clock, heap,
progress), ``accounting`` (capacity, placing and removing), ``queueing`` (queue and
scan), ``moves`` (migration, preemption), ``fork`` (what-if copies), ``view`` (the
read-only views for policies). Their public names are re-exported here."""

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
        ordering: a name in :data:`marl_sched.ordering.ORDERINGS` or a
            :class:`~marl_sched.ordering.QueueOrdering`.
        backfill: skip over queued jobs that cannot be placed now.
        estimate: a job's estimated *total* iterations (``nan`` = none), what
            length-aware orderings read (FIFO without it).
        migration_cost: a :class:`~marl_sched.migration.MigrationCost`, ``"measured"``
            or flat seconds.
        max_migrations_per_job: moves one job may make; more are declined.
        min_migration_interval_s: seconds between two moves of one job.
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
