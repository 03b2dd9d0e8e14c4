"""MLF-H, the heuristic half of MLFS (Wang, Liu, Shen, CoNEXT 2020), torch-free
(docs/baselines.md, "MLF-H", lists the choices).

Priority (:func:`mlfs_priority`, lower = sooner; ordering ``mlfs-priority``)::

    P(j) = 0.5 · min(1, ln(1 + work) / ln(1 + 1e7)) + 0.5 · min(1, log2(tasks) / 10)

``work`` the estimated remaining reference-GPU seconds. Placement per task, PS first::

    score(s) = Σ_r |free_r(s) − demand_r(s)|  +  λ_loc · hops(s, anchor)
               + 1e3 · [load(s) > θ]

(:func:`ideal_host_distance`; θ = 0.8, λ_loc = 1). Load control with migration
(:meth:`MlfHPolicy.rebalance`, :mod:`agents.baselines.load_control`) only with
``simulation.migration: on``."""

from __future__ import annotations

import numpy as np

from agents.baselines.draft import TaskDraft, place_greedy
from agents.baselines.load_control import Chooser, plan_moves
from marl_sched.jobs import Job, Placement
from marl_sched.ordering import QueueOrdering, make_ordering, mlfs_priority_value
from marl_sched.policies.base import Policy
from marl_sched.simulator import ClusterView

#: utilisation above which a server counts as overloaded (authors' ``av < 0.2``)
OVERLOAD_THRESHOLD = 0.8
#: distance per unit of relative GPU-speed loss against the model's fastest GPU type
#: (our choice: the same scale as one resource dimension of the L1 distance)
SPEED_WEIGHT = 1.0


def mlfs_priority(job: Job) -> float:
    """MLF-H's job priority in [0, 1] of a job as a policy sees it (``job.work_s`` is
    the duration predictor's estimate); lower is scheduled sooner."""
    return mlfs_priority_value(job.work_s, job.num_workers, job.num_ps)


def mlfs_priority_key(job: Job) -> tuple:
    """Queue key of the ``mlfs-priority`` ordering: priority, then FIFO."""
    return (mlfs_priority(job), job.submit_time, job.job_id)


def server_load(view: ClusterView) -> np.ndarray:
    """Largest used fraction of GPUs, CPU cores or memory per server, before the job."""
    topo = view.topology
    free_gpus = np.bincount(topo.group_server, weights=view.group_free, minlength=topo.n_servers)
    used = np.stack(
        [
            1.0 - free_gpus / np.maximum(topo.server_gpus, 1),
            1.0 - view.server_cpu_free / topo.server_cpu,
            1.0 - view.server_mem_free / topo.server_memory_gb,
        ]
    )
    return used.max(axis=0)


def ideal_host_distance(draft: TaskDraft, speed_weight: float = SPEED_WEIGHT) -> np.ndarray:
    """L1 distance between each server and the ideal host of the job's unplaced tasks:
    free GPUs, cores and memory against the demand (fractions of capacity), plus
    ``speed_weight · (1 − speed(model, server) / best)`` while workers remain."""
    topo = draft.topo
    rw, rp = draft.remaining_workers, draft.remaining_ps
    gpus = np.maximum(topo.server_gpus, 1)
    free = (
        draft.server_free_gpus / gpus,
        draft.cpu_free / topo.server_cpu,
        draft.mem_free / topo.server_memory_gb,
    )
    demand = (
        rw / gpus,
        (rw * draft.cpu_w + rp * draft.cpu_p) / topo.server_cpu,
        (rw + rp) * draft.mem / topo.server_memory_gb,
    )
    dist = sum(np.abs(f - d) for f, d in zip(free, demand, strict=True))
    if rw > 0 and speed_weight:
        dist = dist + speed_weight * (1.0 - draft.speed / max(float(draft.speed.max()), 1e-12))
    return dist


def mlf_h_scores(
    draft: TaskDraft,
    overloaded: np.ndarray,
    locality_weight: float = 1.0,
) -> np.ndarray:
    """MLF-H's score of every server for the draft's next task (lower is better)."""
    return ideal_host_distance(draft) + locality_weight * draft.hops() + 1e3 * overloaded


class MlfsPolicy(Policy):
    """What MLF-H and MLF-RL share: task-by-task placement with a per-task chooser
    (:meth:`chooser`), MLF-H's priority as ordering, and load control
    (``load_control``: :meth:`rebalance`)."""

    def __init__(self, load_control: bool = True) -> None:
        self.load_control = load_control

    def chooser(self, view: ClusterView) -> Chooser:
        """``choose(draft, mask) -> server`` for placements on ``view``."""
        raise NotImplementedError

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        return place_greedy(TaskDraft(job, view, ps_first=True), self.chooser(view))

    def ordering(self) -> QueueOrdering | None:
        """MLF-H's priority by the duration predictor's estimate."""
        return make_ordering("mlfs-priority")

    def rebalance(self, view: ClusterView) -> list[tuple[int, Placement]]:
        if not self.load_control:
            return []
        return plan_moves(view, self.chooser)


class MlfHPolicy(MlfsPolicy):
    """MLF-H: ideal-host placement with locality and threshold load control.

    Args:
        overload_threshold: used fraction above which a server is avoided.
        locality_weight: score per hierarchy level between a task and the job's first.
        load_control: migrate jobs off overloaded servers (:meth:`rebalance`).
    """

    name = "mlfs-h"
    description = "MLFS heuristic: ideal-host placement near the PS, avoiding loaded servers"

    def __init__(
        self,
        overload_threshold: float = OVERLOAD_THRESHOLD,
        locality_weight: float = 1.0,
        load_control: bool = True,
    ) -> None:
        super().__init__(load_control)
        self.overload_threshold = overload_threshold
        self.locality_weight = locality_weight

    def chooser(self, view: ClusterView) -> Chooser:
        overloaded = server_load(view) > self.overload_threshold

        def choose(d: TaskDraft, mask: np.ndarray) -> int:
            score = mlf_h_scores(d, overloaded, self.locality_weight)
            return int(np.argmin(np.where(mask, score, np.inf)))

        return choose
