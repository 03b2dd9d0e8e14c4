"""The RLlib algorithm of a training run: the environment it samples, one RLModule per
agent (or one shared), and the ``AlgorithmConfig`` of ``train.algorithm``
(:func:`algorithm_base`: RLlib's registry with our :mod:`agents.learner`, only the
settings it has) with ``train.rllib`` on top (:func:`apply_rllib`: RLlib's own checks,
each failure one line naming the key, exit 2).
"""

from __future__ import annotations

import dataclasses
import inspect
from functools import partial
from typing import Any

from agents.config import ModelConfig, TrainConfig, split_windows
from marl_sched.config import ExperimentConfig
from marl_sched.errors import InputError


def _map_shared(agent_id, *args, **kwargs) -> str:
    return "shared"


def _map_own(agent_id, *args, **kwargs) -> str:
    return str(agent_id)


def env_setup(cfg: ExperimentConfig, mc: ModelConfig, tc: TrainConfig, seed: int):
    """(env class, RLlib env_config, observation builder of the topology): the one
    environment ``ClusterPlacement-v1`` with episodes of ``train.episode_jobs`` jobs
    drawn from the config's workload, ``train.extra_windows`` and, with
    ``train.split_share``, the benchmark's train-split scenarios."""
    from envs.config import env_config as parse_env
    from envs.observations import ObservationBuilder
    from envs.rllib_env import ClusterPlacementEnv
    from marl_sched.runner import build_cluster

    topo, perf = build_cluster(cfg)
    env_cfg = parse_env(cfg)
    builder = ObservationBuilder(topo, perf, env_cfg)
    config = {
        "config": cfg,
        "env": {"window_jobs": tc.episode_jobs, "window_warmup_jobs": tc.episode_warmup_jobs},
        "seed": seed,
        "workload_share": tc.workload_share,
        "windows": [
            {**dataclasses.asdict(w), "trace": str(cfg.resolve_path(w.trace))}
            for w in (*tc.extra_windows, *split_windows(tc))
        ],
    }
    return ClusterPlacementEnv, config, builder


TEAM_RETURN = "team_return"
TEAM_AVG_JCT = "team_avg_jct_s"
NORMALISED_RETURN = "normalised_return"


def log_team_return(*, episode, metrics_logger=None, **kwargs) -> None:
    """RLlib ``on_episode_end``: log the episode's team return, average JCT and
    normalised return from the env's final info."""
    if metrics_logger is None or not episode.is_terminated:
        return
    for sa in episode.agent_episodes.values():
        infos = sa.get_infos()
        info = infos[-1] if len(infos) else {}
        if TEAM_RETURN in info:
            metrics_logger.log_value(TEAM_RETURN, float(info[TEAM_RETURN]), window=100)
            metrics_logger.log_value(TEAM_AVG_JCT, float(info["avg_jct_s"]), window=100)
            metrics_logger.log_value(
                NORMALISED_RETURN, float(info["normalised_return"]), window=100
            )
            return


def module_ids(agent_ids: list[str], mc: ModelConfig) -> list[str]:
    return ["shared"] if mc.share_parameters or len(agent_ids) == 1 else list(agent_ids)


def algo_config(
    cfg: ExperimentConfig, mc: ModelConfig, tc: TrainConfig, seed: int, agent_ids: list[str]
):
    """The RLlib ``AlgorithmConfig`` of a run: ``train.algorithm``'s (``PPOConfig``),
    with our RLModule on the new API stack and
    ``train.rllib`` on top (:func:`apply_rllib`; ``InputError`` on a bad key). With
    ``train.advantage: group`` the env is
    :class:`envs.group_rollouts.GroupRolloutEnv`."""
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from agents.rl_module import HierarchicalGNNModule

    env, env_config, _ = env_setup(cfg, mc, tc, seed)
    if tc.advantage == "group":  # each window K times in a row, steps tagged with time and job
        from envs.group_rollouts import GroupRolloutEnv

        env, env_config = GroupRolloutEnv, {**env_config, "group_size": tc.group_size}
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
        "vf_clip_param": tc.vf_clip_param,
        "grad_clip": tc.grad_clip,
        "use_kl_loss": True,
        "kl_coeff": tc.kl_coeff,
    }
    config, training = algorithm_base(tc, training, cfg.source, agent_ids)
    config = (
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
        .callbacks(on_episode_end=log_team_return)
        .training(**training)
        .debugging(seed=seed)
    )
    return apply_rllib(config, tc.rllib, cfg.source)  # train.rllib on top, validated


