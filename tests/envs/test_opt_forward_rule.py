"""Forward when you must: the agents' decision process (``PlacementSession``) and the
env ``ClusterPlacement-v0`` apply the same cooperation rule."""

from __future__ import annotations

import numpy as np

from envs.config import EnvConfig
from envs.observations import ObservationBuilder
from envs.rules import forward_targets, scope_view, scopes_can_host_rest
from envs.session import PlacementSession, follows_forward_rule, placement_steps
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.jobs import Job, Placement
from marl_sched.runner import build_cluster
from marl_sched.simulator import Simulator

TINY = str(REPO_ROOT / "configs" / "tiny.yaml")


def _session(job: Job, home: int = 0):
    cfg = load_config(TINY)
    topo, perf = build_cluster(cfg)
    builder = ObservationBuilder(topo, perf)
    sim = Simulator(topo, [job], perf=perf)
    return builder, PlacementSession(builder, job, sim.view(), home)


def _job(workers: int, ps: int) -> Job:
    return Job(0, "j0", "cifar10", workers, ps, 100.0, 0.0, 10.0)


def test_forward_targets_rule():
    yes, no = np.array([1, 1, 1], bool), np.array([0, 0, 0], bool)
    allowed = np.ones(3, bool)
    # cannot host the task: to those that can
    np.testing.assert_array_equal(forward_targets(np.array([0, 1, 0]), no, 0, allowed), [0, 1, 0])
    # can host the task and the rest: nowhere (unless the job is still whole)
    np.testing.assert_array_equal(forward_targets(yes, yes, 0, allowed), [0, 0, 0])
    np.testing.assert_array_equal(forward_targets(yes, yes, 0, allowed, whole=True), [0, 1, 1])
    # can host the task, not the rest: to those that can host the rest
    rest = np.array([0, 0, 1], bool)
    np.testing.assert_array_equal(forward_targets(yes, rest, 0, allowed), [0, 0, 1])
    # nobody can host the rest: place it here
    np.testing.assert_array_equal(forward_targets(yes, no, 0, allowed), [0, 0, 0])
    # visited agents are never targets
    np.testing.assert_array_equal(
        forward_targets(np.array([0, 1, 1]), no, 0, np.array([1, 0, 1], bool)), [0, 0, 1]
    )


def test_session_moves_jobs_whole_and_splits_only_when_it_must():
    builder, s = _session(_job(2, 1))
    g = builder.pad[0]
    mask = s.action_mask(0)
    assert mask[:g].any() and mask[g + 1] == 1  # whole job: place here or move it
    s.act(int(np.flatnonzero(mask[:g])[0]))
    assert not s.action_mask(0)[g:].any()  # part placed, home holds the rest: no forward


def test_teacher_views_and_legality():
    builder, s = _session(_job(2, 1))
    view = scope_view(builder, s.view, 1)
    assert np.all(np.asarray(view.group_free)[builder.group_scope != 1] == 0)
    home_groups = builder.scopes[0].groups
    other = builder.scopes[1].groups
    whole_elsewhere = Placement((int(other[0]), int(other[0])), (int(other[0]),))
    split = Placement((int(home_groups[0]), int(other[0])), (int(home_groups[0]),))
    assert follows_forward_rule(builder, s.job, s.view, 0, whole_elsewhere)
    assert not follows_forward_rule(builder, s.job, s.view, 0, split)


def _hinted(hints: tuple[str, ...]):
    """A job of four workers and a PS on the tiny cluster, with ``hints``."""
    cfg = load_config(TINY)
    topo, perf = build_cluster(cfg)
    builder = ObservationBuilder(topo, perf, EnvConfig(hints=hints))
    job = _job(4, 1)
    return builder, job, Simulator(topo, [job], perf=perf).view()


def test_a_check_only_session_asks_no_hint_and_masks_places_alike(monkeypatch):
    builder, job, view = _hinted(("first-fit", "locality"))
    full = PlacementSession(builder, job, view, 0)
    while not full.done:  # a placement the masks make, following the first hint
        mask = full.action_mask(full.agent)
        follow = builder.pad[0] + builder.n_agents
        full.act(follow if mask[follow] else int(np.flatnonzero(mask)[0]))
    placement = full.placement()
    # step by step, against a session that asks the real hints
    check = PlacementSession(builder, job, view, 0, follows=False)
    shown = PlacementSession(builder, job, view, 0)
    n = builder.pad[0] + builder.n_agents  # local and forward columns
    for action in placement_steps(builder, 0, placement):
        m_check, m_shown = check.action_mask(check.agent), shown.action_mask(shown.agent)
        np.testing.assert_array_equal(m_check[:n], m_shown[:n])
        assert not m_check[n:].any()
        check.act(action)
        shown.act(action)
    assert check.done
    asked = []
    for h in builder.scoped_hint_policies:
        monkeypatch.setattr(h, "place", lambda *a, **k: asked.append(a) or None)
    assert follows_forward_rule(builder, job, view, 0, placement)
    assert not asked  # the check asked no hint


