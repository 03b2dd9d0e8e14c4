"""Migration as a simulator mechanism: the measured cost, the per-job cap and
interval, the one hook every policy migrates through, and the invariants a migration
must keep (hypothesis)."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marl_sched.catalogue import CATALOGUE
from marl_sched.cli import main
from marl_sched.config import REPO_ROOT, SimulationConfig, load_config
from marl_sched.errors import InputError
from marl_sched.jobs import Job, Placement
from marl_sched.migration import (
    MODEL_APPLICATION,
    RESTART_FILE,
    STATE_COPIES,
    MigrationCost,
    derive_restart_table,
    model_restart_table,
    moved_pairs,
)
from marl_sched.perf import PerformanceModel
from marl_sched.policies import load_control_names, make_policy
from marl_sched.runner import TraceOptions, build_cluster, has_migration_rule, load_workload
from marl_sched.runner import simulate as run_simulate
from marl_sched.simulator import Simulator
from tests.helpers import tiny_topology
from tests.marl_sched.test_simulator import _check_state

# one server per rack, two racks, one subcluster: a move crosses PCIe, NICs, rack uplinks
TOPO = tiny_topology(subclusters=1, racks=2, servers=1, sockets=1, groups_per_socket=2,
                     gpus_per_group=1)  # fmt: skip
PERF = PerformanceModel(TOPO)


def _job(i: int, model: str = "resnet-50", workers: int = 1, iterations: float = 1e4,
         submit: float = 0.0) -> Job:  # fmt: skip
    return Job(i, f"j{i}", model, workers, 0, iterations, submit, math.nan)


def _started(jobs: list[Job], placements: list[Placement], **kwargs) -> Simulator:
    """A simulator with ``jobs`` placed at time 0 on ``placements``."""
    sim = Simulator(TOPO, jobs, perf=PERF, **kwargs)
    for p in placements:
        assert sim.next_decision() is not None
        sim.apply(p)
    return sim


def _bottleneck_s(nbytes: float, links: list[int], sharing: dict[int, int]) -> float:
    """Hand-computed move time: bytes × (1 + jobs on the link) / bandwidth, worst link."""
    return max(nbytes * (1 + sharing.get(k, 0)) / TOPO.link_bw[k] for k in links)


def _path(a: int, b: int) -> list[int]:
    sa, sb = int(TOPO.group_server[a]), int(TOPO.group_server[b])
    ra, rb = int(TOPO.server_rack[sa]), int(TOPO.server_rack[sb])
    return [TOPO.pcie_link(a), TOPO.pcie_link(b), TOPO.nic_link(sa), TOPO.nic_link(sb),
            TOPO.rack_link(ra), TOPO.rack_link(rb)]  # fmt: skip


# --------------------------------------------------------------------- the data


def _csv(shared: Path) -> dict[str, float]:
    with open(shared / "profiles" / "restart_times.csv", newline="", encoding="utf-8") as fh:
        return {r["application"]: float(r["restart_s"]) for r in csv.DictReader(fh)}


@pytest.mark.shared_data
def test_shipped_restart_table_rederives_from_the_shared_data(shared_data: Path) -> None:
    assert derive_restart_table(shared_data) == json.loads(RESTART_FILE.read_text("utf-8"))


def test_every_catalogue_model_maps_to_a_measured_application() -> None:
    table = model_restart_table()
    assert set(MODEL_APPLICATION) == set(CATALOGUE) == set(table)
    measured = {m for m, e in table.items() if e["measured"]}
    # the six Pollux applications are measured; every other mapping is an assumption
    assert measured == {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
    assert all(e["basis"].startswith("assumption") for m, e in table.items() if m not in measured)


@pytest.mark.shared_data
@pytest.mark.parametrize("model", sorted(CATALOGUE))
def test_restart_delay_of_each_catalogue_model_is_pinned_to_the_data(
    shared_data: Path, model: str
) -> None:
    """A job of ``model`` moved from rack 0 to rack 1 pauses for the data file's restart
    of its application plus its state over the bottleneck link (hand-computed)."""
    app = MODEL_APPLICATION[model][0]
    want_restart = _csv(shared_data)[app]
    pinned = {"bert": 120, "cifar10": 50, "deepspeech2": 25, "imagenet": 250, "ncf": 15,
              "yolov3": 80, "other": 30}  # fmt: skip
    assert want_restart == pinned[app]
    n, t_move = 1e5, 0.0
    sim = _started([_job(0, model, iterations=n)], [Placement((0,), ())])
    tau = sim.running[0].iter_time
    assert sim.migrate(0, Placement((2,), ()))
    move = _bottleneck_s(STATE_COPIES * CATALOGUE[model].model_bytes, _path(0, 2), {})
    assert move > 0
    delay = sim.running[0].paused_until - t_move
    assert delay == pytest.approx(want_restart + move, rel=1e-12)
    assert sim.stats.migration_delay_s == pytest.approx(delay)
    while sim.next_decision() is not None:
        sim.apply(None)
    assert sim.records[0].finish_time == pytest.approx(n * tau + delay, rel=1e-9)


# --------------------------------------------------------------------- the mechanism


def test_the_move_shares_its_bottleneck_link_with_the_jobs_on_it() -> None:
    # job 1 spans both servers: its ring crosses both NICs and both rack uplinks
    jobs = [_job(0), _job(1, workers=2)]
    sim = _started(jobs, [Placement((0,), ()), Placement((1, 3), ())], migration_cost="measured")
    assert sim.migrate(0, Placement((2,), ()))
    shared = {k: 1 for k in sim.running[1].layout.links if k >= TOPO.n_groups}  # not PCIe
    move = _bottleneck_s(STATE_COPIES * CATALOGUE["resnet-50"].model_bytes, _path(0, 2), shared)
    alone = _bottleneck_s(STATE_COPIES * CATALOGUE["resnet-50"].model_bytes, _path(0, 2), {})
    assert move > alone
    assert sim.stats.migration_delay_s == pytest.approx(250.0 + move, rel=1e-12)


def test_only_workers_that_change_group_move_state() -> None:
    assert moved_pairs([0, 0, 1], [0, 2, 1]) == [(0, 2)]
    assert moved_pairs([3, 1], [1, 3]) == []
    assert moved_pairs([0, 1], [2, 3]) == [(0, 2), (1, 3)]


def test_a_migrated_job_holds_its_new_gpus_and_frees_the_old_at_once() -> None:
    sim = _started([_job(0, workers=2)], [Placement((0, 1), ())], migration_cost=100.0)
    assert sim.migrate(0, Placement((2, 3), ()))
    assert sim.running[0].paused_until == 100.0
    assert sim.group_free.tolist() == [1, 1, 0, 0]  # paused, yet holding groups 2 and 3
    _check_state(sim)


def test_the_cap_and_interval_decline_and_count_proposals() -> None:
    sim = _started([_job(0, iterations=1e7), _job(1, submit=50.0), _job(2, submit=500.0)],
                   [Placement((0,), ())], migration_cost=10.0, max_migrations_per_job=2,
                   min_migration_interval_s=300.0)  # fmt: skip
    assert sim.migrate(0, Placement((1,), ()))
    assert not sim.migrate(0, Placement((2,), ()))  # too soon
    while sim.now < 50.0:  # job 1 arrives; declined, it only moves the clock
        sim.next_decision()
        sim.apply(None)
    assert not sim.migrate(0, Placement((2,), ()))  # 50 s after the first: still too soon
    assert sim.view().running()[0].next_move_at == 300.0
    while sim.now < 500.0:
        sim.next_decision()
        sim.apply(None)
    assert sim.migrate(0, Placement((2,), ()))  # 500 s: allowed, and the cap is reached
    assert sim.view().running()[0].next_move_at == math.inf
    assert not sim.migrate(0, Placement((3,), ()))
    assert (sim.stats.migrations, sim.stats.migrations_declined) == (2, 3)
    assert sim.stats.migration_delay_s == 20.0
    assert sim.running[0].placement == Placement((2,), ())


def test_a_resumed_job_pays_its_measured_restart() -> None:
    cost = MigrationCost()
    assert cost.restart_s("bert") == 120.0 and cost.restart_s("wlm") == 25.0
    assert MigrationCost.parse("measured", 2.0).restart_s("ncf") == 30.0
    perf = PerformanceModel(TOPO)
    assert MigrationCost.parse(60.0).migration_s(perf, np.zeros(TOPO.n_links), "bert",
                                                 [0], [2]) == 60.0  # fmt: skip


# --------------------------------------------------------------------- one hook

CFG = load_config(REPO_ROOT / "configs/default.yaml")
CLUSTER = build_cluster(CFG)
WINDOW = load_workload(CFG, CLUSTER[1], TraceOptions(start=2200, max_jobs=60, load=4.0))
# the teacher with load control is kind "teacher", not a pre-registered +lc row
MIGRATORS = ["mlfs-h", "mlfs-rl", *load_control_names(), "masked:lookahead+lc"]


def _run(policy: str, **simulation) -> dict:
    cfg = dataclasses.replace(CFG, simulation=dataclasses.replace(CFG.simulation, **simulation))
    metrics, _, sim = run_simulate(cfg, policy, WINDOW, *CLUSTER, seed=0)
    assert metrics["migrations"] == sim.stats.migrations
    return metrics


def test_the_load_controlled_rows_are_registered() -> None:
    assert load_control_names() == ["first-fit+lc", "harmony+lc", "masked:interference-aware+lc",
                                    "speed-aware+lc"]  # fmt: skip
    for name in MIGRATORS:
        assert has_migration_rule(make_policy(name)), name
    assert not has_migration_rule(make_policy("first-fit"))


@pytest.mark.parametrize("policy", ["mlfs-h", "mlfs-rl", "first-fit+lc"])
def test_with_migration_off_no_policy_migrates(policy: str) -> None:
    off = _run(policy)  # the default
    assert SimulationConfig().migration == "off"
    assert (off["migrations"], off["migration_delay_s"], off["migrations_declined"]) == (0, 0, 0)
    assert _run(policy, migration="on")["migrations"] > 0  # the window does call for moves


@pytest.mark.parametrize("policy", MIGRATORS)
def test_with_migration_on_every_rule_uses_the_same_mechanism_and_cost(policy, monkeypatch):
    """Every migration goes through Simulator.migrate, priced by the config's one cost."""
    calls: list[float] = []
    real = Simulator.migrate

    def spy(self, job_id, placement):
        before = self.stats.migration_delay_s
        moved = real(self, job_id, placement)
        calls.append(self.stats.migration_delay_s - before if moved else math.nan)
        return moved

    monkeypatch.setattr(Simulator, "migrate", spy)
    flat = _run(policy, migration="on", migration_cost=123.0)
    assert flat["migrations"] == len(calls) > 0
    assert calls == [123.0] * len(calls)
    calls.clear()
    measured = _run(policy, migration="on", migration_cost_scale=2.0)
    assert measured["migrations"] == len(calls) > 0
    # measured: twice a restart of 15-250 s plus a move
    assert all(30.0 < d < 2 * 250.0 + 60.0 for d in calls)
    assert measured["migration_delay_s"] == pytest.approx(sum(calls))


