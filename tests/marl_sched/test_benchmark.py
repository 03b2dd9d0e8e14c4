"""marl_sched.benchmark: suite files, the test-split refusal, the resumable grid, the
command line's exit-2 contract, and (marked ray) one end-to-end run on Ray."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml

from marl_sched.benchmark import DEFAULT_SUITE, check_not_test, load_suite
from marl_sched.benchmark.command import parse_policies, run_benchmark, run_local
from marl_sched.benchmark.suite import split_of
from marl_sched.cli import main
from marl_sched.errors import InputError
from tests.marl_sched.benchmark_helpers import TRACE
from tests.marl_sched.benchmark_helpers import golden_suite_data as _suite_data

pytestmark = pytest.mark.usefixtures("fingerprint_cache")


def _write(tmp_path: Path, data: dict, name: str = "suite.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def _err_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_suite_loads_and_builds_cell_configs(tmp_path: Path) -> None:
    suite = load_suite(_write(tmp_path, _suite_data()))
    assert [s.name for s in suite.split("test")] == ["late-24", "late-30"]
    cfg = suite.config_for(suite.split("test")[0], seed=2)
    assert (cfg.workload.start, cfg.workload.max_jobs, cfg.workload.warmup_jobs) == (24, 8, 4)
    assert (cfg.workload.load, cfg.workload.seed) == (1.5, 2)
    with pytest.raises(InputError, match="--split: must be one of train, validation, test"):
        suite.split("holdout")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(extra=1), "suite.yaml: extra: unknown key"),
        (
            lambda d: d["scenarios"]["test"][0].update(tier="extreme"),
            "suite.yaml: scenarios.test[0].tier: unknown tier 'extreme'",
        ),
        (
            lambda d: d["scenarios"]["test"][0].update(load=-1),
            "suite.yaml: scenarios.test[0].load: must be > 0, got -1.0",
        ),
        (
            lambda d: d["scenarios"]["test"][0].pop("trace"),
            "suite.yaml: scenarios.test[0].trace: required key is missing",
        ),
        (
            lambda d: d["scenarios"]["test"][0].update(start="x"),
            "suite.yaml: scenarios.test[0].start: expected an integer, got 'x'",
        ),
        (
            lambda d: d["scenarios"]["test"][0].update(split="train"),
            "suite.yaml: scenarios.test[0].split: unknown key",
        ),
        # its warm-up (jobs 16..19) reaches into the train region
        (
            lambda d: d["scenarios"]["test"][0].update(start=20),
            "suite.yaml: scenarios.test[0]: window of",
        ),
        (
            lambda d: d["regions"][0].update(split="dev"),
            "suite.yaml: regions[0].split: must be one of train, validation, test, got 'dev'",
        ),
    ],
)
def test_bad_suite_names_the_key(tmp_path: Path, change, message: str) -> None:
    data = _suite_data()
    change(data)
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as err:
        load_suite(path)
    assert str(err.value).startswith(str(tmp_path / message.split(": ", 1)[0]) + ": ")
    assert message.split(": ", 1)[1] in str(err.value)


def test_check_not_test_refuses_test_windows_even_in_a_copy(tmp_path: Path) -> None:
    suite = load_suite(_write(tmp_path, _suite_data()))
    check_not_test(TRACE, 0, 20, suite=suite)  # the train region
    with pytest.raises(InputError, match=r"jobs 15\.\.24 overlap the test split"):
        check_not_test(TRACE, 15, 10, suite=suite)
    with pytest.raises(InputError, match=r"jobs 16\.\.end overlap"):  # to the end
        check_not_test(TRACE, 18, None, warmup_jobs=2, suite=suite)
    with pytest.raises(InputError, match=r"jobs 10\.\.20 overlap"):  # one job is enough
        check_not_test(TRACE, 10, 11, suite=suite)
    check_not_test(TRACE, 5, 15, warmup_jobs=5, suite=suite)  # warm-up inside train
    copy = tmp_path / "renamed.csv"
    shutil.copy(TRACE, copy)
    with pytest.raises(InputError, match="renamed.csv: jobs 20..29 overlap"):
        check_not_test(copy, 20, 10, suite=suite)


def test_split_of_names_the_region_holding_the_whole_window(tmp_path: Path) -> None:
    suite = load_suite(_write(tmp_path, _suite_data()))
    assert split_of(TRACE, 0, 20, suite=suite) == "train"
    assert split_of(TRACE, 20, None, suite=suite) == "test"
    assert split_of(TRACE, 15, 10, suite=suite) is None  # spans train and test
    assert split_of(TRACE, 21, 5, warmup_jobs=5, suite=suite) is None  # warm-up in train
    copy = tmp_path / "renamed.csv"
    shutil.copy(TRACE, copy)
    assert split_of(copy, 22, 3, suite=suite) == "test"  # matched by content
    other = tmp_path / "other.csv"
    other.write_text(Path(TRACE).read_text().replace(",", ", ", 1))
    assert split_of(other, 0, 5, suite=suite) is None  # a file the suite does not name


def _recording(ran: list[dict]):
    """An executor that runs the cells here and records their specs in ``ran``."""

    def run(specs, on_done):
        ran.extend(specs)
        run_local(specs, on_done)

    return run


def test_benchmark_resumes_without_rerunning_finished_cells(tmp_path: Path) -> None:
    suite = _write(tmp_path, _suite_data())
    out = tmp_path / "bench"
    ran: list[dict] = []
    counting = _recording(ran)

    policies = ["first-fit", "random"]
    summary, timing = run_benchmark(
        suite, "test", policies, 2, out, executor=counting, figures=False
    )
    assert len(ran) == timing["cells"] == 2 * 2 * 2
    assert {r["policy"] for r in summary} == set(policies)
    for name in ("runs.csv", "summary.csv", "summary.md", "scenarios.md", "improvement.csv"):
        assert (out / name).is_file(), name
    assert len((out / "runs.csv").read_text().splitlines()) == 1 + 8
    ran.clear()
    run_benchmark(suite, "test", policies, 2, out, executor=counting, figures=False)
    assert ran == []
    (out / "cells" / "late-30__random__s1.json").unlink()
    run_benchmark(suite, "test", policies, 2, out, executor=counting, figures=False)
    assert [(s["scenario"], s["policy"], s["seed"]) for s in ran] == [("late-30", "random", 1)]
    # a folder of another duration estimate or suite is refused
    with pytest.raises(InputError, match="with duration estimate of the config"):
        run_benchmark(suite, "test", policies, 2, out, duration_estimate="oracle")
    oracle = tmp_path / "oracle"
    run_benchmark(
        suite, "test", ["first-fit"], 1, oracle, duration_estimate="oracle", figures=False
    )
    assert "oracle" in (oracle / "runs.csv").read_text()
    other = _suite_data()
    other["scenarios"]["test"][0]["load"] = 3.0
    with pytest.raises(InputError, match="holds cells of"):
        run_benchmark(_write(tmp_path, other, "other.yaml"), "test", policies, 2, out)


def test_rows_can_name_a_queue_ordering(tmp_path: Path) -> None:
    """``POLICY@ORDERING`` rows run the policy under that ordering; bare rows under the
    suite's (FIFO); ``rules`` expands to every heuristic and control."""
    suite = _write(tmp_path, _suite_data())
    rows = ["first-fit", "first-fit@las-2d", "first-fit@shortest-first", "first-fit@own"]
    assert parse_policies(",".join(rows)) == rows
    expanded = parse_policies("rules,first-fit@las-2d")
    assert {"speed-aware", "resident-aware", "masked:speed-aware"} <= set(expanded)
    assert len(expanded) == len(set(expanded)) >= 10
    out = tmp_path / "bench"
    summary, _ = run_benchmark(suite, "test", rows, 1, out, figures=False)
    assert {r["policy"] for r in summary} == set(rows)
    runs = list(csv.DictReader((out / "runs.csv").open()))
    got = {(r["policy"], r["ordering"]) for r in runs}
    assert got == {
        ("first-fit", "fifo"),
        ("first-fit@las-2d", "las-2d"),
        ("first-fit@shortest-first", "shortest-first"),
        ("first-fit@own", "fifo"),  # first-fit has no ordering of its own
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policies", "first-fit,nope"], "nope"),
        (["--policies", "first-fit@lifo"], "--policies: first-fit@lifo: unknown ordering 'lifo'"),
        (["--policies", "nope@las-2d"], "unknown policy 'nope'"),
        (["--policies", "first-fit,first-fit"], "named twice"),
        (["--policies", "first-fit", "--split", "dev"], "--split: must be one of"),
        (["--policies", "first-fit", "--seeds", "0"], "--seeds: must be an integer >= 1"),
        (["--policies", "first-fit", "--duration-estimate", "exact"], "--duration-estimate:"),
    ],
)
def test_bad_benchmark_input_exits_2_before_any_work(tmp_path, capsys, args, message) -> None:
    suite = _write(tmp_path, _suite_data())
    out = tmp_path / "bench"
    rc = main(["benchmark", "--suite", suite, "--split", "test", "--out", str(out), "--local",
               *args])  # fmt: skip
    assert rc == 2
    assert message in _err_line(capsys)
    assert not (out / "cells").exists()


