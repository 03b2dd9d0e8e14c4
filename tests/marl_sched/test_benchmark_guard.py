"""The benchmark's tracks, sensitivity variants, test-split ledger and the test-split
guard that recognises test rows by content (a slice copied into another file)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from marl_sched.benchmark import check_not_test, load_suite
from marl_sched.benchmark import ledger as ledger_mod
from marl_sched.benchmark import suite as suite_mod
from marl_sched.benchmark.command import run_benchmark
from marl_sched.benchmark.sensitivity import (
    GAVEL_NIC_SCALE,
    GAVEL_SPREAD_RATIO,
    check_sensitivity,
    compare_rankings,
    run_sensitivity,
)
from marl_sched.benchmark.suite import (
    copied_test_rows,
    in_test_split,
    warn_if_test,
)
from marl_sched.cli import main
from marl_sched.config import REPO_ROOT
from marl_sched.errors import InputError
from tests.marl_sched.benchmark_helpers import HAS_MIGRATION, golden_suite_data

TRACE = REPO_ROOT / "tests" / "data" / "golden_trace.csv"


pytestmark = pytest.mark.usefixtures("fingerprint_cache")


def _suite(tmp_path: Path) -> str:
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(golden_suite_data(), sort_keys=False))
    return str(path)


def _rows_in_submit_order() -> tuple[list[str], list[list[str]]]:
    with TRACE.open() as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    return header, sorted(body, key=lambda r: float(r[1]))


def _copy_rows(path: Path, first: int, end: int, shift: float = 0.0) -> Path:
    """Jobs ``first..end-1`` (submit order) of the golden trace as a new file, under
    new job ids and with every submit time moved by ``shift``."""
    header, body = _rows_in_submit_order()
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for i, r in enumerate(body[first:end]):
            w.writerow([f"copy-{i}", f"{float(r[1]) + shift:.1f}", *r[2:]])
    return path


# ------------------------------------------------------------------ the guard


def test_a_copied_slice_of_test_rows_is_refused_and_other_rows_are_not(tmp_path) -> None:
    suite = load_suite(_suite(tmp_path))
    copy = _copy_rows(tmp_path / "slice.csv", 22, 34, shift=5000.0)
    region, hits = copied_test_rows(copy, suite=suite)
    # every run of 6 rows after the first (whose gap to its predecessor the copy lost)
    assert region.split == "test" and hits == 12 - 6
    with pytest.raises(InputError, match=r"slice\.csv: jobs 0\.\.end repeat rows of the test"):
        check_not_test(copy, suite=suite)
    # six rows are not enough to tell a copy from chance; a train slice is allowed
    check_not_test(_copy_rows(tmp_path / "six.csv", 22, 28), suite=suite)
    check_not_test(_copy_rows(tmp_path / "train.csv", 2, 18), suite=suite)
    # a window of the copy that ends before the copied rows' sixth is not refused
    assert in_test_split(copy, 0, 5, suite=suite) is None
    # compare / evaluate / simulate warn instead of refusing
    line = warn_if_test(copy, 0, None, suite=suite, command="simulate")
    assert line.startswith("warning: simulate: ") and "repeat rows of the test split" in line


def test_changed_rows_are_not_a_copy(tmp_path) -> None:
    suite = load_suite(_suite(tmp_path))
    header, body = _rows_in_submit_order()
    path = tmp_path / "edited.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r in body[22:34]:  # every duration 1 s longer
            w.writerow([*r[:3], f"{float(r[3]) + 1:.1f}", *r[4:]])
    assert copied_test_rows(path, suite=suite) is None


def test_the_fingerprint_cache_is_plain_numbers_and_reused(tmp_path) -> None:
    suite = load_suite(_suite(tmp_path))
    copy = _copy_rows(tmp_path / "slice.csv", 22, 34)
    suite_mod._region_shingles.cache_clear()
    assert copied_test_rows(copy, suite=suite) is not None
    files = list((tmp_path / "cache" / "marl_sched" / "test_rows").glob("*.npy"))
    assert len(files) == 1
    cached = np.load(files[0], allow_pickle=False)
    # a check word, then one fingerprint per run of the region's rows
    assert cached.dtype == np.uint64 and len(cached) == 1 + 20 - 6 + 1
    suite_mod._region_shingles.cache_clear()
    assert copied_test_rows(copy, suite=suite)[1] == 12 - 6  # read back from disk


@pytest.mark.parametrize("tamper", ["empty", "edited", "check-only"])
def test_an_emptied_or_edited_fingerprint_cache_is_recomputed_not_trusted(tmp_path, tamper):
    """Emptying the cache (or editing it) must not let copied test rows through: the
    file's check word covers the test file's digest, the region and every value."""
    suite = load_suite(_suite(tmp_path))
    copy = _copy_rows(tmp_path / "slice.csv", 22, 34)
    suite_mod._region_shingles.cache_clear()
    assert copied_test_rows(copy, suite=suite) is not None
    (cache,) = (tmp_path / "cache" / "marl_sched" / "test_rows").glob("*.npy")
    stored = np.load(cache, allow_pickle=False)
    forged = {
        "empty": np.array([], dtype=np.uint64),
        "edited": np.concatenate([stored[:1], stored[1:] + np.uint64(1)]),
        "check-only": stored[:1],
    }[tamper]
    np.save(cache, forged, allow_pickle=False)
    suite_mod._region_shingles.cache_clear()
    region, hits = copied_test_rows(copy, suite=suite)
    assert hits == 12 - 6


@pytest.mark.shared_data
def test_train_refuses_a_copied_slice_of_test_rows_before_ray(shared_data, tmp_path, capsys):
    from marl_sched.traces import load_trace

    philly = shared_data / "traces" / "philly.csv"
    lines = philly.read_text().splitlines()
    # Philly's jobs 70,000-70,399 in submit order (its test split), copied row by row
    jobs = load_trace(philly, start=70000, max_jobs=400).jobs
    copy = tmp_path / "my_trace.csv"
    copy.write_text("\n".join([lines[0], *(lines[j.line - 1] for j in jobs)]) + "\n")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"defaults: [{REPO_ROOT / 'configs' / 'train_tiny.yaml'}]\n"
        f"workload: {{trace: {copy}, start: 0, max_jobs: 200, warmup_jobs: 0}}\n"
        f"train: {{eval_trace: {copy}, eval_start: 300, eval_max_jobs: 20}}\n"
    )
    rc = main(["train", "--config", str(cfg), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "cfg.yaml: workload: jobs 0..199 repeat rows of the test split" in err[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.shared_data
def test_no_train_or_validation_region_of_the_shipped_suite_repeats_test_rows(
    shared_data,
) -> None:
    suite = load_suite()
    for region in suite.regions:
        if region.split == "test":
            continue
        n = None if region.end is None else region.end - region.first
        problem = in_test_split(suite_mod.resolve(region.trace), region.first, n)
        assert problem is None, (region, problem)


@pytest.mark.shared_data
def test_gavel_nic_scale_gives_gavels_measured_spread_ratio(shared_data) -> None:
    import statistics

    from marl_sched.calibration.report import gavel_spread_rows

    rows = gavel_spread_rows(shared_data, GAVEL_NIC_SCALE)
    model = statistics.median(m for _, _, m, _ in rows)
    measured = statistics.median(y for _, _, _, y in rows)
    assert measured == pytest.approx(GAVEL_SPREAD_RATIO, abs=0.005)
    assert model == pytest.approx(measured, abs=0.005)
    nominal = statistics.median(m for _, _, m, _ in gavel_spread_rows(shared_data))
    assert nominal > 2.0  # the calibration's 2.29: the variant really changes the cost


# ------------------------------------------------------------------ tracks, ledger


def test_the_track_is_in_every_cell_key_row_title_and_folder(tmp_path) -> None:
    suite = _suite(tmp_path)
    out = tmp_path / "full"
    run_benchmark(suite, "test", ["first-fit"], 1, out, figures=False, track="full", ledger=None)
    names = sorted(p.name for p in (out / "cells").iterdir())
    assert names == ["late-24__first-fit__tfull__s0.json", "late-30__first-fit__tfull__s0.json"]
    with (out / "runs.csv").open() as fh:
        assert {r["track"] for r in csv.DictReader(fh)} == {"full"}
    assert "test split, track full: 2 scenarios x 1 seeds" in (out / "summary.md").read_text()
    assert json.loads((out / "benchmark.json").read_text())["track"] == "full"
    with pytest.raises(InputError, match="track full"):  # the folder holds one track
        run_benchmark(suite, "test", ["first-fit"], 1, out, figures=False, track="placement",
                      ledger=None)  # fmt: skip
    sc = load_suite(suite).split("test")[0]
    cfg = load_suite(suite).with_overrides([], "full").config_for(sc)
    placement = load_suite(suite).with_overrides([], "placement").config_for(sc)
    assert cfg != placement  # the track's override reached the cell's config


def test_unknown_track_and_missing_split_exit_2_with_one_line(tmp_path, capsys) -> None:
    suite = _suite(tmp_path)
    out = tmp_path / "b"
    argv = ["benchmark", "--suite", suite, "--policies", "first-fit", "--out", str(out), "--local"]
    assert main([*argv, "--split", "test", "--track", "fast"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["marl-sched: error: --track: must be one of placement, full, got 'fast'"]
    assert main(argv) == 2  # no silent default split
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "required: --split" in err[0]
    assert not out.exists()


@pytest.mark.skipif(not HAS_MIGRATION, reason="needs simulation.migration (branch migsim)")
def test_tracks_set_simulation_migration(tmp_path) -> None:
    suite = load_suite(_suite(tmp_path))
    sc = suite.split("test")[0]
    assert suite.with_overrides([], "placement").config_for(sc).simulation.migration == "off"
    assert suite.with_overrides([], "full").config_for(sc).simulation.migration == "on"


def test_a_test_split_run_is_recorded_in_the_ledger_and_cited(tmp_path, monkeypatch) -> None:
    suite = _suite(tmp_path)
    monkeypatch.setattr(ledger_mod, "REFERENCE_SUITE", suite)
    # the commit injected: this test may run from a work tree with uncommitted changes,
    # which a real test-split run refuses (tests/marl_sched/test_ledger.py)
    monkeypatch.setattr(ledger_mod, "git_commit", lambda root=None: "c0ffee" * 7)
    ledger = tmp_path / "ledger.jsonl"
    out = tmp_path / "bench"
    run_benchmark(suite, "test", ["first-fit", "load-balance"], 1, out, figures=False,
                  track="placement", ledger=ledger)  # fmt: skip
    run_benchmark(
        suite,
        "test",
        ["first-fit", "load-balance"],
        1,
        out,
        figures=False,
        track="placement",
        ledger=ledger,
    )  # a second look is a second entry
    run_benchmark(
        suite,
        "train",
        ["first-fit"],
        1,
        tmp_path / "tr",
        figures=False,
        track="placement",
        ledger=ledger,
    )  # the train split: not recorded
    entries = ledger_mod.read_ledger(ledger)
    assert [e["id"] for e in entries] == [1, 2]
    e = entries[0]
    assert e["split"] == "test" and e["track"] == "placement" and e["seeds"] == 1
    assert e["policies"] == ["first-fit", "load-balance"] and e["checkpoints"] == {}
    assert e["out"] == str(out.resolve()) and e["scenarios"] == 2
    assert e["commit"] == "c0ffee" * 7
    assert f"Ledger entry: {ledger} #{1 + 1}" in (out / "summary.md").read_text()
    assert "Ledger entry" not in (tmp_path / "tr" / "summary.md").read_text()


# ------------------------------------------------------------------ sensitivity


def test_rankings_compare_by_kendall_tau_and_winner() -> None:
    rows = compare_rankings(
        {
            "cost-x1": {"a": 0.8, "b": 0.9, "c": 1.0},
            "cost-x2": {"a": 0.85, "b": 0.9, "c": 1.0},
            "cost-x5": {"a": 0.95, "b": 0.9, "c": 1.0},
        }
    )
    assert [r["kendall_tau"] for r in rows] == pytest.approx([1.0, 1.0, 1 / 3])
    assert [r["winner"] for r in rows] == ["a", "a", "b"]
    assert [r["winner_changes"] for r in rows] == [False, False, True]
    assert rows[2]["rank a"] == 2


@pytest.mark.parametrize(
    ("scales", "gavel", "track", "message"),
    [
        ("0.5,2", False, "placement", "needs --track full"),
        ("0.5,-1", False, "full", "expected positive numbers"),
        ("0.5,x", False, "full", "got 'x'"),
        ("2,2", False, "full", "named twice"),
    ],
)
def test_bad_sensitivity_flags(scales, gavel, track, message) -> None:
    with pytest.raises(InputError, match=message):
        check_sensitivity(scales, gavel, track)


def test_sensitivity_runs_every_variant_with_its_override(tmp_path, monkeypatch) -> None:
    from marl_sched.benchmark import sensitivity

    # until simulation.migration_cost_scale exists (migsim), scale another cost key
    key = sensitivity.COST_SCALE_KEY if HAS_MIGRATION else "simulation.migration_penalty_s"
    monkeypatch.setattr(sensitivity, "COST_SCALE_KEY", key)
    variants = check_sensitivity("2,0.5", True, "full")
    assert [n for n, _ in variants] == ["cost-x1", "cost-x2", "cost-x0.5", "spread-gavel"]
    assert variants[3][1] == [f"simulation.nic_efficiency_scale={GAVEL_NIC_SCALE}"]
    suite = _suite(tmp_path)
    seen = []

    def run(out, overrides):
        seen.append(overrides)
        return run_benchmark(suite, "test", ["first-fit", "load-balance"], 1, out,
                             figures=False, overrides=overrides, track="full",
                             ledger=None)[0]  # fmt: skip

    path = run_sensitivity(variants, run, tmp_path / "sens", ["simulation.backfill=true"], "t")
    assert seen[1] == ["simulation.backfill=true", f"{key}=2"]
    text = path.read_text()
    assert "| **Kendall τ vs cost-x1** | 1.00 |" in text
    for name, _ in variants:
        assert (tmp_path / "sens" / name / "summary.md").is_file()
    cfg = load_suite(suite).with_overrides(variants[3][1], "full")
    assert cfg.config_for(cfg.split("test")[0]).simulation.nic_efficiency_scale == GAVEL_NIC_SCALE


# ------------------------------------------------------------------ what a seed varies


def test_arrival_jitter_keeps_order_and_rate_and_follows_the_seed() -> None:
    from marl_sched.traces import jitter_arrivals, load_trace

    jobs = load_trace(TRACE).jobs
    a = jitter_arrivals(jobs, 0.2, seed=0)
    assert jitter_arrivals(jobs, 0.2, seed=0) == a  # the seed decides
    b = jitter_arrivals(jobs, 0.2, seed=1)
    assert a != b and jitter_arrivals(jobs, 0.0, seed=5) == tuple(jobs)
    gaps = np.diff([j.submit_time for j in jobs])
    ratio = np.diff([j.submit_time for j in a])[gaps > 0] / gaps[gaps > 0]
    assert ratio.min() >= 0.8 - 1e-9 and ratio.max() <= 1.2 + 1e-9
    assert [j.job_id for j in a] == [j.job_id for j in jobs] and a[0] == jobs[0]


def test_every_seed_varies_every_scenario_for_a_length_blind_policy(tmp_path) -> None:
    """first-fit ignores job lengths, and the golden trace names every model, so
    without jitter two seeds give the same cell; the suite's arrival jitter makes
    each seed another draw of the arrivals."""
    data = golden_suite_data()
    scores = {}
    for jitter in (0.0, 0.2):
        path = tmp_path / f"suite-{jitter}.yaml"
        path.write_text(yaml.safe_dump({**data, "arrival_jitter": jitter}, sort_keys=False))
        out = tmp_path / f"bench-{jitter}"
        run_benchmark(str(path), "test", ["first-fit"], 2, out, figures=False, ledger=None)
        with (out / "runs.csv").open() as fh:
            rows = list(csv.DictReader(fh))
        scores[jitter] = {
            sc: [r["avg_jct_s"] for r in rows if r["scenario"] == sc]
            for sc in {r["scenario"] for r in rows}
        }
    assert all(a == b for a, b in scores[0.0].values())  # zero-width strata before
    assert all(a != b for a, b in scores[0.2].values())  # every scenario varies now
    summary = (tmp_path / "bench-0.0" / "summary.md").read_text()
    assert "**Zero-width strata**" in summary and "- first-fit: late-24, late-30" in summary


def test_each_trace_is_read_once_however_many_windows_are_checked(tmp_path, monkeypatch):
    """An unregistered trace is hashed once and parsed once per file version, not once
    per window: a config with hundreds of windows on a large copy stays fast."""
    import marl_sched.files

    suite = load_suite(_suite(tmp_path))
    copy = _copy_rows(tmp_path / "slice.csv", 22, 34, shift=5000.0)
    opened: list[str] = []
    real_open = marl_sched.files.open_input

    def counting_open(path, kind, where=None):
        opened.append(Path(path).name)
        return real_open(path, kind, where)

    monkeypatch.setattr(marl_sched.files, "open_input", counting_open)
    suite_mod._digest_of.cache_clear()
    suite_mod._ROWS_CACHE.clear()
    problems = [in_test_split(copy, start % 5, 7, suite=suite) for start in range(300)]
    assert opened.count("slice.csv") == 2  # one hash, one parse
    assert problems[0] is not None and "repeat rows of the test split" in problems[0]
    # the same answers as a fresh read of each window
    for start in range(5):
        suite_mod._digest_of.cache_clear()
        suite_mod._ROWS_CACHE.clear()
        assert in_test_split(copy, start, 7, suite=suite) == problems[start]
    # a changed file is a new version: read again
    opened.clear()
    in_test_split(copy, 0, 7, suite=suite)
    assert opened.count("slice.csv") == 0
    _copy_rows(copy, 2, 18)
    assert in_test_split(copy, 0, 7, suite=suite) is None
    assert opened.count("slice.csv") == 2
