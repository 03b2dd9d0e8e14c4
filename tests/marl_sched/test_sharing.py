"""GPU sharing (``topology.gpu_sharing``): capacity and co-location invariants under
every heuristic (hypothesis), the same-GPU slowdown by hand, cannot-share pairs, and
sharing 1 reproducing today's records exactly.

The records of the golden trace with ``gpu_sharing: 1`` were written by the code
before GPU sharing existed (``tests/data/golden_records.json``); after a deliberate
model change regenerate them with the golden metrics:

    python -m tests.marl_sched.test_sharing --update
"""

from __future__ import annotations

import json
import sys
from itertools import combinations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marl_sched.catalogue import CALIBRATION, CATALOGUE
from marl_sched.config import REPO_ROOT, ServerTypeConfig, TopologyConfig, load_config
from marl_sched.errors import InputError
from marl_sched.jobs import Job, Placement
from marl_sched.perf import LEVEL_RESOURCES, PerformanceModel
from marl_sched.policies import heuristic_names
from marl_sched.runner import build_cluster, load_workload, simulate
from marl_sched.simulator import PlacementError, Simulator
from marl_sched.topology import Topology
from tests.helpers import random_run, tiny_topology
from tests.marl_sched.test_simulator import TOPOLOGY_ARGS

GOLDEN_RECORDS = REPO_ROOT / "tests" / "data" / "golden_records.json"
GOLDEN_CONFIG = REPO_ROOT / "tests" / "data" / "golden.yaml"


def check_sharing(sim: Simulator) -> None:
    """Per-GPU accounting agrees with the running jobs: at most ``gpu_sharing``
    workers per GPU, never two of one job, never a cannot-share pair; slots, pressure
    and busy GPUs recomputed from scratch."""
    t, k = sim.topology, sim.topology.gpu_sharing
    load = np.zeros(t.n_gpus, dtype=np.int64)
    press = np.zeros((t.n_gpus, 5))
    models: list[list[str]] = [[] for _ in range(t.n_gpus)]
    workers = np.zeros(t.n_groups, dtype=np.int64)
    for run in sim.running.values():
        lay, spec = run.layout, CATALOGUE[run.job.model]
        gpus = lay.gpus
        assert len(gpus) == run.job.num_workers
        assert len(set(gpus.tolist())) == len(gpus), "two workers of one job share a GPU"
        np.testing.assert_array_equal(t.gpu_group[gpus], lay.groups[lay.gpu_group_idx])
        load[gpus] += 1
        press[gpus] += spec.pressure
        for g in gpus:
            models[g].append(run.job.model)
        np.add.at(workers, np.asarray(run.placement.worker_groups, dtype=np.int64), 1)
    assert load.max(initial=0) <= k, "a GPU holds more than gpu_sharing workers"
    for g, held in enumerate(models):
        gpu_type = t.server_gpu_type[int(t.server_type[t.group_server[t.gpu_group[g]]])]
        for a, b in combinations(held, 2):
            assert CALIBRATION.can_share(gpu_type, a, b), f"{a} and {b} share GPU {g}"
    np.testing.assert_array_equal(sim.gpu_load, load)
    np.testing.assert_allclose(sim.gpu_pressure, press, atol=1e-9)
    np.testing.assert_array_equal(sim.group_unused, t.group_slots - workers)
    assert sim.free_gpus == int(sim.group_unused.sum())
    assert sim._busy_gpus == int(np.count_nonzero(load))
    # what a job may still use: GPUs with a slot, never more than the group's GPUs
    assert np.all(sim.group_free <= t.group_capacity)
    assert np.all(sim.group_free >= 0)
    # every running job's speed is pricing it afresh, the GPU level included, to the
    # last bit: the simulator's cached terms never go stale under sharing either
    state = (sim.link_load, sim.group_pressure, sim.socket_pressure, sim.server_pressure)
    for run in sim.running.values():
        spec = CATALOGUE[run.job.model]
        fresh = sim.perf.iteration_time(
            spec, run.layout, run.job.num_ps, *state, gpu_pressure=sim.gpu_pressure
        )
        assert run.iter_time == fresh, (run.job.job_id, run.iter_time, fresh)


topologies = st.builds(tiny_topology, **TOPOLOGY_ARGS, gpu_sharing=st.integers(2, 3))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topo=topologies, seed=st.integers(0, 10_000), policy=st.sampled_from(heuristic_names()))
def test_sharing_invariants_under_every_heuristic(topo, seed, policy):
    sim, pol, jobs = random_run(topo, policy, 25, seed, mean_gap=50.0)
    while (job := sim.next_decision()) is not None:
        placement = pol.place(job, sim.view())
        if placement is not None:  # the policy read group_free: the placement fits
            sim._check(job, placement)
        sim.apply(placement)
        check_sharing(sim)
    done = {r.job.job_id for r in sim.result()} | {j.job_id for j in sim.unplaceable}
    assert done == {j.job_id for j in jobs}
    for r in sim.result():
        assert r.finish_time - r.job.submit_time >= r.isolated_runtime * (1 - 1e-9)
    # capacity accounting returns to empty
    assert not sim.running
    np.testing.assert_array_equal(sim.group_unused, topo.group_slots)
    np.testing.assert_array_equal(sim.gpu_load, 0)
    assert not sim.gpu_pressure.any() and sim.free_gpus == topo.n_gpus * topo.gpu_sharing


