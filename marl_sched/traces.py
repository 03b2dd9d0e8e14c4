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
import io
import math
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

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

_INT_RE = re.compile(r"[+-]?\d+")
_FLOAT_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_PHILLY_TS_RE = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")
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


@dataclass
class _Source:
    """A trace file read into memory: header and data rows."""

    path: str
    text: str
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
        reader = csv.reader(io.StringIO(self.text, newline=""))
        next(reader)
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


@dataclass
class _Parsed:
    """What an adapter returns: jobs in file order plus drop counts."""

    submits: list[float]  # absolute submit time of each job
    jobs: list[dict]  # TraceJob keyword arguments except submit_time
    dropped: dict[str, int]


def _read_text(path: str | os.PathLike) -> str:
    """The whole file as text, or InputError ``<path>: cannot read trace: <reason>``."""
    from marl_sched.files import read_input

    data = read_input(path, "trace")
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = skip + exc.start
        line = data.count(b"\n", 0, offset) + 1
        reason = f"line {line} is not valid UTF-8 (byte 0x{data[offset]:02x} at offset {offset})"
        raise InputError(f"{path}: cannot read trace: {reason}") from None


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


def _read_header(path: str, text: str) -> list[str]:
    """The header fields of ``text`` (line 1)."""
    first = next(_csv_rows(csv.reader(io.StringIO(text, newline="")), path), None)
    if first is None:
        raise InputError(f"{path}:1: header: file is empty, expected a header line")
    if not first:
        raise InputError(f"{path}:1: header: line is blank, expected a header line")
    return first


def _read_source(path: str, text: str) -> _Source:
    """The file's header and (lazily) its data rows."""
    return _Source(path=path, text=text, header=_read_header(path, text))


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
            raise InputError(f"{src.path}:1: header: duplicate column '{name}'")
        src.index[name] = pos
    for col in _REQUIRED_COLUMNS[fmt]:
        if col not in src.index:
            raise InputError(f"{src.path}:1: header: missing required column '{col}'")
    if fmt == "canonical":
        allowed = CANONICAL_COLUMNS + OPTIONAL_COLUMNS
        for name in src.header:
            if name not in allowed:
                raise InputError(
                    f"{src.path}:1: header: unknown column '{name}' (allowed: {', '.join(allowed)})"
                )


def _text(value: str, name: str) -> str:
    """A required non-empty string field."""
    if value == "":
        raise _RowError(name, "missing value")
    return value


def _int(value: str, name: str, low: int) -> int:
    """A required integer field that must be >= ``low``."""
    if value == "":
        raise _RowError(name, "missing value")
    if not _INT_RE.fullmatch(value):
        raise _RowError(name, f"not an integer: '{value}'")
    number = int(value)
    if number < low:
        raise _RowError(name, f"must be >= {low}, got {value}")
    return number


def _float(value: str, name: str) -> float:
    """A required finite number."""
    if value == "":
        raise _RowError(name, "missing value")
    if not _FLOAT_RE.fullmatch(value):
        try:
            float(value)
        except ValueError:
            raise _RowError(name, f"not a number: '{value}'") from None
        raise _RowError(name, f"must be a finite number, got '{value}'")
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
#: its resolution and a JCT overflows to inf or NaN
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
        raise _RowError(column, f"unknown model '{model}' (known: {known})")


def _check_unique(job_id: str, line: int, seen: dict[str, int], name: str = "job_id") -> None:
    """Error (on column ``name``) when ``job_id`` was already used on an earlier line."""
    first = seen.setdefault(job_id, line)
    if first != line:
        raise _RowError(name, f"duplicate of line {first}")


# ---------------------------------------------------------------------------- adapters


def _optional(src: _Source, fields: list[str], name: str) -> str:
    """The raw value of an optional column, '' when the column is absent."""
    pos = src.index.get(name)
    return "" if pos is None else fields[pos]


