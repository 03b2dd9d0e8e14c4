"""Reading a trace file: its lines (UTF-8, bounded), its header and its rows."""

from __future__ import annotations

import codecs
import csv
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from marl_sched.errors import InputError
from marl_sched.traces.checks import MAX_LINE_BYTES, _check_plain, _RowError

#: what an adapter yields for each job, in file order: (absolute submit time,
#: TraceJob keyword arguments except submit_time)
_Rows = Iterator[tuple[float, dict]]


class _Lines:
    """The lines of an open trace file, decoded one at a time (UTF-8, BOM skipped); a
    line over :data:`MAX_LINE_BYTES` or not UTF-8 is an ``InputError`` naming it."""

    def __init__(self, path: str, fh) -> None:
        self.path, self.fh = path, fh

    def __iter__(self) -> Iterator[str]:
        offset, line = 0, 0
        while True:
            raw = self.fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            line += 1
            if len(raw) > MAX_LINE_BYTES:
                raise InputError(f"{self.path}:{line}: row: longer than {MAX_LINE_BYTES:,} bytes")
            skip = len(codecs.BOM_UTF8) if line == 1 and raw.startswith(codecs.BOM_UTF8) else 0
            try:
                text = raw[skip:].decode("utf-8")
            except UnicodeDecodeError as exc:
                at = skip + exc.start
                reason = (
                    f"line {line} is not valid UTF-8 (byte 0x{raw[at]:02x} at offset {offset + at})"
                )
                raise InputError(f"{self.path}: cannot read trace: {reason}") from None
            offset += len(raw)
            yield text


@dataclass
class _Source:
    """An open trace file: its header, and its data rows read as they are needed."""

    path: str
    reader: Any  # a csv.reader over _Lines, positioned after the header
    header: list[str]
    index: dict[str, int] = field(default_factory=dict)

    def error(self, line: int, err: _RowError) -> InputError:
        """The contract-shaped error for ``err`` at ``line``."""
        return InputError(f"{self.path}:{line}: {err}")

    @property
    def rows(self) -> Iterator[tuple[int, list[str]]]:
        """(1-based line, fields) of each data row, blank lines skipped; a row with the
        wrong field count raises when reached."""
        reader = self.reader
        width = len(self.header)
        line = reader.line_num + 1
        for fields in _csv_rows(reader, self.path):
            if fields:
                if len(fields) != width:
                    raise InputError(
                        f"{self.path}:{line}: row: expected {width} fields, got {len(fields)}"
                    )
                yield line, fields
            line = reader.line_num + 1


@contextmanager
def _open_source(path: str | os.PathLike) -> Iterator[_Source]:
    """The trace at ``path`` opened (a regular file within the trace size cap:
    :mod:`marl_sched.files`) with its header read; closed when the block ends."""
    from marl_sched.files import open_input

    shown = os.fspath(path)
    with open_input(path, "trace") as fh:
        reader = csv.reader(_Lines(shown, fh))
        yield _Source(path=shown, reader=reader, header=_read_header(shown, reader))


def _csv_rows(reader, path: str) -> Iterator[list[str]]:
    """``reader``'s rows; the csv module's own errors (a field over its
    ``field_size_limit`` of 131,072 characters, a NUL byte) as an ``InputError``
    naming the file and line."""
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(f"{path}:{reader.line_num}: row: {exc}") from None
        yield fields


def _read_header(path: str, reader) -> list[str]:
    """The header fields (line 1) of ``reader``."""
    first = next(_csv_rows(reader, path), None)
    if first is None:
        raise InputError(f"{path}:1: header: file is empty, expected a header line")
    if not first:
        raise InputError(f"{path}:1: header: line is blank, expected a header line")
    return first


def _optional(src: _Source, fields: list[str], name: str) -> str:
    """The raw value of an optional column, '' when the column is absent."""
    pos = src.index.get(name)
    return "" if pos is None or not fields[pos] else _check_plain(fields[pos], name)
