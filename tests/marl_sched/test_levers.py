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
from tests.helpers import performance_model_refused

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

    for name in ("length-aware", "defer-long", "upgrade", "masked:lookahead-learned+upgrade"):
        policy = make_policy(name)
        policy.reset(TOPO, 0)
        sim = Simulator(TOPO, jobs, perf=PerformanceModel(TOPO))
        held = 0

        def guarded(decide):
            with performance_model_refused(monkeypatch, "a lever rule"):
                return decide()

        def place(job, view, policy=policy):
            nonlocal held
            placement = guarded(lambda: policy.place(job, view))
            held += placement is None
            return placement

        def rebalance(s, policy=policy):  # the rule decides guarded; the simulator moves
            for move in guarded(lambda: policy.rebalance(s.view())):
                s.migrate(*move)

        if name.endswith("upgrade"):
            sim.after_completions = rebalance
        records = run_policy(sim, place)
        assert len(records) == len(jobs)
        if name == "defer-long":
            assert held > 0  # the hold path ran
        if name.endswith("upgrade"):
            assert sim.stats.migrations > 0  # the migration rule ran and moved


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


# --------------------------------------------------------------------- deferral bound


@pytest.mark.parametrize("bound", [0.0, 250.0, 1800.0])
def test_a_held_job_is_placed_by_its_bound_when_its_preferred_gpus_never_free(bound):
    """Both V100 servers stay busy for months; short jobs come and go on the other
    servers meanwhile (each completion offers the held job again). Every held long
    job starts no later than when it was first held plus ``defer_bound_s``, in the
    runner's loop (:func:`run_policy`)."""
    blockers = {0: _on(0, 6), 1: _on(1, 6)}
    jobs = [_job(0, "vgg-16", 6, DAYS), _job(1, "vgg-16", 6, DAYS)]
    jobs += [_job(2 + k, "vgg-16", 4, LONG, 5.0 + 400.0 * k) for k in range(3)]
    jobs += [_job(5 + k, "ncf", 1, SHORT, 7.0 + 90.0 * k) for k in range(20)]
    jobs.sort(key=lambda j: j.submit_time)
    policy = DeferLongPolicy(defer_bound_s=bound)
    policy.reset(TOPO, 0)
    held: dict[int, float] = {}
    placed: dict[int, Placement] = {}

    def place(job, view):
        if job.job_id in blockers:
            return blockers[job.job_id]
        placement = policy.place(job, view)
        if placement is None and job.job_id in policy._held:
            held.setdefault(job.job_id, view.now)
        if placement is not None:
            placed[job.job_id] = placement
        return placement

    sim = Simulator(TOPO, jobs)
    records = {r.job.job_id: r for r in run_policy(sim, place)}
    assert set(held) == {2, 3, 4}  # every long job was held (its V100 server never frees)
    for job_id, when in held.items():
        assert records[job_id].start_time <= when + bound + 1e-9
        assert job_id in placed


# --------------------------------------------------------------------- upgrade migration


def _upgrade_case() -> tuple[list[Job], dict[int, Placement]]:
    """Both V100 servers full (one blocker ends at ~2,000 s, one runs for months) and
    a long 4-worker vgg-16 job arriving at 1 s."""
    jobs = [_job(0, "vgg-16", 8, 2000.0), _job(1, "vgg-16", 8, DAYS),
            _job(2, "vgg-16", 4, 200 * LONG, 1.0)]  # fmt: skip
    return jobs, {0: _on(0, 8), 1: _on(1, 8)}


def _upgrade_run(cost):
    """A long vgg-16 job placed while both V100 servers are full (length-aware: the
    P100 server whole); a V100 blocker ends at ~2,000 s and ``upgrade`` moves it there.
    ``cost``: the simulator's restart rule."""
    from marl_sched.runner import rebalance

    jobs, blockers = _upgrade_case()
    policy = make_policy("upgrade")
    policy.reset(TOPO, 0)
    sim = Simulator(TOPO, jobs, migration_cost=cost)
    sim.after_completions = lambda s: rebalance(s, policy)
    moves = []
    real = Simulator.migrate

    def spy(self, job_id, placement):
        link_jobs = self.link_jobs.copy()  # the job's own links still counted
        ok = real(self, job_id, placement)
        moves.append((self.now, job_id, placement, self.running[job_id].paused_until, link_jobs))
        return ok

    def place(job, view):
        return blockers.get(job.job_id) or policy.place(job, view)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(Simulator, "migrate", spy)
        records = {r.job.job_id: r for r in run_policy(sim, place)}
    return sim, records, moves