def _parse_canonical(src: _Source, known_models: set[str] | None, seed: int) -> _Parsed:
    """Adapter for the canonical format (see the module docstring)."""
    out = _Parsed([], [], {})
    ix = src.index
    seen: dict[str, int] = {}
    for line, f in src.rows:
        try:
            job_id = _text(f[ix["job_id"]], "job_id")
            _check_unique(job_id, line, seen)
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
        out.submits.append(submit)
        out.jobs.append(
            {
                "job_id": job_id,
                "num_gpus": num_gpus,
                "duration": duration,
                "model": model,
                "num_ps": num_ps,
                "iterations": iterations,
                "vc": vc,
                "line": line,
            }
        )
    return out


def _philly_seconds(value: str, day_cache: dict[str, float]) -> float:
    """``YYYY-MM-DD HH:MM:SS`` (UTC) -> seconds since 1970-01-01."""
    if not _PHILLY_TS_RE.fullmatch(value):
        raise _RowError("timestamp", f"not a 'YYYY-MM-DD HH:MM:SS' time: '{value}'")
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


def _parse_philly(src: _Source, known_models: set[str] | None, seed: int) -> _Parsed:
    """Adapter for the Philly export (see the module docstring)."""
    out = _Parsed([], [], {"duplicate_rows": 0})
    i_ts, i_dur = src.index["timestamp"], src.index["duration"]
    i_gpu, i_vc = src.index["num_gpus"], src.index["cluster"]
    seen: set[tuple[str, ...]] = set()
    day_cache: dict[str, float] = {}
    for line, f in src.rows:
        key = tuple(f)
        if key in seen:
            out.dropped["duplicate_rows"] += 1
            continue
        seen.add(key)
        try:
            submit = _philly_seconds(f[i_ts], day_cache)
            duration = _positive(f[i_dur], "duration", MAX_TRACE_SECONDS)
            num_gpus = _int(f[i_gpu], "num_gpus", 1)
        except _RowError as err:
            raise src.error(line, err) from None
        out.submits.append(submit)
        out.jobs.append(
            {
                "job_id": f"philly-{line}",
                "num_gpus": num_gpus,
                "duration": duration,
                "vc": f[i_vc] or None,
                "line": line,
            }
        )
    return out


def _parse_alibaba(src: _Source, known_models: set[str] | None, seed: int) -> _Parsed:
    """Adapter for the Alibaba openb pod list (see the module docstring)."""
    dropped = {"cpu_only_pods": 0, "pending_pods": 0, "nonpositive_duration": 0}
    out = _Parsed([], [], dropped)
    ix = src.index
    seen: dict[str, int] = {}
    for line, f in src.rows:
        try:
            name = _text(f[ix["name"]], "name")
            num_gpu = _int(f[ix["num_gpu"]], "num_gpu", 0)
            gpu_milli = _int(f[ix["gpu_milli"]], "gpu_milli", 0)
            if gpu_milli > 1000:
                raise _RowError("gpu_milli", f"must be <= 1000, got {f[ix['gpu_milli']]}")
            created = _seconds(f[ix["creation_time"]], "creation_time")
            deleted = _seconds(f[ix["deletion_time"]], "deletion_time")
            raw_sched = f[ix["scheduled_time"]]
            scheduled = _seconds(raw_sched, "scheduled_time") if raw_sched else None
            _check_unique(name, line, seen, "name")
        except _RowError as err:
            raise src.error(line, err) from None
        if num_gpu == 0 and gpu_milli == 0:
            dropped["cpu_only_pods"] += 1
        elif scheduled is None:
            dropped["pending_pods"] += 1
        elif deleted - scheduled <= 0:
            dropped["nonpositive_duration"] += 1
        else:
            out.submits.append(created)
            out.jobs.append(
                {
                    "job_id": name,
                    "num_gpus": max(num_gpu, 1),
                    "duration": deleted - scheduled,
                    "line": line,
                }
            )
    return out


