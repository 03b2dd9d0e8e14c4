"""``--trace F`` on simulate, evaluate and compare scores F's own jobs (all of them,
no warm-up) unless ``--start`` / ``--max-jobs`` give a window: the config's window of
its own trace (default.yaml: jobs 200-1999 after 200 warm-up jobs) is not kept. The
first line printed names the jobs scored."""

from __future__ import annotations

import json

from marl_sched.cli import main
from marl_sched.config import REPO_ROOT

DEFAULT = str(REPO_ROOT / "configs/default.yaml")
SAMPLE = REPO_ROOT / "configs/traces/philly_sample.csv"


def _trace(tmp_path, jobs: int):
    lines = SAMPLE.read_text().splitlines()
    path = tmp_path / "own.csv"
    path.write_text("\n".join(lines[: jobs + 1]) + "\n")
    return path


def test_simulate_scores_the_traces_own_jobs(tmp_path, capsys):
    trace = _trace(tmp_path, 30)
    out = tmp_path / "run"
    argv = ["simulate", "--config", DEFAULT, "--trace", str(trace), "--policy", "first-fit",
            "--out", str(out), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"scored:  {trace} jobs 0–29 (30 jobs)"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["jobs_total"] == 30


def test_a_window_given_on_the_command_line_is_kept(tmp_path, capsys):
    trace = _trace(tmp_path, 60)
    argv = ["simulate", "--config", DEFAULT, "--trace", str(trace), "--policy", "first-fit",
            "--start", "20", "--max-jobs", "25", "--out", str(tmp_path / "run"),
            "--quiet"]  # fmt: skip
    assert main(argv) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"scored:  {trace} jobs 20–44 (25 jobs, after 20 warm-up jobs)"


def test_without_trace_the_configs_window_is_scored(tmp_path, capsys):
    argv = ["simulate", "--config", DEFAULT, "--policy", "first-fit", "--max-jobs", "20",
            "--out", str(tmp_path / "run"), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith("philly_sample.csv jobs 200–219 (20 jobs, after 200 warm-up jobs)")


def test_evaluate_scores_the_traces_own_jobs(tmp_path, capsys):
    trace = _trace(tmp_path, 20)
    ckpt = str(REPO_ROOT / "checkpoints/baselines/mlfs_rl.pt")
    argv = ["evaluate", "--checkpoint", ckpt, "--trace", str(trace), "--out",
            str(tmp_path / "ev")]  # fmt: skip
    assert main(argv) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"scored:  {trace} jobs 0–19 (20 jobs)"


def test_compare_scores_the_traces_own_jobs(tmp_path, capsys):
    trace = _trace(tmp_path, 25)
    argv = ["compare", "--config", DEFAULT, "--trace", str(trace), "--policies",
            "first-fit,tetris", "--out", str(tmp_path / "cmp"), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("compare — own.csv jobs 0–end, load 0.6")
    import csv

    rows = list(csv.DictReader((tmp_path / "cmp" / "results.csv").open()))
    assert {r["jobs_completed"] for r in rows} == {"25"}