def test_an_upgrade_pays_the_measured_restart_the_simulator_charges():
    from marl_sched.migration import MigrationCost, restart_s, state_move_s

    sim, records, moves = _upgrade_run(MigrationCost())
    assert len(moves) == 1 and sim.stats.migrations == 1
    now, job_id, placement, paused_until, link_jobs = moves[0]
    assert job_id == 2 and _servers(placement) == {0}  # from the P100 server to a V100 one
    old = _on(2, 4).worker_groups
    # the moving job's own links are released first: the state shares none with it
    own = PerformanceModel(TOPO).layout(CATALOGUE["vgg-16"], old, ()).link_ids
    link_jobs[own] -= 1
    delay = restart_s("vgg-16") + state_move_s(
        PerformanceModel(TOPO), link_jobs, "vgg-16", old, placement.worker_groups
    )
    assert sim.stats.migration_delay_s == pytest.approx(delay, rel=1e-12)
    assert paused_until - now == pytest.approx(delay, rel=1e-12)
    # the same move at no cost: the job finishes exactly the restart earlier
    free_sim, free_records, free_moves = _upgrade_run(MigrationCost(flat_s=0.0))
    assert [(m[0], m[1], m[2]) for m in free_moves] == [(now, job_id, placement)]
    late = records[2].finish_time - free_records[2].finish_time
    assert late == pytest.approx(delay, rel=1e-9)
    assert records[2].finish_time < _no_upgrade_finish()  # the move paid for itself


def _no_upgrade_finish() -> float:
    """The long job's finish without migration (``length-aware``: it stays on P100)."""
    jobs, blockers = _upgrade_case()
    policy = LengthAwarePolicy()
    sim = Simulator(TOPO, jobs)
    records = run_policy(sim, lambda j, v: blockers.get(j.job_id) or policy.place(j, v))
    return next(r.finish_time for r in records if r.job.job_id == 2)


def test_upgrade_keeps_a_job_whose_remaining_run_cannot_repay_the_restart():
    """With a restart a million times the measured one, no saving repays it: no move."""
    from marl_sched.runner import rebalance

    jobs, blockers = _upgrade_case()
    policy = make_policy("upgrade", restart_scale=1e6)
    policy.reset(TOPO, 0)
    sim = Simulator(TOPO, jobs)
    sim.after_completions = lambda s: rebalance(s, policy)
    run_policy(sim, lambda j, v: blockers.get(j.job_id) or policy.place(j, v))
    assert sim.stats.migrations == 0


def _heavy_window():
    """The default config and cluster, and a heavy window of its trace: long jobs land
    on slower GPU types, and faster ones free later."""
    from marl_sched.config import REPO_ROOT, load_config
    from marl_sched.runner import TraceOptions, build_cluster, load_workload

    cfg = load_config(REPO_ROOT / "configs/default.yaml")
    cluster = build_cluster(cfg)
    window = load_workload(cfg, cluster[1], TraceOptions(start=2200, max_jobs=100, load=12.0))
    return cfg, cluster, window


def test_upgrade_never_moves_a_job_with_migration_off():
    """The runner's placement track (``simulation.migration: off``, the default)
    never calls the rule; with ``on`` the same window has upgrades."""
    import dataclasses

    from marl_sched.runner import simulate as run_simulate

    cfg, cluster, window = _heavy_window()
    assert cfg.simulation.migration == "off"
    off, _, sim = run_simulate(cfg, "upgrade", window, *cluster, seed=0)
    assert (off["migrations"], off["migrations_declined"], sim.stats.migrations) == (0, 0, 0)
    on_cfg = dataclasses.replace(cfg, simulation=dataclasses.replace(cfg.simulation,
                                                                     migration="on"))  # fmt: skip
    on, _, _ = run_simulate(on_cfg, "upgrade", window, *cluster, seed=0)
    assert on["migrations"] > 0


