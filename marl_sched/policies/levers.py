"""Lever rules: what real schedulers do beyond one-step placement, as plain heuristics
(kind ``lever``; rules, inputs and measurements in docs/room.md).

- ``length-aware``: a long job (estimated ``Job.work_s`` >= ``long_work_s``) on its
  model's fastest GPU type, packed (one whole server when it fits); a short job on the
  slowest *adequate* type (>= ``adequate`` × the model's best speed); else first-fit.
- ``defer-long``: length-aware, but a long job whose preferred GPUs are busy is held
  until re-offered (next completion, or ``defer_bound_s`` later through the view's
  ``recheck_at``), then placed as first-fit would.
- ``upgrade``: length-aware plus a migration rule (``simulation.migration: on``): a
  running job with long estimated remaining work moves to a faster GPU type or onto one
  server when the estimated saving exceeds the measured restart.

No call of the performance model on any placement: they read the job's estimated
length, the catalogue's static speeds and the view (``upgrade`` also the learned
interference estimate, :mod:`marl_sched.interference.estimate`).
"""

from __future__ import annotations

import math

import numpy as np

from marl_sched.catalogue import CATALOGUE
from marl_sched.errors import InputError
from marl_sched.interference.estimate import (
    estimated_iteration_times,
    load_predictor,
    without_job,
)
from marl_sched.jobs import Job, Placement
from marl_sched.migration import MigrationCost
from marl_sched.policies.base import Policy
from marl_sched.policies.heuristics import FirstFitPolicy, _Draft, _server_free
from marl_sched.policies.load_control import released_view
from marl_sched.simulator import ClusterView, RunningInfo
from marl_sched.topology import Topology

#: median estimated work per worker (V100 seconds) of the train split's scored jobs
LONG_WORK_S = 460.0
#: a short job's GPU type is adequate at this fraction of the model's best speed
ADEQUATE = 0.5
#: the longest a long job is held for its preferred GPUs (s)
DEFER_BOUND_S = 3600.0
#: migrations one ``upgrade`` call proposes at most (MLFS's load control: 1 too)
UPGRADE_MOVES = 1
#: running jobs (longest estimated remainder first) one ``upgrade`` call tries
UPGRADE_TRIES = 8


def remaining_iterations(job: Job, info: RunningInfo) -> float:
    """``job``'s estimated iterations (the estimate it was placed with) less
    ``attained_gpu_s / workers / iter_time`` of the running ``info`` (restart pauses
    count as progress: errs towards fewer moves); nan without an estimate. What a real
    cluster knows: the estimate, the attained service and the measured iteration time."""
    if math.isnan(job.iterations):
        return math.nan
    done = info.attained_gpu_s / max(info.num_workers, 1) / info.iter_time
    return max(job.iterations - done, 0.0)


def remaining_work_s(job: Job, info: RunningInfo) -> float:
    """:func:`remaining_iterations` in V100 seconds per worker (× the model's compute
    time per iteration), the length the upgrade rule compares with ``long_work_s``."""
    return remaining_iterations(job, info) * CATALOGUE[job.model].compute_s


def _positive(key: str, value: float) -> float:
    value = float(value)
    if not value > 0 or not math.isfinite(value):
        raise InputError(f"{key}: must be a positive number, got {value!r}")
    return value


