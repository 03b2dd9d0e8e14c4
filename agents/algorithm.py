"""The RLlib ``AlgorithmConfig`` of ``train.algorithm``, and ``train.rllib`` on top.

:func:`algorithm_base` starts the config from RLlib's own registry
(``ray.rllib.algorithms.registry.ALGORITHMS``: ``PPOConfig``, ``APPOConfig``,
``IMPALAConfig``) with our Learner subclass (:mod:`agents.learner`: the clip fraction
for PPO, the value function's explained variance for APPO and IMPALA) and keeps only
the ``train:`` settings the algorithm has: a setting it lacks (IMPALA has no
``lambda_`` or ``clip_param``) is dropped when the config file leaves it at its
default, and refused (``InputError`` naming ``train.<key>``) when the file sets it.

:func:`apply_rllib` then passes ``train.rllib.training`` / ``env_runners`` /
``learners`` through the setters of the same names, one key at a time, and runs
``AlgorithmConfig.validate()``: RLlib's own checks. Whatever they raise becomes one
line naming the key (``configs/x.yaml: train.rllib.training.foo: ...``), exit 2.
:func:`needs_check` says when the CLI must build the config before Ray starts.
"""

from __future__ import annotations

import inspect
from functools import partial
from typing import Any

from marl_sched.errors import InputError

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
    settings it has). A ``train:`` key the algorithm has no setting for, set to other
    than its default, raises ``InputError`` (a resolved config names every key, so
    "set" means "not the default"). ``agent_ids``: the env's agents, whose own entropy
    and KL the learner logs (:class:`agents.learner.AddAgentIndex`)."""
    from ray.rllib.algorithms.impala import IMPALAConfig
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
        learner_config_dict={learner.AGENT_IDS: list(agent_ids)},
    )
    if isinstance(config, IMPALAConfig):  # APPO too
        # an iteration = train_batch_size env steps, as with PPO (their default is "as
        # many as 10 s allow"); the learner in this process, as with PPO (their
        # default is one remote learner actor, which a Tune trial has no CPU for)
        config = config.reporting(
            min_time_s_per_iteration=0,
            min_sample_timesteps_per_iteration=tc.train_batch_size,
        ).learners(num_learners=0)
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
    return tc.algorithm != "PPO" or any(getattr(tc.rllib, s) for s in SETTERS)
