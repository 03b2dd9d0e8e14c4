"""Tests of marl_sched.traces.pollux: Pollux's and Sia's workloads.

Tests on the real files in ../shared/data are marked ``shared_data`` and skipped when
that folder is absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from marl_sched.catalogue import CATALOGUE
from marl_sched.traces import (
    detect_format,
    load_trace,
)
from tests.marl_sched.trace_helpers import (
    POLLUX_HEADER,
    SAMPLE,
    error_of,
    write,
)


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
def test_shipped_pollux_training_windows_equal_the_shared_files(shared_data: Path) -> None:
    shipped = sorted((SAMPLE.parent / "pollux").glob("workload-*.csv"))
    assert [p.name for p in shipped] == [f"workload-{k}.csv" for k in (2, 3, 4, 5, 6)]
    for path in shipped:
        original = shared_data / "traces" / "pollux_workloads" / path.name
        assert path.read_bytes() == original.read_bytes()
