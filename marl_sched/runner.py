"""From a config and trace options to a finished simulation: the glue the CLI,
the benchmarks and the environment share."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from marl_sched.catalogue import CATALOGUE
from marl_sched.config import ExperimentConfig, WorkloadConfig
from marl_sched.duration import DurationPredictor, workload_predictor
from marl_sched.errors import InputError
from marl_sched.jobs import Job, build_jobs
from marl_sched.metrics import compute_metrics
from marl_sched.migration import check_cost_bound
from marl_sched.ordering import OWN, QueueOrdering, make_ordering
from marl_sched.perf import PerformanceModel
from marl_sched.policies.base import Policy
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
    drop_unplaceable: bool = False
    #: ``--trace F`` of simulate, evaluate and compare: without ``start`` / ``max_jobs``
    #: the window is F's own jobs, all of them (not the config's window of its trace)
    own_window: bool = False

    def apply(self, workload: WorkloadConfig) -> WorkloadConfig:
        own = {"start": 0, "max_jobs": None} if self.own_window and self.trace else {}
        changes = own | {
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
        try:
            new.validate("command line", "workload")
        except InputError as exc:  # name the flag that set the key, not the key
            message = str(exc)
            for name in changes:
                prefix = f"command line: workload.{name}: "
                if message.startswith(prefix):
                    flag = "--" + name.replace("_", "-")
                    raise InputError(f"{flag}: {message[len(prefix) :]}") from None
            raise
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

    def resolved(self, cfg: ExperimentConfig, policy: str | None = None) -> ExperimentConfig:
        """``cfg`` with the workload this run read (after the command line's trace
        options, the trace as an absolute path) and, given, the ``policy`` that ran
        (``simulation.policy``): what the run folder's ``config.yaml`` records, so that
        it reads the same file from anywhere and names what it ran."""
        trace = str(Path(self.trace_path).resolve())
        cfg = dataclasses.replace(cfg, workload=dataclasses.replace(self.config, trace=trace))
        if policy is not None:
            cfg = dataclasses.replace(
                cfg, simulation=dataclasses.replace(cfg.simulation, policy=policy)
            )
        return cfg

    def predictor(self) -> DurationPredictor:
        """A fresh duration predictor for one run over these jobs."""
        return workload_predictor(self.config)


def build_cluster(cfg: ExperimentConfig) -> tuple[Topology, PerformanceModel]:
    try:
        topo = Topology.from_config(cfg.topology)
    except InputError as exc:  # a server type's name: say which config
        raise InputError(f"{cfg.source}: {exc}") from None
    topo = topo.with_network_efficiency(cfg.simulation.nic_efficiency_scale)
    return topo, PerformanceModel(topo)


def load_workload(
    cfg: ExperimentConfig, perf: PerformanceModel, options: TraceOptions | None = None
) -> Workload:
    """Read the trace window of ``cfg.workload`` (overridden by ``options``) as jobs."""
    from marl_sched.traces import jitter_arrivals, load_trace

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
    jobs, info = build_jobs(
        jitter_arrivals(trace.jobs, wl.arrival_jitter, wl.seed),
        perf.isolated_iteration_time,
        seed=wl.seed,
        max_job_gpus=wl.max_job_gpus,
        path=path,
    )
    drop = options is not None and options.drop_unplaceable
    jobs, dropped = check_placeable(jobs, perf, path, drop=drop)
    warmup -= sum(1 for j in dropped if j.job_id < warmup)
    info = {
        **info,
        "dropped_rows": dict(trace.dropped),
        "format": trace.format,
        "unplaceable_dropped": len(dropped),
    }
    if len(jobs) <= warmup:  # every job loaded lies before the window
        raise InputError(
            f"{path}: window is empty: --start {wl.start} skips all {len(jobs)} jobs of the trace"
        )
    longest = max(
        j.iterations * perf.isolated_iteration_time(j.model, j.num_workers, j.num_ps) for j in jobs
    )
    sim = cfg.simulation
    check_cost_bound(sim.migration_cost, sim.migration_cost_scale, longest, str(cfg.source))
    return Workload(jobs=jobs, trace_path=path, info=info, warmup=warmup, config=wl)


class _Capacity:
    """What an empty cluster offers one model's tasks, summed over servers: worker
    slots (GPUs whose memory holds a worker, within each server's CPU and memory),
    PS slots, task slots by memory, and CPU cores."""

    def __init__(self, model: str, perf: PerformanceModel) -> None:
        t, spec = perf.topology, CATALOGUE[model]
        eps = 1e-9  # the simulator's own tolerance (Simulator._check)
        fit_gpus = np.bincount(
            t.group_server,
            weights=t.group_capacity * perf.group_fits(model),
            minlength=t.n_servers,
        )

        def slots(have: np.ndarray, per_task: float) -> np.ndarray:
            return np.floor((have + eps) / per_task) if per_task > 0 else np.full_like(have, np.inf)

        mem_slots = slots(t.server_memory_gb, spec.mem_gb)
        cpu_slots = slots(t.server_cpu, spec.cpu_worker)
        self.fit_gpus = float(fit_gpus.sum())
        self.workers = np.minimum(np.minimum(fit_gpus, mem_slots), cpu_slots)
        self.ps = np.minimum(mem_slots, slots(t.server_cpu, spec.cpu_ps))
        self.spec, self.tasks, self.cpu = spec, float(mem_slots.sum()), float(t.server_cpu.sum())
        self.total_workers, self.total_ps = float(self.workers.sum()), float(self.ps.sum())

    def problem(self, job: Job) -> str | None:
        """Why ``job`` cannot run on the empty cluster, or None when these sums allow it."""
        s = self.spec
        if job.num_workers > self.fit_gpus:
            return (
                f"needs {job.num_workers} GPUs whose memory holds a {job.model} worker; "
                f"the cluster has {self.fit_gpus:.0f}"
            )
        if job.num_workers > self.total_workers:
            return (
                f"needs {job.num_workers} workers of {s.cpu_worker:g} CPU cores and "
                f"{s.mem_gb:g} GB each beside a GPU; the servers have room for "
                f"{self.total_workers:.0f}"
            )
        if job.num_ps > self.total_ps:
            return (
                f"needs {job.num_ps} parameter servers; the cluster has room for "
                f"{self.total_ps:.0f}"
            )
        if job.num_tasks > self.tasks:
            return (
                f"needs memory for {job.num_tasks} tasks of {s.mem_gb:g} GB; the servers "
                f"hold {self.tasks:.0f}"
            )
        cores = job.num_workers * s.cpu_worker + job.num_ps * s.cpu_ps
        if cores > self.cpu + 1e-9:
            return f"needs {cores:g} CPU cores; the cluster has {self.cpu:g}"
        return None


def check_placeable(
    jobs: list[Job], perf: PerformanceModel, path: str, *, drop: bool = False
) -> tuple[list[Job], list[Job]]:
    """(kept, dropped): every job must fit the empty cluster by capacity summed over
    servers (a necessary condition), else ``InputError`` naming the trace file, row and
    job; with ``drop`` it is left out instead (the kept jobs renumbered 0..n-1)."""
    caps: dict[str, _Capacity] = {}
    kept: list[Job] = []
    dropped: list[Job] = []
    for job in jobs:
        cap = caps.get(job.model)
        if cap is None:
            cap = caps[job.model] = _Capacity(job.model, perf)
        problem = cap.problem(job)
        if problem is None:
            kept.append(job if job.job_id == len(kept) else replace(job, job_id=len(kept)))
        elif drop:
            dropped.append(job)
        else:
            raise InputError(
                f"{path}:{job.line}: job {job.name}: cannot be placed on this cluster: "
                f"{problem} (--drop-unplaceable leaves such jobs out; workload.max_job_gpus=N "
                "clips larger ones)"
            )
    return kept, dropped


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

    The policy sees each job through the duration predictor
    (:meth:`DurationPredictor.visible_job`); without ``policy`` it is built from the
    config; one that :attr:`~Policy.needs_simulator` is handed it (``sim=``). Records
    cover every job, warm-up included; the metrics score the window only.
    """
    from marl_sched.policies import build_policy

    pol = policy if policy is not None else build_policy(policy_name, config=cfg)
    pol.reset(topo, cfg.simulation.seed if seed is None else seed)
    predictor = workload.predictor()
    sim = make_simulator(cfg, topo, perf, workload.jobs, predictor, pol)
    hand = {"sim": sim} if getattr(pol, "needs_simulator", False) else {}

    def place(job: Job, view):
        predictor.sync(sim.records)
        return pol.place(predictor.visible_job(job), view, **hand)

    t0 = time.perf_counter()
    records = run_policy(sim, place, progress)
    wall = time.perf_counter() - t0
    metrics = compute_metrics(
        sim, policy=policy_name, trace=workload.trace_path, wall_s=wall, warmup=workload.warmup
    )
    metrics["clipped_jobs"] = workload.info.get("clipped_jobs", 0)
    metrics["unplaceable_dropped"] = workload.info.get("unplaceable_dropped", 0)
    metrics["duration_estimate"] = predictor.kind
    return metrics, records, sim


def resolve_ordering(ordering: str, policy=None) -> QueueOrdering:
    """The queue ordering of a run: ``ordering`` by name, or with ``own`` the
    policy's own (:meth:`Policy.ordering`), FIFO for a policy without one."""
    if ordering == OWN:
        own = policy.ordering() if hasattr(policy, "ordering") else None
        return own if own is not None else make_ordering("fifo")
    return make_ordering(ordering)


def make_simulator(
    cfg: ExperimentConfig,
    topo: Topology,
    perf: PerformanceModel,
    jobs: list[Job],
    predictor: DurationPredictor,
    policy=None,
) -> Simulator:
    """A simulator for ``cfg.simulation`` over ``jobs``: lengths read only through
    ``predictor``, restarts priced by ``simulation.migration_cost``, and only with
    ``simulation.migration: on`` the policy's migration rule (:func:`rebalance`) run
    after every batch of completions."""
    from marl_sched.migration import MigrationCost

    sc = cfg.simulation
    sim = Simulator(
        topo,
        jobs,
        perf=perf,
        ordering=resolve_ordering(sc.ordering, policy),
        backfill=sc.backfill,
        estimate=lambda job: _estimate(predictor, sim, job),
        migration_cost=MigrationCost.parse(sc.migration_cost, sc.migration_cost_scale),
        max_migrations_per_job=sc.max_migrations_per_job,
        min_migration_interval_s=sc.min_migration_interval_s,
    )
    if sc.migrates and has_migration_rule(policy):
        sim.after_completions = lambda s: rebalance(s, policy)
    return sim


def has_migration_rule(policy) -> bool:
    """Whether ``policy``'s class overrides :meth:`Policy.rebalance`, unless the
    instance says it has none (``policy.migrates`` False)."""
    if not getattr(policy, "migrates", True):
        return False
    return getattr(type(policy), "rebalance", Policy.rebalance) is not Policy.rebalance


def _estimate(predictor: DurationPredictor, sim: Simulator, job: Job) -> float:
    predictor.sync(sim.records)
    return predictor.est_iterations(job)


def rebalance(sim: Simulator, policy) -> None:
    """Apply a policy's migration proposals (:meth:`Policy.rebalance`) through
    :meth:`Simulator.migrate` (which may decline); a generator of proposals is sent
    the view after each move it yields."""
    proposals = policy.rebalance(sim.view())
    if not isinstance(proposals, Generator):
        for job_id, placement in proposals:
            sim.migrate(job_id, placement)
        return
    try:
        move = next(proposals)
        while True:
            sim.migrate(*move)
            move = proposals.send(sim.view())
    except StopIteration:
        pass
