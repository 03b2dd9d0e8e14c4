"""MLFS's load control (Wang, Liu, Shen, CoNEXT'20) as a rule any placement policy can
be paired with: one :func:`plan_moves` for MLF-H, MLF-RL
(:mod:`agents.baselines.load_control`) and the ``+lc`` rows (:class:`LoadControlled`),
proposed through :meth:`~marl_sched.policies.Policy.rebalance`.

How the paper's notions map onto what ``ClusterView.running()`` shows (placement,
current slowdown, attained service, when a job may move; no remaining length):

- **Overloaded server**: the running jobs with a worker on it are slowed, on average
  weighted by their workers there, by more than :data:`SLOWDOWN_THRESHOLD` (our
  choice; the paper's threshold is on resource utilisation).
- **Priority of a running task**: MLF-H's priority
  (:func:`marl_sched.ordering.mlfs_priority_value`, work and size terms, equal
  weights) with the work term from the GPU-seconds per worker the job has *attained*:
  the jobs that have run longest and the biggest rank lowest and move first.
- **Where to**: the paired policy's own placement of the job, with the job's own
  capacity released and every overloaded server excluded (:func:`released_view`). A
  move is proposed only if the job's workers end up on other servers than now.
- **How many**: at most :data:`MAX_MOVES` per call, trying at most :data:`MAX_TRIES`
  candidates, never a job still paying a restart delay nor one the simulator would
  decline (``RunningInfo.next_move_at``: its per-job cap and interval).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job, Placement
from marl_sched.ordering import QueueOrdering, mlfs_priority_value
from marl_sched.policies.base import Policy, get_policy_class
from marl_sched.simulator import ClusterView, RunningInfo
from marl_sched.topology import Topology

#: worker-weighted mean slowdown of a server's running jobs above which it is overloaded
SLOWDOWN_THRESHOLD = 1.25
#: migrations per call of ``rebalance`` (the runner calls it after every completion batch)
MAX_MOVES = 1
#: candidates (lowest priority first) tried per call before giving up (bounds the cost)
MAX_TRIES = 4

#: ``relocate(info, overloaded servers) -> new placement or None``
Relocate = Callable[[RunningInfo, np.ndarray], Placement | None]


def server_slowdown(view: ClusterView, running: tuple[RunningInfo, ...]) -> np.ndarray:
    """Per server, the worker-weighted mean slowdown of the jobs with workers on it
    (1 where none runs)."""
    topo = view.topology
    weight = np.zeros(topo.n_servers)
    total = np.zeros(topo.n_servers)
    for info in running:
        servers = topo.group_server[np.asarray(info.placement.worker_groups, dtype=np.int64)]
        np.add.at(weight, servers, 1.0)
        np.add.at(total, servers, info.slowdown)
    return np.where(weight > 0, total / np.maximum(weight, 1.0), 1.0)


def running_priority(info: RunningInfo) -> float:
    """MLF-H's priority of a running job (lower = more urgent), see the module doc."""
    work = info.attained_gpu_s / max(info.num_workers, 1)
    return mlfs_priority_value(work, info.num_workers, info.num_ps)


def running_job(info: RunningInfo) -> Job:
    """A running job as a placement policy sees a job to place: its shape and model,
    no length (``nan``: the view has none of a running job)."""
    return Job(info.job_id, f"running-{info.job_id}", info.model, info.num_workers,
               info.num_ps, math.nan, info.start_time, math.nan)  # fmt: skip


def plan_moves(
    view: ClusterView,
    relocate: Relocate,
    *,
    threshold: float = SLOWDOWN_THRESHOLD,
    max_moves: int = MAX_MOVES,
    max_tries: int = MAX_TRIES,
) -> list[tuple[int, Placement]]:
    """The migrations load control proposes now (module docstring); ``relocate``
    is the paired policy's placement of a running job off the overloaded servers."""
    running = view.running()
    if not running:
        return []
    over = server_slowdown(view, running) > threshold
    if not over.any():
        return []
    candidates = [info for info in running if movable(view, info, over)]
    candidates.sort(key=lambda i: (-running_priority(i), i.job_id))
    moves: list[tuple[int, Placement]] = []
    for info in candidates[:max_tries]:
        if len(moves) >= max_moves:
            break
        placement = relocated(view, info, relocate, over)
        if placement is not None:
            moves.append((info.job_id, placement))
    return moves


def move_for(
    view: ClusterView, info: RunningInfo, relocate: Relocate, threshold: float = SLOWDOWN_THRESHOLD
) -> Placement | None:
    """The rule's decision for the one running job ``info`` (where to move it, or
    None to keep it), as :func:`plan_moves` would take it were ``info`` its only
    candidate: a warm-start teacher asks this of the job the environment offers."""
    over = server_slowdown(view, view.running()) > threshold
    if not over.any() or not movable(view, info, over):
        return None
    return relocated(view, info, relocate, over)


def movable(view: ClusterView, info: RunningInfo, over: np.ndarray) -> bool:
    """May load control move ``info``: the simulator lets it move now, it is not
    restarting, and a worker of it is on an overloaded server (``over``)."""
    servers = view.topology.group_server[np.asarray(info.placement.worker_groups)]
    return info.next_move_at <= view.now and info.paused_until <= view.now and over[servers].any()


