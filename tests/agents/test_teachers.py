"""The behaviour-cloning teachers: proposals, the one-step lookahead, rollouts."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from agents.teachers import (
    LookaheadTeacher,
    RolloutTeacher,
    predicted_iteration_time,
    proposals,
    residents_harm,
    total_slowdown,
)
from envs.rules import placement_key
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.perf import PerformanceModel
from marl_sched.policies import make_policy
from marl_sched.simulator import Simulator
from tests.helpers import random_jobs, tiny_topology


def _busy_sim(n_jobs=50, placed=20, seed=11):
    """A simulator part-way through a busy window, with a multi-worker job pending
    on which the heuristics propose at least three different placements."""
    topo = tiny_topology()
    perf = PerformanceModel(topo)
    jobs = random_jobs(perf, n_jobs, seed=seed, mean_gap=40.0)
    base = make_policy("first-fit")
    base.reset(topo, 0)
    sim = Simulator(topo, jobs, perf=perf)
    heuristics = LookaheadTeacher()
    heuristics.reset(topo)
    done = 0
    while (job := sim.next_decision()) is not None:
        if done >= placed and job.num_workers >= 2:
            if len(proposals(heuristics.candidates, job, [sim.view()])) >= 3:
                return topo, sim, job
        sim.apply(base.place(job, sim.view()))
        done += 1
    raise AssertionError("no multi-worker decision after the warm-up")


def test_proposals_are_distinct_and_legal():
    topo, sim, job = _busy_sim()
    teacher = LookaheadTeacher()
    teacher.reset(topo)
    view = sim.view()
    every = proposals(teacher.candidates, job, [view])
    keys = [placement_key(p) for p in every]
    assert len(every) >= 2 and len(set(keys)) == len(keys)
    legal = proposals(teacher.candidates, job, [view], legal=lambda p: placement_key(p) != keys[0])
    assert [placement_key(p) for p in legal] == keys[1:]


def test_lookahead_picks_the_fastest_proposal():
    topo, sim, job = _busy_sim()
    teacher = LookaheadTeacher()
    teacher.reset(topo)
    view = sim.view()
    chosen = teacher.place(job, view)
    times = [
        predicted_iteration_time(job, view, p) for p in proposals(teacher.candidates, job, [view])
    ]
    assert predicted_iteration_time(job, view, chosen) == pytest.approx(min(times))


@pytest.mark.parametrize("harm", [False, True])
@pytest.mark.parametrize("banned", [0, 1, 2])
def test_legality_asked_lazily_picks_what_filtering_first_picks(harm, banned):
    """The teacher asks ``legal`` only of a proposal that would win, yet picks exactly
    the proposal it would pick among the legal ones filtered first."""
    topo, sim, job = _busy_sim()
    teacher = LookaheadTeacher(harm=harm)
    teacher.reset(topo)
    view = sim.view()
    every = proposals(teacher.candidates, job, [view])
    if harm:
        harms = residents_harm(job, view)
        scores = [total_slowdown(job, view, p, harms) for p in every]
    else:
        scores = [predicted_iteration_time(job, view, p) for p in every]
    # ban the best proposals, so the winner must come from further down the list
    ranked = sorted(range(len(every)), key=lambda i: (scores[i], i))
    out = {placement_key(every[i]) for i in ranked[:banned]}
    asked = []

    def legal(p):
        asked.append(placement_key(p))
        return placement_key(p) not in out

    allowed = [p for p in every if placement_key(p) not in out]
    chosen = teacher.place(job, view, legal=legal)
    if harm:
        allowed_scores = [total_slowdown(job, view, p, harms) for p in allowed]
    else:
        allowed_scores = [predicted_iteration_time(job, view, p) for p in allowed]
    expected = allowed[int(np.argmin(allowed_scores))]
    assert placement_key(chosen) == placement_key(expected)
    assert len(asked) < len(every)


def test_rollout_score_is_the_total_jct_of_the_base_heuristic_run():
    """A full-horizon rollout scores a proposal with exactly the total JCT the window
    ends with when the proposal is applied and the base heuristic places the rest."""
    topo, sim, job = _busy_sim()
    teacher = RolloutTeacher(base="locality")
    teacher.reset(topo)
    view = sim.view()
    options = proposals(teacher.candidates, job, [view])
    base = make_policy("locality")
    base.reset(topo)
    for p in options[:3]:
        score = teacher.rollout(sim, p, math.inf)
        f = sim.fork()
        f.apply(p)
        while (j := f.next_decision()) is not None:
            f.apply(base.place(j, f.view()))
        assert score == pytest.approx(sum(r.jct for r in f.result()), rel=1e-12)
    assert sim.pending is job  # rollouts never touch the simulator they fork


def test_rollout_teacher_picks_the_lowest_scoring_proposal():
    topo, sim, job = _busy_sim()
    teacher = RolloutTeacher()
    teacher.reset(topo)
    view = sim.view()
    chosen = teacher.place(job, view, sim=sim)
    until = teacher._horizon_end(sim)
    scores = {
        placement_key(p): teacher.rollout(sim, p, until)
        for p in proposals(teacher.candidates, job, [view])
    }
    assert len(scores) >= 2
    assert scores[placement_key(chosen)] == pytest.approx(min(scores.values()))


def test_rollout_teacher_needs_the_simulator_of_the_pending_job():
    topo, sim, job = _busy_sim()
    teacher = RolloutTeacher()
    teacher.reset(topo)
    with pytest.raises(ValueError, match="needs the simulator"):
        teacher.place(job, sim.view())
    # small jobs take the one-step lookahead's choice and need no simulator
    small = RolloutTeacher(min_workers=job.num_workers + 1)
    small.reset(topo)
    look = LookaheadTeacher()
    look.reset(topo)
    assert small.place(job, sim.view()) == look.place(job, sim.view())


def test_rollout_horizon_ends_at_the_nth_later_arrival():
    topo = tiny_topology()
    perf = PerformanceModel(topo)
    sim = Simulator(topo, random_jobs(perf, 30, seed=2), perf=perf)
    sim.next_decision()  # now = the first arrival
    later = [j.submit_time for j in sim.jobs if j.submit_time > sim.now]
    assert len(later) == 29
    assert RolloutTeacher(horizon_jobs=3)._horizon_end(sim) == later[2]
    assert RolloutTeacher()._horizon_end(sim) == later[-1]
    assert RolloutTeacher(horizon_jobs=10**6)._horizon_end(sim) == later[-1]
    last = Simulator(topo, random_jobs(perf, 1, seed=2), perf=perf)
    last.next_decision()  # the only job has arrived: nothing later
    assert RolloutTeacher()._horizon_end(last) == last.now


def test_rollout_margin_keeps_the_base_placement_unless_the_gain_is_clear():
    topo, sim, job = _busy_sim()
    view = sim.view()
    free = RolloutTeacher()
    free.reset(topo)
    until = free._horizon_end(sim)
    base = make_policy("interference-aware")
    base.reset(topo)
    default = base.place(job, view)
    scores = {
        placement_key(p): free.rollout(sim, p, until)
        for p in proposals(free.candidates, job, [view])
    }
    best = min(scores.values())
    gain = 1.0 - best / scores[placement_key(default)]
    chosen = free.place(job, view, sim=sim)
    assert gain > 0, "this state should have a proposal better than the base's"
    assert placement_key(chosen) != placement_key(default)
    # a margin above the gain keeps the base's placement, one below it does not
    for margin, want in ((gain * 1.5, default), (gain * 0.5, chosen)):
        teacher = RolloutTeacher(margin=margin)
        teacher.reset(topo)
        assert placement_key(teacher.place(job, view, sim=sim)) == placement_key(want)


def test_rollout_teacher_proposes_with_protect_and_speed_when_asked():
    from agents.teachers import make_teacher
    from marl_sched.policies.heuristics import InterferenceAwarePolicy

    plain = RolloutTeacher()
    both = make_teacher("rollout", 0.03, protect=3.0, speed=1.0)
    extra = both.candidates[len(plain.candidates) :]
    assert [type(c) for c in extra] == [InterferenceAwarePolicy] * 2
    assert [(c.protect, c.speed) for c in extra] == [(3.0, 0.0), (0.0, 1.0)]
    assert both.margin == 0.03


def test_rollout_teacher_rolls_out_and_keeps_its_base_heuristic():
    from agents.teachers import make_teacher
    from marl_sched.policies.heuristics import InterferenceAwarePolicy

    topo, sim, job = _busy_sim(placed=5)  # early: later arrivals for the base to place
    view = sim.view()
    teacher = make_teacher("rollout", 0.99, base="resident-aware")
    teacher.reset(topo)
    assert isinstance(teacher.base, InterferenceAwarePolicy) and teacher.base.protect == 3.0
    until = teacher._horizon_end(sim)
    assert until > sim.now
    by_hand = InterferenceAwarePolicy(protect=3.0)
    by_hand.reset(topo)
    plain = RolloutTeacher()  # base: interference-aware
    plain.reset(topo)
    p = proposals(teacher.candidates, job, [view])[0]
    fork = sim.fork()
    fork.apply(p)
    while (nxt := fork.next_decision()) is not None and fork.now <= until:
        fork.apply(by_hand.place(nxt, fork.view()))
    want = fork.estimated_total_jct(until)
    assert teacher.rollout(sim, p, until) == pytest.approx(want)
    assert plain.rollout(sim, p, until) != pytest.approx(want)  # the base matters here
    # a margin no proposal clears keeps the base's own placement
    assert placement_key(teacher.place(job, view, sim=sim)) == placement_key(
        by_hand.place(job, view)
    )


def test_a_masked_teacher_labels_its_own_placement_on_the_whole_view():
    """A teacher that acts inside the agents' masks (``masked:mlfs-rl``, the action-space
    probe) is asked on the whole view the job arrived on, not per subcluster: its plan
    is its own placement, and the warm start's labels are legal actions that follow it."""
    from agents.algorithm import env_setup
    from agents.config import model_config, train_config
    from agents.teachers import make_teacher, teacher_plan
    from agents.warm_start import teacher_decisions

    cfg = load_config(
        REPO_ROOT / "configs" / "train_tiny.yaml",
        ["train.bc_teacher=masked:mlfs-rl", "train.bc_episodes=2"],
    )
    mc, tc = model_config(cfg), train_config(cfg)
    env_cls, env_config, _ = env_setup(cfg, mc, tc, 0)
    env = env_cls(env_config)
    env.reset(seed=0)
    teacher, probe = make_teacher("masked:mlfs-rl"), make_policy("masked:mlfs-rl")
    for p in (teacher, probe):
        p.reset(env.topology, 0)
    s = env.session
    want = probe.place(s.job, s.view)
    assert want is not None and teacher_plan(teacher, s, sim=env.sim) == want
    obs, actions, _, _ = teacher_decisions(cfg, mc, tc, 0)
    assert len(actions) > 20
    assert all(o["action_mask"][a] == 1.0 for o, a in zip(obs, actions, strict=True))


