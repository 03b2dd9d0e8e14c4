"""What a scheduler may know about a job's length: one duration predictor.

Every policy sees a job through :meth:`DurationPredictor.visible_job`: ``iterations``
replaced by the estimate (``nan`` without one) and ``duration`` by ``nan`` (so
``work_s`` / ``gpu_work_s`` are estimates too); only the simulator keeps the truth.
``workload.duration_estimate``:

``none``
    no estimate.
``oracle``
    the true iterations (an upper-bound ablation).
``noisy``
    the truth times ``exp(sigma * z)``, ``z`` standard normal from
    ``default_rng([seed, crc32(job name)])``; ``sigma`` = ``workload.duration_noise_sigma``
    (default :data:`NOISY_SIGMA` = 1.0, an assumption: half the estimates within ~2x).
``history``
    the running median work of the jobs completed so far with the same virtual
    cluster and model, else model, else all; ``nan`` until the first completion.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job

DURATION_ESTIMATES = ("none", "oracle", "noisy", "history")
NOISY_SIGMA = 1.0


class DurationPredictor:
    """The job-length estimate every policy gets.

    Args:
        kind: one of :data:`DURATION_ESTIMATES`.
        sigma: ln-space standard deviation of the ``noisy`` error.
        seed: seed of the ``noisy`` error.

    One predictor per simulation (it holds the run's history)."""

    def __init__(self, kind: str = "noisy", *, sigma: float = NOISY_SIGMA, seed: int = 0) -> None:
        if kind not in DURATION_ESTIMATES:
            raise ValueError(f"unknown duration estimate {kind!r} (known: {DURATION_ESTIMATES})")
        self.kind = kind
        self.sigma = float(sigma)
        self.seed = int(seed)
        self._noise: dict[str, float] = {}
        self._work: dict[tuple, list[float]] = defaultdict(list)
        self._seen = 0

    # ---------------------------------------------------------------- estimates

    def est_iterations(self, job: Job) -> float:
        """The estimated iterations of ``job``; ``nan`` when there is no estimate."""
        if self.kind == "oracle":
            return job.iterations
        if self.kind == "noisy":
            return job.iterations * self._factor(job)
        if self.kind == "history":
            work = self._history_work(job)
            return work / CATALOGUE[job.model].compute_s
        return math.nan

    def visible_job(self, job: Job) -> Job:
        """``job`` as a policy may see it: estimated iterations, no trace duration."""
        if self.kind == "oracle":
            return job
        return dataclasses.replace(job, iterations=self.est_iterations(job), duration=math.nan)

    # ---------------------------------------------------------------- history

    def observe(self, job: Job) -> None:
        """Learn the true length of a job that has just completed."""
        if self.kind != "history":
            return
        work = job.iterations * CATALOGUE[job.model].compute_s
        for key in self._keys(job):
            self._work[key].append(work)

    def sync(self, completed: Sequence[Job] | dict) -> None:
        """Observe the jobs completed since the last call (the simulator's ``records`` or a
        list of jobs, in completion order)."""
        if self.kind != "history" or len(completed) == self._seen:
            return
        items = list(completed.values()) if isinstance(completed, dict) else list(completed)
        for item in items[self._seen :]:
            self.observe(getattr(item, "job", item))
        self._seen = len(items)

    @staticmethod
    def _keys(job: Job) -> tuple[tuple, ...]:
        return (("vc-model", job.vc, job.model), ("model", job.model), ("all",))

    def _history_work(self, job: Job) -> float:
        for key in self._keys(job):
            values = self._work.get(key)
            if values:
                return float(np.median(values))
        return math.nan

    def _factor(self, job: Job) -> float:
        factor = self._noise.get(job.name)
        if factor is None:
            rng = np.random.default_rng([self.seed, zlib.crc32(job.name.encode("utf-8"))])
            factor = math.exp(self.sigma * float(rng.standard_normal()))
            self._noise[job.name] = factor
        return factor


def make_predictor(kind: str, *, sigma: float = NOISY_SIGMA, seed: int = 0) -> DurationPredictor:
    """A fresh predictor (one per simulation run)."""
    return DurationPredictor(kind, sigma=sigma, seed=seed)


def workload_predictor(workload) -> DurationPredictor:
    """A fresh predictor of a ``workload:`` section (``duration_estimate``,
    ``duration_noise_sigma``, ``seed``)."""
    return make_predictor(
        workload.duration_estimate, sigma=workload.duration_noise_sigma, seed=workload.seed
    )
