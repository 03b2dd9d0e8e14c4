"""Checkpoints and the migration decision: a v1 checkpoint (trained without it) is
refused by ``env.migration: on``, naming the key, before any work; a v2 checkpoint
records the migration options and acts in ClusterPlacement-v2."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from agents import load_agents
from agents.gnn import build_gnn
from agents.policy import MarlPolicy, greedy_action, manifest_for, save_modules
from envs import make_env
from envs.config import ENV_ID, env_config
from envs.observations import ObservationBuilder, feature_dims
from envs.rules import placement_key
from marl_sched.cli import main
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.errors import InputError
from marl_sched.runner import build_cluster, has_migration_rule, load_workload, simulate
from marl_sched.simulator import Simulator

DEFAULT = str(REPO_ROOT / "configs" / "default.yaml")
SHIPPED = REPO_ROOT / "checkpoints" / "marl-default"
TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")
MODEL = {"hidden": 16, "layers": 1, "exchange": True, "share_parameters": True}
ON = {"migration": True, "migration_tick_s": 600.0}


def _with_env(path: str, **env):
    cfg = load_config(path)
    return dataclasses.replace(cfg, env={**(cfg.env or {}), **env})


def _v2_checkpoint(folder: Path, cfg=None, seed: int = 0) -> Path:
    cfg = cfg or _with_env(TINY, **ON)
    topo, perf = build_cluster(cfg)
    builder = ObservationBuilder(topo, perf, env_config(cfg))
    dims = feature_dims(builder.observation_space)
    torch.manual_seed(seed)
    net = build_gnn(dims, MODEL)
    weights = {"shared": {f"gnn.{k}": v for k, v in net.state_dict().items()}}
    manifest = manifest_for(builder, MODEL, ["shared"], extra={"config": cfg.to_dict()})
    save_modules(folder, weights, manifest)
    return folder


def test_a_v1_checkpoint_refuses_env_migration_on_naming_the_key():
    agents = load_agents(SHIPPED)
    assert agents.manifest["env"]["id"] == ENV_ID
    assert agents.env_options()["migration"] is False  # v1 records none: trained without
    agents.check_env(env_config(load_config(DEFAULT)))
    with pytest.raises(InputError, match=r"env\.migration: is on but checkpoint .* without"):
        agents.check_env(env_config(_with_env(DEFAULT, migration=True)), "env")
    # the cadence is not compared while migration is off
    agents.check_env(env_config(_with_env(DEFAULT, migration_tick_s=60.0)))


def test_evaluate_with_env_migration_on_and_a_v1_checkpoint_exits_2_before_any_work(
    tmp_path, capsys
):
    out = tmp_path / "ev"
    rc = main(
        ["evaluate", "--checkpoint", str(SHIPPED), "--config", DEFAULT, "env.migration=on",
         "--max-jobs", "5", "--quiet", "--out", str(out)]
    )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "env.migration" in err[0], err
    assert not out.exists()


def test_a_v2_checkpoint_records_migration_and_acts_in_v2(tmp_path):
    ckpt = _v2_checkpoint(tmp_path / "ckpt")
    manifest = json.loads((ckpt / "manifest.json").read_text())
    assert manifest["env"]["id"] == "marl_sched/ClusterPlacement-v2"
    assert manifest["env"]["version"] == 2
    assert manifest["env"]["options"]["migration"] is True
    assert manifest["env"]["options"]["migration_tick_s"] == 600.0
    agents = load_agents(ckpt)
    with pytest.raises(InputError, match=r"env\.migration: is off but checkpoint .* with"):
        agents.check_env(env_config(load_config(TINY)))
    with pytest.raises(InputError, match=r"env\.migration_tick_s: is 0\.0"):
        agents.check_env(env_config(_with_env(TINY, migration=True)))
    cfg = _with_env(TINY, **ON)
    agents.check_env(env_config(cfg))
    env = make_env(cfg)
    obs, _ = env.reset(seed=0)
    moves = kept = 0
    while True:
        agent = env.acting_agent
        s = env.session
        a = greedy_action(agents.net_for(0), obs[agent])
        assert obs[agent]["action_mask"][a] == 1
        if s.moving is not None and s.task == 0:
            moves += 1
            kept += a == env.builder.pad[0] + env.index[agent]
        obs, _, term, *_ = env.step({agent: a})
        if term["__all__"]:
            break
    assert moves > 0
    # a v2 manifest that says migration off is not one
    bad = {**manifest, "env": {**manifest["env"], "options": {
        **manifest["env"]["options"], "migration": False}}}  # fmt: skip
    (ckpt / "manifest.json").write_text(json.dumps(bad))
    with pytest.raises(InputError, match=r"env\.options\.migration"):
        load_agents(ckpt)


def test_a_v2_checkpoint_places_jobs_in_simulate(tmp_path):
    ckpt = _v2_checkpoint(tmp_path / "ckpt")
    cfg = load_config(TINY)
    topo, perf = build_cluster(cfg)
    workload = load_workload(cfg, perf)
    policy = MarlPolicy(checkpoint=ckpt)
    policy.reset(topo, 0)
    policy.check_cluster(topo, perf)
    assert policy.builder.migration
    metrics, records, _ = simulate(cfg, "marl", workload, topo, perf, policy=policy)
    assert metrics["jobs_completed"] == len(workload.jobs) == len(records)
    assert np.isfinite(metrics["avg_jct_s"])


def test_the_warm_start_teacher_moves_as_load_control_decides(monkeypatch):
    """Offered a move, the teacher asks MLFS's load-control rule (the ``+lc`` rows'
    :func:`plan_moves`) whether this job moves, with its own placement for where:
    every offered job moves exactly when ``plan_moves`` (the offered job its only
    candidate) moves it, and to that placement; keep is labelled otherwise."""
    from agents.commands import _load_train_config
    from agents.teachers import make_teacher, teacher_plan
    from agents.warm_start import teacher_decisions
    from envs.session import MoveBook, PlacementSession
    from marl_sched.policies import load_control as lc

    cfg, mc, tc = _load_train_config(TINY, ["env.migration=on", "train.bc_episodes=1"])
    teacher = make_teacher(tc.bc_teacher, tc.bc_margin, tc.bc_protect, tc.bc_speed, tc.bc_base)
    expected: dict[tuple[float, int], tuple | None] = {}
    real_session, real_migrate = MoveBook.session, Simulator.migrate

    def offered(book, view, info, job, agent, group_free):
        teacher.reset(view.topology, 0)
        others = tuple(  # the offered job is the rule's only candidate
            i if i.job_id == info.job_id else dataclasses.replace(i, next_move_at=math.inf)
            for i in view.running()
        )
        only = dataclasses.replace(view, running_fn=lambda: others)

        def relocate(i, over):
            trial = PlacementSession(book.builder, job, lc.released_view(view, i, over), agent)
            return teacher_plan(teacher, trial) if trial.feasible() else None

        moves = lc.plan_moves(only, relocate, max_tries=len(others))
        expected[(view.now, info.job_id)] = placement_key(moves[0][1]) if moves else None
        return real_session(book, view, info, job, agent, group_free)

    made: dict[tuple[float, int], tuple] = {}

    def migrate(sim, job_id, placement):
        made[(sim.now, job_id)] = placement_key(placement)
        return real_migrate(sim, job_id, placement)

    monkeypatch.setattr(MoveBook, "session", offered)
    monkeypatch.setattr(Simulator, "migrate", migrate)
    obs, actions, _, _ = teacher_decisions(cfg, mc, tc, 0)
    assert set(made) <= set(expected)
    assert {k: made.get(k) for k in expected} == expected
    moved = sum(v is not None for v in expected.values())
    assert 0 < moved < len(expected), (moved, len(expected))
    # the labels: keep (the acting agent's own forward slot) on every offer the rule
    # declines, a placement's first action on every other
    env = make_env(cfg)
    f, g, a = env.builder.features, env.builder.pad[0], env.builder.n_agents
    is_move, done = f["job_x"].index("is_move"), f["job_x"].index("tasks_done_frac")
    first = [act for o, act in zip(obs, actions, strict=True)
             if o["job_x"][is_move] and o["job_x"][done] == 0]  # fmt: skip
    keeps = [
        act for o, act in zip(obs, actions, strict=True)
        if o["job_x"][is_move] and g <= act < g + a
        and o["peers_x"][act - g, f["peers_x"].index("is_self")] == 1
    ]  # fmt: skip
    assert len(first) == len(expected) and len(keeps) == len(expected) - moved


#: the simulator's and the env's cadence set alike: (env options, simulation options)
CADENCES = {
    "defaults": ({}, {}),  # one move per job, no minimum interval (the full track's)
    "two-moves-500s": (
        {"migration_max_moves": 2, "migration_min_interval_s": 500.0},
        {"max_migrations_per_job": 2, "min_migration_interval_s": 500.0},
    ),
    # the upgrade rule's candidate anywhere, by the estimates each side knows
    "remaining-offer": ({"migration_offer": "remaining"}, {}),
    # the same, the move going to the rule's option (the agent decides only whether)
    "rule-option": ({"migration_offer": "remaining", "migration_where": "rule"}, {}),
}


def _env_and_simulate(ckpt: Path, cfg, monkeypatch) -> tuple[list, dict, list, dict]:
    """The same checkpoint through ClusterPlacement-v2 (greedy) and behind
    ``simulate`` with ``simulation.migration: on``: every ``Simulator.migrate`` call
    (time, job, placement, accepted) and every job's finish time, of each."""
    calls: list[tuple] = []
    real = Simulator.migrate

    def recorded(sim, job_id, placement):
        out = real(sim, job_id, placement)
        calls.append((sim.now, job_id, placement_key(placement), out))
        return out

    monkeypatch.setattr(Simulator, "migrate", recorded)
    agents = load_agents(ckpt)
    env = make_env(cfg)
    obs, _ = env.reset(seed=0)
    while True:
        agent = env.acting_agent
        obs, _, term, *_ = env.step({agent: greedy_action(agents.net_for(0), obs[agent])})
        if term["__all__"]:
            break
    env_calls, env_done = list(calls), {j: r.finish_time for j, r in env.sim.records.items()}
    calls.clear()
    topo, perf = build_cluster(cfg)
    policy = MarlPolicy(agents=agents)
    assert has_migration_rule(policy)
    _, records, sim = simulate(cfg, "marl", load_workload(cfg, perf), topo, perf, policy=policy)
    assert sim.stats.migrations == sum(c[3] for c in calls)
    return env_calls, env_done, list(calls), {r.job.job_id: r.finish_time for r in records}


