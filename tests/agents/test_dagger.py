"""DAgger relabelling in the warm start (``train.dagger_rounds``), on the tiny config."""

from __future__ import annotations

import dataclasses

import pytest

from agents.config import model_config, train_config
from agents.training import behaviour_cloning
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.errors import InputError
from tests.helpers import check_config_is_parent_plus

TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")


def test_dagger_rounds_default_off_and_validated():
    cfg = load_config(TINY)
    assert train_config(cfg).dagger_rounds == 0
    bad = dataclasses.replace(cfg, train={**cfg.train, "dagger_rounds": -1})
    with pytest.raises(InputError, match="dagger_rounds"):
        train_config(bad)


def test_dagger_relabels_the_students_states():
    cfg = load_config(TINY)
    tc = dataclasses.replace(train_config(cfg), dagger_rounds=1, bc_episodes=1, bc_epochs=1)
    lines: list[str] = []
    weights = behaviour_cloning(cfg, model_config(cfg), tc, 0, lines.append)
    assert weights and all(k.startswith("gnn.") for k in weights)
    assert len(lines) == 2 and "DAgger round 1" in lines[1]
    relabelled = int(lines[1].split(": ")[2].split()[0])
    assert relabelled > 0


def test_dagger_config_is_wait_plus_one_round():
    wait = load_config(str(REPO_ROOT / "configs" / "recipes" / "wait.yaml"))
    assert train_config(wait).dagger_rounds == 0
    check_config_is_parent_plus("wait", "dagger", "train", dagger_rounds=1)
