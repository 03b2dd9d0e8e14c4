"""Job traces: loading, validation, format adapters and windows.

:func:`load_trace` reads a CSV file in one of :data:`TRACE_FORMATS`, checks every row,
and returns a :class:`Trace` sorted by submit time (stable) and rebased so the window's
first job is at 0.0 s. Every format: UTF-8 (BOM ignored) with a header on line 1; blank
lines skipped; a row must have the header's field count; the first bad row raises
:class:`~marl_sched.errors.InputError` ``<path>:<line>: <field>: <problem>``; rows are
dropped only by each format's documented rules (counted in :attr:`Trace.dropped`);
``nan``, ``inf`` and overflows are errors; ``known_models`` applies to formats that set
``model``. Formats: ``canonical``, ``philly``, ``alibaba``, ``pollux`` (one module each);
``checks``, ``source``, ``windows``, ``writer`` and ``summary`` hold the rest."""

from __future__ import annotations

from marl_sched.traces.canonical import CANONICAL_COLUMNS, OPTIONAL_COLUMNS
from marl_sched.traces.checks import (
    MAX_INT_DIGITS,
    MAX_ITERATIONS,
    MAX_LINE_BYTES,
    MAX_NUMBER_CHARS,
    MAX_TRACE_SECONDS,
)
from marl_sched.traces.formats import ALL_REDUCE_FORMATS, TRACE_FORMATS, detect_format
from marl_sched.traces.philly import philly_timestamp
from marl_sched.traces.records import Trace, TraceJob
from marl_sched.traces.summary import format_summary, summarize
from marl_sched.traces.windows import (
    ARRIVAL_STREAM,
    TraceRows,
    jitter_arrivals,
    load_trace,
    read_rows,
    window_of,
)
from marl_sched.traces.writer import write_canonical

__all__ = [
    "ALL_REDUCE_FORMATS",
    "ARRIVAL_STREAM",
    "CANONICAL_COLUMNS",
    "MAX_INT_DIGITS",
    "MAX_ITERATIONS",
    "MAX_LINE_BYTES",
    "MAX_NUMBER_CHARS",
    "MAX_TRACE_SECONDS",
    "OPTIONAL_COLUMNS",
    "TRACE_FORMATS",
    "Trace",
    "TraceJob",
    "TraceRows",
    "detect_format",
    "format_summary",
    "jitter_arrivals",
    "load_trace",
    "philly_timestamp",
    "read_rows",
    "summarize",
    "window_of",
    "write_canonical",
]
