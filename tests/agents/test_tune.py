"""Experiments as Ray Tune trials (agents/tune.py), the train options around them and
the GNN layer option. Ray-free except the tests that take ``ray_session``."""

from __future__ import annotations

import json
import shutil
import time

import pytest
import yaml

from agents.tune import make_trials, parse_grid, split_values
from marl_sched.checkpoints import checkpoint_digest
from marl_sched.cli import main
from marl_sched.config import REPO_ROOT, apply_overrides
from marl_sched.errors import InputError
from tests.agents.test_train_e2e import scalar_steps

TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")


def test_grid_overrides_of_every_type_and_nested_keys():
    """--grid points are applied by the same override function as the command line's."""
    raw = {"train": {"lr": 3e-5}, "model": {"hidden": 64}}
    out = apply_overrides(
        raw,
        ["train.lr=1e-4", "model.hidden=16", "env.hints=[first-fit, locality]",
         "model.share_parameters=false", "train.grad_clip=null", "model.exchange=false",
         "train.bc_teacher=rollout"],
    )  # fmt: skip
    assert out["train"]["lr"] == 1e-4 and isinstance(out["train"]["lr"], float)
    assert out["model"]["hidden"] == 16 and isinstance(out["model"]["hidden"], int)
    assert out["env"]["hints"] == ["first-fit", "locality"]
    assert out["model"]["share_parameters"] is False
    assert out["train"]["grad_clip"] is None and out["model"]["exchange"] is False
    assert out["train"]["bc_teacher"] == "rollout"
    assert raw == {"train": {"lr": 3e-5}, "model": {"hidden": 64}}  # a copy
    with pytest.raises(InputError, match="train.lr.x: override: train.lr is a value"):
        apply_overrides(raw, ["train.lr.x=1"])
    with pytest.raises(InputError, match="expected key=value"):
        apply_overrides(raw, ["train.lr"])


def test_grid_values_and_trial_names():
    assert split_values("1e-4,3e-4") == ["1e-4", "3e-4"]
    assert split_values("[a,b],[c]") == ["[a,b]", "[c]"]
    grid = parse_grid(["train.lr=1e-4,3e-4", "model.layers=1,2"])
    trials = make_trials([0, 1], grid)
    assert len(trials) == 8
    assert trials[0] == {"name": "lr=1e-4,layers=1_seed0", "seed": 0,
                         "overrides": ["train.lr=1e-4", "model.layers=1"]}  # fmt: skip
    assert [t["name"] for t in make_trials([3, 4], [])] == ["seed3", "seed4"]
    with pytest.raises(InputError, match="--grid: train.lr: given twice"):
        parse_grid(["train.lr=1", "train.lr=2"])
    with pytest.raises(InputError, match="empty value"):
        parse_grid(["train.lr=1,"])
    with pytest.raises(InputError, match="a value repeats"):
        parse_grid(["train.lr=1,1"])
    with pytest.raises(InputError, match="seeds are --seed S --seeds N"):
        parse_grid(["train.seed=1,2"])


