"""The learned baselines' hyperparameter search: its default grid per learner and the
grid a command line asks for (``experiments/train_baselines.py --search [--grid ...]``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from agents.baselines.harmony_train import HarmonyConfig
from agents.baselines.mlfs_train import MlfsConfig
from marl_sched.errors import InputError


def learner_configs() -> dict[str, type]:
    """Each learned baseline's config class, by its policy name."""
    return {"harmony": HarmonyConfig, "mlfs-rl": MlfsConfig}


#: the hyperparameter search of each learner: learning rate x 3, entropy weight x 2
GRID = {
    "harmony": {"lr": [3e-4, 1e-3, 3e-3], "entropy_coef": [0.01, 0.001]},
    "mlfs-rl": {"lr": [1e-3, 3e-3, 1e-2], "entropy_coef": [0.01, 0.001]},
}


def search_grid(learner: str, items: Sequence[str] = ()) -> dict[str, list[float]]:
    """The grid a search runs: the dimensions ``items`` give (``KEY=V1,V2,...``, KEY a
    numeric config field), else :data:`GRID`; ``InputError`` naming a bad item."""
    if not items:
        return GRID[learner]
    fields = {f.name: str(f.type) for f in dataclasses.fields(learner_configs()[learner])}
    grid: dict[str, list[float]] = {}
    for item in items:
        key, eq, values = item.partition("=")
        if not eq or fields.get(key) not in ("int", "float") or key in grid:
            numeric = ", ".join(sorted(k for k, t in fields.items() if t in ("int", "float")))
            raise InputError(f"--grid {item}: expected KEY=V1,V2,... with KEY one of "
                             f"{numeric}, each at most once")  # fmt: skip
        kind = int if fields[key] == "int" else float
        try:
            grid[key] = [kind(v) for v in values.split(",")]
        except ValueError:
            raise InputError(f"--grid {item}: every value must be a {fields[key]}") from None
        if len(set(grid[key])) != len(grid[key]):
            raise InputError(f"--grid {item}: a value is repeated")
    return grid
