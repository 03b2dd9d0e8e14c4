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


def _module_name(path):
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(packages=("marl_sched", "envs", "agents")):
    """Every import between our modules, wherever it is written (top level, inside a
    function, under ``TYPE_CHECKING``): module -> the modules it names."""
    paths = {_module_name(p): p for pkg in packages for p in (REPO_ROOT / pkg).rglob("*.py")}

    def resolve(name):
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for module, path in paths.items():
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the module's package
                    base = module.split(".")[: len(module.split(".")) - node.level]
                    if path.name == "__init__.py":
                        base = module.split(".")[: len(module.split(".")) - node.level + 1]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module
                names.add(prefix)
                names.update(f"{prefix}.{a.name}" for a in node.names)
        graph[module] = {resolve(n) for n in names} - {"", module}
    return graph


def test_no_import_circle():
    """No module imports, through any chain, a module that imports it back (the
    circles envs.observations <-> session <-> rules and calibration <-> interference
    <-> policies). A package's ``__init__`` counts as a module."""
    from graphlib import CycleError, TopologicalSorter

    try:
        tuple(TopologicalSorter(_import_graph()).static_order())
    except CycleError as e:
        pytest.fail(f"import circle: {' -> '.join(e.args[1])}")


def test_import_graph_sees_every_import():
    """The graph above holds imports written for typing only and inside functions, and
    a circle made of them is found."""
    from graphlib import CycleError, TopologicalSorter

    graph = _import_graph()
    assert "envs.config" in graph["envs.observations"]  # under TYPE_CHECKING
    assert "marl_sched.policies" in graph["marl_sched.interference.samples"]  # in a function
    graph["marl_sched.errors"] = graph["marl_sched.errors"] | {"marl_sched.config"}
    with pytest.raises(CycleError):
        tuple(TopologicalSorter(graph).static_order())
