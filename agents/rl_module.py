"""The RLlib side: the ``TorchRLModule`` around the GNN.

:class:`HierarchicalGNNModule` wraps :class:`agents.gnn.HierarchicalGNN` for the
environment ``ClusterPlacement-v1`` (:mod:`envs.cluster_env`), in which the agents
train and act.

Action masking happens inside the network: masked actions leave it with
:data:`agents.gnn.MASKED_LOGIT`, so exploration, greedy inference and the PPO loss
all see the same masked categorical. The value comes out of the same forward pass
in ``_forward_train`` (passed to ``compute_values`` as the "embeddings"), so a PPO
update runs the GNN once per minibatch.

``model_config`` holds the fields of :class:`agents.config.ModelConfig` (``hidden``,
``layers``, ``exchange``, ``gnn``); the feature dimensions are read from the
observation space, never hard-coded.

For APPO (``train.algorithm: APPO``) the module also implements RLlib's
``TargetNetworkAPI``: a target copy of the GNN (``_old_gnn``, made by the learner
only, never on the env runners) whose logits anchor APPO's surrogate loss. The
inference checkpoints (``modules/*.pt``) keep only the ``gnn.`` weights.
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

from agents.gnn import build_gnn
from envs.observations import feature_dims


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

    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        logits, _ = self.gnn.forward_padded(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: logits}

    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        logits, values = self.gnn.forward_padded(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: logits, Columns.EMBEDDINGS: values}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if embeddings is not None:
            return embeddings
        _, values = self.gnn.forward_padded(batch[Columns.OBS])
        return values

    # ------------------------------------------------------------- APPO's target net

    def make_target_networks(self) -> None:
        self._old_gnn = make_target_network(self.gnn)

    def get_target_network_pairs(self) -> list[tuple[torch.nn.Module, torch.nn.Module]]:
        return [(self.gnn, self._old_gnn)]

    def forward_target(self, batch: dict[str, Any]) -> dict[str, Any]:
        logits, _ = self._old_gnn.forward_padded(batch[Columns.OBS])
        return {TARGET_NETWORK_ACTION_DIST_INPUTS: logits}

    def get_non_inference_attributes(self) -> list[str]:
        return ["_old_gnn"]
