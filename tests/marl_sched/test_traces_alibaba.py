"""Tests of marl_sched.traces.alibaba: the Alibaba pod list.

Tests on the real files in ../shared/data are marked ``shared_data`` and skipped when
that folder is absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from marl_sched.traces import (
    detect_format,
    load_trace,
    summarize,
)
from tests.marl_sched.trace_helpers import (
    ALIBABA_HEADER,
    error_of,
    write,
)


def test_alibaba_rules(in_tmp: Path) -> None:
    rows = [
        "pod-a,12000,16384,1,1000,,LS,Running,10,500,20",  # kept: 480 s
        "pod-cpu,8000,1024,0,0,,BE,Running,11,900,11",  # cpu-only: dropped
        "pod-pend,8000,1024,1,1000,,BE,Pending,12,40,",  # never scheduled: dropped
        "pod-zero,8000,1024,2,1000,,BE,Failed,13,30,30",  # no run time: dropped
        "pod-frac,6000,1024,1,460,,LS,Running,14,100,15",  # fractional GPU: 1 GPU
        "pod-milli,6000,1024,0,250,,LS,Running,15,100,16",  # num_gpu 0 but a GPU share
        "pod-8,6000,1024,8,1000,,LS,Succeeded,16,1016,16",
        "pod-cpupend,8000,1024,0,0,,BE,Pending,17,40,",  # cpu-only rule wins
    ]
    path = write("pods.csv", ALIBABA_HEADER + "\n".join(rows) + "\n")
    assert detect_format(path) == "alibaba"
    trace = load_trace(path)
    assert trace.dropped == {"cpu_only_pods": 2, "pending_pods": 1, "nonpositive_duration": 1}
    got = [(j.job_id, j.submit_time, j.num_gpus, j.duration, j.line) for j in trace.jobs]
    assert got == [
        ("pod-a", 0.0, 1, 480.0, 2),
        ("pod-frac", 4.0, 1, 85.0, 6),
        ("pod-milli", 5.0, 1, 84.0, 7),
        ("pod-8", 6.0, 8, 1000.0, 8),
    ]
    assert all(j.model is None and j.vc is None for j in trace.jobs)


def test_alibaba_errors(in_tmp: Path) -> None:
    ok = "pod-a,1,1,1,1000,,LS,Running,10,500,20\n"
    path = write("a.csv", ALIBABA_HEADER + ok + "pod-b,1,1,1,1500,,LS,Running,10,500,20\n")
    assert error_of(path) == "a.csv:3: gpu_milli: must be <= 1000, got 1500"
    path = write("b.csv", ALIBABA_HEADER + ok + "pod-a,1,1,1,1000,,LS,Running,10,500,20\n")
    assert error_of(path) == "b.csv:3: name: duplicate of line 2"
    path = write("c.csv", ALIBABA_HEADER + ok + "pod-c,1,1,-1,0,,LS,Running,10,500,20\n")
    assert error_of(path) == "c.csv:3: num_gpu: must be >= 0, got -1"
    path = write("d.csv", ALIBABA_HEADER + ok + "pod-d,1,1,1,1000,,LS,Running,10,,20\n")
    assert error_of(path) == "d.csv:3: deletion_time: missing value"
    path = write("e.csv", ALIBABA_HEADER + "pod-e,1,1,0,0,,LS,Running,10,500,20\n")
    assert error_of(path) == "e.csv: trace has no jobs (dropped cpu_only_pods: 1)"


@pytest.mark.shared_data
def test_real_alibaba_keeps_gpu_pods(shared_data: Path) -> None:
    path = shared_data / "traces" / "alibaba_openb_pods.csv"
    assert detect_format(path) == "alibaba"
    trace = load_trace(path)
    # 8,152 pods = 6,203 kept + 1,088 cpu-only + 861 GPU pods never scheduled
    # (36 further Pending pods are cpu-only and counted there).
    assert len(trace.jobs) == 6_203
    assert trace.dropped == {"cpu_only_pods": 1_088, "pending_pods": 861, "nonpositive_duration": 0}
    assert all(j.num_gpus >= 1 and j.duration > 0 for j in trace.jobs)
    assert summarize(trace)["gpu_histogram"]["1"] == 6_129
