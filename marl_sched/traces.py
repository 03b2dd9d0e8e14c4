"""Job traces: loading, validation, format adapters and windows.

A trace is a list of training jobs, each with a submit time, a GPU count and a run
time. :func:`load_trace` reads a CSV file in one of :data:`TRACE_FORMATS`, checks
every row, and returns a :class:`Trace` whose jobs are sorted by submit time and
rebased so the first job of the chosen window is submitted at 0.0 s.

Common rules (every format)
---------------------------
- The file is UTF-8 (a leading byte-order mark is ignored) CSV with a header on
  line 1. Line numbers in messages are 1-based, the header being line 1.
- Blank lines are skipped anywhere after the header. A non-blank row must have as
  many fields as the header (``row: expected 5 fields, got 3``).
- Every row is validated; the first bad row stops the load with an
  :class:`~marl_sched.errors.InputError` shaped ``<path>:<line>: <field>: <problem>``.
  Only the rules listed below under "dropped" remove rows silently, and each one is
  counted in :attr:`Trace.dropped` (counts over the whole file, before windowing).
- Integers are plain decimal (``[+-]digits``); numbers are decimal or scientific
  notation. ``nan``, ``inf`` and values that overflow to infinity are errors.
- Jobs are sorted by submit time with a stable sort (ties keep file order), then
  windowed (``start``, ``max_jobs``), rebased to the first kept job and divided by
  ``load``.
- ``known_models`` (when given) applies to every format that sets ``model``
  (canonical and pollux): a model outside the set is an error.

canonical
---------
The project's own format, written by :func:`write_canonical`. Columns (any order):

============  =====  ====  =========  ===========================================
column        type   unit  required   meaning
============  =====  ====  =========  ===========================================
job_id        str    -     yes        unique, non-empty job name
submit_time   float  s     yes        submit time (any finite value; rebased)
num_gpus      int    GPUs  yes        workers, one GPU each, >= 1
duration      float  s     yes        run time in the original trace, > 0
model         str    -     no         model name (empty = unknown)
num_ps        int    -     no         parameter servers, >= 0 (empty = unknown)
iterations    float  -     no         training iterations, > 0 (empty = unknown)
vc            str    -     no         virtual cluster id (empty = none)
============  =====  ====  =========  ===========================================

Optional columns may be missing from the header or empty in a row. A column not in
this table is an error (``header: unknown column 'x'``). A repeated ``job_id`` is an
error (``job_id: duplicate of line 3``); nothing is dropped.

philly
------
Source: the Microsoft Philly trace as exported by Pollux (petuum/adaptdl,
``simulator/traces/philly.csv``). Columns ``timestamp,duration,num_gpus,gpu_time,
cluster``; ``timestamp`` is ``YYYY-MM-DD HH:MM:SS`` (read as UTC, so no daylight-
saving shifts), ``duration`` is run time in seconds, ``gpu_time`` = duration x GPUs
(redundant: not read), ``cluster`` is the virtual-cluster id. Other columns are
ignored. Rows are not sorted in the file.

- submit_time = the timestamp in seconds; vc = cluster (empty = None);
  job_id = ``philly-<line>`` (the row's line in the file); model, num_ps,
  iterations = None.
- duration must be a number > 0 (the real file has no zero-duration rows, so a
  zero, negative or non-numeric duration is an error); num_gpus an integer >= 1.
- dropped["duplicate_rows"]: a row identical, field for field, to an earlier row is
  dropped (the first occurrence is kept). The shared file has 65 such rows.

alibaba
-------
Source: Alibaba cluster-trace-gpu-v2023 ``openb_pod_list_default.csv``. Columns read:
``name, num_gpu, gpu_milli, creation_time, deletion_time, scheduled_time`` (times in
seconds from the trace start); the others (cpu_milli, memory_mib, gpu_spec, qos,
pod_phase) are ignored.

- num_gpu is an integer >= 0; gpu_milli an integer in [0, 1000] (the share of each
  GPU, x1000); creation_time and deletion_time are required numbers.
- Rules, applied in this order, each row dropped by the first that matches:

  1. dropped["cpu_only_pods"]: num_gpu == 0 and gpu_milli == 0.
  2. dropped["pending_pods"]: scheduled_time is empty (the pod never ran).
  3. dropped["nonpositive_duration"]: deletion_time - scheduled_time <= 0.

- A fractional-GPU pod (gpu_milli < 1000) is treated as holding its whole GPU(s):
  num_gpus = max(num_gpu, 1), so a pod with num_gpu == 0 and gpu_milli > 0 gets one
  GPU. (In the shared file fractional pods all have num_gpu == 1.)
- submit_time = creation_time; duration = deletion_time - scheduled_time;
  job_id = name (a repeated name is an error); model, num_ps, iterations = None.
- vc = None: the trace has no tenant partition. ``qos`` (LS, BE, ...) is a service
  class, not a set of machines, so it is not used as a virtual cluster.
- Pods still running when the trace ends have deletion_time = the trace end, so
  their duration is a lower bound (kept as is).

pollux
------
Source: Pollux's semi-synthetic workloads (petuum/adaptdl,
``simulator/workloads/workload-N.csv``). Columns ``name,time,application,
num_replicas,batch_size``.

- job_id = name; submit_time = time (s); num_gpus = num_replicas (integer >= 1);
  model = application as given (bert, cifar10, deepspeech2, imagenet, ncf, yolov3),
  non-empty, with a length profile; batch_size must be an integer >= 1;
  num_ps, vc = None. A repeated name is an error (``name: duplicate of line 2``).
- The file has no run time: a job runs the iterations its application trains for at
  its batch size, as the Pollux simulator defines them
  (:func:`marl_sched.pollux_lengths.pollux_iterations`: the measured run's iteration
  count at epoch ``max_epochs - 1``, interpolated linearly between the two nearest
  measured batch sizes). duration = iterations x the catalogue's compute time per
  iteration on the reference GPU, a reference run time for summaries (the simulator
  runs the iterations). Nothing is drawn: a job depends only on its row, never on
  the seed. The Sia workloads (``traces/sia_workloads/{philly,newtrace}``) share
  this schema and load the same way.
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import hashlib
import heapq
import io
import itertools
import math
import os
import random
import re
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from marl_sched.catalogue import CATALOGUE
from marl_sched.config import LOAD_RANGE
from marl_sched.errors import InputError
from marl_sched.pollux_lengths import POLLUX_MAX_EPOCHS, pollux_applications, pollux_iterations

CANONICAL_COLUMNS = ("job_id", "submit_time", "num_gpus", "duration")
OPTIONAL_COLUMNS = ("model", "num_ps", "iterations", "vc")
TRACE_FORMATS = ("canonical", "philly", "alibaba", "pollux")

# Columns each format needs in its header (detect_format picks the first format, in
# TRACE_FORMATS order, whose required columns are all present).
_REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "canonical": CANONICAL_COLUMNS,
    "philly": ("timestamp", "duration", "num_gpus", "cluster"),
    "alibaba": (
        "name",
        "num_gpu",
        "gpu_milli",
        "creation_time",
        "deletion_time",
        "scheduled_time",
    ),
    "pollux": ("name", "time", "application", "num_replicas", "batch_size"),
}

# summarize(): GPU-count histogram buckets (label, low, high inclusive).
_GPU_BUCKETS = (
    ("1", 1, 1),
    ("2", 2, 2),
    ("3-4", 3, 4),
    ("5-8", 5, 8),
    ("9-16", 9, 16),
    ("17-32", 17, 32),
    ("33-64", 33, 64),
    ("65+", 65, math.inf),
)

# ASCII digits only: Python's \d (and int(), float()) also take "٣" or "３"
_INT_RE = re.compile(r"[+-]?[0-9]+")
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_PHILLY_TS_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}")
_EPOCH = date(1970, 1, 1)


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace.

    Attributes:
        job_id: unique name within the trace.
        submit_time: seconds, relative to the first job of the loaded window (first
            job at 0.0), divided by the load factor.
        num_gpus: workers, one GPU each, >= 1.
        duration: seconds of run time in the original trace, > 0.
        model: model name, if the trace has one.
        num_ps: parameter servers, if the trace has them.
        iterations: training iterations, if the trace has them.
        vc: virtual cluster id, if the trace has one.
        line: 1-based line in the source file (header = line 1).
    """

    job_id: str
    submit_time: float
    num_gpus: int
    duration: float
    model: str | None = None
    num_ps: int | None = None
    iterations: float | None = None
    vc: str | None = None
    line: int = 0


