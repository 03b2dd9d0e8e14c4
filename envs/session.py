"""The placement session of ``ClusterPlacement-v1``: one job's tentative placement,
task by task, and the action masks that follow from the environment's rules.

A :class:`PlacementSession` holds the tasks placed so far and what they take (the
simulator learns of the job only when its whole placement is applied); its parts give
the masks (:class:`envs.masks.SessionMasks`), the hints' plans
(:class:`envs.hints.SessionHints`) and the job's features
(:class:`envs.features.SessionFeatures`). With ``env.migration: on`` a session may
re-place a running job (a *move*, on :func:`released_view`), whose acting agent's own
forward slot is **keep** until the first task is placed. Rules: :mod:`envs.cluster_env`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from envs.features import MAX_SLOWDOWN, SessionFeatures
from envs.hints import SessionHints, follow_action
from envs.masks import SessionMasks
from envs.observations import ObservationBuilder
from envs.rules import action_towards
from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job, Placement
from marl_sched.policies.heuristics import ps_near_workers
from marl_sched.policies.levers import (
    UPGRADE_TRIES,
    UpgradePolicy,
    remaining_iterations,
    remaining_work_s,
)
from marl_sched.policies.load_control import given_back
from marl_sched.simulator import ClusterView, RunningInfo


class PlacementSession(SessionMasks, SessionHints, SessionFeatures):
    """The tentative placement of one job, task by task (a draft over a view).

    Args:
        builder: the observation builder of the topology.
        job: the job to place.
        view: the cluster when the job came up (not modified); for a move, the
            cluster with the job's own resources free (:func:`released_view`).
        home: the agent the job arrives at (for a move, the agent offered it).
        moving: for a move, the running job as the simulator shows it (its current
            placement, slowdown and attained service); None for an arriving job.
        moves: for a move, how often the job has moved before.
        gain: for a move offered by ``migration_offer: remaining``, the estimated net
            saving of its best upgrade over its estimated remaining run
            (:meth:`MoveBook.pick`).
        plan: for a move with ``migration_where: rule``, the upgrade rule's option
            for the job: the acting agent's only actions are keep and
            :meth:`move_action`, which places the whole option at once.
        follows: False for a session that only checks which placements the masks can
            make (:func:`follows_forward_rule`): its follow actions are never taken, so
            no hint is asked and the follow columns of its masks stay 0; the local and
            forward columns are the same either way. (A scoped hint that draws random
            numbers is still asked, so that its generator advances as it would.)
    """

    def __init__(
        self,
        builder: ObservationBuilder,
        job: Job,
        view: ClusterView,
        home: int,
        moving: RunningInfo | None = None,
        moves: int = 0,
        gain: float = 0.0,
        plan: Placement | None = None,
        follows: bool = True,
    ):
        self.builder = builder
        self.ask_plan_hints = follows
        self.ask_follows = follows or any(hasattr(h, "rng") for h in builder.scoped_hint_policies)
        self.job = job
        self.view = view
        self.moving = moving
        self.moves = int(moves)
        self.gain = float(gain)
        self.plan = plan if moving is not None else None
        self.kept = False  # a move declined (the keep action)
        spec = CATALOGUE[job.model]
        self.spec = spec
        w = view.perf.level_weights
        self.cost_weights = (w * spec.sensitivity, w * spec.pressure)
        self.group_free = np.asarray(view.group_free, dtype=np.float64).copy()
        self.cpu = np.array(view.server_cpu_free, dtype=np.float64)
        self.mem = np.array(view.server_mem_free, dtype=np.float64)
        self.job_groups = np.zeros(builder.topology.n_groups)
        self.workers: list[int] = []
        self.ps: list[int] = []
        self.agent = home
        self.visited = {home}
        self.hops = 0
        self._init_masks()
        self._init_hints()
        self._init_features()

    # ------------------------------------------------------------------ state

    @property
    def can_keep(self) -> bool:
        """A move before its first task is placed: the acting agent may keep the job
        where it is (its own forward slot)."""
        return self.moving is not None and self.task == 0 and not self.kept

    def move_action(self) -> int | None:
        """With a :attr:`plan` before any task is placed: the action that takes it
        (:func:`action_towards` its first task's group: the agent's local slot, or
        forwarding to the group's owner); else None."""
        if self.plan is None or not self.can_keep:
            return None
        return action_towards(self.builder, self.agent, self.plan.worker_groups[0])

    @property
    def task(self) -> int:
        return len(self.workers) + len(self.ps)

    @property
    def is_worker(self) -> bool:
        return len(self.workers) < self.job.num_workers

    @property
    def workers_left(self) -> int:
        return self.job.num_workers - len(self.workers)

    @property
    def done(self) -> bool:
        return self.kept or self.task >= self.job.num_tasks

    # ------------------------------------------------------------------ actions

    def act(self, action: int) -> None:
        """Apply the acting agent's action (local group slot, forward or follow)."""
        b = self.builder
        g_max = b.pad[0]
        mask = self.action_mask(self.agent)
        if not (0 <= action < len(mask)) or mask[action] == 0:
            raise ValueError(f"agent {b.agent_ids[self.agent]}: action {action} is masked")
        self._masks = {}  # every action below changes what is legal
        if action >= g_max + b.n_agents:  # follow a hint's plan: the action towards its
            # next task's group (its local slot, or a plan hint's forward to its owner)
            g = self.follow_targets(self.agent)[action - g_max - b.n_agents]
            action = action_towards(b, self.agent, g)
        if action == g_max + self.agent and self.can_keep:
            self.kept = True  # the move is declined
            return
        elif action == self.move_action():  # the rule's option, whole
            for g in (*self.plan.worker_groups, *self.plan.ps_groups):
                self._add(g)
            self._task_placed_masks()
            self._task_placed_hints()
            return
        elif action >= g_max:
            self.agent = action - g_max
            self.visited.add(self.agent)
            self.hops += 1
            return
        else:
            g = int(b.scopes[self.agent].groups[action])
        self._add(g)
        if b.ps_rule and self.job.num_ps and not self.ps and not self.is_worker:
            ps = ps_near_workers(self.job, self.view, self.workers)
            for p in ps or ():
                self._add(p)
        self.visited = {self.agent}
        self.hops = 0
        self._task_placed_masks()
        self._task_placed_hints()

    def _add(self, g: int) -> None:
        """Put the current task on global group ``g`` (the job's own accounting)."""
        t, s = self.builder.topology, self.spec
        srv = t.group_server[g]
        if self.is_worker:
            self.group_free[g] -= 1
            self.cpu[srv] -= s.cpu_worker
            self.workers.append(g)
        else:
            self.cpu[srv] -= s.cpu_ps
            self.ps.append(g)
        self.mem[srv] -= s.mem_gb
        self.job_groups[g] += 1

    def placement(self) -> Placement:
        return Placement(tuple(self.workers), tuple(self.ps))

    def moved(self) -> bool:
        """A finished move that changes where the job runs (not kept, and not the
        same groups as now, as multisets of workers and of PS)."""
        if self.moving is None or self.kept or not self.done:
            return False
        old = self.moving.placement
        return sorted(self.workers) != sorted(old.worker_groups) or sorted(self.ps) != sorted(
            old.ps_groups
        )


class MoveBook:
    """The bookkeeping of the migration decision (``env.migration: on``): which agents a
    completion triggers, which running job each offered agent is given, and each job's
    moves so far (one per episode in the env, one per run in
    :class:`agents.policy.MarlPolicy`).

    Args:
        builder: the observation builder (scopes and the cadence options
            ``migration_max_moves`` / ``migration_min_interval_s``).
    """

    def __init__(self, builder: ObservationBuilder) -> None:
        self.builder = builder
        self.scopes: dict[int, frozenset[int]] = {}  # running job -> its workers' agents
        self.moves: dict[int, int] = {}  # job -> moves so far
        self.last_move: dict[int, float] = {}  # job -> time of its last move
        self.offered: set[int] = set()  # jobs offered at the current trigger
        self._upgrade = None  # the upgrade rule whose candidates ``remaining`` offers
        self.gains: dict[int, float] = {}  # job -> net saving / remaining run when offered
        self.options: dict[int, Placement] = {}  # job -> the rule's option when offered

    def placed(self, job_id: int, placement: Placement) -> None:
        """A job started (or moved) on ``placement``: its workers' agents are the
        ones its completion triggers."""
        groups = list(placement.worker_groups)
        self.scopes[job_id] = frozenset(self.builder.group_scope[groups].tolist())

    def finished(self, job_ids) -> set[int]:
        """The agents that held a worker of the finished jobs ``job_ids``; a new
        trigger begins (no job offered at it yet)."""
        agents: set[int] = set()
        for jid in job_ids:
            agents |= self.scopes.pop(jid, frozenset())
        self.offered = set()
        return agents

    def pick(
        self, view: ClusterView, agent: int, known: Callable[[int], Job | None] | None = None
    ) -> RunningInfo | None:
        """The running job offered to ``agent`` (marked offered): of those with a
        worker in its scope that may move (not restarting, under the cap, past the
        minimum interval, the simulator's own cap and interval, not offered yet at
        this trigger): ``migration_offer: slowdown``, of those with a worker in its
        scope the most slowed one, then the lowest id; ``remaining``, the upgrade
        rule's next candidate anywhere (:meth:`_upgradable`; ``known(job_id)``: the
        job as the agents know it, its length an estimate; None: unknown, never
        offered). None when none may."""
        b = self.builder
        if b.migration_offer == "remaining":
            if known is None:
                raise ValueError("migration_offer 'remaining' needs the jobs' estimates")
            best = self._upgradable(view, known)
        else:
            best, key = None, None
            for info in self._movable(view):
                if agent not in b.group_scope[list(info.placement.worker_groups)]:
                    continue
                k = (min(info.slowdown, MAX_SLOWDOWN), -info.job_id)
                if key is None or k > key:
                    best, key = info, k
        if best is not None:
            self.offered.add(best.job_id)
        return best

    def _movable(self, view: ClusterView):
        """The running jobs that may move now (not offered yet at this trigger, not
        restarting, under the cap, past the minimum interval, the simulator's own cap
        and interval where it has them)."""
        b, now = self.builder, view.now
        for info in view.running():
            jid = info.job_id
            if not (
                jid in self.offered
                or info.paused_until > now
                or self.moves.get(jid, 0) >= b.migration_max_moves
                or now - self.last_move.get(jid, -math.inf) < b.migration_min_interval_s
                or now < getattr(info, "next_move_at", 0.0)
            ):
                yield info

    def _upgradable(self, view: ClusterView, known) -> RunningInfo | None:
        """``migration_offer: remaining``: the ``upgrade`` rule's candidates (of the
        jobs that may move, anywhere in the cluster, remaining work >= its
        ``long_work_s``; the longest estimated remaining work first, at most
        :data:`~marl_sched.policies.levers.UPGRADE_TRIES`): the first whose best faster
        or consolidated option free now saves more than its restart (the rule's own
        move), else the one whose option comes nearest (the largest net saving,
        :meth:`~marl_sched.policies.levers.UpgradePolicy.best_option`: the learned
        predictor's estimate and the measured restart); none without an option.
        Whether to move, and where, is the agent's decision; the net saving over the
        job's estimated remaining run is a feature (``upgrade_gain``, :attr:`gains`)."""
        if self._upgrade is None:
            self._upgrade = UpgradePolicy()
            self._upgrade.reset(self.builder.topology, 0)
        up, found = self._upgrade, []
        for info in self._movable(view):
            job = known(info.job_id)
            work = -math.inf if job is None else remaining_work_s(job, info)
            if up.is_candidate(work):
                found.append((-work, info.job_id, info, job))
        found.sort(key=lambda c: c[:2])
        best, best_gain, share, option = None, -math.inf, 0.0, None
        for _, _, info, job in found[:UPGRADE_TRIES]:
            left = remaining_iterations(job, info)
            placement, gain = up.best_option(view, info, job, left)
            if gain > best_gain:
                best, best_gain, option = info, gain, placement
                share = gain / max(left * info.iter_time, 1.0)
            if gain > 0:  # the rule's own move: the first candidate whose option pays
                break
        if best is not None:
            self.gains[best.job_id] = share
            self.options[best.job_id] = option
        return best

    def session(
        self, view: ClusterView, info: RunningInfo, job: Job, agent: int, group_free: np.ndarray
    ) -> PlacementSession:
        """The move of ``info`` (seen as ``job``) offered to ``agent``, on ``view``
        with the job's own resources free (``group_free``: its usable GPUs were its
        own released, :meth:`marl_sched.simulator.Simulator.group_free_for`)."""
        released = released_view(view, info, group_free)
        plan = self.options.pop(info.job_id, None)
        if self.builder.migration_where != "rule":
            plan = None
        return PlacementSession(self.builder, job, released, agent, moving=info,
                                moves=self.moves.get(info.job_id, 0),
                                gain=self.gains.pop(info.job_id, 0.0), plan=plan)  # fmt: skip

    def moved(self, job_id: int, placement: Placement, now: float) -> None:
        """The simulator applied a move of ``job_id`` to ``placement`` at ``now``."""
        self.moves[job_id] = self.moves.get(job_id, 0) + 1
        self.last_move[job_id] = now
        self.placed(job_id, placement)


def released_view(view: ClusterView, info: RunningInfo, group_free: np.ndarray) -> ClusterView:
    """``view`` with the running job ``info``'s GPUs, cores and memory free, what a
    move is placed on. ``group_free``: the GPUs it could use were its own released
    (:meth:`marl_sched.simulator.Simulator.group_free_for`: GPU memory and sharing
    rules included). Pressures, link counts and exposures still count the job
    where it runs (documented in :mod:`envs.cluster_env`)."""
    cpu, mem = given_back(view, info)
    return dataclasses.replace(
        view,
        group_free=np.asarray(group_free),
        server_cpu_free=cpu,
        server_mem_free=mem,
        free_gpus=view.free_gpus + info.num_workers,
    )


def plan_action(session: PlacementSession, plan: Placement) -> int | None:
    """The acting agent's action towards ``plan`` for the current task (the warm start's
    label): a hint's follow action planning exactly ``plan``, else
    :func:`action_towards` the task's group; None past the plan's tasks. May be masked."""
    groups = (*plan.worker_groups, *plan.ps_groups)
    if session.task >= len(groups):
        return None
    move = session.move_action()
    if move is not None:  # migration_where: rule, keep or the option
        return move if plan == session.plan else None
    action = follow_action(session, plan)
    if action is None:
        action = action_towards(session.builder, session.agent, groups[session.task])
    return action


def placement_steps(builder: ObservationBuilder, start: int, placement: Placement) -> list[int]:
    """The actions that place ``placement`` task by task, starting at agent ``start``:
    a task whose group lies in another scope is first forwarded straight to its owner."""
    steps, k = [], start
    for g in (*placement.worker_groups, *placement.ps_groups):
        owner = int(builder.group_scope[g])
        if owner != k:
            steps.append(action_towards(builder, k, g))
            k = owner
        steps.append(action_towards(builder, k, g))
    return steps


def follows_forward_rule(
    builder: ObservationBuilder, job: Job, view: ClusterView, home: int, placement: Placement
) -> bool:
    """Can ``placement`` be made through the masks (forward when you must) from ``home``?
    (No hint is asked: the check takes no follow action.)"""
    session = PlacementSession(builder, job, view, home, follows=False)
    for action in placement_steps(builder, home, placement):
        if session.action_mask(session.agent)[action] == 0:
            return False
        session.act(action)
    return session.done
