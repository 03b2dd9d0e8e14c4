"""Tests of marl_sched.traces shared by every format: reading the file, headers,
format detection, arguments and windows."""

from __future__ import annotations

from pathlib import Path

import pytest

from marl_sched.errors import InputError
from marl_sched.traces import (
    TRACE_FORMATS,
    TraceJob,
    detect_format,
    load_trace,
    read_rows,
    window_of,
)
from tests.marl_sched.trace_helpers import (
    CANON_HEADER,
    error_of,
    write,
)


def test_header_errors(in_tmp: Path) -> None:
    path = write("trace.csv", "job_id,submit_time,num_gpus,model\na,0,1,b\n")
    assert error_of(path, "canonical") == (
        "trace.csv:1: header: missing required column 'duration'"
    )
    path = write("extra.csv", "job_id,submit_time,num_gpus,duration,user\na,0,1,5,bob\n")
    assert error_of(path) == (
        "extra.csv:1: header: unknown column 'user' (allowed: job_id, submit_time, "
        "num_gpus, duration, model, num_ps, iterations, vc)"
    )
    path = write("dup.csv", "job_id,submit_time,num_gpus,duration,vc,vc\na,0,1,5,x,y\n")
    assert error_of(path) == "dup.csv:1: header: duplicate column 'vc'"


def test_unreadable_files(in_tmp: Path) -> None:
    assert error_of("missing.csv") == ("missing.csv: cannot read trace: No such file or directory")
    Path("adir").mkdir()
    assert error_of("adir") == "adir: cannot read trace: is a folder, not a file"
    Path("latin1.csv").write_bytes(CANON_HEADER.encode() + b"caf\xe9,0,1,5,\n")
    assert error_of("latin1.csv") == (
        "latin1.csv: cannot read trace: line 2 is not valid UTF-8 (byte 0xe9 at offset 46)"
    )
    with pytest.raises(InputError, match="^missing.csv: cannot read trace: "):
        detect_format("missing.csv")


def test_bom_and_crlf_are_accepted(in_tmp: Path) -> None:
    Path("win.csv").write_bytes(b"\xef\xbb\xbf" + CANON_HEADER.encode() + b"a,0,1,5,m\r\n\r\n")
    assert detect_format("win.csv") == "canonical"
    assert load_trace("win.csv").jobs == (TraceJob("a", 0.0, 1, 5.0, model="m", line=2),)


def test_empty_file_and_unknown_format(in_tmp: Path) -> None:
    path = write("empty.csv", "")
    assert error_of(path) == "empty.csv:1: header: file is empty, expected a header line"
    path = write("odd.csv", "a,b\n1,2\n")
    msg = (
        "odd.csv:1: header: unknown trace format (columns: a, b; "
        "expected one of: canonical, philly, alibaba, pollux)"
    )
    assert error_of(path) == msg
    with pytest.raises(InputError) as info:
        detect_format(path)
    assert str(info.value) == msg


def test_no_data_rows_and_empty_window_name_the_file(in_tmp: Path) -> None:
    path = write("head.csv", CANON_HEADER + "\n\n")
    assert error_of(path) == "head.csv: trace has no jobs"
    path = write("two.csv", CANON_HEADER + "a,0,1,5,\nb,1,1,5,\n")
    assert error_of(path, start=2) == (
        "two.csv: window is empty: --start 2 skips all 2 jobs of the trace"
    )


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"load": -1}, "--load: must be > 0, got -1"),
        ({"load": 0.0}, "--load: must be > 0, got 0"),
        ({"load": float("nan")}, "--load: must be > 0, got nan"),
        ({"load": "2"}, "--load: must be a number > 0, got '2'"),
        ({"start": -1}, "--start: must be an integer >= 0, got -1"),
        ({"start": 1.5}, "--start: must be an integer >= 0, got 1.5"),
        ({"max_jobs": 0}, "--max-jobs: must be an integer >= 1, got 0"),
        ({"fmt": "csv"}, "--format: must be one of canonical, philly, alibaba, pollux, got 'csv'"),
    ],
)
def test_argument_errors(in_tmp: Path, kwargs: dict, expected: str) -> None:
    path = write("trace.csv", CANON_HEADER + "a,0,1,5,\n")
    fmt = kwargs.pop("fmt", None)
    assert error_of(path, fmt, **kwargs) == expected


