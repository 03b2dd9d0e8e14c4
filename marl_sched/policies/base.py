"""The one interface every scheduler implements (job + read-only
:class:`~marl_sched.simulator.ClusterView` → :class:`~marl_sched.jobs.Placement` or
``None`` to leave it queued), and the registry of schedulers by name; learned ones are
registered by import path so that listing them imports nothing heavy.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from marl_sched.errors import InputError, import_target
from marl_sched.jobs import Job, Placement
from marl_sched.ordering import QueueOrdering
from marl_sched.simulator import ClusterView
from marl_sched.topology import Topology


class Policy(ABC):
    """A placement policy.

    Subclasses set ``name`` and ``description`` and implement :meth:`place`.
    :meth:`reset` is called once before a run with the topology and a seed; a policy
    keeps its randomness in its own generator.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: a policy that plans on the simulator itself (the planner) sets this: the runner
    #: then calls ``place(job, view, sim=simulator)``, the simulator whose pending job it is
    needs_simulator: ClassVar[bool] = False

    def reset(self, topology: Topology, seed: int = 0) -> None:
        """Prepare for a run on ``topology``."""
        self.topology = topology
        self.seed = seed

    def check_cluster(self, topology: Topology, perf: Any) -> None:
        """Raise ``InputError`` if this policy cannot serve ``topology`` (a learned
        policy whose checkpoint was made for another); heuristics serve any."""
        return None

    @abstractmethod
    def place(self, job: Job, view: ClusterView) -> Placement | None:
        """Where to run every task of ``job``, or ``None`` to leave it queued."""

    def ordering(self) -> QueueOrdering | None:
        """The policy's own queue ordering, used only when the run asks for it
        (``simulation.ordering: own``); ``None`` = the run's (FIFO under ``own``)."""
        return None

    def rebalance(self, view: ClusterView) -> list[tuple[int, Placement]]:
        """The one migration hook: running jobs to move, as (job id, new placement).

        Overriding it gives the policy a migration rule; the runner calls it after every
        batch of completions, only with ``simulation.migration: on``, and hands each
        proposal to :meth:`marl_sched.simulator.Simulator.migrate` (priced, capped, may
        decline; a placement must fit once the job's own resources are released, else
        ``PlacementError``). Default: no migration rule."""
        return []


@dataclass(frozen=True)
class PolicyEntry:
    name: str
    description: str
    kind: str  # one of KINDS
    target: str | type[Policy]  # a class, or "module:Class" imported on first use


