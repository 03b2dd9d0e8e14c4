"""The command line: outputs, exit status 2 with one line on bad input, nothing partial."""

from __future__ import annotations

import json

import numpy as np
import pytest

from marl_sched.cli import main
from marl_sched.config import REPO_ROOT
from marl_sched.metrics import JOB_COLUMNS, METRIC_KEYS

DEFAULT = str(REPO_ROOT / "configs/default.yaml")


def _err_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def test_simulate_writes_metrics_and_jobs(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["simulate", "--config", DEFAULT, "--max-jobs", "60", "--out", str(out), "--quiet"])
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(METRIC_KEYS) <= set(metrics)
    assert metrics["jobs_total"] == metrics["jobs_completed"] == 60
    lines = (out / "jobs.csv").read_text().splitlines()
    assert lines[0].split(",") == list(JOB_COLUMNS) and len(lines) == 61
    # the figures are those of the rows written (JCTs rounded to 1e-6 s in jobs.csv)
    jct = np.array([float(r.split(",")[JOB_COLUMNS.index("jct_s")]) for r in lines[1:]])
    slow = np.array([float(r.split(",")[JOB_COLUMNS.index("slowdown")]) for r in lines[1:]])
    assert metrics["avg_jct_s"] == pytest.approx(jct.mean(), abs=1e-6)
    for q in (50, 95, 99):
        assert metrics[f"p{q}_jct_s"] == pytest.approx(np.percentile(jct, q), abs=1e-6)
    assert metrics["p50_jct_s"] <= metrics["p95_jct_s"] <= metrics["p99_jct_s"] <= jct.max()
    assert metrics["avg_slowdown"] == pytest.approx(slow.mean(), abs=1e-6)
    assert (slow >= 1.0 - 1e-6).all()
    assert "avg JCT" in capsys.readouterr().out


def test_bad_trace_row_exit_2_names_line_and_writes_nothing(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,num_gpus,duration\na,0,1,100\nb,5,1,-7\n")
    out = tmp_path / "run"
    rc = main(["simulate", "--config", DEFAULT, "--trace", str(trace), "--out", str(out)])
    assert rc == 2
    assert _err_line(capsys).endswith(f"{trace}:3: duration: must be > 0, got -7")
    assert not (out / "metrics.json").exists() and not (out / "jobs.csv").exists()


def test_unknown_model_in_trace(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,num_gpus,duration,model\na,0,1,100,alexnet9000\n")
    rc = main(
        ["simulate", "--config", DEFAULT, "--trace", str(trace), "--out", str(tmp_path / "o")]
    )
    assert rc == 2
    assert f"{trace}:2: model: unknown model 'alexnet9000'" in _err_line(capsys)


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (
            ["simulate", "--config", DEFAULT, "--policy", "nope", "--out", "X"],
            "unknown policy 'nope'",
        ),
        (["simulate", "--config", DEFAULT, "--load", "0", "--out", "X"], "must be > 0, got 0"),
        (
            ["simulate", "--config", "missing.yaml", "--out", "X"],
            "missing.yaml: cannot read config",
        ),
        (["simulate", "--config", DEFAULT], "the following arguments are required: --out"),
        (["trace", "inspect", "nothing.csv"], "nothing.csv: cannot read trace"),
    ],
)
def test_bad_arguments_exit_2(tmp_path, capsys, monkeypatch, argv, fragment):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert fragment in _err_line(capsys)
    assert not (tmp_path / "X" / "metrics.json").exists()


def test_bad_config_key_exit_2(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("topology:\n  subclusters: 2\n  rackz: 1\n")
    assert main(["simulate", "--config", str(cfg), "--out", str(tmp_path / "o")]) == 2
    assert _err_line(capsys) == (
        "marl-sched: error: " + f"{cfg}: topology.rackz: unknown key (known: "
        "gpu_sharing, pcie_gbps, qpi_gbps, rack_oversubscription, racks_per_subcluster, "
        "server_types, servers_per_rack, subcluster_uplink_gbps, subclusters)"
    )


def test_policies_lists_every_heuristic(capsys):
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    for name in (
        "random",
        "first-fit",
        "load-balance",
        "tetris",
        "locality",
        "congestion-aware",
        "interference-aware",
    ):
        assert any(line.startswith(name + " ") for line in out.splitlines()), name


def test_trace_inspect(capsys):
    assert (
        main(
            [
                "trace",
                "inspect",
                str(REPO_ROOT / "configs/traces/philly_sample.csv"),
                "--gpus",
                "384",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "2,500" in out and "offered load" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "--config", "configs/tiny.yaml", "--seed", "-1", "--out", "OUT"],
         "--seed: must be >= 0, got -1"),
        (["train", "--config", "configs/train_tiny.yaml", "--seed", "-3", "--out", "OUT"],
         "--seed: must be >= 0, got -3"),
        (["simulate", "--config", "configs/tiny.yaml", "--out", ""], "--out: empty path"),
        (["simulate", "--config", "configs/tiny.yaml", "--out", "FILE/sub"],
         "is a file, not a folder"),
    ],
)  # fmt: skip
def test_bad_arguments_are_one_line_before_any_work(argv, message, tmp_path, capsys):
    from marl_sched.config import REPO_ROOT

    (tmp_path / "FILE").write_text("x")
    argv = [str(REPO_ROOT / a) if a.startswith("configs/") else a for a in argv]
    argv = [str(tmp_path / a) if a in ("OUT", "FILE/sub") else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


@pytest.mark.parametrize(("section", "key"), [("workload", "seed"), ("simulation", "seed")])
def test_a_negative_seed_in_a_config_is_refused(section, key, tmp_path, capsys):
    import yaml

    from marl_sched.config import REPO_ROOT

    raw = yaml.safe_load((REPO_ROOT / "configs" / "tiny.yaml").read_text())
    raw.setdefault(section, {})[key] = -2
    raw["workload"]["trace"] = str(REPO_ROOT / raw["workload"]["trace"])
    path = tmp_path / "neg.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["simulate", "--config", str(path), "--out", str(tmp_path / "o")]) == 2
    assert f"{section}.{key}: must be >= 0, got -2" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "env", "execs"),
    [(["marl-sched", "train", "--config", "c"], None, True),
     (["marl-sched", "train", "--config", "c"], "random", True),
     (["marl-sched", "train", "--config", "c"], "7", False),
     (["marl-sched", "simulate", "--config", "c"], None, False)],
)  # fmt: skip
def test_train_from_the_shell_runs_with_a_fixed_hash_seed(argv, env, execs, monkeypatch):
    """Same-seed training reproduces only with a fixed PYTHONHASHSEED (RLlib iterates
    sets of agent ids): `marl-sched train` re-executes itself once with it set to 0."""
    import os
    import sys

    from marl_sched import cli

    calls = []
    monkeypatch.setattr(sys, "argv", argv)
    if env is None:
        monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    else:
        monkeypatch.setenv("PYTHONHASHSEED", env)
    monkeypatch.setattr(os, "execv", lambda exe, args: calls.append(args))
    cli._fixed_hash_seed()
    if execs:
        assert calls == [[sys.executable, "-m", "marl_sched.cli", *argv[1:]]]
        assert os.environ["PYTHONHASHSEED"] == "0"
    else:
        assert calls == []
