"""Tests of marl_sched.traces.philly: the Philly export.

Tests on the real files in ../shared/data are marked ``shared_data`` and skipped when
that folder is absent.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from marl_sched.traces import (
    detect_format,
    load_trace,
    philly_timestamp,
    summarize,
)
from tests.marl_sched.trace_helpers import (
    PHILLY_HEADER,
    SAMPLE,
    SAMPLE_SCRIPT,
    error_of,
    write,
)


def test_philly_duplicates_blank_lines_sorting(in_tmp: Path) -> None:
    text = (
        PHILLY_HEADER
        + "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
        + "2017-10-09 06:13:03,2951.0,2,5902.0,6214e9\n"
        + "\n"
        + "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
        + "2017-10-09 07:01:55,67.0,1,67.0,11cb48\n"
        + "2017-10-10 00:00:00,10.0,8,80.0,\n"
    )
    path = write("philly.csv", text)
    assert detect_format(path) == "philly"
    trace = load_trace(path)
    assert trace.format == "philly"
    assert trace.dropped == {"duplicate_rows": 1}
    got = [(j.job_id, j.submit_time, j.num_gpus, j.duration, j.vc, j.line) for j in trace.jobs]
    assert got == [
        ("philly-3", 0.0, 2, 2951.0, "6214e9", 3),
        ("philly-2", 2932.0, 1, 66.0, "11cb48", 2),
        ("philly-6", 2932.0, 1, 67.0, "11cb48", 6),
        ("philly-7", 64017.0, 8, 10.0, None, 7),
    ]
    assert trace.origin == philly_timestamp("2017-10-09 06:13:03") == 1507529583.0


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("2017-10-09 07:01:55,-5.0,1,-5.0,c", "p.csv:3: duration: must be > 0, got -5.0"),
        ("2017-10-09 07:01:55,0,1,0,c", "p.csv:3: duration: must be > 0, got 0"),
        ("2017-10-09 07:01:55,abc,1,0,c", "p.csv:3: duration: not a number: 'abc'"),
        ("2017-10-09 07:01:55,5,x,5,c", "p.csv:3: num_gpus: not an integer: 'x'"),
        (
            "2017/10/09 07:01:55,5,1,5,c",
            "p.csv:3: timestamp: not a 'YYYY-MM-DD HH:MM:SS' time: '2017/10/09 07:01:55'",
        ),
        (
            "2017-02-30 07:01:55,5,1,5,c",
            "p.csv:3: timestamp: not a valid date: '2017-02-30 07:01:55'",
        ),
        (
            "2017-10-09 24:01:55,5,1,5,c",
            "p.csv:3: timestamp: not a valid time of day: '2017-10-09 24:01:55'",
        ),
    ],
)
def test_philly_row_errors(in_tmp: Path, row: str, expected: str) -> None:
    path = write("p.csv", PHILLY_HEADER + "2017-10-09 07:01:55,66.0,1,66.0,c\n" + row + "\n")
    assert error_of(path) == expected


def test_philly_requires_its_columns(in_tmp: Path) -> None:
    path = write("p.csv", "timestamp,num_gpus,cluster\n2017-10-09 07:01:55,1,c\n")
    assert error_of(path, "philly") == "p.csv:1: header: missing required column 'duration'"


@pytest.mark.shared_data
def test_real_philly(shared_data: Path) -> None:
    path = shared_data / "traces" / "philly.csv"
    assert detect_format(path) == "philly"
    trace = load_trace(path)
    # 82,247 data rows (82,249 lines = header + one blank line at the end) minus
    # 65 exact duplicate rows (63 distinct rows repeated; two of them three times).
    # No zero-duration rows exist, so nothing else is dropped.
    assert len(trace.jobs) == 82_182
    assert trace.dropped == {"duplicate_rows": 65}
    assert trace.origin == philly_timestamp("2017-09-04 10:30:41")
    assert trace.jobs[-1].submit_time == philly_timestamp("2017-12-22 08:02:11") - trace.origin
    assert len({j.vc for j in trace.jobs}) == 15
    assert summarize(trace)["gpu_histogram"] == {
        "1": 76_565,
        "2": 1_816,
        "3-4": 1_869,
        "5-8": 1_643,
        "9-16": 206,
        "17-32": 74,
        "33-64": 6,
        "65+": 3,
    }


@pytest.mark.shared_data
def test_sample_regenerates_byte_for_byte(shared_data: Path, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_trace_sample", SAMPLE_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "philly_sample.csv"
    philly = shared_data / "traces" / "philly.csv"
    assert module.main(["--philly", str(philly), "--out", str(out)]) == 0
    assert out.read_bytes() == SAMPLE.read_bytes()