def _parse_pollux(src: _Source, known_models: set[str] | None, seed: int) -> _Parsed:
    """Adapter for Pollux-schema workloads (see the module docstring); ``seed`` unused."""
    out = _Parsed([], [], {})
    ix = src.index
    seen: dict[str, int] = {}
    batch_sizes: list[int] = []
    for line, f in src.rows:
        try:
            name = _text(f[ix["name"]], "name")
            _check_unique(name, line, seen, "name")
            submit = _seconds(f[ix["time"]], "time")
            model = _text(f[ix["application"]], "application")
            _check_model(model, known_models, "application")
            if model not in POLLUX_MAX_EPOCHS:
                known = ", ".join(pollux_applications())
                raise _RowError("application", f"no length profile for {model!r} (known: {known})")
            num_gpus = _int(f[ix["num_replicas"]], "num_replicas", 1)
            batch_sizes.append(_int(f[ix["batch_size"]], "batch_size", 1))
        except _RowError as err:
            raise src.error(line, err) from None
        out.submits.append(submit)
        out.jobs.append({"job_id": name, "num_gpus": num_gpus, "model": model, "line": line})
    for job, batch_size in zip(out.jobs, batch_sizes, strict=True):
        job["iterations"] = pollux_iterations(job["model"], batch_size)
        job["duration"] = job["iterations"] * CATALOGUE[job["model"]].compute_s
    return out


_ADAPTERS = {
    "canonical": _parse_canonical,
    "philly": _parse_philly,
    "alibaba": _parse_alibaba,
    "pollux": _parse_pollux,
}


# -------------------------------------------------------------------------- public API


def detect_format(path: str | os.PathLike) -> str:
    """The trace format of ``path``, from its header line.

    The first format of :data:`TRACE_FORMATS` whose required columns all appear in
    the header wins. InputError when the file cannot be read or no format matches.
    """
    shown = os.fspath(path)
    header = _read_header(shown, _read_text(path))
    fmt = _detect(header)
    if fmt is None:
        raise InputError(
            f"{shown}:1: header: unknown trace format (columns: {', '.join(header)}; "
            f"expected one of: {', '.join(TRACE_FORMATS)})"
        )
    return fmt


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


def _window(path: str, parsed: _Parsed, start: int, max_jobs: int | None) -> list[int]:
    """Indices (into ``parsed``) of the window, in submit order; InputError if empty."""
    order = sorted(range(len(parsed.submits)), key=parsed.submits.__getitem__)
    if not order:
        drops = ", ".join(f"{k}: {v}" for k, v in parsed.dropped.items() if v)
        detail = f" (dropped {drops})" if drops else ""
        raise InputError(f"{path}: trace has no jobs{detail}")
    end = None if max_jobs is None else start + max_jobs
    kept = order[start:end]
    if not kept:
        raise InputError(
            f"{path}: window is empty: --start {start} skips all {len(order)} jobs of the trace"
        )
    return kept


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
    src = _read_source(shown, _read_text(path))
    if fmt is None:
        fmt = _detect(src.header)
        if fmt is None:
            raise InputError(
                f"{shown}:1: header: unknown trace format (columns: {', '.join(src.header)}; "
                f"expected one of: {', '.join(TRACE_FORMATS)})"
            )
    _check_header(src, fmt)
    parsed = _ADAPTERS[fmt](src, known_models, seed)
    if fmt in ALL_REDUCE_FORMATS:
        for job in parsed.jobs:
            job["num_ps"] = 0
    kept = _window(shown, parsed, start, max_jobs)
    origin = parsed.submits[kept[0]]
    jobs = tuple(
        TraceJob(submit_time=(parsed.submits[i] - origin) / load, **parsed.jobs[i]) for i in kept
    )
    if jobs and not math.isfinite(jobs[-1].submit_time):
        raise InputError(
            f"--load: {_number_text(load)} puts the window's submit times out of range "
            f"({shown}: the last job would arrive at {jobs[-1].submit_time!r} s)"
        )
    return Trace(path=shown, format=fmt, jobs=jobs, dropped=parsed.dropped, origin=origin)


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
        raise InputError(f"n_gpus: must be an integer >= 1, got {_number_text(n_gpus)}")
    if n_gpus is not None and n_gpus < 1:
        raise InputError(f"n_gpus: must be >= 1, got {n_gpus}")
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
