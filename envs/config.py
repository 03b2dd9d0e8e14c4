"""The ``env:`` section of an experiment config: every option of ``ClusterPlacement-v1``
(the reference is :mod:`envs.cluster_env`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from marl_sched.config import MAX_GPUS, ExperimentConfig, check, parse_section, shown_value

ENV_NAME = "marl_sched/ClusterPlacement"
ENV_VERSION = 1
ENV_ID = f"{ENV_NAME}-v{ENV_VERSION}"
#: v2 = v1 + the migration decision (``env.migration: on``); with it off the env is v1
MIGRATION_VERSION = 2
ENV_ID_V2 = f"{ENV_NAME}-v{MIGRATION_VERSION}"
FORWARD_RULES = ("must", "free")
INTERFERENCE_SOURCES = ("simulator", "learned")


CREDITS = ("actor", "team")


@dataclass(frozen=True)
class RewardConfig:
    """``env.reward``: the team reward (:mod:`envs.rewards`).

    Attributes:
        time_scale_s: seconds per reward unit; an episode run to its end returns
            exactly ``-avg JCT / time_scale_s``.
        interference: where the potential's seconds per iteration come from:
            ``simulator`` (the performance model's, the default) or ``learned`` (the
            learned interference model's predicted slowdowns, as in the paper).
        credit: which agents an RLlib env step pays (``envs.cluster_env``): ``actor``
            (the agent that acted; RLlib's episode return, the sum over agents, is
            then the team return) or ``team`` (every agent in the episode, as
            cooperative MARL pays a shared reward: each agent's return is the team's
            from its first decision on, so its value and advantages count what its
            decision does to the rewards paid at the other agents' steps; RLlib sums
            what an agent is paid between two of its decisions). The PettingZoo env
            pays every agent the team reward either way.
        function: ``module:function``, your own reward instead of the team reward
            (:mod:`envs.rewards`, "Your own reward": called once per env step as
            ``reward(sim, since)``; docs/extending.md); ``env.reward: module:function``
            is short for it. Empty (the default): the team reward.
    """

    time_scale_s: float = 3600.0
    interference: str = "simulator"
    credit: str = "actor"
    function: str = ""

    def validate(self, where: str, key: str) -> None:
        check(
            self.time_scale_s > 0,
            where,
            f"{key}.time_scale_s",
            f"must be > 0, got {self.time_scale_s}",
        )
        check(
            self.interference in INTERFERENCE_SOURCES,
            where,
            f"{key}.interference",
            f"must be one of {', '.join(INTERFERENCE_SOURCES)}, got {self.interference!r}",
        )
        check(
            self.credit in CREDITS,
            where,
            f"{key}.credit",
            f"must be one of {', '.join(CREDITS)}, got {self.credit!r}",
        )
        if self.function:
            from envs.rewards import reward_function

            reward_function(self.function, where, f"{key}.function")


@dataclass(frozen=True)
class EnvConfig:
    """Everything that changes what an agent sees, may do, or is paid.

    Decision-process options (recorded in every checkpoint, :data:`DECISION_OPTIONS`):

    Attributes:
        central: one agent ``"central"`` over the whole datacenter (the single-agent
            variant) instead of one per subcluster.
        subclusters_per_agent: how many consecutive subclusters one agent schedules
            (default 1: one agent per subcluster, the paper's setting); ``k`` gives
            ``ceil(S / k)`` agents ``sc0..``, agent ``i`` over subclusters ``i*k ..
            i*k + k - 1``. The number of agents is thus an env option, not only the
            topology's. Ignored with ``central`` (one agent over everything).
        hints: heuristics whose plan for the job inside the acting agent's scope
            becomes group/job features and a follow action each.
        global_hints: heuristics whose plan for the job in the whole datacenter
            becomes a ``peers_x`` column (its share of the job per scope).
        consolidate: "consolidate when you can": a multi-worker job's first task is
            forwarded to a scope with one server for all its workers when the home
            scope has none.
        resident_features: the ``harm_to_residents`` group column.
        keep_together: keep-together masks (fill a server before opening another;
            open one that takes every remaining worker when the scope has one).
        job_length: the ``log10_work_s/7`` job column (the job's requested work).
        model_speed: the speed columns (``group_x``/``server_x`` ``gpu_speed``,
            ``peers_x`` ``free_gpu_speed``) give the job's own model's speed on each
            GPU type (:meth:`marl_sched.perf.PerformanceModel.group_speed_for`, the
            speed the simulator runs it at) instead of the type's catalogue-wide
            figure; the columns are renamed ``model_speed`` / ``free_model_speed``.
            What MLF-RL's and Harmony's networks see (their ``model_gpu_speed``).
        speed_floor: ``f`` in [0, 1], 0 = off: workers only on GPUs at least ``f ×``
            the fastest type with room for the job's remaining workers.
        speed_floor_min_work: the floor binds only jobs of at least this many
            GPU-seconds of work (0 = every job).
        wait_to_fit: ``c >= 0``, 0 = off: a job one server could hold, that no server
            can take whole now, stays queued up to ``c ×`` its isolated runtime.
        ps_rule: the agents place the workers; the PS go where the heuristics put
            them (``marl_sched.policies.heuristics.ps_near_workers``).
        follow_commits: a follow action places the rest of the job too: after the
            acting agent follows hint ``h`` for one task, every later task of the job
            follows ``h`` while that action stays legal (a job-level choice: a task-by-
            task random exploration that follows a plan for one task and scatters the
            others never sees what following it is worth; :mod:`envs.session`).
        follow_only: while any follow action is legal, the GPU-group slots are
            masked: the acting agent follows one hint's plan in its scope or forwards
            the job to another agent (with ``follow_commits``, one decision per job and
            agent: a learned choice among the heuristics' placements and the
            subclusters, per job and cluster state); a job no hint plans in the acting
            agent's scope is placed task by task as usual.
        forward_rule: ``must`` (forward when you must, the default) or ``free``
            (forward to any unvisited scope with room for the task; lets any
            heuristic placement be replayed step by step).
        migration: ``on`` (YAML true) / ``off`` (false, the default): at the
            migration triggers the acting agent may re-place a running job or keep
            it (``ClusterPlacement-v2``; :mod:`envs.cluster_env`, "Migration"). Off,
            every episode is v1's, bit for bit.
        migration_tick_s: with ``migration``, also offer moves every this many
            simulated seconds (0 = only after job completions, the default).
        migration_max_moves: with ``migration``, moves per job (default 1, as
            MLF-H's load control: no ping-pong); a job at the cap is not offered.
        migration_min_interval_s: with ``migration``, seconds between two moves of
            one job (default 0).

    Episode and space options (not recorded as decision options: a network serves
    any of them):

    Attributes:
        window_jobs: jobs per episode, a contiguous slice of the config's workload
            window; null = the whole window (what ``evaluate`` runs).
        window_warmup_jobs: with ``window_jobs``, up to this many jobs just before the
            slice come first, placed by the agents but not scored, so that the scored
            jobs meet a loaded cluster as a benchmark window's do after its
            ``workload.warmup_jobs`` (0, the default: a slice starts from an empty
            cluster).
        pad: ``[G_max, S_max, R_max]`` padding of the group, server and rack arrays;
            empty = the largest scope's sizes.
        reward: :class:`RewardConfig`.
    """

    central: bool = False
    subclusters_per_agent: int = 1
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
    follow_commits: bool = False
    follow_only: bool = False
    forward_rule: str = "must"
    migration: bool = False
    migration_tick_s: float = 0.0
    migration_max_moves: int = 1
    migration_min_interval_s: float = 0.0
    window_jobs: int | None = None
    window_warmup_jobs: int = 0
    pad: tuple[int, ...] = ()
    reward: RewardConfig = field(default_factory=RewardConfig)

    def validate(self, where: str, key: str) -> None:
        from marl_sched.policies.heuristics import hint_names

        check(
            1 <= self.subclusters_per_agent <= 100_000,
            where,
            f"{key}.subclusters_per_agent",
            f"must be in [1, 100,000], got {self.subclusters_per_agent}",
        )
        check(
            not (self.central and self.subclusters_per_agent != 1),
            where,
            f"{key}.subclusters_per_agent",
            "must be 1 with central: true (one agent over the whole datacenter)",
        )
        check(
            0.0 <= self.speed_floor <= 1.0,
            where,
            f"{key}.speed_floor",
            f"must be in [0, 1], got {self.speed_floor}",
        )
        for name in (
            "speed_floor_min_work", "wait_to_fit", "migration_tick_s",
            "migration_max_moves", "migration_min_interval_s",
        ):  # fmt: skip
            value = getattr(self, name)
            check(value >= 0, where, f"{key}.{name}", f"must be >= 0, got {value}")
        known = hint_names()
        for name in ("hints", "global_hints"):
            names = getattr(self, name)
            for h in names:
                check(
                    h in known,
                    where,
                    f"{key}.{name}",
                    f"{h!r} is not a heuristic or hint variant ({', '.join(known)})",
                )
            check(len(set(names)) == len(names), where, f"{key}.{name}", "repeats a name")
        check(
            self.forward_rule in FORWARD_RULES,
            where,
            f"{key}.forward_rule",
            f"must be one of {', '.join(FORWARD_RULES)}, got {self.forward_rule!r}",
        )
        if self.window_jobs is not None:
            check(
                self.window_jobs >= 1,
                where,
                f"{key}.window_jobs",
                f"must be >= 1, got {self.window_jobs}",
            )
        check(
            len(self.pad) in (0, 3) and all(1 <= p <= MAX_GPUS for p in self.pad),
            where,
            f"{key}.pad",
            f"must be empty or three sizes >= 1 (each <= {MAX_GPUS:,}) [G_max, S_max, R_max], "
            f"got {shown_value(list(self.pad))}",
        )
        check(
            0 <= self.window_warmup_jobs <= 10**7,
            where,
            f"{key}.window_warmup_jobs",
            f"must be in [0, 10,000,000], got {self.window_warmup_jobs}",
        )
        if self.window_jobs is not None:
            check(
                self.window_jobs <= 10**7,
                where,
                f"{key}.window_jobs",
                f"must be <= 10,000,000, got {self.window_jobs}",
            )

    def decision_options(self) -> dict:
        """The options that change observations or masks (:data:`DECISION_OPTIONS`),
        JSON-ready (tuples as lists)."""
        return {k: _plain(getattr(self, k)) for k in DECISION_OPTIONS}


#: the options that change what an agent observes or may do; a checkpoint records them
#: and is refused by an environment that sets any of them differently
DECISION_OPTIONS = tuple(
    f.name
    for f in dataclasses.fields(EnvConfig)
    if f.name not in ("window_jobs", "window_warmup_jobs", "pad", "reward")
)
#: the migration options (v2): a checkpoint of v1 records none of them and was trained
#: without migration (its values are these defaults); the cadence options are compared
#: only when ``migration`` is on
MIGRATION_OPTIONS = {
    f.name: f.default for f in dataclasses.fields(EnvConfig) if f.name.startswith("migration")
}
#: decision options added after checkpoints shipped, with the value every checkpoint that
#: records none of them was trained with (one agent per subcluster, follows task by task,
#: the GPU types' catalogue-wide speeds)
LATER_OPTIONS = {
    "subclusters_per_agent": 1,
    "follow_commits": False,
    "follow_only": False,
    "model_speed": False,
}


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def reward_shorthand(env: dict) -> dict:
    """``env`` with ``reward: module:function`` spelt out as ``reward: {function: ...}``."""
    if isinstance(env.get("reward"), str):
        return {**env, "reward": {"function": env["reward"]}}
    return env


def env_config(cfg: ExperimentConfig) -> EnvConfig:
    """Parse ``cfg.env``; a bad key raises ``InputError`` naming ``env.<key>``."""
    return parse_section(EnvConfig, reward_shorthand(dict(cfg.env or {})), cfg.source, "env")


def env_id(migration: bool) -> tuple[str, int]:
    """``(id, version)`` of the environment with or without the migration decision."""
    return (ENV_ID_V2, MIGRATION_VERSION) if migration else (ENV_ID, ENV_VERSION)
