"""``train.extra_windows`` and the rollout teacher in the warm start (tiny config)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from agents.config import model_config, train_config
from agents.training import teacher_decisions
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.errors import InputError

TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")
SAMPLE = "configs/traces/philly_sample.csv"


def _with_train(**train):
    cfg = load_config(TINY)
    return dataclasses.replace(cfg, train={**cfg.train, **train})


def test_default_config_trains_on_held_in_pollux_windows_only():
    cfg = load_config(REPO_ROOT / "configs" / "default.yaml")
    tc = train_config(cfg)
    assert tc.bc_teacher == "rollout"
    traces = [w.trace for w in tc.extra_windows]
    assert traces == [f"configs/traces/pollux/workload-{k}.csv" for k in (2, 3, 4, 5, 6)]
    assert all(cfg.resolve_path(t).is_file() for t in traces)


@pytest.mark.parametrize(
    "window, message",
    [
        ({"trace": SAMPLE, "share": 0}, r"train.extra_windows\[0\].share: must be > 0"),
        ({"trace": SAMPLE, "start": -1}, r"train.extra_windows\[0\].start: must be >= 0"),
        ({"trace": SAMPLE, "colour": 1}, r"train.extra_windows\[0\].colour: unknown key"),
        ({"start": 3}, r"train.extra_windows\[0\].trace: required key is missing"),
        # the tiny config evaluates on jobs 2190..2209 of the sample
        ({"trace": SAMPLE, "start": 2200, "max_jobs": 50}, "overlaps the evaluation window"),
    ],
)
def test_bad_extra_windows_name_the_key(window, message):
    with pytest.raises(InputError, match=message):
        train_config(_with_train(extra_windows=[window]))


def test_unknown_teacher_is_refused():
    with pytest.raises(InputError, match="train.bc_teacher: must be one of lookahead, rollout"):
        train_config(_with_train(bc_teacher="oracle"))


def test_rollout_teacher_labels_and_a_repeated_episode_is_reused():
    """A window shorter than an episode is drawn whole, so the same episode comes up
    again; its (deterministic) teacher decisions are reused, not recomputed."""
    extra = {"trace": SAMPLE, "start": 2300, "max_jobs": 10, "load": 2.0, "share": 1000.0}
    cfg = _with_train(bc_teacher="rollout", bc_episodes=3, extra_windows=[extra])
    tc = train_config(cfg)
    obs, actions, returns = teacher_decisions(cfg, model_config(cfg), tc, seed=0)
    assert len(actions) % 3 == 0 and actions
    n = len(actions) // 3
    assert actions[:n] == actions[n : 2 * n] == actions[2 * n :]
    assert returns[:n] == returns[n : 2 * n]
    for a, o in zip(actions, obs, strict=True):
        assert o["action_mask"][a] == 1  # every label is a legal action
    assert all(np.isfinite(returns)) and min(returns) < 0
