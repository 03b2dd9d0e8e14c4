"""The policy registry: what ``marl-sched policies`` lists without importing a policy
is what the policy itself says once made."""

from __future__ import annotations

import importlib

import pytest

from marl_sched.policies import policy_entries


def _lazy_entries():
    """The entries registered by import path (not the plugins of installed packages)."""
    return [e for e in policy_entries().values()
            if isinstance(e.target, str) and e.kind != "plugin"]  # fmt: skip


@pytest.mark.parametrize("entry", _lazy_entries(), ids=lambda e: e.name)
def test_a_lazy_entry_describes_its_policy_as_the_policy_does(entry):
    module, cls = entry.target.split(":")
    policy_cls = getattr(importlib.import_module(module), cls)
    assert policy_cls.name == entry.name
    assert policy_cls.description == entry.description