def test_bad_suite_file_exits_2(tmp_path, capsys) -> None:
    data = _suite_data()
    data["tiers"] = "heavy"
    suite = _write(tmp_path, data)
    rc = main(
        [
            "benchmark",
            "--suite",
            suite,
            "--split",
            "test",
            "--policies",
            "first-fit",
            "--out",
            str(tmp_path / "b"),
            "--local",
        ]
    )
    assert rc == 2
    assert _err_line(capsys).endswith("suite.yaml: tiers: expected a mapping, got 'heavy'")


def test_shipped_suite_is_pre_registered() -> None:
    suite = load_suite(DEFAULT_SUITE)
    test, val = suite.split("test"), suite.split("validation")
    assert len(test) >= 26
    # validation reports every tier and topology variant the test split reports
    for split in (test, val):
        assert {s.tier for s in split} == {"light", "medium", "heavy", "contention"}
        assert {s.topology for s in split} == {"default", "k80-heavy", "oversubscribed"}
    assert {s.topology for s in suite.split("train")} == {"default"}
    assert {s.tier for s in suite.split("train")} == {"medium", "contention"}
    assert suite.queue_tiers == {"contention": 0.2} and "contention" not in suite.tiers
    for sc in (*test, *val, *suite.split("train")):  # a queue tier records its share
        assert (sc.queue_share is not None) == (sc.tier in suite.queue_tiers), sc.name
    assert any("alibaba" in s.trace for s in test)
    assert not any("alibaba" in s.trace for s in suite.split("train"))
    # Alibaba jobs 0-499 designed earlier recipes: validation, never test; jobs 4,000
    # on are train (no scenario of any split reads them), so training covers the source
    alibaba = [r for r in suite.regions if "alibaba" in r.trace]
    assert {(r.split, r.first, r.end) for r in alibaba} == {
        ("validation", 0, 500),
        ("test", 500, 4000),
        ("train", 4000, None),
    }
    assert all(500 <= s.first_job and s.start + s.max_jobs <= 4000
               for s in test if "alibaba" in s.trace)  # fmt: skip
    trace = next(r.trace for r in alibaba)
    check_not_test(trace, 4000, None, suite=suite)
    with pytest.raises(InputError, match="overlap the test split"):
        check_not_test(trace, 3999, 10, suite=suite)
    # Sia philly N repeats Pollux N's arrivals: never test while Pollux N is validation
    assert not any("sia_workloads/philly" in s.trace for s in test)
    assert suite.arrival_jitter > 0  # every seed varies every scenario
    # the default config's training window stays out of the test split
    check_not_test("configs/traces/philly_sample.csv", 200, 1800, warmup_jobs=200, suite=suite)


