"""Small builders shared by the tests (tiny hand-made clusters and workloads)."""

from __future__ import annotations

import numpy as np

from marl_sched.catalogue import MODEL_NAMES
from marl_sched.config import ServerTypeConfig, TopologyConfig
from marl_sched.jobs import Job, default_num_ps
from marl_sched.perf import PerformanceModel
from marl_sched.topology import Topology


def tiny_topology(
    subclusters: int = 2,
    racks: int = 2,
    servers: int = 2,
    sockets: int = 2,
    groups_per_socket: int = 2,
    gpus_per_group: int = 2,
    gpu_types: tuple[str, ...] = ("v100",),
    oversubscription: float = 2.0,
) -> Topology:
    n = subclusters * racks * servers
    counts = [n // len(gpu_types)] * len(gpu_types)
    counts[0] += n - sum(counts)
    types = tuple(
        ServerTypeConfig(
            name=f"t{i}",
            count=c,
            gpu_type=g,
            sockets=sockets,
            groups_per_socket=groups_per_socket,
            gpus_per_group=gpus_per_group,
        )
        for i, (g, c) in enumerate(zip(gpu_types, counts, strict=True))
        if c > 0
    )
    cfg = TopologyConfig(
        subclusters=subclusters,
        racks_per_subcluster=racks,
        servers_per_rack=servers,
        server_types=types,
        rack_oversubscription=oversubscription,
    )
    return Topology(cfg)


def random_jobs(
    perf: PerformanceModel, n: int, seed: int, max_workers: int = 8, mean_gap: float = 200.0
) -> list[Job]:
    """``n`` random jobs with isolated runtimes of minutes to hours."""
    rng = np.random.default_rng(seed)
    jobs, t = [], 0.0
    for i in range(n):
        t += float(rng.exponential(mean_gap))
        w = int(rng.choice([1, 1, 2, 3, 4, 8, max_workers]))
        w = min(w, max_workers)
        model = str(rng.choice(MODEL_NAMES))
        p = default_num_ps(w)
        duration = float(rng.uniform(60, 7200))
        iters = duration / perf.isolated_iteration_time(model, w, p)
        jobs.append(Job(i, f"j{i}", model, w, p, iters, t, duration))
    return jobs
