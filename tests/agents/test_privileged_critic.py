"""The privileged critic (``train.critic: privileged``): the actor never reads
``critic_x``, the value does, checkpoints act without it, and PPO trains it in RLlib."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from agents.rl_module import PLAIN_VALUES, HierarchicalGNNModule
from envs import make_env
from envs.observations import CRITIC_KEY
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.errors import InputError

TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")
MODEL = {"hidden": 16, "layers": 1, "exchange": True}


def _observations(critic_jobs: int, n: int = 24):
    env = make_env({"config": TINY, "env": {"window_jobs": 20}, "critic_jobs": critic_jobs})
    obs, _ = env.reset(seed=2)
    seen = []
    while len(seen) < n:
        agent, o = next(iter(obs.items()))
        seen.append(o)
        obs, _, terminated, _, _ = env.step({agent: int(np.flatnonzero(o["action_mask"])[-1])})
        if terminated["__all__"]:
            obs, _ = env.reset(seed=len(seen))
    space = env.observation_spaces["sc0"]
    batch = {k: torch.as_tensor(np.stack([o[k] for o in seen])) for k in seen[0]}
    return env, space, batch


def _module(env, space, inference_only: bool = False) -> HierarchicalGNNModule:
    torch.manual_seed(0)
    module = RLModuleSpec(
        module_class=HierarchicalGNNModule, observation_space=space,
        action_space=env.action_spaces["sc0"], model_config=MODEL,
        inference_only=inference_only,
    ).build()  # fmt: skip
    if module.critic is not None:  # a trained critic: its output layer no longer zero
        torch.nn.init.normal_(module.critic.head[-1].weight, std=1.0)
    return module


@pytest.fixture(scope="module")
def privileged():
    env, space, batch = _observations(critic_jobs=4)
    return env, space, batch, _module(env, space)


def test_logits_ignore_critic_x_and_the_value_reads_it(privileged):
    _, _, batch, module = privileged
    other = {**batch, CRITIC_KEY: batch[CRITIC_KEY].flip(0) + torch.randn_like(batch[CRITIC_KEY])}
    a = module.forward_train({Columns.OBS: batch})
    b = module.forward_train({Columns.OBS: other})
    assert torch.equal(a[Columns.ACTION_DIST_INPUTS], b[Columns.ACTION_DIST_INPUTS])
    assert torch.equal(a[PLAIN_VALUES], b[PLAIN_VALUES])
    assert (a[Columns.EMBEDDINGS] - b[Columns.EMBEDDINGS]).abs().min() > 0
    for fwd in (module.forward_inference, module.forward_exploration):
        assert torch.equal(
            fwd({Columns.OBS: batch})[Columns.ACTION_DIST_INPUTS],
            fwd({Columns.OBS: other})[Columns.ACTION_DIST_INPUTS],
        )
    # no gradient path from critic_x to the logits; one to the value
    x = batch[CRITIC_KEY].clone().requires_grad_(True)
    out = module.forward_train({Columns.OBS: {**batch, CRITIC_KEY: x}})
    assert (
        not out[Columns.ACTION_DIST_INPUTS].requires_grad
        or torch.autograd.grad(out[Columns.ACTION_DIST_INPUTS].sum(), x, allow_unused=True)[0]
        is None
    )
    (grad,) = torch.autograd.grad(out[Columns.EMBEDDINGS].sum(), x)
    assert grad.abs().sum() > 0


def test_the_actor_and_plain_value_equal_the_gnns_own(privileged):
    """``forward_padded`` of the same weights, without ``critic_x``: bit-identical."""
    _, _, batch, module = privileged
    plain = {k: v for k, v in batch.items() if k != CRITIC_KEY}
    logits, values = module.gnn.forward_padded(plain)
    out = module.forward_train({Columns.OBS: batch})
    assert torch.equal(out[Columns.ACTION_DIST_INPUTS], logits)
    assert torch.equal(out[PLAIN_VALUES], values)
    torch.testing.assert_close(module.compute_values({Columns.OBS: batch}),
                               out[Columns.EMBEDDINGS])  # fmt: skip


def test_a_new_critic_starts_as_the_plain_value():
    env, space, batch = _observations(critic_jobs=2, n=8)
    torch.manual_seed(1)
    module = RLModuleSpec(
        module_class=HierarchicalGNNModule,
        observation_space=space,
        action_space=env.action_spaces["sc0"],
        model_config=MODEL,
    ).build()
    out = module.forward_train({Columns.OBS: batch})
    assert torch.equal(out[Columns.EMBEDDINGS], out[PLAIN_VALUES])


def test_inference_modules_and_checkpoints_need_no_critic_x(privileged, tmp_path):
    from agents.algorithm import gnn_weights
    from agents.policy import MarlPolicy, load_checkpoint, manifest_for, save_modules
    from envs.config import env_config
    from envs.observations import ObservationBuilder
    from marl_sched.runner import build_cluster, load_workload, simulate

    env, space, batch, module = privileged
    runner = _module(env, space, inference_only=True)
    assert runner.critic is None
    runner.set_state(module.get_state(inference_only=True))
    plain = {k: v for k, v in batch.items() if k != CRITIC_KEY}
    assert torch.equal(
        runner.forward_inference({Columns.OBS: plain})[Columns.ACTION_DIST_INPUTS],
        module.forward_inference({Columns.OBS: batch})[Columns.ACTION_DIST_INPUTS],
    )
    # the checkpoint keeps the gnn only, and the plain observation signature
    weights = gnn_weights({"shared": module.get_state()})
    assert weights["shared"] and all(k.startswith("gnn.") for k in weights["shared"])
    cfg = load_config(TINY)
    topo, perf = build_cluster(cfg)
    builder = ObservationBuilder(topo, perf, env_config(cfg))
    manifest = manifest_for(builder, {**MODEL, "share_parameters": True}, ["shared"],
                            extra={"config": cfg.to_dict()})  # fmt: skip
    save_modules(tmp_path, weights, manifest)
    agents = load_checkpoint(tmp_path)
    metrics, _, _ = simulate(cfg, "marl", load_workload(cfg, perf), topo, perf,
                             policy=MarlPolicy(agents=agents))  # fmt: skip
    assert metrics["jobs_completed"] == 40


def test_the_config_keys_are_checked():
    from agents.config import train_config

    cfg = load_config(TINY)
    for train, key in (
        ({"critic": "oracle"}, "train.critic"),
        ({"critic": "privileged", "algorithm": "APPO"}, "train.critic"),
        ({"critic_jobs": 0}, "train.critic_jobs"),
        ({"critic_jobs": 257}, "train.critic_jobs"),
        ({"critic_lr": 0}, "train.critic_lr"),
        ({"advantage": "group", "group_size": 1}, "train.group_size"),
        ({"advantage": "group", "algorithm": "APPO"}, "train.advantage"),
        ({"advantage": "job", "group_size": 1}, "train.group_size"),
        ({"advantage": "job", "algorithm": "APPO"}, "train.advantage"),
        ({"job_gamma": 1.5}, "train.job_gamma"),
        ({"job_gamma": -0.1}, "train.job_gamma"),
        ({"advantage_scale": "episode"}, "train.advantage_scale"),
        ({"advantage_scale": "window"}, "train.advantage_scale"),  # needs group or job
    ):
        bad = dataclasses.replace(cfg, train={**(cfg.train or {}), **train})
        with pytest.raises(InputError, match=key):
            train_config(bad)


def test_ppo_trains_the_privileged_critic_inside_rllib(ray_session):
    """One PPO iteration on the tiny config: the env runners sample observations with
    ``critic_x``, the learner's critic moves off zero, both value heads are fitted and
    logged, and the value heads have their own optimizer."""
    from agents.algorithm import algo_config, env_setup
    from agents.config import model_config, train_config

    cfg = load_config(TINY)
    mc, tc = model_config(cfg), train_config(cfg)
    tc = dataclasses.replace(tc, critic="privileged", critic_jobs=4, critic_lr=1e-3,
                             train_batch_size=200)  # fmt: skip
    _, _, builder = env_setup(cfg, mc, tc, 0)
    algo = algo_config(cfg, mc, tc, 0, builder.agent_ids).build_algo()
    try:
        learner = algo.learner_group._learner
        module = learner.module["shared"]
        assert CRITIC_KEY in module.observation_space.spaces
        gnn_before = {k: v.clone() for k, v in module.gnn.state_dict().items()}
        result = algo.train()
        assert module.critic.head[-1].weight.abs().sum() > 0
        assert any(not torch.equal(v, module.gnn.state_dict()[k]) for k, v in gnn_before.items())
        assert sorted(learner._named_optimizers) == ["shared_critic", "shared_default_optimizer"]
    finally:
        algo.stop()
    figures = result["learners"]["shared"]
    for key in ("vf_loss", "plain_vf_loss", "vf_explained_var", "plain_vf_explained_var"):
        assert np.isfinite(figures[key]), key
    assert result["env_runners"]["num_env_steps_sampled"] >= 200