def test_a_check_only_session_still_asks_a_hint_that_draws_random_numbers():
    builder, job, view = _hinted(("random", "first-fit"))
    rng = next(h for h in builder.scoped_hint_policies if hasattr(h, "rng"))
    rng.reset(builder.topology, 0)
    state = rng.rng.bit_generator.state
    check = PlacementSession(builder, job, view, 0, follows=False)
    check.action_mask(check.agent)
    assert rng.rng.bit_generator.state != state  # its generator advanced as it would


def _host_rest_one_scope_at_a_time(t, group_start, gfree, cpu, mem, demands, workers, ps):
    """Reference for ``scopes_can_host_rest``: the greedy check scope by scope."""
    cw, cp, m = demands

    def slots(x, d):
        return np.full(x.shape, np.inf) if d <= 0 else np.floor(np.maximum(x + 1e-9, 0) / d)

    srv_free = np.add.reduceat(np.maximum(gfree, 0), t.server_groups_start)
    w_slots = np.minimum(srv_free, np.minimum(slots(cpu, cw), slots(mem, m)))
    bounds = np.searchsorted(t.server_groups_start, [*group_start, t.n_groups])
    out = []
    for s0, s1 in zip(bounds[:-1], bounds[1:], strict=True):
        ws = w_slots[s0:s1]
        order = np.argsort(-ws, kind="stable")
        x = np.zeros(s1 - s0)
        x[order] = np.clip(workers - (np.cumsum(ws[order]) - ws[order]), 0.0, ws[order])
        ps_slots = np.minimum(slots(cpu[s0:s1] - x * cw, cp), slots(mem[s0:s1] - x * m, m))
        out.append(ws.sum() >= workers and ps_slots.sum() >= ps)
    return np.array(out)


def test_scopes_can_host_rest_matches_the_scope_by_scope_greedy_check():
    topo, _ = build_cluster(load_config(REPO_ROOT / "configs" / "default.yaml"))
    starts = np.searchsorted(topo.group_subcluster, np.arange(topo.n_subclusters))
    rng = np.random.default_rng(0)
    answers = []
    for _ in range(200):  # few distinct values: many ties in the worker slots
        gfree = rng.integers(0, 3, topo.n_groups).astype(float)
        cpu = rng.choice([0.0, 2.0, 4.0, 8.0, 16.5], topo.n_servers)
        mem = rng.choice([0.0, 10.0, 64.0, 256.0], topo.n_servers)
        demands = tuple(float(rng.choice(v)) for v in ([0, 1, 4], [0, 1, 2], [0, 8, 30]))
        left = int(rng.integers(0, 40)), int(rng.integers(0, 6))  # workers, parameter servers
        args = (topo, starts, gfree, cpu, mem, demands, *left)
        got = scopes_can_host_rest(*args)
        np.testing.assert_array_equal(got, _host_rest_one_scope_at_a_time(*args))
        answers.extend(got)
    assert 0 < sum(answers) < len(answers)


def test_consolidate_sends_a_job_to_a_scope_with_one_server_for_all_its_workers():
    """``consolidate``: a job whose workers fit on one server of agent 1 but on no
    server of its home agent 0 can only be forwarded to agent 1 at its first task; it
    goes unconstrained where home has such a server, or where no scope has one."""
    cfg = load_config(TINY)
    topo, perf = build_cluster(cfg)
    job = Job(0, "j0", "cifar10", 4, 1, 100.0, 0.0, 10.0)
    sim = Simulator(topo, [job], perf=perf)
    view = sim.view()
    free = np.asarray(view.group_free).copy()
    home = topo.subcluster_groups(0)
    free[home] = 0
    free[topo.server_groups_start[np.unique(topo.group_server[home])]] = 1  # 1 GPU/server
    import dataclasses

    busy = dataclasses.replace(view, group_free=free)
    g = None
    for consolidate in (False, True):
        builder = ObservationBuilder(topo, perf, EnvConfig(consolidate=consolidate))
        g = builder.pad[0]
        s = PlacementSession(builder, job, busy, home=0)
        mask = s.action_mask(0)
        np.testing.assert_array_equal(s.one_server_scopes(), [False, True])
        assert mask[g + 1] == 1  # moving the job whole is always legal here
        assert bool(mask[:g].any()) is not consolidate  # splitting it at home is not
    # after a move to agent 1, agent 1 places it itself
    s.act(g + 1)
    assert s.action_mask(1)[:g].any()
    # with a server free at home, home may place the job itself
    s = PlacementSession(builder, job, view, home=0)
    assert s.action_mask(0)[:g].any()
    assert s.one_server_scopes().all()
