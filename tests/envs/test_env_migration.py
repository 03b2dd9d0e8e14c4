"""ClusterPlacement-v2: migration as the agents' decision (``env.migration: on``).

Off, the env is v1 bit for bit (the rest of tests/envs); on, a move is offered at a
job completion or a tick, the agent keeps the job or re-places it task by task, the
simulator migrates it, and the reward charges the restart delay."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import envs
from envs.config import env_id
from envs.observations import MIGRATION_FEATURES
from marl_sched.errors import InputError
from marl_sched.jobs import Placement
from marl_sched.policies.load_control import server_slowdown
from tests.envs.helpers import TINY, cluster, job, masked_random_action, rollout, server

ON = {"migration": True}


def _moves(trail) -> int:
    return sum(1 for step in trail if step[1] is not None)


def _check_capacity(sim) -> None:
    t = sim.topology
    assert (sim.group_unused >= 0).all() and (sim.group_unused <= t.group_slots).all()
    assert (sim.server_cpu_free >= -1e-9).all() and (sim.server_mem_free >= -1e-9).all()
    used = np.zeros(t.n_groups, dtype=np.int64)
    for run in sim.running.values():
        np.add.at(used, np.asarray(run.placement.worker_groups), 1)
    np.testing.assert_array_equal(used + sim.group_unused, t.group_slots)


def _episode(env, seed: int, action_seed: int):
    """A random masked episode; every step checks capacity; returns (trail, moves
    offered, moves made)."""
    rng = np.random.default_rng(action_seed)
    obs, _ = env.reset(seed=seed)
    trail, offered = [], 0
    while True:
        agent = env.acting_agent
        offered += env.session.moving is not None and env.session.task == 0
        action = masked_random_action(obs[agent], rng)
        obs, rew, term, trunc, info = env.step({agent: action})
        _check_capacity(env.sim)
        trail.append((agent, action, rew))
        if term["__all__"]:
            return trail, info, offered


def test_on_is_v2_with_more_features_and_the_same_actions():
    off, on = envs.make_env(TINY), envs.make_env(TINY, env=ON)
    assert off.builder.action_space == on.builder.action_space
    for key, extra in MIGRATION_FEATURES.items():  # tiny.yaml: no hints, no job length
        assert on.builder.features[key] == off.builder.features[key] + extra
        assert on.observation_spaces["sc0"][key].shape[-1] == (
            off.observation_spaces["sc0"][key].shape[-1] + len(extra)
        )
    assert env_id(True) == ("marl_sched/ClusterPlacement-v2", 2)
    assert env_id(False) == (envs.ENV_ID, envs.ENV_VERSION)


def test_moves_without_a_move_leave_the_episode_as_with_migration_off():
    """On with a cap of 0 moves (and a tick): the env stops at every trigger, offers
    nothing, and the simulator offers the same jobs at the same times."""
    off = envs.make_env(TINY)
    on = envs.make_env(TINY, env={**ON, "migration_max_moves": 0, "migration_tick_s": 300.0})
    a, b = rollout(off, seed=0, action_seed=3), rollout(on, seed=0, action_seed=3)
    assert [s[:2] for s in a] == [s[:2] for s in b]
    assert [s[3] for s in a] == [s[3] for s in b]  # rewards, bit for bit
    assert [r.finish_time for r in off.sim.result()] == [r.finish_time for r in on.sim.result()]
    assert on.sim.stats.migrations == 0


def test_same_seed_same_episode_with_migration_on():
    runs = []
    for _ in range(2):
        env = envs.make_env(TINY, env={**ON, "migration_tick_s": 600.0})
        trail, info, offered = _episode(env, seed=4, action_seed=5)
        runs.append((trail, info["sc0"]["avg_jct_s"], env.sim.stats.migrations, offered))
    assert runs[0] == runs[1]
    assert runs[0][2] > 0 and runs[0][3] > runs[0][2]  # moves offered, some taken


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    tick=st.sampled_from([0.0, 300.0, 1800.0]),
    cap=st.integers(1, 3),
    interval=st.sampled_from([0.0, 600.0]),
)
def test_moves_never_oversubscribe_and_every_resource_comes_back(seed, tick, cap, interval):
    env = envs.make_env(
        TINY,
        env={**ON, "migration_tick_s": tick, "migration_max_moves": cap,
             "migration_min_interval_s": interval},
    )  # fmt: skip
    moved_at: dict[int, list[tuple[float, float]]] = {}  # job -> (when, paused until)
    migrate = None

    def recording(job_id, placement):
        out = migrate(job_id, placement)
        if out is not False:  # not declined by the simulator's own rules
            moved_at.setdefault(job_id, []).append((env.sim.now, sim.running[job_id].paused_until))
        return out

    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    sim = env.sim
    migrate, sim.migrate = sim.migrate, recording
    while True:
        agent = env.acting_agent
        obs, rew, term, _, info = env.step({agent: masked_random_action(obs[agent], rng)})
        _check_capacity(env.sim)
        if term["__all__"]:
            break
    sim, t = env.sim, env.sim.topology
    assert not sim.running and len(sim.records) == 40
    np.testing.assert_array_equal(sim.group_unused, t.group_slots)
    np.testing.assert_allclose(sim.server_cpu_free, t.server_cpu, atol=1e-9)
    np.testing.assert_allclose(sim.server_mem_free, t.server_memory_gb, atol=1e-9)
    assert (sim.link_jobs == 0).all()
    for times in moved_at.values():
        assert len(times) <= cap
        for (t0, paused), (t1, _) in zip(times, times[1:], strict=False):
            assert t1 - t0 >= interval and t1 >= paused  # never while restarting
    assert info["sc0"]["team_return"] == pytest.approx(-info["sc0"]["avg_jct_s"] / 3600.0, rel=1e-9)


def test_return_is_minus_avg_jct_with_moves():
    env = envs.make_env(TINY, env={**ON, "migration_tick_s": 900.0, "migration_max_moves": 2})
    trail = rollout(env, seed=1, action_seed=7)
    info = next(iter(trail[-1][-1].values()))
    assert env.sim.stats.migrations > 0
    total = math.fsum(r for step in trail for r in step[3].values())
    assert total == pytest.approx(-info["avg_jct_s"] / 3600.0, rel=1e-9)
    assert info["team_return"] == pytest.approx(total, rel=1e-12)


def _two_job_env():
    """One agent, two 2-GPU servers; job 0 (short) and job 1 (long), one worker each,
    both on server 0's group; job 0's completion offers job 1 a move."""
    cfg = cluster(1, server(count=2, gpus=2), per_rack=2)
    jobs = [job(0, 1, iterations=200.0), job(1, 1, iterations=2000.0)]
    return envs.make_env(cfg, env=ON, jobs=jobs)


def _play_two_jobs(move: bool):
    env = _two_job_env()
    obs, _ = env.reset(seed=0)
    rewards = []
    for jid in (0, 1):  # both on group 0 (server 0)
        assert env.pending_job.job_id == jid
        for a in env.placement_actions(Placement((0,), ())):
            obs, rew, term, *_ = env.step({env.acting_agent: a})
            rewards.append(sum(rew.values()))
    s = env.session  # job 0 done: job 1 offered
    assert s.moving is not None and s.moving.job_id == 1 and s.can_keep
    assert env.sim.now == pytest.approx(env.sim.records[0].finish_time)
    g = env.builder.pad[0]
    assert obs["sc0"]["action_mask"][g + 0] == 1  # keep
    k = env.builder.features["job_x"].index("is_move")
    assert obs["sc0"]["job_x"][k] == 1.0
    here = env.builder.features["group_x"].index("mover_workers_here")
    assert obs["sc0"]["group_x"][0, here] == 1.0 and obs["sc0"]["group_x"][1:, here].sum() == 0
    free = env.builder.features["group_x"].index("free_gpus/8")
    assert obs["sc0"]["group_x"][0, free] == 2 / 8  # its own GPU counts free
    pauses = []  # the simulator's restart delay of each move
    migrate = env.sim.migrate

    def recording(job_id, placement):
        out = migrate(job_id, placement)
        pauses.append(env.sim.running[job_id].paused_until - env.sim.now)
        return out

    env.sim.migrate = recording
    actions = env.placement_actions(Placement((1,), ())) if move else [g + 0]
    for a in actions:
        obs, rew, term, *_ = env.step({env.acting_agent: a})
        rewards.append(sum(rew.values()))
    assert len(pauses) == move and all(p > 0 for p in pauses)
    pause = sum(pauses)
    while not term["__all__"]:
        obs, rew, term, *_ = env.step({env.acting_agent: g + 0})
        rewards.append(sum(rew.values()))
    return env, rewards, pause


def test_a_move_pays_its_restart_delay_in_the_jct_and_the_reward():
    kept, r_kept, _ = _play_two_jobs(move=False)
    moved, r_moved, penalty = _play_two_jobs(move=True)
    assert kept.sim.stats.migrations == 0 and moved.sim.stats.migrations == 1
    assert moved.sim.running == {} and moved.sim.records[1].job.job_id == 1
    # alone on identical servers after job 0 left: the move gains nothing but the pause
    jct_kept, jct_moved = kept.sim.records[1].jct, moved.sim.records[1].jct
    assert jct_moved - jct_kept == pytest.approx(penalty, rel=1e-9)
    assert kept.sim.records[0].jct == moved.sim.records[0].jct
    # the move's own step is charged the delay at once (both jobs scored: n = 2)
    assert r_moved[2] - r_kept[2] == pytest.approx(-penalty / (3600.0 * 2), rel=1e-6)
    for env, rewards in ((kept, r_kept), (moved, r_moved)):
        avg = np.mean([r.jct for r in env.sim.result()])
        assert math.fsum(rewards) == pytest.approx(-avg / 3600.0, rel=1e-9)


def test_keep_is_legal_only_before_a_moves_first_task():
    env = _two_job_env()
    obs, _ = env.reset(seed=0)
    g = env.builder.pad[0]
    assert obs["sc0"]["action_mask"][g] == 0  # an arriving job: the own slot is no keep
    with pytest.raises(ValueError, match="the no-op slot"):
        env.step({"sc0": g})


def test_move_features_are_what_mlf_h_reads():
    env = envs.make_env(TINY, env={**ON, "migration_tick_s": 600.0})
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=2)
    checked = 0
    while env.acting_agent is not None and checked < 5:
        agent, s = env.acting_agent, env.session
        if s.moving is not None and s.task == 0:
            k = env.index[agent]
            sc = env.builder.scopes[k]
            view = env.sim.view()
            running = view.running()
            f = env.builder.features
            srv = np.log(server_slowdown(view, running))[sc.servers]
            col = obs[agent]["server_x"][
                : len(sc.servers), f["server_x"].index("log_server_slowdown")
            ]
            np.testing.assert_allclose(col, srv, rtol=1e-5, atol=1e-6)
            job_x = obs[agent]["job_x"]
            info = next(i for i in running if i.job_id == s.moving.job_id)
            assert job_x[f["job_x"].index("log_slowdown")] == pytest.approx(
                math.log(info.slowdown), abs=1e-5
            )
            per_worker = info.attained_gpu_s / info.num_workers
            assert job_x[f["job_x"].index("attained")] == pytest.approx(
                math.log10(1 + per_worker) / 7, abs=1e-6
            )
            # the most slowed running job with a worker in the scope was offered
            mine = [
                i for i in running
                if k in env.builder.group_scope[list(i.placement.worker_groups)]
                and i.paused_until <= env.sim.now
                and env._book.moves.get(i.job_id, 0) < 1  # the default cap: one move
                and i.job_id not in env._book.offered - {info.job_id}  # one offer per trigger
            ]  # fmt: skip
            assert info.slowdown == max(i.slowdown for i in mine)
            checked += 1
        obs, _, term, *_ = env.step({agent: masked_random_action(obs[agent], rng)})
        if term["__all__"]:
            break
    assert checked > 0


REMAINING = {**ON, "migration_offer": "remaining"}


def _move_offers(env, seed: int = 0):
    """Each move offered in a random masked episode of ``env``, at its first task:
    (session, observation, the cluster view, the jobs as the agents know them)."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    while env.acting_agent is not None:
        agent, s = env.acting_agent, env.session
        if s.moving is not None and s.task == 0:
            env.predictor.sync(env.sim.records)
            known = {
                jid: env.predictor.visible_job(run.job) for jid, run in env.sim.running.items()
            }
            yield s, obs[agent], env.sim.view(), known
        obs, _, term, *_ = env.step({agent: masked_random_action(obs[agent], rng)})
        if term["__all__"]:
            return


