"""Simulator invariants (hypothesis), determinism, and policy capacity."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marl_sched.catalogue import CATALOGUE
from marl_sched.perf import PerformanceModel
from marl_sched.policies import heuristic_names, make_policy
from marl_sched.simulator import Simulator
from tests.helpers import random_jobs, random_run, tiny_topology

HEURISTICS = heuristic_names()


def _check_state(sim: Simulator) -> None:
    """GPU, CPU and memory accounting agree with the running jobs; nothing overbooked."""
    topo = sim.topology
    used = np.zeros(topo.n_groups, dtype=np.int64)
    for run in sim.running.values():
        np.add.at(used, np.asarray(run.placement.worker_groups, dtype=np.int64), 1)
    assert np.all(used <= topo.group_capacity), "a GPU is double-booked"
    np.testing.assert_array_equal(sim.group_free, topo.group_capacity - used)
    assert sim.free_gpus == int(sim.group_free.sum())
    # CPU cores and memory: what each server has free is its capacity less what its
    # running tasks use, recomputed from the placements (memory per task is a multiple
    # of 0.5 GB, so exact; CPU per task is not, so up to the rounding of the sums)
    cpu_used, mem_used = np.zeros(topo.n_servers), np.zeros(topo.n_servers)
    for run in sim.running.values():
        (cpu_w, cpu_p), mem = sim.task_demands(run.job)
        for groups, cpu in ((run.placement.worker_groups, cpu_w), (run.placement.ps_groups, cpu_p)):
            servers = topo.group_server[np.asarray(groups, dtype=np.int64)]
            np.add.at(cpu_used, servers, cpu)
            np.add.at(mem_used, servers, mem)
    np.testing.assert_array_equal(sim.server_mem_free, topo.server_memory_gb - mem_used)
    np.testing.assert_allclose(sim.server_cpu_free, topo.server_cpu - cpu_used, rtol=0, atol=1e-9)
    assert np.all(sim.server_mem_free >= 0) and np.all(sim.server_cpu_free >= -1e-9)
    # what residents stand to lose, recomputed from the running jobs
    expo = [np.zeros_like(sim.group_exposure), np.zeros_like(sim.socket_exposure)]
    expo.append(np.zeros_like(sim.server_exposure))
    for run in sim.running.values():
        w, lay = run.job.num_workers * run.layout.weights, run.layout
        expo[0][lay.groups] += w[0]
        expo[1][np.unique(lay.worker_sockets)] += w[1]
        expo[2][np.unique(lay.worker_servers)] += w[2]
    for got, want in zip(
        (sim.group_exposure, sim.socket_exposure, sim.server_exposure), expo, strict=True
    ):
        np.testing.assert_allclose(got, want, atol=1e-9)
    # every running job's speed is what pricing it afresh in the current state gives,
    # to the last bit: the simulator's per-job cache of interference and communication
    # time (recomputed only for the jobs a change can reach) never goes stale
    state = (sim.link_load, sim.group_pressure, sim.socket_pressure, sim.server_pressure)
    for run in sim.running.values():
        spec = CATALOGUE[run.job.model]
        fresh = sim.perf.iteration_time(spec, run.layout, run.job.num_ps, *state)
        assert run.iter_time == fresh, (run.job.job_id, run.iter_time, fresh)


def _run_checked(sim: Simulator, policy) -> None:
    last_now = -math.inf
    while (job := sim.next_decision()) is not None:
        assert sim.now >= last_now, "time ran backwards"
        last_now = sim.now
        assert job.submit_time <= sim.now + 1e-9, "a job was offered before it arrived"
        sim.apply(policy.place(job, sim.view()))
        _check_state(sim)


#: the small clusters the property tests draw (tests/marl_sched/test_sharing.py adds
#: gpu_sharing to them)
TOPOLOGY_ARGS = {
    "subclusters": st.integers(1, 3),
    "racks": st.integers(1, 2),
    "servers": st.integers(1, 3),
    "sockets": st.integers(1, 2),
    "groups_per_socket": st.integers(1, 2),
    "gpus_per_group": st.integers(1, 4),
    "gpu_types": st.sampled_from([("v100",), ("v100", "k80"), ("p100", "t4", "k80")]),
    "oversubscription": st.sampled_from([1.0, 2.0, 8.0]),
}
topologies = st.builds(tiny_topology, **TOPOLOGY_ARGS)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topo=topologies, seed=st.integers(0, 10_000), policy=st.sampled_from(HEURISTICS))
def test_simulator_invariants(topo, seed, policy):
    sim, pol, jobs = random_run(topo, policy, 25, seed, mean_gap=100.0)
    perf = sim.perf
    _run_checked(sim, pol)
    records = sim.result()
    # every job completes exactly once, but one that fits on too few GPUs (GPU memory,
    # e.g. imagenet on K80s) is left unplaceable
    room = {m: int(topo.group_capacity[perf.group_fits(m)].sum()) for m in {j.model for j in jobs}}
    fit = [j.job_id for j in jobs if j.num_workers <= room[j.model]]
    assert sorted(r.job.job_id for r in records) == fit
    assert sorted(j.job_id for j in sim.unplaceable) == sorted(
        set(j.job_id for j in jobs) - set(fit)
    )
    assert not sim.running
    for r in records:
        assert r.start_time >= r.job.submit_time - 1e-9
        assert r.finish_time >= r.start_time
        # JCT >= isolated runtime (relative tolerance for float integration)
        assert r.jct >= r.isolated_runtime * (1 - 1e-9), (r.job, r.jct, r.isolated_runtime)
    # an empty cluster at the end: everything freed exactly (CPU up to float rounding)
    np.testing.assert_array_equal(sim.group_free, topo.group_capacity)
    assert np.all(sim.group_pressure == 0) and np.all(sim.link_jobs == 0)
    np.testing.assert_array_equal(sim.server_mem_free, topo.server_memory_gb)
    np.testing.assert_allclose(sim.server_cpu_free, topo.server_cpu, rtol=0, atol=1e-9)


@pytest.mark.parametrize("policy", HEURISTICS)
def test_policies_respect_capacity_under_pressure(policy):
    topo = tiny_topology(subclusters=1, racks=1, servers=2)
    sim, pol, jobs = random_run(topo, policy, 60, 3, mean_gap=5.0, policy_seed=0)  # overload
    _run_checked(sim, pol)
    assert len(sim.result()) == len(jobs)


def test_same_seed_same_records():
    topo = tiny_topology()
    perf = PerformanceModel(topo)
    jobs = random_jobs(perf, 40, seed=7)

    def run(seed):
        pol = make_policy("random")
        pol.reset(topo, seed)
        sim = Simulator(topo, jobs, perf=perf)
        _run_checked(sim, pol)
        return [(r.job.job_id, r.start_time, r.finish_time) for r in sim.result()]

    assert run(1) == run(1)
    assert run(1) != run(2)
