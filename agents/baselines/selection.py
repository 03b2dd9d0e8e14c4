"""Checkpoint selection on the validation split, under a wall-time cap with early
stopping: every ``eval_every`` iterations the greedy policy is scored
(:func:`agents.baselines.episodes.score_runs`), the best weights kept; training stops at
the budget, ``wall_cap_s`` or ``patience``. Scores go to TensorBoard and the history."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from agents.baselines.episodes import ScenarioRun, score_runs
from marl_sched.policies.base import Policy


class Selection:
    """Validation, best weights, the stop rules and the learning curve of one run.

    Args:
        net: the network being trained (its state is copied when it scores best).
        val_runs: the validation scenarios.
        policy: ``policy()`` -> the greedy policy acting with ``net``.
        name: the policy's name (for the metrics rows).
        wall_cap_s: stop once this much wall time has passed (0 = no cap).
        patience: stop after this many validations without a new best (0 = never).
        writer: a TensorBoard ``SummaryWriter`` or ``None``.
        progress: called with ``(iteration, row)`` after each validation.
        seed: the evaluation seed (workload noise, policy).
        t0: ``time.perf_counter()`` at the start of the run (default: now).
    """

    def __init__(
        self,
        net: torch.nn.Module,
        val_runs: Sequence[ScenarioRun],
        policy: Callable[[], Policy],
        name: str,
        *,
        wall_cap_s: float = 0.0,
        patience: int = 0,
        writer: Any = None,
        progress: Callable[[int, dict], None] | None = None,
        seed: int = 0,
        t0: float | None = None,
    ) -> None:
        self.net, self.val_runs, self.policy, self.name = net, list(val_runs), policy, name
        self.wall_cap_s, self.patience = float(wall_cap_s), int(patience)
        self.writer, self.progress, self.seed = writer, progress, seed
        self.t0 = time.perf_counter() if t0 is None else t0
        self.history: list[dict[str, Any]] = []
        self.best_score = float("inf")
        self.best_iteration = -1
        self.best_state = copy.deepcopy(net.state_dict())
        self.since_best = 0
        self.stop_reason = "iterations"

    @property
    def wall_s(self) -> float:
        return time.perf_counter() - self.t0

    def validate(self, it: int, phase: str = "", extra: dict[str, float] | None = None) -> float:
        """Score the greedy policy; keep the weights if best. Returns the score."""
        was_training = self.net.training
        self.net.eval()
        res = score_runs(self.val_runs, self.policy(), self.name, seed=self.seed)
        self.net.train(was_training)
        row = {
            "iteration": it,
            "phase": phase,
            "val_score": res["score"],
            "val_per_scenario": res["per"],
            "wall_s": self.wall_s,
            **(extra or {}),
        }
        self.history.append(row)
        if res["score"] < self.best_score:
            self.best_score, self.best_iteration = res["score"], it
            self.best_state = copy.deepcopy(self.net.state_dict())
            self.since_best = 0
        else:
            self.since_best += 1
        if self.writer is not None:
            self.writer.add_scalar("validation/score_vs_first_fit", res["score"], it)
            for k, v in res["per"].items():
                self.writer.add_scalar(f"validation/{k}", v, it)
            self.writer.add_scalar("time/wall_s", row["wall_s"], it)
            self.writer.flush()
        if self.progress:
            self.progress(it, row)
        return res["score"]

    def log(self, it: int, stats: dict[str, float]) -> None:
        """Training statistics of one iteration, to TensorBoard."""
        if self.writer is not None:
            for k, v in stats.items():
                self.writer.add_scalar(f"train/{k}", float(v), it)

    def stop(self) -> bool:
        """Has the wall-time cap or the patience run out? (sets :attr:`stop_reason`)"""
        if self.wall_cap_s and self.wall_s >= self.wall_cap_s:
            self.stop_reason = "wall cap"
            return True
        if self.patience and self.since_best >= self.patience:
            self.stop_reason = "patience"
            return True
        return False

    def finish(self) -> dict[str, Any]:
        """Load the best weights into the network; the selection's metadata."""
        self.net.load_state_dict(self.best_state)
        self.net.eval()
        if self.writer is not None:
            self.writer.close()
        return {
            "best_val_score": self.best_score,
            "best_iteration": self.best_iteration,
            "validation_scenarios": [r.name for r in self.val_runs],
            "stop_reason": self.stop_reason,
            "wall_cap_s": self.wall_cap_s,
            "patience": self.patience,
            "wall_s": self.wall_s,
            "history": self.history,
        }
