"""Teachers whose placements warm-start the agents by behaviour cloning.

Both teachers choose among the placements the heuristics propose (each heuristic is
asked on the whole view and on each subcluster that can hold the job); they differ in
how they score a proposal:

- :class:`LookaheadTeacher` — the job's own predicted iteration time right after
  placing it (one step, myopic: it ignores what the job does to its neighbours and
  to the jobs that arrive later);
- :class:`RolloutTeacher` — a rollout policy in Bertsekas's sense: for each proposal,
  a fork of the simulator applies it and runs on with a base heuristic; the proposal
  with the lowest estimated total JCT of the window wins. With the base heuristic's
  own placement among the proposals, a full-horizon rollout is never worse than the
  base heuristic on the rolled-out episode (the classical rollout improvement
  property — up to the end-of-horizon estimate). It looks at future arrivals, which
  no online scheduler can: a privileged teacher for training only, never a policy.

Teachers take ``legal`` (a predicate: only placements the agents' masks can
produce) and ``views`` (the views to ask the heuristics on).
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
    accepts, in proposal order."""
    out, seen = [], set()
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
    """The slowed progress, in GPU-equivalents, that placing ``job`` as ``p`` costs right
    away: its own workers at their predicted slowdown (``workers`` × the predicted
    iteration time over the job's isolated one) plus the slowdown its tasks add to the
    jobs already running near them, each weighted by its workers
    (:func:`marl_sched.simulator.harm_to_residents`, the agents' ``harm_to_residents``
    feature). One step and no future, as :func:`predicted_iteration_time`; it also
    counts what the placement costs the others. ``harms``: :func:`residents_harm` of
    ``job`` on ``view``, when several placements of one job are scored."""
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
    """Per job, the heuristic placement with the lowest predicted iteration time
    (ties: proposal order). A one-step lookahead over the heuristics.

    ``harm``: the lowest :func:`total_slowdown` instead (the job's own slowdown plus
    the slowdown it adds to the running jobs), the same proposals."""

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

    def fastest(self, job: Job, view: ClusterView, placements: list) -> Placement | None:
        """The placement this teacher predicts fastest for the job (:func:`fastest`)."""
        return fastest(job, view, placements)

    def place(self, job, view, legal=None, views=None, sim=None):
        """The fastest proposal, or the least total slowdown with ``harm`` (``sim`` is
        not needed and ignored)."""
        found = proposals(self.candidates, job, views or [view], legal)
        if not self.harm:
            return self.fastest(job, view, found)
        harms = residents_harm(job, view)
        costs = [total_slowdown(job, view, p, harms) for p in found]
        return found[int(np.argmin(costs))] if found else None


class RolloutTeacher(LookaheadTeacher):
    """Per job, the proposal whose simulated future has the lowest total JCT.

    Args:
        base: the registered heuristic (e.g. ``resident-aware``) that places every
            later job in a rollout and whose placement ``margin`` keeps.
        min_workers: jobs with fewer workers get the one-step lookahead's choice (a
            single-GPU job has no communication to arrange; rollouts cost time).
        horizon_jobs: a rollout ends at the arrival of the ``horizon_jobs``-th job
            after now (0 = at the end of the simulator's job list); the score is
            :meth:`Simulator.estimated_total_jct` of the jobs submitted by then.
        candidates: the heuristics that propose placements.
        margin: keep the base heuristic's own placement (on the whole view, when the
            masks allow it) unless another proposal's score is lower by more than
            this fraction of the base's score (0 = always the best score). A
            conservative teacher: it departs from the base only for a clear gain,
            which is more likely to come from the state it sees now than from the
            particular future it looks at.
        protect: when > 0, one more proposer: interference-aware whose cost also
            counts the harm to resident jobs weighted by their size, this many times
            (:class:`~marl_sched.policies.heuristics.InterferenceAwarePolicy`).
        speed: when > 0, one more proposer: interference-aware whose cost also counts
            how much slower each GPU type runs the job's compute, this many times (its
            ``speed``); the rollouts tell when a fast GPU is worth it (a long job) and
            when it is not.
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
        """``sim``: the simulator whose pending decision is ``job`` (required for
        jobs of ``min_workers`` or more; ``job`` may be the copy a duration predictor
        shows the agents). The rollouts fork ``sim``, which knows true lengths: a
        privileged teacher, used in training only."""
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


def _hint_plan(teacher, session) -> Placement | None:
    """With ``env.follow_only`` the agents choose among the hints' plans (or forward the
    job), so the teacher does too: among the acting agent's plans whose follow action
    is legal and the plans of every agent it may forward the job to, the ``lookahead``
    teacher's (the lowest predicted iteration time; ties: the acting agent first, then
    hint order) or, for a heuristic teacher, its own hint's there. None for another
    teacher (the rollout teacher scores whole futures, not these plans) or when no plan
    is legal. The labels are then the forward to the plan's agent and its follow."""
    b, home = session.builder, session.agent
    mask = session.action_mask(home)
    first = b.pad[0] + b.n_agents
    order = [home] + [k for k in range(b.n_agents) if k != home and mask[b.pad[0] + k] > 0]
    plans = [
        (name, p)
        for k in order
        for i, (name, p) in enumerate(zip(b.hints, session.plans(k), strict=True))
        if p is not None and (k != home or mask[first + i] > 0)
    ]
    if isinstance(teacher, LookaheadTeacher) and not isinstance(teacher, RolloutTeacher):
        return teacher.fastest(session.job, session.view, [p for _, p in plans])
    return next((p for name, p in plans if name == getattr(teacher, "name", None)), None)


