"""API conformance of ClusterPlacement-v1: PettingZoo's parallel_api_test and RLlib's
multi-agent env check on tiny.yaml and on default.yaml (the default recipe's options
on), RLlib episode bookkeeping, spaces, illegal actions, registration."""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings
from functools import cache

import gymnasium as gym
import numpy as np
import pytest

import envs
from envs.cluster_env import MaskedDiscrete
from envs.rllib_env import ClusterPlacementEnv
from marl_sched.config import REPO_ROOT
from tests.envs.helpers import TINY, default_short, masked_random_action, rollout

CONFIGS = {"tiny": lambda: TINY, "default": default_short}


@cache
def _parallel(name: str):
    return envs.make_parallel_env(CONFIGS[name]())


@cache
def _rllib(name: str):
    return envs.make_env(CONFIGS[name]())


def test_make_env_is_an_rllib_multiagent_env_with_one_agent_per_subcluster():
    from ray.rllib.env.multi_agent_env import MultiAgentEnv

    env = _rllib("tiny")
    assert isinstance(env, MultiAgentEnv) and isinstance(env, ClusterPlacementEnv)
    assert env.possible_agents == env.agents == ["sc0", "sc1"]
    assert _rllib("default").possible_agents == ["sc0", "sc1", "sc2", "sc3"]
    central = envs.make_env(TINY, env={"central": True})
    assert central.possible_agents == ["central"]
    assert envs.ENV_ID == "marl_sched/ClusterPlacement-v1" and envs.ENV_VERSION == 1