#: the RLlib ``training()`` keys that are ``train:`` fields under another name
TRAIN_FIELD = {
    "lambda_": "gae_lambda",
    "train_batch_size_per_learner": "train_batch_size",
    "use_kl_loss": "kl_coeff",
}
#: the setters ``train.rllib`` passes through, in the order they are applied
SETTERS = ("training", "env_runners", "learners")


def _first_line(exc: Exception) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else exc.__class__.__name__


def algorithm_base(tc, training: dict[str, Any], where: str, agent_ids: list[str]):
    """(the algorithm's default ``AlgorithmConfig`` with our Learner, the ``training``
    settings it has). A ``train:`` key the algorithm lacks, set to other than its
    default, raises ``InputError``. ``agent_ids``: the env's agents (their own figures)."""
    from ray.rllib.algorithms.registry import ALGORITHMS

    from agents import learner

    _, config = ALGORITHMS[tc.algorithm]()
    defaults = type(tc)()
    kept = {}
    for key, value in training.items():
        if hasattr(config, key):
            kept[key] = value
            continue
        name = TRAIN_FIELD.get(key, key)
        if getattr(tc, name, None) != getattr(defaults, name, None):
            raise InputError(
                f"{where}: train.{name}: {tc.algorithm} has no such setting "
                f"({type(config).__name__} has no {key!r})"
            )
    config = config.learners(
        learner_class=learner.LEARNERS[tc.algorithm],
        learner_connector=partial(learner.agent_index_connector, tuple(agent_ids)),
        # agent ids for the per-agent figures; GAE or the group baseline (agents.learner)
        learner_config_dict={
            learner.AGENT_IDS: list(agent_ids),
            "advantage": tc.advantage,
            learner.ADVANTAGE_SCALE: tc.advantage_scale,
        },
    )
    return config, kept


def apply_rllib(config, rllib, where: str):
    """``config`` with every ``train.rllib`` setting applied and RLlib's
    ``validate()`` passed; ``InputError`` naming ``train.rllib.<setter>.<key>``."""
    for setter in SETTERS:
        for key, value in getattr(rllib, setter).items():
            dotted = f"train.rllib.{setter}.{key}"
            if key not in _setter_keys(config, setter):
                raise InputError(
                    f"{where}: {dotted}: not a setting of {type(config).__name__}.{setter}()"
                )
            try:
                getattr(config, setter)(**{key: value})
            except (TypeError, ValueError) as exc:
                raise InputError(f"{where}: {dotted}: {_first_line(exc)}") from None
    try:
        config.validate()
    except (ValueError, TypeError) as exc:
        raise InputError(f"{where}: {_blame(rllib, str(exc))}: {_first_line(exc)}") from None
    return config


def _setter_keys(config, setter: str) -> set[str]:
    """The keyword arguments ``config.<setter>()`` takes: its own and, through
    ``**kwargs``, those of the same setter of every base class (``PPOConfig.training``
    passes ``lr`` on to ``AlgorithmConfig.training``)."""
    keys = set()
    for cls in type(config).__mro__:
        if setter in vars(cls):
            keys |= set(inspect.signature(vars(cls)[setter]).parameters)
    return keys - {"self", "kwargs"}


def _blame(rllib, message: str) -> str:
    """The ``train.rllib`` key RLlib's message names (in backticks or quotes), else
    ``train`` (the ``train:`` settings and the passthrough together)."""
    for setter in SETTERS:
        for key in getattr(rllib, setter):
            if f"`{key}`" in message or f"'{key}'" in message:
                return f"train.rllib.{setter}.{key}"
    return "train"


def needs_check(tc) -> bool:
    """Must the run's algorithm config be built before Ray starts to be checked (the
    default PPO with no passthrough is always valid, and importing RLlib is slow)?"""
    return (
        tc.advantage != "gae"  # the group baseline's env-option check
        or any(getattr(tc.rllib, s) for s in SETTERS)
    )