def relocated(
    view: ClusterView, info: RunningInfo, relocate: Relocate, over: np.ndarray
) -> Placement | None:
    """``relocate``'s placement of ``info`` when it puts the job's workers on other
    servers than now; else None (no move)."""
    placement = relocate(info, over)
    if placement is None:
        return None
    gs = view.topology.group_server
    old = set(gs[np.asarray(info.placement.worker_groups)].tolist())
    new = set(gs[np.asarray(placement.worker_groups)].tolist())
    return None if new == old else placement


def usable_groups(view: ClusterView, info: RunningInfo) -> np.ndarray:
    """Per GPU group, the GPUs the running job ``info`` could put a worker on were its
    own workers released: :meth:`~marl_sched.simulator.Simulator.group_free_for`
    from a view (between decisions, when ``view.group_free`` is every free GPU)."""
    if view.group_free_for is not None:
        return np.array(view.group_free_for(info.job_id), dtype=np.int64)
    free = np.array(view.group_free, dtype=np.int64)
    np.add.at(free, np.asarray(info.placement.worker_groups, dtype=np.int64), 1)
    return np.where(view.perf.group_fits(info.model), free, 0)


def given_back(view: ClusterView, info: RunningInfo) -> tuple[np.ndarray, np.ndarray]:
    """The servers' free cores and memory (new arrays) with the running job ``info``'s
    own given back: its workers' and PS's cores and memory on their servers."""
    t, spec = view.topology, CATALOGUE[info.model]
    wg = np.asarray(info.placement.worker_groups, dtype=np.int64)
    pg = np.asarray(info.placement.ps_groups, dtype=np.int64)
    cpu = np.array(view.server_cpu_free, dtype=np.float64)
    mem = np.array(view.server_mem_free, dtype=np.float64)
    np.add.at(cpu, t.group_server[wg], spec.cpu_worker)
    np.add.at(cpu, t.group_server[pg], spec.cpu_ps)
    np.add.at(mem, t.group_server[np.concatenate([wg, pg])], spec.mem_gb)
    return cpu, mem


def released_view(view: ClusterView, info: RunningInfo, forbidden: np.ndarray) -> ClusterView:
    """``view`` as a policy placing the running job ``info`` should see it: its own
    GPUs, cores and memory given back (only GPUs its model fits in; with GPU sharing
    the simulator's :meth:`~marl_sched.simulator.Simulator.group_free_for`), and no
    room at all on the ``forbidden`` servers (bool per server). Pressures still count
    the job where it runs now (a small bias towards leaving, where it is leaving)."""
    free = usable_groups(view, info)
    free[forbidden[view.topology.group_server]] = 0
    cpu, mem = given_back(view, info)
    cpu[forbidden] = 0.0
    mem[forbidden] = 0.0
    for a in (free, cpu, mem):
        a.setflags(write=False)
    return replace(view, group_free=free, server_cpu_free=cpu, server_mem_free=mem,
                   free_gpus=int(free.sum()))  # fmt: skip


class LoadControlled(Policy):
    """A registered placement policy paired with MLFS's load control: it places as
    ``base`` does and proposes migrations by :func:`plan_moves` with ``base``'s
    placement choosing where. Subclasses set ``name``, ``description`` and ``base``.

    Args:
        checkpoint: handed to ``base`` when it takes one (``harmony+lc``).
    """

    base: ClassVar[str] = ""

    def __init__(self, checkpoint: str | None = None) -> None:
        cls = get_policy_class(self.base)
        code = getattr(cls.__init__, "__code__", None)  # None: object's own __init__
        takes = code is not None and "checkpoint" in code.co_varnames
        self.inner: Policy = cls(checkpoint=checkpoint) if checkpoint and takes else cls()

    def reset(self, topology: Topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        self.inner.reset(topology, seed)

    def check_cluster(self, topology: Topology, perf: Any) -> None:
        self.inner.check_cluster(topology, perf)

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        return self.inner.place(job, view)

    def ordering(self) -> QueueOrdering | None:
        return self.inner.ordering()

    def rebalance(self, view: ClusterView) -> list[tuple[int, Placement]]:
        def relocate(info: RunningInfo, over: np.ndarray) -> Placement | None:
            return self.inner.place(running_job(info), released_view(view, info, over))

        return plan_moves(view, relocate)


def _paired(base: str, class_name: str) -> type[LoadControlled]:
    """The ``+lc`` row of the registered policy ``base``."""
    attrs = {
        "name": f"{base}+lc",
        # the registry's wording (marl_sched/policies/base.py)
        "description": f"{base} paired with MLFS's load control (migrates with "
        "simulation.migration: on)",
        "base": base,
        "__module__": __name__,
        "__qualname__": class_name,
    }
    return type(class_name, (LoadControlled,), attrs)


FirstFitLc = _paired("first-fit", "FirstFitLc")
SpeedAwareLc = _paired("speed-aware", "SpeedAwareLc")
MaskedInterferenceAwareLc = _paired("masked:interference-aware", "MaskedInterferenceAwareLc")
HarmonyLc = _paired("harmony", "HarmonyLc")  # takes harmony's checkpoint
MaskedLookaheadLc = _paired("masked:lookahead", "MaskedLookaheadLc")  # kind ``teacher``
