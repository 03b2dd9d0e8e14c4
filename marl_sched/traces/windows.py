"""Loading a trace window (:func:`load_trace`) and jittering its arrivals."""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass

from marl_sched.config import LOAD_RANGE
from marl_sched.errors import InputError
from marl_sched.traces.checks import _number_text
from marl_sched.traces.formats import (
    _ADAPTERS,
    _DROP_RULES,
    ALL_REDUCE_FORMATS,
    TRACE_FORMATS,
    _check_header,
    _detect,
    _unknown_format,
)
from marl_sched.traces.records import Trace, TraceJob
from marl_sched.traces.source import _open_source, _Rows


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
    """The first ``keep`` jobs (None = all) in submit order (stable), held in a bounded
    heap while the file streams, and how many jobs ``rows`` gave."""
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
    """Load, validate and window a trace file, streamed (memory follows the window).

    Args:
        path: CSV file; messages show it as given.
        fmt: one of :data:`TRACE_FORMATS`; None = :func:`detect_format`.
        start: jobs (in submit order) to skip, >= 0.
        max_jobs: jobs to keep after ``start`` (None = all), >= 1.
        load: arrival-rate factor, > 0 (rebased submit times are divided by it).
        known_models: when given, every model the trace names must be in it.
        seed: unused, kept for callers.

    Returns:
        The window, sorted by submit time (stable), the first job at 0.0.

    Raises:
        InputError: unreadable file, bad header or row, bad argument, empty window.
    """
    _check_arguments(fmt, start, max_jobs, load)
    keep = None if max_jobs is None else start + max_jobs
    fmt, first, n, dropped = _read(path, fmt, known_models, keep)
    return _window(os.fspath(path), fmt, first, n, dropped, start, load)


def _read(
    path: str | os.PathLike, fmt: str | None, known_models: set[str] | None, keep: int | None
) -> tuple[str, list[tuple[float, dict]], int, dict[str, int]]:
    """The format, the first ``keep`` rows in submit order (:func:`_first_jobs`), how
    many rows the file gave and the drop counts of the trace at ``path``."""
    with _open_source(path) as src:
        if fmt is None:
            fmt = _detect(src.header)
            if fmt is None:
                raise _unknown_format(src)
        _check_header(src, fmt)
        dropped = dict.fromkeys(_DROP_RULES[fmt], 0)
        rows = _ADAPTERS[fmt](src, known_models, dropped)
        first, n = _first_jobs(rows, keep)
    return fmt, first, n, dropped


def _window(
    shown: str,
    fmt: str,
    first: Sequence[tuple[float, dict]],
    n: int,
    dropped: dict[str, int],
    start: int,
    load: float,
) -> Trace:
    """The window ``first[start:]`` of a trace of ``n`` rows, rebased and loaded."""
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


@dataclass(frozen=True)
class TraceRows:
    """Every job of a trace file, validated and in submit order, not yet windowed
    (:func:`read_rows`; :func:`window_of` cuts windows equal to :func:`load_trace`'s).

    Attributes:
        path: the path as given to :func:`read_rows`.
        format: one of :data:`TRACE_FORMATS`.
        rows: (absolute submit time, TraceJob keyword arguments) of every job.
        dropped: reason -> rows of the file dropped by a documented rule.
    """

    path: str
    format: str
    rows: tuple[tuple[float, dict], ...]
    dropped: dict[str, int]


def read_rows(
    path: str | os.PathLike, fmt: str | None = None, *, known_models: set[str] | None = None
) -> TraceRows:
    """Every job of the trace at ``path``, for :func:`window_of` (arguments and
    errors as :func:`load_trace`'s)."""
    _check_arguments(fmt, 0, None, 1.0)
    fmt, first, _, dropped = _read(path, fmt, known_models, None)
    return TraceRows(path=os.fspath(path), format=fmt, rows=tuple(first), dropped=dropped)


def window_of(
    rows: TraceRows, *, start: int = 0, max_jobs: int | None = None, load: float = 1.0
) -> Trace:
    """The window of ``rows`` that ``load_trace(rows.path, start=start,
    max_jobs=max_jobs, load=load)`` returns, without reading the file again."""
    _check_arguments(rows.format, start, max_jobs, load)
    end = None if max_jobs is None else start + max_jobs
    first = rows.rows[:end]
    return _window(rows.path, rows.format, first, len(rows.rows), dict(rows.dropped), start, load)


#: the random stream of :func:`jitter_arrivals`, apart from the seed's other uses
ARRIVAL_STREAM = 0xA771


def jitter_arrivals(jobs: Sequence[TraceJob], jitter: float, seed: int) -> tuple[TraceJob, ...]:
    """``jobs`` with every inter-arrival gap multiplied by Uniform(1 - ``jitter``,
    1 + ``jitter``) (seeded); the first job keeps its time."""
    if jitter == 0 or len(jobs) < 2:
        return tuple(jobs)
    rng = random.Random(f"{seed}:{ARRIVAL_STREAM}")  # str seeds are stable across runs
    out = [jobs[0]]
    t = jobs[0].submit_time
    for prev, job in itertools.pairwise(jobs):
        t += (job.submit_time - prev.submit_time) * rng.uniform(1 - jitter, 1 + jitter)
        out.append(dataclasses.replace(job, submit_time=t))
    return tuple(out)
