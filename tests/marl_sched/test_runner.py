"""marl_sched.runner: warm-up prefixes, steady-state metrics, seed-free Pollux windows."""

from __future__ import annotations

import dataclasses

import pytest

from marl_sched.config import REPO_ROOT, load_config
from marl_sched.errors import InputError
from marl_sched.runner import TraceOptions, build_cluster, load_workload, simulate

GOLDEN = REPO_ROOT / "tests" / "data" / "golden.yaml"
POLLUX = str(REPO_ROOT / "configs" / "traces" / "pollux" / "workload-2.csv")


def _with_workload(**changes):
    cfg = load_config(GOLDEN)
    return dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, **changes))


def test_warmup_jobs_are_simulated_and_not_scored() -> None:
    cfg = _with_workload(start=10, max_jobs=20, warmup_jobs=6)
    topo, perf = build_cluster(cfg)
    workload = load_workload(cfg, perf)
    assert workload.warmup == 6 and len(workload.jobs) == 26
    metrics, records, _ = simulate(cfg, "first-fit", workload, topo, perf)
    # every job ran, warm-up included ...
    assert len(records) == 26
    # ... but only the window is scored
    assert metrics["jobs_total"] == metrics["jobs_completed"] == 20
    assert metrics["jobs_warmup"] == 6
    window = {j.name for j in load_workload(_with_workload(start=10, max_jobs=20), perf).jobs}
    assert {j.name for j in workload.jobs[6:]} == window
    scored = [r for r in records if r.job.job_id >= 6]
    assert metrics["avg_jct_s"] == pytest.approx(sum(r.jct for r in scored) / 20)
    assert 0.0 <= metrics["jobs_queued_frac"] <= 1.0
    assert 0.0 < metrics["gpu_utilization_steady"] <= 1.0
    # a warm-up longer than the jobs before the window takes what there is
    assert load_workload(_with_workload(start=3, max_jobs=5, warmup_jobs=50), perf).warmup == 3


def test_steady_utilization_counts_gpus_held_during_the_arrival_period() -> None:
    cfg = _with_workload(max_jobs=12)
    topo, perf = build_cluster(cfg)
    workload = load_workload(cfg, perf)
    metrics, records, _ = simulate(cfg, "first-fit", workload, topo, perf)
    first, last = workload.jobs[0].submit_time, workload.jobs[-1].submit_time
    held = sum(
        r.job.num_workers * max(0.0, min(r.finish_time, last) - max(r.start_time, first))
        for r in records
    )
    assert metrics["gpu_utilization_steady"] == pytest.approx(held / (topo.n_gpus * (last - first)))


def test_bad_workload_keys_name_the_key() -> None:
    with pytest.raises(InputError, match="workload.duration_estimate: must be one of"):
        _with_workload(duration_estimate="exact").workload.validate("c.yaml", "workload")
    with pytest.raises(InputError, match="workload.warmup_jobs: must be >= 0"):
        _with_workload(warmup_jobs=-1).workload.validate("c.yaml", "workload")


def test_the_seed_does_not_change_a_pollux_window() -> None:
    cfg = load_config(REPO_ROOT / "configs" / "default.yaml")
    topo, perf = build_cluster(cfg)
    jct = []
    for seed in (1, 2):
        workload = load_workload(cfg, perf, TraceOptions(trace=POLLUX, start=0, seed=seed))
        metrics, _, _ = simulate(cfg, "first-fit", workload, topo, perf, seed=seed)
        jct.append(metrics["avg_jct_s"])
    assert jct[0] == jct[1]


def test_a_window_past_the_end_of_the_trace_names_the_start() -> None:
    cfg = load_config(REPO_ROOT / "configs" / "default.yaml")
    perf = build_cluster(cfg)[1]
    with pytest.raises(InputError, match="window is empty: --start 200 skips all 160 jobs"):
        load_workload(cfg, perf, TraceOptions(trace=POLLUX))
