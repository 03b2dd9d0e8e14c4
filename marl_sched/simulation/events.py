"""The event engine: simulated time, the event heap and its handlers, and exact
progress integration. Events are ``(time, priority, seq, kind, payload)``; completions
at a time come before arrivals; stale completion events are skipped by version."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job
from marl_sched.perf import unit_interference, unit_term
from marl_sched.simulation.records import NonFiniteError, RunningJob, SimStats

if TYPE_CHECKING:
    from typing_extensions import Self

ARRIVAL, COMPLETION, TICK = "arrival", "completion", "tick"
RECHECK = "recheck"  # a TICK's payload tag: offer a queued job again (recheck_at)
# a tick (a running job's attained service crossing a preemptive ordering's
# threshold) only wakes the scan up, after the arrivals of its time
_PRIORITY = {COMPLETION: 0, ARRIVAL: 1, TICK: 2}
_COMPLETION_PRIORITY = _PRIORITY[COMPLETION]


class EventsMixin:
    """The clock, the event heap and progress integration (``now``, ``stats``, the heap,
    the busy-GPU integral, the handlers and :attr:`after_completions`)."""

    def _init_events(self) -> None:
        """The clock at 0 and every job's arrival on the heap (call last: the
        handlers are bound here)."""
        self.now = 0.0
        self.stats = SimStats()
        self._events: list[tuple] = []
        self._compact_at = 4096  # heap size that triggers dropping stale completions
        self._seq = 0
        self._last_busy_t = 0.0
        self.after_completions: Callable[[Self], None] | None = None
        self._handlers = {
            ARRIVAL: self._on_arrival, COMPLETION: self._on_completion, TICK: self._on_tick,
        }  # fmt: skip
        for job in self.jobs:
            self._push(job.submit_time, ARRIVAL, job)

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
        """Handle every event at the next event time; False when none is left. After
        completions, :attr:`after_completions` (the load-control hook) is called with the
        simulator."""
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

    def _on_arrival(self, job: Job) -> None:
        self._enqueue(job)

    def _on_completion(self, payload: tuple[int, int]) -> None:
        job_id, version = payload
        run = self.running.get(job_id)
        if run is None or run.version != version:
            return  # stale event
        self._remove(run)

    def _on_tick(self, payload) -> None:
        """An attained-service threshold crossed (the next scan re-ranks), or a queued
        job's recheck (payload ``(RECHECK, job id)``)."""
        if type(payload) is tuple:
            self._recheck(payload[1])

    def wake_at(self, when: float) -> None:
        """Push a TICK event at ``when`` (>= now): an event time at which
        :meth:`next_decision_or_stop` asks its ``stop`` (nothing else happens then)."""
        if not math.isfinite(when) or when < self.now:
            raise ValueError(f"wake_at({when!r}) before now ({self.now}) or not finite")
        self._push(when, TICK, -1)

    def _refresh(
        self,
        near_srv: set[int],
        near_link: set[int],
        near_sat: set[int],
        fresh: int | None = None,
    ) -> None:
        """Bring affected jobs to ``now`` and give them a new speed and completion.
        ``near_srv``: interference recomputed; ``near_link``: link load changed; ``near_sat``:
        communication recomputed (oversubscribed link); ``fresh``: new layout (both). A term
        not recomputed keeps its cached value, bit for bit what recomputing would give."""
        now = self.now
        perf = self.perf
        interference, comm_time, combine = perf.interference, perf.comm_time, perf.combine
        link_load = self.link_load
        pressures = (self.group_pressure, self.socket_pressure, self.server_pressure)
        if self.gpu_pressure is not None:  # GPU sharing: the same-GPU level (same server)
            pressures += (self.gpu_pressure,)
        running, events, progress = self.running, self._events, self._progress
        group_p, socket_p, server_p = pressures[:3]
        group_ver, socket_ver = self._group_ver, self._socket_ver
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
            if new_intf and layout.single_unit is not None and layout.gpus is None:
                # PerformanceModel.interference's one-group arithmetic, its group and
                # socket terms kept while their pressure rows are unchanged
                g, a, v = layout.single_unit
                own_g, own_a, own_v, w0, w1, w2 = layout.unit_rows
                if run.group_ver != group_ver[g]:
                    run.group_term = unit_term(group_p[g], own_g, w0)
                    run.group_ver = group_ver[g]
                if run.socket_ver != socket_ver[a]:
                    run.socket_term = unit_term(socket_p[a], own_a, w1)
                    run.socket_ver = socket_ver[a]
                run.interference = unit_interference(
                    run.group_term, run.socket_term, unit_term(server_p[v], own_v, w2)
                )
            elif new_intf:
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
        """Drop superseded completion events from the heap, keeping the valid ones'
        order; the dropped ones count as handled."""
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
