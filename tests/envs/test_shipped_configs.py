"""Every shipped config builds ``ClusterPlacement-v1`` with the default recipe's options
on, and the result passes PettingZoo's ``parallel_api_test`` and RLlib's multi-agent
check (a short window of each config's workload; no Ray cluster is started)."""

from __future__ import annotations

import dataclasses

import pytest

from envs import make_env, make_parallel_env
from envs.config import env_config
from marl_sched.config import REPO_ROOT, load_config

CONFIGS = sorted(
    str(p.relative_to(REPO_ROOT / "configs"))
    for p in (REPO_ROOT / "configs").rglob("*.yaml")
    if "traces" not in p.parts
)
DEFAULT_OPTIONS = env_config(load_config(REPO_ROOT / "configs" / "default.yaml")).decision_options()


def _short(name: str):
    cfg = load_config(REPO_ROOT / "configs" / name)
    if not cfg.resolve_path(cfg.workload.trace).exists():
        pytest.skip(f"{name}: its trace {cfg.workload.trace} is not here (../shared/data absent)")
    workload = dataclasses.replace(cfg.workload, max_jobs=40)
    env = {**(cfg.env or {}), **DEFAULT_OPTIONS, "window_jobs": None}
    return dataclasses.replace(cfg, workload=workload, env=env)


def test_every_config_is_covered():
    assert {"default.yaml", "tiny.yaml", "train_tiny.yaml", "philly.yaml"} <= set(CONFIGS)


@pytest.mark.parametrize("name", CONFIGS)
def test_parallel_api_and_rllib_check_with_the_default_options(name):
    from pettingzoo.test import parallel_api_test
    from ray.rllib.utils.pre_checks.env import check_multiagent_environments

    cfg = _short(name)
    penv = make_parallel_env(cfg)
    assert penv.env.builder.hints == tuple(DEFAULT_OPTIONS["hints"])
    assert penv.env.builder.wait_to_fit == DEFAULT_OPTIONS["wait_to_fit"]
    parallel_api_test(penv, num_cycles=25)
    check_multiagent_environments(make_env(cfg))
