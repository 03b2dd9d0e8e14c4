"""Heuristic hints: the heuristics' plans inside the acting agent's scope, as features."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.gnn import MASKED_LOGIT, build_gnn, from_padded
from agents.policy import MarlPolicy, agents_from_weights
from envs.config import EnvConfig
from envs.hints import follow_action
from envs.observations import FEATURES, ObservationBuilder, feature_dims
from envs.rules import placement_key, scope_view
from envs.session import PlacementSession
from marl_sched.config import REPO_ROOT, load_config, parse_section
from marl_sched.errors import InputError
from marl_sched.jobs import Job, Placement
from marl_sched.policies import make_policy
from marl_sched.runner import build_cluster
from tests.helpers import partly_occupied, untrained_checkpoint

TINY = str(REPO_ROOT / "configs" / "tiny.yaml")
HINTS = ("interference-aware", "first-fit", "load-balance")


def _busy(hints=HINTS):
    """A builder with ``hints`` and a simulator whose cluster is partly occupied."""
    topo, perf, sim = partly_occupied(TINY)
    return ObservationBuilder(topo, perf, EnvConfig(hints=hints)), sim


def _roomiest(builder, sim) -> int:
    """The agent whose scope has the most free GPUs (a scope with room for the probe)."""
    free = np.add.reduceat(np.asarray(sim.view().group_free), builder.scope_group_start)
    assert free.min() < free.max(), "the busy cluster should be unevenly occupied"
    return int(np.argmax(free))


def _job(workers: int, ps: int) -> Job:
    return Job(999, "probe", "resnet-50", workers, ps, 100.0, 0.0, 10.0)


def _follow(builder, i):
    return builder.pad[0] + builder.n_agents + i


def _probe(k: int, workers: int):
    """A session for a probe job at the roomiest agent, and hint ``k``'s plan for it."""
    builder, sim = _busy()
    job, view = _job(workers, 2), sim.view()
    a = _roomiest(builder, sim)
    session = PlacementSession(builder, job, view, home=a)
    h = make_policy(HINTS[k])
    h.reset(builder.topology, 0)
    plan = h.place(job, scope_view(builder, view, a))
    assert plan is not None
    return builder, session, a, plan


def test_hint_columns_extend_the_layout():
    builder, _ = _busy()
    dims = feature_dims(builder.observation_space)
    assert dims["Fg"] == len(FEATURES["group_x"]) + len(HINTS)
    assert dims["Fj"] == len(FEATURES["job_x"]) + len(HINTS)
    assert builder.features["group_x"][-len(HINTS) :] == tuple(f"hint_{h}" for h in HINTS)
    plain = ObservationBuilder(builder.topology, builder.perf)
    assert feature_dims(plain.observation_space)["Fg"] == len(FEATURES["group_x"])


def test_peers_say_which_scopes_take_the_remaining_workers_on_one_server():
    builder, sim = _busy()
    assert builder.features["peers_x"][-1] == "rest_on_one_server"
    view = sim.view()
    server_free = np.bincount(
        builder.topology.group_server, weights=view.group_free, minlength=builder.topology.n_servers
    )
    best = np.maximum.reduceat(server_free, builder.scope_server_start)
    workers = int(np.median(best)) + 1  # fits on one server of some scopes, not of others
    session = PlacementSession(builder, _job(workers, 1), view, home=0)
    col = builder.observe(session, 0)["peers_x"][:, -1]
    np.testing.assert_array_equal(col, (best >= workers).astype(np.float32))
    assert 0 < col.sum() < builder.n_agents
    session.act(int(np.flatnonzero(builder.observe(session, 0)["action_mask"])[0]))
    col = builder.observe(session, session.agent)["peers_x"][:, -1]
    assert col.sum() >= (best >= workers).sum()  # one worker fewer to fit