@dataclass(frozen=True)
class Trace:
    """A loaded trace window.

    Attributes:
        path: the path as given to :func:`load_trace`.
        format: one of :data:`TRACE_FORMATS`.
        jobs: jobs sorted by submit time, the first at 0.0.
        dropped: reason -> rows of the whole file dropped by a documented rule.
        origin: submit time, in the source's own clock (seconds), of the first kept
            job before rebasing; for philly that is seconds since 1970-01-01 UTC.
    """

    path: str
    format: str
    jobs: tuple[TraceJob, ...]
    dropped: dict[str, int]
    origin: float = 0.0


# --------------------------------------------------------------------------- parsing


class _RowError(Exception):
    """A bad field in the current row; turned into an InputError with path and line."""

    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(f"{field_name}: {problem}")


#: the longest line a trace may have, in bytes (a row of the real traces is < 200)
MAX_LINE_BYTES = 1 << 20
#: the most digits an integer field may have (checked before ``int()`` reads it)
MAX_INT_DIGITS = 15
#: the longest text a number field may have
MAX_NUMBER_CHARS = 64


def _shown(value: str, limit: int = 40) -> str:
    """A field's value for a message, cut to ``limit`` characters."""
    return value if len(value) <= limit else value[: limit - 3] + "..."


class _Lines:
    """The lines of an open trace file, decoded one at a time (UTF-8; a leading
    byte-order mark is skipped): memory holds one line, never the file. A line longer
    than :data:`MAX_LINE_BYTES` or not valid UTF-8 is an ``InputError`` naming the line
    (and the byte's offset in the file)."""

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
        """(1-based line, fields) of each data row, in file order, blank lines skipped.

        A row with the wrong number of fields raises when it is reached, so the
        first bad row of the file is the one reported.
        """
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


