"""Imports point one way: marl_sched ← envs ← agents (DESIGN.md, "Layout")."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from marl_sched.config import REPO_ROOT

FORBIDDEN = {
    "marl_sched": {"torch", "torch_geometric", "gymnasium", "ray", "pettingzoo", "envs", "agents"},
    "envs": {"torch", "torch_geometric", "agents"},
}


def _imports(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name.split(".")[0], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module.split(".")[0], node.lineno


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_upward_imports(package):
    bad = []
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
        for name, line in _imports(path):
            if name in FORBIDDEN[package]:
                bad.append(f"{path.relative_to(REPO_ROOT)}:{line}: imports {name}")
    assert not bad, "\n".join(bad)


def test_simulate_path_loads_no_heavy_module():
    code = (
        "import sys, marl_sched.cli, marl_sched.runner, marl_sched.policies, marl_sched.traces;"
        "marl_sched.policies.policy_entries();"
        "heavy = [m for m in ('torch', 'ray', 'gymnasium', 'torch_geometric') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_agents_defines_no_environment():
    """The one environment lives in envs/: no class under agents/ subclasses a
    gymnasium, PettingZoo or RLlib environment (issue: one environment)."""
    env_bases = {"Env", "MultiAgentEnv", "ParallelEnv", "AECEnv", "ClusterPlacementEnv"}
    bad = []
    for path in sorted((REPO_ROOT / "agents").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                    if name in env_bases:
                        bad.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {node.name}")
    assert not bad, "\n".join(bad)
