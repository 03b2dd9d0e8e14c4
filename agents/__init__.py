"""Hierarchical-GNN agents, their training and the learned baselines.

``load_agents(path)`` is the inference API (:func:`agents.policy.load_agents`).
Importing this package is cheap: torch is imported on first use.
"""

from __future__ import annotations

from typing import Any


def load_agents(path: Any) -> Any:
    """Trained agents whose ``act(observations)`` answers ``envs.make_parallel_env``
    (:func:`agents.policy.load_agents`)."""
    from agents.policy import load_agents as _load

    return _load(path)


__all__ = ["load_agents"]
