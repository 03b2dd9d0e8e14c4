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

**The privileged critic** (``train.critic: privileged``): when the observation space
holds ``critic_x`` (:func:`envs.observations.critic_features`: the queue, the running
jobs' true remaining work, the next arrivals — training-time input the agents never
see), the learner's module also has :class:`PrivilegedCritic`, and its value is

    ``V(s, c) = sg[v(z)] + Δ(sg[z], c)``

with ``z`` the GNN's pooled state (the input of its value head, read with a forward
hook: :meth:`HierarchicalGNN.forward_padded` computes exactly what it computes
without a critic), ``v`` the GNN's own value head, ``Δ`` an MLP over ``[z ‖ MLP(c)]``
whose last layer starts at zero (so a warm start's critic is ``v`` unchanged) and
``sg`` stop-gradient. The value loss of ``V`` trains ``Δ`` only; the GNN's head ``v``
keeps a value loss of its own against the same targets (``PLAIN_VALUES``,
:class:`agents.learner.ClipFractionPPOLearner`), so the network and ``v`` get the
gradients a plain-critic run gives them, only the advantages and value targets
differ, and every checkpoint (``gnn.`` weights only) keeps a plain critic and acts
without ``critic_x``. The actor's logits never read ``c``. A module built inference-only
(a remote env runner's) has no critic; one that samples in the driver has it, unused.
``Δ`` is outside the checkpoints: a resumed run starts it at zero again.

**Mode switches** (:meth:`HierarchicalGNNModule.train`): RLlib's
``TorchRLModule.forward_exploration`` calls ``eval()`` before and ``train()`` after
every exploration forward; ``nn.Module.train`` walks the ~70 submodules, setting each
one's ``training`` through ``nn.Module.__setattr__`` (~10 % of a sampling iteration
in a cProfile; timed alone, 250 µs per
``eval()`` + ``train()`` pair of the default network, 28 µs overridden). The override sets the
same flags on the same modules directly, walking ``_modules`` as ``nn.Module.train``
recurses through ``children()``, and calls a submodule's own ``train`` where it has one.
The exploration and inference forwards run under ``torch.inference_mode`` instead of
RLlib's ``torch.no_grad`` (~10 % less per forward of 4 observations; the same kernels,
so the same logits): their outputs only become actions, log-probabilities and numpy
columns of the episodes, never autograd inputs; the learner's ``forward_train`` is
untouched.

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
from torch import nn

from agents.gnn import build_gnn, mlp
from envs.observations import CRITIC_KEY, feature_dims

#: the forward-train column of the GNN's own (plain) value head ``v(z)``
PLAIN_VALUES = "plain_values"


class PrivilegedCritic(nn.Module):
    """``Δ(z, c) = MLP([z ‖ MLP(c)])``: the privileged correction to the GNN's value
    (module docstring); zero at initialisation."""

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
        submodule, written without ``nn.Module.__setattr__`` (module docstring)."""
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
        with torch.inference_mode():  # RLlib's default: no_grad (module docstring)
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
        taken from the value head's input by a hook (module docstring)."""
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
