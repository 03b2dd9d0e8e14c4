"""``masked:lookahead-learned``: the lookahead policy scoring its proposals with an
estimate a real scheduler could compute, never the performance model on a placement
that has not happened."""

from __future__ import annotations

import numpy as np
import pytest

from agents.teachers import (
    LearnedLookaheadTeacher,
    MaskedLookahead,
    MaskedLookaheadLearned,
    MaskedLookaheadLearnedHome,
    _forward_legal,
    _plan_views,
    proposals,
    teacher_plan,
)
from envs.rules import placement_key
from marl_sched.interference.estimate import (
    estimated_iteration_times,
    estimated_layout,
    without_job,
)
from marl_sched.perf import PerformanceModel
from marl_sched.policies import make_policy, policy_entries
from marl_sched.policies.base import control_names, heuristic_names
from marl_sched.simulator import Simulator, run_policy
from tests.helpers import performance_model_refused, random_jobs, tiny_topology

TOPO = tiny_topology(subclusters=3, racks=1, servers=2, gpus_per_group=2,
                     gpu_types=("k80", "v100", "p100"))  # fmt: skip


def plan_options(teacher, session):
    """The proposals the ``lookahead`` teacher chooses among in ``teacher_plan``."""
    return proposals(teacher.candidates, session.job, _plan_views(session), _forward_legal(session))


def _window(n: int = 60, seed: int = 5):
    perf = PerformanceModel(TOPO)
    return perf, random_jobs(perf, n, seed, max_workers=4, mean_gap=40.0)


def _walk(policy, *others):
    """Each decision of ``policy`` over the mixed window (``others`` reset beside it):
    the job, the view and ``policy``'s fresh session; ``policy`` places it after."""
    perf, jobs = _window()
    for p in (policy, *others):
        p.reset(TOPO, 0)
    sim = Simulator(TOPO, jobs, perf=perf)
    while (job := sim.next_decision()) is not None:
        view = sim.view()
        yield job, view, policy.open_session(job, view)
        sim.apply(policy.place(job, view))


def _guarded_run(policy, monkeypatch) -> int:
    """Run ``policy`` over a mixed window with the guarded functions raising while its
    ``place`` runs (unless called by the environment's own rule); the decisions made."""
    perf, jobs = _window()
    policy.reset(TOPO, 0)
    sim = Simulator(TOPO, jobs, perf=perf)
    decisions = 0

    def place(job, view):
        nonlocal decisions
        with performance_model_refused(monkeypatch, "the policy"):
            placement = policy.place(job, view)
        decisions += 1
        return placement

    assert len(run_policy(sim, place)) == len(jobs)
    return decisions


def test_registered_as_a_teacher_with_the_lookahead_policys_rules():
    policy = make_policy("masked:lookahead-learned")
    assert isinstance(policy, MaskedLookaheadLearned) and isinstance(policy, MaskedLookahead)
    assert isinstance(policy.planner, LearnedLookaheadTeacher)
    assert policy.options == make_policy("masked:lookahead").options
    assert policy.planner.model is not None  # the shipped learned model is loaded
    assert policy_entries()["masked:lookahead-learned"].kind == "teacher"
    assert "masked:lookahead-learned" not in control_names() + heuristic_names()


@pytest.mark.parametrize("name", ["masked:lookahead-learned", "masked:lookahead-learned-home"])
def test_never_calls_the_performance_model_while_it_decides(name, monkeypatch):
    assert _guarded_run(make_policy(name), monkeypatch) >= 60


