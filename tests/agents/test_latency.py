"""agents.latency: the decision-latency probe of experiments/speed_policy.py."""

from __future__ import annotations

import pytest

from agents.latency import bench, topology


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
