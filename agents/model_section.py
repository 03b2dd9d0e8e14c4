"""The ``model:`` section of an experiment config: the hierarchical GNN's shape.

Parsed by :func:`agents.config.model_config`; every name here is also importable from
:mod:`agents.config`.
"""

from __future__ import annotations

from dataclasses import dataclass

from marl_sched.config import check_bounds

#: the widest layer and the deepest stack a network of this package may have (the
#: shipped ones use 64 and 2): a 4,096-wide layer holds 16 M weights, 64 MB
MAX_WIDTH = 4096
MAX_LAYERS = 64


@dataclass(frozen=True)
class ModelConfig:
    """The hierarchical GNN (see :mod:`agents.gnn`).

    Attributes:
        hidden: width of every node, subcluster and peer embedding.
        layers: hierarchy blocks (each: groups ← siblings + server, servers ← groups +
            rack, racks ← servers); 2 lets information go up and back down twice.
        exchange: mix the subcluster embeddings of all agents with attention
            (false = each agent sees only its own summary: an ablation).
        share_parameters: one module for all agents (``policy_mapping_fn`` → "shared");
            false = one module per agent.
    """

    hidden: int = 64
    layers: int = 2
    exchange: bool = True
    share_parameters: bool = True

    def validate(self, where: str, key: str) -> None:
        # checked before torch allocates anything: a width of 1e23 is no network
        check_bounds(self, {"hidden": (4, MAX_WIDTH), "layers": (1, MAX_LAYERS)}, where, key)