def test_the_remaining_offer_is_the_upgrade_rules_best_candidate_with_its_gain_a_feature():
    """``migration_offer: remaining``: of the longest-remaining candidates the upgrade
    rule tries, wherever they run, the job offered is the rule's own move (the first
    whose option pays), else the one whose option comes nearest; its net saving over
    its remaining run is the ``upgrade_gain`` column. Some offers pay, some do not:
    the agent decides."""
    from marl_sched.policies.levers import (
        UPGRADE_TRIES,
        UpgradePolicy,
        remaining_iterations,
        remaining_work_s,
    )

    env = envs.make_env(TINY, env=REMAINING)
    rule = UpgradePolicy()
    rule.reset(env.topology, 0)
    f = env.builder.features["job_x"]
    signs = set()
    for s, obs, view, known in _move_offers(env):
        book = env._book
        cands = sorted(
            (-remaining_work_s(known[i.job_id], i), i.job_id, i) for i in view.running()
            if i.paused_until <= view.now and book.moves.get(i.job_id, 0) < 1
            and (i.job_id == s.moving.job_id or i.job_id not in book.offered)
            and rule.is_candidate(remaining_work_s(known[i.job_id], i))
        )[:UPGRADE_TRIES]  # fmt: skip
        saved, run = {}, {}
        for _, jid, info in cands:
            left = remaining_iterations(known[jid], info)
            saved[jid] = rule.best_option(view, info, known[jid], left)[1]
            run[jid] = left * info.iter_time
        pays = [jid for _, jid, _ in cands if saved[jid] > 0]
        offered = s.moving.job_id
        assert offered == (pays[0] if pays else max(saved, key=saved.get))
        assert math.isfinite(saved[offered])
        assert obs["job_x"][f.index("upgrade_gain")] == pytest.approx(
            min(max(saved[offered] / run[offered], -1.0), 1.0), rel=1e-5, abs=1e-6
        )
        work = remaining_work_s(s.job, s.moving)
        assert obs["job_x"][f.index("log10_remaining_s/7")] == pytest.approx(
            math.log10(1 + work) / 7, abs=1e-6
        )
        signs.add(saved[offered] > 0)
    assert signs == {True, False}


