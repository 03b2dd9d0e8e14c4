"""Jobs, placements, and the fill rules that turn trace rows into jobs.

A job has ``num_workers`` worker tasks (one GPU each) and ``num_ps`` parameter-server
tasks (CPU only), training a catalogue model for ``iterations`` iterations. Fill rules
for fields a trace lacks (seeded):

- ``model``: uniform over :data:`FILL_MODELS`, ``default_rng(seed)`` in trace order,
  independent of the job's duration;
- ``num_ps``: 0 for a single-worker job, else ``ceil(num_workers / 4)``;
- ``iterations``: ``duration / isolated_iteration_time``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from marl_sched.catalogue import CATALOGUE, MODEL_NAMES
from marl_sched.errors import InputError

#: the models the fill rule draws from, uniformly
FILL_MODELS: tuple[str, ...] = MODEL_NAMES


@dataclass(frozen=True)
class Job:
    """One training job (immutable; the simulator keeps its live state elsewhere).

    Attributes:
        job_id: dense index 0..n-1 in submit order.
        name: the trace's job id.
        model: catalogue key.
        num_workers: worker tasks = GPUs.
        num_ps: parameter-server tasks.
        iterations: synchronous iterations to run. In the job a policy is handed
            (``marl_sched.duration.DurationPredictor.visible_job``) this is the
            predictor's estimate, ``nan`` when there is none.
        submit_time: seconds from the start of the trace window.
        duration: the run time recorded in the trace (s), for reference; ``nan`` in
            the job a policy is handed unless the predictor is ``oracle``.
        vc: virtual cluster from the trace, if any.
        line: 1-based line of the source trace file.
    """

    job_id: int
    name: str
    model: str
    num_workers: int
    num_ps: int
    iterations: float
    submit_time: float
    duration: float
    vc: str | None = None
    line: int = 0

    @property
    def num_tasks(self) -> int:
        return self.num_workers + self.num_ps

    @property
    def work_s(self) -> float:
        """Training work per worker in reference-GPU seconds (iterations × compute per
        iteration)."""
        return self.iterations * CATALOGUE[self.model].compute_s

    @property
    def gpu_work_s(self) -> float:
        """The whole job's requested GPU work in reference-GPU seconds: workers ×
        :attr:`work_s`."""
        return self.num_workers * self.work_s


@dataclass(frozen=True)
class Placement:
    """Where each task of a job runs: a GPU-group id per worker and per PS.

    A worker uses one GPU of its group; a PS uses CPU cores and memory of the group's
    server and sits on the group's CPU socket.
    """

    worker_groups: tuple[int, ...]
    ps_groups: tuple[int, ...]


def default_num_ps(num_workers: int) -> int:
    """The fill rule for a trace without a PS count."""
    return 0 if num_workers <= 1 else math.ceil(num_workers / 4)


def pick_model(rng: np.random.Generator) -> str:
    """The fill rule for a trace without a model: uniform over :data:`FILL_MODELS`."""
    return FILL_MODELS[int(rng.integers(len(FILL_MODELS)))]


def build_jobs(
    trace_jobs: Sequence,
    isolated_iteration_time,
    *,
    seed: int = 0,
    max_job_gpus: int | None = None,
    path: str = "<trace>",
) -> tuple[list[Job], dict[str, int]]:
    """Turn trace rows (``marl_sched.traces.TraceJob``) into :class:`Job` s.

    Args:
        trace_jobs: rows sorted by submit time.
        isolated_iteration_time: ``f(model, num_workers, num_ps) -> seconds``.
        seed: seed of the model fill rule.
        max_job_gpus: clip larger jobs to this many workers (counted in the result).
        path: trace path for error messages.

    Returns:
        The jobs and counters ``{"clipped_jobs": n, "filled_models": n, ...}``.
    """
    rng = np.random.default_rng(seed)
    jobs: list[Job] = []
    info = {"clipped_jobs": 0, "filled_models": 0, "filled_ps": 0, "filled_iterations": 0}
    for i, row in enumerate(trace_jobs):
        workers = int(row.num_gpus)
        if max_job_gpus is not None and workers > max_job_gpus:
            workers = max_job_gpus
            info["clipped_jobs"] += 1
        model = row.model
        if model is None:
            model = pick_model(rng)
            info["filled_models"] += 1
        elif model not in CATALOGUE:
            raise InputError(
                f"{path}:{row.line}: model: unknown model {model!r} "
                f"(known: {', '.join(MODEL_NAMES)})"
            )
        num_ps = row.num_ps
        if num_ps is None:
            num_ps = default_num_ps(workers)
            info["filled_ps"] += 1
        # num_ps = 0 with several workers is an all-reduce job (a ring, no PS): how
        # Pollux/Sia-schema traces load (traces.ALL_REDUCE_FORMATS); a trace without a
        # PS count (Philly, Alibaba) is assumed to hold PS jobs (the fill rule above)
        iterations = row.iterations
        if iterations is None:
            iterations = row.duration / isolated_iteration_time(model, workers, num_ps)
            info["filled_iterations"] += 1
        jobs.append(
            Job(
                job_id=i,
                name=str(row.job_id),
                model=model,
                num_workers=workers,
                num_ps=int(num_ps),
                iterations=float(iterations),
                submit_time=float(row.submit_time),
                duration=float(row.duration),
                vc=row.vc,
                line=int(row.line),
            )
        )
    return jobs, info
