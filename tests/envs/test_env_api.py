"""API conformance over every shipped config: PettingZoo's parallel_api_test, RLlib's
multi-agent env check, RLlib episode bookkeeping, spaces, registration."""

from __future__ import annotations

import subprocess
import sys
import warnings
from functools import cache
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import envs
from marl_sched.config import REPO_ROOT, load_config
from tests.envs.helpers import TINY, masked_random_action, rollout

CONFIGS = sorted((REPO_ROOT / "configs").glob("*.yaml"))
SMALL = {"tiny.yaml", "default.yaml"}  # full API runs; the others: build, reset, a few steps


def _config_or_skip(path: Path):
    cfg = load_config(path)
    trace = cfg.resolve_path(cfg.workload.trace)
    if not trace.exists():
        pytest.skip(f"{path.name}: trace {trace} not found")
    return cfg


@cache
def _parallel(path: Path):
    return envs.make_parallel_env(_config_or_skip(path))


@cache
def _rllib(path: Path):
    return envs.make_env(_config_or_skip(path))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_pettingzoo_parallel_api(path):
    from pettingzoo.test import parallel_api_test

    env = _parallel(path)
    cycles = {"tiny.yaml": 2000, "default.yaml": 150}.get(path.name, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parallel_api_test(env, num_cycles=cycles)
    messages = [str(w.message) for w in caught if "pettingzoo" in w.filename]
    assert messages == []


def test_pettingzoo_full_episode_ends_with_all_agents_gone_and_metrics():
    env = envs.make_parallel_env(TINY)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    while env.agents:
        acting = env.acting_agent
        for agent in env.agents:  # idle agents may only no-op
            if agent != acting:
                k = env.possible_agents.index(agent)
                expected = np.zeros(env.action_space(agent).n, np.int8)
                expected[env.env.layout.max_groups + k] = 1
                np.testing.assert_array_equal(obs[agent]["action_mask"], expected)
        actions = {a: masked_random_action(obs[a], rng) for a in env.agents}
        obs, rew, term, trunc, info = env.step(actions)
        assert len(set(rew.values())) == 1  # one team reward for everybody
    assert all(term.values())
    assert info["sc0"]["metrics"]["jobs_completed"] == 40


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_rllib_multiagent_env_check(path):
    import ray
    from ray.rllib.utils.pre_checks.env import check_multiagent_environments

    ray_was_up = ray.is_initialized()  # other test files may have started it
    env = _rllib(path)
    check_multiagent_environments(env)  # resets with seed 42, steps a sampled action
    obs, _ = env.reset(seed=1)
    for _ in range(3 if path.name not in SMALL else 50):
        agent = env.acting_agent
        assert list(obs) == [agent]
        assert env.observation_space.contains(obs[agent])
        obs, *_ = env.step({agent: env.get_action_space(agent).sample()})
        if env.done:
            break
    assert ray.is_initialized() == ray_was_up  # the checks never start a Ray cluster


@pytest.mark.parametrize(
    "overrides",
    [{}, {"max_sim_time": 600.0}, {"max_placed_jobs": 7}],
    ids=["terminated", "truncated-by-time", "truncated-by-jobs"],
)
def test_rllib_episode_bookkeeping_accepts_every_step(tiny_env, overrides):
    """Feed a whole episode into RLlib's MultiAgentEpisode (hanging actions, rewards
    of agents off turn, last observations on truncation must all be consistent)."""
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode

    env = tiny_env(**overrides)
    trail = rollout(env, seed=5)
    episode = MultiAgentEpisode(
        observation_space=env.observation_spaces, action_space=env.action_spaces
    )
    episode.add_env_reset(observations=trail[0][2], infos={a: {} for a in trail[0][2]})
    for agent, action, obs, rew, term, trunc, info in trail[1:]:
        episode.add_env_step(
            observations=obs,
            actions={agent: action},
            rewards=rew,
            infos=info,
            terminateds=term,
            truncateds=trunc,
        )
    assert episode.is_done
    *_, term, trunc, info = trail[-1]
    if overrides:
        assert trunc["__all__"] and not term["__all__"]
    else:
        assert term["__all__"] and not trunc["__all__"]
    # every agent that acted gets a last observation, reward and the metrics
    acted = {step[0] for step in trail[1:]}
    assert set(trail[-1][2]) == acted == set(info)
    assert all("metrics" in info[a] for a in acted)


def test_each_agent_receives_the_team_return_from_its_first_action(tiny_env):
    env = tiny_env()
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    team: list[float] = []  # the team reward of each step
    delivered = dict.fromkeys(env.possible_agents, 0.0)
    first_action: dict[str, int] = {}
    while not env.done:
        agent = env.acting_agent
        first_action.setdefault(agent, len(team))
        obs, rew, *_ = env.step({agent: masked_random_action(obs[agent], rng)})
        team.append(env.last_team_reward)
        assert set(rew) <= set(obs)  # rewards travel with observations
        for a, r in rew.items():
            delivered[a] += r
    assert sum(team) == pytest.approx(env.team_return, rel=1e-12)
    assert set(first_action) == set(env.possible_agents)
    for a, start in first_action.items():
        assert delivered[a] == pytest.approx(sum(team[start:]), rel=1e-9)


def test_spaces_are_the_same_objects_every_call(tiny_env):
    env = tiny_env()
    obs_spaces = {a: env.get_observation_space(a) for a in env.possible_agents}
    act_spaces = {a: env.get_action_space(a) for a in env.possible_agents}
    env.reset(seed=0)
    rollout(env, seed=1)
    env.reset(seed=2)
    for a in env.possible_agents:
        assert env.get_observation_space(a) is obs_spaces[a] is env.observation_spaces[a]
        assert env.get_action_space(a) is act_spaces[a] is env.action_spaces[a]
        assert act_spaces[a] == gym.spaces.Discrete(env.layout.max_groups + 2)
    par = envs.make_parallel_env(TINY)
    for a in par.possible_agents:
        assert par.observation_space(a) is par.observation_space(a)
        assert par.action_space(a) is par.action_space(a)
        assert par.observation_space(a)["action_mask"].dtype == np.int8


def test_every_observation_lies_in_its_space(tiny_env):
    env = tiny_env()
    for _, _, obs, *_ in rollout(env, seed=0):
        for agent, o in obs.items():
            space = env.get_observation_space(agent)
            assert set(o) == set(space.spaces)
            for key, value in o.items():
                assert value.dtype == space[key].dtype, key
                assert space[key].contains(value), key
                assert np.all(np.isfinite(value)), key


def test_unmasked_sample_of_the_acting_agents_space_is_legal(tiny_env):
    env = tiny_env()
    obs, _ = env.reset(seed=0)
    env.get_action_space("sc0").seed(0)
    env.get_action_space("sc1").seed(0)
    while not env.done:
        agent = env.acting_agent
        action = env.get_action_space(agent).sample()
        assert obs[agent]["action_mask"][action] == 1
        obs, *_ = env.step({agent: action})


def test_gymnasium_registry_and_rllib_registration():
    import ray
    from ray.tune.registry import ENV_CREATOR, _global_registry

    ray_was_up = ray.is_initialized()
    made = gym.make(envs.ENV_ID, config=TINY)
    assert isinstance(made.unwrapped, envs.make_env(TINY).__class__)
    assert envs.register_rllib() == envs.ENV_ID
    assert _global_registry.contains(ENV_CREATOR, envs.ENV_ID)
    creator = _global_registry.get(ENV_CREATOR, envs.ENV_ID)
    env = creator({"config": TINY, "env": {"home_rule": "round-robin"}})
    assert env.env_config.home_rule == "round-robin"
    assert ray.is_initialized() == ray_was_up


def test_import_envs_does_not_import_ray():
    code = "import sys, envs; print('ray' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    assert out.stdout.split() == ["False", "False"]
