"""Vectorised sampling (``train.num_envs_per_env_runner``): RLlib's synchronous vector
env over ``ClusterPlacement-v1`` gives every sub-env the episodes the plain env gives
under the same seed, and a batched forward of the RLModule equals its batch-1 forward.
No Ray session: the vector env and the module are plain objects."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.env.vector.registration import make_vec

from agents.algorithm import env_setup
from agents.config import model_config, train_config
from agents.rl_module import HierarchicalGNNModule
from marl_sched.config import REPO_ROOT, load_config

CONFIG = REPO_ROOT / "configs" / "train_tiny.yaml"
ENV_ID = "marl-sched-test-vector-v0"


@pytest.fixture(scope="module")
def setup():
    cfg = load_config(CONFIG)
    mc, tc = model_config(cfg), train_config(cfg)
    env_cls, env_config, builder = env_setup(cfg, mc, tc, seed=3)
    return cfg, mc, env_cls, env_config, builder


def _pick(mask: np.ndarray, step: int) -> int:
    """A legal action chosen without randomness shared between envs (step-indexed)."""
    legal = np.flatnonzero(mask)
    return int(legal[(7 * step + 3) % len(legal)])


def _rollout(env, seed: int, steps: int):
    """(agent, obs, reward, done) per step of one env driven by :func:`_pick`."""
    obs, out = env.reset(seed=seed)[0], []
    step = env.step
    for t in range(steps):
        agent, o = next(iter(obs.items()))
        obs, rewards, terminated, _, _ = step({agent: _pick(o["action_mask"], t)})
        out.append((agent, o, rewards.get(agent), terminated["__all__"]))
        if terminated["__all__"]:
            break
    return out


def test_vector_env_gives_the_plain_envs_episodes_under_the_same_seeds(setup):
    _, _, env_cls, env_config, _ = setup
    n, seed, steps = 3, 11, 60
    gym.register(ENV_ID, entry_point=lambda: env_cls(env_config), disable_env_checker=True)
    try:
        vec = make_vec(ENV_ID, num_envs=n)
        obs, _ = vec.reset(seed=seed)  # sub-env i is reset with seed + i (RLlib's rule)
        vec_out = [[] for _ in range(n)]
        done = [False] * n
        for t in range(steps):
            actions = []
            for i in range(n):  # a finished sub-env resets itself and plays on, unrecorded
                agent, o = next(iter(obs[i].items()))
                actions.append({agent: _pick(o["action_mask"], t)})
            cur = obs
            obs, rewards, terminated, _, _ = vec.step(actions)
            for i in range(n):
                if done[i]:
                    continue
                agent, o = next(iter(cur[i].items()))
                vec_out[i].append((agent, o, rewards[i].get(agent), terminated[i]["__all__"]))
                done[i] = terminated[i]["__all__"]
        vec.close()
    finally:
        gym.registry.pop(ENV_ID, None)
    for i in range(n):
        ref = _rollout(env_cls(env_config), seed + i, steps)
        assert len(ref) == len(vec_out[i])
        for (a1, o1, r1, d1), (a2, o2, r2, d2) in zip(ref, vec_out[i], strict=True):
            assert a1 == a2 and r1 == r2 and d1 == d2
            for key in o1:
                np.testing.assert_array_equal(o1[key], o2[key], err_msg=key)
    # the sub-envs really sample different episodes (else the test shows nothing)
    assert any(
        not np.array_equal(vec_out[0][k][1]["job_x"], vec_out[1][k][1]["job_x"])
        for k in range(min(len(vec_out[0]), len(vec_out[1])))
    )


def test_batched_module_forward_equals_batch_one_forward(setup):
    _, mc, env_cls, env_config, builder = setup
    env = env_cls(env_config)
    obs, _ = env.reset(seed=5)
    pool = []
    for t in range(32):  # 32 real observations of one episode (different jobs, agents)
        agent, o = next(iter(obs.items()))
        pool.append(o)
        obs, _, terminated, _, _ = env.step({agent: _pick(o["action_mask"], t)})
        if terminated["__all__"]:
            obs, _ = env.reset(seed=6 + t)
    torch.manual_seed(0)
    model = {k: v for k, v in dataclasses.asdict(mc).items() if k != "share_parameters"}
    module = HierarchicalGNNModule(
        observation_space=builder.observation_space,
        action_space=builder.action_space,
        model_config=model,
    )
    for head in (module.gnn.group_head, module.gnn.forward_head, module.gnn.hint_head):
        torch.nn.init.normal_(head[-1].weight, std=0.5)  # logits that differ visibly

    def stacked(obs_list):
        return {k: torch.as_tensor(np.stack([o[k] for o in obs_list])) for k in obs_list[0]}

    with torch.no_grad():
        both = module.forward_exploration({Columns.OBS: stacked(pool)})
        vals = module.compute_values({Columns.OBS: stacked(pool)})
        for i, o in enumerate(pool):
            alone = module.forward_exploration({Columns.OBS: stacked([o])})
            torch.testing.assert_close(
                alone[Columns.ACTION_DIST_INPUTS][0],
                both[Columns.ACTION_DIST_INPUTS][i],
                atol=1e-6,
                rtol=1e-6,
            )
            v = module.compute_values({Columns.OBS: stacked([o])})
            torch.testing.assert_close(v[0], vals[i], atol=1e-6, rtol=1e-6)
    assert both[Columns.ACTION_DIST_INPUTS].std() > 0.1
