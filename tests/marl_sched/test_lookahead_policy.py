"""The one-step lookahead reference: the proposal with the lowest predicted iteration
time, the same choice as the agents' lookahead teacher on the whole view."""

from __future__ import annotations

from agents.teachers import LookaheadTeacher
from marl_sched.perf import PerformanceModel
from marl_sched.policies import make_policy
from marl_sched.policies.base import heuristic_names, policy_entries
from marl_sched.policies.lookahead import predicted_iteration_time
from marl_sched.policies.planner import CANDIDATES
from marl_sched.simulator import Simulator
from tests.helpers import random_jobs, tiny_topology

TOPO = tiny_topology(subclusters=1, racks=2, servers=2)
PERF = PerformanceModel(TOPO)


def test_it_takes_the_fastest_proposal_and_matches_the_teacher_on_the_whole_view():
    policy, teacher = make_policy("lookahead"), LookaheadTeacher()
    others = [make_policy(c) for c in CANDIDATES]
    for p in (policy, teacher, *others):
        p.reset(TOPO, 0)
    sim = Simulator(TOPO, random_jobs(PERF, 30, 4, max_workers=8, mean_gap=60.0), perf=PERF)
    differed = 0
    while (job := sim.next_decision()) is not None:
        view = sim.view()
        chosen = policy.place(job, view)
        assert chosen == teacher.place(job, view)
        found = [p for p in (o.place(job, view) for o in others) if p is not None]
        assert (chosen is None) == (not found)
        if chosen is not None:
            best = predicted_iteration_time(job, view, chosen)
            times = [predicted_iteration_time(job, view, p) for p in found]
            assert best <= min(times) + 1e-12
            differed += best < max(times) - 1e-12
        sim.apply(chosen)
    assert differed > 0  # the choice mattered somewhere


def test_it_is_a_reference_in_no_enumeration():
    assert policy_entries()["lookahead"].kind == "planner"
    assert "lookahead" not in heuristic_names()
