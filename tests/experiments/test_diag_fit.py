"""experiments/diag_fit.py on the tiny config (no Ray): rows that account for every
teacher label, a fit that copies its training episodes better than an untrained
network does, and bad input refused with exit 2 before any rollout."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from experiments import diag_fit
from marl_sched.config import REPO_ROOT
from tests.agents.test_rl_module import write_checkpoint

TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fit")
    ck = write_checkpoint(tmp / "untrained")
    out = tmp / "new" / "folder" / "fit.csv"  # made as needed
    argv = ["--config", TINY, "--episodes", "3", "--fresh", "2", "--checkpoint", str(ck),
            "--fit", "plain,raw", "--out", str(out), "train.bc_epochs=20"]  # fmt: skip
    assert diag_fit.main(argv) == 0
    return pd.read_csv(out), str(ck)


def test_the_rows_account_for_every_label(rows):
    df, ck = rows
    assert set(df.network) == {ck, "fit:plain", "fit:raw"}
    for (_, _), g in df.groupby(["network", "episodes"]):
        total = g[g.kind == "all"].iloc[0]
        parts = g[g.kind != "all"]
        assert len(parts) == 6  # 3 kinds x 2 sizes
        assert parts.labels.sum() == total.labels > 0
        assert parts.hits.sum() == total.hits
        assert (parts.hits <= parts.labels).all()
        kept = parts[parts.labels > 0]
        np.testing.assert_allclose(kept.accuracy, kept.hits / kept.labels)
    # the same teacher episodes for every network
    assert df.groupby(["episodes", "kind", "size"]).labels.nunique().max() == 1


def test_a_fit_copies_its_training_episodes_better_than_an_untrained_network(rows):
    df, ck = rows
    acc = df[(df.kind == "all") & (df.episodes == "trained-on")].set_index("network").accuracy
    assert acc["fit:plain"] > acc[ck] + 0.1
    assert acc["fit:raw"] > acc[ck] + 0.1


@pytest.mark.parametrize("argv, message", [
    (["--fit", "deep"], "--fit: 'deep' is not one of plain, raw"),
    (["--fit", "plain", "--episodes", "0"], "--episodes: 1..256"),
    ([], "nothing to measure"),
])  # fmt: skip
def test_bad_arguments_exit_2(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        diag_fit.main(["--config", TINY, "--out", str(tmp_path / "x.csv"), *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


def test_a_checkpoint_that_is_not_one_exits_2_naming_it(tmp_path, capsys):
    (tmp_path / "nothing").mkdir()
    argv = ["--config", TINY, "--checkpoint", str(tmp_path / "nothing"),
            "--out", str(tmp_path / "x.csv")]  # fmt: skip
    assert diag_fit.main(argv) == 2
    err = capsys.readouterr().err
    assert "nothing" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.csv").exists()
