"""Training samples (:class:`Samples`): simulated co-locations on random topologies,
jobs and heuristic mixes (:func:`generate_samples`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from marl_sched.catalogue import CATALOGUE, GPU_SPEED, MODEL_NAMES
from marl_sched.config import ServerTypeConfig, TopologyConfig
from marl_sched.interference.features import (
    N_FEATURES,
    colocation_level,
    job_features,
    true_slowdown,
)
from marl_sched.jobs import Job, default_num_ps
from marl_sched.perf import PerformanceModel
from marl_sched.simulator import Simulator
from marl_sched.topology import Topology

# --------------------------------------------------------------------------- samples


@dataclass
class Samples:
    """Feature rows and their true slowdowns.

    Attributes:
        x: (n, F) features (:data:`FEATURE_NAMES`).
        y: (n,) slowdowns (>= 1 for simulated samples).
        model: (n,) catalogue index of the job's model (:data:`MODEL_NAMES`).
        level: (n,) index into :data:`COLOCATION_LEVELS`.
        group: (n,) id of the simulation (or measurement set) a row comes from, so
            that splits can keep correlated rows together.
        source: (n,) where the row comes from (``simulated``, ``gavel``, ...).
        reference: (n,) factor turning the model's prediction into the measured
            quantity (1 for co-location slowdowns; see :func:`real_samples`).
        simulated: (n,) the simulator's own value of the measured quantity.
    """

    x: np.ndarray
    y: np.ndarray
    model: np.ndarray
    level: np.ndarray
    group: np.ndarray
    source: np.ndarray
    reference: np.ndarray
    simulated: np.ndarray

    def __len__(self) -> int:
        return len(self.y)

    def subset(self, idx: np.ndarray) -> Samples:
        return Samples(*(getattr(self, f.name)[idx] for f in dataclasses.fields(self)))

    @staticmethod
    def concat(parts: Sequence[Samples]) -> Samples:
        fields = dataclasses.fields(Samples)
        return Samples(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields))


def _samples_from_rows(
    rows: list[np.ndarray], y, model, group, source: str, reference=None, simulated=None
) -> Samples:
    x = np.stack(rows) if rows else np.zeros((0, N_FEATURES))
    y = np.asarray(y, dtype=np.float64)
    return Samples(
        x=x,
        y=y,
        model=np.asarray(model, dtype=np.int64),
        level=colocation_level(x) if len(x) else np.zeros(0, dtype=np.int8),
        group=np.asarray(group, dtype=np.int64),
        source=np.full(len(y), source),
        reference=np.ones(len(y)) if reference is None else np.asarray(reference, float),
        simulated=y.copy() if simulated is None else np.asarray(simulated, float),
    )


def random_topology(rng: np.random.Generator) -> TopologyConfig:
    """A small random datacenter: sizes, GPU types, PCIe layout, NICs, oversubscription."""
    subclusters = int(rng.integers(1, 3))
    racks = int(rng.integers(1, 4))
    per_rack = int(rng.integers(2, 6))
    n_servers = subclusters * racks * per_rack
    n_types = int(rng.integers(1, min(3, n_servers) + 1))
    cuts = np.sort(rng.choice(np.arange(1, n_servers), size=n_types - 1, replace=False))
    counts = np.diff(np.concatenate([[0], cuts, [n_servers]]))
    gpu_types = sorted(GPU_SPEED)
    types = []
    for i, count in enumerate(counts):
        sockets = int(rng.choice([1, 2], p=[0.3, 0.7]))
        gps = int(rng.choice([1, 2, 4], p=[0.35, 0.5, 0.15]))
        gpg = int(rng.choice([1, 2, 4], p=[0.2, 0.5, 0.3]))
        types.append(
            ServerTypeConfig(
                name=f"type{i}",
                count=int(count),
                gpu_type=str(rng.choice(gpu_types)),
                sockets=sockets,
                groups_per_socket=gps,
                gpus_per_group=gpg,
                # >= 2 cores and 16 GB per GPU, as real GPU servers have (and so that
                # GPU-free servers are not mostly refused for lack of CPU)
                cpu_cores=max(16, sockets * gps * gpg * int(rng.choice([2, 3, 4, 6]))),
                memory_gb=float(max(64, sockets * gps * gpg * int(rng.choice([16, 32, 48])))),
                nic_gbps=float(rng.choice([10, 25, 40, 100])),
            )
        )
    return TopologyConfig(
        subclusters=subclusters,
        racks_per_subcluster=racks,
        servers_per_rack=per_rack,
        server_types=tuple(types),
        pcie_gbps=float(rng.choice([64.0, 128.0, 256.0])),
        qpi_gbps=float(rng.choice([80.0, 160.0, 200.0])),
        rack_oversubscription=float(rng.choice([1.0, 2.0, 3.0, 4.0])),
        subcluster_uplink_gbps=float(rng.choice([100.0, 200.0, 400.0])),
    )


def random_jobs(rng: np.random.Generator, perf: PerformanceModel, n_jobs: int, load: float):
    """Random jobs of every catalogue model arriving at ``load`` × the cluster's capacity."""
    topo = perf.topology
    cap = max(1, topo.n_gpus // 2)
    sizes = np.array([1, 2, 3, 4, 6, 8, 12, 16])
    probs = np.array([0.3, 0.2, 0.08, 0.16, 0.06, 0.1, 0.04, 0.06])
    keep = sizes <= cap
    sizes, probs = sizes[keep], probs[keep] / probs[keep].sum()
    workers = rng.choice(sizes, size=n_jobs, p=probs)
    duration = rng.lognormal(mean=math.log(1800.0), sigma=1.0, size=n_jobs)
    mean_work = float(np.mean(workers * duration))
    rate = load * topo.n_gpus / mean_work
    submit = np.cumsum(rng.exponential(1.0 / rate, size=n_jobs))
    jobs = []
    for i in range(n_jobs):
        w = int(workers[i])
        model = str(rng.choice(MODEL_NAMES))
        if w == 1:
            ps = int(rng.random() < 0.3)
        elif rng.random() < 0.6:
            ps = default_num_ps(w)
        else:
            ps = int(rng.integers(1, w + 1))
        iters = float(duration[i]) / perf.isolated_iteration_time(model, w, ps)
        jobs.append(Job(i, f"j{i}", model, w, ps, iters, float(submit[i]), float(duration[i])))
    return jobs


#: heuristics and their weight when a simulation draws its policy mix
POLICY_MIX = {
    "random": 3.0,
    "first-fit": 1.0,
    "load-balance": 1.0,
    "tetris": 1.0,
    "locality": 1.0,
    "congestion-aware": 1.0,
    "interference-aware": 1.0,
}


def _simulate_samples(
    rng: np.random.Generator,
    topo_cfg: TopologyConfig,
    budget: int,
    group_id: int,
    per_snapshot: int = 4,
) -> Samples:
    """Run one random simulation and snapshot running jobs at decision points."""
    from marl_sched.policies import make_policy

    topo = Topology.from_config(topo_cfg)
    perf = PerformanceModel(topo)
    load = float(rng.uniform(0.6, 3.0))
    n_jobs = int(rng.integers(60, 240))
    jobs = random_jobs(rng, perf, n_jobs, load)
    names = list(POLICY_MIX)
    weights = np.array([POLICY_MIX[n] for n in names])
    k = int(rng.integers(1, 4))
    chosen = rng.choice(names, size=k, replace=False, p=weights / weights.sum())
    policies = []
    for name in chosen:
        pol = make_policy(str(name))
        pol.reset(topo, int(rng.integers(2**31)))
        policies.append(pol)
    sim = Simulator(topo, jobs, perf=perf)
    rows, ys, models = [], [], []
    snapshot_p = float(rng.uniform(0.3, 1.0))
    max_decisions = 20 * n_jobs  # a run whose queue keeps refusing jobs stops early
    while (
        len(ys) < budget
        and sim.stats.decisions < max_decisions
        and (job := sim.next_decision()) is not None
    ):
        view = sim.view()
        placement = policies[int(rng.integers(len(policies)))].place(job, view)
        sim.apply(placement)
        if placement is None or rng.random() > snapshot_p:
            continue
        view = sim.view()
        running = sorted(sim.running)
        pick = rng.choice(len(running), size=min(per_snapshot, len(running)), replace=False)
        for k in np.sort(pick):
            run = sim.running[running[int(k)]]
            rows.append(job_features(view, run.job, run.placement, run.layout))
            ys.append(true_slowdown(view, run.job, run.layout))
            models.append(CATALOGUE[run.job.model].index)
    return _samples_from_rows(rows, ys, models, [group_id] * len(ys), "simulated")


def generate_samples(
    n: int,
    seed: int,
    topologies: Sequence[TopologyConfig] | None = None,
    *,
    topology_fraction: float = 1.0,
    progress: Callable[[int], None] | None = None,
) -> Samples:
    """``n`` simulated co-location samples (features, true slowdown), seeded: each
    simulation draws a topology, random jobs at 0.6–3× capacity and 1–3 heuristics, and
    snapshots running jobs at decision points.

    Args:
        n: number of samples.
        seed: root seed; every simulation gets a child generator.
        topologies: fixed topologies to mix in (e.g. the experiment config's).
        topology_fraction: share of simulations on ``topologies``.
        progress: called with the number of samples collected so far.
    """
    root = np.random.SeedSequence(seed)
    per_run = min(600, max(50, n // 20))
    parts: list[Samples] = []
    have = 0
    sim_id = 0
    while have < n:
        (child,) = root.spawn(1)
        rng = np.random.default_rng(child)
        if topologies and rng.random() < topology_fraction:
            cfg = topologies[int(rng.integers(len(topologies)))]
        else:
            cfg = random_topology(rng)
        # at most 1/20 of the samples from one run, so even small sets span many
        part = _simulate_samples(rng, cfg, min(n - have, per_run), sim_id)
        sim_id += 1
        parts.append(part)
        have += len(part)
        if progress is not None:
            progress(min(have, n))
    out = Samples.concat(parts)
    return out.subset(np.arange(n))
