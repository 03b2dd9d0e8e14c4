"""The ``interference:`` section of an experiment config: how ``marl-sched interference
fit`` simulates its samples and trains the interference MLP.

Parsed by :func:`agents.config.interference_config`; every name here is also importable
from :mod:`agents.config`. Torch-free, unlike :mod:`agents.interference`, so checking a
config's section imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.model_section import MAX_LAYERS, MAX_WIDTH
from marl_sched.config import check, check_bounds

#: the most samples ``interference fit`` may simulate (the shipped model: 100,000)
MAX_SAMPLES = 10_000_000


@dataclass(frozen=True)
class InterferenceConfig:
    """The ``interference:`` section of an experiment config.

    Attributes:
        samples: simulated samples to generate (train + validation + test).
        seed: root seed of sample generation, the split and the initial weights.
        hidden: widths of the MLP's hidden layers.
        activation: hidden activation, ``silu``, ``relu`` or ``tanh``.
        epochs: maximum passes over the training samples.
        patience: stop after this many epochs without a better validation loss.
        lr: Adam learning rate (halved when the validation loss stalls).
        batch_size: samples per gradient step.
        weight_decay: Adam weight decay.
        val_fraction: share of simulations held out for early stopping.
        test_fraction: share of simulations held out for the reported accuracy.
        config_topology_fraction: share of simulations run on the experiment
            config's topology; the rest use random small topologies.
        real_data: folder with ``profiles/`` of real measurements, relative to the
            repo root (empty = skip the real evaluation).
    """

    samples: int = 100000
    seed: int = 0
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "silu"
    epochs: int = 200
    patience: int = 20
    lr: float = 2e-3
    batch_size: int = 512
    weight_decay: float = 0.0
    val_fraction: float = 0.1
    test_fraction: float = 0.15
    config_topology_fraction: float = 0.25
    real_data: str = "../shared/data"

    def validate(self, where: str, key: str) -> None:
        check_bounds(self, {"samples": (50, MAX_SAMPLES)}, where, key)
        check(
            1 <= len(self.hidden) <= MAX_LAYERS,
            where,
            f"{key}.hidden",
            f"needs 1 to {MAX_LAYERS} layers, got {len(self.hidden)}",
        )
        for i, h in enumerate(self.hidden):
            check(h >= 1, where, f"{key}.hidden[{i}]", f"must be >= 1, got {h}")
            check(h <= MAX_WIDTH, where, f"{key}.hidden[{i}]", f"must be <= {MAX_WIDTH}, got {h}")
        check_bounds(
            self,
            {"epochs": (1, 10**5), "patience": (1, 10**5), "batch_size": (1, 10**6),
             "seed": (0, 2**32 - 1)},
            where,
            key,
        )  # fmt: skip
        check(
            self.activation in ("silu", "relu", "tanh"),
            where,
            f"{key}.activation",
            f"must be one of silu, relu, tanh, got {self.activation!r}",
        )
        for name in ("epochs", "patience", "batch_size"):
            value = getattr(self, name)
            check(value >= 1, where, f"{key}.{name}", f"must be >= 1, got {value}")
        check(self.lr > 0, where, f"{key}.lr", f"must be > 0, got {self.lr}")
        check(self.weight_decay >= 0, where, f"{key}.weight_decay", "must be >= 0")
        for name in ("val_fraction", "test_fraction"):
            value = getattr(self, name)
            check(0 < value < 0.5, where, f"{key}.{name}", f"must be in (0, 0.5), got {value}")
        check(
            0 <= self.config_topology_fraction <= 1,
            where,
            f"{key}.config_topology_fraction",
            f"must be in [0, 1], got {self.config_topology_fraction}",
        )
