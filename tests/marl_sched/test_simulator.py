"""Simulator invariants (hypothesis), determinism, and policy capacity."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Placement
from marl_sched.perf import PerformanceModel
from marl_sched.policies import heuristic_names, make_policy
from marl_sched.simulator import PlacementError, Simulator
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


def test_overbooking_placement_is_refused():
    import dataclasses

    topo = tiny_topology(subclusters=1, racks=1, servers=1, sockets=1, groups_per_socket=2)
    perf = PerformanceModel(topo)
    base = random_jobs(perf, 1, seed=0)[0]
    # 5 workers never fit 4 GPUs: the job is never offered and ends unplaceable
    sim = Simulator(topo, [dataclasses.replace(base, num_workers=5, num_ps=2)], perf=perf)
    assert sim.next_decision() is None
    assert len(sim.unplaceable) == 1
    # 3 workers in a 2-GPU group is refused, the state is untouched
    sim = Simulator(topo, [dataclasses.replace(base, num_workers=3, num_ps=1)], perf=perf)
    assert sim.next_decision() is not None
    with pytest.raises(PlacementError, match="free GPUs"):
        sim.apply(Placement(worker_groups=(0, 0, 0), ps_groups=(0,)))
    np.testing.assert_array_equal(sim.group_free, topo.group_capacity)


def test_colocated_job_slows_and_completion_speeds_up_neighbour():
    """Two jobs on one server: the first slows when the second arrives and speeds
    up again when it leaves; progress is integrated exactly between events."""
    topo = tiny_topology(subclusters=1, racks=1, servers=1, sockets=1, groups_per_socket=1)
    perf = PerformanceModel(topo)
    from marl_sched.jobs import Job

    iso = perf.isolated_iteration_time("resnet-50", 1, 0)
    a = Job(0, "a", "resnet-50", 1, 0, 1000.0, 0.0, 1000 * iso)
    b = Job(1, "b", "resnet-50", 1, 0, 100.0, 10.0, 100 * iso)
    sim = Simulator(topo, [a, b], perf=perf)
    assert sim.next_decision() is a
    sim.apply(Placement((0,), ()))
    t_alone = sim.running[0].iter_time
    assert sim.next_decision() is b
    sim.apply(Placement((0,), ()))
    t_shared = sim.running[0].iter_time
    assert t_shared > t_alone
    assert sim.next_decision() is None
    rec = {r.job.name: r for r in sim.result()}
    # a ran 10 s alone, then shared while b ran, then alone again
    b_dur = rec["b"].finish_time - 10.0
    done_a = 10.0 / t_alone + b_dur / t_shared
    expected_finish = rec["b"].finish_time + (1000.0 - done_a) * t_alone
    assert rec["a"].finish_time == pytest.approx(expected_finish, rel=1e-9)


def _records(sim):
    return [(r.job.job_id, r.start_time, r.finish_time) for r in sim.result()]


def _started(policy: str, n_jobs: int, seed: int, mean_gap: float):
    """(perf, jobs, reset policy, fresh simulator) on the tiny topology."""
    topo = tiny_topology()
    perf = PerformanceModel(topo)
    jobs = random_jobs(perf, n_jobs, seed=seed, mean_gap=mean_gap)
    pol = make_policy(policy)
    pol.reset(topo, 0)
    return perf, jobs, pol, Simulator(topo, jobs, perf=perf)


def test_fork_runs_on_independently_and_alike():
    """A fork driven to the end gives the same records as the original driven to the
    end by the same policy, and driving it leaves the original untouched."""
    _, jobs, pol, sim = _started("first-fit", 60, seed=3, mean_gap=60.0)
    for _ in range(25):  # stop half-way, with jobs running and one pending
        job = sim.next_decision()
        sim.apply(pol.place(job, sim.view()))
    job = sim.next_decision()
    assert job is not None and sim.running
    before = (sim.now, sim.group_free.copy(), sim.link_load.copy(), dict(sim.records))
    fork = sim.fork()
    fork.apply(pol.place(job, fork.view()))
    while (j := fork.next_decision()) is not None:
        fork.apply(pol.place(j, fork.view()))
    assert sim.now == before[0] and sim.pending is job
    np.testing.assert_array_equal(sim.group_free, before[1])
    np.testing.assert_array_equal(sim.link_load, before[2])
    assert sim.records == before[3]
    sim.apply(pol.place(job, sim.view()))
    while (j := sim.next_decision()) is not None:
        sim.apply(pol.place(j, sim.view()))
    assert len(fork.result()) == len(jobs)
    assert _records(fork) == _records(sim)


def test_estimated_total_jct_counts_the_jobs_submitted_by_then():
    perf, jobs, pol, sim = _started("locality", 40, seed=5, mean_gap=30.0)
    queued_seen = False
    while (job := sim.next_decision()) is not None:
        sim.apply(pol.place(job, sim.view()))
        if sim.queue and not queued_seen:
            queued_seen = True
            # a queued job counts from its submission to now plus its isolated run time
            q = sim.queue[0]
            iso = perf.isolated_iteration_time(q.model, q.num_workers, q.num_ps)
            only_q = sim.estimated_total_jct(q.submit_time) - sim.estimated_total_jct(
                np.nextafter(q.submit_time, -np.inf)
            )
            if all(j.submit_time != q.submit_time or j is q for j in jobs):
                assert only_q == pytest.approx(sim.now - q.submit_time + iso * q.iterations)
    assert queued_seen
    records = sim.result()
    total = sum(r.jct for r in records)
    assert sim.estimated_total_jct(math.inf) == pytest.approx(total, rel=1e-12)
    assert sim.estimated_total_jct(-1.0) == 0.0
    first = jobs[0].submit_time
    assert sim.estimated_total_jct(first) == pytest.approx(
        sum(r.jct for r in records if r.job.submit_time <= first)
    )


@pytest.mark.parametrize("policy", HEURISTICS)
def test_every_heuristic_puts_several_ps_on_a_lone_server(policy):
    """Found by the invariants test: ``random`` placed at most one PS per server, so on a
    one-server cluster a job with two PS never ran and was dropped as unplaceable."""
    from marl_sched.jobs import Job

    topo = tiny_topology(subclusters=1, racks=1, servers=1, sockets=1, groups_per_socket=2,
                         gpus_per_group=3, gpu_types=("v100",), oversubscription=1.0)  # fmt: skip
    perf = PerformanceModel(topo)
    job = Job(0, "j", "seq2seq", 6, 2, 100.0, 0.0, 60.0)
    pol = make_policy(policy)
    pol.reset(topo, 0)
    sim = Simulator(topo, [job], perf=perf)
    p = pol.place(sim.next_decision(), sim.view())
    assert p is not None and len(p.worker_groups) == 6 and len(p.ps_groups) == 2


@pytest.mark.parametrize(
    "iterations, oversubscription", [(1e308, 1e4), (100.0, 1e308)], ids=["length", "oversub"]
)
def test_a_non_finite_completion_time_is_an_input_error_not_a_hang(iterations, oversubscription):
    """An iteration time or completion time that is not finite stops the run with an
    input error naming the job (the clock would otherwise become inf/NaN and spin)."""
    from marl_sched.jobs import Job
    from marl_sched.simulator import NonFiniteError

    topo = tiny_topology(subclusters=1, racks=2, servers=1, sockets=1, groups_per_socket=1,
                         gpus_per_group=2, gpu_types=("v100",),
                         oversubscription=oversubscription)  # fmt: skip
    job = Job(0, "j", "resnet-50", 4, 1, iterations, 0.0, 60.0)
    sim = Simulator(topo, [job], perf=PerformanceModel(topo))
    pol = make_policy("load-balance")
    pol.reset(topo, 0)
    with pytest.raises(NonFiniteError, match=r"job 0 \(resnet-50\): iteration time"):
        while (j := sim.next_decision()) is not None:
            sim.apply(pol.place(j, sim.view()))


def test_first_fit_puts_a_job_that_exactly_fills_a_server_on_that_server():
    """Two 4-GPU servers, one GPU of server 0 busy: a 4-worker job fits server 1 exactly,
    and first-fit must keep it whole there (``free >= workers``), not spread it over
    both servers in group order."""
    import dataclasses

    topo = tiny_topology(subclusters=1, racks=1, servers=2, sockets=1, groups_per_socket=2)
    perf = PerformanceModel(topo)
    base = dataclasses.replace(random_jobs(perf, 1, seed=0)[0], model="resnet-50", num_ps=0)
    jobs = [
        dataclasses.replace(base, job_id=0, num_workers=1, submit_time=0.0, iterations=1e6),
        dataclasses.replace(base, job_id=1, num_workers=4, submit_time=1.0, iterations=10.0),
    ]
    assert 4 * CATALOGUE["resnet-50"].cpu_worker <= topo.server_cpu[1]
    sim = Simulator(topo, jobs, perf=perf)
    policy = make_policy("first-fit")
    policy.reset(topo, 0)
    placed = {}
    while (job := sim.next_decision()) is not None:
        placement = policy.place(job, sim.view())
        placed[job.job_id] = placement
        sim.apply(placement)
        _check_state(sim)
    assert set(topo.group_server[list(placed[0].worker_groups)]) == {0}
    assert set(topo.group_server[list(placed[1].worker_groups)]) == {1}
    started = {r.job.job_id: r.start_time for r in sim.result()}
    assert started == {0: 0.0, 1: 1.0}  # at once: the server was free for it


def test_replaced_arrivals_run_as_a_simulator_built_with_the_spliced_jobs():
    """``replace_arrivals`` mid-run: the simulator then runs exactly as one built from
    the start with the jobs already arrived followed by the replacements."""
    import dataclasses

    perf, jobs, pol, sim = _started("first-fit", 60, seed=3, mean_gap=60.0)
    for _ in range(25):
        job = sim.next_decision()
        sim.apply(pol.place(job, sim.view()))
    pending = sim.pending_arrivals()
    assert pending and pending == sorted(pending, key=lambda j: j.submit_time)
    assert [j.job_id for j in pending] == list(range(pending[0].job_id, len(jobs)))
    other = random_jobs(perf, len(pending), seed=9, mean_gap=60.0)
    new = [
        dataclasses.replace(o, job_id=j.job_id, submit_time=j.submit_time)
        for o, j in zip(other, pending, strict=True)
    ]
    with pytest.raises(ValueError, match="job ids"):
        sim.replace_arrivals(new[1:])
    with pytest.raises(ValueError, match="submit times"):
        sim.replace_arrivals([dataclasses.replace(new[0], submit_time=sim.now - 1.0), *new[1:]])
    sim.replace_arrivals(new)
    assert sim.pending_arrivals() == new
    while (j := sim.next_decision()) is not None:
        sim.apply(pol.place(j, sim.view()))
    spliced = jobs[: pending[0].job_id] + new
    fresh_pol = make_policy("first-fit")
    fresh_pol.reset(tiny_topology(), 0)
    fresh = Simulator(tiny_topology(), spliced, perf=perf)
    while (j := fresh.next_decision()) is not None:
        fresh.apply(fresh_pol.place(j, fresh.view()))
    assert len(sim.result()) == len(jobs)
    assert _records(sim) == _records(fresh)