@pytest.mark.parametrize("cadence", list(CADENCES))
@pytest.mark.parametrize("seed", [0, 2])
def test_marl_rebalance_makes_the_moves_the_agents_make_in_the_env(
    tmp_path, monkeypatch, cadence, seed
):
    """Behind ``simulate`` (the benchmark's full track), a v2 checkpoint is offered the
    same moves at the same times as in ClusterPlacement-v2 and decides them alike:
    the same migrations (time, job, placement) and the same finish time of every job.
    Two untrained networks (seeds): one moves most offered jobs, one keeps most."""
    env_opts, sim_opts = CADENCES[cadence]
    cfg = _with_env(TINY, migration=True, **env_opts)
    cfg = dataclasses.replace(
        cfg, simulation=dataclasses.replace(cfg.simulation, migration="on", **sim_opts)
    )
    ckpt = _v2_checkpoint(tmp_path / "ckpt", cfg, seed=seed)
    env_calls, env_done, sim_calls, sim_done = _env_and_simulate(ckpt, cfg, monkeypatch)
    assert env_calls, "the window calls for moves"
    assert sim_calls == env_calls
    assert sim_done == env_done and len(sim_done) == 40
    if cadence == "two-moves-500s":
        assert any(c[1] == d[1] for i, c in enumerate(env_calls) for d in env_calls[:i])


