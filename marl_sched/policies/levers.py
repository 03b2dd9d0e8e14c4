"""Lever rules: what real schedulers do beyond one-step placement, as plain heuristics.

=================  =====================================================================
name               rule
=================  =====================================================================
``length-aware``   heterogeneity (in the spirit of Gavel): a long job goes to the GPU type
                   its model runs fastest on, packed on as few servers as possible (one
                   whole server when it fits); a short job takes the slowest adequate GPU
                   type first, keeping fast GPUs for long jobs; else first-fit
``defer-long``     length-aware, but a long job whose preferred GPUs are not free is held
                   (left queued) until it is offered again — at the next completion, or
                   ``defer_bound_s`` after it was first held at the latest — and then
                   placed where first-fit would (its preferred GPUs if they came free)
=================  =====================================================================

What the rules read (no call of the performance model on any placement):

- the job's estimated length: ``Job.work_s``, the estimated iterations times the
  model's compute per iteration on the reference GPU (seconds of V100 compute per
  worker), from the job a policy is handed (the run's duration predictor; with
  ``--duration-estimate oracle`` the true length);
- the catalogue's static per-model speed of each GPU type
  (:meth:`~marl_sched.catalogue.ModelSpec.speed_on`) and memory fit;
- the view's free GPUs, cores and memory.

``long_work_s`` (default :data:`LONG_WORK_S`) is the median estimated ``work_s`` of the
scored jobs of the default suite's train split (8 scenarios, 4,080 jobs, workload seed
0, the config's ``noisy`` estimate: 460 s; the true lengths' median is 370 s), fitted
by ``results/room-rules/fit_threshold.py`` on the train split only.

A short job's GPU type is *adequate* when the model runs there at least
``adequate`` (default 0.5) times as fast as on its fastest type in the cluster: "the
slowest first" without a floor would put a short cifar10 job on a K80, 11 times slower.

Held jobs are re-offered at their bound through the view's ``recheck_at`` hook
(:meth:`marl_sched.simulation.queueing.QueueMixin.recheck_at`); a view without it (none
from the simulator) holds nothing.
"""

from __future__ import annotations

import math

import numpy as np

from marl_sched.catalogue import CATALOGUE
from marl_sched.errors import InputError
from marl_sched.jobs import Job, Placement
from marl_sched.policies.base import Policy
from marl_sched.policies.heuristics import FirstFitPolicy, _Draft, _server_free
from marl_sched.simulator import ClusterView
from marl_sched.topology import Topology

#: median estimated work per worker (V100 seconds) of the train split's scored jobs
LONG_WORK_S = 460.0
#: a short job's GPU type is adequate at this fraction of the model's best speed
ADEQUATE = 0.5
#: the longest a long job is held for its preferred GPUs (s)
DEFER_BOUND_S = 3600.0


def _positive(key: str, value: float) -> float:
    value = float(value)
    if not value > 0 or not math.isfinite(value):
        raise InputError(f"{key}: must be a positive number, got {value!r}")
    return value


class LengthAwarePolicy(Policy):
    """Long jobs on their model's fastest GPU type, packed; short jobs on the slowest
    adequate type (see the module docstring).

    Args:
        long_work_s: a job whose estimated ``work_s`` is at least this is long
            (> 0; default :data:`LONG_WORK_S`). A job without an estimate is short.
        adequate: a short job's GPU type must run the model at least this fraction
            of its best speed (in (0, 1]; default :data:`ADEQUATE`).
    """

    name = "length-aware"
    description = "long jobs packed on their model's fastest GPU type, short on slow ones"

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
    """``length-aware`` that holds a long job for its preferred GPUs (see the module
    docstring).

    Args:
        defer_bound_s: the longest a job is held (s, >= 0; default
            :data:`DEFER_BOUND_S`): the simulator offers it again then at the latest.
        long_work_s, adequate: as :class:`LengthAwarePolicy`.
    """

    name = "defer-long"
    description = "length-aware that holds a long job for its preferred GPUs, bounded"

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
