"""Tests of marl_sched.traces: validation messages, adapters, windows, round trips.

Tests on the real files in ../shared/data are marked ``shared_data`` and skipped when
that folder is absent.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from marl_sched.catalogue import CATALOGUE
from marl_sched.errors import InputError
from marl_sched.traces import (
    CANONICAL_COLUMNS,
    OPTIONAL_COLUMNS,
    TRACE_FORMATS,
    Trace,
    TraceJob,
    detect_format,
    format_summary,
    load_trace,
    philly_timestamp,
    summarize,
    write_canonical,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLE = REPO_ROOT / "configs" / "traces" / "philly_sample.csv"
SAMPLE_SCRIPT = REPO_ROOT / "configs" / "traces" / "make_sample.py"

CANON_HEADER = "job_id,submit_time,num_gpus,duration,model\n"
PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"
ALIBABA_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
POLLUX_HEADER = "name,time,application,num_replicas,batch_size\n"


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test inside tmp_path so files can be named relatively, as given."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(name: str, text: str) -> str:
    """Write ``text`` to ``name`` (relative to the current directory); return the name."""
    Path(name).write_text(text, encoding="utf-8")
    return name


def error_of(path: str, fmt: str | None = None, **kwargs: object) -> str:
    """The InputError message that loading ``path`` raises."""
    with pytest.raises(InputError) as info:
        load_trace(path, fmt, **kwargs)
    return str(info.value)


# ------------------------------------------------------------------ error messages


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


# ------------------------------------------------------------- window and load


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


# ------------------------------------------------------------------------ philly


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


# ----------------------------------------------------------------------- alibaba


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


# ------------------------------------------------------------------------ pollux


def pollux_file(name: str = "w.csv") -> str:
    """A small Pollux workload covering every GPU-count bucket."""
    rows = [
        "cifar10-0,107,cifar10,6,2048",
        "ncf-1,135,ncf,1,32768",
        "bert-2,262,bert,12,64",
        "yolov3-3,300,yolov3,2,64",
        "imagenet-4,301,imagenet,4,400",
        "deepspeech2-5,400,deepspeech2,48,320",
    ]
    return write(name, POLLUX_HEADER + "\n".join(rows) + "\n")


def test_pollux_fields_and_profiled_lengths(in_tmp: Path) -> None:
    path = pollux_file()
    assert detect_format(path) == "pollux"
    first = load_trace(path, seed=7)
    # nothing is drawn: the seed does not change a job
    assert load_trace(path, seed=8).jobs == first.jobs
    assert [(j.job_id, j.submit_time, j.num_gpus, j.model) for j in first.jobs] == [
        ("cifar10-0", 0.0, 6, "cifar10"),
        ("ncf-1", 28.0, 1, "ncf"),
        ("bert-2", 155.0, 12, "bert"),
        ("yolov3-3", 193.0, 2, "yolov3"),
        ("imagenet-4", 194.0, 4, "imagenet"),
        ("deepspeech2-5", 293.0, 48, "deepspeech2"),
    ]
    # measured batch sizes: the iteration count at the last epoch of the profile
    # (cifar10 validation-2048.csv row 100: 3178; ncf validation-32768.csv row 10: 1548)
    assert first.jobs[0].iterations == 3178.0
    assert first.jobs[1].iterations == 1548.0
    # bert at 64, between the measured 48 (3732 at epoch 2) and 96 (1885):
    # 3732 + (1885 - 3732) * (64 - 48) / (96 - 48)
    assert first.jobs[2].iterations == pytest.approx(3732 - 1847 / 3)
    for job in first.jobs:
        assert job.duration == pytest.approx(job.iterations * CATALOGUE[job.model].compute_s)


def test_pollux_errors(in_tmp: Path) -> None:
    path = pollux_file()
    assert error_of(path, known_models={"bert", "ncf"}) == (
        "w.csv:2: application: unknown model 'cifar10' (known: bert, ncf)"
    )
    path = write("z.csv", POLLUX_HEADER + "a-0,1,ncf,0,32\n")
    assert error_of(path) == "z.csv:2: num_replicas: must be >= 1, got 0"
    path = write("b.csv", POLLUX_HEADER + "a-0,1,ncf,1,\n")
    assert error_of(path) == "b.csv:2: batch_size: missing value"
    path = write("d.csv", POLLUX_HEADER + "a-0,1,ncf,1,32\na-0,2,ncf,1,32\n")
    assert error_of(path) == "d.csv:3: name: duplicate of line 2"
    path = write("u.csv", POLLUX_HEADER + "a-0,1,gpt9,1,32\n")
    assert error_of(path) == (
        "u.csv:2: application: no length profile for 'gpt9' "
        "(known: bert, cifar10, deepspeech2, imagenet, ncf, yolov3)"
    )


# ------------------------------------------------------------- write + summarize


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


def test_trace_formats_constant() -> None:
    assert TRACE_FORMATS == ("canonical", "philly", "alibaba", "pollux")


# ------------------------------------------------------------ real shared data


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


@pytest.mark.shared_data
def test_real_pollux_workloads(shared_data: Path) -> None:
    models = {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
    for n in range(1, 9):
        path = shared_data / "traces" / "pollux_workloads" / f"workload-{n}.csv"
        assert detect_format(path) == "pollux"
        trace = load_trace(path, known_models=models, seed=n)
        assert len(trace.jobs) == 160
        assert trace.dropped == {}
        assert {j.model for j in trace.jobs} <= models
        assert all(j.iterations > 0 for j in trace.jobs)


@pytest.mark.shared_data
@pytest.mark.parametrize(("source", "files", "jobs"), [("philly", 8, 160), ("newtrace", 10, 960)])
def test_real_sia_workloads(shared_data: Path, source: str, files: int, jobs: int) -> None:
    folder = shared_data / "traces" / "sia_workloads" / source
    assert sorted(p.name for p in folder.glob("workload-*.csv")) == sorted(
        f"workload-{n}.csv" for n in range(1, files + 1)
    )
    trace = load_trace(folder / "workload-1.csv")
    assert trace.format == "pollux"
    assert len(trace.jobs) == jobs
    assert all(j.iterations > 0 and j.duration > 0 for j in trace.jobs)


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


@pytest.mark.shared_data
def test_shipped_pollux_training_windows_equal_the_shared_files(shared_data: Path) -> None:
    shipped = sorted((SAMPLE.parent / "pollux").glob("workload-*.csv"))
    assert [p.name for p in shipped] == [f"workload-{k}.csv" for k in (2, 3, 4, 5, 6)]
    for path in shipped:
        original = shared_data / "traces" / "pollux_workloads" / path.name
        assert path.read_bytes() == original.read_bytes()


def test_shipped_sample_loads() -> None:
    trace = load_trace(SAMPLE)
    assert trace.format == "canonical"
    assert len(trace.jobs) == 2500
    assert trace.jobs[0].submit_time == 0.0
    assert trace.jobs[0].job_id == "philly-28575"
    assert all(j.model is None and j.num_ps is None and j.vc for j in trace.jobs)


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
