"""The test-split ledger: one line per benchmark run that looked at the test split.

``benchmarks/ledger.jsonl`` (append-only JSON lines) records every ``marl-sched
benchmark`` run touching the default suite's test split
(:func:`marl_sched.benchmark.suite.in_test_split`), appended after the inputs are
checked and before any cell runs. Fields: ``id`` (1, 2, ...; cited as ``ledger #N``),
``date`` (UTC), ``commit``, ``suite``, ``suite_sha256``, ``split``, ``track``,
``seeds``, ``scenarios``, ``overrides``, ``duration_estimate``, ``policies``,
``checkpoints`` (``[{path, digest}]`` per row), ``out``.

:func:`check` refuses (exit 2, one line) a ledger that is not a small regular file of
consecutively numbered JSON objects, and a test-split run from a work tree with
uncommitted changes. Entries are appended under ``flock`` and fsynced."""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import os
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marl_sched.config import REPO_ROOT
from marl_sched.errors import InputError
from marl_sched.files import read_input

LEDGER = REPO_ROOT / "benchmarks" / "ledger.jsonl"
#: the suite whose test split the ledger guards (None: the default suite)
REFERENCE_SUITE: str | Path | None = None
#: the checkout whose commit an entry names (and which must be clean to record one)
REPO: Path = REPO_ROOT


def git_commit(root: Path = REPO_ROOT) -> str:
    """HEAD's hash, ``+dirty`` with uncommitted changes; ``unknown`` without git."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def read_ledger(path: str | Path = LEDGER) -> list[dict[str, Any]]:
    """Every entry, in order (none for a missing file); ``InputError`` naming the file
    and line for anything malformed."""
    p = Path(path)
    try:
        info = os.lstat(p)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise InputError(f"{p}: cannot read the ledger: {exc.strerror or exc}") from None
    restore = f"it must be the regular file the repo keeps (restore it: git checkout {p})"
    if stat.S_ISLNK(info.st_mode):
        raise InputError(f"{p}: the ledger is a symlink; {restore}")
    try:
        data = read_input(p, "ledger", str(p), follow_links=False)
    except InputError as exc:
        raise InputError(f"{exc}; {restore}") from None
    entries: list[dict[str, Any]] = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        repair = f"remove or fix line {n} (a merge conflict leaves such lines)"
        try:
            entry = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise InputError(f"{p}:{n}: not valid UTF-8; {repair}") from None
        except (json.JSONDecodeError, RecursionError):
            raise InputError(f"{p}:{n}: not a JSON object; {repair}") from None
        if not isinstance(entry, dict):
            raise InputError(f"{p}:{n}: not a JSON object; {repair}")
        if entry.get("id") != len(entries) + 1 or isinstance(entry.get("id"), bool):
            raise InputError(
                f"{p}:{n}: entry id {entry.get('id')!r}, expected {len(entries) + 1}; renumber "
                "the entries from this line on (two branches appended at once?)"
            )
        entries.append(entry)
    return entries


def check(ledger: str | Path | None, scenarios: Sequence[Any]) -> None:
    """Before any work: when this run would be recorded, the ledger must read back
    whole and the work tree be clean (``InputError``)."""
    if ledger is None or not touches_test(scenarios):
        return
    read_ledger(ledger)
    if git_commit(REPO).endswith("+dirty"):
        raise InputError(
            f"{REPO}: uncommitted changes; commit first (a test-split run is recorded in "
            f"{ledger} against the commit that ran it)"
        )


def touches_test(scenarios: Sequence[Any]) -> bool:
    """Does any scenario's window lie in (or copy rows of) the default suite's test
    split?"""
    from marl_sched.benchmark.suite import DEFAULT_SUITE, in_test_split, resolve

    suite = REFERENCE_SUITE or DEFAULT_SUITE
    return any(
        in_test_split(
            resolve(sc.trace), sc.start, sc.max_jobs, warmup_jobs=sc.warmup_jobs, suite=suite
        )
        is not None
        for sc in scenarios
    )


def append(path: str | Path, entry: dict[str, Any]) -> dict[str, Any]:
    """Append ``entry`` (numbered after the last one) under an exclusive lock and fsync
    it; returns it with its ``id``."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(p, flags, 0o644)
    except OSError as exc:
        raise InputError(f"{p}: cannot append to the ledger: {exc.strerror or exc}") from None
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"{p}: the ledger is not a regular file")
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when the file closes
        entry = {"id": len(read_ledger(p)) + 1, **entry}
        fh.write(json.dumps(entry, sort_keys=False) + "\n")
        fh.flush()
        os.fsync(fd)
    return entry


def cite(path: str | Path, entry: dict[str, Any]) -> str:
    """``benchmarks/ledger.jsonl #N`` (the path relative to the repo when inside it)."""
    p = Path(path).resolve()
    try:
        shown = p.relative_to(REPO_ROOT.resolve())
    except ValueError:
        shown = p
    return f"{shown} #{entry['id']}"


def record_if_test(
    ledger: str | Path | None,
    suite_path: str | Path,
    split: str,
    scenarios: Sequence[Any],
    policies: Sequence[str],
    ckpts: dict[str, list[tuple[str | None, str | None]]],
    seeds: int,
    out: str | Path,
    track: str | None,
    overrides: Sequence[str] = (),
    duration_estimate: str | None = None,
) -> str | None:
    """Append this run's entry when it touches the test split; returns its citation,
    or None."""
    from marl_sched.benchmark.suite import resolve

    if ledger is None or not touches_test(scenarios):
        return None
    entry = append(
        ledger,
        {
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": git_commit(REPO),
            "suite": str(suite_path),
            "suite_sha256": hashlib.sha256(resolve(suite_path).read_bytes()).hexdigest(),
            "split": split,
            "track": track,
            "policies": list(policies),
            "checkpoints": {
                p: [{"path": path, "digest": digest} for digest, path in runs]
                for p, runs in ckpts.items()
                if any(path for _, path in runs)
            },
            "seeds": seeds,
            "scenarios": len(scenarios),
            "overrides": list(overrides),
            "duration_estimate": duration_estimate,
            "out": str(Path(out).resolve()),
        },
    )
    return cite(ledger, entry)
