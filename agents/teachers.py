"""Teachers whose placements warm-start the agents by behaviour cloning.

Each chooses among the heuristics' proposals (on the whole view and on each subcluster
that can hold the job): :class:`LookaheadTeacher` by predicted iteration time (one
step), :class:`RolloutTeacher` by the simulated total JCT of a forked future (privileged:
training only). ``legal`` filters to placements the agents' masks can produce; ``views``
are the views the heuristics are asked on (docs/agents.md).
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from envs.controls import MaskedHeuristic
from envs.rules import placement_key
from marl_sched.catalogue import CATALOGUE
from marl_sched.config import REPO_ROOT
from marl_sched.jobs import Job, Placement
from marl_sched.policies.heuristics import shared_candidates
from marl_sched.policies.lookahead import fastest, predicted_iteration_time
from marl_sched.simulator import ClusterView, Simulator, harm_to_residents

LOOKAHEAD_CANDIDATES = (
    "locality",
    "tetris",
    "interference-aware",
    "first-fit",
    "congestion-aware",
    "load-balance",
)


def proposals(candidates, job: Job, views, legal=None) -> list[Placement]:
    """Distinct placements proposed by ``candidates`` on ``views`` that ``legal``
    accepts, in proposal order. The views are of one cluster state, so the candidates
    share one interference-feature cache (:func:`shared_candidates`)."""
    out, seen = [], set()
    with shared_candidates(candidates):
        for view in views:
            for c in candidates:
                p = c.place(job, view)
                if p is None:
                    continue
                key = placement_key(p)
                if key in seen:
                    continue
                seen.add(key)
                if legal is None or legal(p):
                    out.append(p)
    return out


def total_slowdown(job: Job, view: ClusterView, p: Placement, harms=None) -> float:
    """The slowed progress (GPU-equivalents) placing ``job`` as ``p`` costs now: its
    workers × predicted over isolated iteration time, plus the worker-weighted slowdown
    it adds to running jobs (:func:`marl_sched.simulator.harm_to_residents`). ``harms``:
    a precomputed :func:`residents_harm` of ``job`` on ``view``."""
    iso = view.perf.isolated_iteration_time(job.model, job.num_workers, job.num_ps)
    own = job.num_workers * predicted_iteration_time(job, view, p) / iso
    worker_harm, ps_harm = residents_harm(job, view) if harms is None else harms
    return float(own + worker_harm[list(p.worker_groups)].sum() + ps_harm[list(p.ps_groups)].sum())


def residents_harm(job: Job, view: ClusterView) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU group, the size-weighted slowdown one more worker of ``job``, and one
    more of its parameter servers, would add to the running jobs near it."""
    pressure = CATALOGUE[job.model].pressure
    return harm_to_residents(view, pressure), harm_to_residents(view, pressure, ps=True)


def horizon_end(sim: Simulator, horizon_jobs: int) -> float:
    """Submit time of the ``horizon_jobs``-th job after now (of the last job when 0);
    ``now`` when none is left (``sim.jobs`` is sorted by submit time)."""
    jobs = sim.jobs
    first = bisect.bisect_right(jobs, sim.now, key=lambda j: j.submit_time)
    if first == len(jobs):
        return sim.now
    last = len(jobs) - 1
    if horizon_jobs > 0:
        last = min(last, first + horizon_jobs - 1)
    return jobs[last].submit_time


class LookaheadTeacher:
    """Per job, the heuristics' proposal with the lowest predicted iteration time (ties:
    proposal order); with ``harm``, the lowest :func:`total_slowdown` instead."""

    name = "lookahead"

    def __init__(
        self, candidates: tuple[str, ...] = LOOKAHEAD_CANDIDATES, harm: bool = False
    ) -> None:
        from marl_sched.policies import make_policy

        self.candidates = [make_policy(c) for c in candidates]
        self.harm = harm

    def reset(self, topology, seed: int = 0) -> None:
        for c in self.candidates:
            c.reset(topology, seed)

    def fastest(
        self, job: Job, view: ClusterView, placements: list, legal=None
    ) -> Placement | None:
        """The placement ``legal`` accepts that this teacher predicts fastest for the
        job (:func:`fastest`)."""
        return fastest(job, view, placements, legal)

    def place(self, job, view, legal=None, views=None, sim=None):
        """The fastest legal proposal, or the legal one with the least total slowdown
        with ``harm`` (``sim`` is not needed and ignored).

        Legality is asked lazily, only of a proposal that would win: the pick is the
        one filtering first would give, and most proposals are never checked."""
        found = proposals(self.candidates, job, views or [view])
        if not self.harm:
            return self.fastest(job, view, found, legal)
        harms = residents_harm(job, view)
        costs = [total_slowdown(job, view, p, harms) for p in found]
        order = np.argsort(costs, kind="stable")  # cost, then proposal order
        return next((found[i] for i in order if legal is None or legal(found[i])), None)