# --------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("simulation.migration_cost=-5", "simulation.migration_cost: must be measured"),
        ("simulation.migration_cost=.nan", "simulation.migration_cost: must be measured"),
        ("simulation.migration_cost=.inf", "simulation.migration_cost: must be measured"),
        ("simulation.migration_cost=cheap", "simulation.migration_cost: must be measured"),
        ("simulation.migration=maybe", "simulation.migration: must be off or on"),
        ("simulation.max_migrations_per_job=-1", "simulation.max_migrations_per_job: must be >= 0"),
        ("simulation.min_migration_interval_s=-1", "simulation.min_migration_interval_s: must"),
        ("simulation.migration_cost_scale=-2", "simulation.migration_cost_scale: must be"),
    ],
)
def test_bad_migration_keys_exit_2_with_one_line(override, fragment, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    argv = ["simulate", "--config", str(REPO_ROOT / "configs/tiny.yaml"), "--out", str(out),
            "--quiet", override]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert not out.exists()


def test_yaml_on_off_and_integer_costs_are_read() -> None:
    on = load_config(REPO_ROOT / "configs/tiny.yaml", ["simulation.migration=on",
                                                       "simulation.migration_cost=90"])  # fmt: skip
    assert on.simulation.migration == "on" and on.simulation.migration_cost == 90.0
    again = load_config(REPO_ROOT / "configs/tiny.yaml", [])
    assert again.simulation.migration == "off" and again.simulation.migration_cost == "measured"
    with pytest.raises(InputError, match="flat_s must be finite"):
        MigrationCost(-1.0)


# --------------------------------------------------------------------- invariants

GROUPS = TOPO.n_groups


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    cost=st.sampled_from(["measured", 0.0, 45.0]),
    cap=st.integers(0, 3),
    interval=st.sampled_from([0.0, 120.0]),
)
def test_migrations_conserve_resources_and_progress(seed, cost, cap, interval) -> None:
    """Random jobs, and after every event batch a random migration proposal: no GPU is
    double-booked, all are free at the end, and a migrated job's remaining work is the
    same just after the move as just before (no progress lost or gained), then stays
    put through its pause."""
    rng = np.random.default_rng(seed)
    models = sorted(CATALOGUE)
    jobs = [_job(i, str(rng.choice(models)), int(rng.choice([1, 1, 2])),
                 float(rng.uniform(200, 5000)), float(i * rng.uniform(0, 300)))
            for i in range(8)]  # fmt: skip
    sim = Simulator(TOPO, jobs, perf=PERF, migration_cost=cost, max_migrations_per_job=cap,
                    min_migration_interval_s=interval)  # fmt: skip
    paused: dict[int, float] = {}  # job id -> remaining while it pays its delay

    def propose(s: Simulator) -> None:
        _check_state(s)
        for jid, rem in list(paused.items()):
            run = s.running.get(jid)
            if run is not None and s.now <= run.paused_until:
                s._progress(run)
                assert run.remaining == rem, "progress during a restart delay"
            else:
                paused.pop(jid)
        if not s.running or rng.random() < 0.3:
            return
        jid = int(rng.choice(sorted(s.running)))
        run = s.running[jid]
        free = s.group_free_for(jid)
        if free.sum() < run.job.num_workers:
            return
        groups = np.repeat(np.arange(GROUPS), free)
        new = tuple(int(g) for g in rng.choice(groups, run.job.num_workers, replace=False))
        s._progress(run)
        before, declined = run.remaining, s.stats.migrations_declined
        moved = s.migrate(jid, Placement(new, ()))
        assert moved != (s.stats.migrations_declined > declined)
        assert s.running[jid].remaining == before
        if moved:
            assert s.running[jid].placement.worker_groups == new
            paused[jid] = before
        _check_state(s)

    sim.after_completions = propose
    while (job := sim.next_decision()) is not None:
        free = np.repeat(np.arange(GROUPS), sim.group_free)
        sim.apply(Placement(tuple(int(g) for g in free[: job.num_workers]), ()))
        propose(sim)
    assert len(sim.records) == len(jobs)
    assert sim.group_free.tolist() == TOPO.group_capacity.tolist()
    assert sim.free_gpus == TOPO.n_gpus
    assert all(v <= cap for v in sim._moves.values())
    if cost == 0.0:
        assert sim.stats.migration_delay_s == 0.0


