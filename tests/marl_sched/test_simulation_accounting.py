"""Capacity accounting: an overbooking placement is refused, several PS fit one
server, a job that exactly fills a server is placed there."""

from __future__ import annotations

import numpy as np
import pytest

from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Placement
from marl_sched.perf import PerformanceModel
from marl_sched.policies import make_policy
from marl_sched.simulator import PlacementError, Simulator
from tests.helpers import random_jobs, tiny_topology
from tests.marl_sched.test_simulator import HEURISTICS, _check_state


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
