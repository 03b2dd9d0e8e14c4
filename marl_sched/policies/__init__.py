"""Placement policies behind one interface, found by name in one registry."""

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
