"""What a scheduler may know about a job's length: one documented duration predictor.

No real scheduler knows how long a job will run. Every policy — heuristics, Harmony,
MLFS, the MARL agents — sees a job through :meth:`DurationPredictor.visible_job`: the
same :class:`~marl_sched.jobs.Job` with ``iterations`` replaced by the predictor's
estimate (``nan`` when it has none) and ``duration`` (the trace's run time) by
``nan``. ``Job.work_s`` and ``Job.gpu_work_s`` of a visible job are therefore
estimates too. The simulator alone keeps the true iterations.

``workload.duration_estimate`` picks the predictor:

``none``
    no estimate: ``iterations`` is ``nan`` for every job.
``oracle``
    the true iterations (an upper-bound ablation, never a default).
``noisy``
    the true iterations times a log-normal error ``exp(sigma * z)``, ``z`` a standard
    normal drawn from ``numpy.random.default_rng([seed, crc32(job name)])``: a job's
    estimate depends on the seed and the job, not on the window or the run.
    ``sigma`` = ``workload.duration_noise_sigma`` (default :data:`NOISY_SIGMA`).
``history``
    the running median of the work (iterations x the model's compute per iteration,
    reference-GPU seconds) of the jobs *completed so far* with the same virtual
    cluster and model, else the same model, else all completed jobs; converted back
    to iterations of the job's model. ``nan`` until the first job completes. This is
    what a production scheduler has (Tiresias and Themis schedule without lengths;
    Helios' QSSF and Lucid predict from per-user/per-VC history).

:data:`NOISY_SIGMA` = 1.0 (ln-space): half of the estimates are within a factor
``e^0.674`` ≈ 2 of the truth. It is an assumption of this project, chosen to match the
order of error the duration-prediction literature reports for history-based
estimates of cluster jobs (e.g. 3Sigma, Park et al., EuroSys'18, which schedules from
distributions because point estimates are often off by 2x or more); it is not fitted
to a published table. The ablation axis ``none / noisy / history / oracle`` brackets it.
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
    """The job-length estimate every policy gets (see the module docstring).

    Args:
        kind: one of :data:`DURATION_ESTIMATES`.
        sigma: ln-space standard deviation of the ``noisy`` error.
        seed: seed of the ``noisy`` error.

    A predictor holds the history of one run: make a new one per simulation.
    """

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

    def est_work_s(self, job: Job) -> float:
        """Estimated work per worker in reference-GPU seconds (what ``Job.work_s``
        is for the true length); ``nan`` when there is no estimate."""
        return self.est_iterations(job) * CATALOGUE[job.model].compute_s

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
        """Observe the jobs completed since the last call: ``completed`` is the
        simulator's ``records`` (job id -> record, in completion order) or a list of
        jobs in completion order."""
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