@pytest.mark.ray
def test_benchmark_on_ray_end_to_end(tmp_path: Path, capsys) -> None:
    suite = _write(tmp_path, _suite_data())
    out = tmp_path / "bench"
    rc = main(
        [
            "benchmark",
            "--suite",
            suite,
            "--split",
            "test",
            "--policies",
            "first-fit,load-balance",
            "--seeds",
            "2",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    rows = (out / "runs.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 2 * 2
    assert json.loads((out / "benchmark.json").read_text())["split"] == "test"
    for name in ("interval_estimates.png", "performance_profile.png", "ccdf/late-24.png"):
        assert (out / name).is_file(), name
    # the default track reached the Ray workers: in every row and the title
    with (out / "runs.csv").open() as fh:
        assert {r["track"] for r in csv.DictReader(fh)} == {"placement"}
    out_text = capsys.readouterr().out
    assert "Benchmark summary: test split, track placement: 2 scenarios x 2 seeds" in out_text


@pytest.mark.shared_data
def test_every_shipped_scenario_names_an_existing_trace(shared_data: Path) -> None:
    from marl_sched.benchmark.suite import resolve

    suite = load_suite(DEFAULT_SUITE)
    for split in ("train", "validation", "test"):
        for sc in suite.split(split):
            assert resolve(sc.trace).is_file(), sc.name


def test_overrides_change_the_base_config_of_every_cell_and_the_folder_keeps_them(
    tmp_path: Path, capsys
) -> None:
    suite = _write(tmp_path, _suite_data())
    out = tmp_path / "bench"
    ran: list[dict] = []
    counting = _recording(ran)

    overrides = ["simulation.backfill=false"]
    run_benchmark(suite, "test", ["first-fit"], 1, out, executor=counting, figures=False,
                  overrides=overrides)  # fmt: skip
    assert [s["overrides"] for s in ran] == [overrides, overrides]
    scenario = load_suite(suite).split("test")[0]
    cfg = load_suite(suite).with_overrides(overrides).config_for(scenario)
    assert cfg.simulation.backfill is False and cfg.workload.start == scenario.start
    # the folder holds cells of these overrides: another set (or none) is refused
    with pytest.raises(InputError, match="overrides simulation.backfill=false"):
        run_benchmark(suite, "test", ["first-fit"], 1, out, figures=False)
    # a key every scenario sets, and an unknown key, exit 2 before any cell
    argv = ["benchmark", "--suite", suite, "--split", "test", "--policies", "first-fit"]
    argv += ["--seeds", "1", "--local", "--quiet", "--out", str(tmp_path / "b2")]
    assert main([*argv, "workload.load=2"]) == 2
    assert "workload.load: benchmark: every scenario of" in _err_line(capsys)
    assert main([*argv, "simulation.backfil=false"]) == 2
    assert "command line: simulation.backfil: unknown key" in _err_line(capsys)
    assert not (tmp_path / "b2").exists()
