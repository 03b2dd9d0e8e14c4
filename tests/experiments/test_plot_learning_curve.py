"""experiments/plot_learning_curve.py on fabricated TensorBoard files (torch's
SummaryWriter, as a run writes them) and experiment records: a band only from two
runs or more, naming the runs it covers. Ray-free."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from agents.tune import write_experiment
from experiments import plot_learning_curve as plc

TAG = "charts/avg_jct_s"


def _run(folder, points: dict[int, float]):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder / "tb"))
    for step, value in points.items():
        writer.add_scalar(TAG, value, step)
    writer.close()
    return folder


def test_a_band_from_two_seeds_and_no_interval_from_one(tmp_path, capsys):
    exp = tmp_path / "exp"
    trials = [{"name": n, "seed": s, "overrides": []}
              for n, s in (("lr=1_seed0", 0), ("lr=1_seed1", 1), ("lr=2_seed0", 0))]  # fmt: skip
    write_experiment(exp, {}, "fabricated", trials)
    _run(exp / "lr=1_seed0", {0: 100.0, 200: 90.0, 400: 80.0})
    _run(exp / "lr=1_seed1", {0: 110.0, 200: 96.0, 400: 70.0})
    _run(exp / "lr=2_seed0", {0: 100.0, 400: 60.0})
    out = tmp_path / "curve.png"
    assert plc.main([str(exp), "--out", str(out), "--tag", TAG]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = capsys.readouterr().out
    band, single = text.split("lr=2 (")
    assert "lr=1 (mean of lr=1_seed0, lr=1_seed1)" in band
    half = stats.t.ppf(0.975, 1) * np.std([80.0, 70.0], ddof=1) / np.sqrt(2)
    last = band.strip().splitlines()[-2 if "wrote" in band else -1].split()
    assert [float(v) for v in last] == pytest.approx([400, 75.0, half], rel=1e-3)
    assert single.startswith("lr=2_seed0): env steps, value; 1 seed: no interval")
    assert [line.split() for line in single.splitlines()[1:3]] == [["0", "100"], ["400", "60"]]


def test_a_folder_that_is_no_run_or_a_bad_experiment_exits_2(tmp_path, capsys):
    assert plc.main([str(tmp_path), "--out", str(tmp_path / "c.png")]) == 2
    assert "not a run folder" in capsys.readouterr().err
    (tmp_path / "experiment.json").write_text('{"trials": [{"name": "../x"}]}')
    assert plc.main([str(tmp_path), "--out", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("plot_learning_curve: ") and "unreadable" in err
