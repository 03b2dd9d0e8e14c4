"""RLlib's PPO learner (:data:`LEARNERS`), also logging what RLlib 2.60 leaves out, per
policy module (``(module_id, key)``, charted by :func:`agents.records.module_scalars`;
docs/agents.md):

- ``clip_fraction`` (from the loss's forward pass, no gradient).
- when a module serves several agents: ``agent/<id>/entropy`` and
  ``agent/<id>/approx_kl``, from the column :data:`AGENT_INDEX` that
  :class:`AddAgentIndex` adds to the train batch.
- ``learner_config_dict``: ``advantage`` ``group`` replaces GAE by
  :mod:`agents.group_baseline`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.connectors.learner.general_advantage_estimation import (
    GeneralAdvantageEstimation,
)
from ray.rllib.core.columns import Columns

CLIP_FRACTION_KEY = "clip_fraction"
AGENT_INDEX = "agent_index"
#: ``learner_config_dict`` key of the agent ids, in the order of AGENT_INDEX
AGENT_IDS = "agent_ids"
#: ``learner_config_dict`` key of ``train.advantage_scale`` (absent: ``batch``)
ADVANTAGE_SCALE = "advantage_scale"


class AddAgentIndex(ConnectorV2):
    """Learner connector: the column :data:`AGENT_INDEX`, the index in ``agent_ids``
    of the agent that acted at each step (one item per step of each agent's episode,
    as RLlib adds the observations, so the rows line up)."""

    def __init__(self, input_observation_space=None, input_action_space=None, *,
                 agent_ids: tuple[str, ...] = (), **kwargs) -> None:  # fmt: skip
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.agent_ids = tuple(agent_ids)

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, **kwargs):
        for sa_episode in self.single_agent_episode_iterator(
            episodes, agents_that_stepped_only=False
        ):
            index = self.agent_ids.index(sa_episode.agent_id)
            self.add_n_batch_items(
                batch,
                AGENT_INDEX,
                items_to_add=np.full(len(sa_episode), index, dtype=np.int64),
                num_items=len(sa_episode),
                single_agent_episode=sa_episode,
            )
        return batch


def agent_index_connector(agent_ids, input_observation_space, input_action_space):
    """``AlgorithmConfig.training(learner_connector=partial(this, agent_ids))``."""
    return AddAgentIndex(input_observation_space, input_action_space, agent_ids=agent_ids)


def per_agent_figures(dist_cls, batch, fwd_out) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """``{agent index: (mean entropy, mean KL of the updated policy to the sampling
    one)}`` over each agent's unmasked steps of the batch; empty when the batch holds
    one agent's steps (its module's own figures are that agent's)."""
    index = batch.get(AGENT_INDEX)
    if index is None:
        return {}
    mask = batch.get(Columns.LOSS_MASK)
    mask = torch.ones_like(index, dtype=torch.bool) if mask is None else mask.bool()
    agents = torch.unique(index[mask]).tolist()
    if len(agents) < 2:
        return {}
    new = dist_cls.from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
    old = dist_cls.from_logits(batch[Columns.ACTION_DIST_INPUTS])
    entropy, kl = new.entropy(), old.kl(new)
    out = {}
    for a in agents:
        sel = mask & (index == a)
        out[int(a)] = (entropy[sel].mean(), kl[sel].mean())
    return out


class PerAgentFigures:
    """Mixin of a learner: its loss, and each agent's entropy and KL logged; and its
    learner connector run without autograd (RLlib 2.60 records a graph no loss reads;
    the same values, a sixth of a PPO update sooner)."""

    def _make_batch_if_necessary(self, *args, **kwargs):
        with torch.no_grad():
            return super()._make_batch_if_necessary(*args, **kwargs)

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out) -> Any:
        loss = super().compute_loss_for_module(
            module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
        )
        with torch.no_grad():
            dist_cls = self.module[module_id].unwrapped().get_train_action_dist_cls()
            figures = per_agent_figures(dist_cls, batch, fwd_out)
        names = config.learner_config_dict.get(AGENT_IDS, ())
        for a, (entropy, kl) in figures.items():
            name = names[a] if a < len(names) else str(a)
            self.metrics.log_value((module_id, f"agent/{name}/entropy"), entropy, window=1)
            self.metrics.log_value((module_id, f"agent/{name}/approx_kl"), kl, window=1)
        return loss


def clip_fraction(
    logp: torch.Tensor, logp_old: torch.Tensor, clip_param: float, mask: torch.Tensor | None
) -> torch.Tensor:
    """Share of (unmasked) samples with ``|exp(logp - logp_old) - 1| > clip_param``."""
    clipped = (torch.exp(logp - logp_old) - 1.0).abs() > clip_param
    if mask is not None:
        return clipped[mask].float().sum() / mask.sum().clamp(min=1)
    return clipped.float().mean()


class ClipFractionPPOLearner(PerAgentFigures, PPOTorchLearner):
    """``PPOTorchLearner`` whose loss also logs the clip fraction, with the group
    advantages of the module docstring."""

    def build(self) -> None:
        super().build()
        pipeline = self._learner_connector
        kind = self.config.learner_config_dict.get("advantage")
        if pipeline is None or kind != "group":
            return
        from agents.group_baseline import GroupBaselineAdvantages

        connector = GroupBaselineAdvantages(
            gamma=self.config.gamma,
            lambda_=self.config.lambda_,
            scale=self.config.learner_config_dict.get(ADVANTAGE_SCALE, "batch"),
        )
        pipeline.insert_after(GeneralAdvantageEstimation, connector)
        pipeline.remove(GeneralAdvantageEstimation)

    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        """RLlib's Adam at ``lr``, with ``foreach=True`` (bit for bit RLlib's per-tensor
        loop, in one call)."""
        params = list(self.get_parameters(self._module[module_id]))
        adam = torch.optim.Adam(params, foreach=True)
        self.register_optimizer(module_id=module_id, optimizer=adam, params=params,
                                lr_or_lr_schedule=config.lr)  # fmt: skip

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out) -> Any:
        loss = super().compute_loss_for_module(
            module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
        )
        with torch.no_grad():
            module = self.module[module_id].unwrapped()
            dist = module.get_train_action_dist_cls().from_logits(
                fwd_out[Columns.ACTION_DIST_INPUTS]
            )
            frac = clip_fraction(
                dist.logp(batch[Columns.ACTIONS]),
                batch[Columns.ACTION_LOGP],
                config.clip_param,
                batch.get(Columns.LOSS_MASK),
            )
        self.metrics.log_value((module_id, CLIP_FRACTION_KEY), frac, window=1)
        return loss


#: the Learner class of each ``train.algorithm`` (agents.config.ALGORITHMS)
LEARNERS = {"PPO": ClipFractionPPOLearner}
