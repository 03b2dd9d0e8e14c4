"""From a config and trace options to a finished simulation: the glue the CLI,
the benchmarks and the environment share."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from marl_sched.catalogue import CATALOGUE
from marl_sched.config import ExperimentConfig, WorkloadConfig
from marl_sched.duration import DurationPredictor, workload_predictor
from marl_sched.errors import InputError
from marl_sched.jobs import Job, build_jobs
from marl_sched.metrics import compute_metrics
from marl_sched.perf import PerformanceModel
from marl_sched.simulator import JobRecord, Simulator, run_policy
from marl_sched.topology import Topology


@dataclass(frozen=True)
class TraceOptions:
    """The trace options every run command shares (``None`` = take the config's)."""

    trace: str | None = None
    trace_format: str | None = None
    start: int | None = None
    max_jobs: int | None = None
    load: float | None = None
    seed: int | None = None

    def apply(self, workload: WorkloadConfig) -> WorkloadConfig:
        changes = {
            k: v
            for k, v in (
                ("trace", self.trace),
                ("trace_format", self.trace_format),
                ("start", self.start),
                ("max_jobs", self.max_jobs),
                ("load", self.load),
                ("seed", self.seed),
            )
            if v is not None
        }
        new = dataclasses.replace(workload, **changes)
        new.validate("command line", "--trace options")
        return new


@dataclass
class Workload:
    """The jobs of one trace window, ready for a simulator.

    Attributes:
        jobs: warm-up jobs first, then the scored window, in submit order.
        trace_path: the trace file.
        info: fill-rule counters, dropped rows, format.
        warmup: how many of ``jobs`` (the first ones) are warm-up: simulated, not
            scored (``compute_metrics(..., warmup=...)``).
        config: the workload section after the command line's overrides.
    """

    jobs: list[Job]
    trace_path: str
    info: dict[str, Any]
    warmup: int = 0
    config: WorkloadConfig = dataclasses.field(default_factory=WorkloadConfig)

    def predictor(self) -> DurationPredictor:
        """A fresh duration predictor for one run over these jobs."""
        return workload_predictor(self.config)


def build_cluster(cfg: ExperimentConfig) -> tuple[Topology, PerformanceModel]:
    topo = Topology.from_config(cfg.topology)
    return topo, PerformanceModel(topo)


def load_workload(
    cfg: ExperimentConfig, perf: PerformanceModel, options: TraceOptions | None = None
) -> Workload:
    """Read the trace window of ``cfg.workload`` (overridden by ``options``) as jobs."""
    from marl_sched.traces import load_trace

    wl = (options or TraceOptions()).apply(cfg.workload)
    path = str(cfg.resolve_path(wl.trace)) if options is None or options.trace is None else wl.trace
    fmt = None if wl.trace_format == "auto" else wl.trace_format
    warmup = min(wl.warmup_jobs, wl.start)
    trace = load_trace(
        path,
        fmt,
        start=wl.start - warmup,
        max_jobs=None if wl.max_jobs is None else wl.max_jobs + warmup,
        load=wl.load,
        known_models=set(CATALOGUE),
        seed=wl.seed,
    )
    cap = wl.max_job_gpus or perf.topology.n_gpus
    jobs, info = build_jobs(
        trace.jobs, perf.isolated_iteration_time, seed=wl.seed, max_job_gpus=cap, path=path
    )
    info = {**info, "dropped_rows": dict(trace.dropped), "format": trace.format}
    if len(jobs) <= warmup:  # every job loaded lies before the window
        raise InputError(
            f"{path}: window is empty: --start {wl.start} skips all {len(jobs)} jobs of the trace"
        )
    return Workload(jobs=jobs, trace_path=path, info=info, warmup=warmup, config=wl)


def simulate(
    cfg: ExperimentConfig,
    policy_name: str,
    workload: Workload,
    topo: Topology,
    perf: PerformanceModel,
    *,
    seed: int | None = None,
    progress: Callable[[int], None] | None = None,
    policy=None,
) -> tuple[dict[str, Any], list[JobRecord], Simulator]:
    """Run one policy over a workload; returns (metrics, per-job records, simulator).

    The policy sees each job through the workload's duration predictor
    (:meth:`DurationPredictor.visible_job`), never its true length unless the
    workload says ``duration_estimate: oracle``. Records cover every job, warm-up
    included; the metrics score the window only.
    """
    from marl_sched.policies import make_policy

    check_ordering(cfg.simulation.ordering, workload.config)
    pol = policy if policy is not None else make_policy(policy_name)
    pol.reset(topo, cfg.simulation.seed if seed is None else seed)
    sim = Simulator(
        topo,
        workload.jobs,
        perf=perf,
        ordering=cfg.simulation.ordering,
        backfill=cfg.simulation.backfill,
    )
    predictor = workload.predictor()

    def place(job: Job, view):
        predictor.sync(sim.records)
        return pol.place(predictor.visible_job(job), view)

    t0 = time.perf_counter()
    records = run_policy(sim, place, progress)
    wall = time.perf_counter() - t0
    metrics = compute_metrics(
        sim, policy=policy_name, trace=workload.trace_path, wall_s=wall, warmup=workload.warmup
    )
    metrics["clipped_jobs"] = workload.info.get("clipped_jobs", 0)
    metrics["duration_estimate"] = predictor.kind
    return metrics, records, sim


#: simulator queue orderings that read a job's true length
LENGTH_ORDERINGS = ("shortest-first", "mlfs-priority")


def check_ordering(ordering: str, workload: WorkloadConfig) -> None:
    """InputError when the queue ordering would read true lengths without ``oracle``
    (the simulator orders its queue by the true job, not the policy's view)."""
    if ordering in LENGTH_ORDERINGS and workload.duration_estimate != "oracle":
        raise InputError(
            f"simulation.ordering: {ordering!r} orders by true job lengths; it needs "
            f"workload.duration_estimate: oracle, got {workload.duration_estimate!r}"
        )
