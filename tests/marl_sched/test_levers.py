"""The lever rules (length-aware, defer-long), the simulator's recheck hook, and the
minimum detectable effect of a paired comparison."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marl_sched.benchmark.power import as_ratio_change, mde_log, mde_log_clustered, z_sum
from marl_sched.catalogue import CATALOGUE
from marl_sched.config import ServerTypeConfig, TopologyConfig
from marl_sched.errors import InputError
from marl_sched.jobs import Job, Placement
from marl_sched.perf import PerformanceModel
from marl_sched.policies import make_policy, policy_entries
from marl_sched.policies.base import control_names, heuristic_names
from marl_sched.policies.levers import LONG_WORK_S, DeferLongPolicy, LengthAwarePolicy
from marl_sched.simulator import Simulator, run_policy
from marl_sched.topology import Topology

# servers 0, 1: V100; 2: P100; 3: K80 (8 GPUs each, 4 groups of 2: server s = groups 4s..4s+3)
TOPO = Topology.from_config(
    TopologyConfig(
        subclusters=1,
        racks_per_subcluster=1,
        servers_per_rack=4,
        server_types=(
            ServerTypeConfig(name="v", count=2, gpu_type="v100"),
            ServerTypeConfig(name="p", count=1, gpu_type="p100"),
            ServerTypeConfig(name="k", count=1, gpu_type="k80"),
        ),
    )
)


def _job(i: int, model: str, workers: int, work_s: float, submit: float = 0.0) -> Job:
    iterations = work_s / CATALOGUE[model].compute_s
    return Job(i, f"j{i}", model, workers, 0, iterations, submit, math.nan)


def _servers(placement: Placement) -> set[int]:
    return {int(TOPO.group_server[g]) for g in placement.worker_groups}


def _pending(jobs: list[Job], blockers: dict[int, Placement]) -> tuple[Simulator, Job]:
    """A simulator with the ``blockers`` (job id -> placement) placed, and the first
    other job pending."""
    sim = Simulator(TOPO, jobs)
    while (job := sim.next_decision()) is not None:
        if job.job_id not in blockers:
            return sim, job
        sim.apply(blockers[job.job_id])
    raise AssertionError("no job left to decide")


def _on(server: int, gpus: int) -> Placement:
    """``gpus`` workers on server ``server``, group by group."""
    first = 4 * server
    return Placement(tuple(first + k // 2 for k in range(gpus)), ())


LONG, SHORT = 10 * LONG_WORK_S, 0.01 * LONG_WORK_S
DAYS = 1e7  # a blocker that runs for months


def test_long_job_goes_to_its_fastest_type_best_fit():
    # server 0 has 2 free, server 1 has 8: the 2-worker job fills server 0 (best fit)
    jobs = [_job(0, "vgg-16", 6, DAYS), _job(1, "vgg-16", 2, LONG, 1.0)]
    sim, job = _pending(jobs, {0: _on(0, 6)})
    assert _servers(LengthAwarePolicy().place(job, sim.view())) == {0}
    # dssm runs fastest on P100 (the catalogue's measured profile)
    sim, _ = _pending([_job(0, "dssm", 4, LONG)], {})
    assert _servers(LengthAwarePolicy().place(_job(0, "dssm", 4, LONG), sim.view())) == {2}


def test_long_job_whole_server_else_next_type_short_job_slowest_adequate():
    # both V100 servers have 4 free: a 6-worker long job takes the whole P100 server
    jobs = [_job(0, "vgg-16", 4, DAYS), _job(1, "vgg-16", 4, DAYS), _job(2, "vgg-16", 6, LONG, 1)]
    sim, job = _pending(jobs, {0: _on(0, 4), 1: _on(1, 4)})
    assert _servers(LengthAwarePolicy().place(job, sim.view())) == {2}
    sim, _ = _pending([_job(0, "vgg-16", 2, SHORT)], {})
    view = sim.view()
    # vgg-16: P100 at 0.66 of V100 is adequate, K80 at 0.16 is not
    assert _servers(LengthAwarePolicy().place(_job(0, "vgg-16", 2, SHORT), view)) == {2}
    # ncf runs 1.41 on K80 and 2.10 on P100: K80 is adequate and the slowest
    assert _servers(LengthAwarePolicy().place(_job(0, "ncf", 2, SHORT), view)) == {3}
    # with adequate=1 only the fastest type is adequate
    assert _servers(LengthAwarePolicy(adequate=1.0).place(_job(0, "ncf", 2, SHORT), view)) == {2}
    # no estimate: short
    nan_job = Job(0, "j0", "vgg-16", 2, 0, math.nan, 0.0, math.nan)
    assert not LengthAwarePolicy().is_long(nan_job)


def test_larger_than_a_server_spreads_over_fewest_servers_of_the_type():
    sim, _ = _pending([_job(0, "resnet-50", 12, LONG)], {})
    placement = LengthAwarePolicy().place(_job(0, "resnet-50", 12, LONG), sim.view())
    assert _servers(placement) == {0, 1}
    assert len(placement.worker_groups) == 12


def test_defer_long_holds_then_first_fit_by_the_bound():
    # both V100 servers busy for months with 6 of 8 GPUs: a 4-worker long job is held,
    # and placed where first-fit would 600 s later (no completion before)
    jobs = [_job(0, "vgg-16", 6, DAYS), _job(1, "vgg-16", 6, DAYS), _job(2, "vgg-16", 4, LONG, 5)]
    blockers = {0: _on(0, 6), 1: _on(1, 6)}
    policy = DeferLongPolicy(defer_bound_s=600.0)
    policy.reset(TOPO, 0)
    sim = Simulator(TOPO, jobs)
    starts = {}
    while (job := sim.next_decision()) is not None:
        placement = blockers.get(job.job_id) or policy.place(job, sim.view())
        if placement is not None:
            starts[job.job_id] = (sim.now, placement)
        sim.apply(placement)
        if len(starts) == 3:
            break
    when, placement = starts[2]
    assert when == pytest.approx(5.0 + 600.0)
    assert _servers(placement) == {2}  # first-fit: the first server that holds it whole
    # length-aware places it at once (next type, whole server)
    sim, job = _pending(jobs, blockers)
    assert _servers(LengthAwarePolicy().place(job, sim.view())) == {2}


def test_defer_long_is_offered_again_at_a_completion_before_the_bound():
    # a V100 blocker ends long before the bound: the held job then gets its V100 server
    short_blocker = _job(1, "vgg-16", 6, 50.0)
    jobs = [_job(0, "vgg-16", 6, DAYS), short_blocker, _job(2, "vgg-16", 4, LONG, 5)]
    blockers = {0: _on(0, 6), 1: _on(1, 6)}
    policy = DeferLongPolicy()
    policy.reset(TOPO, 0)
    sim = Simulator(TOPO, jobs)
    while (job := sim.next_decision()) is not None:
        placement = blockers.get(job.job_id) or policy.place(job, sim.view())
        sim.apply(placement)
        if placement is not None and job.job_id == 2:
            break
    assert 5.0 < sim.now < 3600.0
    assert _servers(placement) == {1}
    assert not policy._held


def test_recheck_of_a_placed_job_is_a_no_op():
    sim = Simulator(TOPO, [_job(0, "vgg-16", 2, 100.0)])
    job = sim.next_decision()
    sim.recheck_at(job.job_id, 50.0)
    sim.apply(_on(0, 2))
    assert sim.next_decision() is None
    assert len(sim.result()) == 1


PERF_ITERATION_FNS = ("iteration_time", "alone_iteration_time", "isolated_iteration_time")


def test_rules_never_call_the_performance_model(monkeypatch):
    """Every decision of both rules on a busy mixed workload, with the performance
    model's iteration-time functions raising while the policy decides."""
    rng = np.random.default_rng(0)
    models = sorted(CATALOGUE)
    jobs = [
        _job(
            i,
            models[int(rng.integers(len(models)))],
            int(rng.choice([1, 2, 4, 8, 12])),
            float(LONG_WORK_S * np.exp(rng.normal(0, 2))),
            float(i * 30.0),
        )
        for i in range(80)
    ]

    def refuse(*_a, **_k):
        raise AssertionError("a lever rule called the performance model")

    for name in ("length-aware", "defer-long"):
        policy = make_policy(name)
        policy.reset(TOPO, 0)
        sim = Simulator(TOPO, jobs, perf=PerformanceModel(TOPO))
        held = 0

        def place(job, view, policy=policy):
            nonlocal held
            with monkeypatch.context() as m:
                for fn in PERF_ITERATION_FNS:
                    m.setattr(PerformanceModel, fn, refuse)
                placement = policy.place(job, view)
            held += placement is None
            return placement

        records = run_policy(sim, place)
        assert len(records) == len(jobs)
        if name == "defer-long":
            assert held > 0  # the hold path ran


