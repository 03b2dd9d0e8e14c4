"""The rows and windows :func:`marl_sched.traces.load_trace` returns."""

from __future__ import annotations

from dataclasses import dataclass


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