@pytest.mark.parametrize("name, cycles", [("tiny", 400), ("default", 150)])
def test_pettingzoo_parallel_api(name, cycles):
    from pettingzoo.test import parallel_api_test

    env = _parallel(name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parallel_api_test(env, num_cycles=cycles)
    messages = [str(w.message) for w in caught if "pettingzoo" in w.filename]
    assert messages == []


def test_pettingzoo_full_episode_idle_agents_no_op_and_all_leave_with_metrics():
    env = _parallel("tiny")
    obs, infos = env.reset(seed=0)
    assert set(obs) == set(infos) == set(env.possible_agents)
    g = env.env.builder.pad[0]
    rng = np.random.default_rng(0)
    acting_seen = set()
    while env.agents:
        acting = env.acting_agent
        acting_seen.add(acting)
        assert set(obs) == set(env.agents) == set(env.possible_agents)
        for agent in env.agents:
            assert obs[agent]["action_mask"].dtype == np.int8
            assert env.observation_space(agent).contains(obs[agent])
            if agent != acting:  # an idle agent sees zeros and may only no-op
                k = env.possible_agents.index(agent)
                expected = np.zeros(env.action_space(agent).n, np.int8)
                expected[g + k] = 1
                np.testing.assert_array_equal(obs[agent]["action_mask"], expected)
                assert not obs[agent]["group_x"].any() and not obs[agent]["job_x"].any()
            else:
                assert obs[agent]["action_mask"][g + env.possible_agents.index(agent)] == 0
        # idle agents' actions (their no-op) are ignored
        actions = {a: masked_random_action(obs[a], rng) for a in env.agents}
        obs, rew, term, trunc, info = env.step(actions)
        assert len(set(rew.values())) == 1  # one team reward for everybody
    assert acting_seen == set(env.possible_agents)
    assert all(term.values()) and not any(trunc.values())
    assert env.agents == []
    for a in env.possible_agents:
        assert info[a]["metrics"]["jobs_completed"] == 40
        assert info[a]["avg_jct_s"] == info[a]["metrics"]["avg_jct_s"]
    with pytest.raises(RuntimeError, match="call reset"):
        env.step({})


def test_pettingzoo_refuses_an_illegal_or_missing_acting_action():
    env = _parallel("tiny")
    obs, _ = env.reset(seed=0)
    acting = env.acting_agent
    k = env.possible_agents.index(acting)
    noop = env.env.builder.pad[0] + k
    with pytest.raises(ValueError, match=rf"agent {acting}: action {noop} is masked"):
        env.step({a: noop for a in env.agents})
    with pytest.raises(ValueError, match=rf"no action for the acting agent {acting}"):
        env.step({a: 0 for a in env.agents if a != acting})


@pytest.mark.parametrize("name", ["tiny", "default"])
def test_rllib_multiagent_env_check_without_starting_ray(name):
    import ray
    from ray.rllib.utils.pre_checks.env import check_multiagent_environments

    ray_was_up = ray.is_initialized()  # other test files may have started it
    env = _rllib(name)
    check_multiagent_environments(env)  # resets with seed 42, steps a sampled action
    obs, _ = env.reset(seed=1)
    for _ in range(60):
        agent = env.acting_agent
        assert list(obs) == [agent]  # only the acting agent observes
        assert env.get_observation_space(agent).contains(obs[agent])
        obs, rew, *_ = env.step({agent: env.get_action_space(agent).sample()})
        assert list(rew) == [agent]  # the reward goes to the agent that acted
        if env.done:
            break
    assert ray.is_initialized() == ray_was_up  # the checks never start a Ray cluster


def test_rllib_episode_bookkeeping_accepts_every_step(tiny_env):
    """Feed a whole episode into RLlib's MultiAgentEpisode (rewards, hanging actions
    and last observations must be consistent)."""
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode

    env = tiny_env(window_jobs=15)
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
    assert term["__all__"] and not trunc["__all__"]
    acted = {step[0] for step in trail[1:]}
    assert set(trail[-1][2]) == acted == set(info)  # a last observation for every actor
    assert all("metrics" in info[a] and "avg_jct_s" in info[a] for a in acted)
    assert episode.get_return() == pytest.approx(info["sc0"]["team_return"], rel=1e-9)
    # the final observations offer only the no-op slot
    g = env.builder.pad[0]
    for a, o in trail[-1][2].items():
        expected = np.zeros(g + 2, np.float32)
        expected[g + env.possible_agents.index(a)] = 1
        np.testing.assert_array_equal(o["action_mask"], expected)


def test_only_the_acting_agent_observes_and_every_observation_lies_in_its_space(tiny_env):
    env = tiny_env()
    trail = rollout(env, seed=0)
    for _, _, obs, *_ in trail[:-1]:
        assert len(obs) == 1  # one observer per step until the end
    assert set(trail[-1][2]) == set(env.possible_agents)  # both acted on tiny's window
    for _, _, obs, *_ in trail:
        for agent, o in obs.items():
            space = env.get_observation_space(agent)
            assert set(o) == set(space.spaces)
            for key, value in o.items():
                assert value.dtype == space[key].dtype, key
                assert space[key].contains(value), key
                assert np.all(np.isfinite(value)), key


def test_the_next_observer_is_the_acting_agent(tiny_env):
    env = tiny_env(window_jobs=20)
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(3)
    while not env.done:
        assert list(obs) == [env.acting_agent]
        agent = env.acting_agent
        obs, *_ = env.step({agent: masked_random_action(obs[agent], rng)})
    assert env.acting_agent is None and env.pending_job is None
    with pytest.raises(ValueError, match="call reset"):
        env.step({"sc0": 0})


def test_spaces_are_the_same_objects_every_call(tiny_env):
    env = tiny_env()
    obs_spaces = {a: env.get_observation_space(a) for a in env.possible_agents}
    act_spaces = {a: env.get_action_space(a) for a in env.possible_agents}
    rollout(env, seed=1)
    env.reset(seed=2)
    for a in env.possible_agents:
        assert env.get_observation_space(a) is obs_spaces[a] is env.observation_spaces[a]
        assert env.get_action_space(a) is act_spaces[a] is env.action_spaces[a]
        assert act_spaces[a].n == 16 + 2  # G + A, no hints
    d = _rllib("default")
    g, a, h = d.builder.pad[0], 4, 5
    assert g == 48 and all(sp.n == g + a + h for sp in d.action_spaces.values())
    assert d.get_observation_space("sc0")["action_mask"].shape == (g + a + h,)
    par = _parallel("tiny")
    for a in par.possible_agents:
        assert par.observation_space(a) is par.observation_space(a)
        assert par.action_space(a) is par.action_space(a)
        assert par.observation_space(a)["action_mask"].dtype == np.int8


@pytest.mark.parametrize("name", ["tiny", "default"])
def test_unmasked_sample_of_the_acting_agents_space_is_legal(name):
    env = _rllib(name)
    obs, _ = env.reset(seed=0)
    for a in env.possible_agents:
        env.get_action_space(a).seed(0)
    drawn = set()
    for _ in range(150):
        agent = env.acting_agent
        space = env.get_action_space(agent)
        action = space.sample()
        assert obs[agent]["action_mask"][action] == 1
        # an agent that does not act has no mask: any action of the space
        for other in env.possible_agents:
            if other != agent:
                assert 0 <= env.get_action_space(other).sample() < space.n
        drawn.add(int(action))
        obs, *_ = env.step({agent: action})
        if env.done:
            break
    assert len(drawn) > 1
    # an explicit mask still wins
    space = env.get_action_space("sc0")
    mask = np.zeros(space.n, np.int8)
    mask[3] = 1
    assert space.sample(mask=mask) == 3


def test_masked_discrete_pickles_as_a_plain_discrete():
    space = _rllib("tiny").get_action_space("sc0")
    assert isinstance(space, MaskedDiscrete)
    copy = pickle.loads(pickle.dumps(space))
    assert type(copy) is gym.spaces.Discrete and copy.n == space.n


def test_illegal_actions_raise_value_errors_naming_agent_and_action(tiny_env):
    env = tiny_env(forward_rule="free")
    obs, _ = env.reset(seed=0)
    (agent,) = obs
    k = env.possible_agents.index(agent)
    other = env.possible_agents[1 - k]
    g = env.builder.pad[0]
    cases = [
        ({agent: g + k}, rf"agent {agent}: action {g + k} is masked \(the no-op slot\)"),
        ({agent: g + 2}, rf"agent {agent}: action {g + 2} out of range \[0, {g + 2}\)"),
        ({agent: -1}, rf"agent {agent}: action -1 out of range"),
        ({agent: 1.5}, rf"agent {agent}: action must be an integer, got 1\.5"),
        ({agent: "0"}, rf"agent {agent}: action must be an integer"),
        ({other: 0}, rf"no action for the acting agent {agent}"),
        ({agent: 0, other: 0}, rf"agent {other} acted, but {agent} is the acting agent"),
        ({}, rf"no action for the acting agent {agent}"),
    ]
    for action, pattern in cases:
        with pytest.raises(ValueError, match=pattern):
            env.step(action)
    # a padding slot of the agent with fewer groups (sc1 has 8 of 16)
    if agent != "sc1":
        obs, *_ = env.step({agent: g + 1})
        agent = "sc1"
    assert obs["sc1"]["action_mask"][8:g].sum() == 0
    with pytest.raises(ValueError, match=rf"agent sc1: action {g - 1} is masked \(GPU-group slot"):
        env.step({"sc1": g - 1})
    # numpy integers are fine, and refused actions leave the env unharmed
    legal = np.int64(np.flatnonzero(obs["sc1"]["action_mask"])[0])
    env.step({"sc1": legal})


def test_gymnasium_registry_and_rllib_registration():
    import ray
    from ray.tune.registry import ENV_CREATOR, _global_registry

    ray_was_up = ray.is_initialized()
    assert envs.ENV_ID.endswith("-v1") and envs.ENV_ID in gym.registry
    made = gym.make(envs.ENV_ID, config=TINY)
    assert isinstance(made.unwrapped, ClusterPlacementEnv)
    obs, _ = made.reset(seed=0)
    assert list(obs) == [made.unwrapped.acting_agent]
    assert envs.register_rllib() == envs.ENV_ID
    assert _global_registry.contains(ENV_CREATOR, envs.ENV_ID)
    creator = _global_registry.get(ENV_CREATOR, envs.ENV_ID)
    env = creator({"config": TINY, "env": {"forward_rule": "free", "window_jobs": 7}, "seed": 4})
    assert env.env_config.forward_rule == "free" and env.env_config.window_jobs == 7
    assert ray.is_initialized() == ray_was_up


def test_import_envs_does_not_import_ray():
    code = "import sys, envs; print('ray' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    assert out.stdout.split() == ["False", "False"]


def test_parallel_env_builds_and_steps_without_importing_ray():
    """The PettingZoo adapter wraps the Ray-free core (a ~16 s ray.rllib import is not
    the price of the PettingZoo env)."""
    code = (
        "import sys, envs; from envs.cluster_env import ClusterPlacementCore;"
        f"env = envs.make_parallel_env({str(TINY)!r}); obs, _ = env.reset(seed=0);"
        "a = env.acting_agent; env.step({a: env.action_space(a).sample()});"
        "print('ray' in sys.modules, isinstance(env.env, ClusterPlacementCore))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    assert out.stdout.split() == ["False", "True"]


def test_rllib_env_is_the_core_with_rllibs_base():
    from ray.rllib.env.multi_agent_env import MultiAgentEnv

    from envs.cluster_env import ClusterPlacementCore

    assert issubclass(ClusterPlacementEnv, ClusterPlacementCore)
    assert issubclass(ClusterPlacementEnv, MultiAgentEnv)
    assert not issubclass(ClusterPlacementCore, MultiAgentEnv)


@pytest.mark.parametrize("name", ["tiny", "default"])
def test_parallel_action_space_sample_is_legal_for_every_agent(name):
    """``action_space(a).sample()`` draws under ``a``'s mask, as the parallel module's
    docstring says: a legal action for the acting agent, the no-op for the others."""
    env = envs.make_parallel_env(CONFIGS[name]())
    obs, _ = env.reset(seed=0)
    for a in env.possible_agents:
        env.action_space(a).seed(1)
    drawn = set()
    for _ in range(150):
        actions = {a: env.action_space(a).sample() for a in env.agents}
        for a, action in actions.items():
            assert obs[a]["action_mask"][action] == 1, (a, action)
        drawn.add(int(actions[env.acting_agent]))
        obs, _, term, trunc, _ = env.step(actions)
        if not env.agents:
            break
    assert len(drawn) > 1
    # after the episode: no mask, any action of the space
    assert 0 <= env.action_space(env.possible_agents[0]).sample() < env.action_space("sc0").n
