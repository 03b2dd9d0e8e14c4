"""What a training run records besides its checkpoints: the resolved config,
TensorBoard scalars (``charts/*``, ``losses/*``, ``time/*``, ``imitation/*``,
``validation/<window>``; x axis = env steps), HParams and the progress line.

TensorBoard's ``charts/normalised_return`` is -avg JCT over the window's mean isolated
run time: comparable across windows, where the return is not (docs/agents.md lists
every tag).

- :func:`resolved_config`: ``config.yaml``, every section with defaults filled in.
- :func:`hparams`: that config flattened for TensorBoard's HParams dashboard.
- :func:`module_scalars`: per-module and per-agent learner figures.
- :func:`read_tags`: tags' values read back from ``tb/``."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marl_sched.config import ExperimentConfig, absolute_paths, plain

#: the learner figures logged per policy module: TensorBoard name → RLlib result key
MODULE_TAGS = (
    ("policy_loss", "policy_loss"),
    ("value_loss", "vf_loss"),
    ("entropy", "entropy"),
    ("approx_kl", "mean_kl_loss"),
    ("explained_variance", "vf_explained_var"),
    ("clip_fraction", "clip_fraction"),
)


def resolved_config(cfg: ExperimentConfig, mc, tc, iterations: int | None = None) -> dict:
    """Every section of the experiment with defaults filled in and paths absolute;
    ``iterations`` (None: the config's) recorded as ``train.iterations``."""
    from envs.config import env_config

    data = cfg.to_dict()
    data["env"] = dataclasses.asdict(env_config(cfg))
    data["model"] = dataclasses.asdict(mc)
    if iterations is not None:
        tc = dataclasses.replace(tc, iterations=iterations)
    data["train"] = dataclasses.asdict(tc)
    return absolute_paths(plain(data), cfg)


#: TensorBoard tag → the learner result key averaged over the modules
LEARNER_TAGS = (
    ("losses/policy_loss", "policy_loss"),
    ("losses/value_loss", "vf_loss"),
    ("losses/total_loss", "total_loss"),
    ("losses/entropy", "entropy"),
    ("losses/approx_kl", "mean_kl_loss"),
    ("losses/explained_variance", "vf_explained_var"),
    ("losses/clip_fraction", "clip_fraction"),  # agents.learner
    # the group baseline's heaviest window's share of the squared advantages, before
    # and after train.advantage_scale's weighing (agents.group_baseline)
    ("losses/top_window_share_raw", "top_window_share_raw"),
    ("losses/top_window_share", "top_window_share"),
    ("losses/grad_norm", "gradients_default_optimizer_global_norm"),
    ("charts/learning_rate", "default_optimizer_learning_rate"),
)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def scalars_from_result(result: dict, last_steps: float) -> tuple[dict[str, float], float]:
    """TensorBoard scalars from one ``algo.train()`` result (learner figures averaged
    over modules, episode return, length, per-agent returns, env steps per second, PPO's
    clip fraction), and the env steps so far."""
    out: dict[str, float] = {}
    runners = result.get("env_runners", {})
    for tag, key in (("charts/episode_return", "episode_return_mean"),
                     ("charts/episode_length", "episode_len_mean"),
                     ("charts/team_return", "team_return"),
                     ("charts/episode_avg_jct_s", "team_avg_jct_s"),
                     ("charts/normalised_return", "normalised_return")):  # fmt: skip
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
    out.update(module_scalars(learners))  # each module's own, when there are several
    steps = float(result.get("num_env_steps_sampled_lifetime", last_steps))
    dt = float(result.get("time_this_iter_s", 0.0))
    if dt > 0:
        out["charts/env_steps_per_s"] = (steps - last_steps) / dt
    return out | phase_times(result), steps


#: TensorBoard tag → RLlib's timers (``result["timers"]``) that measure that phase,
#: first found wins: PPO's ``env_runner_sampling_timer`` and ``learner_update_timer``
#: (the learner connector's GAE or group baseline included)
PHASE_TIMERS = (
    ("time/sample_s", ("env_runner_sampling_timer",)),
    ("time/learn_s", ("learner_update_timer",)),
)


def phase_times(result: dict) -> dict[str, float]:
    """Wall seconds of one ``algo.train()`` by phase (:data:`PHASE_TIMERS`) and of the
    whole call. The loop deletes RLlib's EMA timers after each iteration, so each is that
    iteration's own."""
    timers = result.get("timers") or {}
    out = {}
    for tag, keys in PHASE_TIMERS:
        found = [float(timers[k]) for k in keys if _finite(timers.get(k))]
        if found:
            out[tag] = found[0]
    if _finite(result.get("time_this_iter_s")):
        out["time/iteration_s"] = float(result["time_this_iter_s"])
    return out


@contextlib.contextmanager
def timed(scalars: dict[str, float], phase: str):
    """Time the block into ``scalars``: ``time/<phase>_s`` (wall) and
    ``time/<phase>_cpu_s`` (process CPU). Nothing is recorded when the block raises."""
    wall, cpu = time.perf_counter(), time.process_time()
    yield
    scalars[f"time/{phase}_s"] = time.perf_counter() - wall
    scalars[f"time/{phase}_cpu_s"] = time.process_time() - cpu


def read_tags(run: Path, tags: Sequence[str]) -> dict[str, dict[int, float]]:
    """``{tag: {env step: value}}`` for each of ``tags`` in a run folder's ``tb/``
    (``{}`` for a tag never logged), read once with TensorBoard's ``EventAccumulator``,
    every point kept and purged steps dropped."""
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(Path(run) / "tb"), size_guidance={ea.SCALARS: 0})
    acc.Reload()
    logged = set(acc.Tags()["scalars"])
    return {t: {e.step: e.value for e in acc.Scalars(t)} if t in logged else {} for t in tags}


