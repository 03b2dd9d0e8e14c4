"""Tests of marl_sched.traces.writer: canonical files written and read back."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from marl_sched.errors import InputError
from marl_sched.traces import (
    CANONICAL_COLUMNS,
    OPTIONAL_COLUMNS,
    Trace,
    TraceJob,
    load_trace,
    write_canonical,
)
from tests.marl_sched.trace_helpers import (
    CANON_HEADER,
    write,
)


def test_write_canonical_round_trip(in_tmp: Path) -> None:
    header = ",".join(CANONICAL_COLUMNS + OPTIONAL_COLUMNS) + "\n"
    text = header + (
        'a,0,1,10,resnet50,2,1000,vc1\nb,"0.1",4,2.5,,,0.5,\n"c,quoted",7,8,86400,bert,0,,\n'
    )
    path = write("src.csv", text)
    loaded = load_trace(path, load=3.0)
    write_canonical(loaded, "out.csv")
    back = load_trace("out.csv")
    assert back.jobs == loaded.jobs  # sorted, header on line 1: even lines agree
    assert back.jobs[1].submit_time == 0.1 / 3.0
    assert sorted(p.name for p in in_tmp.iterdir()) == ["out.csv", "src.csv"]  # no temp file
    # Rows out of order: equal up to the source line.
    path = write("unsorted.csv", CANON_HEADER + "x,9,1,5,\n\ny,1,2,3.25,m\n")
    loaded = load_trace(path, known_models={"m"})
    write_canonical(loaded, "out.csv")  # replaces the earlier file
    back = load_trace("out.csv", known_models={"m"})
    assert [dataclasses.replace(j, line=0) for j in back.jobs] == [
        dataclasses.replace(j, line=0) for j in loaded.jobs
    ]
    assert Path("out.csv").read_text() == (
        "job_id,submit_time,num_gpus,duration,model,num_ps,iterations,vc\n"
        "y,0,2,3.25,m,,,\n"
        "x,8,1,5,,,,\n"
    )


def test_write_canonical_bad_directory(in_tmp: Path) -> None:
    trace = Trace("t", "canonical", (TraceJob("a", 0.0, 1, 5.0),), {})
    with pytest.raises(InputError, match=r"^nodir/out.csv: cannot write trace: "):
        write_canonical(trace, "nodir/out.csv")