#: the recipe without the rules (an earlier default) is ``learn.yaml``
#: plus these (today's recipe sees the job's model's speeds and trains on
#: the benchmark's train windows too)
NORULES = ["env.model_speed=false", "train.split_share=0"]
#: the rules recipe (the first default) is that plus these
RULES = [*NORULES, "env.speed_floor=0.9", "env.ps_rule=true", "model.exchange=true"]


@pytest.mark.parametrize(
    ("overrides", "seed", "count", "digest"),
    [
        pytest.param(RULES, 2, 586, "948a3540ad56", id="rules-seed2"),
        pytest.param(NORULES, 0, 604, "81d551e9d1eb", id="norules-seed0"),
        pytest.param([], 0, 576, "1ed8e7f343de", id="default-seed0"),
    ],
)
def test_the_recipes_warm_start_labels_are_pinned(overrides, seed, count, digest):
    """The labels ``configs/learn.yaml``'s warm start imitates (lookahead teacher), first
    3 episodes, pinned by hash, for the recipes that have been the default, each
    recorded with the code that trained its checkpoint (so a refactor that claims "same
    labels" is checked against the labels that made the shipped network): the rules
    recipe (speed floor and PS rule), the recipe without them, and today's default
    (``checkpoints/marl-default``, whose warm start equals that network bit for bit,
    ``test_inference``). A refactor once changed 5 labels of the first through a replay
    that stopped at a decision already made (``follows_forward_rule``)."""
    import hashlib

    from agents.commands import _load_train_config
    from agents.warm_start import teacher_decisions

    cfg, mc, tc = _load_train_config(str(REPO_ROOT / "configs" / "learn.yaml"), overrides)
    _, actions, _, _ = teacher_decisions(cfg, mc, dataclasses.replace(tc, bc_episodes=3), seed)
    assert len(actions) == count
    assert hashlib.sha256(str(actions).encode()).hexdigest()[:12] == digest


