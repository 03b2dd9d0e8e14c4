"""No command writes into the repository's shipped folders (``checkpoints/``,
``benchmarks/``, ``configs/``), and a run's ``config.yaml`` names the policy that ran."""

from __future__ import annotations

import hashlib

import pytest

from marl_sched.cli import main
from marl_sched.config import REPO_ROOT, load_config

GOLDEN = str(REPO_ROOT / "tests" / "data" / "golden.yaml")
TRACE = str(REPO_ROOT / "tests" / "data" / "golden_trace.csv")


def _digests(folder) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize(
    ("argv", "shipped"),
    [
        (["simulate", "--config", GOLDEN, "--trace", TRACE, "--max-jobs", "5"],
         "checkpoints/marl-default"),
        (["simulate", "--config", GOLDEN, "--trace", TRACE], "configs/new"),
        (["compare", "--config", GOLDEN, "--trace", TRACE, "--policies", "first-fit"],
         "benchmarks"),
        (["train", "--config", GOLDEN], "checkpoints/run"),
        (["benchmark", "--split", "train", "--policies", "first-fit", "--local"],
         "benchmarks/out"),
    ],
    ids=["simulate-checkpoint", "simulate-configs", "compare-benchmarks", "train", "benchmark"],
)  # fmt: skip
def test_outputs_inside_a_shipped_folder_are_refused(capsys, argv, shipped):
    top = REPO_ROOT / shipped.split("/")[0]
    before = _digests(top)
    rc = main([*argv, "--out", str(REPO_ROOT / shipped), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and "shipped files" in err, err
    assert _digests(top) == before
    assert not (REPO_ROOT / "configs" / "new").exists()


def test_a_relative_out_into_a_shipped_folder_is_refused(capsys, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    rc = main(["simulate", "--config", GOLDEN, "--trace", TRACE, "--out",
               "checkpoints/marl-default", "--quiet"])  # fmt: skip
    assert rc == 2 and "checkpoints/ (shipped files)" in capsys.readouterr().err


def test_simulate_and_compare_record_the_policy_that_ran(tmp_path):
    out = tmp_path / "sim"
    argv = ["--config", GOLDEN, "--trace", TRACE, "--max-jobs", "6", "--quiet"]
    assert main(["simulate", *argv, "--policy", "tetris", "--out", str(out)]) == 0
    assert load_config(out / "config.yaml").simulation.policy == "tetris"
    cmp = tmp_path / "cmp"
    assert main(["compare", *argv, "--policies", "tetris,first-fit", "--out", str(cmp)]) == 0
    assert load_config(cmp / "tetris" / "config.yaml").simulation.policy == "tetris"
    assert load_config(cmp / "first-fit" / "config.yaml").simulation.policy == "first-fit"
