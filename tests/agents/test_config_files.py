"""The shipped config files: the recipes moved to ``configs/recipes/`` as small override
files (a ``defaults:`` parent plus the keys that change) parse to exactly the experiment
their full files did, every section included.

``tests/data/recipes_before.json`` holds the full files as they were at the commit it
names (read once from git history, YAML loaded as is); each is parsed here the same way
as its override file, and the parsed objects of every section must be equal.
"""

from __future__ import annotations

import json

import pytest

from agents.config import interference_config, model_config, train_config
from envs.config import env_config
from marl_sched.config import REPO_ROOT, ExperimentConfig, config_from_dict, load_config

BEFORE = json.loads((REPO_ROOT / "tests/data/recipes_before.json").read_text(encoding="utf-8"))
RECIPES = REPO_ROOT / "configs" / "recipes"


def parsed(cfg: ExperimentConfig) -> tuple:
    """Every section as its owner parses it (defaults filled in)."""
    return (
        cfg.topology,
        cfg.workload,
        cfg.simulation,
        env_config(cfg),
        model_config(cfg),
        train_config(cfg),
        interference_config(cfg),
    )


@pytest.mark.parametrize("name", sorted(BEFORE["configs"]))
def test_an_override_file_resolves_to_its_old_full_file(name):
    old = config_from_dict(BEFORE["configs"][name], f"{name}.yaml at {BEFORE['commit'][:8]}")
    new = load_config(REPO_ROOT / "configs" / f"{name}.yaml")
    assert parsed(new) == parsed(old)


def test_every_recipe_file_is_covered_and_short():
    files = sorted(p.stem for p in RECIPES.glob("*.yaml"))
    assert files == sorted(k.split("/")[1] for k in BEFORE["configs"] if k.startswith("recipes/"))
    for name in files:
        keys = [
            line
            for line in (RECIPES / f"{name}.yaml").read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]
        assert keys[0].startswith("defaults: ["), name
        # an ablation is a few lines; convergence is its own experiment (its own cluster)
        limit = 40 if name == "convergence" else 12
        assert len(keys) <= limit, f"{name}: {len(keys)} lines of keys"


def test_the_top_level_holds_at_most_eight_configs():
    assert len(list((REPO_ROOT / "configs").glob("*.yaml"))) <= 8


def test_the_chain_is_one_change_per_step():
    """Each recipe after hints names the previous one as its parent (the chain the
    README tells): composing resolves recipe by recipe."""
    chain = ["hints", "residents", "speed", "together", "length", "weighted", "psrule"]
    chain += ["floor", "gated", "resident", "wait", "dagger"]
    for parent, child in zip(chain, chain[1:], strict=False):
        text = (RECIPES / f"{child}.yaml").read_text(encoding="utf-8")
        assert f"defaults: [{parent}.yaml]" in text
