"""Replaying a heuristic's placements through the env (``forward_rule: free``, rule
options off) reproduces ``marl_sched.runner.simulate`` exactly."""

from __future__ import annotations

import pytest

from envs import make_env
from marl_sched.config import load_config
from marl_sched.jobs import Placement
from marl_sched.metrics import OUTCOME_KEYS
from marl_sched.policies import make_policy
from marl_sched.runner import build_cluster, load_workload, simulate
from tests.envs.helpers import TINY, cluster, job, server

EXACT = (*OUTCOME_KEYS, "jobs_unplaceable", "jobs_total")


def _replay(env, policy_name: str, seed: int) -> dict:
    policy = make_policy(policy_name)
    policy.reset(env.topology, seed)
    env.reset(seed=0)
    while not env.done:
        placement = policy.place(env.pending_job, env.cluster_view())
        assert placement is not None, "the heuristic left a job queued that the env offers"
        out = env.replay_placement(placement)
    assert out[2]["__all__"]  # the last replayed step ended the episode
    return env.metrics()


@pytest.mark.parametrize("policy_name", ["first-fit", "interference-aware"])
def test_replaying_a_heuristic_reproduces_simulate_exactly(policy_name):
    cfg = load_config(TINY)
    topo, perf = build_cluster(cfg)
    expected, records, _ = simulate(cfg, policy_name, load_workload(cfg, perf), topo, perf)
    env = make_env(cfg, env={"window_jobs": None, "forward_rule": "free"})
    got = _replay(env, policy_name, cfg.simulation.seed)
    assert got["jobs_total"] == expected["jobs_total"] == 40
    for key in EXACT:
        assert got[key] == expected[key], key
    finish = {r.job.job_id: r.finish_time for r in env.sim.result()}
    assert finish == {r.job.job_id: r.finish_time for r in records}
    starts = {r.job.job_id: r.start_time for r in env.sim.result()}
    assert starts == {r.job.job_id: r.start_time for r in records}


def test_placement_actions_forward_to_the_owning_agent_first(tiny_env):
    env = tiny_env(forward_rule="free")
    env.reset(seed=0)
    job0 = env.pending_job
    home = env.acting_agent
    k = env.possible_agents.index(home)
    other = 1 - k
    b = env.builder
    g = b.pad[0]
    # every worker in the other subcluster's first group, the PS in the home's
    foreign = int(b.scopes[other].groups[0])
    local = int(b.scopes[k].groups[0])
    placement = Placement((foreign,) * job0.num_workers, (local,) * job0.num_ps)
    steps = env.placement_actions(placement)
    expected = [g + other] + [0] * job0.num_workers
    if job0.num_ps:
        expected += [g + k] + [0] * job0.num_ps
    assert steps == expected
    # a group's local slot is its index in the owner's scope
    last = int(b.scopes[other].groups[-1])
    assert env.placement_actions(Placement((last,), ()))[-1] == len(b.scopes[other].groups) - 1


def test_replay_placement_steps_the_job_and_refuses_none(tiny_env):
    env = tiny_env(forward_rule="free")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="None placement cannot be replayed"):
        env.replay_placement(None)
    first = env.pending_job
    policy = make_policy("first-fit")
    policy.reset(env.topology, 0)
    p = policy.place(first, env.cluster_view())
    obs, rew, term, trunc, info = env.replay_placement(p)
    assert env.pending_job is not None and env.pending_job.job_id != first.job_id
    assert first.job_id in env.sim.running or first.job_id in env.sim.records
    if first.job_id in env.sim.running:
        assert tuple(sorted(env.sim.running[first.job_id].placement.worker_groups)) == tuple(
            sorted(p.worker_groups)
        )


def test_under_forward_when_you_must_a_needless_split_is_refused():
    # two subclusters of one 4-GPU server: a 2-worker job fits its home whole, so
    # forwarding its second worker away is illegal
    cfg = cluster(2, server(count=2, gpus=4))
    env = make_env(cfg, jobs=[job(0, 2)])
    env.reset(seed=0)
    assert env.acting_agent == "sc0"
    with pytest.raises(ValueError, match=r"agent sc0: action \d+ is masked \(forward to 1\)"):
        env.replay_placement(Placement((0, 1), ()))
    free = make_env(cfg, jobs=[job(0, 2)], env={"forward_rule": "free"})
    free.reset(seed=0)
    free.replay_placement(Placement((0, 1), ()))
    assert free.done and free.metrics()["jobs_completed"] == 1
