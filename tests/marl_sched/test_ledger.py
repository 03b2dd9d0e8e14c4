"""The test-split ledger (marl_sched.benchmark.ledger) as an append-only log: read back
whole before any work, refused with one line naming the file, the line and the repair;
appended under a lock; never recorded from a work tree with uncommitted changes."""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from marl_sched.benchmark import ledger as ledger_mod
from marl_sched.benchmark.command import run_benchmark
from marl_sched.cli import main
from marl_sched.errors import InputError
from tests.marl_sched.benchmark_helpers import golden_suite_data

pytestmark = pytest.mark.usefixtures("fingerprint_cache")

ENTRY = '{"id": 1, "split": "test"}\n'


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True, env=env).stdout.strip()  # fmt: skip


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """A clean one-commit git checkout, the one the ledger names the commit of."""
    r = tmp_path / "checkout"
    r.mkdir()
    _git(r, "init", "-q")
    (r / "code.py").write_text("x = 1\n")
    _git(r, "add", "code.py")
    _git(r, "commit", "-q", "-m", "one")
    monkeypatch.setattr(ledger_mod, "REPO", r)
    return r


@pytest.fixture
def suite(tmp_path, monkeypatch) -> str:
    """The golden suite, made the one whose test split the ledger guards."""
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(golden_suite_data(), sort_keys=False))
    monkeypatch.setattr(ledger_mod, "REFERENCE_SUITE", str(path))
    return str(path)


def _run(suite: str, out: Path, ledger: Path, split: str = "test"):
    return run_benchmark(suite, split, ["first-fit"], 1, out, figures=False,
                         track="placement", ledger=ledger)  # fmt: skip


def test_git_commit_marks_uncommitted_changes_dirty(repo) -> None:
    """Catches ``git_commit`` dropping its ``+dirty`` mark."""
    head = ledger_mod.git_commit(repo)
    assert len(head) == 40 and "+" not in head
    (repo / "code.py").write_text("x = 2\n")
    assert ledger_mod.git_commit(repo) == head + "+dirty"
    (repo / "untracked.txt").write_text("")  # untracked files do not count
    _git(repo, "checkout", "code.py")
    assert ledger_mod.git_commit(repo) == head


def test_a_test_split_run_from_a_dirty_tree_is_refused_before_any_work(repo, suite, tmp_path):
    """Catches recording a test-split look against a commit that is not what ran."""
    (repo / "code.py").write_text("x = 2\n")
    ledger, out = tmp_path / "ledger.jsonl", tmp_path / "bench"
    with pytest.raises(InputError, match="uncommitted changes; commit first") as info:
        _run(suite, out, ledger)
    assert str(repo) in str(info.value) and "\n" not in str(info.value)
    assert not out.exists() and not ledger.exists()
    _run(suite, tmp_path / "train", ledger, split="train")  # not recorded: not refused
    _git(repo, "checkout", "code.py")
    _run(suite, out, ledger)
    (entry,) = ledger_mod.read_ledger(ledger)
    assert entry["commit"] == ledger_mod.git_commit(repo) and (out / "summary.md").is_file()


FIX = "remove or fix line 2"


def _bad_ledgers(tmp_path: Path) -> dict[str, tuple[object, str]]:
    return {
        "merge-conflict": (ENTRY + "<<<<<<< HEAD\n", rf":2: not a JSON object; {FIX} \(a merge"),
        "not-an-object": (ENTRY + "[1, 2]\n", f":2: not a JSON object; {FIX}"),
        "non-utf8": (ENTRY.encode() + b'{"id": 2, "x": "\xff"}\n', f":2: not valid UTF-8; {FIX}"),
        "renumbered": (ENTRY + ENTRY, r":2: entry id 1, expected 2; renumber"),
        "folder": ("DIR", "is a folder"),
        "link": ("LINK", "is a symlink"),
        "fifo": ("FIFO", "not a regular file"),
        "oversized": ("BIG", "more than the 16 MiB"),
    }  # fmt: skip


def _make(path: Path, content) -> None:
    if content == "DIR":
        path.mkdir()
    elif content == "LINK":
        (path.parent / "real.jsonl").write_text(ENTRY)
        path.symlink_to(path.parent / "real.jsonl")
    elif content == "FIFO":
        os.mkfifo(path)
    elif content == "BIG":
        path.write_text(ENTRY)
        os.truncate(path, 17 << 20)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)


@pytest.mark.parametrize("case", list(_bad_ledgers(Path())))
def test_a_bad_ledger_is_refused_naming_file_and_line_before_any_output(
    repo, suite, tmp_path, case
) -> None:
    """Each of these read as garbage, a traceback, a hang (FIFO) or a memory blow-up
    (oversized) by the old ledger, or only after the output folder was claimed."""
    content, message = _bad_ledgers(tmp_path)[case]
    ledger, out = tmp_path / "ledger.jsonl", tmp_path / "bench"
    _make(ledger, content)
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=message) as info:
        _run(suite, out, ledger)
    assert time.perf_counter() - t0 < 30
    assert str(ledger) in str(info.value) and "\n" not in str(info.value)
    assert not out.exists()


def test_the_benchmark_command_checks_the_ledger_before_ray_or_output(
    repo, suite, tmp_path, monkeypatch, capsys
) -> None:
    ledger, out = tmp_path / "ledger.jsonl", tmp_path / "bench"
    ledger.write_text(ENTRY + "=======\n")
    monkeypatch.setattr("marl_sched.benchmark.command.LEDGER", ledger)
    rc = main(["benchmark", "--suite", suite, "--split", "test", "--policies", "first-fit",
               "--seeds", "1", "--out", str(out), "--track", "placement"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and f"{ledger}:2:" in err and "line 2" in err
    assert not out.exists()


def test_append_holds_an_exclusive_lock_and_fsyncs(tmp_path, monkeypatch) -> None:
    """Catches an append without ``flock`` (two runs appending at once could write
    the same id) or without ``fsync``."""
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(ENTRY)
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    holder = os.open(ledger, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    done = []
    t = threading.Thread(target=lambda: done.append(ledger_mod.append(ledger, {"x": 1})))
    t.start()
    time.sleep(0.5)
    assert not done and ledger.read_text() == ENTRY  # waiting for the lock
    fcntl.flock(holder, fcntl.LOCK_UN)
    os.close(holder)
    t.join(10)
    assert done[0]["id"] == 2 and synced
    assert [e["id"] for e in ledger_mod.read_ledger(ledger)] == [1, 2]


def test_the_shipped_ledger_reads_back_whole() -> None:
    entries = ledger_mod.read_ledger()
    assert entries and [e["id"] for e in entries] == list(range(1, len(entries) + 1))
