"""The cooperative team reward of the placement environment.

Every env step yields one team reward (see :mod:`envs.cluster_env` for who receives
it), the sum of two terms, both divided by ``n``, the number of jobs of the episode:

**Time term.** With ``N(t)`` the number of jobs submitted and not yet finished at
simulated time ``t``, ``Σ_j JCT_j = ∫ N(t) dt``. Between two consecutive decisions at
times ``t_{k-1}`` and ``t_k`` the step gets::

    r_time = -(∫_{t_{k-1}}^{t_k} N(t) dt) / (time_scale_s · n)

so over an episode that runs to its end the time terms sum to
``-Σ_j JCT_j / (time_scale_s · n) = -avg JCT / time_scale_s``: the objective itself,
paid as it accrues. :class:`JobsInSystem` keeps ``∫ N dt`` exactly from the
simulator's completion records (no sampling).

**Slowdown shaping.** On the step that completes a job's placement::

    r_shape = -w · ((ŝ_job - 1) + Σ_{m ∈ neighbours} (ŝ_m^after - ŝ_m^before)) / n

``w`` is ``env.slowdown_weight``; ``ŝ`` a predicted slowdown from interference:
iteration time in the current cluster over the iteration time of the same placement
in an otherwise empty cluster (the definition of :mod:`marl_sched.interference`,
≥ 1); the neighbours are the running jobs that share a server or a link with the new
job. Slow GPUs or a spread-out placement are not counted here: they lengthen the
job's JCT, which the time term charges. The prediction comes from a
:class:`SlowdownPredictor`:

- :class:`LearnedSlowdown` — the learned interference model
  (``marl_sched.interference.load_default()``; the placed job's features from
  ``candidate_features`` on the state before the placement, each neighbour's from
  ``job_features`` before and after), as in the paper; used when
  ``env.use_learned_reward`` is true and the model file
  (``checkpoints/interference/model.npz``) exists;
- :class:`PerfModelSlowdown` — otherwise, the simulator's own performance model: the
  iteration times the simulator computes right after the placement (for the job,
  and the change for each neighbour) over the same-placement alone times. It is the
  ground truth at placement time (later events change speeds again), the stand-in
  until a learned model ships, and the yardstick that model is judged by.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import Any, Protocol

import numpy as np

from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job, Placement
from marl_sched.simulator import ClusterView, RunningJob, Simulator


class JobsInSystem:
    """``∫_{t_0}^{now} N(t) dt`` (job-seconds) of a simulation, updated incrementally.

    Args:
        submit_times: the simulation's job submit times, ascending (s).
    """

    def __init__(self, submit_times: np.ndarray) -> None:
        self._submit = [float(s) for s in submit_times]
        self._prefix = np.concatenate([[0.0], np.cumsum(self._submit)])
        self._n_done = 0
        self._done_span = 0.0  # Σ (finish - submit) over finished jobs
        self._done_submit = 0.0  # Σ submit over finished jobs

    def value(self, sim: Simulator) -> float:
        """The integral up to ``sim.now`` (new completions are read from ``sim.records``)."""
        records = sim.records
        new = len(records) - self._n_done
        if new > 0:  # records is insertion-ordered: the newest completions are last
            for rec in islice(reversed(records.values()), new):
                self._done_span += rec.finish_time - rec.job.submit_time
                self._done_submit += rec.job.submit_time
            self._n_done = len(records)
        now = sim.now
        n_sub = bisect_right(self._submit, now)
        waiting = n_sub - self._n_done
        return self._done_span + waiting * now - (self._prefix[n_sub] - self._done_submit)


@dataclass(frozen=True)
class SlowdownEstimate:
    """Predicted effect of one placement.

    Attributes:
        job: the placed job's predicted slowdown (≥ 1 for an accurate model).
        neighbours: summed increase of the neighbours' predicted slowdowns.
    """

    job: float
    neighbours: float


class SlowdownPredictor(Protocol):
    """What the shaping term needs: slowdowns of a placement and of its neighbours.

    ``prepare`` runs just before ``sim.apply(placement)`` and may capture state;
    ``estimate`` runs just after it with what ``prepare`` returned.
    """

    name: str

    def prepare(self, sim: Simulator, job: Job, placement: Placement) -> Any: ...

    def estimate(
        self, sim: Simulator, job: Job, placement: Placement, prepared: Any
    ) -> SlowdownEstimate: ...


def alone_iteration_time(sim: Simulator, run: RunningJob) -> float:
    """Seconds per iteration of a placed job with the cluster to itself (same placement)."""
    return sim.perf.alone_iteration_time(CATALOGUE[run.job.model], run.layout, run.job.num_ps)


class PerfModelSlowdown:
    """Slowdowns from the simulator's performance model (the fallback predictor)."""

    name = "perf-model"

    def prepare(self, sim: Simulator, job: Job, placement: Placement) -> dict[int, float]:
        return {jid: run.iter_time for jid, run in sim.running.items()}

    def estimate(
        self, sim: Simulator, job: Job, placement: Placement, prepared: dict[int, float]
    ) -> SlowdownEstimate:
        run = sim.running[job.job_id]
        own = run.iter_time / alone_iteration_time(sim, run)
        hurt = 0.0
        # only the jobs sharing a server or a link with the new one were recomputed
        for jid, before in prepared.items():
            other = sim.running[jid]
            if other.iter_time != before:
                hurt += (other.iter_time - before) / alone_iteration_time(sim, other)
        return SlowdownEstimate(job=own, neighbours=hurt)


