"""Tests of marl_sched.traces.summary: a window's headline figures."""

from __future__ import annotations

import pytest

from marl_sched.errors import InputError
from marl_sched.traces import (
    Trace,
    TraceJob,
    format_summary,
    summarize,
)


def make_trace() -> Trace:
    """A hand-made trace with easy figures."""
    specs = [(0.0, 1, 100.0), (10.0, 2, 50.0), (20.0, 4, 10.0), (40.0, 8, 1.0), (100.0, 65, 2.0)]
    jobs = tuple(TraceJob(f"j{i}", s, g, d) for i, (s, g, d) in enumerate(specs))
    return Trace("hand.csv", "canonical", jobs, {"duplicate_rows": 3})


def test_summarize_figures() -> None:
    summary = summarize(make_trace(), n_gpus=10)
    assert summary["jobs"] == 5
    assert summary["first_submit_s"] == 0.0
    assert summary["last_submit_s"] == 100.0
    assert summary["span_s"] == 100.0
    assert summary["gpu_histogram"] == {
        "1": 1,
        "2": 1,
        "3-4": 1,
        "5-8": 1,
        "9-16": 0,
        "17-32": 0,
        "33-64": 0,
        "65+": 1,
    }
    assert summary["total_gpu_seconds"] == 100.0 + 100.0 + 40.0 + 8.0 + 130.0
    assert summary["median_duration_s"] == 10.0
    assert summary["p95_duration_s"] == pytest.approx(90.0)  # 50 + 0.8 * (100 - 50)
    assert summary["offered_load"] == pytest.approx(378.0 / (10 * 100.0))
    assert summary["dropped"] == {"duplicate_rows": 3}
    assert summarize(make_trace())["offered_load"] is None
    with pytest.raises(InputError, match=r"^--gpus: must be >= 1, got 0$"):
        summarize(make_trace(), n_gpus=0)


def test_format_summary_table() -> None:
    text = format_summary(summarize(make_trace(), n_gpus=10))
    lines = text.splitlines()
    assert lines[0].split() == ["trace", "hand.csv", "(canonical)"]
    rows = {line[:24].strip(): line[24:].strip() for line in lines}
    assert rows["offered load (10 GPUs)"] == "0.378"
    assert rows["jobs with 65+ GPU(s)"] == "1 (20.0%)"
    assert rows["total GPU-seconds"] == "378"
    assert lines[-1].split() == ["dropped:", "duplicate_rows", "3"]
    assert len(lines) >= 15
