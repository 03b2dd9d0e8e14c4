"""The RLlib side: :class:`HierarchicalGNNModule`, the ``TorchRLModule`` around
:class:`agents.gnn.HierarchicalGNN` (``model_config``: :class:`agents.config.ModelConfig`'s
fields; feature dims read from the observation space).

- Masking is inside the network (:data:`agents.gnn.MASKED_LOGIT`); the value comes out of
  the same forward (``Columns.EMBEDDINGS``), so a PPO update runs the GNN once.
- :meth:`HierarchicalGNNModule.train` sets the same flags as ``nn.Module.train`` without
  ``__setattr__`` (RLlib switches modes around every exploration forward); exploration
  and inference run under ``torch.inference_mode``.
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from torch import nn

from agents.gnn import build_gnn
from envs.observations import feature_dims


class HierarchicalGNNModule(TorchRLModule, ValueFunctionAPI):
    """PPO-ready module: masked logits over ``G_max + A + H`` actions and a value."""

    def setup(self) -> None:
        self.dims = feature_dims(self.observation_space)
        n_actions = self.dims["G_max"] + self.dims["A"] + self.dims["H"]
        if getattr(self.action_space, "n", None) != n_actions:
            raise ValueError(
                f"action space {self.action_space} does not match G_max + A + H = {n_actions}"
            )
        self.gnn = build_gnn(self.dims, self.model_config or {})

    def train(self, mode: bool = True) -> HierarchicalGNNModule:
        """``nn.Module.train(mode)``: ``training = mode`` on this module and every
        submodule, written without ``nn.Module.__setattr__``."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        stack = [self]
        while stack:
            m = stack.pop()
            m.__dict__["training"] = mode  # never a parameter, buffer or submodule
            for child in m._modules.values():
                if child is None:
                    continue
                if type(child).train is nn.Module.train:
                    stack.append(child)
                else:  # a train() of its own: called, as nn.Module.train calls it
                    child.train(mode)
        return self

    def _forward_exploration(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        with torch.inference_mode():  # RLlib's default: no_grad
            return self._forward(batch, **kwargs)

    def _forward_inference(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        with torch.inference_mode():
            return self._forward(batch, **kwargs)

    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        logits, _ = self.gnn.forward_padded(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: logits}

    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        logits, values = self.gnn.forward_padded(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: logits, Columns.EMBEDDINGS: values}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if embeddings is not None:
            return embeddings
        return self.gnn.values_padded(batch[Columns.OBS])
