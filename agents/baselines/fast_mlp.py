"""Greedy inference of the baselines' small MLPs in numpy.

A trained policy scores every server for every task of every job: thousands of tiny
forward passes per run, where torch's per-call overhead dominates. :class:`FastMLP`
copies the weights of a chain of ``nn.Linear`` / ``nn.Tanh`` modules once and runs
them in float64 numpy (the same scores as torch up to float rounding; a test checks).
The weights are copied at construction: build a new one after the network changes.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from torch import nn


class FastMLP:
    """``modules`` (Linear and Tanh, in order) as a numpy function of the last axis."""

    def __init__(self, modules: Iterable[nn.Module]) -> None:
        self.layers: list[tuple[np.ndarray, np.ndarray] | None] = []
        for m in modules:
            if isinstance(m, nn.Linear):
                w = m.weight.detach().double().numpy().T.copy()
                self.layers.append((w, m.bias.detach().double().numpy().copy()))
            elif isinstance(m, nn.Tanh):
                self.layers.append(None)
            else:
                raise TypeError(f"FastMLP: unsupported module {type(m).__name__}")

    def __call__(self, x: np.ndarray) -> np.ndarray:
        h = np.asarray(x, dtype=np.float64)
        for layer in self.layers:
            h = np.tanh(h) if layer is None else h @ layer[0] + layer[1]
        return h
