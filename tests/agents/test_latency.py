"""agents.latency: the decision-latency probe of experiments/speed_policy.py."""

from __future__ import annotations

import pytest

from agents.latency import bench, ms_summary, run_header, topology


def test_topology_scales_the_large_config_by_servers():
    topo = topology(500)
    assert topo.n_servers == 500 and topo.config.subclusters == 2


def test_bench_times_every_decision_and_splits_its_cpu(shared_data):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    row = bench(500, None, jobs=8, seed=0)  # untrained network
    assert row["servers"] == 500 and row["agents"] == 2 and row["groups_per_agent"] == 1000
    assert row["tasks"] >= row["jobs"] >= 1  # a job takes one decision or more
    assert 0 < row["cpu_p50_ms"] <= row["cpu_p99_ms"] and 0 < row["p50_ms"] <= row["p99_ms"]
    assert row["job_cpu_p50_ms"] >= row["cpu_p50_ms"] * 0.5
    assert set(row["cpu_split_ms"]) == {"hints", "observe", "forward", "act"}
    assert row["cpu_split_ms"]["forward"] > 0


def test_ms_summary_gives_the_mean_median_and_99th_percentile():
    row = ms_summary(list(range(101)))  # 0..100: mean 50, median 50, p99 99
    assert row == {"mean_ms": 50.0, "p50_ms": 50.0, "p99_ms": 99.0}
    assert ms_summary([2.0, 4.0])["p99_ms"] == pytest.approx(3.98)


def test_run_header_records_the_command_time_cores_and_load():
    head = run_header("python x.py")
    assert head["command"] == "python x.py" and head["date"].endswith(" UTC")
    assert head["cores"] >= 1 and len(head["load_average"]) == 3