def _one_gpu_cluster(gpu: str = "v100", gpus: int = 1, sharing: int = 2) -> Topology:
    server = ServerTypeConfig(
        name=gpu, count=1, gpu_type=gpu, sockets=1, groups_per_socket=1, gpus_per_group=gpus
    )
    cfg = TopologyConfig(
        subclusters=1, racks_per_subcluster=1, servers_per_rack=1,
        server_types=(server,), gpu_sharing=sharing,
    )  # fmt: skip
    return Topology(cfg)


def _single(job_id: int, model: str) -> Job:
    return Job(job_id, f"j{job_id}", model, 1, 0, 1e6, 0.0, 0.0)


def _place_all(sim: Simulator, groups: list[int]) -> None:
    for g in groups:
        sim.next_decision()
        sim.apply(Placement((g,), ()))


def test_same_gpu_slowdown_by_hand():
    """cifar10 beside ncf on one V100: 1 + s_cifar10 · p_ncf, the level the vectors are
    fitted at; on the next GPU of the group only the group/socket/server levels."""
    a, b = CATALOGUE["cifar10"], CATALOGUE["ncf"]
    lam = CALIBRATION.level_coupling
    s, p = a.sensitivity, b.pressure
    # the three levels by hand: group = pcie, socket = cpu + membw, server = cpu+disk+net
    levels = (
        lam["group"] * s[1] * p[1]
        + lam["socket"] * (s[0] * p[0] + s[2] * p[2])
        + lam["server"] * (s[0] * p[0] + s[3] * p[3] + s[4] * p[4])
    )
    same_gpu = float(sum(s[r] * p[r] for r in range(5)))
    topo = _one_gpu_cluster(gpus=1)
    sim = Simulator(topo, [_single(0, "cifar10"), _single(1, "ncf")])
    _place_all(sim, [0, 0])
    run = sim.running[0]
    alone = sim.perf.alone_iteration_time(a, run.layout, 0)
    assert run.iter_time / alone == pytest.approx(1.0 + same_gpu, rel=1e-12)
    assert same_gpu > 0.3 and levels < 0.5 * same_gpu  # a shared GPU costs far more
    # two GPUs in the group: the second job goes to the idle GPU (least loaded first)
    topo2 = _one_gpu_cluster(gpus=2)
    sim2 = Simulator(topo2, [_single(0, "cifar10"), _single(1, "ncf"), _single(2, "wlm")])
    _place_all(sim2, [0, 0])
    assert sim2.running[0].layout.gpus.tolist() == [0]
    assert sim2.running[1].layout.gpus.tolist() == [1]
    assert sim2.running[0].iter_time / alone == pytest.approx(1.0 + levels, rel=1e-12)
    # a third: both GPUs hold one worker; the lowest id wins the tie
    _place_all(sim2, [0])
    assert sim2.running[2].layout.gpus.tolist() == [0]


def test_gpu_coupling_completes_every_resource_to_one():
    perf = PerformanceModel(_one_gpu_cluster())
    total = perf.gpu_coupling + perf.level_weights.sum(axis=0)
    np.testing.assert_allclose(total, 1.0, rtol=1e-12)
    assert LEVEL_RESOURCES.shape == (3, 5)


def test_cannot_share_pair_is_refused_and_masked():
    """imagenet and resnet-50 cannot share a V100 (Gavel records [0, 0]); cifar10 can
    share with imagenet."""
    assert not CALIBRATION.can_share("v100", "resnet-50", "imagenet")
    assert CALIBRATION.can_share("v100", "imagenet", "cifar10")
    topo = _one_gpu_cluster(gpus=1)
    jobs = [_single(0, "imagenet"), _single(1, "resnet-50"), _single(2, "cifar10")]
    sim = Simulator(topo, jobs)
    _place_all(sim, [0])
    assert sim.next_decision().model == "resnet-50"
    assert sim.group_free.tolist() == [0]  # the pending job sees no usable GPU
    assert sim.view().group_free.tolist() == [0]
    with pytest.raises(PlacementError, match="free slot, no worker of a model"):
        sim.apply(Placement((0,), ()))
    sim._pending = jobs[1]  # the refusal left it pending; decline it
    sim.apply(None)
    assert sim.next_decision().model == "cifar10"
    assert sim.group_free.tolist() == [1]
    sim.apply(Placement((0,), ()))
    check_sharing(sim)