def teacher_plan(teacher, session, sim: Simulator | None = None) -> Placement | None:
    """The teacher's whole placement of ``session.job`` from the session's first task
    (``session``: an :class:`envs.session.PlacementSession` before any action).

    Only placements reachable through the agents' masks (the forward rule from the
    job's home agent) are allowed; the heuristics also see each subcluster that can
    hold the whole job alone (a job moves whole; it is split only when none can).
    ``teacher``: a :class:`LookaheadTeacher` / :class:`RolloutTeacher`, a policy that
    acts inside the agents' masks itself (``masked:*``, :mod:`envs.controls`: its
    placement on the whole view, if the forward rule allows it), or any other policy
    (its first legal placement over those views)."""
    job, view = session.job, session.view
    if session.builder.follow_only:
        return _hint_plan(teacher, session)
    legal = _forward_legal(session)
    if isinstance(teacher, MaskedHeuristic):  # it acts inside the agents' masks itself
        p = teacher.place(job, view)
        return p if p is not None and legal(p) else None
    views = _plan_views(session)
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


def _plan_views(session) -> list[ClusterView]:
    """The views the heuristics are asked on: each subcluster that can hold the whole
    job alone, then the whole view."""
    from envs.rules import scope_view

    builder, view = session.builder, session.view
    if builder.n_agents == 1:
        return [view]
    rest = session.scope_can_host_rest()
    return [scope_view(builder, view, k) for k in np.flatnonzero(rest)] + [view]


def plan_options(teacher: LookaheadTeacher, session) -> list[Placement]:
    """The proposals the ``lookahead`` teacher chooses among in :func:`teacher_plan`
    (``env.follow_only`` off): the heuristics' placements on :func:`_plan_views` that
    the forward rule lets the agents reach from the job's home agent, in proposal
    order (the teacher's plan is :func:`fastest` of them)."""
    if session.builder.follow_only:
        raise ValueError("plan_options: env.follow_only plans are the hints' (_hint_plan)")
    views = _plan_views(session)
    return proposals(teacher.candidates, session.job, views, _forward_legal(session))


def teacher_move(teacher, session, view: ClusterView) -> Placement | None:
    """The teacher's decision on a move (``env.migration: on``): where to re-place
    the running job ``session`` offers (an :class:`envs.session.PlacementSession`
    with ``moving`` set, before any action), or None to keep it.

    Whether to move is MLFS's load-control rule, the one the ``+lc`` baselines use
    (:func:`marl_sched.policies.load_control.move_for`: the job has a worker on an
    overloaded server and may move); where to is the teacher's own placement
    (:func:`teacher_plan`) from the offered agent on the cluster with the job's own
    resources given back and the overloaded servers closed
    (:func:`marl_sched.policies.load_control.released_view`), kept only when it
    changes the job's servers and the agents' masks can make it in this session.
    ``view``: the cluster (``Simulator.view()`` between decisions). What it reads is
    what the ``+lc`` policies read: the view and its running jobs (placement,
    slowdown, attained service) and the job as the session shows it (its estimated
    length) — no future arrival, no true length (no simulator is forked)."""
    from envs.session import PlacementSession, placement_steps
    from marl_sched.policies.load_control import move_for, released_view

    builder, agent = session.builder, session.agent

    def relocate(info, over) -> Placement | None:
        trial = PlacementSession(builder, session.job, released_view(view, info, over), agent)
        if not trial.feasible():
            return None
        return teacher_plan(teacher, trial)

    p = move_for(view, session.moving, relocate)
    if p is None:
        return None
    probe = PlacementSession(builder, session.job, session.view, agent,
                             moving=session.moving, moves=session.moves)  # fmt: skip
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
):
    """A teacher by name: ``lookahead``, ``rollout`` (``margin``, ``protect``,
    ``speed``, ``base``: see :class:`RolloutTeacher`) or a heuristic's name."""
    if name == "lookahead":
        return LookaheadTeacher()
    if name == "rollout":
        return RolloutTeacher(base=base, margin=margin, protect=protect, speed=speed)
    from marl_sched.policies import make_policy

    return make_policy(name)


