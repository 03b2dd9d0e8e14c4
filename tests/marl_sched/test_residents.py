"""What the residents stand to lose: the simulator's exposure arrays,
``harm_to_residents``, and interference-aware's optional protection of residents."""

from __future__ import annotations

import numpy as np
import pytest

from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job, Placement
from marl_sched.perf import PS_PRESSURE_MASK, PerformanceModel
from marl_sched.policies.heuristics import InterferenceAwarePolicy
from marl_sched.simulator import Simulator, harm_to_residents
from tests.helpers import tiny_topology

MODEL = "resnet-50"


def _job(i: int, workers: int, submit: float = 0.0, iterations: float = 1e6) -> Job:
    return Job(i, f"j{i}", MODEL, workers, 0, iterations, submit, 1.0)


def test_harm_counts_each_resident_once_per_unit_times_its_workers():
    """A 4-worker job on server 0 (groups 0 and 1, socket 0) and a 1-worker job on
    server 1: a worker's harm is ``Σ_L workers · (λ_L M^L ⊙ s) · p`` over the levels it
    shares with a resident, a PS's only over socket and server; nothing remains once
    the residents are gone."""
    topo = tiny_topology(subclusters=1, racks=1, servers=2)  # 2 sockets x 2 groups x 2 GPUs
    perf = PerformanceModel(topo)
    big, small = _job(0, 4, iterations=100.0), _job(1, 1, iterations=10.0)
    sim = Simulator(topo, [big, small], perf=perf)
    assert sim.next_decision() is big
    sim.apply(Placement((0, 0, 1, 1), ()))
    assert sim.next_decision() is small
    sim.apply(Placement((int(topo.server_groups_start[1]),), ()))

    spec = CATALOGUE[MODEL]
    w = perf.level_weights * spec.sensitivity  # (3, 5): group, socket, server
    p = spec.pressure
    harm = harm_to_residents(sim.view(), p)
    g1 = int(topo.server_groups_start[1])
    assert harm[0] == pytest.approx(4 * (w[0] + w[1] + w[2]) @ p)  # big's group
    assert harm[2] == pytest.approx(4 * w[2] @ p)  # big's server, other socket
    assert harm[g1] == pytest.approx(1 * (w[0] + w[1] + w[2]) @ p)  # small's group
    assert harm[g1 + 2] == pytest.approx(1 * w[2] @ p)
    ps = harm_to_residents(sim.view(), p, ps=True)
    assert ps[0] == pytest.approx(4 * (w[1] + w[2]) @ (p * PS_PRESSURE_MASK))

    while sim.next_decision() is not None:
        pass
    assert len(sim.result()) == 2
    for a in (sim.group_exposure, sim.socket_exposure, sim.server_exposure):
        assert not a.any(), "exposure left behind after every job completed"


def test_fork_copies_exposure():
    topo = tiny_topology(subclusters=1, racks=1, servers=2)
    sim = Simulator(topo, [_job(0, 2), _job(1, 2, submit=5.0)], perf=PerformanceModel(topo))
    sim.next_decision()
    sim.apply(Placement((0, 1), ()))
    before = sim.group_exposure.copy()
    fork = sim.fork()
    assert fork.next_decision() is not None
    fork.apply(Placement((2, 3), ()))
    np.testing.assert_array_equal(sim.group_exposure, before)
    assert fork.group_exposure[2:4].any()


def _spread_giant_and_singles():
    """Five one-group servers of 4 GPUs: an 8-worker job with 2 workers on each of
    servers 0-3 (2 tasks' pressure per server), three 1-worker jobs on server 4 (3
    tasks' pressure); a new 1-worker job arrives."""
    topo = tiny_topology(
        subclusters=1, racks=1, servers=5, sockets=1, groups_per_socket=1, gpus_per_group=4
    )
    perf = PerformanceModel(topo)
    jobs = [_job(0, 8)] + [_job(i, 1) for i in (1, 2, 3)] + [_job(4, 1, submit=1.0)]
    sim = Simulator(topo, jobs, perf=perf)
    sim.next_decision()
    sim.apply(Placement((0, 0, 1, 1, 2, 2, 3, 3), ()))
    for _ in range(3):
        sim.next_decision()
        sim.apply(Placement((4,), ()))
    assert sim.next_decision() is jobs[-1]
    return topo, sim


@pytest.mark.parametrize(("protect", "server"), [(0.0, 0), (3.0, 4)])
def test_protect_keeps_a_new_job_off_a_giant(protect, server):
    """By pressure alone, a giant's server (2 of its 8 workers) looks quieter than one
    with three small jobs; counting what the residents stand to lose, it is not."""
    topo, sim = _spread_giant_and_singles()
    ia = InterferenceAwarePolicy(learned=False, protect=protect)
    ia.reset(topo, 0)
    p = ia.place(sim.pending, sim.view())
    assert topo.group_server[p.worker_groups[0]] == server
