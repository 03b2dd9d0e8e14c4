"""The performance model's structure: what makes placement matter."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marl_sched.catalogue import CATALOGUE, MODEL_NAMES
from marl_sched.perf import PerformanceModel
from tests.helpers import tiny_topology

TOPO = tiny_topology(
    subclusters=2,
    racks=2,
    servers=2,
    sockets=2,
    groups_per_socket=2,
    gpus_per_group=2,
    oversubscription=4.0,
)
PERF = PerformanceModel(TOPO)


def _alone(model, workers, ps, links=None):
    spec = CATALOGUE[model]
    lay = PERF.layout(spec, workers, ps)
    jobs = np.zeros(TOPO.n_links)
    if links:
        for link, n in links.items():
            jobs[link] = n
    z = np.zeros
    pressures = z((TOPO.n_groups, 5)), z((TOPO.n_sockets, 5)), z((TOPO.n_servers, 5))
    return PERF.iteration_time(spec, lay, len(ps), jobs, *pressures), lay


def _with_own_pressure(model, workers, ps):
    spec = CATALOGUE[model]
    lay = PERF.layout(spec, workers, ps)
    g, s, v = (
        np.zeros((TOPO.n_groups, 5)),
        np.zeros((TOPO.n_sockets, 5)),
        np.zeros((TOPO.n_servers, 5)),
    )
    g[lay.groups] += lay.group_press
    s[lay.sockets] += lay.socket_press
    v[lay.servers] += lay.server_press
    return spec, lay, g, s, v


def test_single_worker_has_no_communication():
    t, lay = _alone("resnet-50", [0], [])
    assert lay.links == {}
    assert t == pytest.approx(CATALOGUE["resnet-50"].compute_s / TOPO.group_speed[0])


def test_communication_grows_with_distance():
    """same socket < other socket < other server < other rack < other subcluster."""
    groups_per_server = TOPO.server_n_groups[0]
    per_rack = groups_per_server * 2
    per_sc = per_rack * 2
    times = [
        _alone("vgg-16", [0, 1], [0])[0],  # PS on the workers' socket
        _alone("vgg-16", [0, 1], [2])[0],  # PS on the other socket
        _alone("vgg-16", [0, 1], [groups_per_server])[0],  # PS on another server
        _alone("vgg-16", [0, 1], [per_rack])[0],  # another rack (uplink is oversubscribed)
    ]
    assert times == sorted(times) and len(set(times)) == len(times)
    cross_sc = _alone("vgg-16", [0, 1], [per_sc])[0]
    assert cross_sc >= times[-1]


def test_link_sharing_slows_only_oversubscribed_links():
    _, lay = _alone("vgg-16", [0, 1], [TOPO.server_n_groups[0]])
    alone = PERF.comm_time(lay, np.zeros(TOPO.n_links))
    assert PERF.comm_time(lay, np.full(TOPO.n_links, 0.9)) == alone  # the link keeps up
    assert PERF.comm_time(lay, np.full(TOPO.n_links, 2.0)) == pytest.approx(2 * alone)
    # the job's own share of its busiest link is <= 1 and > 0
    assert 0 < lay.link_util.max() <= 1.0


def test_interference_grows_with_neighbours():
    spec, lay, g, s, v = _with_own_pressure("resnet-50", [0], [])
    alone = PERF.interference(spec, lay, g, s, v)
    assert alone == 1.0
    factors = []
    for k in range(1, 4):  # k neighbour workers of a heavy model on the same server
        other = CATALOGUE["vgg-16"].pressure
        g2, s2, v2 = g.copy(), s.copy(), v.copy()
        g2[0] += other  # one of them shares the GPU group
        s2[0] += k * other
        v2[0] += k * other
        factors.append(PERF.interference(spec, lay, g2, s2, v2))
    assert factors == sorted(factors) and factors[0] > 1.0
    assert factors[-1] < 2.0, "three neighbours should not halve the speed"


def _hand_levels(job: str, other: str) -> tuple[float, float, float]:
    """The group, socket and server terms of one ``other`` worker next to a ``job``
    worker, by hand from the calibration: the group shares PCIe (resource 1), the
    socket cpu and membw (0, 2), the server cpu, disk and net (0, 3, 4)."""
    from marl_sched.catalogue import CALIBRATION

    lam = CALIBRATION.level_coupling
    s, p = CATALOGUE[job].sensitivity, CATALOGUE[other].pressure
    group = lam["group"] * s[1] * p[1]
    socket = lam["socket"] * (s[0] * p[0] + s[2] * p[2])
    server = lam["server"] * (s[0] * p[0] + s[3] * p[3] + s[4] * p[4])
    return group, socket, server


@pytest.mark.parametrize(
    ("workers", "neighbour", "levels"),
    [
        ([0], 0, "group socket server"),  # one worker group (the single-group fast path)
        ([0], 1, "socket server"),
        ([0], 2, "server"),  # the neighbour on the server's other socket
        ([0, 1], 1, "group socket server"),  # two groups of one socket
        ([0, 2], 3, "socket server"),  # two sockets of one server
        ([0, 4], 2, "server"),  # two servers: only worker 0's server is shared
        ([0, 4], 4, "group socket server"),  # ... or worker 4's group
        ([0, 2], 4, ""),  # the neighbour on another server: no interference
    ],
)
def test_interference_of_a_job_across_groups_sockets_and_servers_by_hand(
    workers, neighbour, levels
):
    """``I = 1 + the terms of the worker nearest the neighbour`` (the max over the
    job's worker groups), the terms computed by hand from the calibration constants.
    In this topology groups 0-1 are socket 0, 2-3 socket 1 (both server 0), 4-5
    socket 2 (server 1). Catches the socket and server levels swapped (their rows of
    ``LEVEL_RESOURCES``, or the socket and server pressures read in each other's
    place), the job's own pressure not subtracted, and a sum over workers for the max."""
    spec, lay, g, s, v = _with_own_pressure("resnet-50", workers, [])
    near = PERF.layout(CATALOGUE["vgg-16"], [neighbour], [])
    g[near.groups] += near.group_press
    s[near.sockets] += near.socket_press
    v[near.servers] += near.server_press
    names = ("group", "socket", "server")
    terms = dict(zip(names, _hand_levels("resnet-50", "vgg-16"), strict=True))
    want = 1.0 + sum(terms[level] for level in levels.split())
    assert PERF.interference(spec, lay, g, s, v) == pytest.approx(want, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(MODEL_NAMES),
    workers=st.lists(st.integers(0, TOPO.n_groups - 1), min_size=1, max_size=6),
    n_ps=st.integers(0, 3),
    seed=st.integers(0, 1000),
)
def test_isolated_time_is_a_lower_bound(model, workers, n_ps, seed):
    if len(workers) > 1 and n_ps == 0:
        n_ps = 1
    rng = np.random.default_rng(seed)
    ps = list(rng.integers(0, TOPO.n_groups, n_ps))
    t, _ = _alone(model, workers, ps)
    # ... and still a lower bound with other jobs sharing links
    t_shared, _ = _alone(model, workers, ps, links={int(k): 3 for k in range(TOPO.n_links)})
    iso = PERF.isolated_iteration_time(model, len(workers), n_ps)
    assert t >= iso * (1 - 1e-12)
    assert t_shared >= t


def test_per_model_gpu_speed_sets_compute_time():
    """A job's compute runs at its own model's speed on the slowest worker's GPU type,
    and the isolated lower bound takes the fastest type *for that model*."""
    topo = tiny_topology(subclusters=1, racks=1, servers=2, gpu_types=("v100", "k80"))
    perf = PerformanceModel(topo)
    k80_group = int(np.flatnonzero(topo.server_type[topo.group_server] == 1)[0])
    for model in ("resnet-50", "ncf", "cnn-text-classification"):
        spec = CATALOGUE[model]
        lay = perf.layout(spec, [0, k80_group], [])
        assert lay.speed == pytest.approx(min(1.0, spec.speed_on("k80")))
        assert perf.group_speed_for(model)[k80_group] == spec.speed_on("k80")
        iso = perf.isolated_iteration_time(model, 1, 0)
        assert iso == pytest.approx(spec.compute_s / max(1.0, spec.speed_on("k80")))
    # the per-type accessor the observations use is unchanged
    assert topo.group_speed[k80_group] == pytest.approx(0.297191)


def test_all_reduce_ring_against_hand_computed_bytes():
    """3 workers, no PS: two on one socket of server 0, one on server 1 (same rack).
    Ring g0 → g1 → h0 → g0, each edge 2(n-1)/n · M = 4M/3: every worker's PCIe link
    carries one edge in and one out, each server's NIC one edge in and one out."""
    spec = CATALOGUE["resnet-50"]
    g0, g1 = 0, 1
    h0 = int(TOPO.server_groups_start[1])
    assert TOPO.group_socket[g0] == TOPO.group_socket[g1]
    assert TOPO.server_rack[1] == TOPO.server_rack[0]
    edge = 2.0 * (3 - 1) / 3 * spec.model_bytes
    want = {
        TOPO.pcie_link(g0): 2 * edge,
        TOPO.pcie_link(g1): 2 * edge,
        TOPO.pcie_link(h0): 2 * edge,
        TOPO.nic_link(0): 2 * edge,
        TOPO.nic_link(1): 2 * edge,
    }
    t, lay = _alone("resnet-50", [g0, g1, h0], [])
    assert lay.links.keys() == want.keys()
    for link, nbytes in want.items():
        assert lay.links[link] == pytest.approx(nbytes)
    comm = max(
        2 * edge / TOPO.link_bw[TOPO.pcie_link(g0)], 2 * edge / TOPO.link_bw[TOPO.nic_link(0)]
    )
    compute = spec.compute_s / lay.speed
    g = PERF.overlap_gamma
    assert t == pytest.approx((compute**g + comm**g) ** (1 / g) + PERF.sync_overhead_s)


def test_all_reduce_packed_is_cheaper_than_spread():
    """The ring's NIC edges only exist when the workers span servers."""
    per_server = int(TOPO.server_n_groups[0])
    packed, _ = _alone("vgg-16", [0, 1, 2, 3], [])
    spread, _ = _alone("vgg-16", [0, per_server, 2 * per_server, 3 * per_server], [])
    assert packed < spread


def test_isolated_lower_bound_holds_for_all_reduce():
    iso = PERF.isolated_iteration_time("vgg-16", 4, 0)
    per_server = int(TOPO.server_n_groups[0])
    for workers in ([0, 0, 1, 1], [0, 1, 2, 3], [0, per_server, 2 * per_server, 3 * per_server]):
        t, _ = _alone("vgg-16", workers, [])
        assert t >= iso * (1 - 1e-12)


@settings(max_examples=200, deadline=None)
@given(
    compute=st.floats(0.0, 100.0),
    comm=st.floats(0.0, 100.0),
    gamma=st.floats(1.0, 50.0),
)
def test_overlap_never_beats_compute_alone(compute, comm, gamma):
    from marl_sched.perf import overlap_time

    t = float(overlap_time(compute, comm, gamma))
    assert t >= compute * (1 - 1e-12)
    assert t >= comm * (1 - 1e-12)
    assert t <= (compute + comm) * (1 + 1e-12)


def test_overlapped_iteration_is_never_faster_than_its_compute():
    for model in MODEL_NAMES:
        for workers, ps in (([0, 1], []), ([0, 4], [2]), ([0, 8, 16], [])):
            spec = CATALOGUE[model]
            t, lay = _alone(model, workers, ps)
            assert t >= spec.compute_s / lay.speed


# --------------------------------------------------------------------------- GPU memory


def _memory_cluster():
    topo = tiny_topology(subclusters=1, racks=2, servers=2, gpu_types=("v100", "k80"))
    return topo, PerformanceModel(topo)


def test_gpu_memory_limit_comes_from_gavel_and_masks_groups():
    topo, perf = _memory_cluster()
    # Gavel: ResNet-50 at batch 128 does not run on a K80 (imagenet is mapped to it)
    assert not CATALOGUE["imagenet"].fits_on("k80") and CATALOGUE["imagenet"].fits_on("v100")
    k80 = np.array([topo.server_gpu_type[t] == "k80" for t in topo.server_type])[topo.group_server]
    assert perf.group_fits("imagenet").tolist() == (~k80).tolist()
    assert perf.group_fits("resnet-50").all()


def test_simulator_refuses_a_model_on_a_gpu_it_does_not_fit():
    from marl_sched.jobs import Job, Placement
    from marl_sched.simulator import PlacementError, Simulator

    topo, perf = _memory_cluster()
    k80_group = int(np.flatnonzero(~perf.group_fits("imagenet"))[0])
    sim = Simulator(topo, [Job(0, "a", "imagenet", 1, 0, 10.0, 0.0, 1.0)], perf=perf)
    assert sim.next_decision() is not None
    assert sim.view().group_free[k80_group] == 0  # the view hides what it cannot use
    with pytest.raises(PlacementError, match="does not fit"):
        sim.apply(Placement((k80_group,), ()))


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_no_policy_places_a_model_where_it_does_not_fit(seed):
    """Property over every registered heuristic: with imagenet jobs among random ones
    on a V100 + K80 cluster, no imagenet worker ever lands on a K80 group."""
    from marl_sched.jobs import Job
    from marl_sched.policies import heuristic_names, make_policy
    from marl_sched.simulator import Simulator
    from tests.helpers import random_jobs

    topo, perf = _memory_cluster()
    rng = np.random.default_rng(seed)
    jobs = random_jobs(perf, 30, seed=seed, max_workers=4)
    jobs = [
        Job(
            j.job_id,
            j.name,
            "imagenet",
            j.num_workers,
            j.num_ps,
            j.iterations,
            j.submit_time,
            j.duration,
        )
        if rng.random() < 0.5
        else j
        for j in jobs
    ]
    unfit = ~perf.group_fits("imagenet")
    for name in heuristic_names():
        policy = make_policy(name)
        policy.reset(topo, seed)
        sim = Simulator(topo, jobs, perf=perf)
        placed = 0
        while (job := sim.next_decision()) is not None:
            placement = policy.place(job, sim.view())
            if placement is not None and job.model == "imagenet":
                assert not unfit[list(placement.worker_groups)].any(), (name, job, placement)
                placed += 1
            sim.apply(placement)
        assert placed > 0, name


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_comm_time_is_the_array_formula_to_the_bit_on_few_and_many_links(dtype):
    """comm_time takes Python floats for a job's few links and in-place array calls for
    many: both give ``max_l cost_l * max(1, U_l)`` exactly as the array formula does."""
    topo = tiny_topology(subclusters=2, racks=2, servers=2, gpus_per_group=1)
    perf = PerformanceModel(topo)
    rng = np.random.default_rng(7)
    lengths = set()
    for _ in range(200):
        k = int(rng.integers(2, 9))
        groups = rng.choice(topo.n_groups, k, replace=False)
        layout = perf.layout(CATALOGUE["vgg-16"], groups, ())  # all-reduce: many links
        load = rng.uniform(0.0, 3.0, topo.n_links)
        load = np.round(load).astype(dtype) if dtype is np.int64 else load
        u = load[layout.link_ids]
        want = float((layout.link_cost * np.maximum(u, 1.0)).max())
        assert perf.comm_time(layout, load) == want
        lengths.add(len(layout.link_ids) > 16)
    assert lengths == {False, True}  # both paths were taken
