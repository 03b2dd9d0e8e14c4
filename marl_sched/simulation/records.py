"""The simulator's records and errors: a running job's live state, a finished
job's outcome and the run's statistics."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from marl_sched.errors import InputError
from marl_sched.jobs import Job, Placement
from marl_sched.perf import JobLayout


class NonFiniteError(InputError):
    """A computed time or speed is not finite: the inputs (topology figures, job
    lengths, arrival times) lie outside what the model can compute with. An input
    error, so the command exits 2 with one line instead of spinning forever."""


class PlacementError(ValueError):
    """A policy returned a placement that breaks capacity or the job's shape."""


@dataclass
class RunningJob:
    """Live state of a placed job (internal to the simulator)."""

    job: Job
    placement: Placement
    layout: JobLayout
    start_time: float
    remaining: float  # iterations
    iter_time: float = math.inf
    last_update: float = 0.0
    version: int = 0
    isolated_iter_time: float = 0.0
    paused_until: float = 0.0  # restarting after a migration or resume: no progress before
    stint_start: float = 0.0  # when it last got its GPUs (attained service counts from here)
    # the two state-dependent terms of iter_time, cached: interference changes only
    # when a job on one of its servers comes or goes, comm only when one on its links does
    interference: float = 1.0
    comm: float = 0.0
    # a one-worker-group job's group and socket terms of interference and the versions
    # of the pressure rows they were computed from (-1: not yet)
    group_term: float = 0.0
    group_ver: int = -1
    socket_term: float = 0.0
    socket_ver: int = -1


@dataclass
class JobRecord:
    """The outcome of one job."""

    job: Job
    start_time: float
    finish_time: float
    isolated_runtime: float
    n_servers: int
    n_racks: int
    n_subclusters: int

    @property
    def jct(self) -> float:
        return self.finish_time - self.job.submit_time

    @property
    def queue_time(self) -> float:
        return self.start_time - self.job.submit_time


@dataclass
class SimStats:
    events: int = 0
    recomputes: int = 0
    decisions: int = 0
    placed: int = 0
    migrations: int = 0
    migrations_declined: int = 0  # proposals over the per-job cap or too soon
    migration_delay_s: float = 0.0  # total restart + state-move delay of migrations
    preemptions: int = 0
    busy_gpu_seconds: float = 0.0
    decision_s: list[float] = field(default_factory=list)
