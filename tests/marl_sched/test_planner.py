"""The planner (model-predictive control) and its oracle: what they may read, defer, options."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from marl_sched.cli import main
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.duration import DurationPredictor
from marl_sched.errors import InputError
from marl_sched.perf import PerformanceModel
from marl_sched.policies import build_policy, make_policy
from marl_sched.policies.base import heuristic_names, policy_entries
from marl_sched.policies.planner import PlannerPolicy
from marl_sched.runner import build_cluster, load_workload, simulate
from marl_sched.simulator import Simulator
from marl_sched.workload_model import WorkloadModel
from tests.helpers import random_jobs, tiny_topology

TOPO = tiny_topology(subclusters=1, racks=2, servers=2)
PERF = PerformanceModel(TOPO)


class FixedEstimates:
    """A duration predictor whose estimates are a table by job id, whatever the true
    lengths: what lets a test change a job's true length and nothing the policy sees."""

    kind = "fixed"

    def __init__(self, table: dict[int, float]) -> None:
        self.table = table

    def est_iterations(self, job) -> float:
        return self.table[job.job_id]

    def visible_job(self, job):
        return replace(job, iterations=self.table[job.job_id], duration=math.nan)


def drive(policy, jobs, seed: int = 0, pred=None) -> Simulator:
    """Run ``policy`` over ``jobs`` as ``marl-sched simulate`` does (noisy estimates,
    the simulator handed to ``place``)."""
    pred = pred or DurationPredictor("noisy", seed=0)
    sim = Simulator(TOPO, jobs, perf=PERF, estimate=pred.est_iterations)
    policy.reset(TOPO, seed)
    while (job := sim.next_decision()) is not None:
        sim.apply(policy.place(pred.visible_job(job), sim.view(), sim=sim))
    return sim


def jobs(n: int = 12, seed: int = 3):
    return random_jobs(PERF, n, seed, max_workers=8, mean_gap=150.0)


def _tiny(*overrides: str):
    """configs/tiny.yaml's first 14 jobs and its cluster."""
    cfg = load_config(REPO_ROOT / "configs" / "tiny.yaml", ["workload.max_jobs=14", *overrides])
    topo, perf = build_cluster(cfg)
    return cfg, topo, perf, load_workload(cfg, perf)


def _scores(metrics: dict) -> dict:
    """The metrics without the policy's name and wall-clock timings and rates."""
    return {k: v for k, v in metrics.items()
            if k != "policy" and not k.startswith(("wall", "decision_ms"))
            and not k.endswith("_per_s")}  # fmt: skip


def test_planner_with_one_true_future_makes_the_oracles_decisions():
    """K = 1 on the true future is the oracle: the same decisions and the same metrics.
    The oracle is built from the config's planner section (its k ignored), as the
    command line builds it, and both are handed the simulator by the runner."""
    cfg, topo, perf, wl = _tiny("planner.horizon_s=600", "planner.k=3")
    a = PlannerPolicy(k=1, horizon_s=600.0, future="true")
    b = build_policy("oracle", config=cfg)
    assert (b.k, b.horizon_s, b.future) == (1, 600.0, "true")
    ma, _, _ = simulate(cfg, "x", wl, topo, perf, policy=a)
    mb, _, _ = simulate(cfg, "x", wl, topo, perf, policy=b)
    assert len(a.decisions) >= len(wl.jobs) and a.decisions == b.decisions
    assert _scores(ma) == _scores(mb)


class ReadsTrueLengths(PlannerPolicy):
    """A planner whose playouts draw every unfinished job's length from its true one:
    the leak the next test must see."""

    def _splice(self, sim, job, rng):
        estimate = sim._estimate
        sim._estimate = lambda j: sim.jobs[j.job_id].iterations
        try:
            return super()._splice(sim, job, rng)
        finally:
            sim._estimate = estimate


