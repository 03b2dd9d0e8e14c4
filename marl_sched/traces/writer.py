"""Writing a trace in the canonical format."""

from __future__ import annotations

import csv
import io
import os
import tempfile
from pathlib import Path

from marl_sched.errors import InputError
from marl_sched.traces.canonical import CANONICAL_COLUMNS, OPTIONAL_COLUMNS
from marl_sched.traces.records import Trace


def _cell(value: object) -> str:
    """One CSV cell: '' for None, integral floats without '.0', exact repr otherwise."""
    if value is None:
        return ""
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    return str(value)


def _new_file_mode(target: Path) -> int:
    """Permission bits for ``target``: its current ones, else 0o666 less the umask."""
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_canonical(trace: Trace, path: str | os.PathLike) -> None:
    """Write ``trace`` in the canonical format, atomically (temp file + os.replace).

    Columns: :data:`CANONICAL_COLUMNS` then :data:`OPTIONAL_COLUMNS`; None is an empty
    cell; numbers are written so that :func:`load_trace` reads back the same floats.
    """
    target = Path(path)
    columns = CANONICAL_COLUMNS + OPTIONAL_COLUMNS
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for job in trace.jobs:
        writer.writerow([_cell(getattr(job, col)) for col in columns])
    tmp_name = None
    try:
        fd, tmp_name = tempfile.mkstemp(
            dir=target.parent if str(target.parent) else ".",
            prefix=f".{target.name}.",
            suffix=".tmp",
        )
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(buffer.getvalue())
        os.chmod(tmp_name, _new_file_mode(target))
        os.replace(tmp_name, target)
    except OSError as exc:
        if tmp_name is not None and os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise InputError(f"{os.fspath(path)}: cannot write trace: {exc.strerror or exc}") from None
