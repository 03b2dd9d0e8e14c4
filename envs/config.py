"""The ``env:`` section of an experiment config (see :mod:`envs.cluster_env`)."""

from __future__ import annotations

from dataclasses import dataclass

from marl_sched.config import ExperimentConfig, check, parse_section

HOME_RULES = ("vc", "round-robin", "least-loaded")
WINDOW_SAMPLING = ("random", "sequential", "first")
FORWARD_RULES = ("must", "free")


@dataclass(frozen=True)
class EnvConfig:
    """How the multi-agent environment cuts episodes, picks home agents and rewards.

    Attributes:
        window_jobs: jobs per episode, a contiguous slice of the config's trace window
            (``workload.start``/``max_jobs``); null = the whole window.
        window_sampling: where an episode's slice starts: ``random`` (uniform, from
            the ``reset`` seed), ``sequential`` (0, w, 2w, ... in turn) or ``first``.
        window_starts: allowed slice starts (job indices within the config's window);
            empty = every start (``random``) or every multiple of ``window_jobs``.
        max_sim_time: truncate at the first decision this many simulated seconds
            after the slice's first submit (null = no limit).
        max_placed_jobs: truncate once this many jobs have been placed (null = no
            limit).
        home_rule: which agent a job arrives at: ``vc`` (CRC-32 of the trace's
            virtual cluster mod the number of agents; least-loaded without a vc),
            ``round-robin`` or ``least-loaded`` (most free GPUs).
        time_scale_s: seconds per unit of the time term; with the per-job
            normalisation the episode's time return is ``-avg JCT / time_scale_s``.
        slowdown_weight: weight ``w`` of the placement-time slowdown shaping term.
        use_learned_reward: predict slowdowns with the learned interference model
            (``marl_sched.interference``) when it is available; else (or when false)
            with the simulator's own performance model.
        exchange: agents see every subcluster's summary row in ``peers_x``; false =
            only their own row (an ablation of the observation exchange).
        max_groups: pad GPU-group arrays to this size (null = the largest
            subcluster's); set it to share spaces across topologies.
        max_servers: pad server arrays to this size (null = the largest subcluster's).
        max_racks: pad rack arrays to this size (null = the largest subcluster's).
        forward_rule: when a forward action is legal: ``must`` (default; forward when
            you must: only if the acting subcluster cannot host the current task, or
            cannot host all of the job's remaining tasks while another can) or
            ``free`` (to any other subcluster with room for the task; lets any
            heuristic placement be replayed step by step).
    """

    window_jobs: int | None = 200
    window_sampling: str = "random"
    window_starts: tuple[int, ...] = ()
    max_sim_time: float | None = None
    max_placed_jobs: int | None = None
    home_rule: str = "vc"
    time_scale_s: float = 3600.0
    slowdown_weight: float = 0.1
    use_learned_reward: bool = True
    exchange: bool = True
    max_groups: int | None = None
    max_servers: int | None = None
    max_racks: int | None = None
    forward_rule: str = "must"

    def validate(self, where: str, key: str) -> None:
        for name in ("window_jobs", "max_placed_jobs", "max_groups", "max_servers", "max_racks"):
            value = getattr(self, name)
            if value is not None:
                check(value >= 1, where, f"{key}.{name}", f"must be >= 1, got {value}")
        check(
            self.window_sampling in WINDOW_SAMPLING,
            where,
            f"{key}.window_sampling",
            f"must be one of {', '.join(WINDOW_SAMPLING)}, got {self.window_sampling!r}",
        )
        for i, start in enumerate(self.window_starts):
            check(start >= 0, where, f"{key}.window_starts[{i}]", f"must be >= 0, got {start}")
        if self.max_sim_time is not None:
            check(
                self.max_sim_time > 0,
                where,
                f"{key}.max_sim_time",
                f"must be > 0, got {self.max_sim_time}",
            )
        check(
            self.home_rule in HOME_RULES,
            where,
            f"{key}.home_rule",
            f"must be one of {', '.join(HOME_RULES)}, got {self.home_rule!r}",
        )
        check(
            self.forward_rule in FORWARD_RULES,
            where,
            f"{key}.forward_rule",
            f"must be one of {', '.join(FORWARD_RULES)}, got {self.forward_rule!r}",
        )
        check(
            self.time_scale_s > 0,
            where,
            f"{key}.time_scale_s",
            f"must be > 0, got {self.time_scale_s}",
        )
        check(
            self.slowdown_weight >= 0,
            where,
            f"{key}.slowdown_weight",
            f"must be >= 0, got {self.slowdown_weight}",
        )


def env_config(cfg: ExperimentConfig) -> EnvConfig:
    """Parse ``cfg.env``; a bad key raises ``InputError`` naming ``env.<key>``."""
    return parse_section(EnvConfig, cfg.env, cfg.source, "env")