def _decisions_up_to_t(cls, lengths: bool = True, arrivals: bool = True) -> tuple[list, list]:
    """``cls``'s decisions up to ``t`` (job 6's submit time) on a trace and on the same
    trace with every job submitted after ``t`` replaced by another (model, size,
    length, time; ``arrivals``) and the true length of every job still queued or
    running at ``t`` made 20 times longer, its estimate kept (``lengths``)."""
    base = jobs(14)
    t = base[6].submit_time
    assert base[7].submit_time > t
    factor = DurationPredictor("noisy", seed=0)._factor
    table = {j.job_id: j.iterations * factor(j) for j in base}
    first = cls(k=2, horizon_s=600.0)
    sim = drive(first, base, pred=FixedEstimates(table))
    unfinished = {j.job_id for j in base[:7] if sim.records[j.job_id].finish_time > t}
    assert unfinished  # some true lengths are changed
    other = [replace(j, iterations=j.iterations * 20.0)
             if lengths and j.job_id in unfinished else j for j in base[:7]]  # fmt: skip
    other += [
        replace(j, model="bert" if j.model != "bert" else "ncf", num_workers=1,
                num_ps=0, iterations=j.iterations * 7.0, submit_time=j.submit_time + 90.0,
                name=f"other{j.job_id}")
        if arrivals else j
        for j in base[7:]
    ]  # fmt: skip
    second = cls(k=2, horizon_s=600.0)
    drive(second, other, pred=FixedEstimates(table))
    return [d for d in first.decisions if d[0] <= t], [d for d in second.decisions if d[0] <= t]


def test_planner_never_reads_the_true_future():
    """Neither the arrivals after ``t`` nor the true lengths of the jobs not finished
    by ``t`` change a decision up to ``t`` (the planner reads estimates only); a
    planner that reads the true lengths is caught by the same construction."""
    before, again = _decisions_up_to_t(PlannerPolicy)
    assert len(before) >= 7 and before == again
    leaky, changed = _decisions_up_to_t(ReadsTrueLengths)
    assert leaky != changed


@pytest.mark.parametrize(
    ("name", "reads_lengths", "reads_arrivals"),
    [("oracle-lengths", True, False), ("oracle-arrivals", False, True)],
)
def test_each_half_oracle_reads_its_half_of_the_future_only(name, reads_lengths, reads_arrivals):
    """A change of what a half-oracle may read changes a decision up to ``t``; a change
    of the other half does not."""
    cls = type(make_policy(name))
    for lengths, arrivals, reads in ((True, False, reads_lengths), (False, True, reads_arrivals)):
        before, again = _decisions_up_to_t(cls, lengths=lengths, arrivals=arrivals)
        assert len(before) >= 7
        assert (before != again) == reads, (name, lengths, arrivals)


def test_without_the_simulator_place_refuses():
    """No back door: a planner handed only the view says what it needs."""
    pol = PlannerPolicy(k=1, horizon_s=300.0)
    pol.reset(TOPO, 0)
    sim = Simulator(TOPO, jobs(3), perf=PERF)
    job = sim.next_decision()
    with pytest.raises(ValueError, match=r"^planner: needs the simulator"):
        pol.place(job, sim.view())
    assert PlannerPolicy.needs_simulator and not make_policy("first-fit").needs_simulator


def test_the_config_section_reaches_the_planner():
    tiny = REPO_ROOT / "configs" / "tiny.yaml"
    options = ["planner.k=8", "planner.horizon_s=900", "planner.base=tetris", "planner.defer=false"]
    pol = build_policy("planner", config=load_config(tiny, options))
    assert (pol.k, pol.horizon_s, pol.base.name, pol.defer) == (8, 900.0, "tetris", False)
    default = build_policy("planner", config=load_config(tiny))
    assert (default.k, default.horizon_s, default.base.name, default.defer) == (
        4, 3600.0, "lookahead", True,
    )  # fmt: skip


def test_short_jobs_take_the_bases_choice_without_playouts():
    """``min_run_s`` above every job: no playout runs and the run is the base's own,
    decision for decision; the base's choice leads the candidates, so a base that is also
    the only proposer leaves nothing to play out either."""
    cfg, topo, perf, wl = _tiny("planner.horizon_s=600")
    ref, _, _ = simulate(cfg, "x", wl, topo, perf, policy=make_policy("tetris"))
    pol = PlannerPolicy(k=1, horizon_s=600.0, base="tetris", future="true", min_run_s=1e12)
    got, _, _ = simulate(cfg, "x", wl, topo, perf, policy=pol)
    assert pol.planned == 0 and _scores(got) == _scores(ref)
    alone = PlannerPolicy(k=1, horizon_s=600.0, base="tetris", candidates=("tetris",),
                          future="true", defer=False)  # fmt: skip
    got, _, _ = simulate(cfg, "x", wl, topo, perf, policy=alone)
    assert alone.planned == 0 and _scores(got) == _scores(ref)
    planned = PlannerPolicy(k=1, horizon_s=600.0, base="tetris", future="true")
    simulate(cfg, "x", wl, topo, perf, policy=planned)
    assert planned.planned > 0


