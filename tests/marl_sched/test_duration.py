"""marl_sched.duration and the runner's use of it: what policies may know of a job's
length, and that they cannot read the true one unless the workload says ``oracle``."""

from __future__ import annotations

import dataclasses
import math

import pytest

from marl_sched.catalogue import CATALOGUE
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.duration import DURATION_ESTIMATES, DurationPredictor
from marl_sched.jobs import Job
from marl_sched.policies import make_policy
from marl_sched.runner import build_cluster, load_workload, simulate

GOLDEN = REPO_ROOT / "tests" / "data" / "golden.yaml"


def job(name: str = "a", iterations: float = 1000.0, model: str = "resnet-50", vc="x") -> Job:
    return Job(0, name, model, 2, 1, iterations, 0.0, 123.0, vc)


def test_oracle_none_noisy() -> None:
    j = job()
    assert DurationPredictor("oracle").visible_job(j) is j
    seen = DurationPredictor("none").visible_job(j)
    assert math.isnan(seen.iterations) and math.isnan(seen.duration) and math.isnan(seen.work_s)
    a, b = DurationPredictor("noisy", seed=1), DurationPredictor("noisy", seed=1)
    # the estimate depends on the seed and the job only
    assert a.est_iterations(j) == b.est_iterations(dataclasses.replace(j, job_id=7))
    assert a.est_iterations(j) != DurationPredictor("noisy", seed=2).est_iterations(j)
    assert DurationPredictor("noisy", sigma=0.0).est_iterations(j) == 1000.0
    with pytest.raises(ValueError):
        DurationPredictor("exact")


def test_noisy_error_has_the_documented_spread() -> None:
    p = DurationPredictor("noisy", sigma=1.0, seed=0)
    logs = [math.log(p.est_iterations(job(f"j{i}")) / 1000.0) for i in range(4000)]
    mean = sum(logs) / len(logs)
    std = math.sqrt(sum((x - mean) ** 2 for x in logs) / len(logs))
    assert abs(mean) < 0.05 and abs(std - 1.0) < 0.05


def test_history_is_a_running_median_by_vc_then_model_then_all() -> None:
    p = DurationPredictor("history")
    assert math.isnan(p.est_iterations(job()))
    done = [job("d1", 100.0), job("d2", 300.0), job("d3", 900.0, vc="y")]
    p.sync(done[:2])
    assert p.est_iterations(job()) == pytest.approx(200.0)  # vc x, resnet-50: median of 100, 300
    p.sync(done)  # only d3 is new
    assert p.est_iterations(job()) == pytest.approx(200.0)
    assert p.est_iterations(job(vc="z")) == pytest.approx(300.0)  # the model's median
    # another model: the median work of all completed jobs, in its own iterations
    other = job(model="vgg-16", vc="z")
    resnet, vgg = (CATALOGUE[m].compute_s for m in ("resnet-50", "vgg-16"))
    assert p.est_iterations(other) == pytest.approx(300.0 * resnet / vgg)


class _Spy:
    """Wraps a heuristic and records the iterations of every job it is shown."""

    def __init__(self) -> None:
        self.inner = make_policy("first-fit")
        self.seen: list[tuple[str, float, float]] = []

    def reset(self, topology, seed=0) -> None:
        self.inner.reset(topology, seed)

    def place(self, job, view):
        self.seen.append((job.name, job.iterations, job.duration))
        return self.inner.place(job, view)


@pytest.mark.parametrize("kind", DURATION_ESTIMATES)
def test_a_policy_reads_true_lengths_only_under_oracle(kind: str) -> None:
    cfg = load_config(GOLDEN)
    cfg = dataclasses.replace(
        cfg, workload=dataclasses.replace(cfg.workload, duration_estimate=kind)
    )
    topo, perf = build_cluster(cfg)
    workload = load_workload(cfg, perf)
    spy = _Spy()
    metrics, _, _ = simulate(cfg, "first-fit", workload, topo, perf, policy=spy)
    assert metrics["duration_estimate"] == kind
    truth = {j.name: (j.iterations, j.duration) for j in workload.jobs}
    assert len(spy.seen) == len(workload.jobs)
    for name, iterations, duration in spy.seen:
        if kind == "oracle":
            assert (iterations, duration) == truth[name]
        else:
            assert math.isnan(duration)
            assert iterations != truth[name][0] or kind == "history"
    if kind == "history":  # nothing has completed when the first job is placed
        assert math.isnan(spy.seen[0][1])
        assert sum(it == truth[n][0] for n, it, _ in spy.seen) <= 2
    if kind == "none":
        assert all(math.isnan(it) for _, it, _ in spy.seen)


@pytest.mark.parametrize("ordering", ["shortest-first", "mlfs-priority"])
def test_length_orderings_read_the_estimate_not_the_truth(ordering: str) -> None:
    """Without an estimate (``none``) shortest-first has nothing to sort by and falls
    back to FIFO exactly (mlfs-priority still sorts by size); with the oracle a length
    ordering sorts by the truth and changes the schedule; with ``noisy`` it runs (no
    oracle needed) on the estimate, which gives another schedule."""
    cfg = load_config(GOLDEN)
    topo, perf = build_cluster(cfg)

    def run(ordering: str, estimate: str) -> list[tuple[float, float]]:
        c = dataclasses.replace(
            cfg,
            simulation=dataclasses.replace(cfg.simulation, ordering=ordering),
            workload=dataclasses.replace(cfg.workload, duration_estimate=estimate),
        )
        _, records, _ = simulate(c, "first-fit", load_workload(c, perf), topo, perf)
        return [(r.start_time, r.finish_time) for r in records]

    if ordering == "shortest-first":
        assert run(ordering, "none") == run("fifo", "none")
    assert run(ordering, "oracle") != run("fifo", "oracle")
    assert run(ordering, "noisy") != run(ordering, "oracle")


def test_a_length_blind_fifo_schedule_is_the_same_under_noisy_and_oracle() -> None:
    """First-fit with FIFO ordering never reads a length, so the estimate shown to
    policies cannot change its schedule: every record (start, finish, placement, ...)
    and every metric but the estimate's name and the wall-clock timings are equal
    under ``noisy`` and ``oracle``. Catches the simulator charging a job's progress
    or finish from its estimate instead of its true length, and the noisy
    predictor's draws sharing a random stream with the simulation (either makes the
    two runs differ)."""
    cfg = load_config(GOLDEN)
    topo, perf = build_cluster(cfg)

    def run(estimate: str):
        c = dataclasses.replace(
            cfg,
            simulation=dataclasses.replace(cfg.simulation, ordering="fifo"),
            workload=dataclasses.replace(cfg.workload, duration_estimate=estimate),
        )
        metrics, records, _ = simulate(c, "first-fit", load_workload(c, perf), topo, perf)
        timing = ("wall_s", "events_per_s", "jobs_per_s", "decision_ms_p50", "decision_ms_p99")
        metrics = {k: v for k, v in metrics.items() if k not in ("duration_estimate", *timing)}
        return metrics, [dataclasses.asdict(r) for r in records]

    noisy, oracle = run("noisy"), run("oracle")
    assert len(oracle[1]) > 10
    assert noisy[1] == oracle[1]
    assert noisy[0] == oracle[0]
