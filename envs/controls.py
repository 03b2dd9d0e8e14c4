"""Controls without learning: a heuristic inside the agents' action masks.

``masked:<heuristic>`` opens the agents' :class:`~envs.session.PlacementSession` with
the benchmark's pre-registered options (:data:`CONTROL_RULES`, pinned here) and takes
the first legal action of:

1. forward towards the heuristic's datacenter-wide plan for the task
   (:func:`envs.rules.action_towards`);
2. the follow action of its plan inside the acting scope;
3. the local slot of the group the datacenter-wide plan uses;
4. the first legal GPU-group slot, else the first legal forward.

A declined job stays queued; a control never moves a running job. Registered lazily by
import path as kind ``control`` (:mod:`marl_sched.policies.base`)."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import numpy as np

from envs.config import EnvConfig, env_config
from envs.observations import ObservationBuilder
from envs.rules import action_towards, home_agent
from envs.session import PlacementSession
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.jobs import Job, Placement
from marl_sched.policies.base import Policy, make_policy
from marl_sched.simulator import ClusterView
from marl_sched.topology import Topology

#: the ``env:`` decision options the controls act under (module docstring: the
#: benchmark's pre-registered rules, pinned); each is parsed and checked by
#: :func:`envs.config.env_config` as a config's ``env:`` block would be
CONTROL_RULES = {
    "hints": ["interference-aware", "resident-aware", "locality", "first-fit", "speed-aware"],
    "global_hints": ["interference-aware", "speed-aware"],
    "consolidate": True,
    "resident_features": True,
    "keep_together": True,
    "job_length": True,
    "model_speed": False,
    "speed_floor": 0.9,
    "speed_floor_min_work": 100000.0,
    "wait_to_fit": 1.0,
    "ps_rule": True,
    "forward_rule": "must",
}


class MaskedHeuristic(Policy):
    """A heuristic's plan followed inside the agents' masks; subclasses set
    ``heuristic``."""

    heuristic: ClassVar[str] = ""
    #: the config whose ``env:`` decision options the masks follow (None:
    #: :data:`CONTROL_RULES`)
    recipe: ClassVar = None
    #: is the heuristic also the agents' one hint (its follow action)? Only a registered
    #: heuristic can be a hint
    follow: ClassVar[bool] = True

    def __init__(self) -> None:
        if self.recipe is None:
            base = load_config(REPO_ROOT / "configs" / "default.yaml")
            env = env_config(replace(base, env={**base.env, **CONTROL_RULES}))
        else:
            env = env_config(load_config(self.recipe))
        # the recipe's rules; the one hint is the heuristic itself (its follow action)
        hints = [self.heuristic] if self.follow else []
        self.options = {**env.decision_options(), "hints": hints, "global_hints": []}
        self.planner = self._make_planner()
        self.builder: ObservationBuilder | None = None

    def _make_planner(self):
        """What plans each job (its ``place(job, view)`` and ``reset``): the heuristic."""
        return make_policy(self.heuristic)

    def reset(self, topology: Topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        self.planner.reset(topology, seed)
        self.builder = None

    def _builder(self, view: ClusterView) -> ObservationBuilder:
        if self.builder is None or self.builder.topology is not view.topology:
            self.builder = ObservationBuilder(view.topology, view.perf, EnvConfig(**self.options))
        return self.builder

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        session = self.open_session(job, view)
        if not session.feasible() or session.waits():
            return None
        return self.follow_plan(session, self._plan(job, view, session))

    def open_session(self, job: Job, view: ClusterView) -> PlacementSession:
        """A fresh placement session of ``job`` from its home agent, as the agents'."""
        b = self._builder(view)
        return PlacementSession(b, job, view, home_agent(job, b.n_agents))

    def follow_plan(self, session: PlacementSession, plan: Placement | None) -> Placement | None:
        """Play ``session`` to its end following ``plan`` inside the masks; the placement,
        or None when a task stops fitting."""
        b = session.builder
        order = [] if plan is None else [*plan.worker_groups, *plan.ps_groups]
        g_max, n_agents = b.pad[0], b.n_agents
        while not session.done:
            mask = session.action_mask(session.agent)
            session.act(self._choose(b, session, mask, order, g_max, n_agents))
            if not session.done and not session.feasible():
                return None
        return session.placement()

    def _plan(self, job: Job, view: ClusterView, session: PlacementSession) -> Placement | None:
        """The placement to follow: the heuristic's plan on the whole view."""
        return self.planner.place(job, view)

    @staticmethod
    def _choose(
        b: ObservationBuilder,
        session: PlacementSession,
        mask: np.ndarray,
        order: list[int],
        g_max: int,
        n_agents: int,
    ) -> int:
        follow = g_max + n_agents  # the one hint: the heuristic's plan in this scope
        target = None
        if session.task < len(order):
            # the plan's groups not yet used by the job's tasks of this kind
            w = session.job.num_workers
            todo = list(order[:w] if session.is_worker else order[w:])
            for g in session.workers if session.is_worker else session.ps:
                if g in todo:
                    todo.remove(g)
            if todo:
                target = action_towards(b, session.agent, int(todo[0]))
        if target is not None and target >= g_max and mask[target] > 0:
            return target  # forward to where the heuristic puts the task
        if len(mask) > follow and mask[follow] > 0:
            return follow
        if target is not None and mask[target] > 0:
            return target
        local = np.flatnonzero(mask[:g_max])
        if len(local):
            return int(local[0])
        forward = np.flatnonzero(mask[g_max : g_max + n_agents])
        if len(forward):
            return g_max + int(forward[0])
        raise RuntimeError(f"job {session.job.name}: no legal action although a task fits")


class MaskedInterferenceAware(MaskedHeuristic):
    name = "masked:interference-aware"
    description = (
        "interference-aware's plan followed inside the agents' masks, with their env rules"
    )
    heuristic = "interference-aware"


class MaskedSpeedAware(MaskedHeuristic):
    name = "masked:speed-aware"
    description = "speed-aware's plan followed inside the agents' masks, with their env rules"
    heuristic = "speed-aware"


class MaskedFirstFit(MaskedHeuristic):
    name = "masked:first-fit"
    description = "first-fit's plan followed inside the agents' masks, with their env rules"
    heuristic = "first-fit"


class MaskedMlfsRl(MaskedHeuristic):
    """A probe, not a control: MLF-RL's shipped placement followed inside the masks of
    ``configs/default.yaml``'s ``env:`` rules, by forwards and group slots."""

    name = "masked:mlfs-rl"
    description = "probe: MLF-RL's placement followed inside the agents' masks (default rules)"
    heuristic = "mlfs-rl"
    recipe = REPO_ROOT / "configs" / "default.yaml"
    follow = False


#: name -> class of every control (registered lazily in marl_sched.policies.base)
CONTROLS = {c.name: c for c in (MaskedInterferenceAware, MaskedSpeedAware, MaskedFirstFit)}
