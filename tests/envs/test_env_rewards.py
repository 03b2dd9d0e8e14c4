"""The team reward of ClusterPlacement-v1: r = -(ΔC + ΔW) / (time_scale_s · n); an
episode run to its end returns exactly -avg JCT / time_scale_s, for any number of
agents."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import envs
from envs.config import RETIRED_REWARD_FIELDS
from envs.rewards import JobSeconds, RemainingWork, TeamReward
from marl_sched.errors import InputError
from marl_sched.jobs import Placement
from marl_sched.metrics import compute_metrics
from tests.envs.helpers import TINY, cluster, job, masked_random_action, rollout, server


def _rllib_return(trail) -> float:
    """The sum of every agent's rewards over the episode (RLlib's episode return)."""
    return math.fsum(r for step in trail for r in step[3].values())


def _final_info(trail) -> dict:
    info = trail[-1][-1]
    assert info, "the last step carries the final infos"
    return next(iter(info.values()))


def test_full_episode_returns_minus_avg_jct_over_the_time_scale():
    env = envs.make_env(TINY, env={"window_jobs": None})
    trail = rollout(env, seed=0, action_seed=1)
    info = _final_info(trail)
    m = compute_metrics(env.sim, policy="x", trace="t", wall_s=0.0)
    assert m["jobs_completed"] == 40 and m["jobs_unplaceable"] == 0
    assert info["avg_jct_s"] == m["avg_jct_s"] == info["metrics"]["avg_jct_s"]
    assert info["avg_jct_s"] == pytest.approx(np.mean([r.jct for r in env.sim.result()]), rel=1e-12)
    iso = np.mean([r.isolated_runtime for r in env.sim.result()])
    assert info["normalised_return"] == pytest.approx(-info["avg_jct_s"] / iso, rel=1e-12)
    assert info["normalised_return"] <= -1.0  # no job beats running alone at once
    expected = -info["avg_jct_s"] / 3600.0
    assert _rllib_return(trail) == pytest.approx(expected, rel=1e-9)
    assert info["team_return"] == pytest.approx(expected, rel=1e-9)
    # every agent gets the same final infos
    assert all(i["avg_jct_s"] == info["avg_jct_s"] for i in trail[-1][-1].values())


def _two_jobs_at_once():
    """One subcluster of two 4-GPU servers; two jobs submitted at time 0."""
    cfg = cluster(1, server(count=2, gpus=2, groups=2), per_rack=2)
    jobs = [
        job(0, 2, 1, iterations=400.0, model="vgg-16"),
        job(1, 1, 0, iterations=300.0, model="resnet-50"),
    ]
    return cfg, jobs


def test_a_placement_is_charged_its_predicted_run_time_at_once():
    cfg, jobs = _two_jobs_at_once()
    env = envs.make_env(cfg, jobs=jobs)
    env.reset(seed=0)
    out = env.replay_placement(Placement((0, 0), (0,)))
    # job 1 comes up at time 0 too: no job-seconds accrued, only W grew
    assert env.sim.now == 0.0 and env.pending_job.job_id == 1
    (reward,) = out[1].values()
    tau = env.sim.running[0].iter_time
    assert reward == pytest.approx(-400.0 * tau / (3600.0 * 2), rel=1e-9)
    # the steps before the last task of the job paid nothing
    env.reset(seed=0)
    for action in env.placement_actions(Placement((0, 0), (0,)))[:-1]:
        _, rew, *_ = env.step({env.acting_agent: action})
        assert list(rew.values()) == [0.0]


def test_team_reward_potential_ends_at_the_sum_of_jcts(tiny_env):
    env = tiny_env(window_jobs=12)
    obs, _ = env.reset(seed=4)
    reward = env.reward
    assert isinstance(reward, TeamReward) and reward.potential() == 0.0
    rng = np.random.default_rng(0)
    while not env.done:
        agent = env.acting_agent
        obs, *_ = env.step({agent: masked_random_action(obs[agent], rng)})
    assert reward.w.value(env.sim) == 0.0  # nothing runs at the end
    jcts = [r.jct for r in env.sim.result()]
    assert len(jcts) == 12
    assert reward.potential() == pytest.approx(sum(jcts), rel=1e-12)
    assert reward.total == pytest.approx(-np.mean(jcts) / 3600.0, rel=1e-9)


def _brute_force_job_seconds(sim) -> float:
    total = 0.0
    for j in sim.jobs:
        if j.submit_time > sim.now:
            continue
        rec = sim.records.get(j.job_id)
        total += (rec.finish_time if rec is not None else sim.now) - j.submit_time
    return total


def _brute_force_remaining_work(sim) -> float:
    total = 0.0
    for run in sim.running.values():
        left = run.remaining - (sim.now - run.last_update) / run.iter_time
        total += max(left, 0.0) * run.iter_time
    return total


def test_job_seconds_and_remaining_work_match_brute_force(tiny_env):
    env = tiny_env()
    obs, _ = env.reset(seed=0)
    c = JobSeconds(np.array([j.submit_time for j in env.sim.jobs]))
    w = RemainingWork()
    rng = np.random.default_rng(1)
    checked = 0
    while not env.done:
        agent = env.acting_agent
        obs, *_ = env.step({agent: masked_random_action(obs[agent], rng)})
        assert c.value(env.sim) == pytest.approx(_brute_force_job_seconds(env.sim), rel=1e-9)
        assert w.value(env.sim) == pytest.approx(_brute_force_remaining_work(env.sim), rel=1e-9)
        checked += bool(env.sim.running)
    assert checked > 10


def test_time_scale_scales_the_return(tiny_env):
    a = rollout(tiny_env(window_jobs=10), seed=1, action_seed=0)
    b = rollout(tiny_env(window_jobs=10, reward={"time_scale_s": 36.0}), seed=1, action_seed=0)
    assert _rllib_return(b) == pytest.approx(100.0 * _rllib_return(a), rel=1e-9)
    assert _rllib_return(a) < 0


def _team_return_each_agent(par, seed: int) -> tuple[dict[str, float], dict]:
    obs, _ = par.reset(seed=seed)
    rng = np.random.default_rng(seed)
    total = dict.fromkeys(par.possible_agents, 0.0)
    while par.agents:
        actions = {a: masked_random_action(obs[a], rng) for a in par.agents}
        obs, rew, term, trunc, info = par.step(actions)
        for a, r in rew.items():
            total[a] += r
    return total, info


THREE_SCOPES = cluster(3, server(count=3, gpus=2, groups=2), racks=1, per_rack=1)
THREE_JOBS = [job(i, 1 + i % 3, i % 2, submit=7.0 * i, iterations=50.0 + 10 * i) for i in range(12)]


@pytest.mark.parametrize(
    "make, n_agents",
    [
        (lambda: envs.make_parallel_env(TINY), 2),
        (lambda: envs.make_parallel_env(TINY, env={"central": True}), 1),
        (lambda: envs.make_parallel_env(THREE_SCOPES, jobs=THREE_JOBS), 3),
    ],
    ids=["tiny-2", "central-1", "three-3"],
)
def test_every_agent_of_the_parallel_env_receives_the_team_return(make, n_agents):
    par = make()
    assert len(par.possible_agents) == n_agents
    totals, info = _team_return_each_agent(par, seed=0)
    expected = -info[par.possible_agents[0]]["avg_jct_s"] / 3600.0
    for a in par.possible_agents:
        assert totals[a] == pytest.approx(expected, rel=1e-9)
        assert info[a]["team_return"] == pytest.approx(expected, rel=1e-9)
    # and the RLlib env's episode return (the sum over agents) is the same team return
    trail = rollout(par.env, seed=0, action_seed=5)
    assert _rllib_return(trail) == pytest.approx(
        -_final_info(trail)["avg_jct_s"] / 3600.0, rel=1e-9
    )


@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    window=st.integers(1, 40),
    seed=st.integers(0, 2**16),
    action_seed=st.integers(0, 2**16),
    forward_rule=st.sampled_from(["must", "free"]),
)
def test_return_identity_holds_for_any_window_and_random_play(
    window, seed, action_seed, forward_rule
):
    env = envs.make_env(TINY, env={"forward_rule": forward_rule, "window_jobs": window})
    trail = rollout(env, seed=seed, action_seed=action_seed)
    info = _final_info(trail)
    assert info["metrics"]["jobs_completed"] == window
    assert _rllib_return(trail) == pytest.approx(-info["avg_jct_s"] / 3600.0, rel=1e-9)


def _scored_potential(sim, warm: int) -> float:
    """``C + W`` by brute force over the scored jobs (ids ``>= warm``) only."""
    c = sum(
        ((rec.finish_time if (rec := sim.records.get(j.job_id)) else sim.now) - j.submit_time)
        for j in sim.jobs
        if j.job_id >= warm and j.submit_time <= sim.now
    )
    w = 0.0
    for run in sim.running.values():
        if run.job.job_id >= warm and run.iter_time < math.inf:
            left = run.remaining - (sim.now - run.last_update) / run.iter_time
            w += max(left, 0.0) * run.iter_time
    return c + w


def test_every_step_of_a_warm_up_pays_the_scored_jobs_only():
    """Not only the total: each step's team reward is -Δ(C + W) of the scored jobs, so
    the warm-up's placements (before any scored job arrives) pay exactly 0, and a
    warm-up job's remaining work never enters ``W``."""
    import dataclasses

    from marl_sched.config import load_config

    cfg = load_config(TINY)
    cfg = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, warmup_jobs=12))
    env = envs.make_env(cfg, env={"window_jobs": None})
    obs, _ = env.reset(seed=0)
    sim, warm = env.sim, env.warmup
    assert warm == 12
    first_scored = min(j.submit_time for j in sim.jobs if j.job_id >= warm)
    scale = 3600.0 * sum(1 for j in sim.jobs if j.job_id >= warm)
    rng = np.random.default_rng(3)
    before, warm_steps, steps = _scored_potential(sim, warm), 0, 0
    while not env.done:
        agent = env.acting_agent
        placing = env.session.job.job_id
        obs, rewards, *_ = env.step({agent: masked_random_action(obs[agent], rng)})
        after = _scored_potential(sim, warm)
        paid = math.fsum(rewards.values())
        assert paid == pytest.approx(-(after - before) / scale, rel=1e-9, abs=1e-15), steps
        if placing < warm and sim.now < first_scored:
            assert paid == 0.0, "a warm-up placement was paid for"
            warm_steps += 1
        before, steps = after, steps + 1
    assert warm_steps >= 5 and steps > warm_steps


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(warmup=st.integers(0, 15), seed=st.integers(0, 2**16), action_seed=st.integers(0, 2**16))
def test_job_shares_split_the_team_return_by_job(warmup, seed, action_seed):
    """``TeamReward.job_shares`` (``train.advantage: job``): every job once, in arrival
    order; a warm-up job's share 0, a scored job's ``-JCT / (time_scale_s · n)``;
    their sum is the episode's team return."""
    import dataclasses

    from marl_sched.config import load_config

    cfg = load_config(TINY)
    cfg = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, warmup_jobs=warmup))
    env = envs.make_env(cfg, env={"window_jobs": None})
    trail = rollout(env, seed=seed, action_seed=action_seed)
    info = _final_info(trail)
    shares = env.reward.job_shares()
    sim = env.sim
    arrival = sorted(sim.jobs, key=lambda j: (j.submit_time, j.job_id))
    assert [j for j, _ in shares] == [j.job_id for j in arrival]
    n = sum(1 for j in sim.jobs if j.job_id >= env.warmup)
    for job_id, share in shares:
        if job_id < env.warmup:
            assert share == 0.0
        else:
            assert share == pytest.approx(-sim.records[job_id].jct / (3600.0 * n), rel=1e-12)
    assert math.fsum(s for _, s in shares) == pytest.approx(info["team_return"], rel=1e-9)
    assert math.fsum(s for _, s in shares) == pytest.approx(-info["avg_jct_s"] / 3600.0, rel=1e-9)


@pytest.mark.parametrize(("key", "value"), [("credit", "team"), ("interference", "learned")])
def test_a_retired_reward_field_is_refused_naming_the_tag(key, value):
    """``env.reward.credit: team`` and ``env.reward.interference: learned`` no longer
    ship: refused naming the key and the tag; at ``actor`` / ``simulator`` (what every
    shipped run signed) the environment is the same as without them."""
    with pytest.raises(InputError, match=rf"env\.reward\.{key}: .*studies-archive"):
        envs.make_env(TINY, env={"reward": {key: value}})
    at_old = envs.make_env(TINY, env={"reward": {key: RETIRED_REWARD_FIELDS[key]}})
    assert at_old.env_config == envs.make_env(TINY).env_config
