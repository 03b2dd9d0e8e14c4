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
  Only the rules each format's module lists under "dropped" remove rows silently,
  and each one is counted in :attr:`Trace.dropped` (counts over the whole file,
  before windowing).
- Integers are plain decimal (``[+-]digits``); numbers are decimal or scientific
  notation. ``nan``, ``inf`` and values that overflow to infinity are errors.
- Jobs are sorted by submit time with a stable sort (ties keep file order), then
  windowed (``start``, ``max_jobs``), rebased to the first kept job and divided by
  ``load``.
- ``known_models`` (when given) applies to every format that sets ``model``
  (canonical and pollux): a model outside the set is an error.

Each format's columns and rules are documented in its module:
:mod:`~marl_sched.traces.canonical`, :mod:`~marl_sched.traces.philly`,
:mod:`~marl_sched.traces.alibaba` and :mod:`~marl_sched.traces.pollux` (which the
Sia workloads share). The field checks are in :mod:`~marl_sched.traces.checks`, the
file reading in :mod:`~marl_sched.traces.source`, windows in
:mod:`~marl_sched.traces.windows`, the writer in :mod:`~marl_sched.traces.writer` and
summaries in :mod:`~marl_sched.traces.summary`.
"""

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