def test_upgrade_moves_respect_gpu_sharing():
    """With ``gpu_sharing: 2`` (two jobs' workers per GPU): the upgrade case with each
    V100 server held by two 8-worker jobs; when server 0's two end, the long job moves
    there, and the simulator's per-GPU bookkeeping stays consistent (at most two jobs'
    workers per GPU, never two of one job, every slot back at the end)."""
    import dataclasses

    from marl_sched.runner import rebalance
    from tests.marl_sched.test_sharing import check_sharing

    topo = Topology(dataclasses.replace(TOPO.config, gpu_sharing=2))
    jobs, _ = _upgrade_case()
    jobs.insert(2, _job(3, "vgg-16", 8, 2000.0))
    jobs.insert(3, _job(4, "vgg-16", 8, DAYS))
    blockers = {0: _on(0, 8), 1: _on(1, 8), 3: _on(0, 8), 4: _on(1, 8)}
    policy = make_policy("upgrade")
    policy.reset(topo, 0)
    sim = Simulator(topo, jobs)
    sim.after_completions = lambda s: (rebalance(s, policy), check_sharing(s))
    while (job := sim.next_decision()) is not None:
        sim.apply(blockers.get(job.job_id) or policy.place(job, sim.view()))
        check_sharing(sim)
    assert len(sim.result()) == len(jobs) and sim.stats.migrations == 1
    np.testing.assert_array_equal(sim.group_unused, topo.group_slots)


def test_upgrade_is_a_lever_and_its_bad_options_name_the_key():
    from marl_sched.runner import has_migration_rule

    assert policy_entries()["upgrade"].kind == "lever"
    assert "upgrade" not in heuristic_names() + control_names()
    assert has_migration_rule(make_policy("upgrade"))
    with pytest.raises(InputError, match="^restart_scale: "):
        make_policy("upgrade", restart_scale=-1)
    with pytest.raises(InputError, match="^max_moves: "):
        make_policy("upgrade", max_moves=0)


def test_the_reference_upgrade_places_as_the_reference_and_moves_only_with_migration_on():
    """``masked:lookahead+upgrade`` with migration off is ``masked:lookahead`` job for
    job; with it on, the heavy window has upgrades, each paid for by the simulator."""
    import dataclasses

    from marl_sched.runner import has_migration_rule
    from marl_sched.runner import simulate as run_simulate

    assert policy_entries()["masked:lookahead+upgrade"].kind == "teacher"
    assert has_migration_rule(make_policy("masked:lookahead+upgrade"))
    cfg, cluster, window = _heavy_window()
    _, ref, _ = run_simulate(cfg, "masked:lookahead", window, *cluster, seed=0)
    off, rec, sim = run_simulate(cfg, "masked:lookahead+upgrade", window, *cluster, seed=0)
    assert off["migrations"] == 0 and sim.stats.migrations == 0
    assert [(r.job.job_id, r.start_time, r.finish_time, r.n_servers) for r in rec] == [
        (r.job.job_id, r.start_time, r.finish_time, r.n_servers) for r in ref
    ]
    on_cfg = dataclasses.replace(cfg, simulation=dataclasses.replace(cfg.simulation,
                                                                     migration="on"))  # fmt: skip
    on, _, on_sim = run_simulate(on_cfg, "masked:lookahead+upgrade", window, *cluster, seed=0)
    assert on["migrations"] > 0 and on_sim.stats.migration_delay_s > 0
    with pytest.raises(InputError, match="^max_moves: "):
        make_policy("masked:lookahead+upgrade", max_moves=0)


def test_the_learned_upgrade_is_the_learned_lookahead_that_moves_with_migration_on():
    """``masked:lookahead-learned+upgrade``: off, ``masked:lookahead-learned`` job for
    job; on, the heavy window has upgrades; a lever rule (a contender), not a reference."""
    import dataclasses

    from marl_sched.runner import simulate as run_simulate

    assert policy_entries()["masked:lookahead-learned+upgrade"].kind == "lever"
    cfg, cluster, window = _heavy_window()
    _, ref, _ = run_simulate(cfg, "masked:lookahead-learned", window, *cluster, seed=0)
    _, rec, _ = run_simulate(cfg, "masked:lookahead-learned+upgrade", window, *cluster, seed=0)
    assert [(r.job.job_id, r.start_time, r.n_servers) for r in rec] == [
        (r.job.job_id, r.start_time, r.n_servers) for r in ref
    ]
    on_cfg = dataclasses.replace(cfg, simulation=dataclasses.replace(cfg.simulation,
                                                                     migration="on"))  # fmt: skip
    on, _, _ = run_simulate(on_cfg, "masked:lookahead-learned+upgrade", window, *cluster, seed=0)
    assert on["migrations"] > 0
