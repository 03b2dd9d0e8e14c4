"""Interference-aware's optional GPU-speed term (``speed``) and the hint variants
that the agents may name besides the registered heuristics."""

from __future__ import annotations

import numpy as np
import pytest

from marl_sched.catalogue import CATALOGUE, GPU_SPEED
from marl_sched.jobs import Job, Placement
from marl_sched.perf import PerformanceModel
from marl_sched.policies import heuristic_names
from marl_sched.policies.heuristics import (
    PLAN_HINTS,
    InterferenceAwarePolicy,
    hint_names,
    make_hint,
)
from marl_sched.simulator import Simulator
from tests.helpers import tiny_topology

MODEL = "resnet-50"


def _two_servers():
    """Server 0 has V100s and one resident 1-worker job; server 1 has K80s and is
    empty; a compute-heavy 2-worker job arrives."""
    topo = tiny_topology(
        subclusters=1,
        racks=1,
        servers=2,
        sockets=1,
        groups_per_socket=1,
        gpus_per_group=4,
        gpu_types=("v100", "k80"),
    )
    assert topo.server_gpu_speed[0] > topo.server_gpu_speed[1]
    perf = PerformanceModel(topo)
    resident = Job(0, "r", MODEL, 1, 0, 1e5, 0.0, 1.0)
    new = Job(1, "n", MODEL, 2, 0, 1e5, 1.0, 1.0)
    sim = Simulator(topo, [resident, new], perf=perf)
    assert sim.next_decision() is resident
    sim.apply(Placement((0,), ()))
    assert sim.next_decision() is new
    return topo, perf, sim


@pytest.mark.parametrize("learned", [False, True])
@pytest.mark.parametrize(("speed", "server"), [(0.0, 1), (1.0, 0)])
def test_speed_term_trades_a_neighbour_for_a_faster_gpu(speed, server, learned):
    """By interference alone the empty K80 server is the quietest spot; counting that
    a K80 runs the job's compute several times slower, the V100 server next to one
    small resident is better — in the greedy cost and in the choice among candidate
    servers by the learned interference model's predicted slowdown."""
    topo, _, sim = _two_servers()
    ia = InterferenceAwarePolicy(learned=learned, speed=speed)
    ia.reset(topo, 0)
    p = ia.place(sim.pending, sim.view())
    assert {int(topo.group_server[g]) for g in p.worker_groups} == {server}


def test_the_speed_aware_placement_finishes_the_job_sooner():
    jct = {}
    for speed in (0.0, 1.0):
        topo, _, sim = _two_servers()
        ia = InterferenceAwarePolicy(learned=False, speed=speed)
        ia.reset(topo, 0)
        sim.apply(ia.place(sim.pending, sim.view()))
        while sim.next_decision() is not None:
            pass
        jct[speed] = next(r.jct for r in sim.result() if r.job.job_id == 1)
    assert jct[1.0] < 0.6 * jct[0.0]


def test_slowness_is_zero_on_the_fastest_type_and_the_compute_share_elsewhere():
    topo, perf, sim = _two_servers()
    job = sim.pending
    slow = InterferenceAwarePolicy(speed=1.0)._slowness(job, sim.view())
    spec = CATALOGUE[MODEL]
    iso = perf.isolated_iteration_time(MODEL, 2, 0)
    share = spec.compute_s / GPU_SPEED["v100"] / iso
    assert slow[0] == 0.0
    assert slow[1] == pytest.approx(share * (GPU_SPEED["v100"] / GPU_SPEED["k80"] - 1.0))
    assert np.all(slow >= 0)


def test_speed_and_resident_aware_are_registered_heuristics():
    assert {"speed-aware", "resident-aware"} <= set(heuristic_names())
    # the hints are the registered heuristics, then the plan hints (envs/hints.py)
    assert hint_names() == [*heuristic_names(), *PLAN_HINTS]
    hint = make_hint("speed-aware")
    assert isinstance(hint, InterferenceAwarePolicy) and (hint.protect, hint.speed) == (0.0, 1.0)
    hint = make_hint("resident-aware")
    assert isinstance(hint, InterferenceAwarePolicy) and (hint.protect, hint.speed) == (3.0, 0.0)
    assert make_hint("locality").name == "locality"