class LengthAwarePolicy(Policy):
    """Long jobs on their model's fastest GPU type, packed; short jobs on the slowest
    adequate type.

    Args:
        long_work_s: a job whose estimated ``work_s`` is at least this is long
            (> 0; default :data:`LONG_WORK_S`). A job without an estimate is short.
        adequate: a short job's GPU type must run the model at least this fraction
            of its best speed (in (0, 1]; default :data:`ADEQUATE`).
    """

    name = "length-aware"
    description = (
        "long jobs packed on their model's fastest GPU type, short ones on slower adequate types"
    )

    def __init__(self, long_work_s: float = LONG_WORK_S, adequate: float = ADEQUATE) -> None:
        self.long_work_s = _positive("long_work_s", long_work_s)
        self.adequate = _positive("adequate", adequate)
        if self.adequate > 1:
            raise InputError(f"adequate: must be in (0, 1], got {adequate!r}")
        self._first_fit = FirstFitPolicy()
        self._speeds: dict[str, tuple[np.ndarray, list[float]]] = {}
        self._speeds_topo: Topology | None = None

    def is_long(self, job: Job) -> bool:
        work = job.work_s
        return not math.isnan(work) and work >= self.long_work_s

    def _server_speed(self, topo: Topology, model: str) -> tuple[np.ndarray, list[float]]:
        """Per server, the model's speed on its GPU type (0 where a worker does not
        fit), and the distinct positive speeds, fastest first (the catalogue's static
        profile; kept per model for the topology of the last call)."""
        if self._speeds_topo is not topo:
            self._speeds, self._speeds_topo = {}, topo
        if model not in self._speeds:
            spec = CATALOGUE[model]
            by_type = [spec.speed_on(t) if spec.fits_on(t) else 0.0 for t in topo.server_gpu_type]
            speed = np.asarray(by_type, dtype=np.float64)[topo.server_type]
            levels = sorted({float(s) for s in speed if s > 0}, reverse=True)
            self._speeds[model] = (speed, levels)
        return self._speeds[model]

    def _on_type(
        self,
        job: Job,
        view: ClusterView,
        servers: np.ndarray,
        free: np.ndarray,
        whole_only: bool,
    ) -> Placement | None:
        """The job on ``servers`` (one GPU type): the fullest server that holds it
        whole (best fit, lowest index first), else — unless ``whole_only`` — the
        servers with the most free GPUs first, so as few as possible."""
        n = job.num_workers
        fits = servers[free[servers] >= n]
        topo = view.topology
        order = []
        if len(fits):
            order = [int(fits[np.lexsort((fits, free[fits]))][0])]
        elif not whole_only and free[servers].sum() >= n:
            order = [int(s) for s in servers[np.lexsort((servers, -free[servers]))]]
        if not order:
            return None
        d = _Draft(job, view)
        for s in order:
            a, k = int(topo.server_groups_start[s]), int(topo.server_n_groups[s])
            d.fill(range(a, a + k))
            if d.missing == 0:
                break
        return d.result()

    def preferred(self, job: Job, view: ClusterView) -> Placement | None:
        """A long job on its model's fastest GPU type, whole server when one of that
        type could hold it; None when that is not free now."""
        speed, levels = self._server_speed(view.topology, job.model)
        if not levels:
            return None
        servers = np.flatnonzero(speed == levels[0])
        free = _server_free(view)
        fits_one = bool((view.topology.server_gpus[servers] >= job.num_workers).any())
        return self._on_type(job, view, servers, free, whole_only=fits_one)

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        speed, levels = self._server_speed(view.topology, job.model)
        free = _server_free(view)
        if self.is_long(job):
            types = levels  # fastest first
        else:
            best = levels[0] if levels else 0.0
            types = [s for s in reversed(levels) if s >= self.adequate * best]
        for whole_only in (True, False):
            for level in types:
                servers = np.flatnonzero(speed == level)
                placement = self._on_type(job, view, servers, free, whole_only)
                if placement is not None:
                    return placement
        return self._first_fit.place(job, view)


