"""The queue, its ordering (:mod:`marl_sched.ordering`), backfill, and the
incremental scan that offers one decision at a time."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from marl_sched.jobs import Job, Placement
from marl_sched.ordering import OrderingContext, QueueOrdering, make_ordering
from marl_sched.simulation.events import RECHECK, TICK

if TYPE_CHECKING:
    from typing_extensions import Self


class QueueMixin:
    """The queue and the decisions offered from it: the ordering settings, ``queue``,
    ``unplaceable``, the scan state and ``_completions`` (returns of resources)."""

    def _init_queue(
        self,
        ordering: str | QueueOrdering,
        backfill: bool,
        estimate: Callable[[Job], float] | None,
    ) -> None:
        """An empty queue in ``ordering``."""
        self.ordering = make_ordering(ordering)
        self.backfill = backfill
        self._estimate = estimate
        self.queue: list[Job] = []
        self.unplaceable: list[Job] = []
        self._scan: list[Job] | None = None
        self._scan_pos = 0
        self._pending: Job | None = None
        # resources only ever come back at a completion, a migration or a preemption
        self._completions = 0
        self._declined: dict[int, int] = {}  # job id -> completions when last declined
        self._arrived: list[Job] = []  # jobs queued since the last scan began
        # static orderings: the queue split by width (each list in queue order) and
        # each queued job's key, so a scan reads only the jobs that could fit
        self._widths: dict[int, list[Job]] = {}
        self._keys: dict[int, tuple] = {}
        self._scanned_at = -1  # self._completions when the last full scan began

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

    def next_decision(self) -> Job | None:
        """Advance until a queued job could be placed; None when the run is over."""
        return self.next_decision_or_stop(None)

    def next_decision_or_stop(self, stop: Callable[[Self], bool] | None) -> Job | None:
        """:meth:`next_decision` that asks ``stop(self)`` after each event time; on True it
        returns None with no job pending and the next call resumes the same scan (the env's
        migration triggers). With ``stop`` False or None, the same offers as
        :meth:`next_decision`."""
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

    def _begin_scan(self) -> None:
        """The jobs to offer after an event time, in queue order: only the arrivals after
        arrivals-only events, a full scan after any return of resources (always full without
        backfill or under a dynamic ordering); with backfill, skipping jobs that need more GPUs
        than are free. Offers are the same as a full scan's."""
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

    def recheck_at(self, job_id: int, when: float) -> None:
        """Offer queued job ``job_id`` again at ``when`` (or now, if earlier) even if no
        resources come back (``defer-long`` bounds its waits with it)."""
        self._push(max(float(when), self.now), TICK, (RECHECK, int(job_id)))

    def _recheck(self, job_id: int) -> None:
        """A recheck came due: forget ``job_id``'s decline and put it in the next
        scan (as an arrival is), if it is still queued."""
        job = next((j for j in self.queue if j.job_id == job_id), None)
        if job is None:
            return
        self._declined.pop(job_id, None)
        if all(j is not job for j in self._arrived):
            self._arrived.append(job)

    def _finish_unplaceable(self) -> None:
        """Jobs still queued when no event is left can never be placed."""
        self.unplaceable = list(self.queue)

    @property
    def pending(self) -> Job | None:
        return self._pending