def test_global_hints_say_where_the_heuristic_would_send_the_job():
    builder, sim = _busy()
    glob = ObservationBuilder(
        builder.topology, builder.perf, EnvConfig(global_hints=("first-fit",))
    )
    assert glob.features["peers_x"] == FEATURES["peers_x"] + ("global_first-fit",)
    view = sim.view()
    job = _job(3, 1)
    ff = make_policy("first-fit")
    ff.reset(builder.topology, 0)
    plan = ff.place(job, view)
    groups = [*plan.worker_groups, *plan.ps_groups]
    want = np.bincount(glob.group_scope[groups], minlength=glob.n_agents) / len(groups)
    for home in range(glob.n_agents):  # the same column whoever acts, and for every task
        session = PlacementSession(glob, job, view, home=home)
        obs = glob.observe(session, home)
        np.testing.assert_allclose(obs["peers_x"][:, -1], want, atol=1e-6)
    assert want.max() > 0 and want.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="global_hints: nope is not a heuristic"):
        ObservationBuilder(builder.topology, builder.perf, EnvConfig(global_hints=("nope",)))


def test_hint_column_is_the_heuristics_plan_in_the_scope():
    builder, sim = _busy()
    job, view = _job(3, 1), sim.view()
    full = int(np.argmin(np.add.reduceat(np.asarray(view.group_free), builder.scope_group_start)))
    session = PlacementSession(builder, job, view, home=full)
    obs = builder.observe(session, full)
    nf = len(FEATURES["group_x"])
    if make_policy("first-fit").place(job, scope_view(builder, view, full)) is None:
        assert not obs["group_x"][:, nf:].any() and not obs["job_x"][-len(HINTS) :].any()
    a = _roomiest(builder, sim)
    obs = builder.observe(session, a)
    groups = builder.scopes[a].groups
    for i, name in enumerate(HINTS):
        h = make_policy(name)
        h.reset(builder.topology, 0)
        plan = h.place(job, scope_view(builder, view, a))
        assert plan is not None
        col = obs["group_x"][: len(groups), nf + i]
        want = np.bincount(np.searchsorted(groups, plan.worker_groups), minlength=len(groups))
        np.testing.assert_allclose(col, want / job.num_workers, atol=1e-6)
        assert obs["job_x"][-len(HINTS) + i] == 1.0


@pytest.mark.parametrize("via", ["column", "follow"])
@pytest.mark.parametrize("k", range(len(HINTS)))
def test_following_a_hint_reproduces_the_heuristic(k, via):
    """Either by the arg-max of the hint's column (the features carry the plan) or by
    its follow action, every task of the job goes where the heuristic put it."""
    builder, session, a, plan = _probe(k, workers=3 if via == "column" else 4)
    assert builder.action_space.n == builder.pad[0] + builder.n_agents + len(HINTS)
    nf, nj = len(FEATURES["group_x"]), len(FEATURES["job_x"])
    while not session.done:
        obs = builder.observe(session, a)
        assert obs["job_x"][nj + k] == 1.0  # the job agrees with the plan so far
        assert obs["action_mask"][_follow(builder, k)] == 1.0
        if via == "column":
            col = obs["group_x"][:, nf + k] * (obs["action_mask"][: builder.pad[0]] > 0)
            session.act(int(np.argmax(col)))
        else:
            session.act(_follow(builder, k))
    assert placement_key(session.placement()) == placement_key(plan)


def test_departing_from_a_plan_clears_its_agreement_and_masks_its_follow():
    builder, sim = _busy(("first-fit",))
    a = _roomiest(builder, sim)
    session = PlacementSession(builder, _job(2, 1), sim.view(), home=a)
    obs = builder.observe(session, a)
    nf = len(FEATURES["group_x"])
    assert obs["job_x"][-1] == 1.0
    allowed = obs["action_mask"][: builder.pad[0]] > 0
    off_plan = np.flatnonzero((obs["group_x"][:, nf] == 0) & allowed)
    session.act(int(off_plan[0]))
    obs = builder.observe(session, a)
    assert obs["job_x"][-1] == 0.0
    assert obs["action_mask"][_follow(builder, 0)] == 0.0
    with pytest.raises(ValueError, match="masked"):
        session.act(_follow(builder, 0))


@pytest.mark.parametrize("key", ["hints", "global_hints"])
def test_unknown_hints_are_refused(key):
    topo, perf = build_cluster(load_config(TINY))
    with pytest.raises(ValueError, match="not a heuristic"):
        ObservationBuilder(topo, perf, EnvConfig(**{key: ("marl",)}))
    with pytest.raises(InputError, match=rf"env\.{key}: 'nope' is not a heuristic"):
        parse_section(EnvConfig, {key: ["nope"]}, "x.yaml", "env")
    with pytest.raises(InputError, match=rf"env\.{key}: repeats a name"):
        parse_section(EnvConfig, {key: ["tetris", "tetris"]}, "x.yaml", "env")


