"""Replaying a heuristic's placements through the env reproduces ``simulate`` exactly,
and the time term of the reward is exactly ``-avg JCT / time_scale_s``."""

from __future__ import annotations

import pytest

from envs import make_env
from marl_sched.config import load_config
from marl_sched.jobs import Placement
from marl_sched.metrics import OUTCOME_KEYS
from marl_sched.policies import make_policy
from marl_sched.runner import build_cluster, load_workload, simulate
from tests.envs.helpers import TINY

EXACT = (*OUTCOME_KEYS, "jobs_unplaceable")


def _replay(env, policy_name: str, seed: int) -> dict:
    policy = make_policy(policy_name)
    policy.reset(env.topology, seed)
    env.reset(seed=0)
    while not env.done:
        placement = policy.place(env.pending_job, env.cluster_view())
        assert placement is not None, "the heuristic left a job queued that the env offers"
        env.replay_placement(placement)
    return env.metrics()


@pytest.mark.parametrize("policy_name", ["first-fit", "load-balance"])
def test_replaying_a_heuristic_reproduces_simulate_exactly(policy_name):
    cfg = load_config(TINY)
    topo, perf = build_cluster(cfg)
    expected, _, _ = simulate(cfg, policy_name, load_workload(cfg, perf), topo, perf)
    env = make_env(
        cfg, env={"window_jobs": None, "window_sampling": "first", "forward_rule": "free"}
    )
    got = _replay(env, policy_name, cfg.simulation.seed)
    assert got["jobs_total"] == expected["jobs_total"] == 40
    for key in EXACT:
        assert got[key] == expected[key], key


def test_time_term_sums_to_minus_avg_jct_over_the_time_scale():
    env = make_env(
        TINY, env={"slowdown_weight": 0.0, "time_scale_s": 1000.0, "forward_rule": "free"}
    )
    metrics = _replay(env, "first-fit", 0)
    assert metrics["jobs_completed"] == 40
    assert env.team_return == pytest.approx(-metrics["avg_jct_s"] / 1000.0, rel=1e-9)


def test_placement_actions_forward_to_the_owning_agent_first(tiny_env):
    env = tiny_env(forward_rule="free")
    env.reset(seed=0)
    job = env.pending_job
    home = env.acting_agent
    k = env.possible_agents.index(home)
    other = 1 - k
    lay = env.layout
    # put every worker in the other subcluster's first group and PS in the home's
    foreign = int(lay.group_start[other])
    local = int(lay.group_start[k])
    placement = Placement((foreign,) * job.num_workers, (local,) * job.num_ps)
    steps = env.placement_actions(placement)
    expected = [(home, lay.max_groups + other), (env.possible_agents[other], 0)]
    expected += [(env.possible_agents[other], 0)] * (job.num_workers - 1)
    if job.num_ps:
        expected += [(env.possible_agents[other], lay.max_groups + k), (home, 0)]
        expected += [(home, 0)] * (job.num_ps - 1)
    assert steps == expected
    with pytest.raises(ValueError, match="placement has 0 workers"):
        env.placement_actions(Placement((), ()))
