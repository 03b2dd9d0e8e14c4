"""What-if support: forks, the total completion time known so far, spliced
arrivals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marl_sched.perf import PerformanceModel
from marl_sched.policies import make_policy
from marl_sched.simulator import Simulator
from tests.helpers import random_jobs, tiny_topology


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
