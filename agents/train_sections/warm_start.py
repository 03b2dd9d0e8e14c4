"""The warm-start part of ``train:``: behaviour cloning of a teacher before PPO, DAgger
relabelling, and the KL term that keeps PPO near that start (run by
:mod:`agents.warm_start`).
"""

from __future__ import annotations

from dataclasses import dataclass

from marl_sched.config import check, check_bounds

#: the range of each count of this section, checked before Ray starts
WARM_START_BOUNDS = {
    "bc_episodes": (1, 10**6),
    "bc_epochs": (1, 10**5),
    "dagger_rounds": (0, 10**4),
}


#: ``train.bc_move``'s values: the rule that labels a move (:class:`WarmStartSection`)
MOVE_TEACHERS = ("load-control", "upgrade")


def teacher_names() -> list[str]:
    """Every name ``train.bc_teacher`` accepts (besides null)."""
    from marl_sched.policies import control_names, heuristic_names

    return ["lookahead", "rollout", *heuristic_names(), *control_names(), "masked:mlfs-rl",
            "planner"]  # fmt: skip


@dataclass(frozen=True)
class WarmStartSection:
    """Behaviour cloning and DAgger.

    Attributes:
        bc_teacher: whose placements warm-start the policy by behaviour cloning:
            ``lookahead`` / ``rollout`` (:mod:`agents.teachers`), a heuristic's name,
            a masked policy's (``masked:<heuristic>``, ``masked:mlfs-rl``), ``planner``
            (built from the config's ``planner:`` section; it plays candidates out on
            forks of the env's simulator), or null (start from scratch).
        bc_margin, bc_base, bc_protect, bc_speed: the ``rollout`` teacher's
            ``margin``, ``base``, ``protect`` and ``speed``
            (:class:`agents.teachers.RolloutTeacher`; 0 = off).
        bc_episodes: teacher episodes (of ``episode_jobs`` jobs) to imitate.
        bc_epochs: passes of supervised training over the teacher's decisions.
        bc_weight_power: each decision's imitation loss is weighted by its job's GPU
            work to this power, scaled to mean 1 (:func:`agents.warm_start.imitation_weights`;
            0 = every decision alike).
        dagger_rounds: rounds of DAgger relabelling after behaviour cloning (0 = none):
            greedy ``bc_episodes``, teacher labels added, ``bc_epochs`` more passes.
        bc_move: how a move offered to the agents (``env.migration: on``) is labelled
            (:func:`agents.teachers.teacher_move`): ``load-control`` (MLFS's overload
            trigger, the teacher placing the job again) or ``upgrade`` (the ``upgrade``
            lever's rule: a long job to faster GPUs or one server when the estimated
            saving beats the measured restart; :mod:`marl_sched.policies.levers`).
    """

    bc_teacher: str | None = "lookahead"
    bc_margin: float = 0.0
    bc_base: str = "interference-aware"
    bc_protect: float = 0.0
    bc_speed: float = 0.0
    bc_episodes: int = 20
    bc_epochs: int = 12
    bc_weight_power: float = 0.0
    dagger_rounds: int = 0
    bc_move: str = "load-control"

    def validate(self, where: str, key: str) -> None:
        check_bounds(self, WARM_START_BOUNDS, where, key)
        check(self.dagger_rounds >= 0, where, f"{key}.dagger_rounds",
              f"must be >= 0, got {self.dagger_rounds}")  # fmt: skip
        check(0.0 <= self.bc_margin < 1.0, where, f"{key}.bc_margin", "must be in [0, 1)")
        check(self.bc_move in MOVE_TEACHERS, where, f"{key}.bc_move",
              f"must be one of {', '.join(MOVE_TEACHERS)}, got {self.bc_move!r}")  # fmt: skip
        for name in ("bc_protect", "bc_speed", "bc_weight_power"):
            value = getattr(self, name)
            check(value >= 0, where, f"{key}.{name}", f"must be >= 0, got {value}")
        for name in ("bc_episodes", "bc_epochs"):
            value = getattr(self, name)
            check(value >= 1, where, f"{key}.{name}", f"must be >= 1, got {value}")
        if self.bc_teacher is not None:
            names = teacher_names()
            check(self.bc_teacher in names, where, f"{key}.bc_teacher",
                  f"must be one of {', '.join(names)} or null, "
                  f"got {self.bc_teacher!r}")  # fmt: skip
        from marl_sched.policies.heuristics import hint_names

        check(self.bc_base in hint_names(), where, f"{key}.bc_base",
              f"must be one of {', '.join(hint_names())}, got {self.bc_base!r}")  # fmt: skip