@settings(max_examples=25, deadline=None)
@given(times=st.lists(st.floats(1.0, 5000.0), min_size=1, max_size=4), cost=st.floats(0, 500))
def test_a_lone_migrated_job_finishes_exactly_its_pauses_later(times, cost) -> None:
    """One job alone (same GPU type everywhere, no communication): its finish is its
    isolated runtime plus the sum of its migrations' delays, whatever their times."""
    n = 2e4
    marks = [_job(i + 1, submit=t) for i, t in enumerate(sorted(times))]  # clock marks
    sim = Simulator(TOPO, [_job(0, iterations=n), *marks], perf=PERF, migration_cost=cost,
                    max_migrations_per_job=len(times))  # fmt: skip
    assert sim.next_decision().job_id == 0
    sim.apply(Placement((0,), ()))
    tau = sim.running[0].iter_time
    moves = 0
    while sim.next_decision() is not None:
        sim.apply(None)  # the marks are declined: they only stop the clock
        run = sim.running.get(0)
        if run is not None and run.paused_until <= sim.now:
            g = 1 + (run.placement.worker_groups[0] % (GROUPS - 1))
            moves += sim.migrate(0, Placement((g,), ()))
    assert moves >= 1
    assert sim.records[0].finish_time == pytest.approx(n * tau + moves * cost, rel=1e-9)
    assert sim.stats.migration_delay_s == pytest.approx(moves * cost)