def test_the_upgrade_columns_come_only_with_the_remaining_offer():
    from envs.observations import UPGRADE_FEATURES

    on, rem = envs.make_env(TINY, env=ON), envs.make_env(TINY, env=REMAINING)
    assert rem.builder.features["job_x"] == on.builder.features["job_x"] + UPGRADE_FEATURES
    off = envs.make_env(TINY, env={"migration_offer": "remaining"})  # v1: no move, no column
    assert off.builder.features == envs.make_env(TINY).builder.features


RULE_WHERE = {**REMAINING, "migration_where": "rule"}


def test_where_rule_leaves_keep_or_the_rules_option_and_places_it_whole():
    """``migration_where: rule``: an offered move has two legal actions, keep and the
    action towards the upgrade rule's option's first task; taking it puts the job on
    that option (the rule's best, on the estimates the agents see) in one step."""
    from marl_sched.policies.levers import UpgradePolicy, remaining_iterations

    env = envs.make_env(TINY, env=RULE_WHERE)
    rule = UpgradePolicy()
    rule.reset(env.topology, 0)
    keep_slot = env.builder.pad[0]
    rng = np.random.default_rng(1)
    obs, _ = env.reset(seed=0)
    calls, real = [], env.sim.migrate
    env.sim.migrate = lambda jid, placement: calls.append((jid, placement)) or real(jid, placement)
    made = kept = 0
    while env.acting_agent is not None:
        agent, s = env.acting_agent, env.session
        mask = obs[agent]["action_mask"]
        if s.moving is None or s.task > 0:
            action = masked_random_action(obs[agent], rng)
            obs, _, term, *_ = env.step({agent: action})
            if term["__all__"]:
                break
            continue
        view, jid = env.sim.view(), s.moving.job_id
        left = remaining_iterations(s.job, s.moving)
        assert s.plan == rule.best_option(view, s.moving, s.job, left)[0]
        legal = set(np.flatnonzero(mask).tolist())
        assert legal == {keep_slot + s.agent, s.move_action()}
        move, before = bool(rng.integers(2)), len(calls)
        obs, _, term, *_ = env.step({agent: s.move_action() if move else keep_slot + s.agent})
        assert env.session is not s  # one action decides the move
        assert s.done and s.moved() == move
        assert calls[before:] == ([(jid, s.plan)] if move else [])
        made += move
        kept += not move
        if term["__all__"]:
            break
    assert made and kept