def test_window_rebase_and_load(in_tmp: Path) -> None:
    rows = ["e,400,1,5,", "a,100,1,5,", "c,250,2,5,", "b,150,1,5,", "d,250,4,5,"]
    path = write("trace.csv", CANON_HEADER + "\n".join(rows) + "\n")
    full = load_trace(path)
    assert [job.job_id for job in full.jobs] == ["a", "b", "c", "d", "e"]  # stable sort
    assert [job.submit_time for job in full.jobs] == [0.0, 50.0, 150.0, 150.0, 300.0]
    assert [job.line for job in full.jobs] == [3, 5, 4, 6, 2]
    assert full.origin == 100.0

    window = load_trace(path, start=1, max_jobs=3, load=2.0)
    assert [job.job_id for job in window.jobs] == ["b", "c", "d"]
    assert [job.submit_time for job in window.jobs] == [0.0, 50.0, 50.0]
    assert window.origin == 150.0
    assert [job.duration for job in window.jobs] == [5.0, 5.0, 5.0]  # load leaves runs alone

    slow = load_trace(path, start=3, load=0.5)
    assert [(job.job_id, job.submit_time) for job in slow.jobs] == [("d", 0.0), ("e", 300.0)]
    assert len(load_trace(path, max_jobs=99).jobs) == 5


def test_negative_and_fractional_submit_times_are_rebased(in_tmp: Path) -> None:
    path = write("trace.csv", CANON_HEADER + "a,-10.5,1,5,\nb,2.25,1,0.5,\n")
    jobs = load_trace(path).jobs
    assert [(job.submit_time, job.duration) for job in jobs] == [(0.0, 5.0), (12.75, 0.5)]


def test_trace_formats_constant() -> None:
    assert TRACE_FORMATS == ("canonical", "philly", "alibaba", "pollux")


def test_a_load_that_overflows_submit_times_is_refused(tmp_path):
    """--load 1e-310 divides inter-arrival gaps into infinity: an input error naming
    --load, not a simulator whose clock becomes inf/NaN and spins."""
    from marl_sched.errors import InputError
    from marl_sched.traces import load_trace

    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_time,num_gpus,duration\na,0,1,10\nb,100,1,10\n")
    with pytest.raises(InputError, match=r"--load: must be in \[0.001, 1e\+06\], got 1e-310"):
        load_trace(str(path), "canonical", load=1e-310)
    assert load_trace(str(path), "canonical", load=2.0).jobs[1].submit_time == 50.0


def test_windows_of_rows_read_once_equal_load_trace(in_tmp: Path) -> None:
    rows = ["e,400,1,5,", "a,100,1,5,", "c,250,2,5,", "b,150,1,5,", "d,250,4,5,"]
    path = write("trace.csv", CANON_HEADER + "\n".join(rows) + "\n")
    read = read_rows(path)
    assert read.format == "canonical" and len(read.rows) == 5
    for kwargs in ({}, {"start": 1, "max_jobs": 3, "load": 2.0}, {"start": 3}, {"max_jobs": 99}):
        assert window_of(read, **kwargs) == load_trace(path, **kwargs)
    with pytest.raises(InputError) as info:
        window_of(read, start=5)
    assert str(info.value) == error_of(path, start=5)
    assert error_of(path, start=-1) == "--start: must be an integer >= 0, got -1"
    with pytest.raises(InputError, match="^--start: must be an integer >= 0, got -1$"):
        window_of(read, start=-1)
