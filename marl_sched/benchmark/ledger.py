"""The test-split ledger: one line per benchmark run that looked at the test split.

``benchmarks/ledger.jsonl`` (kept in the repo, append-only, one JSON object a line)
records every ``marl-sched benchmark`` run whose scenarios touch the test split of the
default suite (by row range, or by content for copied rows:
:func:`marl_sched.benchmark.suite.in_test_split`) — in practice every
``--split test`` run. The entry is appended when the run starts, after its inputs are
checked and before any cell runs, so an interrupted or repeated look is recorded too.
Fields:

- ``id``: the entry's number (1, 2, ...); results pages cite ``ledger #N``;
- ``date`` (UTC), ``commit`` (``git rev-parse HEAD``, ``+dirty`` when the work tree
  has uncommitted changes, ``unknown`` outside a git checkout);
- ``suite``, ``suite_sha256``, ``split``, ``track``, ``seeds``, ``scenarios``
  (their count), ``overrides``, ``duration_estimate``;
- ``policies``: the rows run; ``checkpoints``: per row with explicit checkpoints,
  ``[{path, digest}]`` (the 12-hex content digest the cells are keyed by);
- ``out``: the output folder (absolute).

Each run's ``summary.md`` names its entry (``Ledger entry: benchmarks/ledger.jsonl #N``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marl_sched.config import REPO_ROOT

LEDGER = REPO_ROOT / "benchmarks" / "ledger.jsonl"
#: the suite whose test split the ledger guards (None: the default suite)
REFERENCE_SUITE: str | Path | None = None


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
    """Every entry, in order (none for a missing file)."""
    p = Path(path)
    if not p.is_file():
        return []
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line]


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
    """Append ``entry`` (numbered after the last one) and flush it to disk; returns it
    with its ``id``."""
    p = Path(path)
    entry = {"id": len(read_ledger(p)) + 1, **entry}
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, sort_keys=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
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
    """Append this run's entry when it touches the test split (see the module
    docstring); returns its citation, or None (not a test-split run, or ``ledger``
    None)."""
    from marl_sched.benchmark.suite import resolve

    if ledger is None or not touches_test(scenarios):
        return None
    entry = append(
        ledger,
        {
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": git_commit(),
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