def test_the_lookahead_policy_places_the_teachers_plan_inside_the_default_rules_masks():
    """``masked:lookahead``: the recipe's teacher as a policy. Its options are the
    default env's decision options with no hint; every job it places where the
    lookahead teacher plans (:func:`agents.teachers.teacher_plan` on the same session)
    lands exactly on that plan; and the plans are the teacher's, not its nominal
    heuristic's (first-fit's placement differs on some job), so a fallback to the
    parent class's planner would fail here."""
    from agents.teachers import MaskedLookahead, teacher_plan
    from envs.config import env_config
    from envs.rules import home_agent
    from envs.session import PlacementSession
    from marl_sched.policies import control_names, policy_entries

    policy = make_policy("masked:lookahead")
    assert isinstance(policy, MaskedLookahead)
    assert policy_entries()["masked:lookahead"].kind == "teacher"
    assert "masked:lookahead" not in control_names()  # not a pre-registered control
    default = env_config(load_config(REPO_ROOT / "configs" / "default.yaml")).decision_options()
    assert policy.options == {**default, "hints": [], "global_hints": []}
    topo = tiny_topology(subclusters=3, racks=1, servers=2, gpus_per_group=2,
                         gpu_types=("k80", "v100", "p100"))  # fmt: skip
    perf = PerformanceModel(topo)
    jobs = random_jobs(perf, 40, 5, max_workers=4, mean_gap=40.0)
    teacher, first_fit = LookaheadTeacher(), make_policy("first-fit")
    for p in (policy, teacher, first_fit):
        p.reset(topo, 0)
    sim = Simulator(topo, jobs, perf=perf)
    compared = differs = 0
    while (job := sim.next_decision()) is not None:
        view = sim.view()
        got = policy.place(job, view)
        b = policy._builder(view)
        session = PlacementSession(b, job, view, home_agent(job, b.n_agents))
        plan = teacher_plan(teacher, session)
        if got is not None and plan is not None:
            assert placement_key(got) == placement_key(plan), job.name
            compared += 1
            ff = first_fit.place(job, view)
            differs += ff is None or placement_key(ff) != placement_key(plan)
        sim.apply(got)
    assert compared >= 20 and differs >= 1, (compared, differs)
    assert len(sim.records) == len(jobs)  # every job ran to completion