class RolloutTeacher(LookaheadTeacher):
    """Per job, the proposal whose simulated future has the lowest total JCT.

    Args:
        base: the registered heuristic (e.g. ``resident-aware``) that places every
            later job in a rollout and whose placement ``margin`` keeps.
        min_workers: jobs with fewer workers get the one-step lookahead's choice.
        horizon_jobs: a rollout ends at the arrival of the ``horizon_jobs``-th job
            after now (0 = at the end of the simulator's job list); the score is
            :meth:`Simulator.estimated_total_jct` of the jobs submitted by then.
        candidates: the heuristics that propose placements.
        margin: keep the base heuristic's own placement (on the whole view, when the
            masks allow it) unless another proposal's score is lower by more than
            this fraction of the base's (0 = always the best score).
        protect: when > 0, add interference-aware with this ``protect`` as a proposer
            (:class:`~marl_sched.policies.heuristics.InterferenceAwarePolicy`).
        speed: when > 0, add interference-aware with this ``speed`` as a proposer.
    """

    name = "rollout"

    def __init__(
        self,
        base: str = "interference-aware",
        min_workers: int = 2,
        horizon_jobs: int = 0,
        candidates: tuple[str, ...] = LOOKAHEAD_CANDIDATES,
        margin: float = 0.0,
        protect: float = 0.0,
        speed: float = 0.0,
    ) -> None:
        from marl_sched.policies.heuristics import InterferenceAwarePolicy, make_hint

        super().__init__(candidates)
        if protect > 0:
            self.candidates.append(InterferenceAwarePolicy(protect=protect))
        if speed > 0:
            self.candidates.append(InterferenceAwarePolicy(speed=speed))
        self.base = make_hint(base)
        self.min_workers = min_workers
        self.horizon_jobs = horizon_jobs
        self.margin = margin
        self.rollouts = 0

    def reset(self, topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        self.base.reset(topology, seed)

    def place(self, job, view, legal=None, views=None, sim: Simulator | None = None):
        """``sim``: the simulator whose pending decision is ``job`` (required for jobs
        of ``min_workers`` or more; ``ValueError`` otherwise); the rollouts fork it."""
        if job.num_workers < self.min_workers:
            return super().place(job, view, legal, views)
        if sim is None or sim.pending is None or sim.pending.job_id != job.job_id:
            raise ValueError("RolloutTeacher.place needs the simulator whose pending job it is")
        options = proposals(self.candidates, job, views or [view], legal)
        if len(options) <= 1:
            return options[0] if options else None
        until = self._horizon_end(sim)
        best, best_score = None, math.inf
        scores = {}
        for p in options:
            score = scores[placement_key(p)] = self.rollout(sim, p, until)
            if score < best_score - 1e-9:
                best, best_score = p, score
        if self.margin > 0:
            default = self.base.place(job, view)
            keep = None if default is None else scores.get(placement_key(default))
            if keep is not None and best_score > keep * (1.0 - self.margin):
                return default
        return best

    def _horizon_end(self, sim: Simulator) -> float:
        return horizon_end(sim, self.horizon_jobs)

    def rollout(self, sim: Simulator, placement: Placement, until: float) -> float:
        """Estimated total JCT (s) of the jobs submitted by ``until`` when the pending
        job is placed as ``placement`` and the base heuristic places the rest."""
        self.rollouts += 1
        f = sim.fork()
        f.apply(placement)
        while (nxt := f.next_decision()) is not None and f.now <= until:
            f.apply(self.base.place(nxt, f.view()))
        return f.estimated_total_jct(until)


def teacher_plan(teacher, session, sim: Simulator | None = None) -> Placement | None:
    """The teacher's whole placement of ``session.job`` (``session``: an
    :class:`envs.session.PlacementSession` before any action), restricted to what the
    forward rule lets the agents reach from the job's home agent. ``teacher``: a
    :class:`LookaheadTeacher` (asked on :func:`_plan_views`), a ``masked:*`` policy
    or a policy that needs the simulator (``planner``, ``oracle``: handed ``sim``; their
    whole-view placement, None when it defers), or any policy (its first legal
    placement over the views)."""
    job, view = session.job, session.view
    legal = _forward_legal(session)
    if isinstance(teacher, MaskedHeuristic):  # it acts inside the agents' masks itself
        p = teacher.place(job, view)
        return p if p is not None and legal(p) else None
    if getattr(teacher, "needs_simulator", False):  # the planner: forks the env's simulator
        p = teacher.place(job, view, sim=sim)
        return p if p is not None and legal(p) else None
    views = _plan_views(session, getattr(teacher, "home_only", False))
    if isinstance(teacher, LookaheadTeacher):
        return teacher.place(job, view, legal=legal, views=views, sim=sim)
    return next((q for v in views if (q := teacher.place(job, v)) and legal(q)), None)


def _forward_legal(session):
    """Is a whole placement of ``session.job`` reachable through the agents' masks (the
    forward rule from the job's home agent)?"""
    from envs.session import follows_forward_rule

    builder, job, view, home = session.builder, session.job, session.view, session.agent

    def legal(p: Placement) -> bool:
        return follows_forward_rule(builder, job, view, home, p)

    return legal


def _plan_views(session, home_only: bool = False) -> list[ClusterView]:
    """The views the heuristics are asked on: each subcluster that can hold the whole
    job alone (with ``home_only``, the job's home subcluster only, if it can), then the
    whole view."""
    from envs.rules import scope_view

    builder, view = session.builder, session.view
    if builder.n_agents == 1:
        return [view]
    rest = session.scope_can_host_rest()
    scopes = np.flatnonzero(rest)
    if home_only:
        scopes = scopes[scopes == session.agent]
    return [scope_view(builder, view, k) for k in scopes] + [view]


def teacher_move(teacher, session, view: ClusterView, upgrade=None) -> Placement | None:
    """The teacher's decision on a move (``env.migration: on``): where to re-place the
    running job ``session`` offers (``moving`` set, before any action), or None.

    ``upgrade`` None (``train.bc_move: load-control``): whether by MLFS's load-control
    rule (:func:`marl_sched.policies.load_control.move_for`), where by
    :func:`teacher_plan` on the :func:`~marl_sched.policies.load_control.released_view`.
    ``upgrade`` an :class:`~marl_sched.policies.levers.UpgradePolicy` reset on the
    topology (``bc_move: upgrade``): its decision on the job, seen with the estimate
    the agents see (:meth:`~marl_sched.policies.levers.UpgradePolicy.move_for`).
    Either is kept only when it changes the job's groups and the masks can make it.
    With ``env.migration_where: rule`` (the session's ``plan``, the offered option) only
    whether comes from the rule above: the plan when it moves the job, else None.
    ``view``: the cluster between decisions; no simulator is forked."""
    from envs.session import PlacementSession, placement_steps
    from marl_sched.policies.load_control import move_for, released_view

    builder, agent = session.builder, session.agent

    def relocate(info, over) -> Placement | None:
        trial = PlacementSession(builder, session.job, released_view(view, info, over), agent)
        if not trial.feasible():
            return None
        return teacher_plan(teacher, trial)

    if upgrade is None:
        p = move_for(view, session.moving, relocate)
    else:
        p = upgrade.move_for(view, session.moving, session.job)
    if p is None:
        return None
    if session.plan is not None:  # where is the offered option; the rule says whether
        return session.plan
    probe = PlacementSession(builder, session.job, session.view, agent, moving=session.moving,
                             moves=session.moves, follows=False)  # fmt: skip
    for action in placement_steps(builder, agent, p):
        if probe.done or probe.action_mask(probe.agent)[action] == 0:
            return None
        probe.act(action)
    return p if probe.done and probe.moved() else None


def make_teacher(
    name: str,
    margin: float = 0.0,
    protect: float = 0.0,
    speed: float = 0.0,
    base: str = "interference-aware",
    config=None,
):
    """A teacher by name: ``lookahead``, ``rollout`` (``margin``, ``protect``,
    ``speed``, ``base``: see :class:`RolloutTeacher`) or a registered policy's name
    (built from ``config``'s sections when it reads any: ``planner`` its ``planner:``)."""
    if name == "lookahead":
        return LookaheadTeacher()
    if name == "rollout":
        return RolloutTeacher(base=base, margin=margin, protect=protect, speed=speed)
    from marl_sched.policies import build_policy

    return build_policy(name, config=config)


class MaskedLookahead(MaskedHeuristic):
    """The default recipe's warm-start teacher as a policy: per job the
    :class:`LookaheadTeacher`'s plan (:func:`teacher_plan`), followed inside the agents'
    masks under ``configs/default.yaml``'s env rules (kind ``teacher``; docs/agents.md,
    "The teacher as a policy")."""

    name = "masked:lookahead"
    description = (
        "the default recipe's lookahead teacher followed inside the agents' masks, "
        "with their default env rules"
    )
    heuristic = ""  # no one heuristic: the teacher plans (:meth:`_make_planner`)
    recipe = REPO_ROOT / "configs" / "default.yaml"
    follow = False
    #: the teacher's ``harm`` criterion (:class:`LookaheadTeacher`)
    harm: bool = False

    def _make_planner(self):
        return LookaheadTeacher(harm=self.harm)

    def _plan(self, job, view, session):
        return teacher_plan(self.planner, session)


class MaskedLookaheadHarm(MaskedLookahead):
    """:class:`MaskedLookahead` choosing the proposal with the least
    :func:`total_slowdown` rather than the fastest for the job itself."""

    name = "masked:lookahead-harm"
    description = (
        "masked:lookahead choosing the proposal with the least total slowdown "
        "(its own plus what it adds to running jobs)"
    )
    harm = True


class LearnedLookaheadTeacher(LookaheadTeacher):
    """:class:`LookaheadTeacher` scoring each proposal by
    :func:`marl_sched.interference.estimate.estimated_iteration_times` (profiled speed
    and bandwidths times the learned interference model's slowdown) instead of the
    performance model; the lowest estimate wins (ties: proposal order)."""

    name = "lookahead-learned"

    def __init__(
        self, candidates: tuple[str, ...] = LOOKAHEAD_CANDIDATES, home_only: bool = False
    ) -> None:
        from marl_sched.interference.estimate import load_predictor

        super().__init__(candidates)
        self.model = load_predictor()
        #: ask the heuristics on the job's home subcluster and the whole view only
        #: (:func:`teacher_plan`), not on every subcluster that can hold the job
        self.home_only = home_only

    def fastest(
        self, job: Job, view: ClusterView, placements: list, legal=None
    ) -> Placement | None:
        from marl_sched.interference.estimate import estimated_iteration_times

        # Filter first: the predictor's rows are not batch-stable (a placement's estimate
        # can differ in its last bits with the batch it is predicted in), so predicting
        # illegal proposals too could change which legal one wins.
        if legal is not None:
            placements = [p for p in placements if legal(p)]
        if not placements:
            return None
        times = estimated_iteration_times(view, job, placements, self.model)
        return placements[int(np.argmin(times))]


class MaskedLookaheadLearned(MaskedLookahead):
    """:class:`MaskedLookahead` scoring each proposal by
    :class:`LearnedLookaheadTeacher`'s estimate: no performance-model call on a
    placement that has not happened (:mod:`marl_sched.interference.estimate`)."""

    name = "masked:lookahead-learned"
    description = (
        "masked:lookahead scoring each proposal by profiled GPU speed times the learned "
        "interference model's slowdown (no performance-model call on a hypothetical placement)"
    )

    def _make_planner(self):
        return LearnedLookaheadTeacher()


class MaskedLookaheadLearnedHome(MaskedLookaheadLearned):
    """:class:`MaskedLookaheadLearned` asking the heuristics on two views only: the
    job's home subcluster (when it can hold the job alone) and the whole datacenter,
    rather than on every subcluster that can, so its plan costs the same whatever the
    number of subclusters."""

    name = "masked:lookahead-learned-home"
    description = (
        "masked:lookahead-learned with the heuristics asked on the job's home subcluster "
        "and the whole datacenter only"
    )

    def _make_planner(self):
        return LearnedLookaheadTeacher(home_only=True)
