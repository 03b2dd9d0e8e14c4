"""``marl-sched compare``: every output written; bad names refused before any work."""

from __future__ import annotations

import csv
import os
import re

import pytest

from marl_sched.cli import main
from marl_sched.compare import checkpoints_by_policy
from marl_sched.config import REPO_ROOT
from marl_sched.errors import InputError

DEFAULT = str(REPO_ROOT / "configs/default.yaml")
SAMPLE = str(REPO_ROOT / "configs/traces/philly_sample.csv")


def test_compare_writes_every_output(tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = [
        "compare",
        "--config",
        DEFAULT,
        "--trace",
        SAMPLE,
        "--max-jobs",
        "80",
        "--policies",
        "random,first-fit,interference-aware",
        "--out",
        str(out),
        "--quiet",
        "simulation.backfill=false",
    ]
    assert main(argv) == 0
    from marl_sched.config import load_config

    saved = load_config(out / "config.yaml")  # the resolved config, override included
    assert saved.simulation.backfill is False and saved.workload.max_jobs == 80
    ran = load_config(out / "first-fit" / "config.yaml").to_dict()
    assert ran["simulation"].pop("policy") == "first-fit"  # the policy that ran
    saved = saved.to_dict()
    saved["simulation"].pop("policy")
    assert ran == saved
    for name in ("results.csv", "results.md", "jct_cdf.png", "avg_jct.png"):
        assert (out / name).stat().st_size > 0, name
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert sorted(r["policy"] for r in rows) == ["first-fit", "interference-aware", "random"]
    # sorted best first; the best baseline's ratio is exactly 1
    jcts = [float(r["avg_jct_s"]) for r in rows]
    assert jcts == sorted(jcts) and float(rows[0]["ratio_to_best_baseline"]) == 1.0
    for p in ("random", "first-fit", "interference-aware"):
        assert (out / p / "metrics.json").exists() and (out / p / "jobs.csv").exists()
    md = (out / "results.md").read_text()
    assert "| first-fit |" in md
    # the screen table and results.md: the same columns, the same figures in each row
    from marl_sched.compare import COMPARE_COLUMNS, UTILISATION_NOTE

    headers = [h for _, h, _ in COMPARE_COLUMNS]
    assert "GPU util" in headers and "util steady" in headers
    table = [ln.split("|")[1:-1] for ln in md.splitlines() if ln.startswith("| ")]
    assert [c.strip() for c in table[0]] == headers
    screen = capsys.readouterr().out.splitlines()
    (i,) = [k for k, ln in enumerate(screen) if ln.split()[:2] == ["policy", "jobs"]]
    assert re.split(r"\s{2,}", screen[i].strip()) == headers
    md_rows = {r[0].strip(): [c.strip() for c in r] for r in table[1:]}
    for ln in screen[i + 2 : i + 5]:
        cells = re.split(r"\s{2,}", ln.strip())
        assert md_rows[cells[0]] == cells
    assert UTILISATION_NOTE in md and "util steady:" in UTILISATION_NOTE


def test_compare_unknown_policy_fails_cleanly(tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = [
        "compare",
        "--config",
        DEFAULT,
        "--trace",
        SAMPLE,
        "--policies",
        "first-fit,nope",
        "--out",
        str(out),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown policy 'nope'" in err[0]
    assert not out.exists() or not any(out.iterdir())


def test_checkpoint_option_forms():
    pols = ["marl", "harmony", "first-fit"]
    assert checkpoints_by_policy("ck", pols) == {"marl": "ck"}
    assert checkpoints_by_policy("marl=a,harmony=b", pols) == {"marl": "a", "harmony": "b"}
    with pytest.raises(InputError, match="'mlfs-rl' is not one of --policies"):
        checkpoints_by_policy("mlfs-rl=x", pols)
    with pytest.raises(InputError, match="expected name=path"):
        checkpoints_by_policy("marl=a,oops", pols)


def test_a_bad_checkpoint_is_refused_before_any_policy_runs(tmp_path, capsys):
    """compare checks every learned policy's checkpoint against the cluster first: with
    a corrupt one nothing runs and nothing is written (not even the heuristics)."""
    bad = tmp_path / "ckpt"
    bad.mkdir()
    (bad / "manifest.json").write_text("{")
    out = tmp_path / "cmp"
    argv = ["compare", "--config", DEFAULT, "--trace", SAMPLE, "--max-jobs", "20",
            "--policies", "first-fit,marl", "--checkpoint", str(bad),
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "corrupt checkpoint" in err[0]
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".cmp.tmp")]


def test_an_interrupted_compare_leaves_nothing(tmp_path, monkeypatch):
    """Outputs appear in --out only when every policy has run."""
    import marl_sched.compare as compare

    calls = []

    def boom(task):
        calls.append(task["policy"])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(task)

    real = compare._run_one
    monkeypatch.setattr(compare, "_run_one", boom)
    out = tmp_path / "cmp"
    argv = ["compare", "--config", DEFAULT, "--trace", SAMPLE, "--max-jobs", "20",
            "--policies", "first-fit,tetris", "--out", str(out), "--quiet"]  # fmt: skip
    monkeypatch.setattr(os, "cpu_count", lambda: 1)  # in-process workers, so the patch holds
    assert main(argv) == 130  # "marl-sched: interrupted"
    assert calls == ["first-fit", "tetris"]
    assert not out.exists() and not list(tmp_path.iterdir())


def test_compare_seeds_records_every_run_an_interval_and_the_checkpoint(tmp_path, capsys):
    """--seeds 2: one run per policy and seed, the mean and a 95 % half-width over the
    seeds; a learned policy's checkpoint path and content digest in runs.csv,
    results.csv and its metrics.json."""
    import json

    from marl_sched.benchmark.cells import checkpoint_id

    out = tmp_path / "cmp"
    argv = ["compare", "--config", DEFAULT, "--trace", SAMPLE, "--max-jobs", "40",
            "--policies", "first-fit,random,mlfs-rl", "--seeds", "2", "--seed", "5",
            "--out", str(out), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    runs = list(csv.DictReader((out / "runs.csv").open()))
    assert sorted((r["policy"], r["seed"]) for r in runs) == [
        (p, s) for p in ("first-fit", "mlfs-rl", "random") for s in ("5", "6")
    ]
    rows = {r["policy"]: r for r in csv.DictReader((out / "results.csv").open())}
    rnd = [float(r["avg_jct_s"]) for r in runs if r["policy"] == "random"]
    assert rnd[0] != rnd[1]  # the seed reaches the policy
    assert float(rows["random"]["avg_jct_s"]) == pytest.approx(sum(rnd) / 2)
    assert float(rows["random"]["avg_jct_ci95_s"]) == pytest.approx(
        12.706 * abs(rnd[0] - rnd[1]) / 2, rel=1e-3
    )
    assert rows["random"]["seeds"] == "2"
    digest = checkpoint_id(REPO_ROOT / "checkpoints/baselines/mlfs_rl.pt")
    assert rows["mlfs-rl"]["checkpoint"] == "checkpoints/baselines/mlfs_rl.pt"
    assert rows["mlfs-rl"]["checkpoint_sha256"] == digest
    metrics = json.loads((out / "mlfs-rl" / "seed6" / "metrics.json").read_text())
    assert (metrics["checkpoint_sha256"], metrics["seed"]) == (digest, 6)
    assert rows["first-fit"]["checkpoint"] == "" and rows["first-fit"]["checkpoint_sha256"] == ""


def test_compare_one_seed_has_no_interval(tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = ["compare", "--config", DEFAULT, "--trace", SAMPLE, "--max-jobs", "30",
            "--policies", "first-fit", "--out", str(out), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    (row,) = csv.DictReader((out / "results.csv").open())
    assert row["seeds"] == "1" and row["avg_jct_ci95_s"] == ""
    assert (out / "first-fit" / "metrics.json").exists()
    assert main([*argv[:-3], "--seeds", "0", "--out", str(tmp_path / "x"), "--quiet"]) == 2
    assert "--seeds" in capsys.readouterr().err


def test_compare_seeds_vary_the_workload_draws_and_print_the_interval(tmp_path, capsys):
    """--seeds 3 on a jittered window: each seed draws its own arrivals (as a benchmark
    cell does), so even first-fit, which draws nothing itself, differs between seeds;
    the screen table, results.md and the figure title give mean ± the 95 % half-width
    and say over how many seeds; results.md's title names the trace and window."""
    out = tmp_path / "cmp"
    argv = ["compare", "--config", DEFAULT, "--trace", SAMPLE, "--max-jobs", "40",
            "--policies", "first-fit", "--seeds", "3", "--seed", "4", "--out", str(out),
            "--quiet", "workload.arrival_jitter=0.3"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    runs = [float(r["avg_jct_s"]) for r in csv.DictReader((out / "runs.csv").open())]
    assert len(runs) == 3 and len(set(runs)) == 3
    (row,) = csv.DictReader((out / "results.csv").open())
    half = float(row["avg_jct_ci95_s"])
    assert half > 0
    window = "compare — philly_sample.csv jobs 0–39, load 0.6"
    assert printed[0] == f"{window}; 3 seeds (4–6): mean ± 95 % CI over seeds"
    assert f"{float(row['avg_jct_s']):.0f} ± {half:.0f}" in "\n".join(printed)
    md = (out / "results.md").read_text()
    assert md.startswith("# Comparison — philly_sample.csv jobs 0–39, load 0.6, train split\n")
    assert "3 seeds (4–6): mean ± 95 % CI over seeds" in md
    assert f"| first-fit | {row['jobs_completed']} | {float(row['avg_jct_s']):.0f} ± " in md


def test_compare_seeds_that_change_nothing_say_so(tmp_path, capsys, monkeypatch):
    """When no seed changes any run, there is no interval to give, and it says so."""
    import marl_sched.compare as compare

    real = compare._run_one

    def same_seed(task):  # every run as the first seed's
        metrics, jct = real({**task, "seed": 4, "trace_options": {**task["trace_options"],
                                                                  "seed": 0}})  # fmt: skip
        return {**metrics, "seed": task["seed"]}, jct

    monkeypatch.setattr(compare, "_run_one", same_seed)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)  # in-process workers, so the patch holds
    out = tmp_path / "cmp"
    argv = ["compare", "--config", DEFAULT, "--trace", SAMPLE, "--max-jobs", "20",
            "--policies", "first-fit", "--seeds", "2", "--seed", "4", "--out", str(out),
            "--quiet"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].endswith("; 2 seeds, identical: no interval")
    assert "±" not in "\n".join(printed)
    assert "2 seeds, identical: no interval" in (out / "results.md").read_text()
