"""MLF-H's and MLF-RL's own load control: MLFS's rule
(:func:`marl_sched.policies.load_control.plan_moves`) with the policy's task-by-task
chooser deciding where to (own capacity released, overloaded servers excluded)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from agents.baselines.draft import TaskDraft, place_greedy
from marl_sched.jobs import Placement
from marl_sched.policies import load_control as rule
from marl_sched.policies.load_control import (
    MAX_MOVES,
    MAX_TRIES,
    SLOWDOWN_THRESHOLD,
    running_job,
)
from marl_sched.simulator import ClusterView, RunningInfo

Chooser = Callable[[TaskDraft, np.ndarray], int]


def plan_moves(
    view: ClusterView,
    choose: Callable[[ClusterView], Chooser],
    *,
    ps_first: bool = True,
    threshold: float = SLOWDOWN_THRESHOLD,
    max_moves: int = MAX_MOVES,
    max_tries: int = MAX_TRIES,
) -> list[tuple[int, Placement]]:
    """The migrations MLFS's load control proposes now, the new servers chosen task by
    task by ``choose(view)`` (the policy's per-task server chooser)."""
    chooser: list[Chooser] = []  # made once per call, and only if a job is tried

    def relocate(info: RunningInfo, over: np.ndarray) -> Placement | None:
        if not chooser:
            chooser.append(choose(view))
        draft = TaskDraft(running_job(info), view, ps_first=ps_first)
        draft.release(info.placement)
        if view.group_free_for is not None:  # GPU sharing: the GPUs it may use
            draft.set_group_free(view.group_free_for(info.job_id))
        draft.forbid_groups(~view.perf.group_fits(info.model))  # GPUs too small for it
        draft.allowed = ~over
        return place_greedy(draft, chooser[0])

    return rule.plan_moves(
        view, relocate, threshold=threshold, max_moves=max_moves, max_tries=max_tries
    )