class DeferLongPolicy(LengthAwarePolicy):
    """``length-aware`` that holds a long job for its preferred GPUs.

    Args:
        defer_bound_s: the longest a job is held (s, >= 0; default
            :data:`DEFER_BOUND_S`): the simulator offers it again then at the latest.
        long_work_s, adequate: as :class:`LengthAwarePolicy`.
    """

    name = "defer-long"
    description = (
        "length-aware that holds a long job for its preferred GPUs (defer_bound_s, default 1 h)"
    )

    def __init__(self, defer_bound_s: float = DEFER_BOUND_S, **options) -> None:
        super().__init__(**options)
        bound = float(defer_bound_s)
        if not bound >= 0 or not math.isfinite(bound):
            raise InputError(f"defer_bound_s: must be a number >= 0, got {defer_bound_s!r}")
        self.defer_bound_s = bound
        self._held: dict[int, float] = {}  # job id -> when it was first held

    def reset(self, topology: Topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        self._held = {}

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        if not self.is_long(job):
            return super().place(job, view)
        placement = self.preferred(job, view)
        if placement is not None:
            self._held.pop(job.job_id, None)
            return placement
        if job.job_id in self._held or view.recheck_at is None:
            placement = self._first_fit.place(job, view)
            if placement is not None:  # held once: not again after a decline
                self._held.pop(job.job_id, None)
            return placement
        self._held[job.job_id] = view.now
        view.recheck_at(job.job_id, view.now + self.defer_bound_s)
        return None


class UpgradePolicy(LengthAwarePolicy):
    """``length-aware`` placement with an upgrade migration rule.

    Args:
        restart_scale: the scale of the measured restart the rule expects to pay
            (``simulation.migration_cost_scale``; >= 0, default 1).
        max_moves: migrations proposed per call (>= 1; default :data:`UPGRADE_MOVES`).
        long_work_s, adequate: as :class:`LengthAwarePolicy`; a running job is a
            candidate when its estimated remaining work is at least ``long_work_s``.
    """

    name = "upgrade"
    description = (
        "length-aware that moves a long running job to faster GPUs or one whole server when the "
        "estimated saving beats the measured restart (simulation.migration: on)"
    )

    def __init__(
        self, restart_scale: float = 1.0, max_moves: int = UPGRADE_MOVES, **options
    ) -> None:
        super().__init__(**options)
        scale = float(restart_scale)
        if not scale >= 0 or not math.isfinite(scale):
            raise InputError(f"restart_scale: must be a number >= 0, got {restart_scale!r}")
        if int(max_moves) != max_moves or max_moves < 1:
            raise InputError(f"max_moves: must be a whole number >= 1, got {max_moves!r}")
        self.cost = MigrationCost(scale=scale)
        self.max_moves = int(max_moves)
        self._placed: dict[int, Job] = {}  # job id -> the job as placed (its estimate)
        self._model = None

    def reset(self, topology: Topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        self._placed = {}
        self._model = load_predictor()

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        placement = super().place(job, view)
        if placement is not None:
            self._placed[job.job_id] = job
        return placement

    def rebalance(self, view: ClusterView) -> list[tuple[int, Placement]]:
        running = view.running()
        alive = {info.job_id for info in running}
        self._placed = {k: j for k, j in self._placed.items() if k in alive}
        candidates = []
        for info in running:
            job = self._placed.get(info.job_id)
            if job is None or info.next_move_at > view.now or info.paused_until > view.now:
                continue
            work = remaining_work_s(job, info)
            if self.is_candidate(work):
                left = remaining_iterations(job, info)
                candidates.append((-work, info.job_id, info, job, left))
        candidates.sort(key=lambda c: c[:2])
        moves: list[tuple[int, Placement]] = []
        for _, job_id, info, job, left in candidates[:UPGRADE_TRIES]:
            placement = self.upgrade_for(view, info, job, left)
            if placement is not None:
                moves.append((job_id, placement))
                if len(moves) >= self.max_moves:
                    break
        return moves

    def is_candidate(self, work_s: float) -> bool:
        """Whether a running job of estimated remaining work ``work_s`` (V100 s per
        worker, :func:`remaining_work_s`) may be moved up: at least ``long_work_s``."""
        return not math.isnan(work_s) and work_s >= self.long_work_s

    def move_for(self, view: ClusterView, info: RunningInfo, job: Job) -> Placement | None:
        """The rule's decision on one running job ``info`` (seen as ``job``, its
        estimate): :meth:`upgrade_for` when it is a candidate, else None (it stays)."""
        if not self.is_candidate(remaining_work_s(job, info)):
            return None
        return self.upgrade_for(view, info, job, remaining_iterations(job, info))

    def options_on(
        self, view: ClusterView, info: RunningInfo, job: Job
    ) -> tuple[ClusterView, list[Placement]]:
        """(the cluster ``view`` with the running ``info``'s resources given back and
        its load taken off, :meth:`options_for` on it)."""
        released = released_view(view, info, np.zeros(view.topology.n_servers, dtype=bool))
        base = without_job(released, job, info.placement)
        return base, self.options_for(base, info, job)

    def options_for(self, view: ClusterView, info: RunningInfo, job: Job) -> list[Placement]:
        """Where ``job`` could move on ``view`` (its own resources given back): its
        preferred GPUs (:meth:`preferred`), and the fastest whole server at least as
        fast as its slowest worker now; only those that put it on a faster GPU type
        or from several servers onto one."""
        topo = view.topology
        speed, levels = self._server_speed(topo, job.model)
        servers_now = topo.group_server[np.asarray(info.placement.worker_groups)]
        speed_now = float(speed[servers_now].min())
        found = [self.preferred(job, view)]
        free = _server_free(view)
        for level in (lv for lv in levels if lv >= speed_now):
            on = self._on_type(job, view, np.flatnonzero(speed == level), free, whole_only=True)
            if on is not None:
                found.append(on)
                break
        out = []
        for p in found:
            if p is None or any(p == q for q in out):
                continue
            servers = topo.group_server[np.asarray(p.worker_groups)]
            faster = float(speed[servers].min()) > speed_now
            if faster or (len(set(servers.tolist())) == 1 < len(set(servers_now.tolist()))):
                out.append(p)
        return out

    def upgrade_for(
        self, view: ClusterView, info: RunningInfo, job: Job, left: float
    ) -> Placement | None:
        """The option saving the most over its cost (saving: ``left`` × the measured
        iteration time × ``1 - est(new) / est(now)``; cost: the measured restart,
        :meth:`~marl_sched.migration.MigrationCost.migration_s`), when positive; else None."""
        best, gain = self.best_option(view, info, job, left)
        return best if gain > 0 else None

    def best_option(
        self, view: ClusterView, info: RunningInfo, job: Job, left: float
    ) -> tuple[Placement | None, float]:
        """(the option of the largest estimated saving less its cost, that net
        saving in seconds); (None, -inf) when the job has no option
        (:meth:`upgrade_for`'s terms)."""
        base, options = self.options_on(view, info, job)
        if not options:
            return None, -math.inf
        times = estimated_iteration_times(base, job, [info.placement, *options], self._model)
        best, best_gain = None, -math.inf
        for p, t in zip(options, times[1:], strict=True):
            saved = left * info.iter_time * (1.0 - t / times[0])
            cost = self.cost.migration_s(view.perf, base.link_jobs, job.model,
                                         info.placement.worker_groups, p.worker_groups)  # fmt: skip
            if saved - cost > best_gain:
                best, best_gain = p, saved - cost
        return best, best_gain


class ReferenceUpgrade(UpgradePolicy):
    """The reference's placement (``masked:lookahead``) with :class:`UpgradePolicy`'s
    migration rule: the upgrade lever on the best rule, for the full track. A
    reference row like its placement (which scores proposals with the performance
    model); the moves read only the shipped learned estimate and the measured
    iteration times, as ``upgrade``'s do.

    Args:
        restart_scale, max_moves, long_work_s, adequate: as :class:`UpgradePolicy`.
    """

    name = "masked:lookahead+upgrade"
    description = (
        "masked:lookahead's placement with upgrade's migration rule: a long running job "
        "moves to faster GPUs or one whole server when the estimated saving beats the "
        "measured restart (simulation.migration: on)"
    )
    placement = "masked:lookahead"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        from marl_sched.policies import make_policy  # the registry, not the agents package

        self.inner = make_policy(self.placement)

    def reset(self, topology: Topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        self.inner.reset(topology, seed)

    def check_cluster(self, topology: Topology, perf) -> None:
        self.inner.check_cluster(topology, perf)

    def ordering(self):
        return self.inner.ordering()

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        placement = self.inner.place(job, view)
        if placement is not None:
            self._placed[job.job_id] = job
        return placement


class LearnedUpgrade(ReferenceUpgrade):
    """``masked:lookahead-learned``'s placement (the lookahead's proposals scored by
    profiled GPU speed times the learned interference model's slowdown) with
    :class:`UpgradePolicy`'s migration rule: the upgrade lever on a rule that never
    calls the performance model, a contender beside the reference row
    :class:`ReferenceUpgrade`.

    Args:
        restart_scale, max_moves, long_work_s, adequate: as :class:`UpgradePolicy`.
    """

    name = "masked:lookahead-learned+upgrade"
    description = (
        "masked:lookahead-learned's placement with upgrade's migration rule (no "
        "performance-model call on a hypothetical placement; simulation.migration: on)"
    )
    placement = "masked:lookahead-learned"