@pytest.mark.parametrize(
    ("grid", "message"),
    [("train.lrr=1,2", "train.lrr: unknown key"),
     ("train.lr=abc,1", "train.lr: expected a number, got 'abc'"),
     ("model.gnn.layer=SAGEConv", "model.gnn: {'layer': 'SAGEConv'} belongs to a study"),
     ("train.lr", "--grid: 'train.lr': expected key=value")],
)  # fmt: skip
def test_a_bad_grid_exits_2_naming_the_key_and_writes_nothing(tmp_path, capsys, grid, message):
    out = tmp_path / "exp"
    assert main(["train", "--config", TINY, "--out", str(out), "--grid", grid]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_bad_algorithm_and_seeds_exit_2(tmp_path, capsys):
    out = str(tmp_path / "o")
    assert main(["train", "--config", TINY, "--out", out, "train.algorithm=DQN"]) == 2
    assert "train.algorithm: DQN cannot train this agent: its Learner needs Q-networks" in (
        capsys.readouterr().err
    )
    assert main(["train", "--config", TINY, "--out", out, "--seeds", "0"]) == 2
    assert "--seeds: must be >= 1" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_dead_ray_address_fails_at_once_with_one_line(tmp_path, capsys):
    t0 = time.perf_counter()
    rc = main(["train", "--config", TINY, "--out", str(tmp_path / "o"),
               "--ray-address", "127.0.0.1:1"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "--ray-address: 127.0.0.1:1: no Ray cluster answers there" in err
    assert time.perf_counter() - t0 < 30
    assert not (tmp_path / "o").exists()


def test_local_ray_never_attaches_to_another_cluster(monkeypatch):
    """``address="local"``: a ``ray start`` cluster, RAY_ADDRESS or a stale pointer
    file cannot make a plain ``train`` connect (and then refuse ``num_cpus``)."""
    import ray

    from agents import commands

    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append(kw))
    monkeypatch.setattr(commands, "_RAY_STARTED", False)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    commands.start_ray(None, quiet=True)
    assert calls[0]["address"] == "local" and calls[0]["include_dashboard"] is False
    import os

    assert os.environ["RAY_AUTH_MODE"] == "disabled"


# ------------------------------------------------------------------ with Ray


def _results(out) -> list[dict]:
    import csv

    with (out / "results.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def test_tune_grid_of_two_learning_rates_resumes_after_an_interruption(
    ray_session, tmp_path, capsys
):
    """Two Tune trials (two learning rates, one module per agent): both train, each
    logging policy loss and explained variance, also per module; the second is
    interrupted before its first checkpoint and resumed; its checkpoint loads.
    Each invocation writes results.csv and prints it under --quiet; each trial has one
    TensorBoard run (its own tb/, none from Tune); the records say 1 then 2
    iterations although train_tiny.yaml says 2."""
    from agents import load_agents

    out = tmp_path / "exp"
    args = ["train", "--config", TINY, "--out", str(out), "--quiet"]
    grid = ["--grid", "train.lr=0.001,0.0003", "--seed", "5",
            "model.exchange=false", "model.share_parameters=false"]  # fmt: skip
    assert main([*args, *grid, "--iterations", "1"]) == 0
    printed = capsys.readouterr().out.splitlines()
    recorded = json.loads((out / "experiment.json").read_text())
    names = [t["name"] for t in recorded["trials"]]
    assert names == ["lr=0.001_seed5", "lr=0.0003_seed5"]
    assert recorded["config"]["train"]["iterations"] == 1
    rows = _results(out)
    assert [r["trial"] for r in rows] == names
    assert [r["train.lr"] for r in rows] == ["0.001", "0.0003"]
    for r in rows:
        assert r["seed"] == "5" and r["iterations"] == "1" and r["env_steps"] == "200"
        assert float(r["final_validation_avg_jct_s"]) > 0 and float(r["wall_s"]) > 0
        assert r["best_checkpoint"] in (f"{r['trial']}/checkpoints/iter_00000{i}" for i in (0, 1))
        assert r["best_checkpoint_sha256"] == checkpoint_digest(out / r["best_checkpoint"])
        assert float(r["best_validation_avg_jct_s"]) <= float(r["final_validation_avg_jct_s"])
    assert printed[0].split()[:3] == ["trial", "seed", "train.lr"]
    assert [line.split()[0] for line in printed[2:]] == names  # the table, under --quiet
    assert not list((out / "tune").rglob("events.out.tfevents*"))  # no second TB run
    for name in names:
        run = out / name
        # one TensorBoard run: every event file in tb/ itself (HParams add a second file)
        assert {f.parent for f in run.rglob("events.out.tfevents*")} == {run / "tb"}
        assert (run / "checkpoints" / "latest").read_text().strip() == "iter_000001"
        resolved = yaml.safe_load((run / "config.yaml").read_text())
        assert resolved["train"]["seed"] == 5 and str(resolved["train"]["lr"]) in name
        assert resolved["train"]["iterations"] == 1
        tags = set(scalar_steps(run))
        assert {"losses/policy_loss", "losses/explained_variance", "losses/entropy"} <= tags
        assert {"time/sample_s", "time/iteration_s", "time/validate_s"} <= tags, (name, tags)
        # and Tune's per-iteration records (result.json: progress.csv keeps the columns
        # of the first report, the warm start's)
        lines = (out / "tune" / "session_01" / name / "result.json").read_text().splitlines()
        assert json.loads(lines[-1])["time/sample_s"] > 0
        for module in ("sc0", "sc1"):  # one module per agent: each one's own figures
            own = {f"losses/{module}/{k}" for k in ("policy_loss", "entropy", "value_loss")}
            assert own | {f"losses/{module}/explained_variance"} <= tags, (name, tags)
    assert list((out / "tune").glob(f"session_01/{names[0]}/checkpoint_*"))  # Tune's pointers
    # the second trial was interrupted before its first iteration's checkpoint
    second = out / names[1]
    shutil.rmtree(second / "checkpoints" / "iter_000001")
    (second / "checkpoints" / "latest").write_text("iter_000000\n")
    assert main([*args, "--resume", "--iterations", "2"]) == 0
    for name in names:
        state = json.loads((out / name / "checkpoints" / "iter_000002" / "state.json").read_text())
        assert state["iteration"] == 2
    assert (second / "checkpoints" / "iter_000001").is_dir()  # redone
    assert [r["iterations"] for r in _results(out)] == ["2", "2"]
    # config.yaml keeps what the trial started with (signed); results.csv says what ran
    assert yaml.safe_load((second / "config.yaml").read_text())["train"]["iterations"] == 1
    assert (out / "tune" / "session_02").is_dir()
    manifest = json.loads((second / "checkpoints" / "iter_000002" / "manifest.json").read_text())
    assert manifest["model"]["exchange"] is False
    agents = load_agents(second)
    assert not agents.nets["sc1"].exchange.enabled


def test_a_config_naming_a_retired_layer_exits_2(tmp_path, capsys):
    ckpt = str(REPO_ROOT / "checkpoints" / "marl-default")
    config = str(REPO_ROOT / "configs" / "default.yaml")
    rc = main(["evaluate", "--checkpoint", ckpt, "--config", config, "--max-jobs", "5",
               "--out", str(tmp_path / "e"), "--quiet", "model.gnn.layer=GATv2Conv"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "model.gnn: {'layer': 'GATv2Conv'} belongs to a study that no longer ships" in err


def test_resuming_an_experiment_refuses_a_crafted_trial_folder(tmp_path, capsys):
    """An experiment's trials resume through the same signed checkpoints as one run:
    a trial folder this tool did not write is refused before Ray starts."""
    import pickle

    from agents.config import model_config, train_config
    from agents.records import resolved_config
    from agents.tune import write_experiment
    from marl_sched.config import load_config
    from tests.agents.test_integrity import _Payload

    cfg = load_config(TINY)
    out = tmp_path / "exp"
    trials = make_trials([0, 1], [])
    write_experiment(out, resolved_config(cfg, model_config(cfg), train_config(cfg)), TINY, trials)
    ckpt = out / "seed1" / "checkpoints" / "iter_000001"
    (ckpt / "rllib").mkdir(parents=True)
    marker = tmp_path / "pwned"
    (ckpt / "rllib" / "algorithm_state.pkl").write_bytes(pickle.dumps(_Payload(marker)))
    (ckpt / "state.json").write_text(json.dumps({"iteration": 1, "env_steps": 1, "wall_s": 1}))
    (out / "seed1" / "checkpoints" / "latest").write_text("iter_000001\n")
    rc = main(["train", "--config", TINY, "--out", str(out), "--resume", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "no signature" in err
    assert not marker.exists()
    assert main(["train", "--config", TINY, "--out", str(out), "--resume", "--seeds", "2"]) == 2
    assert "keeps its trials" in capsys.readouterr().err


def test_the_progress_table_shows_the_iteration_reached_not_tunes_report_count():
    """Tune's own ``training_iteration`` counts reports (the warm start's validation is
    one more than the iterations trained): the table shows the trial's iteration."""
    from agents.tune import METRIC, progress_reporter

    reporter = progress_reporter()
    columns = reporter._metric_columns
    assert list(columns) == ["iteration", "env_steps", METRIC]
    assert "training_iteration" not in columns
