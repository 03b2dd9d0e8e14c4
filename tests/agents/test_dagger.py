"""DAgger relabelling in the warm start (``train.dagger_rounds``), on the tiny config."""

from __future__ import annotations

import dataclasses

import pytest

from agents.config import model_config, train_config
from agents.warm_start import behaviour_cloning
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.errors import InputError

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


def test_dagger_labels_are_the_teachers_on_the_students_own_states(monkeypatch):
    """The student here always takes the last legal action (far from any heuristic):
    DAgger must label the states that student visits with the teacher's actions, not
    with the student's. Until the student first leaves the teacher's path the states
    are the teacher's own, so the first label is the teacher run's first action; every
    label is legal in its state; and the labels are not the student's choices."""
    import numpy as np

    import agents.policy
    from agents.warm_start import teacher_decisions

    cfg = load_config(TINY)
    tc = dataclasses.replace(train_config(cfg), bc_episodes=1)
    mc = model_config(cfg)
    obs_t, act_t, _, _ = teacher_decisions(cfg, mc, tc, 0)

    chosen: dict[int, int] = {}

    def last_legal(net, obs):
        action = int(np.flatnonzero(obs["action_mask"])[-1])
        chosen[id(obs)] = action
        return action

    monkeypatch.setattr(agents.policy, "greedy_action", last_legal)
    obs_d, act_d, _, _ = teacher_decisions(cfg, mc, tc, 0, student=object())
    assert act_d and len(chosen) >= len(act_d)
    for o, a in zip(obs_d, act_d, strict=True):
        assert o["action_mask"][a] == 1, "a label the state does not allow"
    for key in obs_t[0]:
        np.testing.assert_array_equal(obs_d[0][key], obs_t[0][key])  # the same first state
    assert act_d[0] == act_t[0]  # ... labelled as the teacher acted on it
    differ = sum(a != chosen[id(o)] for o, a in zip(obs_d, act_d, strict=True))
    assert differ >= 1, "every label is just the student's own action"
    # the student left the teacher's path: it visited states the teacher never saw
    assert act_d != act_t[: len(act_d)] or len(act_d) != len(act_t)


def test_a_teacher_with_no_legal_label_is_an_input_error(monkeypatch):
    """Nothing to imitate (a teacher whose placements the masks never allow) is one
    line naming train.bc_teacher, not an IndexError."""
    import agents.warm_start as ws

    cfg = load_config(TINY)
    monkeypatch.setattr(ws, "teacher_decisions", lambda *a, **k: ([], [], [], []))
    with pytest.raises(InputError, match="train.bc_teacher: .* never a legal action"):
        behaviour_cloning(cfg, model_config(cfg), train_config(cfg), 0, lambda line: None)
