"""The one-step lookahead over the heuristics' proposals with the simulator's own
performance model (``lookahead``, kind ``planner``): ``masked:lookahead``'s teacher
without the agents' masks and subcluster views, the planner's default playout base.
"""

from __future__ import annotations

import math

import numpy as np

from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job, Placement
from marl_sched.policies.base import Policy, make_policy
from marl_sched.simulator import ClusterView
from marl_sched.topology import Topology


def predicted_iteration_time(job: Job, view: ClusterView, p: Placement) -> float:
    """The job's iteration time right after placing it as ``p`` on ``view`` (its own
    pressure and link use added, as the simulator would)."""
    spec, perf = CATALOGUE[job.model], view.perf
    lay = perf.layout(spec, p.worker_groups, p.ps_groups)
    gp = np.array(view.group_pressure)
    gp[lay.groups] += lay.group_press
    sp = np.array(view.socket_pressure)
    sp[lay.sockets] += lay.socket_press
    vp = np.array(view.server_pressure)
    vp[lay.servers] += lay.server_press
    load = np.array(view.link_load)
    load[lay.link_ids] += lay.link_util
    return perf.iteration_time(spec, lay, job.num_ps, load, gp, sp, vp)


def fastest(job: Job, view: ClusterView, placements, legal=None) -> Placement | None:
    """The placement ``legal`` accepts (all when None) with the lowest predicted
    iteration time (ties: the first). ``legal`` is asked only of a placement that would
    improve on the best so far, which picks exactly what filtering first would."""
    best, best_time = None, math.inf
    for p in placements:
        t = predicted_iteration_time(job, view, p)
        if t < best_time - 1e-12 and (legal is None or legal(p)):
            best, best_time = p, t
    return best


class LookaheadPolicy(Policy):
    """Per job, the heuristics' proposal (whole view) with the lowest predicted
    iteration time under the simulator's performance model (ties: proposal order)."""

    name = "lookahead"
    description = (
        "reference, not a contender: the heuristics' proposals scored by the "
        "simulator's performance model, one step (masked:lookahead without masks)"
    )

    def __init__(self, candidates: tuple[str, ...] | None = None) -> None:
        from marl_sched.policies.planner import CANDIDATES

        self.candidates = [make_policy(c) for c in (candidates or CANDIDATES)]

    def reset(self, topology: Topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        for c in self.candidates:
            c.reset(topology, seed)

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        found: list[Placement] = []
        for c in self.candidates:
            p = c.place(job, view)
            if p is not None and p not in found:
                found.append(p)
        return fastest(job, view, found)