def _detect(header: Sequence[str]) -> str | None:
    """The first format whose required columns are all in ``header``."""
    names = set(header)
    for fmt in TRACE_FORMATS:
        if all(col in names for col in _REQUIRED_COLUMNS[fmt]):
            return fmt
    return None


def _check_header(src: _Source, fmt: str) -> None:
    """Fill ``src.index``; error on a missing, repeated or (canonical) unknown column."""
    for pos, name in enumerate(src.header):
        if name in src.index:
            raise InputError(f"{src.path}:1: header: duplicate column '{_shown(name)}'")
        src.index[name] = pos
    for col in _REQUIRED_COLUMNS[fmt]:
        if col not in src.index:
            raise InputError(f"{src.path}:1: header: missing required column '{col}'")
    if fmt == "canonical":
        allowed = CANONICAL_COLUMNS + OPTIONAL_COLUMNS
        for name in src.header:
            if name not in allowed:
                raise InputError(
                    f"{src.path}:1: header: unknown column '{_shown(name)}' "
                    f"(allowed: {', '.join(allowed)})"
                )


def _check_plain(value: str, name: str) -> str:
    """A text field without control characters (a NUL, an escape sequence)."""
    bad = _CONTROL_RE.search(value)
    if bad is not None:
        raise _RowError(name, f"contains the control character {bad.group()!r}")
    return value


_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f]")


def _text(value: str, name: str) -> str:
    """A required non-empty string field without control characters."""
    if value == "":
        raise _RowError(name, "missing value")
    return _check_plain(value, name)


def _int(value: str, name: str, low: int, high: int | None = None) -> int:
    """A required integer field (ASCII digits, at most :data:`MAX_INT_DIGITS`) that
    must be >= ``low`` (and <= ``high`` when given)."""
    if value == "":
        raise _RowError(name, "missing value")
    if not _INT_RE.fullmatch(value):
        raise _RowError(name, f"not an integer: '{_shown(value)}'")
    digits = len(value.lstrip("+-"))
    if digits > MAX_INT_DIGITS:
        raise _RowError(
            name, f"must have at most {MAX_INT_DIGITS} digits, got {digits:,}: '{_shown(value)}'"
        )
    number = int(value)
    if number < low:
        raise _RowError(name, f"must be >= {low}, got {value}")
    if high is not None and number > high:
        raise _RowError(name, f"must be <= {high}, got {value}")
    return number


_NON_FINITE = frozenset({"inf", "infinity", "nan"})