class MaskedLookahead(MaskedHeuristic):
    """The default recipe's warm-start teacher as a policy: per job the
    :class:`LookaheadTeacher`'s plan (:func:`teacher_plan`: the heuristics' proposals on
    the whole view and on each subcluster that can hold the job, the forward rule's
    reachable ones only, the one with the lowest predicted iteration time), followed
    inside the agents' masks by forwards and GPU-group slots, under the rules of the
    agents' own environment (``configs/default.yaml``'s ``env:``, the env the recipe's
    clone is taught in), not the pre-registered rules of the other controls.

    No network and no learning, no future arrivals and no true lengths; but it scores
    each proposal with the simulator's own performance model exactly
    (:func:`predicted_iteration_time`), where the agents read that model's inputs as
    features. It is the rule ``configs/learn.yaml``'s warm start imitates, so what a learned
    policy taught by it adds is measured against it (docs/agents.md, "The teacher as a
    policy"). Registered as kind ``teacher``, not ``control``: its rules follow the
    default recipe, while the pre-registered controls' are pinned. A combination of
    heuristics rather than one, so it is no hint and has no follow action."""

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
    """:class:`MaskedLookahead` with the teacher's ``harm`` criterion: per job the
    proposal with the least :func:`total_slowdown` (its own workers' slowdown plus
    what it adds to the running jobs), not the fastest for itself. The same
    proposals, views, masks and rules; no weight to choose (both terms are
    GPU-equivalents of slowed progress). A probe of the room a one-step rule without
    the future leaves above the myopic teacher (docs/agents.md, "The teacher as a
    policy")."""

    name = "masked:lookahead-harm"
    description = (
        "masked:lookahead choosing the proposal with the least total slowdown "
        "(its own plus what it adds to running jobs)"
    )
    harm = True


class LearnedLookaheadTeacher(LookaheadTeacher):
    """:class:`LookaheadTeacher` scoring each proposal with an estimate a real
    scheduler could compute instead of the performance model
    (:func:`marl_sched.interference.estimate.estimated_iteration_times`: the job's
    profiled speed on the proposal's slowest GPU type and its bytes over the links'
    bandwidths, times the shipped learned interference model's predicted slowdown).
    The same proposals; the lowest estimate wins (ties: proposal order)."""

    name = "lookahead-learned"

    def __init__(self, candidates: tuple[str, ...] = LOOKAHEAD_CANDIDATES) -> None:
        from marl_sched.interference.estimate import load_predictor

        super().__init__(candidates)
        self.model = load_predictor()

    def fastest(self, job: Job, view: ClusterView, placements: list) -> Placement | None:
        from marl_sched.interference.estimate import estimated_iteration_times

        if not placements:
            return None
        times = estimated_iteration_times(view, job, placements, self.model)
        return placements[int(np.argmin(times))]


class MaskedLookaheadLearned(MaskedLookahead):
    """:class:`MaskedLookahead` with no call of the performance model on a placement
    that has not happened: the same proposals (the heuristics' on the whole view and
    on each subcluster that can hold the job, the forward rule's reachable ones), the
    same views, masks and env rules, but each proposal is scored by
    :class:`LearnedLookaheadTeacher`'s estimate. What it reads to score: the catalogue
    (the model's compute, size, pressure, sensitivity and per-GPU-type speed), the
    topology (links, bandwidths), the view's state (residents' pressures, busy GPUs,
    link use) and the shipped learned interference model
    (``checkpoints/interference/model.npz``); the placement's geometry through
    :meth:`~marl_sched.perf.PerformanceModel.layout`, whose alone-time-derived link
    share it replaces by bytes over bandwidth over the profiled alone time (the one
    approximated feature input, :mod:`marl_sched.interference.estimate`). A
    contender: what a one-step lookahead is worth when it must estimate, as a real
    scheduler must."""

    name = "masked:lookahead-learned"
    description = (
        "masked:lookahead scoring each proposal by profiled GPU speed and bandwidths "
        "times the learned interference model's predicted slowdown (no performance-model "
        "call on a hypothetical placement)"
    )

    def _make_planner(self):
        return LearnedLookaheadTeacher()
