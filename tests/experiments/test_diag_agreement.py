"""experiments/diag_agreement.py: asking both sides on every job leaves the run of the
side that places untouched, and each row is consistent with itself. Ray-free."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from agents.policy import MarlPolicy, agents_from_weights
from envs.observations import ObservationBuilder
from experiments import diag_agreement as diag
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.policies import make_policy
from marl_sched.runner import build_cluster, load_workload, simulate
from tests.helpers import untrained_checkpoint

TINY = str(REPO_ROOT / "configs" / "tiny.yaml")


@pytest.fixture(scope="module")
def setup():
    cfg = load_config(TINY)
    cfg = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, max_jobs=20))
    topo, perf = build_cluster(cfg)
    torch.manual_seed(0)
    manifest, weights = untrained_checkpoint(ObservationBuilder(topo, perf), {"hidden": 8})
    return cfg, topo, perf, manifest, weights


def _student(setup):
    *_, manifest, weights = setup
    return MarlPolicy(agents=agents_from_weights(manifest, weights))


@pytest.mark.parametrize("mode", ["teacher", "student"])
def test_the_placing_side_runs_as_it_would_alone(setup, mode):
    cfg, topo, perf, *_ = setup
    rows, metrics = diag.probe_run(
        cfg, _student(setup), make_policy("first-fit"), mode, {"scenario": "t", "seed": 0}
    )
    alone = _student(setup) if mode == "student" else make_policy("first-fit")
    want, _, _ = simulate(cfg, "x", load_workload(cfg, perf), topo, perf, seed=0, policy=alone)
    assert metrics["avg_jct_s"] == want["avg_jct_s"]
    assert len(rows) == metrics["decisions"] and {r["mode"] for r in rows} == {mode}


def test_rows_agree_with_themselves(setup):
    cfg, *_ = setup
    rows, _ = diag.probe_run(
        cfg, _student(setup), make_policy("first-fit"), "teacher", {"scenario": "t", "seed": 0}
    )
    assert set(rows[0]) == set(diag.FIELDS)
    for r in rows:
        assert r["forced_hits"] <= r["forced_decisions"] <= 2 * (r["workers"] + r["ps"])
        kinds = ("slot", "forward", "follow")
        assert sum(r[f"{k}_labels"] for k in kinds) == r["forced_decisions"]
        assert sum(r[f"{k}_hits"] for k in kinds) == r["forced_hits"]
        assert (r["first_miss_task"] >= 0) == (r["forced_hits"] < r["forced_decisions"])
        if r["same_groups"]:
            assert r["same_servers"] and r["same_subclusters"]
            assert r["t_student"] == r["t_teacher"]
    # an untrained network does not copy first-fit everywhere: the columns can tell
    assert 0 < np.mean([r["forced_hits"] / max(r["forced_decisions"], 1) for r in rows]) < 1


def test_refuses_the_test_split(tmp_path):
    with pytest.raises(SystemExit, match="test split"):
        diag.main(["--checkpoint", "x", "--split", "test", "--out", str(tmp_path / "a.csv")])


def test_a_hybrid_forcing_every_label_is_the_teacher_and_each_half_runs(setup, monkeypatch):
    """Forcing every kind of label reproduces the run of a teacher that acts inside
    the masks; forcing one kind gives a run of its own (the network decides the rest)."""
    from envs.controls import MaskedFirstFit

    cfg, *_ = setup
    tag = {"scenario": "t", "seed": 0}
    monkeypatch.setitem(diag.HYBRIDS, "all", frozenset({"slot", "forward", "follow"}))
    _, teacher = diag.probe_run(cfg, _student(setup), MaskedFirstFit(), "teacher", tag)
    _, forced = diag.probe_run(cfg, _student(setup), MaskedFirstFit(), "all", tag)
    assert forced["avg_jct_s"] == teacher["avg_jct_s"]
    _, student = diag.probe_run(cfg, _student(setup), MaskedFirstFit(), "student", tag)
    for mode in ("teacher-forwards", "teacher-slots"):
        rows, m = diag.probe_run(cfg, _student(setup), MaskedFirstFit(), mode, tag)
        assert m["jobs_completed"] == student["jobs_completed"] and len(rows) >= 20
    assert student["avg_jct_s"] != teacher["avg_jct_s"]  # the untrained network differs


def test_an_unknown_mode_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        diag.main(["--checkpoint", "x", "--mode", "teacher,oracle", "--out", str(tmp_path / "a")])
    assert e.value.code == 2 and "'oracle' is not one of" in capsys.readouterr().err
