"""The ``model:``, ``train:`` and ``interference:`` sections of an experiment config.

Each is parsed with :func:`marl_sched.config.parse_section` (a bad key or value is one
``InputError`` line naming the dotted key). Schemas: :mod:`agents.model_section`,
:mod:`agents.interference_section`, and :mod:`agents.train_sections` (joined by
:class:`TrainConfig`, keys flat). This module keeps the parsers, cross-section checks
and the tables for older runs' signed configs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.interference_section import MAX_SAMPLES, InterferenceConfig
from agents.model_section import MAX_LAYERS, MAX_WIDTH, ModelConfig
from agents.train_sections.data import (
    DATA_BOUNDS,
    DataSection,
    TrainWindow,
    check_windows_apart,
    eval_window,
    eval_windows,
    split_windows,
)
from agents.train_sections.ppo import (
    ADVANTAGE_SCALES,
    ADVANTAGES,
    ALGORITHMS,
    PPO_BOUNDS,
    REFUSED_ALGORITHMS,
    RETIRED_ALGORITHMS,
    PPOSection,
    RLlibConfig,
)
from agents.train_sections.selection import SELECT_RULES, SELECTION_BOUNDS, SelectionSection
from agents.train_sections.warm_start import WARM_START_BOUNDS, WarmStartSection
from marl_sched.config import ARCHIVE_TAG, ExperimentConfig, check, parse_section
from marl_sched.config import drop_retired as drop_retired_keys

__all__ = [
    "ADVANTAGES",
    "ADVANTAGE_SCALES",
    "ALGORITHMS",
    "ARCHIVE_TAG",
    "LATER_MODEL_FIELDS",
    "LATER_TRAIN_FIELDS",
    "MAX_LAYERS",
    "MAX_SAMPLES",
    "MAX_WIDTH",
    "REFUSED_ALGORITHMS",
    "RETIRED_ALGORITHMS",
    "RETIRED_MODEL_FIELDS",
    "RETIRED_TRAIN_FIELDS",
    "SELECT_RULES",
    "TRAIN_BOUNDS",
    "DataSection",
    "InterferenceConfig",
    "ModelConfig",
    "PPOSection",
    "RLlibConfig",
    "SelectionSection",
    "TrainConfig",
    "TrainWindow",
    "WarmStartSection",
    "drop_retired",
    "eval_window",
    "eval_windows",
    "interference_config",
    "model_config",
    "split_windows",
    "train_config",
]

#: ``train:`` fields added after runs were signed, with the behaviour those runs had:
#: a resumed run signed before one existed resumes as it ran
#: (:func:`agents.run_folder.check_config_data`), as ``envs.config.LATER_OPTIONS`` does
#: for decision options
LATER_TRAIN_FIELDS = {
    "split_share": 0.0,
    "advantage_scale": "batch",
    "bc_move": "load-control",
}
#: ``model:`` fields added after runs were signed, likewise (none since the last retired)
LATER_MODEL_FIELDS: dict = {}
#: ``model:`` fields that no longer ship (the torch-geometric layers over the cluster
#: tree; the per-node raw-feature head), with the value that meant today's network;
#: see :data:`RETIRED_TRAIN_FIELDS`
RETIRED_MODEL_FIELDS = {"gnn": {"layer": "hierarchy"}, "raw_head": False}


# the bases are listed last section first: a dataclass orders its fields from the base
# furthest back in the MRO, so the fields run algorithm, data, selection, warm start
@dataclass(frozen=True)
class TrainConfig(WarmStartSection, SelectionSection, DataSection, PPOSection):
    """Multi-agent PPO on RLlib's new API stack, and the run's bookkeeping (``train:``):
    the attributes of :mod:`agents.train_sections`' ``PPOSection``, ``DataSection``,
    ``SelectionSection`` and ``WarmStartSection``."""

    def validate(self, where: str, key: str) -> None:
        """Each section's own checks, then those that read two sections."""
        PPOSection.validate(self, where, key)
        DataSection.validate(self, where, key)
        SelectionSection.validate(self, where, key)
        WarmStartSection.validate(self, where, key)


#: the range of each count of ``train:`` (each section's), checked before Ray starts
TRAIN_BOUNDS = {**PPO_BOUNDS, **SELECTION_BOUNDS, **DATA_BOUNDS, **WARM_START_BOUNDS}

#: ``train:`` fields of studies that no longer ship (one round of rollout policy
#: improvement per iteration; the privileged critic and the value heads' own learning
#: rate; the KL term to the frozen warm start; the evaluation window's own load, which
#: ``eval_loads`` covers), with the value that meant "off". A signed config that carries
#: one at that value reads as if it did not; any other value is refused, naming the git
#: tag that keeps the study's code.
RETIRED_TRAIN_FIELDS = {
    "critic": "plain",
    "critic_jobs": 8,
    "critic_lr": None,
    "job_gamma": 0.9,
    "update": "ppo",
    "improve_episodes": 8,
    "improve_branches": 24,
    "improve_alternatives": 2,
    "improve_margin": 0.01,
    "improve_epochs": 4,
    "improve_lr": 0.0003,
    "improve_weight": 10.0,
    "improve_target": "hard",
    "improve_futures": 0,
    "prior_kl": 0.0,
    "eval_load": None,
}


def drop_retired(train: Any, where: str) -> Any:
    """``train`` without the :data:`RETIRED_TRAIN_FIELDS` set to their "off" value;
    ``InputError`` naming the first set to anything else (and the tag that has it)."""
    return drop_retired_keys(train, RETIRED_TRAIN_FIELDS, where, "train")


def model_config(cfg: ExperimentConfig) -> ModelConfig:
    """Parse ``cfg.model``; a bad key raises ``InputError`` naming ``model.<key>``."""
    model = drop_retired_keys(cfg.model, RETIRED_MODEL_FIELDS, cfg.source, "model")
    return parse_section(ModelConfig, model, cfg.source, "model")


def train_config(cfg: ExperimentConfig) -> TrainConfig:
    """Parse ``cfg.train`` and check that no validation window overlaps a training one."""
    tc = parse_section(TrainConfig, drop_retired(cfg.train, cfg.source), cfg.source, "train")
    wl = cfg.workload
    same_trace = tc.eval_trace is None or tc.eval_trace == wl.trace
    if same_trace and tc.eval_start is None:
        check(
            wl.max_jobs is not None,
            cfg.source,
            "train.eval_start",
            "the training window runs to the end of the trace: set train.eval_start "
            "or train.eval_trace",
        )
    check_windows_apart(cfg, tc)
    return tc


def interference_config(cfg: ExperimentConfig) -> InterferenceConfig:
    """Parse ``cfg.interference``; a bad key raises ``InputError`` naming
    ``interference.<key>``."""
    return parse_section(InterferenceConfig, cfg.interference, cfg.source, "interference")
