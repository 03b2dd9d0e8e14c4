"""Placement policies behind one interface, found by name in one registry."""

# the heuristics register themselves on import; here, so that the registry (in base)
# never imports them back
from marl_sched.policies import heuristics as _heuristics  # noqa: F401
from marl_sched.policies.base import (
    Policy,
    build_policy,
    control_names,
    get_policy_class,
    heuristic_names,
    load_control_names,
    make_policy,
    policy_entries,
    register,
    register_lazy,
)

__all__ = [
    "Policy",
    "build_policy",
    "control_names",
    "get_policy_class",
    "heuristic_names",
    "load_control_names",
    "make_policy",
    "policy_entries",
    "register",
    "register_lazy",
]