def _float(value: str, name: str) -> float:
    """A required finite number (ASCII decimal or scientific notation)."""
    if value == "":
        raise _RowError(name, "missing value")
    if len(value) > MAX_NUMBER_CHARS or not _FLOAT_RE.fullmatch(value):
        if value.strip().lstrip("+-").lower() in _NON_FINITE:
            raise _RowError(name, f"must be a finite number, got '{value}'")
        raise _RowError(name, f"not a number: '{_shown(value)}'")
    number = float(value)
    if not math.isfinite(number):
        raise _RowError(name, f"must be a finite number, got '{value}'")
    return number


def _positive(value: str, name: str, high: float | None = None) -> float:
    """A required finite number > 0 (and <= ``high`` when given)."""
    number = _float(value, name)
    if number <= 0:
        raise _RowError(name, f"must be > 0, got {value}")
    if high is not None and number > high:
        raise _RowError(name, f"must be <= {high:g}, got {value}")
    return number


#: the largest time a trace may give, in seconds (a submit time, a duration: about
#: 3,000 years; Unix timestamps are ~1.7e9): beyond it the simulator's clock loses
#: its resolution and a JCT overflows to inf or NaN. Every format's durations, read
#: or derived (Alibaba's deletion - scheduled time, Pollux's iterations x compute
#: time), are held to it.
MAX_TRACE_SECONDS = 1e11
#: the most iterations a job may ask for
MAX_ITERATIONS = 1e15


def _seconds(value: str, name: str) -> float:
    """A required finite time in [-MAX_TRACE_SECONDS, MAX_TRACE_SECONDS]."""
    number = _float(value, name)
    if abs(number) > MAX_TRACE_SECONDS:
        raise _RowError(name, f"must be within +-{MAX_TRACE_SECONDS:g} s, got {value}")
    return number


def _check_model(model: str, known_models: set[str] | None, column: str = "model") -> None:
    """Error (on ``column``) when ``known_models`` is given and ``model`` is not in it."""
    if known_models is not None and model not in known_models:
        known = ", ".join(sorted(known_models))
        raise _RowError(column, f"unknown model '{_shown(model)}' (known: {known})")


class _Seen:
    """The first line of every value of a column seen so far, to refuse a repeat.

    Values are kept as 16-byte keyed BLAKE2b digests (the key drawn per process), so
    the memory per row does not grow with a value's length (a field may hold 131,072
    characters); two different values share a digest with probability ~n^2 / 2^129,
    and no file can be made to collide on purpose without the key.
    """

    _KEY = os.urandom(16)

    def __init__(self, column: str = "job_id") -> None:
        self.column = column
        self.first: dict[bytes, int] = {}

    def digest(self, value: str) -> bytes:
        data = value.encode("utf-8", "surrogatepass")
        return hashlib.blake2b(data, digest_size=16, key=self._KEY).digest()

    def check(self, value: str, line: int) -> None:
        """Error when ``value`` was already used on an earlier line."""
        first = self.first.setdefault(self.digest(value), line)
        if first != line:
            raise _RowError(self.column, f"duplicate of line {first}")

    def add(self, key: str, line: int) -> bool:
        """Record ``key``; False when it was seen before."""
        return self.first.setdefault(self.digest(key), line) == line


# ---------------------------------------------------------------------------- adapters

#: what an adapter yields for each job, in file order: (absolute submit time,
#: TraceJob keyword arguments except submit_time)
_Rows = Iterator[tuple[float, dict]]


def _optional(src: _Source, fields: list[str], name: str) -> str:
    """The raw value of an optional column, '' when the column is absent."""
    pos = src.index.get(name)
    return "" if pos is None or not fields[pos] else _check_plain(fields[pos], name)


def _parse_canonical(src: _Source, known_models: set[str] | None, dropped: dict) -> _Rows:
    """Adapter for the canonical format (see the module docstring)."""
    ix = src.index
    seen = _Seen()
    for line, f in src.rows:
        try:
            job_id = _text(f[ix["job_id"]], "job_id")
            seen.check(job_id, line)
            submit = _seconds(f[ix["submit_time"]], "submit_time")
            num_gpus = _int(f[ix["num_gpus"]], "num_gpus", 1)
            duration = _positive(f[ix["duration"]], "duration", MAX_TRACE_SECONDS)
            model = _optional(src, f, "model") or None
            if model is not None:
                _check_model(model, known_models)
            raw_ps = _optional(src, f, "num_ps")
            num_ps = _int(raw_ps, "num_ps", 0) if raw_ps else None
            raw_it = _optional(src, f, "iterations")
            iterations = _positive(raw_it, "iterations", MAX_ITERATIONS) if raw_it else None
            vc = _optional(src, f, "vc") or None
        except _RowError as err:
            raise src.error(line, err) from None
        yield (
            submit,
            {
                "job_id": job_id,
                "num_gpus": num_gpus,
                "duration": duration,
                "model": model,
                "num_ps": num_ps,
                "iterations": iterations,
                "vc": vc,
                "line": line,
            },
        )