def test_refuse_helper_really_refuses(monkeypatch):
    """The guard above bites: a rule that asked the model would fail."""
    monkeypatch.setattr(PerformanceModel, "isolated_iteration_time", lambda *a: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        PerformanceModel(TOPO).isolated_iteration_time("vgg-16", 2, 0)


def test_bad_options_name_the_key():
    with pytest.raises(InputError, match="^defer_bound_s: "):
        DeferLongPolicy(defer_bound_s=-1)
    with pytest.raises(InputError, match="^long_work_s: "):
        LengthAwarePolicy(long_work_s=0)
    with pytest.raises(InputError, match="^long_work_s: "):
        DeferLongPolicy(long_work_s=-5)
    with pytest.raises(InputError, match="^adequate: "):
        LengthAwarePolicy(adequate=1.5)
    assert DeferLongPolicy(defer_bound_s=0).defer_bound_s == 0


def test_levers_are_in_no_enumeration():
    entries = policy_entries()
    assert entries["length-aware"].kind == entries["defer-long"].kind == "lever"
    for name in ("length-aware", "defer-long"):
        assert name not in heuristic_names() and name not in control_names()


def test_mde_against_a_hand_computation():
    d = [0.1, -0.1, 0.3, -0.3]  # mean 0, sample variance (0.01+0.01+0.09+0.09)/3
    sd = math.sqrt(0.2 / 3)
    z = 1.959963984540054 + 0.8416212335729143
    assert z_sum() == pytest.approx(z, abs=1e-9)
    assert mde_log(d) == pytest.approx(z * sd / 2.0, rel=1e-9)
    assert mde_log(d) == pytest.approx(0.3617, abs=1e-4)
    assert as_ratio_change(0.03) == pytest.approx(1 - math.exp(-0.03))
    # per-scenario means 0.0 and 0.0: no spread; then 0.1 and 0.0
    assert mde_log_clustered([[0.1, -0.1], [0.3, -0.3]]) == 0.0
    assert mde_log_clustered([[0.2, 0.0], [0.0, 0.0]]) == pytest.approx(
        z * 0.05
    )  # sd 0.0707 / sqrt 2
    assert math.isnan(mde_log([0.1]))
    with pytest.raises(ValueError):
        z_sum(alpha=0)
