"""The warm-start part of ``train:``: behaviour cloning of a teacher before PPO, DAgger
relabelling, and the KL term that keeps PPO near that start.

:class:`WarmStartSection` is one of the four bases of :class:`agents.config.TrainConfig`;
its keys stay flat in the YAML (``train.bc_teacher``, ``train.prior_kl``). The warm
start itself runs in :mod:`agents.warm_start`.
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


def teacher_names() -> list[str]:
    """Every name ``train.bc_teacher`` accepts (besides null)."""
    from marl_sched.policies import control_names, heuristic_names

    names = ["lookahead", "rollout"]
    # the masked policies act inside the agents' masks themselves; the probe of the
    # action space (masked:mlfs-rl) sees no future and no true length either
    return names + heuristic_names() + control_names() + ["masked:mlfs-rl"]


@dataclass(frozen=True)
class WarmStartSection:
    """Behaviour cloning, DAgger and the prior KL.

    Attributes:
        prior_kl: ``β`` of a term ``β · KL(π ‖ π₀)`` added to PPO's loss, ``π₀`` the
            run's warm start, frozen (behaviour-regularised RL: the update leaves the
            imitation policy only where the return pays for it;
            :class:`agents.learner.ClipFractionPPOLearner`); 0 (the default) = off.
            Needs PPO and a warm start (``bc_teacher``); the run folder keeps the
            prior (``prior/``), so a resumed run continues with it.
        bc_teacher: whose placements warm-start the policy by behaviour cloning
            before PPO (a heuristic-guided start, in the spirit of Harmony's guided
            exploration): ``lookahead`` (per job, the heuristic placement with the
            lowest predicted iteration time, :class:`agents.teachers.LookaheadTeacher`),
            ``rollout`` (per job, the heuristic placement whose simulated future has
            the lowest total JCT, :class:`agents.teachers.RolloutTeacher`), a
            heuristic's name, a masked policy's (``masked:<heuristic>``, or
            ``masked:mlfs-rl``: MLF-RL's placement inside the agents' masks, the
            action-space probe of docs/agents.md), or null (start from scratch).
        bc_margin: the ``rollout`` teacher keeps its base heuristic's (``bc_base``)
            own placement unless another proposal's estimated total JCT is lower by
            more than this fraction (0 = always the lowest;
            :class:`agents.teachers.RolloutTeacher`).
        bc_base: the ``rollout`` teacher's base: the registered heuristic (e.g.
            ``resident-aware``) that places every later job of a rollout and whose
            placement ``bc_margin`` keeps.
        bc_protect: with ``rollout``, one more proposal: interference-aware with its
            cost also counting the harm to resident jobs weighted by their size,
            ``bc_protect`` times (its ``protect``; 0 = no such proposal).
        bc_speed: with ``rollout``, one more proposal: interference-aware with its
            cost also counting how much slower each GPU type runs the job's compute,
            ``bc_speed`` times (its ``speed``; 0 = no such proposal).
        bc_episodes: teacher episodes (of ``episode_jobs`` jobs) to imitate.
        bc_epochs: passes of supervised training over the teacher's decisions.
        bc_weight_power: each decision's imitation loss is weighted by its job's GPU
            work (workers × iterations × compute per iteration) to this power, scaled
            to mean 1 (:func:`agents.training.imitation_weights`); 0 = every decision
            alike.
        dagger_rounds: after behaviour cloning, rounds of DAgger relabelling (0 =
            none): the network acts greedily on ``bc_episodes`` fresh training
            episodes, the teacher labels every state it visits, the labels are added
            to the dataset and the network trains ``bc_epochs`` more passes on it all.
    """

    prior_kl: float = 0.0
    bc_teacher: str | None = "lookahead"
    bc_margin: float = 0.0
    bc_base: str = "interference-aware"
    bc_protect: float = 0.0
    bc_speed: float = 0.0
    bc_episodes: int = 20
    bc_epochs: int = 12
    bc_weight_power: float = 0.0
    dagger_rounds: int = 0

    def validate(self, where: str, key: str) -> None:
        check_bounds(self, WARM_START_BOUNDS, where, key)
        check(
            self.dagger_rounds >= 0,
            where,
            f"{key}.dagger_rounds",
            f"must be >= 0, got {self.dagger_rounds}",
        )
        prior = f"{key}.prior_kl"
        check(0 <= self.prior_kl <= 1e3, where, prior, f"must be in [0, 1000], got {self.prior_kl}")
        if self.prior_kl:
            check(bool(self.bc_teacher), where, prior, "needs a warm start (bc_teacher)")
        check(0.0 <= self.bc_margin < 1.0, where, f"{key}.bc_margin", "must be in [0, 1)")
        for name in ("bc_protect", "bc_speed", "bc_weight_power"):
            value = getattr(self, name)
            check(value >= 0, where, f"{key}.{name}", f"must be >= 0, got {value}")
        for name in ("bc_episodes", "bc_epochs"):
            value = getattr(self, name)
            check(value >= 1, where, f"{key}.{name}", f"must be >= 1, got {value}")
        if self.bc_teacher is not None:
            names = teacher_names()
            check(
                self.bc_teacher in names,
                where,
                f"{key}.bc_teacher",
                f"must be one of {', '.join(names)} or null, got {self.bc_teacher!r}",
            )
        from marl_sched.policies.heuristics import hint_names

        check(
            self.bc_base in hint_names(),
            where,
            f"{key}.bc_base",
            f"must be one of {', '.join(hint_names())}, got {self.bc_base!r}",
        )
