"""Learned baselines behind the common ``Policy`` interface (see ``docs/baselines.md``).

- ``harmony`` — :class:`agents.baselines.harmony.HarmonyPolicy` (Harmony, INFOCOM'19);
- ``mlfs-h`` — :class:`agents.baselines.mlf_h.MlfHPolicy` (MLFS's heuristic, torch-free);
- ``mlfs-rl`` — :class:`agents.baselines.mlfs.MlfsRlPolicy` (MLFS's RL scheduler).

This package stays torch-free on import, so that ``mlfs-h`` starts fast: the torch
classes are imported on first access of their names here.
"""

from __future__ import annotations

from typing import Any

from agents.baselines.mlf_h import MlfHPolicy, mlfs_priority, mlfs_priority_key

_LAZY = {
    "HarmonyPolicy": "agents.baselines.harmony",
    "MlfsRlPolicy": "agents.baselines.mlfs",
}

__all__ = ["HarmonyPolicy", "MlfHPolicy", "MlfsRlPolicy", "mlfs_priority", "mlfs_priority_key"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
