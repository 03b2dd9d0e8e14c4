"""Run metrics (``metrics.json``), per-job rows (``jobs.csv``) and atomic writes."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from marl_sched.config import ExperimentConfig
from marl_sched.errors import InputError
from marl_sched.files import WRITE_ERRNOS as _WRITE_ERRNOS
from marl_sched.files import atomic_write_text
from marl_sched.simulator import JobRecord, Simulator

# What a run's outcome is made of: metrics that depend only on the trace, the cluster
# and the decisions (not on wall-clock time), so equal drivers of equal decisions —
# reruns, a replay through the environment — must reproduce them exactly.
OUTCOME_KEYS = (
    "jobs_completed",
    "avg_jct_s",
    "p50_jct_s",
    "p95_jct_s",
    "p99_jct_s",
    "avg_queue_s",
    "avg_slowdown",
    "makespan_s",
    "gpu_utilization",
    "gpu_utilization_steady",
    "jobs_queued_frac",
    "decisions",
)

# Every metrics.json holds at least these (the design's metric set).
METRIC_KEYS = (
    "policy",
    "trace",
    "jobs_total",
    *OUTCOME_KEYS,
    "wall_s",
    "decision_ms_p50",
    "decision_ms_p99",
    "migrations",
    "migration_delay_s",
)

JOB_COLUMNS = (
    "job_id",
    "name",
    "model",
    "num_workers",
    "num_ps",
    "submit_time",
    "start_time",
    "finish_time",
    "jct_s",
    "queue_s",
    "isolated_runtime_s",
    "slowdown",
    "n_servers",
    "n_racks",
    "n_subclusters",
)


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else math.nan


def busy_gpu_seconds(records: Sequence[JobRecord], start: float, end: float) -> float:
    """GPU-seconds held by ``records`` inside ``[start, end]`` (a job holds its
    workers' GPUs from its start to its finish)."""
    total = 0.0
    for r in records:
        overlap = min(r.finish_time, end) - max(r.start_time, start)
        if overlap > 0:
            total += r.job.num_workers * overlap
    return total


def compute_metrics(
    sim: Simulator,
    *,
    policy: str,
    trace: str,
    wall_s: float,
    jobs_total: int | None = None,
    warmup: int = 0,
) -> dict[str, Any]:
    """The metrics of a finished simulation, over the jobs after the first ``warmup``
    (simulated, not scored).

    The makespan runs from the window's first submit to its last finish;
    ``gpu_utilization`` is busy GPU-seconds over it, ``gpu_utilization_steady`` over the
    window's arrival period (counting each worker, so up to k with GPU sharing);
    ``jobs_queued_frac`` the share of scored jobs that waited > 1 ms; ``migrations``,
    ``migration_delay_s`` and ``migrations_declined`` count the whole run."""
    every = sim.result()
    recs = [r for r in every if r.job.job_id >= warmup]
    scored = [j for j in sim.jobs if j.job_id >= warmup]
    jct = np.array([r.jct for r in recs])
    queue = np.array([r.queue_time for r in recs])
    slow = np.array([r.jct / r.isolated_runtime for r in recs])
    first_submit = min((j.submit_time for j in scored), default=0.0)
    last_submit = max((j.submit_time for j in scored), default=first_submit)
    last_finish = max((r.finish_time for r in recs), default=first_submit)
    makespan = last_finish - first_submit
    dec = np.array(sim.stats.decision_s) * 1e3
    n_gpus = sim.topology.n_gpus
    util = (
        busy_gpu_seconds(every, first_submit, last_finish) / (n_gpus * makespan)
        if makespan > 0
        else 0.0
    )
    period = last_submit - first_submit
    steady = (
        busy_gpu_seconds(every, first_submit, last_submit) / (n_gpus * period)
        if period > 0
        else util
    )
    return {
        "policy": policy,
        "trace": trace,
        "jobs_total": int(jobs_total if jobs_total is not None else len(scored)),
        "jobs_warmup": int(warmup),
        "jobs_completed": len(recs),
        "jobs_unplaceable": sum(1 for j in sim.unplaceable if j.job_id >= warmup),
        "avg_jct_s": float(jct.mean()) if len(jct) else math.nan,
        "p50_jct_s": _pct(jct, 50),
        "p95_jct_s": _pct(jct, 95),
        "p99_jct_s": _pct(jct, 99),
        "avg_queue_s": float(queue.mean()) if len(queue) else math.nan,
        "avg_slowdown": float(slow.mean()) if len(slow) else math.nan,
        "makespan_s": float(makespan),
        "gpu_utilization": float(util),
        "gpu_utilization_steady": float(steady),
        "jobs_queued_frac": float((queue > 1e-3).mean()) if len(queue) else math.nan,
        "wall_s": float(wall_s),
        "decisions": int(sim.stats.decisions),
        # every migration of the run, warm-up jobs' too (they share the cluster)
        "migrations": int(sim.stats.migrations),
        "migration_delay_s": float(sim.stats.migration_delay_s),
        "migrations_declined": int(sim.stats.migrations_declined),
        "decision_ms_p50": _pct(dec, 50),
        "decision_ms_p99": _pct(dec, 99),
        "events": int(sim.stats.events),
        "speed_recomputes": int(sim.stats.recomputes),
        "jobs_per_s": len(recs) / wall_s if wall_s > 0 else math.nan,
        "events_per_s": sim.stats.events / wall_s if wall_s > 0 else math.nan,
    }


def job_rows(records: Sequence[JobRecord]) -> list[dict[str, Any]]:
    rows = []
    for r in records:
        j = r.job
        rows.append(
            {
                "job_id": j.job_id,
                "name": j.name,
                "model": j.model,
                "num_workers": j.num_workers,
                "num_ps": j.num_ps,
                "submit_time": round(j.submit_time, 6),
                "start_time": round(r.start_time, 6),
                "finish_time": round(r.finish_time, 6),
                "jct_s": round(r.jct, 6),
                "queue_s": round(r.queue_time, 6),
                "isolated_runtime_s": round(r.isolated_runtime, 6),
                "slowdown": round(r.jct / r.isolated_runtime, 6),
                "n_servers": r.n_servers,
                "n_racks": r.n_racks,
                "n_subclusters": r.n_subclusters,
            }
        )
    return rows


def move_into(tmp: Path, out: Path) -> None:
    """Put ``tmp``'s entries into ``out`` (renamed whole when ``out`` is absent or
    empty; else entry by entry; a link to a folder stays a link)."""
    out = real_out(out)
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
        return
    for entry in tmp.iterdir():
        target = out / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        os.replace(entry, target)


def real_out(out: Path) -> Path:
    """``out``, or the folder it links to when it is a symbolic link (``--out`` given as
    a link to a folder: the outputs are staged beside, and moved into, that folder)."""
    return out.resolve() if out.is_symlink() else out


#: the longest file name most file systems take, in bytes
NAME_MAX = 255
_STAGING_TAG = ".tmp-"


def staging_prefix(out: Path) -> str:
    """``.NAME.tmp-``, the prefix of ``out``'s staging folders (a long ``NAME`` cut and
    digested to stay within :data:`NAME_MAX`)."""
    import hashlib

    name = out.name
    room = NAME_MAX - len(f".{_STAGING_TAG}") - 10  # the PID: up to 10 digits
    if len(name.encode()) > room:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        cut = name.encode("utf-8", "surrogatepass")[: room - 13].decode("utf-8", "ignore")
        name = f"{cut}-{digest}"
    return f".{name}{_STAGING_TAG}"


def remove_stale_staging(out: Path) -> list[Path]:
    """Remove ``out``'s staging folders (``.NAME.tmp-PID``) whose process no longer
    runs; returns what was removed."""
    parent, prefix = out.parent, staging_prefix(out)
    removed = []
    try:
        entries = list(parent.iterdir()) if parent.is_dir() else []
    except OSError:
        return removed
    for entry in entries:
        pid = entry.name[len(prefix) :] if entry.name.startswith(prefix) else ""
        if not pid.isdigit() or not pid.isascii() or int(pid) == os.getpid():
            continue
        if entry.is_symlink() or not entry.is_dir() or _running(int(pid)):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process, or not a PID: leave it
    return True


@contextmanager
def staged_folder(out: str | Path) -> Iterator[Path]:
    """A temporary folder beside ``out`` for a command's outputs, moved into ``out``
    when the block ends normally (:func:`move_into`) and removed otherwise; stale staging
    folders go first. An unwritable ``out`` is an ``InputError`` naming ``--out``."""
    shown = Path(out)
    out = real_out(shown)
    remove_stale_staging(out)
    tmp = out.parent / f"{staging_prefix(out)}{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)

    def unwritable(exc: OSError) -> InputError:
        return InputError(f"--out: {shown}: cannot write there: {exc.strerror or exc}")

    try:
        tmp.mkdir(parents=True)
    except OSError as exc:
        raise unwritable(exc) from None
    try:
        try:
            yield tmp
        except OSError as exc:  # a full disk or a quota while writing the outputs
            inside = exc.filename is not None and Path(exc.filename).is_relative_to(tmp)
            if exc.errno in _WRITE_ERRNOS or inside:
                raise unwritable(exc) from None
            raise
        try:
            move_into(tmp, out)
        except OSError as exc:
            raise unwritable(exc) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def write_json(path: str | Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(_json_safe(data), indent=2, sort_keys=False) + "\n")


def csv_text(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: row.get(k, "") for k in columns})
    return buf.getvalue()


def write_report(
    out_dir: str | Path, stem: str, table: str, rows: Sequence[dict[str, Any]], columns
) -> None:
    """An experiment's report: ``<stem>.md`` (``table``) and ``<stem>.csv`` (``rows``
    by ``columns``) in ``out_dir``, each written atomically."""
    out = Path(out_dir)
    atomic_write_text(out / f"{stem}.md", table)
    atomic_write_text(out / f"{stem}.csv", csv_text(rows, columns))


def write_run(
    out_dir: str | Path,
    metrics: dict[str, Any],
    records: Sequence[JobRecord],
    config: ExperimentConfig | None = None,
) -> None:
    """Write ``metrics.json`` and ``jobs.csv`` (scored jobs only; each atomically), and
    ``config.yaml`` when ``config`` is given."""
    out = Path(out_dir)
    if config is not None:
        atomic_write_text(out / "config.yaml", config.to_yaml())
    warmup = metrics.get("jobs_warmup", 0)
    records = [r for r in records if r.job.job_id >= warmup]
    write_json(out / "metrics.json", metrics)
    atomic_write_text(out / "jobs.csv", csv_text(job_rows(records), JOB_COLUMNS))
