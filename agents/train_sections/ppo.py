"""The algorithm's part of ``train:``: which RLlib algorithm, its hyperparameters, the
advantages, the env runners, and the RLlib passthrough (``train.rllib``).

:class:`PPOSection` is one of the four bases of :class:`agents.config.TrainConfig`; its
keys stay flat in the YAML (``train.lr``, ``train.rllib.training``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from marl_sched.config import ARCHIVE_TAG, check, check_bounds

#: the RLlib algorithms (train.algorithm) whose Learner needs only the APIs
#: :class:`agents.rl_module.HierarchicalGNNModule` implements
ALGORITHMS = ("PPO",)
#: the registry's algorithms of studies that no longer ship (no checkpoint was trained
#: with them); their code is kept at git tag ``ARCHIVE_TAG``
RETIRED_ALGORITHMS = ("APPO", "IMPALA")
_OFFLINE = "offline: it learns from recorded episodes, not from the environment"
_Q = (
    "its Learner needs Q-networks (RLlib's QNetAPI); our RLModule outputs masked policy "
    "logits and a state value"
)
#: the registry's other algorithms, and why train.algorithm refuses each
#: (tests/agents/test_algorithm.py checks the three tables against RLlib's own registry)
REFUSED_ALGORITHMS = {
    "DQN": _Q,
    "SAC": _Q,
    "BC": _OFFLINE,
    "MARWIL": _OFFLINE,
    "CQL": _OFFLINE,
    "IQL": _OFFLINE,
    "DreamerV3": "it trains its own world-model RLModule, not ours",
}
#: how the policy gradient's advantages are computed (train.advantage)
ADVANTAGES = ("gae", "group")
#: how each training window's advantages are weighed (train.advantage_scale;
#: agents.group_baseline, "Weighing the windows")
ADVANTAGE_SCALES = ("batch", "window")

#: the range of each count of this section (the low end repeats the checks of
#: :meth:`PPOSection.validate`, so the message names both limits), checked before Ray starts
PPO_BOUNDS = {
    "iterations": (1, 10**7),
    "train_batch_size": (1, 10**7),
    "minibatch_size": (1, 10**7),
    "num_epochs": (1, 10**4),
    "seed": (0, 2**32 - 1),
    "num_env_runners": (0, 1024),
    "num_envs_per_env_runner": (1, 1024),
}


@dataclass(frozen=True)
class RLlibConfig:
    """Any ``AlgorithmConfig`` setting, passed through to RLlib (``train.rllib``).

    Each mapping goes to the setter of the same name (``config.training(**training)``
    ...) after the ``train:`` keys', so it wins over them; RLlib checks them when the
    command starts (:func:`agents.algorithm.apply_rllib`: exit 2 naming
    ``train.rllib.<setter>.<key>``).

    Attributes:
        training: e.g. ``kl_target``, ``use_critic``, ``entropy_coeff`` schedules.
        env_runners: e.g. ``rollout_fragment_length`` (not ``num_env_runners``).
        learners: e.g. ``num_learners``, ``num_gpus_per_learner``.
    """

    training: dict[str, Any] = field(default_factory=dict)
    env_runners: dict[str, Any] = field(default_factory=dict)
    learners: dict[str, Any] = field(default_factory=dict)

    def validate(self, where: str, key: str) -> None:
        check(
            "num_env_runners" not in self.env_runners,
            where,
            f"{key}.env_runners.num_env_runners",
            "set train.num_env_runners instead (Tune reserves a CPU per env runner from it)",
        )


@dataclass(frozen=True)
class PPOSection:
    """Multi-agent PPO on RLlib's new API stack.

    Attributes:
        algorithm: ``PPO`` (:data:`ALGORITHMS`); :data:`REFUSED_ALGORITHMS` and
            :data:`RETIRED_ALGORITHMS` are refused.
        iterations: PPO iterations (``algo.train()`` calls) of a run.
        lr: Adam learning rate.
        gamma: discount per decision.
        gae_lambda: GAE λ.
        advantage: ``gae`` (RLlib's GAE) or ``group`` (return-to-go against the other
            rollouts of the same window; :mod:`agents.group_baseline`).
        group_size: with ``group``, rollouts per training window (>= 2).
        advantage_scale: with ``group``: ``batch`` (seconds of average JCT)
            or ``window`` (divided by the window's mean ``|team return|``).
        train_batch_size: env steps (decisions, all agents) per iteration.
        minibatch_size: SGD minibatch, in env steps.
        num_epochs: SGD passes over each train batch.
        entropy_coeff: entropy bonus.
        clip_param: PPO ratio clip.
        vf_loss_coeff: weight of the value loss.
        vf_clip_param: clip of the value loss (in reward units).
        grad_clip: global gradient-norm clip (null = none).
        kl_coeff: weight of the KL penalty in the loss (0: plain clipped PPO; the KL is
            logged either way).
        seed: seed of the environment's episode sampling and of torch.
        num_env_runners: RLlib env runners (0 = sample in the driver).
        num_envs_per_env_runner: vectorised envs per runner.
        rllib: any other RLlib setting (:class:`RLlibConfig`).
    """

    algorithm: str = "PPO"
    iterations: int = 40
    lr: float = 3e-5
    gamma: float = 0.99
    gae_lambda: float = 0.95
    advantage: str = "gae"
    group_size: int = 4
    advantage_scale: str = "batch"
    train_batch_size: int = 2000
    minibatch_size: int = 250
    num_epochs: int = 4
    entropy_coeff: float = 0.0
    clip_param: float = 0.1
    vf_loss_coeff: float = 0.5
    vf_clip_param: float = 10.0
    grad_clip: float | None = 1.0
    kl_coeff: float = 0.0
    seed: int = 0
    num_env_runners: int = 0
    num_envs_per_env_runner: int = 1
    rllib: RLlibConfig = field(default_factory=RLlibConfig)

    def validate(self, where: str, key: str) -> None:
        check_bounds(self, PPO_BOUNDS, where, key)
        for name in ("iterations", "train_batch_size", "minibatch_size", "num_epochs",
                     "num_envs_per_env_runner"):  # fmt: skip
            value = getattr(self, name)
            check(value >= 1, where, f"{key}.{name}", f"must be >= 1, got {value}")
        for name in ("num_env_runners", "seed", "kl_coeff"):
            value = getattr(self, name)
            check(value >= 0, where, f"{key}.{name}", f"must be >= 0, got {value}")
        check(self.algorithm not in RETIRED_ALGORITHMS, where, f"{key}.algorithm",
              f"{self.algorithm!r} belongs to a study that no longer ships; its code is "
              f"kept at git tag {ARCHIVE_TAG}")  # fmt: skip
        algos, why = ", ".join(ALGORITHMS), REFUSED_ALGORITHMS.get(self.algorithm)
        check(self.algorithm not in REFUSED_ALGORITHMS, where, f"{key}.algorithm",
              f"{self.algorithm} cannot train this agent: {why} (use one of {algos})")  # fmt: skip
        check(self.algorithm in ALGORITHMS, where, f"{key}.algorithm",
              f"must be one of {algos}, got {self.algorithm!r}")  # fmt: skip
        for name in ("lr", "clip_param", "vf_clip_param"):
            value = getattr(self, name)
            check(value > 0, where, f"{key}.{name}", f"must be > 0, got {value}")
        self._validate_advantages(where, key)
        for name in ("gamma", "gae_lambda"):
            value = getattr(self, name)
            check(0 <= value <= 1, where, f"{key}.{name}", f"must be in [0, 1], got {value}")
        check(self.entropy_coeff >= 0, where, f"{key}.entropy_coeff",
              f"must be >= 0, got {self.entropy_coeff}")  # fmt: skip
        check(self.minibatch_size <= self.train_batch_size, where, f"{key}.minibatch_size",
              f"must be <= train_batch_size ({self.train_batch_size}), "
              f"got {self.minibatch_size}")  # fmt: skip
        if self.grad_clip is not None:
            check(self.grad_clip > 0, where, f"{key}.grad_clip", "must be > 0 or null")

    def _validate_advantages(self, where: str, key: str) -> None:
        """``advantage`` and its settings."""
        check(self.advantage != "job", where, f"{key}.advantage",
              f"job belongs to a study that no longer ships; its code is kept at git tag "
              f"{ARCHIVE_TAG}")  # fmt: skip
        for name, choices in (("advantage", ADVANTAGES), ("advantage_scale", ADVANTAGE_SCALES)):
            value = getattr(self, name)
            check(value in choices, where, f"{key}.{name}",
                  f"must be one of {', '.join(choices)}, got {value!r}")  # fmt: skip
        if self.advantage == "group":
            check(self.group_size >= 2, where, f"{key}.group_size",
                  f"must be >= 2 with {self.advantage}")  # fmt: skip
        if self.advantage_scale != "batch":
            check(self.advantage == "group", where, f"{key}.advantage_scale",
                  f"{self.advantage_scale} needs advantage: group, "
                  f"got {self.advantage}")  # fmt: skip