# --------------------------------------------------------------------- the outputs


def test_metrics_and_results_carry_the_migrations_of_every_run(tmp_path) -> None:
    """``compare`` under ``migration: on``: each policy's metrics.json and the table's
    results.csv hold ``migrations`` and ``migration_delay_s``, zero where nothing moved."""
    out = tmp_path / "cmp"
    argv = ["compare", "--config", str(REPO_ROOT / "configs/default.yaml"), "--trace",
            str(REPO_ROOT / "configs/traces/philly_sample.csv"), "--start", "2200",
            "--max-jobs", "60", "--load", "4", "--policies", "first-fit,first-fit+lc",
            "--out", str(out), "--quiet", "simulation.migration=on"]  # fmt: skip
    assert main(argv) == 0
    rows = {r["policy"]: r for r in csv.DictReader((out / "results.csv").open())}
    for policy, row in rows.items():
        metrics = json.loads((out / policy / "metrics.json").read_text())
        assert float(row["migrations"]) == metrics["migrations"]  # a mean over seeds
        assert float(row["migration_delay_s"]) == pytest.approx(metrics["migration_delay_s"])
    assert float(rows["first-fit"]["migrations"]) == 0
    assert float(rows["first-fit"]["migration_delay_s"]) == 0.0
    assert float(rows["first-fit+lc"]["migrations"]) > 0
    assert float(rows["first-fit+lc"]["migration_delay_s"]) > 0
