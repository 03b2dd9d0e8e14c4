"""What policies and load controllers may read of the simulator: the read-only
:class:`ClusterView` of the cluster, :class:`RunningInfo` of its running jobs, and
:func:`harm_to_residents`, the cost a view's exposure puts on one more task."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from marl_sched.jobs import Placement
from marl_sched.perf import PS_PRESSURE_MASK, PerformanceModel
from marl_sched.topology import Topology


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


@dataclass(frozen=True)
class ClusterView:
    """A read-only snapshot of the cluster for policies (arrays with the write flag off,
    valid for the current decision only).

    Attributes:
        now: simulated time (s).
        group_free: free GPUs per GPU group (while a job is pending: only those its
            model fits in).
        server_cpu_free, server_mem_free: free CPU cores / memory (GB) per server.
        group_pressure, socket_pressure, server_pressure: summed pressure vectors of
            resident tasks, (n, 5) in resource order cpu, pcie, membw, disk, net.
        link_jobs: jobs whose traffic crosses each link.
        link_load: ``U_l`` of :mod:`marl_sched.perf` (> 1 = oversubscribed).
        group_exposure, socket_exposure, server_exposure: (n, 5) Σ over running jobs
            with a worker there of ``num_workers · λ_L · M^L ⊙ s``
            (:func:`harm_to_residents` turns it into a cost).
        free_gpus: total free GPUs (worker slots with GPU sharing).
        gpu_load, gpu_pressure: with GPU sharing, workers and summed pressure per GPU.
        group_free_for: with GPU sharing, :meth:`Simulator.group_free_for`; else None.
        running_fn: the running jobs (:meth:`running`), computed when asked.
        recheck_at: :meth:`Simulator.recheck_at` ``f(job_id, when)``, or None.
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
    recheck_at: Callable[[int, float], None] | None = field(default=None, repr=False, compare=False)

    def running(self) -> tuple[RunningInfo, ...]:
        """The running jobs, by job id: placement, slowdown, attained service."""
        return self.running_fn()


def harm_to_residents(view: ClusterView, pressure: np.ndarray, ps: bool = False) -> np.ndarray:
    """Per GPU group, the worker-weighted slowdown one more task pressing ``pressure``
    (5,) would add to residents: ``Σ_L E^L(g) · p`` (a ``ps`` presses only at socket and
    server, on cpu, membw and net)."""
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


class ViewMixin:
    """The simulator's read-only views (no state of its own)."""

    def view(self) -> ClusterView:
        """Read-only view of the current state for a policy (``group_free`` restricted to
        the pending job's usable GPUs)."""
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
            recheck_at=self.recheck_at,
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
