"""Tests of marl_sched.traces.canonical: the project's own format."""

from __future__ import annotations

from pathlib import Path

import pytest

from marl_sched.traces import (
    load_trace,
)
from tests.marl_sched.trace_helpers import (
    CANON_HEADER,
    SAMPLE,
    error_of,
    write,
)


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (["a,0,1,10,", "b,5,1,-7,"], "trace.csv:3: duration: must be > 0, got -7"),
        (["a,0,1,10,", "b,5,1,0,"], "trace.csv:3: duration: must be > 0, got 0"),
        (["a,0,abc,10,"], "trace.csv:2: num_gpus: not an integer: 'abc'"),
        (["a,0,2.0,10,"], "trace.csv:2: num_gpus: not an integer: '2.0'"),
        (["a,0,0,10,"], "trace.csv:2: num_gpus: must be >= 1, got 0"),
        (["a,0,1,xyz,"], "trace.csv:2: duration: not a number: 'xyz'"),
        (["a,0,1,nan,"], "trace.csv:2: duration: must be a finite number, got 'nan'"),
        (["a,inf,1,10,"], "trace.csv:2: submit_time: must be a finite number, got 'inf'"),
        (["a,0,1,1e999,"], "trace.csv:2: duration: must be a finite number, got '1e999'"),
        (["a,,1,10,"], "trace.csv:2: submit_time: missing value"),
        ([",0,1,10,"], "trace.csv:2: job_id: missing value"),
        (["a,0,1,10,", "b,1,1"], "trace.csv:3: row: expected 5 fields, got 3"),
        (["a,0,1,10,", "b,1,1,10,x,y"], "trace.csv:3: row: expected 5 fields, got 6"),
        (["a,0,1,-1,", "b,1,1"], "trace.csv:2: duration: must be > 0, got -1"),  # first wins
        (["a,0,1,10,", '"b,1,1,10,'], "trace.csv:3: row: expected 5 fields, got 1"),
    ],
)
def test_canonical_row_errors(in_tmp: Path, rows: list[str], expected: str) -> None:
    path = write("trace.csv", CANON_HEADER + "\n".join(rows) + "\n")
    assert error_of(path) == expected


def test_unknown_model_lists_known_models_sorted(in_tmp: Path) -> None:
    path = write("trace.csv", CANON_HEADER + "j1,0,1,5,a\nj2,1,1,5,b\nj3,2,1,5,\nj4,3,1,5,foo\n")
    assert error_of(path, known_models={"c", "b", "a"}) == (
        "trace.csv:5: model: unknown model 'foo' (known: a, b, c)"
    )
    # Without known_models any model is accepted, and an empty model is None.
    jobs = load_trace(path).jobs
    assert [job.model for job in jobs] == ["a", "b", None, "foo"]


def test_duplicate_job_id_names_first_line_across_blank_lines(in_tmp: Path) -> None:
    text = CANON_HEADER + "x,0,1,5,\ny,1,1,5,\n\nz,2,1,5,\n\nx,3,1,5,\n"
    path = write("trace.csv", text)
    assert error_of(path) == "trace.csv:7: job_id: duplicate of line 2"


def test_optional_columns_validated(in_tmp: Path) -> None:
    header = "job_id,submit_time,num_gpus,duration,num_ps,iterations,vc\n"
    path = write("ps.csv", header + "a,0,1,5,-1,,\n")
    assert error_of(path) == "ps.csv:2: num_ps: must be >= 0, got -1"
    path = write("it.csv", header + "a,0,1,5,,0,\n")
    assert error_of(path) == "it.csv:2: iterations: must be > 0, got 0"
    path = write("ok.csv", header + "a,0,2,5,0,1000.5,vc1\nb,1,1,5,,,\n")
    a, b = load_trace(path).jobs
    assert (a.num_ps, a.iterations, a.vc) == (0, 1000.5, "vc1")
    assert (b.num_ps, b.iterations, b.vc, b.model) == (None, None, None, None)


def test_shipped_sample_loads() -> None:
    trace = load_trace(SAMPLE)
    assert trace.format == "canonical"
    assert len(trace.jobs) == 2500
    assert trace.jobs[0].submit_time == 0.0
    assert trace.jobs[0].job_id == "philly-28575"
    assert all(j.model is None and j.num_ps is None and j.vc for j in trace.jobs)