def test_policy_serves_a_checkpoint_with_hints_and_refuses_other_names():
    builder, sim = _busy()
    builder = ObservationBuilder(
        builder.topology, builder.perf, EnvConfig(hints=HINTS, consolidate=True)
    )
    manifest, weights = untrained_checkpoint(builder, {"hidden": 8, "layers": 1})
    policy = MarlPolicy(agents=agents_from_weights(manifest, weights))
    policy.reset(builder.topology)
    job = sim.next_decision()
    p = policy.place(job, sim.view())
    assert p is not None and len(p.worker_groups) == job.num_workers
    assert policy.builder.hints == HINTS and policy.builder.consolidate  # as trained
    # same dims, other heuristics: refused by name
    env = manifest["env"]
    names = ["tetris", "locality", "first-fit"]
    renamed = dict(manifest, env={**env, "options": {**env["options"], "hints": names}})
    other = MarlPolicy(agents=agents_from_weights(renamed, weights))
    other.reset(builder.topology)
    with pytest.raises(InputError, match="feature names differ"):
        other.place(job, sim.view())


def test_checkpoint_pointer_files_resolve(tmp_path):
    from agents.policy import MANIFEST, resolve_checkpoint

    for name in ("iter_000000", "iter_000003"):
        (tmp_path / name).mkdir()
        (tmp_path / name / MANIFEST).write_text("{}")
    (tmp_path / "best").write_text("iter_000000\n")
    (tmp_path / "latest").write_text("iter_000003\n")
    assert resolve_checkpoint(tmp_path / "best") == tmp_path / "iter_000000"
    assert resolve_checkpoint(tmp_path / "latest") == tmp_path / "iter_000003"
    assert resolve_checkpoint(tmp_path) == tmp_path / "iter_000000"  # a run folder: its best
    (tmp_path / "junk.pt").write_bytes(b"\x80\x02junk")
    with pytest.raises(InputError, match="not a checkpoint"):
        resolve_checkpoint(tmp_path / "junk.pt")


# ------------------------------------------------------------------ follow actions


def test_follow_action_labels_the_teachers_plan():
    builder, sim = _busy()
    a = _roomiest(builder, sim)
    job, view = _job(3, 1), sim.view()
    session = PlacementSession(builder, job, view, home=a)
    plans = session.plans(a)
    assert follow_action(session, plans[1]) == _follow(builder, _first_equal(plans, 1))
    other = Placement(plans[1].worker_groups[:-1] + (-1,), plans[1].ps_groups)
    assert follow_action(session, other) is None


def _first_equal(plans, i):
    return next(j for j, p in enumerate(plans) if placement_key(p) == placement_key(plans[i]))


def test_gnn_scores_follow_actions():
    builder, sim = _busy()
    a = _roomiest(builder, sim)
    obs = []
    for workers in (1, 2, 4):
        session = PlacementSession(builder, _job(workers, 1), sim.view(), home=a)
        obs.append(builder.observe(session, a))
    session.act(_follow(builder, 0))  # one more: the 4-worker job after one follow step
    obs.append(builder.observe(session, a))
    torch.manual_seed(0)
    dims = feature_dims(builder.observation_space)
    assert dims["H"] == len(HINTS)
    net = build_gnn(dims, {"hidden": 16, "layers": 1}).eval()
    torch.nn.init.normal_(net.hint_head[-1].weight, std=0.5)
    padded = {k: torch.as_tensor(np.stack([o[k] for o in obs])) for k in obs[0]}
    logits, _ = net.forward_padded(padded)
    assert logits.shape == (len(obs), builder.action_space.n)
    follow = logits[:, -len(HINTS) :]
    masked = padded["action_mask"][:, -len(HINTS) :] < 0.5
    assert (follow[masked] <= MASKED_LOGIT / 2).all() and (follow[~masked] > -100).all()
    # hints that plan differently score differently
    assert follow[~masked].unique().numel() > 1
    _, other_scores, _ = net(from_padded(padded)[0])
    torch.testing.assert_close(other_scores, logits[:, builder.pad[0] :], atol=1e-5, rtol=1e-5)
