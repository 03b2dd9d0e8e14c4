"""What-if support: an independent copy of the whole state, the future arrivals
swapped for another sample, and the total completion time known so far (the
objective a rollout compares)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from marl_sched.jobs import Job
from marl_sched.simulation.events import ARRIVAL, COMPLETION, TICK
from marl_sched.simulation.records import SimStats

if TYPE_CHECKING:
    from typing_extensions import Self


class ForkMixin:
    """Copying the state and splicing the future; :meth:`fork` must copy every piece of
    mutable state the other parts own."""

    def pending_arrivals(self) -> list[Job]:
        """The jobs whose arrival has not been handled yet, in the order they arrive."""
        arrivals = sorted((e for e in self._events if e[3] == ARRIVAL), key=lambda e: e[:3])
        return [e[4] for e in arrivals]

    def replace_arrivals(self, jobs: Sequence[Job]) -> None:
        """Replace the pending arrivals by ``jobs``: as many, same ids in the same order,
        none before now, in submit order (``ValueError`` otherwise)."""
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

    def fork(self) -> Self:
        """An independent copy of the current state (immutable parts shared), with empty
        decision statistics and no completion hook."""
        f = object.__new__(type(self))
        f.__dict__.update(self.__dict__)
        for name in (
            "_group_free", "server_cpu_free", "server_mem_free", "group_pressure",
            "socket_pressure", "server_pressure", "link_jobs", "link_load",
            "group_exposure", "socket_exposure", "server_exposure",
        ):  # fmt: skip
            setattr(f, name, getattr(self, name).copy())
        f._group_ver = list(self._group_ver)
        f._socket_ver = list(self._socket_ver)
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
        """Σ over jobs submitted by ``until`` of their completion time as known now
        (running ones at their current speed, queued ones starting now at isolated speed)."""
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
