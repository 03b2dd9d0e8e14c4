"""The policy registry: what ``marl-sched policies`` lists without importing a policy
is what the policy itself says once made."""

from __future__ import annotations

import importlib

import pytest

from marl_sched.policies import base


def _lazy_entries():
    return [e for e in base._REGISTRY.values() if isinstance(e.target, str)]


@pytest.mark.parametrize("entry", _lazy_entries(), ids=lambda e: e.name)
def test_a_lazy_entry_describes_its_policy_as_the_policy_does(entry):
    module, cls = entry.target.split(":")
    policy_cls = getattr(importlib.import_module(module), cls)
    assert policy_cls.name == entry.name
    assert policy_cls.description == entry.description
