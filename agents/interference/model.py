"""The interference MLP in torch, and its export to the numpy ``.npz`` format: input
(n, F) raw features, output (n,) ``ln(slowdown)``, standardisation as buffers, so it
matches :class:`marl_sched.interference.InterferenceModel`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from marl_sched.interference import N_FEATURES, InterferenceModel

_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "silu": nn.SiLU}


class InterferenceMLP(nn.Module):
    """``z = MLP((x - x_mean) / x_std) · y_std + y_mean``, z = predicted ln(slowdown).

    Args:
        hidden: hidden layer widths, e.g. ``(64, 64)``.
        activation: ``silu`` (default), ``relu`` or ``tanh``.
        n_features: input width (default: the feature layout's).
    """

    def __init__(
        self,
        hidden: Sequence[int] = (64, 64),
        activation: str = "silu",
        n_features: int = N_FEATURES,
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            known = ", ".join(_ACTIVATIONS)
            raise ValueError(f"unknown activation {activation!r} (known: {known})")
        self.activation = activation
        layers: list[nn.Module] = []
        width = n_features
        for h in hidden:
            layers += [nn.Linear(width, int(h)), _ACTIVATIONS[activation]()]
            width = int(h)
        layers.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*layers)
        self.register_buffer("x_mean", torch.zeros(n_features))
        self.register_buffer("x_std", torch.ones(n_features))
        self.register_buffer("y_scale", torch.tensor([0.0, 1.0]))

    def set_normalisation(self, x: np.ndarray, y: np.ndarray) -> None:
        """Standardise on training features ``x`` (n, F) and log slowdowns ``y`` (n,)."""
        std = x.std(axis=0)
        std = np.where(std > 1e-6, std, 1.0)
        self.x_mean.copy_(torch.as_tensor(x.mean(axis=0), dtype=torch.float32))
        self.x_std.copy_(torch.as_tensor(std, dtype=torch.float32))
        y_std = float(y.std()) if float(y.std()) > 1e-6 else 1.0
        self.y_scale.copy_(torch.tensor([float(y.mean()), y_std]))

    def normalised(self, x: torch.Tensor) -> torch.Tensor:
        """The network's raw output on raw features (the training target's scale)."""
        return self.net((x - self.x_mean) / self.x_std)[:, 0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.normalised(x) * self.y_scale[1] + self.y_scale[0]


def export_model(
    module: InterferenceMLP, calibration_sha256: str, metadata: dict
) -> InterferenceModel:
    """The numpy :class:`InterferenceModel` computing the same function as ``module``."""
    linears = [m for m in module.net if isinstance(m, nn.Linear)]
    return InterferenceModel(
        weights=[m.weight.detach().cpu().numpy().T.copy() for m in linears],
        biases=[m.bias.detach().cpu().numpy().copy() for m in linears],
        x_mean=module.x_mean.cpu().numpy(),
        x_std=module.x_std.cpu().numpy(),
        y_mean=float(module.y_scale[0]),
        y_std=float(module.y_scale[1]),
        activation=module.activation,
        calibration_sha256=calibration_sha256,
        metadata=metadata,
    )
