"""Queue orderings (marl_sched.ordering) on hand-built queues, their use by the
simulator (estimate, not truth), preemption under las-2d, and migration."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from marl_sched.jobs import Job, Placement
from marl_sched.ordering import (
    LAS_PROMOTE_KNOB,
    LAS_THRESHOLDS,
    ORDERINGS,
    Las2D,
    OrderingContext,
    QueueOrdering,
    make_ordering,
    mlfs_priority_value,
)
from marl_sched.perf import PerformanceModel
from marl_sched.policies import Policy
from marl_sched.policies.heuristics import FirstFitPolicy
from marl_sched.simulator import PlacementError, Simulator
from tests.helpers import tiny_topology


def _job(i: int, workers: int = 1, iterations: float = 1000.0, submit: float = 0.0) -> Job:
    return Job(i, f"j{i}", "resnet-50", workers, 0, iterations, submit, math.nan)


def _order(name: str, jobs: list[Job], ctx: OrderingContext) -> list[int]:
    o = make_ordering(name)
    return [j.job_id for j in sorted(jobs, key=lambda j: o.key(j, ctx))]


def test_fifo_and_smallest_first() -> None:
    jobs = [_job(0, 4, submit=0.0), _job(1, 1, submit=5.0), _job(2, 2, submit=5.0)]
    assert _order("fifo", jobs[::-1], OrderingContext()) == [0, 1, 2]
    assert _order("smallest-first", jobs, OrderingContext()) == [1, 2, 0]


def test_smallest_first_serves_same_width_jobs_in_submit_order() -> None:
    """Same width: first submitted, first served (ties at one instant by job id).
    Catches a LIFO tie-break (``-job.submit_time`` in ``SmallestFirst.key``): the job
    ids run against the submit order, so neither the id nor its reverse passes."""
    jobs = [_job(0, 2, submit=9.0), _job(1, 2, submit=3.0), _job(2, 2, submit=6.0),
            _job(3, 1, submit=8.0), _job(4, 2, submit=3.0)]  # fmt: skip
    assert _order("smallest-first", jobs, OrderingContext()) == [3, 1, 4, 2, 0]
    assert _order("smallest-first", jobs[::-1], OrderingContext()) == [3, 1, 4, 2, 0]


def test_shortest_first_reads_the_estimate_not_the_truth() -> None:
    # true lengths ascend with the id; the estimates say the opposite
    jobs = [_job(i, iterations=100.0 * (i + 1), submit=float(i)) for i in range(4)]
    est = {0: 40.0, 1: 30.0, 2: math.nan, 3: 10.0}
    ctx = OrderingContext(estimate=lambda j: est[j.job_id])
    # unknown estimates go last, in FIFO order
    assert _order("shortest-first", jobs, ctx) == [3, 1, 0, 2]
    assert _order("shortest-first", jobs, OrderingContext()) == [0, 1, 2, 3]


def test_mlfs_priority_reads_the_estimate_not_the_truth() -> None:
    short, long_ = _job(0, iterations=10.0), _job(1, iterations=1e6, submit=1.0)
    truth = OrderingContext(est_iterations=lambda j: j.iterations)
    assert _order("mlfs-priority", [long_, short], truth) == [0, 1]
    swapped = {0: 1e6, 1: 10.0}  # the predictor has them the other way round
    ctx = OrderingContext(est_iterations=lambda j: swapped[j.job_id])
    assert _order("mlfs-priority", [short, long_], ctx) == [1, 0]
    # size counts too: same work, more tasks = later
    big = _job(2, workers=16, iterations=10.0)
    assert _order("mlfs-priority", [big, short], truth) == [0, 2]
    # the value by hand: 0.5 * ln(1 + w) / ln(1 + 1e7) + 0.5 * log2(n) / 10
    w = 10.0 * 0.5
    want = 0.5 * math.log1p(w) / math.log1p(1e7) + 0.5 * math.log2(17) / 10
    assert mlfs_priority_value(w, 16, 1) == pytest.approx(want)
    assert mlfs_priority_value(math.nan, 1, 0) == 0.5  # unknown work = the most


def test_las_2d_demotes_after_the_threshold_and_promotes_the_starved() -> None:
    jobs = [_job(i, workers=2, submit=float(i)) for i in range(3)]
    threshold = LAS_THRESHOLDS[0]
    attained = {0: threshold - 1.0, 1: 0.0, 2: 0.0}
    stopped = {0: 100.0}
    ctx = dict(
        now=100.0,
        attained_gpu_s=lambda i: attained[i],
        last_run_end=lambda j: stopped.get(j.job_id, j.submit_time),
    )
    assert _order("las-2d", jobs, OrderingContext(**ctx)) == [0, 1, 2]  # all in queue 0
    attained[0] = threshold  # crossed: demoted behind younger jobs
    assert _order("las-2d", jobs, OrderingContext(**ctx)) == [1, 2, 0]
    # with the starvation guard on: waited knob x its run time (attained / GPUs) since
    # it stopped: back on top (off by default: no promotion however long it waits)
    knob = 8.0
    late = OrderingContext(**{**ctx, "now": 100.0 + knob * threshold / 2})
    assert _order("las-2d", jobs, late) == [1, 2, 0] and LAS_PROMOTE_KNOB == 0.0
    guarded = Las2D(promote_knob=knob)
    assert [j.job_id for j in sorted(jobs, key=lambda j: guarded.key(j, late))] == [0, 1, 2]
    early = OrderingContext(**{**ctx, "now": 100.0 + knob * threshold / 2 - 1.0})
    assert [j.job_id for j in sorted(jobs, key=lambda j: guarded.key(j, early))] == [1, 2, 0]
    assert make_ordering("las-2d").queue_of(10 * threshold) == len(LAS_THRESHOLDS)


def test_every_builtin_is_made_fresh_and_unknown_names_refused() -> None:
    for name in ORDERINGS:
        o = make_ordering(name)
        assert o.name == name and make_ordering(o) is o
    with pytest.raises(ValueError, match="unknown ordering 'lifo'"):
        make_ordering("lifo")


def _one_gpu_per_job_cluster():
    topo = tiny_topology(subclusters=1, racks=1, servers=1, sockets=1, groups_per_socket=1,
                         gpus_per_group=1)  # fmt: skip
    return topo, PerformanceModel(topo)


def _serve_in_order(sim: Simulator) -> list[int]:
    order = []
    while (job := sim.next_decision()) is not None:
        order.append(job.job_id)
        sim.apply(Placement((0,), ()))
    return order


def test_without_backfill_the_head_of_the_queue_blocks_the_jobs_behind_it() -> None:
    """Two GPUs, one held by a long job 0; job 1 (two workers) waits at the head of the
    queue. Without backfill job 2 (one worker, submitted later) waits behind it until
    job 0 ends; with backfill it takes the free GPU when it arrives. Catches the
    scan going past a job that does not fit without backfill."""
    topo = tiny_topology(subclusters=1, racks=1, servers=1, sockets=1, groups_per_socket=1,
                         gpus_per_group=2)  # fmt: skip
    perf = PerformanceModel(topo)
    jobs = [_job(0, 1, iterations=1e4), _job(1, 2, iterations=100.0, submit=1.0),
            _job(2, 1, iterations=100.0, submit=2.0)]  # fmt: skip

    def serve(backfill: bool) -> list[tuple[int, float]]:
        sim = Simulator(topo, jobs, perf=perf, backfill=backfill)
        order = []
        while (job := sim.next_decision()) is not None:
            order.append((job.job_id, sim.now))
            sim.apply(Placement((0,) * job.num_workers, ()))
        return order

    blocked, passed = serve(False), serve(True)
    assert [j for j, _ in blocked] == [0, 1, 2]
    assert blocked[1][1] > 2.0 and blocked[2][1] >= blocked[1][1]  # after job 0 ends
    assert [j for j, _ in passed] == [0, 2, 1] and passed[1][1] == 2.0


def test_simulator_orders_its_queue_by_the_estimate() -> None:
    topo, perf = _one_gpu_per_job_cluster()
    # job 0 holds the only GPU while 1..3 queue; truth says 1 < 2 < 3, estimate 3 < 2 < 1
    jobs = [_job(0, iterations=1e4)] + [
        _job(i, iterations=100.0 * i, submit=1.0 + i) for i in range(1, 4)
    ]
    est = {0: 1e4, 1: 300.0, 2: 200.0, 3: 100.0}
    sim = Simulator(topo, jobs, perf=perf, ordering="shortest-first",
                    estimate=lambda j: est[j.job_id])  # fmt: skip
    assert _serve_in_order(sim) == [0, 3, 2, 1]
    # without an estimate the same ordering is FIFO, whatever the truth
    sim = Simulator(topo, jobs, perf=perf, ordering="shortest-first")
    assert _serve_in_order(sim) == [0, 1, 2, 3]


def test_las_2d_preempts_a_demoted_job_for_a_new_one_and_resumes_it() -> None:
    topo, perf = _one_gpu_per_job_cluster()
    iso = perf.isolated_iteration_time("resnet-50", 1, 0)
    long_iters = 3 * LAS_THRESHOLDS[0] / iso  # 3 thresholds' worth of GPU-seconds alone
    jobs = [_job(0, iterations=long_iters), _job(1, iterations=100.0, submit=10.0)]
    penalty = 7.0
    sim = Simulator(topo, jobs, perf=perf, ordering="las-2d", migration_cost=penalty)
    assert _serve_in_order(sim) == [0, 1, 0]
    assert sim.stats.preemptions == 1
    r0, r1 = sim.records[0], sim.records[1]
    # job 1 waits in queue 0 behind job 0 until job 0 crosses the threshold
    assert r1.start_time == pytest.approx(LAS_THRESHOLDS[0])
    assert r1.finish_time == pytest.approx(LAS_THRESHOLDS[0] + 100.0 * iso)
    # job 0 keeps its progress, pays the restart penalty once, and keeps its first start
    assert r0.start_time == 0.0
    assert r0.finish_time == pytest.approx(long_iters * iso + 100.0 * iso + penalty)


def test_migrate_keeps_progress_and_charges_the_penalty() -> None:
    topo = tiny_topology(subclusters=1, racks=1, servers=2, sockets=1, groups_per_socket=1,
                         gpus_per_group=1)  # fmt: skip
    perf = PerformanceModel(topo)
    n, t_migrate, penalty = 5000.0, 100.0, 30.0
    # job 1 (always declined) only marks the moment to migrate
    jobs = [_job(0, iterations=n), _job(1, submit=t_migrate)]
    sim = Simulator(topo, jobs, perf=perf, migration_cost=penalty)
    assert sim.next_decision().job_id == 0
    sim.apply(Placement((0,), ()))
    tau = sim.running[0].iter_time
    while sim.next_decision() is not None and sim.now < t_migrate:
        sim.apply(None)
    sim.apply(None)
    assert sim.now == t_migrate
    with pytest.raises(PlacementError):
        sim.migrate(0, Placement((0, 1), ()))  # wrong shape: state unchanged
    sim.migrate(0, Placement((1,), ()))
    run = sim.running[0]
    assert run.remaining == pytest.approx(n - t_migrate / tau)
    assert run.paused_until == t_migrate + penalty
    assert sim.view().running()[0].placement == Placement((1,), ())
    assert sim.group_free.tolist() == [1, 0]
    while sim.next_decision() is not None:
        sim.apply(None)
    # same GPU type, no neighbour: finish = n tau + penalty (hand-computed)
    assert sim.records[0].finish_time == pytest.approx(n * tau + penalty)
    assert sim.stats.migrations == 1
    assert [j.job_id for j in sim.unplaceable] == [1]


def test_a_migrated_job_progresses_only_after_its_restart_delay() -> None:
    """Job 0 migrates at t = 100 with a 30 s restart delay; a neighbour placed on its
    server at t = 200 brings its progress up to date: 70 s of work since the delay
    ended, none during it. Catches progress counted through the delay (``_progress``
    reading ``now - last_update`` when the restart ended between two updates)."""
    topo = tiny_topology(subclusters=1, racks=1, servers=2, sockets=1, groups_per_socket=1,
                         gpus_per_group=2)  # fmt: skip
    perf = PerformanceModel(topo)
    n, t_migrate, penalty, t_next = 5000.0, 100.0, 30.0, 200.0
    jobs = [_job(0, iterations=n), _job(1, submit=t_migrate), _job(2, submit=t_next)]
    sim = Simulator(topo, jobs, perf=perf, migration_cost=penalty)
    assert sim.next_decision().job_id == 0
    sim.apply(Placement((0,), ()))
    tau = sim.running[0].iter_time
    assert sim.next_decision().job_id == 1 and sim.now == t_migrate
    sim.apply(None)
    sim.migrate(0, Placement((1,), ()))
    while sim.next_decision().job_id != 2:
        sim.apply(None)  # job 1 only marked the moment to migrate
    assert sim.now == t_next
    sim.apply(Placement((1,), ()))  # the same server: job 0's speed is recomputed
    done = t_migrate / tau + (t_next - t_migrate - penalty) / tau
    assert sim.running[0].remaining == pytest.approx(n - done, rel=1e-12)


class _OwnOrderingMover(Policy):
    """First-fit with its own ordering (largest first) and a load control that moves
    every job it can to the highest-numbered free group, once."""

    name = "test-mover"

    def __init__(self) -> None:
        self.inner = FirstFitPolicy()
        self.moved: set[int] = set()
        self.seen_running: list[int] = []

    def reset(self, topology, seed=0):
        super().reset(topology, seed)
        self.inner.reset(topology, seed)

    def place(self, job, view):
        return self.inner.place(job, view)

    def ordering(self):
        class LargestFirst(QueueOrdering):
            name = "largest-first"

            def key(self, job, ctx):
                return (-job.num_workers, job.submit_time, job.job_id)

        return LargestFirst()

    def rebalance(self, view):
        moves = []
        free = np.array(view.group_free)
        for info in view.running():
            self.seen_running.append(info.job_id)
            assert info.slowdown >= 1.0 - 1e-9
            if info.job_id in self.moved or info.num_workers != 1 or info.num_ps:
                continue
            room = (free > 0) & view.perf.group_fits(info.model)
            g = int(np.flatnonzero(room)[-1]) if room.any() else None
            if g is not None and g != info.placement.worker_groups[0]:
                free[g] -= 1
                self.moved.add(info.job_id)
                moves.append((info.job_id, Placement((g,), ())))
        return moves


def test_the_runner_uses_a_policys_own_ordering_only_under_own_and_its_load_control() -> None:
    from marl_sched.config import REPO_ROOT, load_config
    from marl_sched.runner import build_cluster, load_workload, simulate

    cfg = load_config(REPO_ROOT / "tests" / "data" / "golden.yaml")
    # arrivals 20x as fast: jobs queue, so the ordering matters
    cfg = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, load=20.0))
    topo, perf = build_cluster(cfg)
    workload = load_workload(cfg, perf)

    def run(ordering: str):
        sim_cfg = dataclasses.replace(cfg.simulation, ordering=ordering, migration="on")
        c = dataclasses.replace(cfg, simulation=sim_cfg)
        pol = _OwnOrderingMover()
        _, records, sim = simulate(c, "test-mover", workload, topo, perf, policy=pol)
        return pol, sim, [(r.job.job_id, r.start_time) for r in records]

    pol, sim, fifo = run("fifo")
    assert sim.ordering.name == "fifo"
    assert sim.stats.migrations == len(pol.moved) > 0 and pol.seen_running
    pol, sim, own = run("own")
    assert sim.ordering.name == "largest-first"
    assert own != fifo
    assert len(sim.records) == len(workload.jobs)