def test_the_home_variant_asks_the_home_subcluster_and_the_whole_view_only():
    """``masked:lookahead-learned-home``: per job, the heuristics are asked on the job's
    home subcluster (when it can hold the job alone) and the whole view, in that order;
    its plan is the lowest estimate among those views' legal proposals, and over the
    window the plain variant asks on more views somewhere."""
    home = make_policy("masked:lookahead-learned-home")
    plain = make_policy("masked:lookahead-learned")
    assert isinstance(home, MaskedLookaheadLearnedHome) and home.planner.home_only
    assert policy_entries()["masked:lookahead-learned-home"].kind == "teacher"
    assert home.options == plain.options
    compared = fewer = 0
    for job, view, session in _walk(home, plain):
        if session.feasible() and not session.waits():
            views = _plan_views(session, home_only=True)
            every = _plan_views(session)
            can = session.scope_can_host_rest()
            assert views[-1] is session.view and len(views) == 1 + bool(can[session.agent])
            if len(views) == 2:
                outside = session.builder.group_scope != session.agent
                assert not np.asarray(views[0].group_free)[outside].any()  # the home scope
            options = proposals(home.planner.candidates, job, views, _forward_legal(session))
            plan = teacher_plan(home.planner, session)
            if options:
                times = estimated_iteration_times(view, job, options, home.planner.model)
                assert placement_key(plan) == placement_key(options[int(np.argmin(times))])
                compared += 1
            else:
                assert plan is None
            fewer += len(every) > len(views)
    assert compared >= 20 and fewer >= 1, (compared, fewer)


def test_the_guard_bites_on_the_exact_model_reference(monkeypatch):
    """The same harness fails ``masked:lookahead``, which scores its proposals with the
    performance model: a learned policy that did so would fail the test above."""
    with pytest.raises(AssertionError, match="PerformanceModel.iteration_time"):
        _guarded_run(make_policy("masked:lookahead"), monkeypatch)


def test_it_takes_the_lowest_estimate_among_the_lookaheads_proposals():
    """Per job, the plan is one of the exact lookahead's own proposals (the same
    proposals, views and forward rule), the one of lowest estimate; over the window
    it parts from the exact lookahead somewhere."""
    policy = make_policy("masked:lookahead-learned")
    exact = make_policy("masked:lookahead")
    compared = differ = 0
    for job, view, session in _walk(policy, exact):
        options = plan_options(exact.planner, session) if session.feasible() else []
        if options and not session.waits():
            plan = teacher_plan(policy.planner, session)
            times = estimated_iteration_times(view, job, options, policy.planner.model)
            assert placement_key(plan) == placement_key(options[int(np.argmin(times))])
            other = teacher_plan(exact.planner, exact.open_session(job, view))
            differ += placement_key(plan) != placement_key(other)
            compared += 1
    assert compared >= 20 and differ >= 1, (compared, differ)


def test_the_estimate_reads_no_alone_time_of_the_performance_model(monkeypatch):
    """The layout's alone-time-derived link share is replaced: garbage in the
    performance model's alone formula changes no estimate."""
    perf, jobs = _window(n=40)
    first_fit = make_policy("first-fit")
    sim = Simulator(TOPO, jobs, perf=perf)
    while (job := sim.next_decision()) is not None:
        view = sim.view()
        if job.num_workers >= 2 and view.link_load.max() > 0:
            break
        sim.apply(first_fit.place(job, view))
    model = LearnedLookaheadTeacher().model
    options = [q for v in [view] for name in ("locality", "load-balance", "first-fit")
               if (q := make_policy(name).place(job, v)) is not None]  # fmt: skip
    want = estimated_iteration_times(view, job, options, model)
    monkeypatch.setattr(PerformanceModel, "_alone", lambda *a: 1e6)
    assert np.array_equal(estimated_iteration_times(view, job, options, model), want)
    # taking a placed job out of the view gives back its own pressure and link use
    monkeypatch.undo()
    running = max(view.running(), key=lambda r: (r.num_workers, r.job_id))
    job0 = next(j for j in jobs if j.job_id == running.job_id)
    out = without_job(view, job0, running.placement)
    links = estimated_layout(view, job0, running.placement).link_ids
    assert len(links) and out.link_jobs.sum() == view.link_jobs.sum() - len(links)
    assert (out.group_pressure <= view.group_pressure + 1e-12).all()
    assert out.group_pressure.sum() < view.group_pressure.sum()
