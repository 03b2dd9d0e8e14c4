"""Queue orderings: which waiting job the simulator offers a placement policy first.

An ordering has ``key(job, ctx)`` (lower = first), ``name`` and ``dynamic`` (re-sort
at every scan); ``preemptive = True`` lets a waiting job displace lower-ranked running
ones. A key reads only an :class:`OrderingContext`, never a job's true length.

Built-in orderings (:data:`ORDERINGS`):

``fifo``
    submit time, then job id (the default).
``smallest-first``
    fewest workers first, then FIFO.
``shortest-first``
    least estimated remaining time first; jobs without an estimate last, FIFO.
``las-2d``
    Tiresias' discretised 2D least-attained-service (NSDI'19): GPU-seconds attained,
    :data:`LAS_THRESHOLDS`-separated queues, FIFO inside, preemptive; the starvation
    guard ``Las2D(promote_knob=k)`` is off by default.
``mlfs-priority``
    MLF-H's priority (estimated remaining work and job size), then FIFO.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job


def _nan(job: Job) -> float:
    return math.nan


def _zero(job_id: int) -> float:
    return 0.0


@dataclass(frozen=True)
class OrderingContext:
    """What an ordering may read at a scan of the queue.

    Attributes:
        now: simulated time (s).
        estimate: the estimated remaining seconds of a queued job at its isolated
            speed (the workload's duration predictor; ``nan`` without an estimate).
        est_iterations: the estimated remaining iterations of a queued job (``nan``
            without an estimate).
        attained_gpu_s: GPU-seconds a job has received so far (0 if never started).
        last_run_end: when a job last stopped running (now while it runs, its submit
            time if it never ran).
    """

    now: float = 0.0
    estimate: Callable[[Job], float] = _nan
    est_iterations: Callable[[Job], float] = _nan
    attained_gpu_s: Callable[[int], float] = _zero
    last_run_end: Callable[[Job], float] = lambda job: job.submit_time


class QueueOrdering(ABC):
    """How a queue is ordered (lower key = served first)."""

    name: str = ""
    #: keys change while jobs wait: the simulator re-sorts the queue at every scan
    dynamic: bool = False
    #: a waiting job may displace running jobs of a worse priority class (the key's
    #: first element; FIFO without preemption inside a class)
    preemptive: bool = False

    @abstractmethod
    def key(self, job: Job, ctx: OrderingContext) -> tuple:
        """The job's sort key; ties must be broken (end with ``job.job_id``)."""

    def __repr__(self) -> str:
        return f"<ordering {self.name}>"


class Fifo(QueueOrdering):
    name = "fifo"

    def key(self, job: Job, ctx: OrderingContext) -> tuple:
        return (job.submit_time, job.job_id)


class SmallestFirst(QueueOrdering):
    name = "smallest-first"

    def key(self, job: Job, ctx: OrderingContext) -> tuple:
        return (job.num_workers, job.submit_time, job.job_id)


class ShortestFirst(QueueOrdering):
    """Shortest estimated remaining time first; dynamic because a ``history``
    predictor's estimate changes as jobs complete."""

    name = "shortest-first"
    dynamic = True

    def key(self, job: Job, ctx: OrderingContext) -> tuple:
        est = ctx.estimate(job)
        known = not math.isnan(est)
        return (not known, est if known else 0.0, job.submit_time, job.job_id)


#: attained-service thresholds (GPU-seconds) between Tiresias priority queues: two
#: queues split at one GPU-hour (Tiresias found K = 2 queues enough; the threshold is
#: this project's choice, see docs/benchmark.md)
LAS_THRESHOLDS: tuple[float, ...] = (3600.0,)
#: Tiresias' starvation knob: with ``k > 0`` a waiting job is promoted to the top
#: queue once it has waited ``k`` times its attained run time. Off (0) by default: on
#: an overloaded cluster promotions made long jobs preempt each other back and forth
#: (every preemption paying the restart penalty); see docs/benchmark.md
LAS_PROMOTE_KNOB = 0.0


class Las2D(QueueOrdering):
    """Tiresias' discretised 2D-LAS (see the module docstring)."""

    name = "las-2d"
    dynamic = True
    preemptive = True

    def __init__(
        self, thresholds: tuple[float, ...] = LAS_THRESHOLDS, promote_knob: float = LAS_PROMOTE_KNOB
    ) -> None:
        if list(thresholds) != sorted(thresholds) or any(t <= 0 for t in thresholds):
            raise ValueError(f"las-2d thresholds must be positive and ascending: {thresholds}")
        self.thresholds = tuple(float(t) for t in thresholds)
        self.promote_knob = float(promote_knob)

    def queue_of(self, attained: float) -> int:
        """The priority queue (0 = highest) of a job with ``attained`` GPU-seconds."""
        return sum(attained >= t for t in self.thresholds)

    def key(self, job: Job, ctx: OrderingContext) -> tuple:
        attained = ctx.attained_gpu_s(job.job_id)
        queue = self.queue_of(attained)
        if queue and self.promote_knob > 0:
            waited = ctx.now - ctx.last_run_end(job)
            run_s = attained / max(job.num_workers, 1)
            if waited >= self.promote_knob * run_s:
                queue = 0
        return (queue, job.submit_time, job.job_id)


#: the work (reference-GPU seconds) at which MLF-H's ML term saturates
MLFS_WORK_SCALE = 1e7
#: MLF-H's weights of the ML-feature and compute terms (the authors' ``W_q_* = 0.5``)
MLFS_W_ML, MLFS_W_COMPUTE = 0.5, 0.5


def mlfs_priority_value(work_s: float, num_workers: int, num_ps: int) -> float:
    """MLF-H's priority in [0, 1] (lower = sooner) of a job with ``work_s``
    remaining reference-GPU seconds per worker (``nan`` = unknown = the most work)."""
    u_ml = 1.0 if math.isnan(work_s) else min(1.0, math.log1p(work_s) / math.log1p(MLFS_WORK_SCALE))
    u_c = min(1.0, math.log2(num_workers + num_ps) / 10.0)
    return MLFS_W_ML * u_ml + MLFS_W_COMPUTE * u_c


class MlfsPriority(QueueOrdering):
    """MLF-H's queue priority from the estimated remaining iterations."""

    name = "mlfs-priority"
    dynamic = True

    def key(self, job: Job, ctx: OrderingContext) -> tuple:
        work = ctx.est_iterations(job) * CATALOGUE[job.model].compute_s
        return (
            mlfs_priority_value(work, job.num_workers, job.num_ps),
            job.submit_time,
            job.job_id,
        )


ORDERINGS: dict[str, Callable[[], QueueOrdering]] = {
    "fifo": Fifo,
    "smallest-first": SmallestFirst,
    "shortest-first": ShortestFirst,
    "las-2d": Las2D,
    "mlfs-priority": MlfsPriority,
}

#: the ``simulation.ordering`` value that asks for each policy's own ordering
OWN = "own"


def make_ordering(name: str | QueueOrdering) -> QueueOrdering:
    """A fresh ordering by name (an ordering object is returned as is)."""
    if isinstance(name, QueueOrdering):
        return name
    if name not in ORDERINGS:
        raise ValueError(f"unknown ordering {name!r} (known: {', '.join(ORDERINGS)})")
    return ORDERINGS[name]()