def test_two_workers_of_one_job_never_share_a_gpu():
    topo = _one_gpu_cluster(gpus=2, sharing=3)
    job = Job(0, "w3", "cifar10", 3, 0, 1e6, 0.0, 0.0)
    sim = Simulator(topo, [job])
    sim.next_decision()
    assert sim.group_free.tolist() == [2]  # 6 slots, but one worker per GPU
    with pytest.raises(PlacementError, match="has 2 free GPUs, needs 3"):
        sim.apply(Placement((0, 0, 0), ()))


def _records(overrides: tuple[str, ...] = ("topology.gpu_sharing=1",)) -> dict[str, list]:
    """Every heuristic's per-job records on the golden trace, ``gpu_sharing: 1`` given
    explicitly (the code before sharing, which wrote the file, had no such key)."""
    cfg = load_config(GOLDEN_CONFIG, list(overrides))
    topo, perf = build_cluster(cfg)
    out = {}
    for policy in heuristic_names():
        _, records, _ = simulate(cfg, policy, load_workload(cfg, perf), topo, perf, seed=0)
        out[policy] = [
            [r.job.job_id, r.start_time, r.finish_time, r.isolated_runtime, r.n_servers]
            for r in records
        ]
    return out


#: the relative tolerance of the golden records' times: the simulator is deterministic,
#: but numpy's and libm's last bit (exp, log, summation order under SIMD) may differ
#: between CPUs of the same kind; a real change moves a time by far more than this
GOLDEN_RTOL = 1e-9


def test_sharing_one_reproduces_todays_records_exactly():
    """What is exact is pinned exactly: the policies, how many jobs each completes, the
    order they finish in, their ids and how many servers each used. The times (start,
    finish, isolated run time) agree within :data:`GOLDEN_RTOL` relative."""
    stored = json.loads(GOLDEN_RECORDS.read_text())
    got = _records()
    assert got.keys() == stored.keys()
    for policy, rows in stored.items():
        mine = got[policy]
        assert len(mine) == len(rows), policy
        assert [r[0] for r in mine] == [r[0] for r in rows], f"{policy}: finish order"
        assert [r[4] for r in mine] == [r[4] for r in rows], f"{policy}: servers used"
        times = np.array([r[1:4] for r in mine], dtype=np.float64)
        want = np.array([r[1:4] for r in rows], dtype=np.float64)
        np.testing.assert_allclose(times, want, rtol=GOLDEN_RTOL, atol=0, err_msg=policy)


@pytest.mark.parametrize("bad", ["0", "5", "two", "1.5", "true"])
def test_bad_gpu_sharing_is_one_line(bad):
    with pytest.raises(InputError) as err:
        load_config(GOLDEN_CONFIG, [f"topology.gpu_sharing={bad}"])
    msg = str(err.value)
    assert "topology.gpu_sharing" in msg and "\n" not in msg


if __name__ == "__main__" and "--update" in sys.argv:
    GOLDEN_RECORDS.write_text(json.dumps(_records()) + "\n")
    print(f"wrote {GOLDEN_RECORDS}")


def test_group_free_for_a_running_job_counts_its_own_gpus_back():
    """Load control's view: a running job's usable GPUs were its own released, a
    cannot-share resident still excluded."""
    topo = _one_gpu_cluster(gpus=2)
    wide = Job(0, "w", "cifar10", 2, 0, 1e6, 0.0, 0.0)
    sim = Simulator(topo, [wide, _single(1, "ncf")])
    sim.next_decision()
    sim.apply(Placement((0, 0), ()))
    _place_all(sim, [0])  # ncf: both GPUs hold one worker, the lowest id wins
    assert sim.running[1].layout.gpus.tolist() == [0]
    assert sim.group_free.tolist() == [1]  # GPU 0 is full
    assert sim.group_free_for(0).tolist() == [2]
    assert sim.view().group_free_for(1).tolist() == [2]
    # cifar10 on GPU 0, resnet-50 on GPU 1; imagenet may only join cifar10
    jobs = [_single(0, "cifar10"), _single(1, "resnet-50"), _single(2, "imagenet")]
    sim = Simulator(topo, jobs)
    _place_all(sim, [0, 0])
    assert sim.next_decision().model == "imagenet"
    assert sim.group_free.tolist() == [1]
    sim.apply(Placement((0,), ()))
    assert sim.running[2].layout.gpus.tolist() == [0]
    assert sim.group_free_for(2).tolist() == [1]  # GPU 1 holds resnet-50
    assert sim.group_free_for(1).tolist() == [1]  # GPU 0 is full (and holds imagenet)
    check_sharing(sim)
    # without sharing: the free GPUs plus the job's own
    plain = Simulator(_one_gpu_cluster(gpus=2, sharing=1), [wide])
    plain.next_decision()
    plain.apply(Placement((0, 0), ()))
    assert plain.group_free.tolist() == [0] and plain.group_free_for(0).tolist() == [2]
    assert plain.view().group_free_for is None  # load control releases by itself there
