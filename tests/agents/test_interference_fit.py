"""Fitting, exporting and serving the learned interference model, and its CLI."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from agents.interference.fit import (
    InterferenceConfig,
    error_summary,
    split_by_group,
    train_mlp,
)
from agents.interference.model import InterferenceMLP, export_model
from marl_sched import interference as itf
from marl_sched.cli import main
from marl_sched.config import load_config

TINY = InterferenceConfig(samples=1500, hidden=(32, 32), epochs=60, patience=10, lr=3e-3)


@pytest.fixture(scope="module")
def samples() -> itf.Samples:
    return itf.generate_samples(TINY.samples, seed=3)


def test_fit_beats_the_trivial_mean_predictor_on_held_out_samples(samples):
    tr_i, va_i, te_i = split_by_group(samples.group, 0.15, 0.2, seed=0)
    assert not set(samples.group[tr_i]) & set(samples.group[te_i])  # whole runs held out
    tr, va, te = samples.subset(tr_i), samples.subset(va_i), samples.subset(te_i)
    module, history = train_mlp(tr.x, tr.y, va.x, va.y, TINY)
    assert 1 <= len(history) <= TINY.epochs
    model = export_model(module, itf.calibration_sha256(), {})
    learned = error_summary(model.predict(te.x), te.y)["mre"]
    trivial = error_summary(np.full(len(te), tr.y.mean()), te.y)["mre"]
    assert learned < 0.6 * trivial, (learned, trivial)


def test_split_is_seeded():
    groups = np.repeat(np.arange(20), 5)
    a = split_by_group(groups, 0.1, 0.2, seed=1)
    b = split_by_group(groups, 0.1, 0.2, seed=1)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert sum(len(x) for x in a) == len(groups)


def _trained_like_module(seed: int = 0) -> InterferenceMLP:
    torch.manual_seed(seed)
    module = InterferenceMLP((24, 12), "silu")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((200, itf.N_FEATURES)) * 3 + 1
    module.set_normalisation(x, np.abs(rng.standard_normal(200)))
    return module.eval()


@pytest.mark.parametrize("activation", ["silu", "relu", "tanh"])
def test_torch_and_numpy_forward_agree(activation):
    torch.manual_seed(1)
    module = InterferenceMLP((32, 16), activation)
    rng = np.random.default_rng(1)
    module.set_normalisation(rng.standard_normal((100, itf.N_FEATURES)) * 2, rng.random(100))
    module.eval()
    x = rng.standard_normal((500, itf.N_FEATURES)) * 2
    with torch.no_grad():
        expected = module(torch.as_tensor(x, dtype=torch.float32)).numpy()
    model = export_model(module, "sha", {})
    np.testing.assert_allclose(model.forward(x), expected, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(model.predict(x), np.maximum(np.exp(expected), 1.0), rtol=1e-5)


def test_export_save_load_round_trip(tmp_path):
    module = _trained_like_module()
    model = export_model(module, itf.calibration_sha256(), {"n_train": 7})
    path = tmp_path / "model.npz"
    model.save(path)
    back = itf.InterferenceModel.load(path)
    x = np.random.default_rng(5).standard_normal((300, itf.N_FEATURES))
    np.testing.assert_array_equal(back.predict(x), model.predict(x))
    assert back.metadata["n_train"] == 7
    assert back.activation == "silu"


# --------------------------------------------------------------------------- CLI

TINY_CONFIG = """\
topology:
  subclusters: 1
  racks_per_subcluster: 2
  servers_per_rack: 2
  server_types:
    - {name: v, count: 4, gpu_type: v100, gpus_per_group: 2}
interference:
  hidden: [16, 16]
  epochs: 8
  patience: 3
  val_fraction: 0.2
  test_fraction: 0.2
"""


def test_cli_fit_writes_its_files_and_report_reads_them(tmp_path, capsys):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY_CONFIG, encoding="utf-8")
    out = tmp_path / "run"
    argv = ["interference", "fit", "--config", str(cfg), "--out", str(out)]
    assert main([*argv, "--samples", "300", "--seed", "1", "--quiet", "interference.lr=0.004"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["config.yaml", "model.npz", "report.json", "scatter.png"]
    resolved = load_config(out / "config.yaml").interference
    assert (resolved["samples"], resolved["seed"], resolved["lr"]) == (300, 1, 0.004)
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    for key in ("n_train", "n_test", "throughput_predictions_per_s"):
        assert key in report
    for key in ("mre", "p90", "per_model", "per_level"):
        assert key in report["simulated"]
    assert "mre" in report["real"] and "p90" in report["real"]
    assert report["n_train"] + report["n_val"] + report["n_test"] == 300
    assert (out / "scatter.png").read_bytes()[:4] == b"\x89PNG"
    model = itf.InterferenceModel.load(out / "model.npz")
    assert model.calibration_sha256 == itf.calibration_sha256()
    assert model.metadata["config"]["samples"] == 300
    capsys.readouterr()
    assert main(["interference", "report", "--model", str(out / "model.npz")]) == 0
    captured = capsys.readouterr()
    assert "simulated held-out: MRE" in captured.out
    assert "warning" not in captured.err


def test_cli_report_warns_when_the_calibration_changed(tmp_path, capsys):
    model = export_model(_trained_like_module(), "0" * 64, {"n_test": 1})
    model.save(tmp_path / "model.npz")
    assert main(["interference", "report", "--model", str(tmp_path / "model.npz")]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "calibration" in err


def test_cli_bad_model_file_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "model.npz"
    bad.write_bytes(b"garbage")
    assert main(["interference", "report", "--model", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(bad) in err


@pytest.mark.parametrize(
    "section, problem",
    [
        ("interference:\n  hiden: [8]\n", "interference.hiden: unknown key"),
        ("interference:\n  epochs: 0\n", "interference.epochs: must be >= 1"),
        ("interference:\n  lr: fast\n", "interference.lr: expected a number"),
    ],
)
def test_cli_bad_interference_key_exits_2(tmp_path, capsys, section, problem):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(section, encoding="utf-8")
    out = tmp_path / "run"
    assert main(["interference", "fit", "--config", str(cfg), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and problem in err and str(cfg) in err
    assert not out.exists()


def test_cli_fit_leaves_nothing_behind_on_failure(tmp_path, monkeypatch):
    import agents.interference.fit as fit_module

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(fit_module, "scatter_png", boom)
    cfg = tmp_path / "tiny.yaml"
    text = TINY_CONFIG.replace("epochs: 8", "epochs: 2") + '  real_data: ""\n'
    cfg.write_text(text, encoding="utf-8")
    out = tmp_path / "run"
    with pytest.raises(RuntimeError, match="disk full"):
        main(
            [
                "interference",
                "fit",
                "--config",
                str(cfg),
                "--out",
                str(out),
                "--samples",
                "120",
                "--quiet",
            ]
        )
    assert not out.exists()  # the outputs were staged beside it, and that folder is gone
    assert list(tmp_path.iterdir()) == [cfg]


def test_interference_config_defaults_are_valid():
    cfg = InterferenceConfig()
    cfg.validate("<defaults>", "interference")
    assert dataclasses.asdict(cfg)["hidden"] == (64, 64)


def test_cli_too_few_samples_exits_2(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["interference", "fit", "--config", "configs/default.yaml", "--out", str(out)]
    assert main([*argv, "--samples", "10"]) == 2
    assert "--samples: must be >= 50, got 10" in capsys.readouterr().err
    assert not out.exists()
