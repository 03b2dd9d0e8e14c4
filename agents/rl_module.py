"""The RLlib side: :class:`HierarchicalGNNModule`, the ``TorchRLModule`` around
:class:`agents.gnn.HierarchicalGNN` (``model_config``: :class:`agents.config.ModelConfig`'s
fields; feature dims read from the observation space).

- Masking is inside the network (:data:`agents.gnn.MASKED_LOGIT`); the value comes out of
  the same forward (``Columns.EMBEDDINGS``), so a PPO update runs the GNN once.
- Privileged critic (``critic_x`` in the observation space, learner only;
  docs/agents.md): ``V(s, c) = sg[v(z)] + Δ(sg[z], c)``, ``z`` the value head's input
  (a forward hook), ``Δ`` a :class:`PrivilegedCritic` starting at zero; ``v`` keeps
  its own value loss (:data:`PLAIN_VALUES`), the logits never read ``c``, checkpoints
  keep ``gnn.`` weights only.
- :meth:`HierarchicalGNNModule.train` sets the same flags as ``nn.Module.train`` without
  ``__setattr__`` (RLlib switches modes around every exploration forward); exploration
  and inference run under ``torch.inference_mode``.
- APPO: ``TargetNetworkAPI``, a target copy ``_old_gnn`` made by the learner only.
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.utils import make_target_network
from ray.rllib.core.rl_module.apis.inference_only_api import InferenceOnlyAPI
from ray.rllib.core.rl_module.apis.target_network_api import (
    TARGET_NETWORK_ACTION_DIST_INPUTS,
    TargetNetworkAPI,
)
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from torch import nn

from agents.gnn import build_gnn, mlp
from envs.observations import CRITIC_KEY, feature_dims

#: the forward-train column of the GNN's own (plain) value head ``v(z)``
PLAIN_VALUES = "plain_values"


class PrivilegedCritic(nn.Module):
    """``Δ(z, c) = MLP([z ‖ MLP(c)])``: the privileged correction to the GNN's value;
    zero at initialisation."""

    def __init__(self, critic_dim: int, hidden: int) -> None:
        super().__init__()
        self.embed = mlp(critic_dim, hidden, hidden)
        self.head = mlp(2 * hidden, hidden, 1)
        nn.init.zeros_(self.head[-1].weight)
        nn.init.zeros_(self.head[-1].bias)

    def forward(self, z: torch.Tensor, critic_x: torch.Tensor) -> torch.Tensor:
        c = torch.relu(self.embed(critic_x))
        return self.head(torch.cat([z, c], dim=-1)).squeeze(-1)


class HierarchicalGNNModule(TorchRLModule, ValueFunctionAPI, TargetNetworkAPI, InferenceOnlyAPI):
    """PPO/APPO-ready module: masked logits over ``G_max + A + H`` actions and a value."""

    def setup(self) -> None:
        self.dims = feature_dims(self.observation_space)
        n_actions = self.dims["G_max"] + self.dims["A"] + self.dims["H"]
        if getattr(self.action_space, "n", None) != n_actions:
            raise ValueError(
                f"action space {self.action_space} does not match G_max + A + H = {n_actions}"
            )
        self.gnn = build_gnn(self.dims, self.model_config or {})
        self.critic = None
        space = self.observation_space.spaces.get(CRITIC_KEY)
        if space is not None and not self.inference_only:
            hidden = int((self.model_config or {}).get("hidden", 64))
            self.critic = PrivilegedCritic(int(space.shape[-1]), hidden)

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
        if self.critic is None:
            logits, values = self.gnn.forward_padded(batch[Columns.OBS])
            return {Columns.ACTION_DIST_INPUTS: logits, Columns.EMBEDDINGS: values}
        logits, values, plain = self._privileged(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: logits, Columns.EMBEDDINGS: values,
                PLAIN_VALUES: plain}  # fmt: skip

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if embeddings is not None:
            return embeddings
        if self.critic is None:
            return self.gnn.values_padded(batch[Columns.OBS])
        return self._privileged(batch[Columns.OBS])[1]

    def _privileged(self, obs: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(logits, ``V(s, c)``, ``v(z)``): one GNN forward, its pooled state ``z``
        taken from the value head's input by a hook."""
        seen = []
        hook = self.gnn.value_head.register_forward_hook(lambda m, args, out: seen.append(args[0]))
        try:
            logits, plain = self.gnn.forward_padded(obs)
        finally:
            hook.remove()
        values = plain.detach() + self.critic(seen[0].detach(), obs[CRITIC_KEY])
        return logits, values, plain

    # ------------------------------------------------------------- APPO's target net

    def make_target_networks(self) -> None:
        self._old_gnn = make_target_network(self.gnn)

    def get_target_network_pairs(self) -> list[tuple[torch.nn.Module, torch.nn.Module]]:
        return [(self.gnn, self._old_gnn)]

    def forward_target(self, batch: dict[str, Any]) -> dict[str, Any]:
        logits, _ = self._old_gnn.forward_padded(batch[Columns.OBS])
        return {TARGET_NETWORK_ACTION_DIST_INPUTS: logits}

    def get_non_inference_attributes(self) -> list[str]:
        return ["_old_gnn", "critic"]
