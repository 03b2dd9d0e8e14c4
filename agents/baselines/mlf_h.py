"""MLF-H, the heuristic half of MLFS (Wang, Liu, Shen, CoNEXT 2020), torch-free.

MLFS ("ML job Feature based Scheduling") orders jobs by a priority built from ML
features of the job and places each task on an *ideal host*; a load controller keeps
servers below a utilisation threshold. What this module implements, and how it maps
onto our simulator (the full list of choices, with what the paper does and does not
fix, is in ``docs/baselines.md``):

**Job priority** (:func:`mlfs_priority`, lower = scheduled sooner)::

    P(j) = W_ml · u_ml(j) + W_c · u_c(j),           W_ml = W_c = 0.5
    u_ml = min(1, ln(1 + iterations · compute_s) / ln(1 + 1e7))   # work left (ref-GPU s)
    u_c  = min(1, log2(num_workers + num_ps) / 10)                  # job size (tasks)

The ML-aware term is convergence-aware urgency reduced to what a queued job has: the
training it still needs (iterations × per-iteration time on the reference GPU; a job
that is queued has made no progress, and no loss curve is observable in the
simulator). The compute term is the job's size in tasks. The equal weights 0.5 are the
ones in the authors' released simulator (``W_q_* = 0.5``); the log scales map both
terms to [0, 1] without looking at the rest of the queue, because the simulator's queue
keys are per job and fixed at arrival. The simulator offers one job at a time in its
configured ordering, so the priority acts only when that ordering is configured (the
``mlfs-priority`` entry of ``marl_sched.simulator.ORDERINGS``, see
:data:`ORDERING_ENTRY`); :class:`MlfHPolicy` itself never sees two jobs at once.

**Placement** (per task, parameter servers first, then workers near them)::

    score(s) = Σ_r |free_r(s) − demand_r(s)|  +  λ_loc · hops(s, anchor)
               + 1e3 · [load(s) > θ]

``free_r`` and ``demand_r`` are the server's free GPUs, CPU cores and memory and the
job's still-unplaced demand of each, both as fractions of the server's capacity (the
authors' code uses this unweighted L1 distance, named "similarity"); ``hops`` counts
hierarchy levels (server, rack, subcluster) between the server and the job's first
task; ``λ_loc = 1``. **Load control**: ``load(s)`` is the largest used fraction of GPUs,
CPU or memory *before* this job (θ = 0.8, the authors' "available ≥ 0.2" test);
overloaded servers are used only when no other server has room. MLFS also *migrates*
tasks off overloaded servers and drops tasks that no longer improve accuracy; our
simulator fixes a job's placement for its life and has no accuracy model, so neither is
implemented.
"""

from __future__ import annotations

import math

import numpy as np

from agents.baselines.draft import TaskDraft, place_greedy
from marl_sched.jobs import Job, Placement
from marl_sched.policies.base import Policy
from marl_sched.simulator import ClusterView

#: published-code weights of the two priority parts (``W_q_* = 0.5``)
W_ML, W_COMPUTE = 0.5, 0.5
#: utilisation above which a server counts as overloaded (authors' ``av < 0.2``)
OVERLOAD_THRESHOLD = 0.8
#: the exact line to add to ``marl_sched.simulator.ORDERINGS`` (inline, since
#: ``marl_sched`` may not import ``agents``); a test checks it equals mlfs_priority
ORDERING_ENTRY = (
    '"mlfs-priority": lambda j: (\n'
    "    0.5 * min(1.0, math.log1p(j.iterations * CATALOGUE[j.model].compute_s)"
    " / math.log1p(1e7))\n"
    "    + 0.5 * min(1.0, math.log2(j.num_workers + j.num_ps) / 10.0),\n"
    "    j.submit_time,\n"
    "    j.job_id,\n"
    "),"
)


def mlfs_priority(job: Job) -> float:
    """MLF-H's job priority in [0, 1]; lower is scheduled sooner."""
    work = job.work_s
    u_ml = min(1.0, math.log1p(work) / math.log1p(1e7))
    u_c = min(1.0, math.log2(job.num_workers + job.num_ps) / 10.0)
    return W_ML * u_ml + W_COMPUTE * u_c


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


def ideal_host_distance(draft: TaskDraft) -> np.ndarray:
    """L1 distance between each server's free (GPU, CPU, memory) and the unplaced demand."""
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
    return sum(np.abs(f - d) for f, d in zip(free, demand, strict=True))


def mlf_h_scores(
    draft: TaskDraft,
    overloaded: np.ndarray,
    locality_weight: float = 1.0,
) -> np.ndarray:
    """MLF-H's score of every server for the draft's next task (lower is better)."""
    return ideal_host_distance(draft) + locality_weight * draft.hops() + 1e3 * overloaded


class MlfHPolicy(Policy):
    """MLF-H: ideal-host placement with locality and threshold load control.

    Args:
        overload_threshold: used fraction above which a server is avoided.
        locality_weight: score per hierarchy level between a task and the job's first.
    """

    name = "mlfs-h"
    description = "MLFS heuristic: ideal-host placement near the PS, avoiding loaded servers"

    def __init__(
        self, overload_threshold: float = OVERLOAD_THRESHOLD, locality_weight: float = 1.0
    ) -> None:
        self.overload_threshold = overload_threshold
        self.locality_weight = locality_weight

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        overloaded = server_load(view) > self.overload_threshold
        draft = TaskDraft(job, view, ps_first=True)

        def choose(d: TaskDraft, mask: np.ndarray) -> int:
            score = mlf_h_scores(d, overloaded, self.locality_weight)
            return int(np.argmin(np.where(mask, score, np.inf)))

        return place_greedy(draft, choose)
