"""The event engine: progress integrated exactly between events, a non-finite
time stopped as an input error."""

from __future__ import annotations

import pytest

from marl_sched.jobs import Placement
from marl_sched.perf import PerformanceModel
from marl_sched.policies import make_policy
from marl_sched.simulator import Simulator
from tests.helpers import tiny_topology


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


def test_a_migrated_job_drops_the_interference_terms_it_cached_where_it_was():
    """The simulator keeps a one-group job's group and socket interference terms while
    those pressure rows are unchanged (per-row versions). A move whose new group happens
    to be at the version the job cached at its old group must still price the new
    group's neighbours: the speed after the move is what pricing afresh gives, bit for
    bit."""
    from marl_sched.catalogue import CATALOGUE
    from marl_sched.jobs import Job

    topo = tiny_topology(subclusters=1, racks=1, servers=1, sockets=1, groups_per_socket=2)
    perf = PerformanceModel(topo)
    jobs = [Job(0, "a", "resnet-50", 1, 0, 1e6, 0.0, 1e6),
            Job(1, "b", "vgg-16", 1, 0, 1e6, 0.0, 1e6),
            Job(2, "c", "seq2seq", 1, 0, 1e6, 0.0, 1e6)]  # fmt: skip
    sim = Simulator(topo, jobs, perf=perf, migration_cost=0.0)
    for group in (0, 0, 1):  # a and b share group 0, c is alone on group 1
        assert sim.next_decision() is not None
        sim.apply(Placement((group,), ()))
    run = sim.running[0]
    assert run.group_ver == sim._group_ver[0] == 2  # a's group term is b's pressure
    assert sim._group_ver[1] == 1  # the move will bump it to 2: the versions collide
    assert sim.migrate(0, Placement((1,), ()))
    state = (sim.link_load, sim.group_pressure, sim.socket_pressure, sim.server_pressure)
    fresh = perf.iteration_time(CATALOGUE["resnet-50"], run.layout, 0, *state)
    assert sim._group_ver[1] == 2
    assert run.iter_time == fresh
    # c's pressure, not b's, is in a's group term now (they differ: the catch above bites)
    assert CATALOGUE["vgg-16"].pressure.tolist() != CATALOGUE["seq2seq"].pressure.tolist()
