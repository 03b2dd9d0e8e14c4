"""The RLlib algorithm of a training run: the environment it samples, one RLModule per
agent (or one shared), and the PPO/APPO config on RLlib's new API stack."""

from __future__ import annotations

import dataclasses

from agents.config import ModelConfig, TrainConfig
from marl_sched.config import ExperimentConfig


def _map_shared(agent_id, *args, **kwargs) -> str:
    return "shared"


def _map_own(agent_id, *args, **kwargs) -> str:
    return str(agent_id)


def env_setup(cfg: ExperimentConfig, mc: ModelConfig, tc: TrainConfig, seed: int):
    """(env class, RLlib env_config, observation builder of the topology): the one
    environment ``ClusterPlacement-v1`` with episodes of ``train.episode_jobs`` jobs
    drawn from the config's workload and ``train.extra_windows``."""
    from envs.cluster_env import ClusterPlacementEnv
    from envs.config import env_config as parse_env
    from envs.observations import ObservationBuilder
    from marl_sched.runner import build_cluster

    topo, perf = build_cluster(cfg)
    env_cfg = parse_env(cfg)
    builder = ObservationBuilder.from_config(topo, perf, env_cfg)
    config = {
        "config": cfg,
        "env": {"window_jobs": tc.episode_jobs},
        "seed": seed,
        "workload_share": tc.workload_share,
        "windows": [
            {**dataclasses.asdict(w), "trace": str(cfg.resolve_path(w.trace))}
            for w in tc.extra_windows
        ],
    }
    return ClusterPlacementEnv, config, builder


def module_ids(agent_ids: list[str], mc: ModelConfig) -> list[str]:
    return ["shared"] if mc.share_parameters or len(agent_ids) == 1 else list(agent_ids)


def algo_config(
    cfg: ExperimentConfig, mc: ModelConfig, tc: TrainConfig, seed: int, agent_ids: list[str]
):
    """The RLlib ``AlgorithmConfig`` of a run: ``PPOConfig`` or ``APPOConfig``
    (``train.algorithm``), with our RLModule on the new API stack.

    The KL to the sampling policy is always computed (``use_kl_loss``) so that it is
    logged; ``train.kl_coeff`` (default 0) is its weight in the loss."""
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from agents.rl_module import HierarchicalGNNModule

    env, env_config, _ = env_setup(cfg, mc, tc, seed)
    ids = module_ids(agent_ids, mc)
    model = {k: v for k, v in dataclasses.asdict(mc).items() if k != "share_parameters"}
    specs = {m: RLModuleSpec(module_class=HierarchicalGNNModule, model_config=model) for m in ids}
    training = {
        "lr": tc.lr,
        "gamma": tc.gamma,
        "lambda_": tc.gae_lambda,
        "train_batch_size_per_learner": tc.train_batch_size,
        "minibatch_size": tc.minibatch_size,
        "num_epochs": tc.num_epochs,
        "entropy_coeff": tc.entropy_coeff,
        "clip_param": tc.clip_param,
        "vf_loss_coeff": tc.vf_loss_coeff,
        "grad_clip": tc.grad_clip,
        "use_kl_loss": True,
        "kl_coeff": tc.kl_coeff,
    }
    if tc.algorithm == "APPO":
        from ray.rllib.algorithms.appo import APPOConfig

        # an iteration = train_batch_size env steps, as with PPO (APPO's default is
        # "as many as 10 s allow"); the learner in this process, as with PPO (APPO's
        # default is one remote learner actor, which a Tune trial has no CPU for)
        config = (
            APPOConfig()
            .reporting(
                min_time_s_per_iteration=0,
                min_sample_timesteps_per_iteration=tc.train_batch_size,
            )
            .learners(num_learners=0)
        )
    else:
        from ray.rllib.algorithms.ppo import PPOConfig

        from agents.learner import ClipFractionPPOLearner

        config = PPOConfig()
        training["vf_clip_param"] = tc.vf_clip_param
        training["learner_class"] = ClipFractionPPOLearner  # logs the clip fraction too
    return (
        config.environment(
            env,
            env_config=env_config,
            # RLlib's pre-check steps random actions, which the action mask forbids
            disable_env_checking=True,
        )
        .env_runners(
            num_env_runners=tc.num_env_runners,
            num_envs_per_env_runner=tc.num_envs_per_env_runner,
        )
        .multi_agent(
            policies=set(ids),
            policy_mapping_fn=_map_shared if len(ids) == 1 else _map_own,
        )
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=specs))
        .training(**training)
        .debugging(seed=seed)
    )


def gnn_weights(weights: dict[str, dict]) -> dict[str, dict]:
    """``{module: state}`` with only the network's ``gnn.`` tensors (APPO's learner
    also holds a target copy, ``_old_gnn.``, which inference never needs)."""
    return {m: {k: v for k, v in w.items() if k.startswith("gnn.")} for m, w in weights.items()}
