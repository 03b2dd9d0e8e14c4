"""Headline figures of a trace window (:func:`summarize`) and their table."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from marl_sched.errors import InputError
from marl_sched.traces.checks import _number_text
from marl_sched.traces.records import Trace, TraceJob

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