def _philly_seconds(value: str, day_cache: dict[str, float]) -> float:
    """``YYYY-MM-DD HH:MM:SS`` (UTC) -> seconds since 1970-01-01."""
    if not _PHILLY_TS_RE.fullmatch(value):
        raise _RowError("timestamp", f"not a 'YYYY-MM-DD HH:MM:SS' time: '{_shown(value)}'")
    day = value[:10]
    base = day_cache.get(day)
    if base is None:
        try:
            base = float((date.fromisoformat(day) - _EPOCH).days * 86400)
        except ValueError:
            raise _RowError("timestamp", f"not a valid date: '{value}'") from None
        day_cache[day] = base
    hour, minute, second = int(value[11:13]), int(value[14:16]), int(value[17:19])
    if hour > 23 or minute > 59 or second > 59:
        raise _RowError("timestamp", f"not a valid time of day: '{value}'")
    return base + hour * 3600 + minute * 60 + second


def philly_timestamp(value: str) -> float:
    """Seconds since 1970-01-01 UTC of a Philly ``YYYY-MM-DD HH:MM:SS`` timestamp."""
    try:
        return _philly_seconds(value, {})
    except _RowError as err:
        raise InputError(str(err)) from None


def _parse_philly(src: _Source, known_models: set[str] | None, dropped: dict) -> _Rows:
    """Adapter for the Philly export (see the module docstring)."""
    i_ts, i_dur = src.index["timestamp"], src.index["duration"]
    i_gpu, i_vc = src.index["num_gpus"], src.index["cluster"]
    seen = _Seen()
    day_cache: dict[str, float] = {}
    for line, f in src.rows:
        if not seen.add("\0".join(f), line):  # NUL never occurs in a field (csv refuses it)
            dropped["duplicate_rows"] += 1
            continue
        try:
            submit = _philly_seconds(f[i_ts], day_cache)
            duration = _positive(f[i_dur], "duration", MAX_TRACE_SECONDS)
            num_gpus = _int(f[i_gpu], "num_gpus", 1)
            vc = _check_plain(f[i_vc], "cluster") or None
        except _RowError as err:
            raise src.error(line, err) from None
        yield (
            submit,
            {
                "job_id": f"philly-{line}",
                "num_gpus": num_gpus,
                "duration": duration,
                "vc": vc,
                "line": line,
            },
        )


def _parse_alibaba(src: _Source, known_models: set[str] | None, dropped: dict) -> _Rows:
    """Adapter for the Alibaba openb pod list (see the module docstring)."""
    ix = src.index
    seen = _Seen("name")
    for line, f in src.rows:
        try:
            name = _text(f[ix["name"]], "name")
            num_gpu = _int(f[ix["num_gpu"]], "num_gpu", 0)
            gpu_milli = _int(f[ix["gpu_milli"]], "gpu_milli", 0, 1000)
            created = _seconds(f[ix["creation_time"]], "creation_time")
            deleted = _seconds(f[ix["deletion_time"]], "deletion_time")
            raw_sched = f[ix["scheduled_time"]]
            scheduled = _seconds(raw_sched, "scheduled_time") if raw_sched else None
            seen.check(name, line)
            if scheduled is not None and deleted - scheduled > MAX_TRACE_SECONDS:
                raise _RowError(
                    "deletion_time",
                    f"run time deletion_time - scheduled_time must be <= "
                    f"{MAX_TRACE_SECONDS:g} s, got {deleted - scheduled:g}",
                )
        except _RowError as err:
            raise src.error(line, err) from None
        if num_gpu == 0 and gpu_milli == 0:
            dropped["cpu_only_pods"] += 1
        elif scheduled is None:
            dropped["pending_pods"] += 1
        elif deleted - scheduled <= 0:
            dropped["nonpositive_duration"] += 1
        else:
            yield (
                created,
                {
                    "job_id": name,
                    "num_gpus": max(num_gpu, 1),
                    "duration": deleted - scheduled,
                    "line": line,
                },
            )


