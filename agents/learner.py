"""RLlib's PPO, APPO and IMPALA learners, also logging what RLlib 2.60 leaves out.

PPO: the clip fraction. APPO and IMPALA: the value function's explained variance
(``vf_explained_var``, which RLlib's PPO learner logs and theirs do not), against the
v-trace value targets their value loss regresses to. Every figure is logged per
policy module (RLlib's ``(module_id, key)``), as are RLlib's own losses, so
:func:`agents.records.module_scalars` can chart each module's policy loss, value
loss, entropy, KL and these. :data:`LEARNERS`: the class of each ``train.algorithm``.

The clip fraction — the share of samples whose probability ratio to the sampling
policy left ``[1 - clip_param, 1 + clip_param]`` in this update — is the figure PPO
users read beside the KL to see whether updates are too large. RLlib 2.60's
``PPOTorchLearner`` does not report it, so this subclass computes it from the same
forward pass (no gradient; the loss and so the weights are unchanged) and logs it per
module as ``clip_fraction``.
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.algorithms.appo.torch.appo_torch_learner import APPOTorchLearner
from ray.rllib.algorithms.impala.torch.impala_torch_learner import IMPALATorchLearner
from ray.rllib.algorithms.impala.torch.vtrace_torch_v2 import make_time_major, vtrace_torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import POLICY_LOSS_KEY
from ray.rllib.core.rl_module.apis import TARGET_NETWORK_ACTION_DIST_INPUTS
from ray.rllib.utils.torch_utils import explained_variance

CLIP_FRACTION_KEY = "clip_fraction"
EXPLAINED_VARIANCE_KEY = "vf_explained_var"  # the key RLlib's PPO learner uses


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


def vtrace_explained_variance(module, config, batch, fwd_out, target_logits) -> torch.Tensor:
    """Explained variance of the value head against the batch's v-trace value targets,
    over the unmasked steps: the targets APPO's and IMPALA's value loss regress to,
    recomputed here from the same inputs (RLlib 2.60 keeps them inside the loss).
    ``target_logits``: the policy v-trace corrects towards (APPO: the target network;
    IMPALA: the current policy)."""

    def time_major(x: torch.Tensor) -> torch.Tensor:
        return make_time_major(
            x,
            trajectory_len=config.get_rollout_fragment_length(),
            recurrent_seq_len=batch.get("seq_lens"),
        )

    dist = module.get_train_action_dist_cls()
    mask = time_major(batch[Columns.LOSS_MASK].float())
    values = time_major(module.compute_values(batch, embeddings=fwd_out.get(Columns.EMBEDDINGS)))
    not_done = 1.0 - time_major(batch[Columns.TERMINATEDS]).float()
    targets, _ = vtrace_torch(
        target_action_log_probs=time_major(
            dist.from_logits(target_logits).logp(batch[Columns.ACTIONS])
        ),
        behaviour_action_log_probs=time_major(batch[Columns.ACTION_LOGP]),
        discounts=not_done * config.gamma * mask,
        rewards=time_major(batch[Columns.REWARDS]),
        values=values,
        # as RLlib's loss: the next row's first value (the last row's is never used)
        bootstrap_values=torch.cat([values[0][1:], values[0][0:1]], dim=0),
        clip_rho_threshold=config.vtrace_clip_rho_threshold,
        clip_pg_rho_threshold=config.vtrace_clip_pg_rho_threshold,
    )
    keep = mask > 0
    return explained_variance(targets[keep], values[keep])


class _VTraceExplainedVariance:
    """Mixin of a v-trace learner: its loss, and the explained variance logged."""

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out) -> Any:
        loss = super().compute_loss_for_module(
            module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
        )
        with torch.no_grad():
            module = self.module[module_id].unwrapped()
            target = self.vtrace_target_logits(module, batch, fwd_out)
            ev = vtrace_explained_variance(module, config, batch, fwd_out, target)
        self.metrics.log_value((module_id, EXPLAINED_VARIANCE_KEY), ev, window=1)
        self.log_common_keys(module_id)
        return loss

    def log_common_keys(self, module_id) -> None:
        """Log under PPO's key any figure this learner names otherwise."""


class ExplainedVarianceAPPOLearner(_VTraceExplainedVariance, APPOTorchLearner):
    """``APPOTorchLearner`` also logging ``vf_explained_var`` (module docstring)."""

    @staticmethod
    def vtrace_target_logits(module, batch, fwd_out) -> torch.Tensor:
        return module.forward_target(batch)[TARGET_NETWORK_ACTION_DIST_INPUTS]


class ExplainedVarianceIMPALALearner(_VTraceExplainedVariance, IMPALATorchLearner):
    """``IMPALATorchLearner`` also logging ``vf_explained_var`` (module docstring)."""

    @staticmethod
    def vtrace_target_logits(module, batch, fwd_out) -> torch.Tensor:
        return fwd_out[Columns.ACTION_DIST_INPUTS]

    def log_common_keys(self, module_id) -> None:
        # IMPALA names its mean policy loss "mean_pi_loss"; PPO and APPO "policy_loss"
        loss = self.metrics.peek((module_id, "mean_pi_loss"))
        self.metrics.log_value((module_id, POLICY_LOSS_KEY), loss, window=1)


#: the Learner class of each ``train.algorithm`` (agents.config.ALGORITHMS)
LEARNERS = {
    "PPO": ClipFractionPPOLearner,
    "APPO": ExplainedVarianceAPPOLearner,
    "IMPALA": ExplainedVarianceIMPALALearner,
}
