"""What a run folder records about the run it holds.

- :func:`resolved_config`: ``config.yaml``, every section with its defaults filled in
  (the environment's options included, parsed by :func:`envs.config.env_config`) and
  the iterations the run was asked for (``--iterations`` overrides ``train.iterations``:
  the record says what ran, not what the file said).
- :func:`hparams`: that config flattened for TensorBoard's HParams dashboard, every
  section (topology, workload, simulation, env, model, train, interference) with dotted
  keys (``topology.server_types[0].count``, ``env.reward.time_scale_s``), plus the number
  of agents and of policy modules, so runs can be filtered on any of them.
- :func:`module_scalars`: the learner's figures of each policy module
  (``losses/<module>/policy_loss`` ...) and of each agent of a shared module, beside
  the averages over modules.
- :func:`checkpoint_digest`: the content digest of a checkpoint's inference files,
  which ``results.csv`` records beside the checkpoint's path.

Plain functions of dicts, Ray-free: the tests check them without starting anything.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from pathlib import Path
from typing import Any

from marl_sched.config import ExperimentConfig, plain

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
    """Every section of the experiment with its defaults filled in (``env`` included);
    ``iterations``: the iterations the run trains to, recorded as ``train.iterations``
    (None: the config's)."""
    from envs.config import env_config

    data = cfg.to_dict()
    data["env"] = dataclasses.asdict(env_config(cfg))
    data["model"] = dataclasses.asdict(mc)
    if iterations is not None:
        tc = dataclasses.replace(tc, iterations=iterations)
    data["train"] = dataclasses.asdict(tc)
    return plain(data)


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
    """Every section of a resolved config flattened to ``section.key[.sub]`` (lists of
    mappings by index, ``[i]``; lists of plain values and null as text), for
    TensorBoard's HParams dashboard; ``agents`` / ``modules``: the number of agents and
    of policy modules, as ``agents.count`` and ``agents.modules``."""
    out: dict[str, Any] = {}
    _flatten(data, "", out)
    if agents is not None:
        out["agents.count"] = agents
    if modules is not None:
        out["agents.modules"] = modules
    return out


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def module_scalars(learners: dict[str, dict]) -> dict[str, float]:
    """``losses/<module>/<figure>`` for each policy module of a learner result
    (``result["learners"]`` minus ``__all_modules__``) when there are several (with
    one module the averages over modules are already its own figures), and
    ``losses/agent/<agent>/<figure>``, each agent's entropy and KL, which a module
    serving several agents logs (:class:`agents.learner.PerAgentFigures`)."""
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


def checkpoint_digest(folder: Path) -> str:
    """SHA-256 over the inference files of a checkpoint folder (``manifest.json`` and
    ``modules/*.pt``: what ``evaluate`` loads), each named by its relative path, in
    sorted order: equal digests, equal policies."""
    folder = Path(folder)
    files = [folder / "manifest.json", *sorted((folder / "modules").glob("*.pt"))]
    h = hashlib.sha256()
    for path in files:
        h.update(path.relative_to(folder).as_posix().encode("utf-8") + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()