def _flatten(value: Any, key: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{key}.{k}" if key else str(k), out)
    elif isinstance(value, list | tuple) and any(isinstance(v, dict | list) for v in value):
        for i, v in enumerate(value):
            _flatten(v, f"{key}[{i}]", out)
    elif isinstance(value, bool | int | float | str):
        out[key] = value
    elif value is None:
        out[key] = "null"
    else:  # a list of plain values: one text value, as YAML writes it inline
        out[key] = "[" + ", ".join(str(v) for v in value) + "]"


def hparams(data: dict, agents: int | None = None, modules: int | None = None) -> dict[str, Any]:
    """A resolved config flattened to ``section.key[.sub]`` for HParams (lists of
    mappings by ``[i]``), plus ``agents.count`` and ``agents.modules``."""
    out: dict[str, Any] = {}
    _flatten(data, "", out)
    if agents is not None:
        out["agents.count"] = agents
    if modules is not None:
        out["agents.modules"] = modules
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


#: the phases the progress line shows, in order (``time/<phase>_s``)
PHASES = ("warm_start", "sample", "learn", "validate")


def progress_line(it, steps, scalars, wall, eval_m) -> str:
    parts = [f"iter {it}", f"steps {int(steps)}"]
    ret = scalars.get("charts/team_return", scalars.get("charts/episode_return"))
    if ret is not None:
        parts.append(f"return {ret:.3f}")
    if "charts/env_steps_per_s" in scalars:
        parts.append(f"{scalars['charts/env_steps_per_s']:.0f} steps/s")
    if eval_m is not None:
        parts.append(f"eval avg JCT {eval_m['avg_jct_s']:.0f} s")
    times = [f"{name} {scalars[f'time/{name}_s']:.1f}" for name in PHASES
             if f"time/{name}_s" in scalars]  # fmt: skip
    if times:
        parts.append(f"({', '.join(times)} s)")
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


def module_scalars(learners: dict[str, dict]) -> dict[str, float]:
    """``losses/<module>/<figure>`` per policy module (when several) and
    ``losses/agent/<agent>/<figure>`` (:class:`agents.learner.PerAgentFigures`)."""
    out = {
        f"losses/{key}": float(value)
        for figures in learners.values()
        for key, value in figures.items()
        if key.startswith("agent/") and _finite(value)
    }
    if len(learners) < 2:
        return out
    return out | {
        f"losses/{module}/{tag}": float(figures[key])
        for module, figures in learners.items()
        for tag, key in MODULE_TAGS
        if _finite(figures.get(key))
    }
