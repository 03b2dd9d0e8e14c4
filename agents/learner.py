"""RLlib's PPO learner, also logging the clip fraction, with a choice of advantages.

The clip fraction — the share of samples whose probability ratio to the sampling
policy left ``[1 - clip_param, 1 + clip_param]`` in this update — is the figure PPO
users read beside the KL to see whether updates are too large. RLlib 2.60's
``PPOTorchLearner`` does not report it, so this subclass computes it from the same
forward pass (no gradient; the loss and so the weights are unchanged) and logs it per
module as ``clip_fraction``.

With ``learner_config_dict["advantage"] == "group"`` (``train.advantage: group``) the
learner pipeline's GAE piece is replaced by
:class:`agents.group_baseline.GroupBaselineAdvantages` (same place, same value
targets; advantages against the group of rollouts of the same input).
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.connectors.learner.general_advantage_estimation import (
    GeneralAdvantageEstimation,
)
from ray.rllib.core.columns import Columns

CLIP_FRACTION_KEY = "clip_fraction"


def clip_fraction(
    logp: torch.Tensor, logp_old: torch.Tensor, clip_param: float, mask: torch.Tensor | None
) -> torch.Tensor:
    """Share of (unmasked) samples with ``|exp(logp - logp_old) - 1| > clip_param``."""
    clipped = (torch.exp(logp - logp_old) - 1.0).abs() > clip_param
    if mask is not None:
        return clipped[mask].float().sum() / mask.sum().clamp(min=1)
    return clipped.float().mean()


class ClipFractionPPOLearner(PPOTorchLearner):
    """``PPOTorchLearner`` whose loss also logs the clip fraction (module docstring)."""

    def build(self) -> None:
        super().build()
        pipeline = self._learner_connector
        if pipeline is None or self.config.learner_config_dict.get("advantage") != "group":
            return
        from agents.group_baseline import GroupBaselineAdvantages

        pipeline.insert_after(
            GeneralAdvantageEstimation,
            GroupBaselineAdvantages(gamma=self.config.gamma, lambda_=self.config.lambda_),
        )
        pipeline.remove(GeneralAdvantageEstimation)

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
