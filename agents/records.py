"""What a training run records and shows, besides its checkpoints: the resolved config,
TensorBoard scalars from RLlib's results, HParams and the hyperparameter table, the
tags of validation runs, and the progress line.

TensorBoard (``DIR/tb/``): charts/episode_return, charts/episode_avg_jct_s,
charts/avg_jct_s (validation), validation/<window> (each validation run),
losses/policy_loss, losses/value_loss, losses/total_loss, losses/entropy,
losses/approx_kl, losses/explained_variance, losses/clip_fraction (PPO),
losses/grad_norm, charts/learning_rate, charts/env_steps_per_s, charts/episode_length,
charts/agent_return/<agent>, imitation/loss and imitation/accuracy (the warm start's
epochs); the x axis is environment steps. Hyperparameters as a text table and as
HParams (with the final and best validation figures).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from agents.config import ModelConfig, TrainConfig
from marl_sched.config import ExperimentConfig, plain


def resolved_config(cfg: ExperimentConfig, mc: ModelConfig, tc: TrainConfig) -> dict:
    """Every section of the experiment, with the model and train defaults filled in."""
    data = cfg.to_dict()
    data["model"] = dataclasses.asdict(mc)
    data["train"] = dataclasses.asdict(tc)
    return plain(data)


#: TensorBoard tag → the learner result key averaged over the modules
LEARNER_TAGS = (
    ("losses/policy_loss", "policy_loss"),
    ("losses/value_loss", "vf_loss"),
    ("losses/total_loss", "total_loss"),
    ("losses/entropy", "entropy"),
    ("losses/approx_kl", "mean_kl_loss"),
    ("losses/explained_variance", "vf_explained_var"),
    ("losses/clip_fraction", "clip_fraction"),  # PPO (agents.learner); APPO has none
    ("losses/grad_norm", "gradients_default_optimizer_global_norm"),
    ("charts/learning_rate", "default_optimizer_learning_rate"),
)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def scalars_from_result(result: dict, last_steps: float) -> tuple[dict[str, float], float]:
    """TensorBoard scalars from one ``algo.train()`` result, and the env steps so far.

    The learner metrics RLlib reports (policy, value and total loss, entropy, the KL
    to the sampling policy, the value function's explained variance, the global
    gradient norm before clipping, the learning rate; averaged over the modules),
    the episode return, length and per-agent returns, and env steps per second; for
    PPO the clip fraction (:mod:`agents.learner`: RLlib 2.60 does not report it)."""
    out: dict[str, float] = {}
    runners = result.get("env_runners", {})
    for tag, key in (("charts/episode_return", "episode_return_mean"),
                     ("charts/episode_length", "episode_len_mean")):  # fmt: skip
        if _finite(runners.get(key)):
            out[tag] = float(runners[key])
    for group, prefix in (("agent_episode_returns_mean", "agent_return"),
                          ("module_episode_returns_mean", "module_return")):  # fmt: skip
        for name, value in (runners.get(group) or {}).items():
            if _finite(value):
                out[f"charts/{prefix}/{name}"] = float(value)
    learners = {k: v for k, v in result.get("learners", {}).items() if k != "__all_modules__"}
    for tag, key in LEARNER_TAGS:
        vals = [float(v[key]) for v in learners.values() if _finite(v.get(key))]
        if vals:
            out[tag] = sum(vals) / len(vals)
    steps = float(result.get("num_env_steps_sampled_lifetime", last_steps))
    dt = float(result.get("time_this_iter_s", 0.0))
    if dt > 0:
        out["charts/env_steps_per_s"] = (steps - last_steps) / dt
    return out, steps


def hparams(data: dict) -> dict[str, Any]:
    """The ``model`` and ``train`` sections flattened for TensorBoard's HParams
    dashboard (``section.key``; lists and nested values as text)."""
    out: dict[str, Any] = {}
    for section in ("model", "train"):
        for k, v in (data.get(section) or {}).items():
            if isinstance(v, dict):
                for k2, v2 in v.items():
                    plain = isinstance(v2, int | float | str)
                    out[f"{section}.{k}.{k2}"] = v2 if plain else str(v2)
            elif isinstance(v, bool | int | float | str):
                out[f"{section}.{k}"] = v
            else:
                out[f"{section}.{k}"] = str(v)
    return out


def window_tag(window: dict) -> str:
    """``validation/<trace stem>_<start>[_load<L>]``: the tag of one validation run."""
    tag = f"validation/{Path(str(window['trace'])).stem}_{window['start']}"
    return tag if window.get("load") is None else f"{tag}_load{window['load']:g}"


def hyperparameter_text(data: dict) -> str:
    rows = ["|section|key|value|", "|-|-|-|"]
    for section in ("model", "train", "env", "workload", "simulation"):
        for k, v in (data.get(section) or {}).items():
            rows.append(f"|{section}|{k}|{v}|")
    return "\n".join(rows)


def progress_line(it, steps, scalars, wall, eval_m) -> str:
    parts = [f"iter {it}", f"steps {int(steps)}"]
    if "charts/episode_return" in scalars:
        parts.append(f"return {scalars['charts/episode_return']:.3f}")
    if "charts/env_steps_per_s" in scalars:
        parts.append(f"{scalars['charts/env_steps_per_s']:.0f} steps/s")
    if eval_m is not None:
        parts.append(f"eval avg JCT {eval_m['avg_jct_s']:.0f} s")
    parts.append(f"{wall:.0f} s")
    return "  ".join(parts)


def no_progress(total: int, label: str):
    """A progress factory that shows nothing (the default of every ``progress`` argument)."""
    return _Silent()


class _Silent:
    def __call__(self, done: int) -> None:
        pass

    def close(self) -> None:
        pass
