"""A baseline checkpoint file whose kind is not a checkpoint baseline, and a compare
whose config asks a learned policy for env options it was not trained with: one line,
exit 2, nothing written."""

from __future__ import annotations

import pytest
import torch

from marl_sched.cli import main
from marl_sched.config import REPO_ROOT

DEFAULT = str(REPO_ROOT / "configs" / "default.yaml")
SHIPPED = str(REPO_ROOT / "checkpoints" / "marl-default")


def _one_line(capsys, rc: int, words: str) -> None:
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith("marl-sched: error: "), err
    assert words in err, err


@pytest.mark.parametrize("kind", ["first-fit", "marl", "no-such-policy"])
def test_evaluate_a_baseline_file_of_another_kind_is_refused(tmp_path, capsys, kind):
    path = tmp_path / "b.pt"
    torch.save({"format": "marl_sched.baseline", "kind": kind}, path)
    out = tmp_path / "out"
    rc = main(["evaluate", "--checkpoint", str(path), "--out", str(out), "--max-jobs", "5",
               "--quiet"])  # fmt: skip
    _one_line(capsys, rc, f"kind {kind!r} is not a baseline")
    assert not out.exists()


def test_compare_refuses_env_options_the_checkpoint_was_not_trained_with(tmp_path, capsys):
    out = tmp_path / "cmp"
    rc = main(["compare", "--config", DEFAULT, "--policies", "marl,first-fit", "--checkpoint",
               SHIPPED, "--max-jobs", "10", "--out", str(out), "--quiet",
               "env.migration=on"])  # fmt: skip
    _one_line(capsys, rc, "env.migration")
    assert not out.exists()