_REGISTRY: dict[str, PolicyEntry] = {}


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator: add a heuristic policy to the registry under ``cls.name``."""
    _REGISTRY[cls.name] = PolicyEntry(cls.name, cls.description, "heuristic", cls)
    return cls


def register_lazy(name: str, description: str, target: str, kind: str = "learned") -> None:
    """Register a policy by import path (``"agents.policy:MarlPolicy"``): imported
    only when used, so listing the registry imports nothing heavy."""
    if kind not in KINDS:
        raise ValueError(f"policy kind must be one of {KINDS}, got {kind!r}")
    _REGISTRY[name] = PolicyEntry(name, description, kind, target)


#: the kinds of registered policy, in the order ``marl-sched policies`` lists them:
#: ``heuristic`` (ours; the hints), ``control`` (a heuristic inside the agents' masks),
#: ``load-control`` (the ``+lc`` rows), ``published-heuristic`` (a published rule, no
#: checkpoint), ``teacher`` (the warm start's rule inside the masks, default env rules),
#: ``learned`` (loads a checkpoint), ``lever`` and ``planner`` (named explicitly, in no
#: enumeration), ``plugin`` (an :data:`ENTRY_POINT_GROUP` entry point, docs/extending.md)
KINDS = (
    "heuristic", "control", "load-control", "published-heuristic", "teacher", "learned",
    "lever", "plugin", "planner",
)  # fmt: skip

#: the entry-point group in which an installed package names its policies:
#: ``name = "package.module:Class"`` (docs/extending.md)
ENTRY_POINT_GROUP = "marl_sched.policies"
_PLUGINS: list[bool] = []  # [True] once the entry points are registered


def _register_plugins() -> None:
    """Register every :data:`ENTRY_POINT_GROUP` entry point (once; a name already
    registered keeps its own policy), imported only when used."""
    if _PLUGINS:
        return
    _PLUGINS.append(True)
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in _REGISTRY:
            _REGISTRY[ep.name] = PolicyEntry(ep.name, f"entry point {ep.value}", "plugin", ep.value)


def policy_entries() -> dict[str, PolicyEntry]:
    """All registered policies, by name, in the order of :data:`KINDS`."""
    _register_plugins()
    return dict(sorted(_REGISTRY.items(), key=lambda kv: (KINDS.index(kv[1].kind), kv[0])))


def is_policy_path(name: str) -> bool:
    """Is ``name`` a ``module:Class`` import path (``my_pkg.policies:Patient``) rather
    than a registered name (``masked:first-fit`` is one; it is looked up first)?"""
    module, sep, attr = name.partition(":")
    parts = module.split(".")
    return bool(sep) and attr.isidentifier() and all(p.isidentifier() for p in parts)


def import_policy(target: str, name: str) -> type[Policy]:
    """The :class:`Policy` subclass at ``target`` (``module:Class``); ``InputError``
    naming ``name`` when the module does not import, has no such attribute, or it is
    not a policy."""
    found = import_target(target, f"--policy: {name}")
    if not (isinstance(found, type) and issubclass(found, Policy)):
        what = "a subclass of marl_sched.policies.Policy"
        raise InputError(f"--policy: {name}: {target} is not a policy ({what})")
    return found


def control_names() -> list[str]:
    """Names of the registered controls (heuristics inside the agents' masks)."""
    return [n for n, e in policy_entries().items() if e.kind == "control"]


def load_control_names() -> list[str]:
    """Names of the ``+lc`` rows (a policy paired with MLFS's load control)."""
    return [n for n, e in policy_entries().items() if e.kind == "load-control"]


def heuristic_names() -> list[str]:
    """Names of the registered heuristics (no learned policy), in registry order."""
    return [n for n, e in policy_entries().items() if e.kind == "heuristic"]


def get_policy_class(name: str) -> type[Policy]:
    """The class of the registered policy ``name``, or of the ``module:Class`` import
    path ``name`` (docs/extending.md); ``InputError`` for anything else."""
    entries = policy_entries()
    if name not in entries:
        if is_policy_path(name):
            return import_policy(name, name)
        raise InputError(f"--policy: unknown policy {name!r} (known: {', '.join(entries)})")
    entry = entries[name]
    target = entry.target
    if isinstance(target, str):
        if entry.kind == "plugin":  # someone else's code: checked to be a policy
            return import_policy(target, name)
        module, _, attr = target.partition(":")
        try:
            target = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise InputError(f"--policy: {name}: not available: {exc}") from None
    return target


def make_policy(name: str, **kwargs: Any) -> Policy:
    """Instantiate a registered policy by name."""
    return get_policy_class(name)(**kwargs)


def build_policy(
    name: str,
    checkpoint: str | None = None,
    topology: Topology | None = None,
    perf: Any = None,
    *,
    config: Any = None,
) -> Policy:
    """The registered policy ``name``, given ``checkpoint`` when it takes one; with
    ``topology``, reset on it and checked (:meth:`Policy.check_cluster`: ``InputError``);
    with ``config``, built with the class's ``config_options(config)`` if it has one."""
    cls = get_policy_class(name)
    kwargs = {}
    if checkpoint and "checkpoint" in cls.__init__.__code__.co_varnames:
        kwargs["checkpoint"] = checkpoint
    if config is not None and hasattr(cls, "config_options"):
        kwargs.update(cls.config_options(config))
    policy = cls(**kwargs)
    if topology is not None:
        policy.reset(topology, 0)
        policy.check_cluster(topology, perf)
    return policy


# controls: a heuristic's plan followed inside the agents' action masks, with the
# default recipe's environment rules (envs/controls.py; marl_sched may not import envs)
for _heuristic in ("interference-aware", "speed-aware", "first-fit"):
    register_lazy(
        f"masked:{_heuristic}",
        f"{_heuristic}'s plan followed inside the agents' masks, with their env rules",
        f"envs.controls:Masked{''.join(w.title() for w in _heuristic.split('-'))}",
        kind="control",
    )


# a policy paired with MLFS's load control (marl_sched/policies/load_control.py); the
# placement policy itself is imported only when one is made (harmony needs torch)
for _name, _cls in (
    ("first-fit+lc", "FirstFitLc"),
    ("speed-aware+lc", "SpeedAwareLc"),
    ("masked:interference-aware+lc", "MaskedInterferenceAwareLc"),
    ("harmony+lc", "HarmonyLc"),
):
    register_lazy(
        _name,
        f"{_name[:-3]} paired with MLFS's load control (migrates with simulation.migration: on)",
        f"marl_sched.policies.load_control:{_cls}",
        kind="load-control",
    )


#: the other policies registered by import path: (name, "module:Class", kind, description);
#: masked:* act inside the agents' masks (envs/controls.py, agents/teachers.py), levers
#: are docs/room.md's, planners docs/planner.md's
_LAZY = (
    ("masked:lookahead", "agents.teachers:MaskedLookahead", "teacher",
     "the default recipe's lookahead teacher followed inside the agents' masks, with their "
     "default env rules"),
    ("masked:lookahead+lc", "marl_sched.policies.load_control:MaskedLookaheadLc", "teacher",
     "masked:lookahead paired with MLFS's load control (migrates with simulation.migration: "
     "on)"),
    ("masked:lookahead-learned", "agents.teachers:MaskedLookaheadLearned", "teacher",
     "masked:lookahead scoring each proposal by profiled GPU speed times the learned "
     "interference model's slowdown (no performance-model call on a hypothetical placement)"),
    ("masked:lookahead-learned-home", "agents.teachers:MaskedLookaheadLearnedHome", "teacher",
     "masked:lookahead-learned with the heuristics asked on the job's home subcluster and "
     "the whole datacenter only"),
    ("masked:lookahead-harm", "agents.teachers:MaskedLookaheadHarm", "teacher",
     "masked:lookahead choosing the proposal with the least total slowdown (its own plus what "
     "it adds to running jobs)"),
    ("masked:mlfs-rl", "envs.controls:MaskedMlfsRl", "learned",
     "probe: MLF-RL's placement followed inside the agents' masks (default rules)"),
    ("harmony", "agents.baselines.harmony:HarmonyPolicy", "learned",
     "Harmony (INFOCOM'19): actor-critic over per-server resource vectors"),
    ("mlfs-h", "agents.baselines.mlf_h:MlfHPolicy", "published-heuristic",
     "MLFS heuristic: ideal-host placement near the PS, avoiding loaded servers"),
    ("mlfs-rl", "agents.baselines.mlfs:MlfsRlPolicy", "learned",
     "MLFS's RL scheduler: REINFORCE node network warm-started on MLF-H"),
    ("marl", "agents.policy:MarlPolicy", "learned",
     "trained hierarchical-GNN agents, one per subcluster (checkpoint)"),
    ("single-agent", "agents.policy:SingleAgentPolicy", "learned",
     "one trained centralised hierarchical-GNN agent (checkpoint)"),
    ("length-aware", "marl_sched.policies.levers:LengthAwarePolicy", "lever",
     "long jobs packed on their model's fastest GPU type, short ones on slower adequate types"),
    ("defer-long", "marl_sched.policies.levers:DeferLongPolicy", "lever",
     "length-aware that holds a long job for its preferred GPUs (defer_bound_s, default 1 h)"),
    ("upgrade", "marl_sched.policies.levers:UpgradePolicy", "lever",
     "length-aware that moves a long running job to faster GPUs or one whole server when the "
     "estimated saving beats the measured restart (simulation.migration: on)"),
    ("masked:lookahead+upgrade", "marl_sched.policies.levers:ReferenceUpgrade", "teacher",
     "masked:lookahead's placement with upgrade's migration rule: a long running job moves "
     "to faster GPUs or one whole server when the estimated saving beats the measured "
     "restart (simulation.migration: on)"),
    ("masked:lookahead-learned+upgrade", "marl_sched.policies.levers:LearnedUpgrade", "lever",
     "masked:lookahead-learned's placement with upgrade's migration rule (no "
     "performance-model call on a hypothetical placement; simulation.migration: on)"),
    ("planner", "marl_sched.policies.planner:PlannerPolicy", "planner",
     "reference, not a contender: model-predictive control over the heuristics' proposals and "
     "defer, played out on the simulator over K sampled futures"),
    ("lookahead", "marl_sched.policies.lookahead:LookaheadPolicy", "planner",
     "reference, not a contender: the heuristics' proposals scored by the simulator's "
     "performance model, one step (masked:lookahead without masks)"),
    ("oracle", "marl_sched.policies.planner:OraclePolicy", "planner",
     "bound, never a policy claim: the planner on the trace's true future arrivals and true "
     "lengths (K = 1)"),
    ("oracle-lengths", "marl_sched.policies.planner:LengthsOraclePolicy", "planner",
     "bound, never a policy claim: the planner with the submitted jobs' true lengths and "
     "sampled later arrivals (K futures)"),
    ("oracle-arrivals", "marl_sched.policies.planner:ArrivalsOraclePolicy", "planner",
     "bound, never a policy claim: the planner with the trace's later arrivals and every "
     "length drawn from its estimate (K futures)"),
)  # fmt: skip
for _name, _target, _kind, _description in _LAZY:
    register_lazy(_name, _description, _target, _kind)
