"""A full disk or a read-only folder: every writer exits 2 with one line naming the
path, and what it staged is gone. On a 64 KiB tmpfs (skipped where it cannot be
mounted: not root, or no mount permission in a container)."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from marl_sched.cli import main
from marl_sched.config import REPO_ROOT
from marl_sched.files import atomic_write_bytes
from tests.marl_sched.benchmark_helpers import golden_suite_data

pytestmark = pytest.mark.usefixtures("fingerprint_cache")

GOLDEN = str(REPO_ROOT / "tests" / "data" / "golden.yaml")
TRACE = str(REPO_ROOT / "tests" / "data" / "golden_trace.csv")


def _mount(point: Path, *options: str) -> None:
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(["size=64k", *options]),
                             "tmpfs", str(point)], capture_output=True, text=True)  # fmt: skip
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip() or result.returncode}")


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs, filled to the last byte."""
    point = tmp_path / "disk"
    point.mkdir()
    _mount(point)
    try:
        fd = os.open(point / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 512):
                pass
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        finally:
            os.close(fd)
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


@pytest.fixture
def read_only_disk(tmp_path):
    point = tmp_path / "ro"
    point.mkdir()
    _mount(point, "ro")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def _leftovers(point: Path) -> list[str]:
    return sorted(p.name for p in point.rglob("*") if p.name != "filler")


def _benchmark(tmp_path: Path, out: Path) -> list[str]:
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump(golden_suite_data(), sort_keys=False))
    return ["benchmark", "--suite", str(suite), "--split", "train", "--policies", "first-fit",
            "--seeds", "1", "--out", str(out), "--local", "--quiet"]  # fmt: skip


def _one_line(capsys, rc: int, *words: str) -> str:
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith("marl-sched: error: "), err
    assert "Traceback" not in err
    for word in words:
        assert word in err, err
    return err


def test_the_atomic_writer_names_the_path_and_leaves_no_temporary(small_disk):
    target = small_disk / "out.json"
    with pytest.raises(OSError) as caught:
        atomic_write_bytes(target, b"x" * 100_000)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(target)
    assert _leftovers(small_disk) == []


def test_benchmark_on_a_full_disk_is_one_line(tmp_path, capsys, small_disk):
    rc = main(_benchmark(tmp_path, small_disk / "bench"))
    _one_line(capsys, rc, str(small_disk / "bench"), "No space left on device")
    assert not [n for n in _leftovers(small_disk) if n.endswith(".tmp")]


def test_benchmark_on_a_read_only_disk_is_one_line(tmp_path, capsys, read_only_disk):
    rc = main(_benchmark(tmp_path, read_only_disk / "bench"))
    _one_line(capsys, rc, str(read_only_disk / "bench"), "Read-only file system")


def test_simulate_on_a_full_disk_is_one_line_and_stages_nothing(capsys, small_disk):
    rc = main(["simulate", "--config", GOLDEN, "--trace", TRACE, "--max-jobs", "30",
               "--out", str(small_disk / "sim"), "--quiet"])  # fmt: skip
    _one_line(capsys, rc, "sim", "No space left on device")
    assert _leftovers(small_disk) == []