def test_the_harm_criterion_adds_the_residents_slowdown_and_can_change_the_choice():
    """``total_slowdown`` is the job's workers at their predicted slowdown plus the
    size-weighted slowdown each of its tasks adds where it lands (checked by hand);
    ``LookaheadTeacher(harm=True)`` takes the proposal with the least of it, and over a
    busy window that choice differs from the plain teacher's on some job (else the
    criterion would be a no-op)."""
    from agents.teachers import total_slowdown
    from marl_sched.catalogue import CATALOGUE
    from marl_sched.simulator import harm_to_residents

    topo, sim, job = _busy_sim()
    view = sim.view()
    plain, harm = LookaheadTeacher(), LookaheadTeacher(harm=True)
    for t in (plain, harm):
        t.reset(topo)
    found = proposals(harm.candidates, job, [view])
    spec = CATALOGUE[job.model]
    iso = view.perf.isolated_iteration_time(job.model, job.num_workers, job.num_ps)
    hw = harm_to_residents(view, spec.pressure)
    hp = harm_to_residents(view, spec.pressure, ps=True)
    for p in found:
        want = job.num_workers * predicted_iteration_time(job, view, p) / iso
        want += sum(hw[g] for g in p.worker_groups) + sum(hp[g] for g in p.ps_groups)
        assert total_slowdown(job, view, p) == pytest.approx(want)
    chosen = harm.place(job, view)
    assert total_slowdown(job, view, chosen) == pytest.approx(
        min(total_slowdown(job, view, p) for p in found)
    )
    # over a busy window, the two criteria part somewhere
    topo = tiny_topology()
    perf = PerformanceModel(topo)
    sim = Simulator(topo, random_jobs(perf, 80, seed=3, mean_gap=30.0), perf=perf)
    for t in (plain, harm):
        t.reset(topo)
    differ = 0
    while (job := sim.next_decision()) is not None:
        a, b = plain.place(job, sim.view()), harm.place(job, sim.view())
        differ += (a is None) != (b is None) or (
            a is not None and placement_key(a) != placement_key(b)
        )
        sim.apply(a)
    assert differ >= 1


def test_the_harm_lookahead_policy_is_the_lookahead_policy_with_the_harm_teacher():
    from agents.teachers import MaskedLookahead
    from marl_sched.policies import policy_entries

    plain, harm = make_policy("masked:lookahead"), make_policy("masked:lookahead-harm")
    assert isinstance(harm, MaskedLookahead) and harm.options == plain.options
    assert harm.planner.harm is True and plain.planner.harm is False
    assert policy_entries()["masked:lookahead-harm"].kind == "teacher"


