"""The heuristic hints of a placement session (``env.hints`` / ``env.global_hints``;
documented in :mod:`envs.cluster_env`): each hint heuristic's plan for the job inside an
agent's scope, the remaining planned tasks and agreement that become features, the
follow actions' targets, and the global hints' shares of the job per scope.

:class:`SessionHints` is a part of :class:`envs.session.PlacementSession`: it reads the
session's draft (``builder``, ``job``, ``view``, ``workers``, ``ps``, ``is_worker``) and
its capacity (``arrival_capacity`` and ``_task_fits``, :mod:`envs.masks`), and keeps the
plans (fixed for the job) and what follows from them for the current task.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from envs.rules import placement_key, scope_view
from marl_sched.jobs import Placement
from marl_sched.policies.heuristics import scoped, shared_candidates
from marl_sched.simulator import ClusterView


class SessionHints:
    """The hints' plans of a placement session (module docstring)."""

    def _init_hints(self) -> None:
        """The caches fixed for the job, then those of the current task."""
        # per agent: the hints' plans and their per-group counts (fixed for the job)
        self._plans: dict[int, list[Placement | None]] = {}
        self._plan_counts: dict[int, list[tuple[_PlanCounts, _PlanCounts] | None]] = {}
        self._global: np.ndarray | None = None
        self._job_plans: list[Placement | None] | None = None
        # the learned model's features of candidate placements, shared by every hint
        # of this job (InterferenceAwarePolicy.candidate_cache)
        self._candidates: dict = {}
        # the arrival view, with a memo the hints asked on the whole cluster share
        self._whole = None
        self._task_placed_hints()

    def _task_placed_hints(self) -> None:
        """Forget the hint features and follow targets of the task just placed."""
        self._hints: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._follow: dict[int, list[int | None]] = {}

    def plans(self, agent: int) -> list[Placement | None]:
        """Per hint heuristic: its placement of the job inside ``agent``'s scope (on the
        view the job arrived on), or None; per plan hint, its one placement of the job
        (:meth:`job_plans`)."""
        if agent not in self._plans:
            b = self.builder
            scoped_hints = b.scoped_hint_policies
            if self._cannot_host(scoped_hints, self.arrival_capacity()[agent]):
                asked = [None] * len(scoped_hints)  # no heuristic can place it there
            else:
                view = self._whole_view() if b.central else scope_view(b, self.view, agent)
                asked = self._ask(scoped_hints, view)
            whole, scoped_plans = iter(self.job_plans()), iter(asked)
            plans = [next(whole) if w else next(scoped_plans) for w in b.plan_hints]
            self._plans[agent] = plans
            self._plan_counts[agent] = [
                None if p is None else (_PlanCounts(p.worker_groups), _PlanCounts(p.ps_groups))
                for p in plans
            ]
        return self._plans[agent]

    def job_plans(self) -> list[Placement | None]:
        """Per plan hint (in hint order): its policy's placement of the whole job on the
        view the job arrived on, made inside the agents' masks from the job's home agent
        (:class:`envs.controls.MaskedHeuristic`), the same for every agent; fixed for the
        job. None for a move (its options are the upgrade rule's or the agent's own) and
        in a session that only checks placements (``follows=False``)."""
        if self._job_plans is None:
            policies = self.builder.plan_hint_policies
            if (
                not self.ask_plan_hints
                or self.moving is not None
                or self._cannot_host(policies, self.arrival_capacity().sum())
            ):
                self._job_plans = [None] * len(policies)
            else:
                self._job_plans = [h.place(self.job, self.view) for h in policies]
        return self._job_plans

    def _cannot_host(self, policies, capacity: float) -> bool:
        """May asking ``policies`` be skipped: ``capacity`` (:meth:`arrival_capacity`)
        is below the job's workers, and none of them draws random numbers (the random
        heuristic's generator advances even when it returns None: skipping it would
        change its later plans)."""
        return capacity < self.job.num_workers and not any(hasattr(h, "rng") for h in policies)

    def _whole_view(self) -> ClusterView:
        """The view the job arrived on, with a memo shared by the hints asked on it."""
        if self._whole is None:
            self._whole = scoped(self.view)
        return self._whole

    def _ask(self, policies, view: ClusterView) -> list[Placement | None]:
        """Each policy's placement of the job on ``view``, the candidate features
        shared between them and every other hint of the job."""
        with shared_candidates(policies, self._candidates):
            return [h.place(self.job, view) for h in policies]

    def global_shares(self) -> np.ndarray:
        """``(H_global, A)``: per global hint, the share of the job's tasks its
        placement in the whole datacenter puts in each agent's scope (0 if it cannot
        place the job); fixed for the job."""
        if self._global is None:
            b = self.builder
            out = np.zeros((len(b.global_policies), b.n_agents))
            skip = self._cannot_host(b.global_policies, self.arrival_capacity().sum())
            asked = () if skip else self._ask(b.global_policies, self._whole_view())
            for i, p in enumerate(asked):
                if p is not None:
                    groups = np.asarray([*p.worker_groups, *p.ps_groups], dtype=np.int64)
                    scopes = b.group_scope[groups]
                    out[i] = np.bincount(scopes, minlength=b.n_agents) / len(groups)
            self._global = out
        return self._global

    def follow_targets(self, agent: int) -> list[int | None]:
        """Per hint: the global group its follow action puts the current task on, or
        None when the action is not legal (:mod:`envs.cluster_env`). A plan hint's
        group may lie in another scope: its follow action forwards the task to that
        scope's agent (legal when the forward is)."""
        if not self.builder.hints:
            return []
        if agent not in self._follow:
            _, agrees = self.hints(agent)
            fits = self._task_fits()
            placed = self.workers if self.is_worker else self.ps
            out = []
            for plan, ok in zip(self.plans(agent), agrees, strict=True):
                target = None
                if plan is not None and ok:
                    todo = list(plan.worker_groups if self.is_worker else plan.ps_groups)
                    for g in placed:  # the plan's tasks already placed, in its order
                        todo.remove(g)
                    if todo and fits[todo[0]] > 0:
                        target = int(todo[0])
                out.append(target)
            self._follow[agent] = out
        return self._follow[agent]

    def hints(self, agent: int) -> tuple[np.ndarray, np.ndarray]:
        """``(H, n_groups)`` remaining planned tasks of the current kind per group (over
        the job's tasks of that kind) and ``(H,)`` does the job so far agree with each
        plan (:mod:`envs.cluster_env`)."""
        if agent in self._hints:
            return self._hints[agent]
        self.plans(agent)
        counts = self._plan_counts[agent]
        n = self.builder.topology.n_groups
        placed_w, placed_p = Counter(self.workers), Counter(self.ps)
        worker = self.is_worker
        total = self.job.num_workers if worker else max(self.job.num_ps, 1)
        left = np.zeros((len(counts), n))
        agrees = np.zeros(len(counts), dtype=np.float32)
        placed = placed_w if worker else placed_p
        for i, plan in enumerate(counts):
            if plan is None:
                continue
            w, q = plan
            # the job agrees with a plan when no group holds more of its tasks than planned
            if w.covers(placed_w) and q.covers(placed_p):
                agrees[i] = 1.0
            # max(planned - placed, 0) / total, nonzero only on the plan's own groups
            mine = w if worker else q
            if len(mine.groups):
                have = np.array([placed[g] for g in mine.group_list], dtype=np.int64)
                left[i, mine.groups] = np.maximum(mine.counts - have, 0) / total
        self._hints[agent] = (left, agrees)
        return left, agrees


def follow_action(session: SessionHints, plan: Placement) -> int | None:
    """The acting agent's follow action whose hint plans exactly ``plan`` (the first
    such hint), when it is legal; else None."""
    b = session.builder
    if not b.hints:
        return None
    key = placement_key(plan)
    targets = session.follow_targets(session.agent)
    for i, p in enumerate(session.plans(session.agent)):
        if p is not None and targets[i] is not None and placement_key(p) == key:
            return b.pad[0] + b.n_agents + i
    return None


class _PlanCounts:
    """A hint plan's tasks of one kind per GPU group: its groups (sorted, as
    ``np.unique``), their task counts, and a count per group for lookups (the job's few
    groups, rather than a count for every group of the datacenter)."""

    def __init__(self, groups) -> None:
        self.by_group = by_group = Counter(map(int, groups))
        self.group_list = group_list = sorted(by_group)
        self.groups = np.array(group_list, dtype=np.int64)
        self.counts = np.array([by_group[g] for g in group_list], dtype=np.int64)

    def covers(self, placed: Counter) -> bool:
        """Does no group hold more of ``placed`` than the plan puts there?"""
        return all(c <= self.by_group.get(g, 0) for g, c in placed.items())
