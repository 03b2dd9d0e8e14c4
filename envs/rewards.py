"""The team reward of ``ClusterPlacement-v1``: average JCT, paid as it accrues, with
a potential that credits a placement at once with the run time it adds.

With ``n`` the jobs of the episode, ``C(t)`` the job-seconds spent in the system up to
``t`` (Σ over submitted jobs of ``min(finish, t) - submit``) and ``W(t)`` the
predicted remaining run time of the running jobs (Σ remaining iterations × predicted
seconds per iteration), every env step pays::

    r = -(ΔC + ΔW) / (time_scale_s · n)

``C`` at the end of an episode run to completion is ``Σ JCT``, and ``W`` is 0 at both
ends (an episode starts from an empty cluster and ends when every job is done), so
the team return is exactly ``-avg JCT / time_scale_s`` whatever ``W`` predicts.
``ΔW`` is potential-based shaping (Ng et al., 1999): it changes which step is paid,
not what the episode is worth. On the step that applies a placement it charges the
job's own predicted run time and the slowdown it causes its neighbours; later steps
pay back the difference between prediction and what happened. On the step that
moves a running job (``env.migration: on``) ``ΔW`` charges its restart delay at once
(and the change of speed of the job and its old and new neighbours); while the job
then waits, ``C``'s growth and the fall of ``W``'s delay term cancel, so the delay is
paid once, at the move, and the return stays ``-avg JCT`` with the delay in the moved
job's JCT.

The interference in ``W``'s seconds per iteration comes from ``reward.interference``:

- ``simulator`` — the performance model's own iteration times
  (``RunningJob.iter_time``): the environment's dynamics, so ``ΔW`` is the exact
  instantaneous cost of a placement;
- ``learned`` — the learned interference model of the paper
  (``marl_sched.interference``, file ``checkpoints/interference/model.npz``):
  seconds per iteration = the job's same-placement-alone time × the model's predicted
  slowdown (:func:`marl_sched.interference.job_features`), recomputed whenever the
  set of running jobs changes. A missing model file is an input error.

Your own reward: ``env.reward: module:function`` (or ``env.reward.function:
module:function`` beside ``credit``) replaces the team reward above with a function of
the signature :data:`REWARD_SIGNATURE`, ``reward(sim, since) -> float``: called once per
env step, after the step's decision is applied, with the episode's
:class:`~marl_sched.simulator.Simulator` (read it, never change it: ``sim.now``,
``sim.jobs``, ``sim.records``, ``sim.running``, ``sim.view()``) and the simulated time
of the previous step (the episode's start for the first); what it returns is the
step's reward (``time_scale_s`` and ``interference`` are then unused; ``credit`` still
says which agents are paid). The module must import where the env is built (RLlib's
env runners too: the current folder or ``PYTHONPATH``); one that does not, a name that
is not callable, or a function that cannot be called as ``reward(sim, since)`` is an
input error naming the key (:func:`reward_function`). docs/extending.md has an example.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from itertools import islice
from typing import Any

import numpy as np

from marl_sched.catalogue import CATALOGUE
from marl_sched.errors import InputError, import_target
from marl_sched.simulator import Simulator

INTERFERENCE_SOURCES = ("simulator", "learned")
#: what a custom reward (``env.reward: module:function``) is called with, once per env step
REWARD_SIGNATURE = "reward(sim, since) -> float"


class JobSeconds:
    """``C(now)``: Σ over submitted scored jobs (ids ``>= scored_from``) of
    ``min(finish, now) - submit`` (exact, incremental over the simulator's completion
    records)."""

    def __init__(self, submit_times: np.ndarray, scored_from: int = 0) -> None:
        self.scored_from = int(scored_from)
        self._submits = np.asarray(submit_times, dtype=np.float64)
        self._cumsum = np.concatenate([[0.0], np.cumsum(self._submits)])
        self._done_jct = 0.0
        self._done_submit = 0.0
        self._done_n = 0
        self._done_scored = 0

    def value(self, sim: Simulator) -> float:
        recs = sim.records
        if len(recs) != self._done_n:
            new = len(recs) - self._done_n
            for rec in islice(reversed(recs.values()), new):  # the newest, no full copy
                if rec.job.job_id < self.scored_from:
                    continue
                self._done_scored += 1
                self._done_jct += rec.finish_time - rec.job.submit_time
                self._done_submit += rec.job.submit_time
            self._done_n = len(recs)
        now = sim.now
        n_sub = int(np.searchsorted(self._submits, now, side="right"))
        open_n = n_sub - self._done_scored
        return self._done_jct + open_n * now - (self._cumsum[n_sub] - self._done_submit)


class RemainingWork:
    """``W(now)``: the running jobs' remaining iterations × predicted seconds per
    iteration (module docstring), from ``source`` in :data:`INTERFERENCE_SOURCES`."""

    def __init__(self, source: str = "simulator", scored_from: int = 0) -> None:
        self.scored_from = int(scored_from)
        if source not in INTERFERENCE_SOURCES:
            raise ValueError(f"reward.interference: must be one of {INTERFERENCE_SOURCES}")
        self.source = source
        self._model: Any = None
        self._key: tuple[int, ...] | None = None
        self._pred: dict[int, float] = {}
        if source == "learned":
            from marl_sched import interference

            path = interference.default_model_path()
            if not path.exists():
                raise InputError(f"reward.interference: learned: no model file {path}")
            self._model = interference.load_default()

    def value(self, sim: Simulator) -> float:
        now = sim.now
        runs = [
            r
            for r in sim.running.values()
            if r.iter_time < math.inf and r.job.job_id >= self.scored_from
        ]
        if not runs:
            return 0.0
        if self.source == "learned":
            self._refresh(sim)
        total = 0.0
        for run in runs:
            # progress counts from the end of a restart (a move, a resume), which is
            # still to be waited out: the restart delay is part of the job's JCT
            begin = max(run.last_update, run.paused_until)
            left = max(run.remaining - max(now - begin, 0.0) / run.iter_time, 0.0)
            tau = self._pred[run.job.job_id] if self.source == "learned" else run.iter_time
            total += left * tau + max(run.paused_until - now, 0.0)
        return total

    def predicted_iteration_times(self, sim: Simulator) -> dict[int, float]:
        """Per running job id: the seconds per iteration ``W`` uses."""
        if self.source == "learned":
            self._refresh(sim)
            return dict(self._pred)
        return {jid: run.iter_time for jid, run in sim.running.items()}

    def _refresh(self, sim: Simulator) -> None:
        key = tuple(sorted(sim.running))
        if key == self._key:
            return
        from marl_sched.interference import job_features

        view = sim.view()
        runs = list(sim.running.values())
        rows = np.stack([job_features(view, r.job, r.placement, r.layout) for r in runs])
        slow = np.maximum(np.asarray(self._model.predict(rows), dtype=np.float64), 1.0)
        self._pred = {
            r.job.job_id: s
            * sim.perf.alone_iteration_time(CATALOGUE[r.job.model], r.layout, r.job.num_ps)
            for r, s in zip(runs, slow, strict=True)
        }
        self._key = key


class TeamReward:
    """``r = -(ΔC + ΔW) / (time_scale_s · n)`` over one episode's simulator; with a
    warm-up (jobs ``0 .. scored_from - 1``, simulated but not scored) ``C``, ``W`` and
    ``n`` count the scored jobs only."""

    def __init__(
        self, sim: Simulator, time_scale_s: float, interference: str, scored_from: int = 0
    ) -> None:
        self.sim = sim
        scored = [j for j in sim.jobs if j.job_id >= scored_from]
        self.scale = float(time_scale_s) * max(len(scored), 1)
        self.c = JobSeconds(np.array([j.submit_time for j in scored]), scored_from)
        self.w = RemainingWork(interference, scored_from)
        self._potential = self.potential()
        self.total = 0.0

    def potential(self) -> float:
        return self.c.value(self.sim) + self.w.value(self.sim)

    def job_shares(self) -> list[tuple[int, float]]:
        """``(job id, share)`` for every job of the episode in arrival order (submit
        time, then id): a scored job's share is ``-T / (time_scale_s · n)`` with ``T``
        its time in the system so far (``min(finish, now) - submit``, 0 before it is
        submitted), an unscored (warm-up) job's 0. The shares are ``-C(now) / scale``
        split by job, so at the end of an episode whose jobs all completed they sum
        to :attr:`total` (``W`` is 0 at both ends)."""
        now, records, first = self.sim.now, self.sim.records, self.c.scored_from
        out = []
        for job in sorted(self.sim.jobs, key=lambda j: (j.submit_time, j.job_id)):
            share = 0.0
            if job.job_id >= first:
                rec = records.get(job.job_id)
                end = rec.finish_time if rec is not None else now
                share = -max(0.0, end - job.submit_time) / self.scale
            out.append((int(job.job_id), share))
        return out

    def step(self) -> float:
        """The reward since the previous call (or since construction)."""
        p = self.potential()
        r = -(p - self._potential) / self.scale
        self._potential = p
        self.total += r
        return r


def reward_function(path: str, where: str, key: str) -> Callable[[Simulator, float], float]:
    """The function at ``path`` (``module:function``), checked to be callable as
    :data:`REWARD_SIGNATURE`; ``InputError(f"{where}: {key}: ...")`` otherwise."""
    module, sep, attr = path.partition(":")
    if not (sep and attr.isidentifier() and all(p.isidentifier() for p in module.split("."))):
        raise InputError(f"{where}: {key}: must be module:function, got {path!r}")
    found = import_target(path, f"{where}: {key}: {path}")
    if not callable(found):
        raise InputError(f"{where}: {key}: {path} is not callable ({REWARD_SIGNATURE})")
    try:
        inspect.signature(found).bind(None, 0.0)
    except TypeError:
        raise InputError(
            f"{where}: {key}: {path}{inspect.signature(found)} cannot be called as "
            f"{REWARD_SIGNATURE}"
        ) from None
    except ValueError:  # no signature to inspect (some builtins): called as given
        pass
    return found


class CustomReward:
    """A custom reward (``env.reward: module:function``, module docstring) with
    :class:`TeamReward`'s interface: :meth:`step` pays ``function(sim, since)``."""

    def __init__(self, sim: Simulator, function: Callable[[Simulator, float], float]) -> None:
        self.sim = sim
        self.function = function
        self._since = sim.now
        self.total = 0.0

    def step(self) -> float:
        r = float(self.function(self.sim, self._since))
        self._since = self.sim.now
        self.total += r
        return r

    def job_shares(self) -> list[tuple[int, float]]:
        raise InputError("env.reward.function: a custom reward has no per-job shares")


def episode_reward(sim: Simulator, config: Any, scored_from: int = 0) -> TeamReward | CustomReward:
    """The reward of an episode on ``sim`` under ``env.reward`` (``config``: an
    :class:`envs.config.RewardConfig`): the team reward, or the custom function."""
    if config.function:
        return CustomReward(sim, reward_function(config.function, "env", "env.reward.function"))
    return TeamReward(sim, config.time_scale_s, config.interference, scored_from=scored_from)