def test_the_oracle_on_the_masked_reference_is_the_reference_where_it_plans_nothing():
    """``planner.base=masked:lookahead``: with ``min_run_s`` above every job the oracle's
    run is ``masked:lookahead``'s own; planning every job changes decisions."""
    from marl_sched.policies.planner import PlannerPolicy
    from marl_sched.runner import build_cluster, load_workload, simulate

    cfg = load_config(REPO_ROOT / "configs" / "tiny.yaml", ["workload.max_jobs=14"])
    topo, perf = build_cluster(cfg)
    wl = load_workload(cfg, perf)

    def run(policy):
        m, _, _ = simulate(cfg, "x", wl, topo, perf, policy=policy)
        return m["avg_jct_s"], m["jobs_completed"]

    ref = run(make_policy("masked:lookahead"))
    short = PlannerPolicy(k=1, horizon_s=600.0, base="masked:lookahead", future="true",
                          min_run_s=1e12)  # fmt: skip
    assert run(short) == ref and short.planned == 0
    every = PlannerPolicy(k=1, horizon_s=600.0, base="masked:lookahead", future="true")
    run(every)
    assert every.planned > 0 and every.base.name == "masked:lookahead"


def test_the_planner_labels_through_the_envs_simulator():
    """``train.bc_teacher=planner``: the planner is handed the env's simulator and its
    whole-view placement is the plan (a DAgger teacher that plays candidates out)."""
    from agents.config import model_config, train_config
    from agents.teachers import make_teacher, teacher_plan
    from agents.training import env_setup

    over = ["planner.horizon_s=300", "planner.base=masked:lookahead", "planner.k=1"]
    cfg = load_config(REPO_ROOT / "configs" / "train_tiny.yaml", over)
    mc, tc = model_config(cfg), train_config(cfg)
    env_cls, env_config, _ = env_setup(cfg, mc, tc, 0)
    env = env_cls(env_config)
    env.reset(seed=0)
    teacher = make_teacher("planner", config=cfg)
    assert (teacher.k, teacher.horizon_s, teacher.base.name) == (1, 300.0, "masked:lookahead")
    teacher.reset(env.topology, 0)
    s = env.session
    plan = teacher_plan(teacher, s, sim=env.sim)
    assert teacher.decisions and teacher.decisions[-1][1] == s.job.job_id
    assert plan == teacher.decisions[-1][2]
    with pytest.raises(ValueError, match="needs the simulator"):
        teacher_plan(make_teacher("planner"), s, sim=None)
    from agents.warm_start import teacher_decisions

    cfg = load_config(REPO_ROOT / "configs" / "train_tiny.yaml",
                      [*over, "train.bc_teacher=planner", "train.bc_episodes=1"])  # fmt: skip
    obs, actions, _, _ = teacher_decisions(cfg, mc, train_config(cfg), 0)
    assert len(actions) > 5
    assert all(o["action_mask"][a] == 1.0 for o, a in zip(obs, actions, strict=True))


@pytest.mark.parametrize("where", ["agent", "rule"])
def test_the_upgrade_move_teacher_labels_the_rules_paying_moves_only(where):
    """``train.bc_move: upgrade`` on the remaining offer: a move is labelled exactly
    when the upgrade rule's option pays (the offer's ``gain`` > 0) and the masks can
    make it, to the rule's own placement; every other offer is kept. With
    ``env.migration_where: rule`` the label is only whether: the offered option, by
    the one action that takes it, exactly when it pays."""
    import envs
    from agents.teachers import make_teacher, teacher_move
    from envs.session import plan_action
    from marl_sched.policies.levers import UpgradePolicy, remaining_iterations
    from tests.envs.helpers import TINY, masked_random_action

    env = envs.make_env(TINY, env={"migration": True, "migration_offer": "remaining",
                                   "migration_where": where})  # fmt: skip
    teacher, rule = make_teacher("lookahead"), UpgradePolicy()
    teacher.reset(env.topology, 0)
    rule.reset(env.topology, 0)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    labels = []
    while env.acting_agent is not None:
        agent, s = env.acting_agent, env.session
        if s.moving is not None and s.task == 0:
            view = env.sim.view()
            p = teacher_move(teacher, s, view, rule)
            if s.gain <= 0:
                assert p is None
            elif where == "rule":
                assert p == s.plan
                assert plan_action(s, p) == s.move_action()
                assert obs[agent]["action_mask"][s.move_action()] == 1.0
            else:
                left = remaining_iterations(s.job, s.moving)
                best, saved = rule.best_option(view, s.moving, s.job, left)
                assert saved > 0 and (p is None or p == best)
            labels.append(p is not None)
        obs, _, term, *_ = env.step({agent: masked_random_action(obs[agent], rng)})
        if term["__all__"]:
            break
    assert any(labels) and not all(labels)