def _parse_pollux(src: _Source, known_models: set[str] | None, dropped: dict) -> _Rows:
    """Adapter for Pollux-schema workloads (see the module docstring)."""
    ix = src.index
    seen = _Seen("name")
    for line, f in src.rows:
        try:
            name = _text(f[ix["name"]], "name")
            seen.check(name, line)
            submit = _seconds(f[ix["time"]], "time")
            model = _text(f[ix["application"]], "application")
            _check_model(model, known_models, "application")
            if model not in POLLUX_MAX_EPOCHS:
                known = ", ".join(pollux_applications())
                raise _RowError(
                    "application", f"no length profile for {_shown(model)!r} (known: {known})"
                )
            num_gpus = _int(f[ix["num_replicas"]], "num_replicas", 1)
            batch_size = _int(f[ix["batch_size"]], "batch_size", 1)
            iterations = pollux_iterations(model, batch_size)
            duration = iterations * CATALOGUE[model].compute_s
            if not (0 < iterations <= MAX_ITERATIONS and duration <= MAX_TRACE_SECONDS):
                raise _RowError(
                    "batch_size",
                    f"{batch_size} gives {iterations:g} iterations ({duration:g} s), beyond "
                    f"the bounds ({MAX_ITERATIONS:g} iterations, {MAX_TRACE_SECONDS:g} s)",
                )
        except _RowError as err:
            raise src.error(line, err) from None
        yield (
            submit,
            {
                "job_id": name,
                "num_gpus": num_gpus,
                "model": model,
                "iterations": iterations,
                "duration": duration,
                "line": line,
            },
        )


_ADAPTERS = {
    "canonical": _parse_canonical,
    "philly": _parse_philly,
    "alibaba": _parse_alibaba,
    "pollux": _parse_pollux,
}

#: the rows each format drops by a documented rule (counted in ``Trace.dropped``)
_DROP_RULES: dict[str, tuple[str, ...]] = {
    "canonical": (),
    "philly": ("duplicate_rows",),
    "alibaba": ("cpu_only_pods", "pending_pods", "nonpositive_duration"),
    "pollux": (),
}


# -------------------------------------------------------------------------- public API


def detect_format(path: str | os.PathLike) -> str:
    """The trace format of ``path``, from its header line (only that line is read).

    The first format of :data:`TRACE_FORMATS` whose required columns all appear in
    the header wins. InputError when the file cannot be read or no format matches.
    """
    with _open_source(path) as src:
        fmt = _detect(src.header)
        if fmt is None:
            raise _unknown_format(src)
    return fmt


def _unknown_format(src: _Source) -> InputError:
    return InputError(
        f"{src.path}:1: header: unknown trace format (columns: "
        f"{_shown(', '.join(src.header), 200)}; expected one of: {', '.join(TRACE_FORMATS)})"
    )


