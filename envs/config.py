"""The ``env:`` section of an experiment config: every option of ``ClusterPlacement-v1``
(the reference is :mod:`envs.cluster_env`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from marl_sched.config import (
    MAX_GPUS,
    ExperimentConfig,
    check,
    drop_retired,
    parse_section,
    shown_value,
)

ENV_NAME = "marl_sched/ClusterPlacement"
ENV_VERSION = 1
ENV_ID = f"{ENV_NAME}-v{ENV_VERSION}"
#: v2 = v1 + the migration decision (``env.migration: on``); with it off the env is v1
MIGRATION_VERSION = 2
ENV_ID_V2 = f"{ENV_NAME}-v{MIGRATION_VERSION}"
FORWARD_RULES = ("must", "free")
#: ``env.migration_offer``'s values (:class:`EnvConfig`)
MIGRATION_OFFERS = ("slowdown", "remaining")
#: ``env.migration_where``'s values (:class:`EnvConfig`)
MIGRATION_WHERE = ("agent", "rule")


@dataclass(frozen=True)
class RewardConfig:
    """``env.reward``: the team reward (:mod:`envs.rewards`).

    Attributes:
        time_scale_s: seconds per reward unit (a full episode returns
            ``-avg JCT / time_scale_s``).
        function: ``module:function``, your own reward called as ``reward(sim, since)``
            each step (docs/extending.md); ``env.reward: module:function`` is short
            for it. Empty: the team reward.
    """

    time_scale_s: float = 3600.0
    function: str = ""

    def validate(self, where: str, key: str) -> None:
        check(self.time_scale_s > 0, where, f"{key}.time_scale_s",
              f"must be > 0, got {self.time_scale_s}")  # fmt: skip
        if self.function:
            from envs.rewards import reward_function

            reward_function(self.function, where, f"{key}.function")


@dataclass(frozen=True)
class EnvConfig:
    """Everything that changes what an agent sees, may do, or is paid
    (:mod:`envs.cluster_env` is the reference).

    Decision options (recorded in every checkpoint, :data:`DECISION_OPTIONS`):

    Attributes:
        central: one agent ``"central"`` over the whole datacenter.
        hints: heuristics whose plan in the acting scope becomes features and a follow
            action each (or a plan hint's datacenter-wide plan: :mod:`envs.hints`).
        global_hints: heuristics whose datacenter-wide plan becomes a ``peers_x`` column.
        consolidate: forward a multi-worker job's first task to a scope with one server
            for all its workers when the home scope has none.
        resident_features: the ``harm_to_residents`` group column.
        keep_together: fill a server before opening another.
        job_length: the ``log10_work_s/7`` job column.
        model_speed: speed columns give the job's own model's speed per GPU type
            (renamed ``model_speed`` / ``free_model_speed``).
        speed_floor: ``f`` in [0, 1] (0 = off): workers only on GPUs at least ``f ×``
            the fastest type with room for the remaining workers.
        speed_floor_min_work: the floor binds only jobs of at least this many
            GPU-seconds.
        wait_to_fit: ``c >= 0`` (0 = off): a job one server could hold stays queued up
            to ``c ×`` its isolated runtime while none can.
        ps_rule: PS go where the heuristics put them (``ps_near_workers``).
        forward_rule: ``must`` (the default) or ``free``.
        migration: the migration decision (``ClusterPlacement-v2``); off = v1.
        migration_tick_s: also offer moves every this many seconds (0 = completions only).
        migration_max_moves: moves per job (default 1).
        migration_min_interval_s: seconds between two moves of one job.
        migration_offer: which running job an agent is offered (of those that may
            move): ``slowdown`` (the most slowed, MLFS's overload target; the default)
            or ``remaining`` (the longest estimated remaining work, the upgrade
            lever's target: :func:`marl_sched.policies.levers.remaining_work_s`).
        migration_where: where an offered move goes: ``agent`` (task by task, the
            agents' own placement; the default) or ``rule`` (``migration_offer:
            remaining`` only: the upgrade rule's option for the job, so the agent
            decides only whether, in one action: keep, or the action towards the
            option's first task).

    Episode and space options (a network serves any of them):

    Attributes:
        window_jobs: jobs per episode, a slice of the workload window; null = all.
        window_warmup_jobs: unscored jobs placed before a slice (0: empty cluster).
        pad: ``[G_max, S_max, R_max]`` padding; empty = the largest scope's sizes.
        reward: :class:`RewardConfig`.
    """

    central: bool = False
    hints: tuple[str, ...] = ()
    global_hints: tuple[str, ...] = ()
    consolidate: bool = False
    resident_features: bool = False
    keep_together: bool = False
    job_length: bool = False
    model_speed: bool = False
    speed_floor: float = 0.0
    speed_floor_min_work: float = 0.0
    wait_to_fit: float = 0.0
    ps_rule: bool = False
    forward_rule: str = "must"
    migration: bool = False
    migration_tick_s: float = 0.0
    migration_max_moves: int = 1
    migration_min_interval_s: float = 0.0
    migration_offer: str = "slowdown"
    migration_where: str = "agent"
    window_jobs: int | None = None
    window_warmup_jobs: int = 0
    pad: tuple[int, ...] = ()
    reward: RewardConfig = field(default_factory=RewardConfig)

    def validate(self, where: str, key: str) -> None:
        from marl_sched.policies.heuristics import hint_names

        floor, wj = self.speed_floor, self.window_jobs
        checks = [(0.0 <= floor <= 1.0, "speed_floor", f"must be in [0, 1], got {floor}")]
        for name in (
            "speed_floor_min_work", "wait_to_fit", "migration_tick_s",
            "migration_max_moves", "migration_min_interval_s",
        ):  # fmt: skip
            value = getattr(self, name)
            checks.append((value >= 0, name, f"must be >= 0, got {value}"))
        known = hint_names()
        for name in ("hints", "global_hints"):
            names = getattr(self, name)
            bad = f"is not a heuristic or hint variant ({', '.join(known)})"
            checks += [(h in known, name, f"{h!r} {bad}") for h in names]
            checks.append((len(set(names)) == len(names), name, "repeats a name"))
        checks += [
            (self.forward_rule in FORWARD_RULES, "forward_rule",
             f"must be one of {', '.join(FORWARD_RULES)}, got {self.forward_rule!r}"),
            (self.migration_offer in MIGRATION_OFFERS, "migration_offer",
             f"must be one of {', '.join(MIGRATION_OFFERS)}, got {self.migration_offer!r}"),
            (self.migration_where in MIGRATION_WHERE, "migration_where",
             f"must be one of {', '.join(MIGRATION_WHERE)}, got {self.migration_where!r}"),
            (self.migration_where != "rule" or self.migration_offer == "remaining",
             "migration_where", "'rule' needs migration_offer: remaining (the rule's option)"),
            (wj is None or wj >= 1, "window_jobs", f"must be >= 1, got {wj}"),
            (len(self.pad) in (0, 3) and all(1 <= p <= MAX_GPUS for p in self.pad), "pad",
             f"must be empty or three sizes >= 1 (each <= {MAX_GPUS:,}) [G_max, S_max, R_max], "
             f"got {shown_value(list(self.pad))}"),
            (0 <= self.window_warmup_jobs <= 10**7, "window_warmup_jobs",
             f"must be in [0, 10,000,000], got {self.window_warmup_jobs}"),
            (wj is None or wj <= 10**7, "window_jobs", f"must be <= 10,000,000, got {wj}"),
        ]  # fmt: skip
        for ok, name, msg in checks:
            check(ok, where, f"{key}.{name}", msg)

    def decision_options(self) -> dict:
        """The options that change observations or masks (:data:`DECISION_OPTIONS`),
        JSON-ready (tuples as lists)."""
        return {k: _plain(getattr(self, k)) for k in DECISION_OPTIONS}


#: what an agent observes or may do; a checkpoint records them
DECISION_OPTIONS = tuple(
    f.name
    for f in dataclasses.fields(EnvConfig)
    if f.name not in ("window_jobs", "window_warmup_jobs", "pad", "reward")
)
#: the migration options (v2) at their defaults: what a v1 checkpoint was trained with
MIGRATION_OPTIONS = {
    f.name: f.default for f in dataclasses.fields(EnvConfig) if f.name.startswith("migration")
}
#: decision options added after checkpoints shipped: the value of one that records none
LATER_OPTIONS = {"model_speed": False, "migration_offer": "slowdown", "migration_where": "agent"}
#: decision options that no longer ship, with the value that meant "off": a config,
#: signed run or manifest that carries one at that value reads as if it did not; any
#: other value is refused, naming the git tag that keeps the option's code
RETIRED_OPTIONS = {"subclusters_per_agent": 1, "follow_commits": False, "follow_only": False}
#: ``env.reward`` fields that no longer ship, likewise (the potential's iteration times
#: from the learned interference model; the team reward paid to every agent)
RETIRED_REWARD_FIELDS = {"interference": "simulator", "credit": "actor"}


def drop_retired_options(options: Any, where: str, prefix: str = "env") -> Any:
    """``options`` without the :data:`RETIRED_OPTIONS` (and its ``reward`` without the
    :data:`RETIRED_REWARD_FIELDS`) at their "off" value; ``InputError`` naming
    ``prefix.<key>`` of any other."""
    options = drop_retired(options, RETIRED_OPTIONS, where, prefix)
    if isinstance(options, dict) and isinstance(options.get("reward"), dict):
        reward = drop_retired(options["reward"], RETIRED_REWARD_FIELDS, where, f"{prefix}.reward")
        options = {**options, "reward": reward}
    return options


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def reward_shorthand(env: dict) -> dict:
    """``env`` with ``reward: module:function`` spelt out as ``reward: {function: ...}``."""
    if isinstance(env.get("reward"), str):
        return {**env, "reward": {"function": env["reward"]}}
    return env


def env_config(cfg: ExperimentConfig) -> EnvConfig:
    """Parse ``cfg.env``; a bad key raises ``InputError`` naming ``env.<key>``."""
    env = drop_retired_options(reward_shorthand(dict(cfg.env or {})), cfg.source)
    return parse_section(EnvConfig, env, cfg.source, "env")


def env_id(migration: bool) -> tuple[str, int]:
    """``(id, version)`` of the environment with or without the migration decision."""
    return (ENV_ID_V2, MIGRATION_VERSION) if migration else (ENV_ID, ENV_VERSION)