def snapshot_view(view: ClusterView) -> ClusterView:
    """A copy of ``view`` whose arrays no longer follow the simulator."""
    arrays = {
        f.name: np.array(getattr(view, f.name))
        for f in dataclasses.fields(view)
        if isinstance(getattr(view, f.name), np.ndarray)
    }
    for a in arrays.values():
        a.setflags(write=False)
    return dataclasses.replace(view, **arrays)


class LearnedSlowdown:
    """Slowdowns from a learned model: ``model.predict(X)`` on interference features.

    Args:
        model: an object with ``predict(X: (n, F)) -> (n,) slowdowns``.
        candidate_features: ``f(view, job, worker_groups, ps_groups) -> (F,)``, the
            features of a placement not yet applied to ``view``.
        job_features: ``f(view, job, placement, layout) -> (F,)``, the features of a
            job already placed in ``view``'s state.
    """

    name = "learned"

    def __init__(self, model: Any, candidate_features: Callable, job_features: Callable) -> None:
        self.model = model
        self.candidate_features = candidate_features
        self.job_features = job_features

    def prepare(self, sim: Simulator, job: Job, placement: Placement) -> ClusterView:
        return snapshot_view(sim.view())

    def estimate(
        self, sim: Simulator, job: Job, placement: Placement, prepared: ClusterView
    ) -> SlowdownEstimate:
        before, after = prepared, sim.view()
        rows = [self.candidate_features(before, job, placement.worker_groups, placement.ps_groups)]
        nbrs = [sim.running[jid] for jid in sim.neighbours(job.job_id)]
        for run in nbrs:
            rows.append(self.job_features(before, run.job, run.placement, run.layout))
            rows.append(self.job_features(after, run.job, run.placement, run.layout))
        pred = np.asarray(self.model.predict(np.stack(rows)), dtype=np.float64)
        hurt = float(np.sum(pred[2::2] - pred[1::2])) if nbrs else 0.0
        return SlowdownEstimate(job=float(pred[0]), neighbours=hurt)


def default_predictor(use_learned: bool) -> tuple[SlowdownPredictor, str]:
    """The predictor the env uses, and a note saying which one and why.

    With ``use_learned`` and ``marl_sched.interference`` importable with its model
    file present, the learned model (a file that exists but does not load raises
    its ``InputError``); otherwise the performance model.
    """
    if not use_learned:
        return PerfModelSlowdown(), "perf-model (env.use_learned_reward is false)"
    try:
        from marl_sched import interference

        path = interference.default_model_path()
        candidate, placed = interference.candidate_features, interference.job_features
    except (ImportError, AttributeError) as exc:
        return PerfModelSlowdown(), f"perf-model (no learned interference model: {exc})"
    if not path.exists():
        return PerfModelSlowdown(), f"perf-model (no learned model file {path})"
    model = interference.load_default()
    return LearnedSlowdown(model, candidate, placed), f"learned ({path})"


def shaping_reward(estimate: SlowdownEstimate, weight: float, n_jobs: int) -> float:
    """``-w · ((ŝ_job - 1) + Σ Δŝ_neighbours) / n``."""
    return -weight * ((estimate.job - 1.0) + estimate.neighbours) / n_jobs


def time_reward(integral_delta: float, time_scale_s: float, n_jobs: int) -> float:
    """``-(Δ ∫ N dt) / (time_scale_s · n)``."""
    return -integral_delta / (time_scale_s * n_jobs)
