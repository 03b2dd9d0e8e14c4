"""The selection part of ``train:``: how often a run validates and checkpoints, which
checkpoints it keeps and which becomes ``best`` (applied by :mod:`agents.selection`).
"""

from __future__ import annotations

from dataclasses import dataclass

from marl_sched.config import check, check_bounds

#: how a new checkpoint becomes ``best`` (train.select_rule)
SELECT_RULES = ("mean", "dominate")

#: the range of each count of this section, checked before Ray starts
SELECTION_BOUNDS = {
    "eval_interval": (0, 10**7),
    "checkpoint_interval": (0, 10**7),
    "keep_checkpoints": (0, 10**5),
}


@dataclass(frozen=True)
class SelectionSection:
    """Validation, checkpoints and the choice of the best one.

    Attributes:
        eval_interval: evaluate every this many iterations (0 = only at the end).
        checkpoint_interval: checkpoint every this many iterations (the last one is
            always checkpointed).
        keep_checkpoints: keep only this many checkpoints (lowest validation average
            JCT), plus the newest; 0 = keep all.
        select_rule: how a new checkpoint becomes ``best``: ``mean`` (lowest validation
            average JCT so far) or ``dominate`` (that, and on no validation run worse
            than the current best by more than ``select_tolerance``).
        select_tolerance: the relative slack of ``dominate`` on each run.
    """

    eval_interval: int = 5
    checkpoint_interval: int = 5
    keep_checkpoints: int = 0
    select_rule: str = "mean"
    select_tolerance: float = 0.001

    def validate(self, where: str, key: str) -> None:
        check_bounds(self, SELECTION_BOUNDS, where, key)
        for name in ("eval_interval", "checkpoint_interval", "keep_checkpoints"):
            value = getattr(self, name)
            check(value >= 0, where, f"{key}.{name}", f"must be >= 0, got {value}")
        check(self.select_rule in SELECT_RULES, where, f"{key}.select_rule",
              f"must be one of {', '.join(SELECT_RULES)}, got {self.select_rule!r}")  # fmt: skip
        check(self.select_tolerance >= 0, where, f"{key}.select_tolerance",
              f"must be >= 0, got {self.select_tolerance}")  # fmt: skip
