"""Training windows, episodes and evaluation runs shared by the learned baselines.

A training *episode* is one simulator run over a window of consecutive jobs of the
training part of a trace window (the first ``train_fraction`` of the config's window);
the rest of the config's window is held out for evaluation. Windows are re-indexed
(dense ``job_id`` 0..n-1) and rebased to start at time 0, as the simulator expects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from marl_sched.jobs import Job
from marl_sched.perf import PerformanceModel
from marl_sched.policies.base import Policy
from marl_sched.simulator import Simulator, run_policy
from marl_sched.topology import Topology


def rebase(jobs: Sequence[Job]) -> list[Job]:
    """The jobs with dense ids from 0 and the first submit time at 0."""
    if not jobs:
        return []
    t0 = jobs[0].submit_time
    return [
        dataclasses.replace(j, job_id=i, submit_time=j.submit_time - t0) for i, j in enumerate(jobs)
    ]


def split_train(jobs: Sequence[Job], train_fraction: float) -> tuple[list[Job], int]:
    """The training part of a window and its length (at least one job)."""
    n = max(1, min(len(jobs), int(round(len(jobs) * train_fraction))))
    return rebase(jobs[:n]), n


def sample_window(jobs: Sequence[Job], n_jobs: int, rng: np.random.Generator) -> list[Job]:
    """``n_jobs`` consecutive jobs from a random start (the whole list if shorter)."""
    if n_jobs >= len(jobs):
        return list(jobs)
    start = int(rng.integers(0, len(jobs) - n_jobs + 1))
    return rebase(jobs[start : start + n_jobs])


def average_jct(
    topology: Topology,
    perf: PerformanceModel,
    jobs: Sequence[Job],
    policy: Policy,
    seed: int = 0,
    ordering: str = "fifo",
) -> float:
    """Average JCT (s) of ``policy`` over ``jobs`` (every job must complete)."""
    policy.reset(topology, seed)
    sim = Simulator(topology, jobs, perf=perf, ordering=ordering)
    records = run_policy(sim, policy.place)
    if len(records) != len(jobs):
        raise RuntimeError(f"{len(jobs) - len(records)} jobs never completed")
    return float(np.mean([r.jct for r in records]))
