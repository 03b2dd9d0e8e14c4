"""Helpers of the marl_sched.traces tests (tests/marl_sched/test_traces*.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from marl_sched.errors import InputError
from marl_sched.traces import load_trace

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLE = REPO_ROOT / "configs" / "traces" / "philly_sample.csv"
SAMPLE_SCRIPT = REPO_ROOT / "configs" / "traces" / "make_sample.py"

CANON_HEADER = "job_id,submit_time,num_gpus,duration,model\n"
PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"
ALIBABA_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
POLLUX_HEADER = "name,time,application,num_replicas,batch_size\n"


def write(name: str, text: str) -> str:
    """Write ``text`` to ``name`` (relative to the current directory); return the name."""
    Path(name).write_text(text, encoding="utf-8")
    return name


def error_of(path: str, fmt: str | None = None, **kwargs: object) -> str:
    """The InputError message that loading ``path`` raises."""
    with pytest.raises(InputError) as info:
        load_trace(path, fmt, **kwargs)
    return str(info.value)
