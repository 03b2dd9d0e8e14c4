"""An online planner (model-predictive control): the upper reference for what a learned
policy could amortise, not a contender — it uses the simulator itself as its model
(docs/planner.md).

Per decision, every candidate (the base's own choice first, then the distinct proposals
of :data:`PLANNER_CANDIDATES` on the whole view, plus *defer* when a completion will
offer the job again) is played out on the same
``k`` sampled futures: a fork whose future arrivals come from
:class:`marl_sched.workload_model.WorkloadModel` and whose unfinished jobs get lengths
drawn from their estimate, never the true length. ``base`` places every later job; a
playout runs to ``now + max(horizon_s, the job's estimated isolated run time)`` and is
scored by :meth:`Simulator.estimated_total_jct`. The lowest mean score wins (ties:
the base's choice, then proposal order, defer last), so on the true future a playout
that covers the run never scores the winner worse than the base's own choice
(Bertsekas's cost improvement). Jobs whose estimated isolated run is below ``min_run_s``
take the base's choice without playouts. :class:`OraclePolicy` is the same on the true
future, K = 1.
Needs the simulator: ``place(job, view, sim=...)`` (:attr:`Policy.needs_simulator`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from marl_sched.config.parse import check, parse_section
from marl_sched.errors import InputError
from marl_sched.jobs import Job, Placement
from marl_sched.policies.base import (
    Policy,
    get_policy_class,
    heuristic_names,
    make_policy,
    policy_entries,
)
from marl_sched.simulator import ClusterView, Simulator
from marl_sched.topology import Topology

#: the proposers (those of ``masked:lookahead``, agents/teachers.py LOOKAHEAD_CANDIDATES)
CANDIDATES = (
    "locality", "tetris", "interference-aware", "first-fit", "congestion-aware", "load-balance",
)  # fmt: skip
#: the planner's proposers: :data:`CANDIDATES` plus the length levers (the model's
#: fastest GPU type, a whole server when one holds the job; the slowest adequate type)
PLANNER_CANDIDATES = (*CANDIDATES, "speed-aware", "length-aware")
DEFER = None
#: the base policies besides the heuristics (:class:`PlannerConfig`); the masked ones
#: are the references themselves (agents/teachers.py), so a rollout on them measures
#: room above the reference
BASES = ("lookahead", "masked:lookahead", "masked:lookahead-learned")
#: what a playout knows of the future: nothing beyond the workload model (``sampled``),
#: the lengths of the jobs already submitted (``true-lengths``), the trace's later
#: arrivals with their lengths drawn from estimates (``true-arrivals``), or both
#: (``true``, the oracle)
FUTURES = ("sampled", "true-lengths", "true-arrivals", "true")
#: the kinds whose policies may propose candidates (one placement per call, no move)
CANDIDATE_KINDS = ("heuristic", "lever")

if TYPE_CHECKING:
    from marl_sched.config import ExperimentConfig


@dataclass(frozen=True)
class PlannerConfig:
    """The ``planner:`` section of an experiment config: the options of ``planner``
    and ``oracle`` (which ignores ``k``; docs/planner.md).

    Attributes:
        k: futures per decision (>= 1).
        horizon_s: playout horizon in simulated seconds (> 0); a run's window must
            span at least this long (:func:`check_horizon`).
        base: the policy that places later jobs in a playout (and whose choice is
            always a candidate): ``lookahead`` (the default), ``masked:lookahead``,
            ``masked:lookahead-learned`` or a registered heuristic.
        defer: whether leaving the job queued is a candidate.
        candidates: the proposers (registered heuristics or levers).
        min_run_s: jobs whose estimated isolated run time is shorter take the base's
            choice without playouts (>= 0; 0: every job is planned).
        margin: with ``margin`` > 0 a candidate may replace the base's choice only if
            it scores below the base's choice by more than ``margin`` x that score in
            every future (in [0, 1); 0: the lowest mean wins).
    """

    k: int = 4
    horizon_s: float = 3600.0
    base: str = "lookahead"
    defer: bool = True
    candidates: tuple[str, ...] = PLANNER_CANDIDATES
    min_run_s: float = 0.0
    margin: float = 0.0

    def validate(self, where: str, key: str) -> None:
        check(self.k >= 1, where, f"{key}.k", f"must be an integer >= 1, got {self.k}")
        check(self.horizon_s > 0, where, f"{key}.horizon_s", f"must be > 0, got {self.horizon_s:g}")
        names = [*BASES, *heuristic_names()]
        check(self.base in names, where, f"{key}.base",
              f"must be one of {', '.join(names)}, got {self.base!r}")  # fmt: skip
        ok = self.min_run_s >= 0 and math.isfinite(self.min_run_s)
        check(
            ok, where, f"{key}.min_run_s", f"must be a finite number >= 0, got {self.min_run_s:g}"
        )
        ok = 0 <= self.margin < 1
        check(ok, where, f"{key}.margin", f"must be in [0, 1), got {self.margin:g}")
        known = [n for n, e in policy_entries().items() if e.kind in CANDIDATE_KINDS]
        check(bool(self.candidates), where, f"{key}.candidates", "must name at least one")
        for c in self.candidates:
            check(c in known, where, f"{key}.candidates",
                  f"must be registered heuristics or levers ({', '.join(known)}), "
                  f"got {c!r}")  # fmt: skip


def planner_config(cfg: ExperimentConfig) -> PlannerConfig:
    """The config's ``planner:`` section, typed and checked (InputError naming the key)."""
    return parse_section(PlannerConfig, cfg.planner, cfg.source, "planner")