def test_only_a_v2_checkpoint_has_a_migration_rule(tmp_path):
    """A v1 checkpoint (trained without the decision) never migrates in the full track."""
    v1 = MarlPolicy(checkpoint=SHIPPED)
    assert not v1.migrates and not has_migration_rule(v1)
    assert v1.rebalance(None) == []
    cfg = _with_env(TINY, migration=True)
    cfg = dataclasses.replace(cfg, simulation=dataclasses.replace(cfg.simulation, migration="on"))
    topo, perf = build_cluster(cfg)
    _, _, sim = simulate(cfg, "marl", load_workload(cfg, perf), topo, perf, policy=v1)
    assert sim.after_completions is None and sim.stats.migrations == 0
    assert has_migration_rule(MarlPolicy(checkpoint=_v2_checkpoint(tmp_path / "v2")))


#: the shipped migration agents, and each seed's selected iteration
MIGRATION_FOLDERS = {"marl-sw-migration": [0, 12, 0], "marl-upgrade": [0, 0, 0]}
#: each folder's loaded window of the default config: the overload trigger's agents move
#: on a short one; the upgrade agents need faster GPUs freeing under long jobs (the
#: lever tests' heavy window)
MIGRATION_WINDOWS = {
    "marl-sw-migration": {"max_jobs": 60, "load": 2.5},
    "marl-upgrade": {"start": 2200, "max_jobs": 100, "load": 12.0},
}


@pytest.mark.parametrize("folder", sorted(MIGRATION_FOLDERS))
def test_the_shipped_migration_seeds_move_jobs_behind_simulate_in_the_full_track(folder):
    """The three checkpoints a full-track test figure pools (docs/results.md): each is
    a v2 checkpoint of the iteration its run selected that ``has_migration_rule`` reads
    as one, and behind ``simulate`` with ``simulation.migration: on`` on a loaded window
    of the default config its moves reach the simulator while every job still
    finishes."""
    seeds = sorted((REPO_ROOT / "checkpoints" / folder).glob("seed*"))
    assert [p.name for p in seeds] == ["seed0", "seed1", "seed2"]
    cfg = load_config(DEFAULT)
    cfg = dataclasses.replace(
        cfg,
        workload=dataclasses.replace(cfg.workload, **MIGRATION_WINDOWS[folder]),
        simulation=dataclasses.replace(cfg.simulation, migration="on"),
    )
    topo, perf = build_cluster(cfg)
    workload = load_workload(cfg, perf)
    weights = set()
    for path, iteration in zip(seeds, MIGRATION_FOLDERS[folder], strict=True):
        assert json.loads((path / "state.json").read_text())["iteration"] == iteration
        policy = MarlPolicy(checkpoint=path)
        assert policy.migrates and has_migration_rule(policy)
        weights.add((path / "modules" / "shared.pt").read_bytes())
        metrics, records, _ = simulate(cfg, "marl", workload, topo, perf, policy=policy)
        n = MIGRATION_WINDOWS[folder]["max_jobs"]
        assert metrics["jobs_completed"] == n and len(records) == len(workload.jobs)  # all finish
        assert metrics["migrations"] > 0, path.name
    assert len(weights) == 3  # three training seeds, three networks