def _number_text(value: object) -> str:
    """``value`` for an argument error message: -1, 0.5, 'x'."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value) if isinstance(value, str) else str(value)


def _check_arguments(fmt: str | None, start: int, max_jobs: int | None, load: float) -> None:
    """InputError for a bad ``load_trace`` argument, named like its CLI flag."""
    if fmt is not None and fmt not in TRACE_FORMATS:
        raise InputError(
            f"--format: must be one of {', '.join(TRACE_FORMATS)}, got {_number_text(fmt)}"
        )
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise InputError(f"--start: must be an integer >= 0, got {_number_text(start)}")
    if max_jobs is not None and (
        isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1
    ):
        raise InputError(f"--max-jobs: must be an integer >= 1, got {_number_text(max_jobs)}")
    if isinstance(load, bool) or not isinstance(load, (int, float)):
        raise InputError(f"--load: must be a number > 0, got {_number_text(load)}")
    if not math.isfinite(load) or load <= 0:
        raise InputError(f"--load: must be > 0, got {_number_text(load)}")
    lo, hi = LOAD_RANGE
    if not lo <= load <= hi:
        raise InputError(f"--load: must be in [{lo:g}, {hi:g}], got {_number_text(load)}")


def _first_jobs(rows: _Rows, keep: int | None) -> tuple[list[tuple[float, dict]], int]:
    """The ``keep`` jobs (None = all) that come first in submit order (a stable sort:
    ties keep file order), sorted, and how many jobs ``rows`` gave in all.

    Only those ``keep`` jobs are held while the file streams by (a bounded heap), so
    a window of 5 jobs of a 60 MB trace holds 5 jobs, not the file.
    """
    if keep is None:
        everything = list(rows)
        # sorted() is stable: equal submit times keep file order
        return sorted(everything, key=lambda item: item[0]), len(everything)
    heap: list[tuple[float, int, dict]] = []  # the kept jobs as (-submit, -position, job)
    n = 0
    for n, (submit, job) in enumerate(rows, start=1):
        item = (-submit, -n, job)
        if len(heap) < keep:
            heapq.heappush(heap, item)
        elif item > heap[0]:  # earlier (submit, position) than the latest kept job
            heapq.heapreplace(heap, item)
    heap.sort(reverse=True)
    return [(-neg_submit, job) for neg_submit, _, job in heap], n


#: formats whose jobs train by ring all-reduce, not with parameter servers: their
#: rows get ``num_ps = 0`` (Pollux's and Sia's jobs are PyTorch all-reduce jobs)
ALL_REDUCE_FORMATS = frozenset({"pollux"})


def load_trace(
    path: str | os.PathLike,
    fmt: str | None = None,
    *,
    start: int = 0,
    max_jobs: int | None = None,
    load: float = 1.0,
    known_models: set[str] | None = None,
    seed: int = 0,
) -> Trace:
    """Load, validate and window a trace file.

    The file is streamed: every row is read and validated, but only the jobs that
    can still fall in the window (the first ``start + max_jobs`` in submit order) are
    kept, so memory follows the window, not the file.

    Args:
        path: CSV file; messages show it as given.
        fmt: one of :data:`TRACE_FORMATS`; None = :func:`detect_format`.
        start: jobs (in submit order) to skip, >= 0.
        max_jobs: jobs to keep after ``start`` (None = all), >= 1.
        load: arrival-rate factor, > 0; rebased submit times are divided by it
            (load 2 = jobs arrive twice as fast).
        known_models: when given, every model the trace names must be in it.
        seed: kept for callers; no format draws anything from it any more.

    Returns:
        The window, sorted by submit time (stable), the first job at 0.0.

    Raises:
        InputError: unreadable file, bad header or row, bad argument, empty window.
    """
    _check_arguments(fmt, start, max_jobs, load)
    shown = os.fspath(path)
    with _open_source(path) as src:
        if fmt is None:
            fmt = _detect(src.header)
            if fmt is None:
                raise _unknown_format(src)
        _check_header(src, fmt)
        dropped = dict.fromkeys(_DROP_RULES[fmt], 0)
        rows = _ADAPTERS[fmt](src, known_models, dropped)
        first, n = _first_jobs(rows, None if max_jobs is None else start + max_jobs)
    if not n:
        drops = ", ".join(f"{k}: {v}" for k, v in dropped.items() if v)
        detail = f" (dropped {drops})" if drops else ""
        raise InputError(f"{shown}: trace has no jobs{detail}")
    kept = first[start:]
    if not kept:
        raise InputError(
            f"{shown}: window is empty: --start {start} skips all {n} jobs of the trace"
        )
    origin = kept[0][0]
    all_reduce = fmt in ALL_REDUCE_FORMATS
    jobs = tuple(
        TraceJob(
            submit_time=(submit - origin) / load, **({**job, "num_ps": 0} if all_reduce else job)
        )
        for submit, job in kept
    )
    if jobs and not math.isfinite(jobs[-1].submit_time):
        raise InputError(
            f"--load: {_number_text(load)} puts the window's submit times out of range "
            f"({shown}: the last job would arrive at {jobs[-1].submit_time!r} s)"
        )
    return Trace(path=shown, format=fmt, jobs=jobs, dropped=dropped, origin=origin)


#: the random stream of :func:`jitter_arrivals`, apart from the seed's other uses
ARRIVAL_STREAM = 0xA771


def jitter_arrivals(jobs: Sequence[TraceJob], jitter: float, seed: int) -> tuple[TraceJob, ...]:
    """``jobs`` (in submit order) with every inter-arrival gap multiplied by a draw
    from Uniform(1 - ``jitter``, 1 + ``jitter``) (seeded by ``seed``): the order and,
    in expectation, the arrival rate are kept; the first job stays at its time."""
    if jitter == 0 or len(jobs) < 2:
        return tuple(jobs)
    rng = random.Random(f"{seed}:{ARRIVAL_STREAM}")  # str seeds are stable across runs
    out = [jobs[0]]
    t = jobs[0].submit_time
    for prev, job in itertools.pairwise(jobs):
        t += (job.submit_time - prev.submit_time) * rng.uniform(1 - jitter, 1 + jitter)
        out.append(dataclasses.replace(job, submit_time=t))
    return tuple(out)


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


# ---------------------------------------------------------------------------- summary


def _gpu_histogram(jobs: Sequence[TraceJob]) -> dict[str, int]:
    """Jobs per GPU-count bucket (every bucket present, zeros included)."""
    counts = dict.fromkeys((label for label, _, _ in _GPU_BUCKETS), 0)
    for job in jobs:
        for label, low, high in _GPU_BUCKETS:
            if low <= job.num_gpus <= high:
                counts[label] += 1
                break
    return counts


def summarize(trace: Trace, n_gpus: int | None = None) -> dict:
    """Headline figures of a trace window.

    Keys: path, format, jobs, first_submit_s, last_submit_s, span_s (last - first),
    gpu_histogram (bucket -> jobs; buckets 1, 2, 3-4, 5-8, 9-16, 17-32, 33-64, 65+),
    total_gpu_seconds (sum of num_gpus x duration), median_duration_s,
    p95_duration_s (numpy linear percentile; None without jobs), n_gpus,
    offered_load (total_gpu_seconds / (n_gpus x span_s); None without n_gpus or when
    the span is 0), dropped.
    """
    if n_gpus is not None and (isinstance(n_gpus, bool) or not isinstance(n_gpus, int)):
        raise InputError(f"--gpus: must be an integer >= 1, got {_number_text(n_gpus)}")
    if n_gpus is not None and n_gpus < 1:
        raise InputError(f"--gpus: must be >= 1, got {n_gpus}")
    jobs = trace.jobs
    submits = [job.submit_time for job in jobs]
    durations = np.asarray([job.duration for job in jobs], dtype=float)
    first = min(submits) if submits else 0.0
    last = max(submits) if submits else 0.0
    span = last - first
    total = float(sum(job.num_gpus * job.duration for job in jobs))
    offered = total / (n_gpus * span) if n_gpus is not None and span > 0 else None
    return {
        "path": trace.path,
        "format": trace.format,
        "jobs": len(jobs),
        "first_submit_s": first,
        "last_submit_s": last,
        "span_s": span,
        "gpu_histogram": _gpu_histogram(jobs),
        "total_gpu_seconds": total,
        "median_duration_s": float(np.median(durations)) if len(jobs) else None,
        "p95_duration_s": float(np.percentile(durations, 95)) if len(jobs) else None,
        "n_gpus": n_gpus,
        "offered_load": offered,
        "dropped": dict(trace.dropped),
    }


def _fmt_value(value: object) -> str:
    """A summary figure as text."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def format_summary(summary: dict) -> str:
    """A human-readable, multi-line table of a :func:`summarize` result."""
    rows: list[tuple[str, str]] = [
        ("trace", f"{summary['path']} ({summary['format']})"),
        ("jobs", _fmt_value(summary["jobs"])),
        ("first submit (s)", _fmt_value(summary["first_submit_s"])),
        ("last submit (s)", _fmt_value(summary["last_submit_s"])),
        ("span (s)", _fmt_value(summary["span_s"])),
        ("span (h)", _fmt_value(summary["span_s"] / 3600.0)),
        ("total GPU-seconds", _fmt_value(summary["total_gpu_seconds"])),
        ("median duration (s)", _fmt_value(summary["median_duration_s"])),
        ("p95 duration (s)", _fmt_value(summary["p95_duration_s"])),
    ]
    if summary.get("n_gpus") is not None:
        rows.append(
            (f"offered load ({summary['n_gpus']} GPUs)", _fmt_value(summary["offered_load"]))
        )
    jobs = summary["jobs"] or 1
    for label, count in summary["gpu_histogram"].items():
        share = 100.0 * count / jobs
        rows.append((f"jobs with {label} GPU(s)", f"{count:,} ({share:.1f}%)"))
    dropped = summary["dropped"]
    if dropped:
        for reason, count in dropped.items():
            rows.append((f"dropped: {reason}", f"{count:,}"))
    else:
        rows.append(("dropped", "none"))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in rows)
