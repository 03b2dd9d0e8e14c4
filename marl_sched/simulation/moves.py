"""Moving running jobs: migration (load control) and preemption (``las-2d``), both
keeping progress and paying a :class:`~marl_sched.migration.MigrationCost` restart."""

from __future__ import annotations

import math

from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job, Placement
from marl_sched.migration import MigrationCost
from marl_sched.ordering import OrderingContext
from marl_sched.simulation.events import TICK
from marl_sched.simulation.records import NonFiniteError, PlacementError, RunningJob

#: the restart rule of a simulator built without one: ``simulation.migration_cost``'s default
DEFAULT_MIGRATION_COST = MigrationCost()


class MovesMixin:
    """Migration and preemption: the restart rule and limits, each job's moves and the
    preemption bookkeeping (``_suspended``, ``_attained``, ``_last_stop``, ``_made_room``)."""

    def _init_moves(
        self,
        migration_cost: MigrationCost | float | str,
        max_migrations_per_job: int,
        min_migration_interval_s: float,
    ) -> None:
        """The restart rule and limits (``ValueError`` on a negative limit); no job
        moved or preempted yet."""
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
        # preempted jobs: job id -> (remaining iterations, first start time, version
        # of their last completion event, so that a stale one is never taken for theirs)
        self._suspended: dict[int, tuple[float, float, int]] = {}
        self._attained: dict[int, float] = {}  # GPU-s of finished stints
        self._last_stop: dict[int, float] = {}  # when a preempted job last stopped
        self._made_room: set[int] = set()  # waiting jobs that already preempted others

    def migrate(self, job_id: int, placement: Placement) -> bool:
        """Move the running job ``job_id`` to ``placement``; False if declined (at
        ``max_migrations_per_job`` or within ``min_migration_interval_s``; counted in
        :attr:`SimStats.migrations_declined`). The job keeps its progress and makes none for
        :meth:`MigrationCost.migration_s`, holding its new GPUs; its old ones are free at once.
        Raises :class:`PlacementError` (state unchanged) if ``placement`` does not fit once the
        job's own resources are released."""
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
        run.group_ver = run.socket_ver = -1  # its cached interference terms were elsewhere
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
        """Earliest time ``job_id`` may migrate: ``inf`` at the cap, else its last move
        plus ``min_migration_interval_s`` (0 if it never moved)."""
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
        """Tiresias-style preemption: in key order, a waiting job that needs more GPUs than
        are free (net of earlier waiting jobs' claims) preempts running jobs of a strictly
        worse class, worst first, when that makes room; a declined job preempts nobody, and a
        job preempts at most once until placed."""
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
