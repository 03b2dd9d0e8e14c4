"""Wait to fit (``env.wait_to_fit``): a job one server could hold, that no server can
take whole now, stays queued rather than split, for up to ``c ×`` its isolated
runtime."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from agents.policy import MarlPolicy, agents_from_weights
from envs.config import EnvConfig, env_config
from envs.observations import ObservationBuilder
from envs.session import PlacementSession
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.errors import InputError
from marl_sched.jobs import Job
from marl_sched.perf import PerformanceModel
from marl_sched.simulator import Simulator, run_policy
from tests.helpers import (
    random_jobs,
    tiny_topology,
    untrained_checkpoint,
)

MODEL = "resnet-50"


def _fragmented(free_per_server: int = 3):
    """8 servers of 8 GPUs, each with only ``free_per_server`` GPUs free."""
    topo = tiny_topology()
    perf = PerformanceModel(topo)
    view = Simulator(topo, [], perf=perf).view()
    free = np.zeros_like(np.asarray(view.group_free))
    for s in range(topo.n_servers):
        left = free_per_server
        for g in np.flatnonzero(topo.group_server == s):
            free[g] = min(left, int(topo.group_capacity[g]))
            left -= free[g]
    view = replace(view, group_free=free)
    assert np.bincount(topo.group_server, weights=free).max() == free_per_server
    return topo, perf, view


def _iso(perf, job):
    return perf.isolated_iteration_time(job.model, job.num_workers, job.num_ps) * job.iterations


def test_a_job_that_one_server_could_hold_waits_until_its_time_is_up():
    topo, perf, view = _fragmented(free_per_server=3)
    builder = ObservationBuilder(topo, perf, EnvConfig(wait_to_fit=1.0))
    job = Job(1, "j", MODEL, 4, 1, 100.0, view.now, 10.0)
    assert PlacementSession(builder, job, view, 0).waits()
    # still waiting just before c x its isolated runtime has passed; not after
    late = replace(view, now=view.now + 0.99 * _iso(perf, job))
    assert PlacementSession(builder, job, late, 0).waits()
    late = replace(view, now=view.now + 1.01 * _iso(perf, job))
    assert not PlacementSession(builder, job, late, 0).waits()
    # twice the allowance: still waiting at 1.01 x
    longer = ObservationBuilder(topo, perf, EnvConfig(wait_to_fit=2.0))
    assert PlacementSession(longer, job, late, 0).waits()
    # a job a server can take now, one worker, or one larger than any server: no wait
    for other in (replace(job, num_workers=3), replace(job, num_workers=1)):
        assert not PlacementSession(builder, other, view, 0).waits()
    assert topo.server_gpus.max() == 8
    assert not PlacementSession(builder, replace(job, num_workers=9), view, 0).waits()
    # the option off: the job is split at once
    assert not PlacementSession(ObservationBuilder(topo, perf), job, view, 0).waits()


def test_the_policy_declines_and_the_option_is_served_from_the_manifest():
    topo, perf, view = _fragmented(free_per_server=3)
    job = Job(1, "j", MODEL, 4, 1, 100.0, view.now, 10.0)
    builder = ObservationBuilder(topo, perf, EnvConfig(wait_to_fit=1.0))
    manifest, weights = untrained_checkpoint(builder, {"hidden": 8, "layers": 1})
    # recorded by the checkpoint from the builder, not written here
    assert manifest["env"]["options"]["wait_to_fit"] == 1.0
    agents = agents_from_weights(manifest, weights)
    assert agents.env_options()["wait_to_fit"] == 1.0
    policy = MarlPolicy(agents=agents)
    policy.reset(topo)
    assert policy.place(job, view) is None
    manifest["env"]["options"]["wait_to_fit"] = 0.0  # the same weights, without the rule
    agents = agents_from_weights(manifest, weights)
    assert agents.env_options()["wait_to_fit"] == 0.0
    policy = MarlPolicy(agents=agents)
    policy.reset(topo)
    placed = policy.place(job, view)
    assert placed is not None and len(set(topo.group_server[list(placed.worker_groups)])) > 1


@pytest.mark.parametrize("c", [0.0, 0.3])
def test_no_job_is_split_before_its_wait_is_over(c):
    """A busy window under an (untrained) MARL policy whose masks keep a job on one
    server when one can take it (keep together, consolidate): every job of 2..8
    workers that runs on more than one server queued for at least ``c ×`` its
    isolated runtime."""
    topo = tiny_topology()
    perf = PerformanceModel(topo)
    options = {"wait_to_fit": c, "keep_together": True, "consolidate": True}
    builder = ObservationBuilder(topo, perf, EnvConfig(**options))
    manifest, weights = untrained_checkpoint(builder, {"hidden": 8, "layers": 1})
    manifest["env"]["options"].update(options)
    policy = MarlPolicy(agents=agents_from_weights(manifest, weights))
    policy.reset(topo)
    jobs = random_jobs(perf, 60, seed=5, mean_gap=30.0)
    sim = Simulator(topo, jobs, perf=perf)
    records = run_policy(sim, policy.place)
    assert len(records) == len(jobs)
    split = [r for r in records if 2 <= r.job.num_workers <= 8 and r.n_servers > 1]
    assert split, "this window should split some jobs"
    early = [r for r in split if r.queue_time < c * _iso(perf, r.job) * (1 - 1e-9)]
    assert not early
    if c == 0.0:  # without the rule some split job did not wait
        assert any(r.queue_time == 0.0 for r in split)


def test_the_option_is_validated():
    tiny = load_config(str(REPO_ROOT / "configs" / "tiny.yaml"))
    with pytest.raises(InputError, match="env.wait_to_fit: must be >= 0, got -1"):
        env_config(replace(tiny, env={"wait_to_fit": -1}))
    with pytest.raises(ValueError, match="wait_to_fit"):
        ObservationBuilder(
            tiny_topology(), PerformanceModel(tiny_topology()), EnvConfig(wait_to_fit=-1)
        )
    assert EnvConfig().wait_to_fit == 0.0
