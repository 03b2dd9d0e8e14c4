"""Helpers of the environment tests: the configs, small hand-made clusters and random
masked rollouts."""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np

from marl_sched.config import (
    REPO_ROOT,
    ExperimentConfig,
    ServerTypeConfig,
    TopologyConfig,
    load_config,
)
from marl_sched.jobs import Job

TINY = str(REPO_ROOT / "configs" / "tiny.yaml")
DEFAULT = str(REPO_ROOT / "configs" / "default.yaml")
MODEL = "cifar10"


@cache
def default_short(max_jobs: int = 150) -> ExperimentConfig:
    """configs/default.yaml (the default recipe's options on) with a short window."""
    cfg = load_config(DEFAULT)
    return dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, max_jobs=max_jobs))


def masked_random_action(obs: dict[str, np.ndarray], rng: np.random.Generator) -> int:
    """A uniformly random legal action."""
    return int(rng.choice(np.flatnonzero(obs["action_mask"])))


def rollout(
    env, seed: int | None, action_seed: int = 0, max_steps: int = 20_000, options=None
) -> list[tuple]:
    """One episode of the RLlib env under random masked actions: every step's
    ``(acting agent, action, obs, rewards, terminateds, truncateds, infos)``."""
    rng = np.random.default_rng(action_seed)
    obs, _ = env.reset(seed=seed, options=options)
    trail = [(None, None, obs, {}, {}, {}, {})]
    for _ in range(max_steps):
        agent = env.acting_agent
        action = masked_random_action(obs[agent], rng)
        obs, rew, term, trunc, info = env.step({agent: action})
        trail.append((agent, action, obs, rew, term, trunc, info))
        if term["__all__"] or trunc["__all__"]:
            return trail
    raise AssertionError(f"episode did not end within {max_steps} steps")


def server(
    count: int = 2, gpus: int = 2, groups: int = 1, sockets: int = 1, **kw
) -> ServerTypeConfig:
    """A server type: ``sockets × groups`` GPU groups of ``gpus`` GPUs each."""
    base = {"name": "s", "cpu_cores": 64, "memory_gb": 256.0, "gpu_type": "v100"}
    return ServerTypeConfig(
        count=count,
        sockets=sockets,
        groups_per_socket=groups,
        gpus_per_group=gpus,
        **{**base, **kw},
    )


def cluster(
    subclusters: int, *types: ServerTypeConfig, racks: int = 1, per_rack: int = 1, **env
) -> ExperimentConfig:
    """A config of ``subclusters`` × ``racks`` × ``per_rack`` servers of ``types``; the
    env options ``env`` (the whole window per episode)."""
    topo = TopologyConfig(
        subclusters=subclusters,
        racks_per_subcluster=racks,
        servers_per_rack=per_rack,
        server_types=tuple(types),
    )
    return ExperimentConfig(topology=topo, env={"window_jobs": None, **env})


def job(
    i: int,
    workers: int,
    ps: int = 0,
    vc: str | None = None,
    submit: float = 0.0,
    iterations: float = 100.0,
    model: str = MODEL,
) -> Job:
    """A job without a virtual cluster arrives at agent ``i mod A``."""
    return Job(i, f"j{i}", model, workers, ps, iterations, submit, 10.0, vc=vc)


def record_placements(env) -> dict:
    """Record every placement the env applies to its simulator from now until the next
    ``reset`` (job id → Placement): wraps this episode's ``env.sim.apply``."""
    placed: dict = {}
    sim = env.sim
    apply = sim.apply

    def recording(placement, *args, **kwargs):
        if placement is not None:
            placed[sim.pending.job_id] = placement
        return apply(placement, *args, **kwargs)

    sim.apply = recording
    return placed
