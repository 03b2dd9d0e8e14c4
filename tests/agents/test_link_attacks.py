"""Folders the tool owns (run folder, experiment folder, checkpoint folder) hold only
regular files and folders: a symbolic link (or FIFO) anywhere in one is refused with
one line, exit 2, before any work, and nothing outside the folder is touched."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from marl_sched.cli import main
from marl_sched.config import REPO_ROOT
from tests.agents.test_resume_attacks import (
    _assert_refused,
    _resume,
    _signed_run,
    _snapshot,
)

pytestmark = pytest.mark.usefixtures("own_key")

SHIPPED = REPO_ROOT / "checkpoints" / "marl-default"


def _elsewhere(tmp_path: Path) -> Path:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("not the tool's\n")
    return target


@pytest.mark.parametrize("name", ["tb", "evals"])
def test_a_run_whose_tb_or_evals_is_a_link_is_refused(tmp_path, capsys, ray_calls, name):
    run = _signed_run(tmp_path)
    target = _elsewhere(tmp_path)
    if (run / name).exists():
        shutil.rmtree(run / name)
    (run / name).symlink_to(target, target_is_directory=True)
    before = _snapshot(tmp_path, run)
    rc, err = _resume(run, capsys)
    _assert_refused(rc, err, ray_calls, before=before, tmp_path=tmp_path, run=run)
    assert f"{name}: a symbolic link" in err


def test_a_fifo_deep_in_evals_is_refused(tmp_path, capsys, ray_calls):
    run = _signed_run(tmp_path)
    (run / "evals" / "iter_000001").mkdir(parents=True)
    os.mkfifo(run / "evals" / "iter_000001" / "jobs.csv")
    rc, err = _resume(run, capsys)
    _assert_refused(rc, err, ray_calls)
    assert "FIFO" in err


def _experiment(tmp_path: Path) -> Path:
    exp = tmp_path / "exp"
    exp.mkdir()
    trials = [{"name": "seed1", "seed": 1, "overrides": []}]
    (exp / "experiment.json").write_text(
        json.dumps({"source": "x.yaml", "config": {}, "trials": trials})
    )
    return exp


def test_an_experiment_whose_trial_folder_is_a_link_is_refused(tmp_path, capsys, ray_calls):
    exp = _experiment(tmp_path)
    run = _signed_run(tmp_path)  # a real run folder, somewhere else
    (exp / "seed1").symlink_to(run, target_is_directory=True)
    before = _snapshot(tmp_path, exp)
    rc, err = _resume(exp, capsys)
    _assert_refused(rc, err, ray_calls, before=before, tmp_path=tmp_path, run=exp)
    assert "seed1: a symbolic link" in err


def test_an_experiment_whose_tune_folder_is_a_link_is_refused(tmp_path, capsys, ray_calls):
    exp = _experiment(tmp_path)
    (exp / "tune").symlink_to(_elsewhere(tmp_path), target_is_directory=True)
    rc, err = _resume(exp, capsys)
    _assert_refused(rc, err, ray_calls)
    assert "tune: a symbolic link" in err


# ----------------------------------------------------------------------- evaluate


def _evaluate(ckpt: Path, tmp_path: Path, capsys) -> tuple[int, str]:
    out = tmp_path / "out"
    rc = main(["evaluate", "--checkpoint", str(ckpt), "--out", str(out), "--max-jobs", "5",
               "--quiet"])  # fmt: skip
    assert not out.exists()
    return rc, capsys.readouterr().err


def _one_line(rc: int, err: str, marker: str) -> None:
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith("marl-sched: error: "), err
    assert marker in err, err


@pytest.mark.parametrize("entry", ["manifest.json", "modules"])
def test_a_checkpoint_whose_manifest_or_modules_is_a_link_is_refused(tmp_path, capsys, entry):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(SHIPPED, ckpt)
    real = tmp_path / f"real-{entry}"
    os.replace(ckpt / entry, real)
    (ckpt / entry).symlink_to(real)
    rc, err = _evaluate(ckpt, tmp_path, capsys)
    _one_line(rc, err, f"{entry}: a symbolic link")


def test_a_best_pointer_naming_a_linked_checkpoint_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copytree(SHIPPED, tmp_path / "outside")
    (run / "checkpoints" / "iter_000001").symlink_to(tmp_path / "outside")
    (run / "checkpoints" / "best").write_text("iter_000001\n")
    rc, err = _evaluate(run, tmp_path, capsys)
    _one_line(rc, err, "a symbolic link")
    rc, err = _evaluate(run / "checkpoints" / "best", tmp_path, capsys)
    _one_line(rc, err, "a symbolic link")


def test_a_copied_shipped_checkpoint_still_loads(tmp_path):
    from agents.policy import load_checkpoint

    shutil.copytree(SHIPPED, tmp_path / "ckpt")
    assert load_checkpoint(tmp_path / "ckpt").manifest["modules"]
