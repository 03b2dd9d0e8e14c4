"""MLFS's load control: move tasks off overloaded servers, lowest priority first.

MLFS (Wang, Liu, Shen, CoNEXT'20) watches server load and, when a server is
overloaded, migrates tasks to underloaded servers in order of priority (and, when the
whole system is overloaded, drops tasks that no longer improve accuracy — not
expressible here: the simulator has no accuracy model). The runner calls a policy's
``rebalance(view)`` after every batch of completions (``marl_sched.runner``); each
returned move is applied with ``Simulator.migrate``, which keeps the job's progress
and charges the run's restart penalty (``simulation.migration_penalty_s``).

How the paper's notions map onto what a load controller can read here
(``ClusterView.running()``: each running job's placement, current slowdown and
attained service; no true or estimated remaining length of running jobs):

- **Overloaded server**: GPUs are exclusive in this simulator, so a full server is not
  overloaded by itself; contention shows as interference. A server is overloaded when
  the running jobs with a worker on it are slowed, on average weighted by their
  workers there, by more than :data:`SLOWDOWN_THRESHOLD` (current iteration time over
  isolated). Our choice; the paper's threshold is on resource utilisation.
- **Priority of a running task**: MLF-H's priority (``marl_sched.ordering
  .mlfs_priority_value``: work term and size term, equal weights) with the work term
  taken from the GPU-seconds per worker the job has *attained* (the view gives no
  remaining length of running jobs): the jobs that have run longest and the biggest
  rank lowest and move first.
- **Where to**: the policy's own placement rule for the job, with the job's own
  capacity released and every overloaded server excluded. A move is made only if the
  job's workers end up on other servers than now.
- **How many**: at most :data:`MAX_MOVES` per call, trying at most :data:`MAX_TRIES`
  candidates, never a job that is still paying a restart penalty, and each job at
  most once per run (no ping-pong).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from agents.baselines.draft import TaskDraft, place_greedy
from marl_sched.jobs import Job, Placement
from marl_sched.ordering import mlfs_priority_value
from marl_sched.simulator import ClusterView, RunningInfo

#: worker-weighted mean slowdown of a server's running jobs above which it is overloaded
SLOWDOWN_THRESHOLD = 1.25
#: migrations per call of ``rebalance`` (the runner calls it after every completion batch)
MAX_MOVES = 1
#: candidates (lowest priority first) tried per call before giving up (bounds the cost)
MAX_TRIES = 4

Chooser = Callable[[TaskDraft, np.ndarray], int]


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


def plan_moves(
    view: ClusterView,
    choose: Callable[[ClusterView], Chooser],
    moved: set[int],
    *,
    ps_first: bool = True,
    threshold: float = SLOWDOWN_THRESHOLD,
    max_moves: int = MAX_MOVES,
    max_tries: int = MAX_TRIES,
) -> list[tuple[int, Placement]]:
    """The migrations load control makes now (see the module docstring).

    Args:
        view: the cluster between decisions.
        choose: ``choose(view)`` -> the policy's per-task server chooser.
        moved: jobs moved before in this run (updated with the new moves).
    """
    running = view.running()
    if not running:
        return []
    topo = view.topology
    over = server_slowdown(view, running) > threshold
    if not over.any():
        return []
    chooser = choose(view)
    candidates = [
        info
        for info in running
        if info.job_id not in moved
        and info.paused_until <= view.now
        and over[topo.group_server[np.asarray(info.placement.worker_groups)]].any()
    ]
    candidates.sort(key=lambda i: (-running_priority(i), i.job_id))
    moves: list[tuple[int, Placement]] = []
    for info in candidates[:max_tries]:
        if len(moves) >= max_moves:
            break
        job = Job(info.job_id, f"running-{info.job_id}", info.model, info.num_workers,
                  info.num_ps, math.nan, info.start_time, math.nan)  # fmt: skip
        draft = TaskDraft(job, view, ps_first=ps_first)
        draft.release(info.placement)
        if view.group_free_for is not None:  # GPU sharing: the GPUs it may use
            draft.set_group_free(view.group_free_for(info.job_id))
        draft.forbid_groups(~view.perf.group_fits(info.model))  # GPUs too small for it
        draft.allowed = ~over
        placement = place_greedy(draft, chooser)
        if placement is None:
            continue
        old = set(topo.group_server[np.asarray(info.placement.worker_groups)].tolist())
        new = set(topo.group_server[np.asarray(placement.worker_groups)].tolist())
        if new == old:
            continue
        moves.append((info.job_id, placement))
        moved.add(info.job_id)
    return moves