def check_horizon(cfg: ExperimentConfig, policy: str, jobs: Sequence[Job]) -> None:
    """If ``policy`` is a planner: InputError naming ``planner.horizon_s`` when the span
    of ``jobs`` (every simulated job; last submit - first submit) is shorter than it."""
    if not issubclass(get_policy_class(policy), PlannerPolicy) or not jobs:
        return
    horizon = planner_config(cfg).horizon_s
    span = jobs[-1].submit_time - jobs[0].submit_time
    if span < horizon:
        raise InputError(
            f"{cfg.source}: planner.horizon_s: {horizon:g} s is longer than the window's "
            f"span, {span:g} s (first to last submit of its {len(jobs)} jobs); set a "
            f"shorter planner.horizon_s or a longer window"
        )


def _option(name: str, value, lowest: float, integer: bool = False):
    """``value`` checked: a finite number above ``lowest`` (an integer with ``integer``)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value <= lowest or (integer and value != int(value)):
        what = f"an integer >= {int(lowest) + 1}" if integer else f"a number > {lowest:g}"
        raise InputError(f"{name}: must be {what}, got {value!r}")
    return int(value) if integer else float(value)


class PlannerPolicy(Policy):
    """Model-predictive placement over sampled futures.

    Args:
        k: futures per decision (>= 1).
        horizon_s: playout horizon in simulated seconds (> 0); at least the job's
            estimated isolated run time.
        base: the policy that places later jobs in a playout (``lookahead``, a masked
            reference of :data:`BASES` or a registered heuristic); its choice is
            always the first candidate.
        candidates: the policies that propose placements.
        future: one of :data:`FUTURES`: ``"sampled"`` (the workload model),
            ``"true"`` (the trace's own future and lengths: the oracle), or one half
            of it (``"true-lengths"``, ``"true-arrivals"``: the half-oracles).
        model: a :class:`~marl_sched.workload_model.WorkloadModel` (default: the
            shipped one, ``marl_sched/data/workload_model.json``).
        defer: whether leaving the job queued is a candidate.
        min_run_s: a job whose estimated isolated run is shorter (s) takes the base's
            choice without playouts.
        margin: how much better than the base's choice, in every future, a candidate
            must score to replace it (:class:`PlannerConfig`).
    """

    name = "planner"
    description = (
        "reference, not a contender: model-predictive control over the heuristics' "
        "proposals and defer, played out on the simulator over K sampled futures"
    )
    needs_simulator = True  # the runner hands place() the simulator (sim=)

    @classmethod
    def config_options(cls, cfg: ExperimentConfig) -> dict[str, Any]:
        """The constructor's options from the config's ``planner:`` section
        (:func:`marl_sched.policies.build_policy` with ``config=``)."""
        return asdict(planner_config(cfg))

    def __init__(
        self,
        k: int = 4,
        horizon_s: float = 3600.0,
        base: str = "lookahead",
        candidates: tuple[str, ...] = PLANNER_CANDIDATES,
        future: str = "sampled",
        model=None,
        defer: bool = True,
        min_run_s: float = 0.0,
        margin: float = 0.0,
    ) -> None:
        self.k = _option("k", k, 0, integer=True)
        self.horizon_s = _option("horizon_s", horizon_s, 0.0)
        self.min_run_s = 0.0 if min_run_s == 0 else _option("min_run_s", min_run_s, 0.0)
        self.margin = 0.0 if margin == 0 else _option("margin", margin, 0.0)
        if self.margin >= 1:
            raise InputError(f"margin: must be in [0, 1), got {margin!r}")
        if future not in FUTURES:
            raise InputError(f"future: must be one of {', '.join(FUTURES)}, got {future!r}")
        self.future = future
        self.defer = bool(defer)
        self.base = make_policy(base)
        self.candidates = [make_policy(c) for c in candidates]
        if model is None and future != "true":
            from marl_sched.workload_model import WorkloadModel

            model = WorkloadModel.load()
        self.model = model
        self.rng = np.random.default_rng(0)
        self.decisions: list[tuple[float, int, Placement | None]] = []
        self.planned = 0  # decisions with more than one candidate played out

    def reset(self, topology: Topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        for p in (self.base, *self.candidates):
            p.reset(topology, seed)
        self.rng = np.random.default_rng(seed)
        self.decisions = []
        self.planned = 0

    def place(self, job: Job, view: ClusterView, sim: Simulator | None = None):
        pending = getattr(sim, "pending", None)
        if not isinstance(sim, Simulator) or pending is None or pending.job_id != job.job_id:
            raise ValueError("planner: needs the simulator whose pending job it is (sim=...)")
        own = self.base.place(job, view)
        options: list[Placement | None] = [own]
        if self._run_s(job, sim) >= self.min_run_s:
            for c in self.candidates:
                p = c.place(job, view)
                if p is not None and p not in options:
                    options.append(p)
            if self.defer and sim.running and DEFER not in options:
                options.append(DEFER)  # a completion will offer the job again
        choice = own
        if len(options) > 1:
            choice = self._best(job, sim, options)
            self.planned += 1
        if choice is DEFER and view.recheck_at is not None:
            view.recheck_at(job.job_id, view.now + self.horizon_s)
        self.decisions.append((view.now, job.job_id, choice))
        return choice

    @staticmethod
    def _run_s(job: Job, sim: Simulator) -> float:
        """The job's isolated run time (s) at the iterations it was handed with (0 when
        unknown)."""
        one = sim.perf.isolated_iteration_time(job.model, job.num_workers, job.num_ps)
        s = job.iterations * one
        return s if math.isfinite(s) else 0.0

    def _best(self, job: Job, sim: Simulator, options: list) -> Placement | None:
        until = sim.now + max(self.horizon_s, self._run_s(job, sim))
        seeds = self.rng.integers(2**63, size=self.k)
        scores = np.zeros((self.k, len(options)))
        for row, seed in enumerate(seeds):  # the same future for every candidate
            start = self._splice(sim, job, np.random.default_rng(seed))
            for i, p in enumerate(options):
                scores[row, i] = self.playout(start, job.job_id, p, until)
        mean = scores.mean(axis=0)
        if self.margin > 0:  # only candidates clearly better than the base's in every future
            clear = (scores < (1.0 - self.margin) * scores[:, :1]).all(axis=0)
            clear[0] = True
            mean = np.where(clear, mean, np.inf)
        return options[int(np.argmin(mean))]

    def playout(self, start: Simulator, job_id: int, p: Placement | None, until: float) -> float:
        """Estimated total JCT (s) of the jobs submitted by ``until`` when the pending
        job is placed as ``p`` (``None``: deferred) and ``base`` places the rest."""
        f = start.fork()
        f.apply(p)
        if p is None:
            f.recheck_at(job_id, f.now + self.horizon_s)
        while (nxt := f.next_decision()) is not None and f.now <= until:
            f.apply(self.base.place(nxt, f.view()))
        return f.estimated_total_jct(until)

    def _splice(self, sim: Simulator, job: Job, rng: np.random.Generator) -> Simulator:
        """A fork of ``sim`` with one future: the trace's (``future="true"``), or with
        the later arrivals sampled unless ``"true-arrivals"`` and the lengths of the
        jobs not yet finished drawn from their estimates unless ``"true-lengths"``."""
        f = sim.fork()
        f.jobs = list(f.jobs)  # replace_arrivals writes into the job list
        if self.future == "true":
            return f
        model = self.model
        pending = f.pending_arrivals()
        estimate = getattr(sim, "_estimate", None)

        def draw(j: Job, done: float) -> float:
            e = job.iterations if j.job_id == job.job_id else math.nan
            if estimate is not None and j.job_id != job.job_id:
                e = estimate(j)
            return model.true_total(e, done, rng, model.prior_iterations(j.model, rng))

        if self.future == "true-arrivals":  # the trace's arrivals, lengths drawn
            f.replace_arrivals([replace(j, iterations=draw(j, 0.0)) for j in pending])
        else:
            first = sim.jobs[0].submit_time
            rate = model.rate(len(sim.jobs) - len(pending), sim.now - first)
            f.replace_arrivals(model.sample_future(pending, f.now, rate, rng))
        if self.future == "true-lengths":  # the jobs already here keep their lengths
            return f
        for run in f.running.values():
            f._progress(run)
            done = run.job.iterations - run.remaining
            run.remaining = max(draw(run.job, done) - done, 1e-6)
        if f.running:  # new completion events at the drawn lengths
            f._refresh(set(f.running), set(), set())
        new = {j.job_id: replace(j, iterations=draw(j, 0.0)) for j in f.queue}
        self._swap(f, new)
        return f

    @staticmethod
    def _swap(f: Simulator, new: dict[int, Job]) -> None:
        """Put ``new`` (by job id) in place of the queued jobs everywhere ``f`` holds them."""

        def sub(seq: list[Job]) -> list[Job]:
            return [new.get(j.job_id, j) for j in seq]

        for jid, j in new.items():
            f.jobs[jid] = j
        f.queue = sub(f.queue)
        f._arrived = sub(f._arrived)
        f._widths = {w: sub(b) for w, b in f._widths.items()}
        if f._scan is not None:
            f._scan = sub(f._scan)
        if f._pending is not None:
            f._pending = new.get(f._pending.job_id, f._pending)


class OraclePolicy(PlannerPolicy):
    """The planner on the trace's true future arrivals and true lengths, K = 1."""

    name = "oracle"
    description = (
        "bound, never a policy claim: the planner on the trace's true future "
        "arrivals and true lengths (K = 1)"
    )

    def __init__(self, horizon_s: float = 3600.0, base: str = "lookahead", **options) -> None:
        options.pop("k", None)
        super().__init__(k=1, horizon_s=horizon_s, base=base, future="true", **options)


class LengthsOraclePolicy(PlannerPolicy):
    """The planner knowing the true lengths of the jobs already submitted, with the
    later arrivals sampled from the workload model."""

    name = "oracle-lengths"
    description = (
        "bound, never a policy claim: the planner with the submitted jobs' true lengths "
        "and sampled later arrivals (K futures)"
    )

    def __init__(self, **options) -> None:
        super().__init__(future="true-lengths", **options)


class ArrivalsOraclePolicy(PlannerPolicy):
    """The planner knowing the trace's later arrivals (lengths drawn from their
    estimates), with the submitted jobs' lengths drawn from their estimates."""

    name = "oracle-arrivals"
    description = (
        "bound, never a policy claim: the planner with the trace's later arrivals and "
        "every length drawn from its estimate (K futures)"
    )

    def __init__(self, **options) -> None:
        super().__init__(future="true-arrivals", **options)
