"""experiments/speed_policy.py's results file: a bad ``--out`` is refused before any
work, and docs/agents.md's "Measured" block renders the file's figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from experiments import make_docs
from marl_sched.config import REPO_ROOT

SCRIPT = REPO_ROOT / "experiments" / "speed_policy.py"


def test_an_out_that_is_a_directory_exits_2_in_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}  # this checkout's packages
    got = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert got.returncode == 2
    assert got.stderr.strip().splitlines() == [f"error: --out {tmp_path}: is a directory"]


def _row(servers: int, p50: float) -> dict:
    return {"policy": "marl", "servers": servers, "groups_per_agent": 1000, "p50_ms": p50,
            "p99_ms": 2 * p50, "cpu_p50_ms": p50 / 2, "cpu_p99_ms": p50,
            "cpu_split_ms": {"hints": 1.0, "observe": 0.5, "forward": 2.0,
                             "act": 0.05}}  # fmt: skip


def test_the_block_quotes_the_file_and_its_load(tmp_path: Path):
    root = tmp_path / "results"
    assert "not written yet" in make_docs.decision_latency(root)
    record = {"command": "python experiments/speed_policy.py --quick", "date": "2026-01-02",
              "network": "checkpoints/marl-default", "torch_threads": 1, "cores": 2,
              "load_average_1min": {"before": 0.04, "after": 1.26}, "target_p50_ms": 3.0,
              "target_p99_ms": 10.0, "meets_target": False,
              "rows": [_row(500, 2.5), _row(4000, 4.25)]}  # fmt: skip
    (root / "speed").mkdir(parents=True)
    (root / "speed" / "policy.json").write_text(json.dumps(record), encoding="utf-8")
    text = make_docs.decision_latency(root)
    assert "p50 2.5 / 4.2 ms, p99 5.0 / 8.5 ms at 500 / 4,000 servers" in text
    assert "load average 0.0 before and 1.3 after" in text and "2026-01-02" in text
    assert "the GNN forward 2.00" in text and "is not met" in text


SIMULATOR = REPO_ROOT / "experiments" / "speed_simulator.py"


def test_the_simulator_benchmark_refuses_a_directory_out_before_any_work(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    got = subprocess.run([sys.executable, str(SIMULATOR), "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    if not (REPO_ROOT.parent / "shared" / "data").is_dir():  # checked first: its own line
        assert got.returncode == 2 and "not found" in got.stderr
        return
    assert got.returncode == 2
    assert got.stderr.strip().splitlines() == [f"speed_simulator: --out {tmp_path}: is a directory"]


def test_the_playout_block_quotes_the_file(tmp_path: Path):
    root = tmp_path / "results"
    assert "not written yet" in make_docs.simulator_playout(root)
    playout = {"at_decision": 2000, "running": 310, "queued": 4, "playout_decisions": 100,
               "fork_ms": 1.5, "forks_per_s": 667.0, "playout_ms": 250.0,
               "playout_jobs_per_s": 400.0, "fork_share": 0.006, "planner_ms": 5000.0,
               "planner": ["planner.k=2"], "playout_share": 0.0503}  # fmt: skip
    record = {"command": "python experiments/speed_simulator.py --playout-jobs 100",
              "date": "2026-01-02", "cores": 2, "load_average_1min": {"before": 2.0, "after": 3.0},
              "quick": False, "servers": 550, "jobs": 82000, "cpu_s": 52.5,
              "jobs_per_s": 1560.0, "peak_mb": 190.0, "playout": playout}  # fmt: skip
    (root / "speed").mkdir(parents=True)
    (root / "speed" / "simulator.json").write_text(json.dumps(record), encoding="utf-8")
    text = make_docs.simulator_playout(root)
    assert "a fork **1.50 ms** (667 forks/s)" in text
    assert "**250.0 ms** (400 decisions/s)" in text and "the fork is 0.6% of" in text
    assert "**5,000 ms**, of which one fork plus that playout is 5.0%" in text
    assert "the whole export (82,000 jobs): 52.5 CPU s" in text and "2026-01-02" in text
    assert "Against the code" not in text and "allocates" not in text
    playout.update(planner_alloc_peak_mb=7.44, peak_mb=81.7)
    (root / "speed" / "simulator.json").write_text(json.dumps(record), encoding="utf-8")
    text = make_docs.simulator_playout(root)
    assert "5.0%; at its peak it allocates 7.4 MB, and the whole process peaks at 82 MB" in text
    record["against"] = {"other_commit": "cd8215a0123", "pairs": 2, "this_cpu_s": [40.0, 42.0],
                         "other_cpu_s": [80.0, 88.2], "speedup_per_pair": [2.0, 2.1],
                         "speedup_median": 2.05, "this_avg_jct_s": 181912.3443974037,
                         "this_deterministic": True}  # fmt: skip
    (root / "speed" / "simulator.json").write_text(json.dumps(record), encoding="utf-8")
    text = make_docs.simulator_playout(root)
    assert "commit cd8215a (with its own" in text and "**2.05x faster** (median" in text
    assert "40.0, 42.0 (this code) and 80.0, 88.2" in text and "181,912.344397 s, the same" in text


def test_the_simulator_benchmark_refuses_a_bad_against_before_any_work(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    for args, line in (
        (["--against", str(tmp_path)], "not a checkout of this project"),
        (["--against", str(REPO_ROOT)], "that is this checkout"),
        (["--pairs", "0"], "--pairs: must be in 1..10, got 0"),
    ):
        got = subprocess.run([sys.executable, str(SIMULATOR), *args], capture_output=True,
                             text=True, timeout=120, env=env)  # fmt: skip
        assert got.returncode == 2 and line in got.stderr.strip().splitlines()[-1]


def test_write_figures_records_what_the_figures_depend_on(tmp_path: Path):
    from marl_sched.files import write_figures

    out = tmp_path / "new" / "figures.json"
    write_figures(out, "python experiments/x.py --quick", 1.234, {"p50_ms": 2.5, "rows": []})
    record = json.loads(out.read_text(encoding="utf-8"))
    assert record["command"] == "python experiments/x.py --quick"
    assert record["load_average_1min"]["before"] == 1.23
    assert record["load_average_1min"]["after"] >= 0 and record["cores"] == os.cpu_count()
    assert len(record["date"]) == 10 and record["p50_ms"] == 2.5 and record["rows"] == []


def test_the_planner_memory_probe_traces_one_decision_on_a_fork():
    import runpy
    import tracemalloc

    from marl_sched.config import load_config
    from marl_sched.policies import build_policy, make_policy
    from marl_sched.runner import TraceOptions, build_cluster, load_workload, make_simulator

    bench = runpy.run_path(str(SIMULATOR), run_name="speed_simulator")
    cfg_path = REPO_ROOT / "configs" / "tiny.yaml"
    cfg = load_config(cfg_path)
    topo, perf = build_cluster(cfg)
    wl = load_workload(cfg, perf, TraceOptions(max_jobs=24))
    pol = make_policy("load-balance")
    pol.reset(topo, 0)
    predictor = wl.predictor()
    sim = make_simulator(cfg, topo, perf, wl.jobs, predictor, pol)
    for _ in range(12):
        job = sim.next_decision()
        predictor.sync(sim.records)
        sim.apply(pol.place(predictor.visible_job(job), sim.view()))
    planner = build_policy("planner", config=load_config(cfg_path, list(bench["PLANNER"])))
    planner.reset(topo, 0)
    before = (sim.now, len(sim.running), len(sim.queue), sim.pending)
    mb = bench["_planner_alloc_mb"](planner, predictor, sim)
    assert 0.0 < mb < 1024.0  # a planner decision's arrays are traced, and bounded
    assert not tracemalloc.is_tracing()
    assert (sim.now, len(sim.running), len(sim.queue), sim.pending) == before  # on a fork