def test_a_margin_no_candidate_clears_keeps_the_bases_run():
    """``margin`` near 1: no candidate scores that much below the base's choice in every
    future, so the run is the base's although every decision was played out; with no
    margin the same planner departs from it."""
    cfg, topo, perf, wl = _tiny("planner.horizon_s=600")
    ref, _, _ = simulate(cfg, "x", wl, topo, perf, policy=make_policy("tetris"))
    kept = PlannerPolicy(k=2, horizon_s=600.0, base="tetris", margin=0.99)
    got, _, _ = simulate(cfg, "x", wl, topo, perf, policy=kept)
    assert kept.planned > 0 and _scores(got) == _scores(ref)
    free = PlannerPolicy(k=2, horizon_s=600.0, base="tetris")
    got, _, _ = simulate(cfg, "x", wl, topo, perf, policy=free)
    assert _scores(got) != _scores(ref)


class PlaysOut(PlannerPolicy):
    """Records each decision's candidates and their playout scores."""

    def _best(self, job, sim, options):
        until = sim.now + max(self.horizon_s, self._run_s(job, sim))
        start = self._splice(sim, job, None)
        scores = [self.playout(start, job.job_id, p, until) for p in options]
        own = make_policy("first-fit").place(job, sim.view())
        self.seen.append((options, scores, own))
        return options[scores.index(min(scores))]


def test_the_winner_never_plays_out_worse_than_the_bases_choice():
    cfg, topo, perf, wl = _tiny("planner.horizon_s=600")
    pol = PlaysOut(k=1, horizon_s=600.0, base="first-fit", future="true")
    pol.seen = []
    simulate(cfg, "x", wl, topo, perf, policy=pol)
    assert pol.seen
    for options, scores, own in pol.seen:
        assert options[0] == own  # the base's choice leads
        assert min(scores) <= scores[0]
    assert any(min(s) < s[0] for _, s, _ in pol.seen)  # the base is not always best


class AlwaysDefer(PlannerPolicy):
    """Defer wins whenever it is a candidate (no playouts)."""

    def _best(self, job, sim, options):
        return None if None in options else options[0]


def test_a_deferred_job_is_placed_eventually():
    pol = AlwaysDefer(k=1, horizon_s=300.0)
    work = jobs(10)
    sim = drive(pol, work)
    assert any(p is None for _, _, p in pol.decisions)
    assert len(sim.records) == len(work) and not sim.unplaceable


@pytest.mark.parametrize(
    ("options", "key"),
    [({"k": 0}, "k"), ({"k": 1.5}, "k"), ({"horizon_s": 0}, "horizon_s"),
     ({"horizon_s": -5.0}, "horizon_s"), ({"horizon_s": float("nan")}, "horizon_s"),
     ({"min_run_s": -1.0}, "min_run_s"), ({"margin": 1.0}, "margin"),
     ({"margin": -0.1}, "margin")],
)  # fmt: skip
def test_bad_options_name_the_key(options, key):
    with pytest.raises(InputError, match=rf"^{key}: must be") as err:
        make_policy("planner", **options)
    assert "\n" not in str(err.value)


def test_registered_in_no_enumeration():
    entries = policy_entries()
    assert entries["planner"].kind == entries["oracle"].kind == "planner"
    assert "never a policy claim" in entries["oracle"].description
    assert not {"planner", "oracle"} & set(heuristic_names())