def test_where_rule_without_the_remaining_offer_is_refused_naming_the_key():
    with pytest.raises(InputError, match=r"env\.migration_where: 'rule' needs migration_offer"):
        envs.make_env(TINY, env={**ON, "migration_where": "rule"})
    with pytest.raises(InputError, match=r"env\.migration_where: must be one of agent, rule"):
        envs.make_env(TINY, env={**REMAINING, "migration_where": "nearest"})


def test_an_unknown_migration_offer_is_refused_naming_the_key():
    with pytest.raises(InputError, match=r"env\.migration_offer: must be one of slowdown, "):
        envs.make_env(TINY, env={**ON, "migration_offer": "nearest"})


@pytest.mark.parametrize("key, value", [
    ("migration_tick_s", -1.0), ("migration_max_moves", -1), ("migration_min_interval_s", -5.0),
])  # fmt: skip
def test_negative_migration_options_are_refused_naming_the_key(key, value):
    with pytest.raises(InputError, match=rf"env\.{key}: must be >= 0"):
        envs.make_env(TINY, env={**ON, key: value})


def test_pettingzoo_parallel_api_and_rllib_check_with_migration_on():
    import ray
    from pettingzoo.test import parallel_api_test
    from ray.rllib.utils.pre_checks.env import check_multiagent_environments

    ray_was_up = ray.is_initialized()
    penv = envs.make_parallel_env(TINY, env={**ON, "migration_tick_s": 600.0})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parallel_api_test(penv, num_cycles=400)
    assert [str(w.message) for w in caught if "pettingzoo" in w.filename] == []
    env = envs.make_env(TINY, env={**ON, "migration_tick_s": 600.0})
    check_multiagent_environments(env)
    obs, _ = env.reset(seed=1)
    moves = 0
    while env.acting_agent is not None:
        agent = env.acting_agent
        assert env.get_observation_space(agent).contains(obs[agent])
        moves += env.session.moving is not None
        obs, _, term, *_ = env.step({agent: env.get_action_space(agent).sample()})
        if term["__all__"]:
            break
    assert moves > 0
    assert ray.is_initialized() == ray_was_up


def test_v2_is_registered_with_gymnasium_with_migration_on():
    import gymnasium as gym

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # gymnasium: "v1 is out of date"
        made = gym.make(envs.ENV_ID_V2, config=TINY).unwrapped
        v1 = gym.make(envs.ENV_ID, config=TINY).unwrapped
    assert made.env_config.migration and not v1.env_config.migration
