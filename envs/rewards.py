"""The team reward of ``ClusterPlacement-v1``: average JCT, paid as it accrues.

With ``n`` the episode's jobs, ``C(t)`` the job-seconds spent in the system up to ``t``
and ``W(t)`` the predicted remaining run time (and restart delay) of the running jobs,
every step pays::

    r = -(ΔC + ΔW) / (time_scale_s · n)

``W`` is 0 at both ends, so a full episode returns ``-avg JCT / time_scale_s``; ``ΔW``
is potential-based shaping (Ng et al., 1999), with the simulator's iteration times
(``RunningJob.iter_time``).

Your own reward: ``env.reward: module:function``, called as ``reward(sim, since)``
(:data:`REWARD_SIGNATURE`) after each step's decision with the episode's simulator
(read only) and the previous step's time, paid to the acting agent. A module that does
not import or a function of another signature is an input error
(:func:`reward_function`; docs/extending.md)."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from itertools import islice
from typing import Any

import numpy as np

from marl_sched.errors import InputError, import_target
from marl_sched.simulator import Simulator

#: what a custom reward (``env.reward: module:function``) is called with, once per env step
REWARD_SIGNATURE = "reward(sim, since) -> float"


class JobSeconds:
    """``C(now)``: Σ over submitted scored jobs (ids ``>= scored_from``) of
    ``min(finish, now) - submit``, incremental."""

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
    """``W(now)``: the running jobs' remaining iterations × seconds per iteration
    (module docstring)."""

    def __init__(self, scored_from: int = 0) -> None:
        self.scored_from = int(scored_from)

    def value(self, sim: Simulator) -> float:
        now = sim.now
        runs = [
            r
            for r in sim.running.values()
            if r.iter_time < math.inf and r.job.job_id >= self.scored_from
        ]
        if not runs:
            return 0.0
        total = 0.0
        for run in runs:
            # progress counts from the end of a restart (a move, a resume), which is
            # still to be waited out: the restart delay is part of the job's JCT
            begin = max(run.last_update, run.paused_until)
            left = max(run.remaining - max(now - begin, 0.0) / run.iter_time, 0.0)
            total += left * run.iter_time + max(run.paused_until - now, 0.0)
        return total


class TeamReward:
    """``r = -(ΔC + ΔW) / (time_scale_s · n)`` over one episode's simulator, counting
    scored jobs only (ids ``>= scored_from``)."""

    def __init__(self, sim: Simulator, time_scale_s: float, scored_from: int = 0) -> None:
        self.sim = sim
        scored = [j for j in sim.jobs if j.job_id >= scored_from]
        self.scale = float(time_scale_s) * max(len(scored), 1)
        self.c = JobSeconds(np.array([j.submit_time for j in scored]), scored_from)
        self.w = RemainingWork(scored_from)
        self._potential = self.potential()
        self.total = 0.0

    def potential(self) -> float:
        return self.c.value(self.sim) + self.w.value(self.sim)

    def job_shares(self) -> list[tuple[int, float]]:
        """``(job id, share)`` for every job in arrival order: ``-T / (time_scale_s · n)``
        with ``T`` its time in the system so far (0 for a warm-up job); at the end of a
        completed episode they sum to :attr:`total`."""
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
    return TeamReward(sim, config.time_scale_s, scored_from=scored_from)