def test_workload_model_draws():
    import numpy as np

    model = WorkloadModel.load()
    rng = np.random.default_rng(0)
    assert model.rate_per_h > 0 and len(model.jobs) > 100
    assert model.true_total(100.0, 250.0, rng) > 250.0
    future = model.sample_future(jobs(5), 10.0, model.rate(3, 600.0), rng)
    times = [j.submit_time for j in future]
    assert times == sorted(times) and times[0] > 10.0
    assert [j.job_id for j in future] == list(range(5))


def test_without_defer_every_decision_places():
    pol = PlannerPolicy(k=1, horizon_s=300.0, defer=False)
    drive(pol, jobs(8))
    assert pol.decisions and all(p is not None for _, _, p in pol.decisions)
    with pytest.raises(InputError, match=r"^future: must be"):
        PlannerPolicy(future="past")


# ------------------------------------------------- the command line's planner.* keys


@pytest.fixture
def built(monkeypatch) -> list[tuple]:
    """(name, k, horizon_s, base, defer) of every planner or oracle built."""
    seen: list[tuple] = []
    init = PlannerPolicy.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        seen.append((type(self).name, self.k, self.horizon_s, self.base.name, self.defer))

    monkeypatch.setattr(PlannerPolicy, "__init__", spy)
    return seen


TINY = str(REPO_ROOT / "configs" / "tiny.yaml")


def test_simulate_takes_planner_overrides(tmp_path, built, capsys):
    out = tmp_path / "out"
    argv = ["simulate", "--config", TINY, "--policy", "planner", "--out", str(out), "--quiet",
            "--max-jobs", "14", "planner.k=1", "planner.horizon_s=150",
            "planner.defer=false"]  # fmt: skip
    assert main(argv) == 0
    assert built == [("planner", 1, 150.0, "lookahead", False)]
    recorded = load_config(out / "config.yaml")
    assert recorded.planner == {"k": 1, "horizon_s": 150, "defer": False}


def test_compare_takes_planner_overrides(tmp_path, built, capsys):
    out = tmp_path / "out"
    argv = ["compare", "--config", TINY, "--policies", "oracle", "--out", str(out),
            "--max-jobs", "14", "planner.horizon_s=150", "planner.base=tetris"]  # fmt: skip
    assert main(argv) == 0
    assert built and set(built) == {("oracle", 1, 150.0, "tetris", True)}
    assert load_config(out / "oracle" / "config.yaml").planner["base"] == "tetris"


def test_benchmark_takes_planner_overrides(tmp_path, built, capsys):
    trace, base = REPO_ROOT / "tests/data/golden_trace.csv", REPO_ROOT / "tests/data/golden.yaml"
    (tmp_path / "s.yaml").write_text(
        f"version: 1\nbase_config: {base}\ntiers: {{medium: 0.6}}\n"
        f"topologies: {{small: {base}}}\nregions: [{{trace: {trace}, split: train}}]\n"
        f"scenarios:\n  train:\n    - {{name: early, trace: {trace}, start: 5, max_jobs: 5, "
        f"load: 1.0, tier: medium, topology: small}}\n"
    )
    out = tmp_path / "out"
    argv = ["benchmark", "--suite", str(tmp_path / "s.yaml"), "--split", "train",
            "--policies", "planner", "--seeds", "1", "--out", str(out), "--local", "--quiet",
            "planner.k=2", "planner.horizon_s=300"]  # fmt: skip
    assert main(argv) == 0
    assert built and set(built) == {("planner", 2, 300.0, "lookahead", True)}
    assert len(list((out / "cells").glob("early__planner*.json"))) == 1


def test_the_latency_command_reports_per_decision_and_per_playout(capsys):
    from marl_sched.workload_model import main as workload_main

    tiny = str(REPO_ROOT / "configs" / "tiny.yaml")
    sets = ["--set", "planner.base=first-fit", "--set", "planner.horizon_s=120"]
    assert workload_main(["latency", tiny, "--k", "1", "--decisions", "6", *sets]) == 0
    out = capsys.readouterr().out
    assert "ms per decision (" in out and "per decision played out" in out
    bad = ["latency", tiny, "--decisions", "6", "--set", "planner.min_run_s=-1"]
    assert workload_main(bad) == 2
    err = capsys.readouterr().err.strip()
    assert err == "command line: planner.min_run_s: must be a finite number >= 0, got -1"
