"""The Alibaba trace format (cluster-trace-gpu-v2023's ``openb_pod_list_default.csv``).

Columns read: ``name, num_gpu, gpu_milli, creation_time, deletion_time,
scheduled_time`` (s from the trace start); others ignored. num_gpu an integer >= 0,
gpu_milli an integer in [0, 1000], creation_time and deletion_time required.

- Dropped, first match wins: 1. dropped["cpu_only_pods"]: num_gpu == 0 and
  gpu_milli == 0; 2. dropped["pending_pods"]: scheduled_time empty;
  3. dropped["nonpositive_duration"]: deletion_time - scheduled_time <= 0.
- A fractional-GPU pod holds whole GPUs: num_gpus = max(num_gpu, 1).
- submit_time = creation_time; duration = deletion_time - scheduled_time (a lower
  bound for pods running at the trace end); job_id = name (unique); model, num_ps,
  iterations, vc = None."""

from __future__ import annotations

from marl_sched.traces.checks import MAX_TRACE_SECONDS, _int, _RowError, _seconds, _Seen, _text
from marl_sched.traces.source import _Rows, _Source

#: columns the header must have
REQUIRED_COLUMNS = (
    "name",
    "num_gpu",
    "gpu_milli",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
#: rows dropped by a documented rule, in the order they are applied
DROP_RULES = ("cpu_only_pods", "pending_pods", "nonpositive_duration")


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
