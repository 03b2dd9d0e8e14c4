"""Decision latency of a MARL policy on a simulated cluster, by size
(``experiments/speed_policy.py``; docs/agents.md, "Measured").

Clusters of ``n`` servers shaped like ``configs/large.yaml`` under a sped-up Philly
export; each decision (one agent step) and job is timed in wall and process CPU time,
the mean CPU split per decision (hints / observe / forward / act)."""

from __future__ import annotations

import datetime
import os
import time

import numpy as np
import torch

from agents.gnn import build_gnn
from agents.policy import MarlPolicy, TrainedAgents, manifest_for
from envs.config import EnvConfig
from envs.observations import ObservationBuilder, feature_dims
from envs.rules import home_agent
from envs.session import PlacementSession
from marl_sched.config import REPO_ROOT, ServerTypeConfig, TopologyConfig, load_config
from marl_sched.perf import PerformanceModel
from marl_sched.runner import TraceOptions, load_workload
from marl_sched.simulator import Simulator
from marl_sched.topology import Topology

SIZES = (500, 2000, 4000)
SERVERS_PER_SUBCLUSTER = 250  # 25 racks x 10 servers, as configs/large.yaml


def topology(n_servers: int) -> Topology:
    large = load_config(REPO_ROOT / "configs" / "large.yaml").topology
    shares = [s.count / large.n_servers for s in large.server_types]
    counts = [int(round(n_servers * f)) for f in shares]
    counts[0] += n_servers - sum(counts)
    types = tuple(
        ServerTypeConfig(**{**s.__dict__, "count": c})
        for s, c in zip(large.server_types, counts, strict=True)
    )
    cfg = TopologyConfig(
        **{
            **large.__dict__,
            "subclusters": n_servers // SERVERS_PER_SUBCLUSTER,
            "server_types": types,
        }
    )
    return Topology(cfg)


def cluster_workload(n_servers: int, jobs: int):
    """The :func:`topology` of ``n_servers``, its performance model and ``jobs`` jobs of
    the Philly export from job 20,000 at a load scaled with the cluster."""
    topo = topology(n_servers)
    perf = PerformanceModel(topo)
    cfg = load_config(REPO_ROOT / "configs" / "large.yaml")
    load = 13.0 * n_servers / 4000
    work = load_workload(cfg, perf, TraceOptions(start=20000, max_jobs=jobs, load=load))
    return topo, perf, work


def run_header(command: str) -> dict:
    """What a timing file records of its run: the command, the UTC time, the cores and
    the load average."""
    return {"command": command,
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "cores": os.cpu_count(), "load_average": list(os.getloadavg())}  # fmt: skip


def ms_summary(values) -> dict:
    """Mean, median and 99th percentile of ``values`` (milliseconds)."""
    a = np.asarray(values, dtype=float)
    return {"mean_ms": float(a.mean()), "p50_ms": float(np.percentile(a, 50)),
            "p99_ms": float(np.percentile(a, 99))}  # fmt: skip


def bench(n_servers: int, agents, jobs: int, seed: int) -> dict:
    topo, perf, work = cluster_workload(n_servers, jobs)
    if agents is None:  # an untrained network with the default options' feature dims
        builder = ObservationBuilder(topo, perf, EnvConfig())
        torch.manual_seed(seed)
        net = build_gnn(feature_dims(builder.observation_space), {})
        agents = TrainedAgents(manifest_for(builder, {}, ["shared"]), {"shared": net.eval()})
    policy = MarlPolicy(agents=agents)
    policy.check_cluster(topo, perf)  # the checkpoint's environment core on this topology
    builder = policy.builder
    sim = Simulator(topo, work.jobs, perf=perf)
    lat, cpu, job_lat, job_cpu = [], [], [], []
    split = np.zeros(4)  # CPU s in the hints' placements, the rest of observe, forward, act
    clock, cpu_clock = time.perf_counter, time.process_time
    while (job := sim.next_decision()) is not None:
        s = PlacementSession(builder, job, sim.view(), home_agent(job, builder.n_agents))
        placed, steps = True, len(lat)
        while not s.done:
            if not s.feasible():
                placed = False
                break
            t0, c0 = clock(), cpu_clock()
            # the heuristic hints' placements first (observe would compute them: cached
            # per job and agent), to time them apart from the rest of the observation
            s.plans(s.agent), s.global_shares()
            ch = cpu_clock()
            obs = builder.observe(s, s.agent)
            c1 = cpu_clock()
            action = policy.greedy(s.agent, obs)
            c2 = cpu_clock()
            s.act(action)
            lat.append(clock() - t0)
            cpu.append(cpu_clock() - c0)
            split += (ch - c0, c1 - ch, c2 - c1, cpu[-1] - (c2 - c0))
        if len(lat) > steps:  # the job's whole placement (or the part made before it stuck)
            job_lat.append(sum(lat[steps:]))
            job_cpu.append(sum(cpu[steps:]))
        sim.apply(s.placement() if placed else None)
    ms, cpu_ms = np.array(lat) * 1e3, np.array(cpu) * 1e3
    job_ms, job_cpu_ms = np.array(job_lat) * 1e3, np.array(job_cpu) * 1e3
    return {
        "servers": n_servers,
        "agents": builder.n_agents,
        "groups_per_agent": builder.pad[0],
        # per decision = one agent step: place one task, or forward it
        "tasks": len(ms),
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
        # CPU time of this process per decision: steadier than wall time on a shared machine
        "cpu_p50_ms": float(np.percentile(cpu_ms, 50)),
        "cpu_p99_ms": float(np.percentile(cpu_ms, 99)),
        # mean CPU ms per decision: the hints' placements (the acting agent's hints in its
        # scope and the global hints, once per job and agent), the rest of building the
        # observation, the network (forward and arg-max), applying the action
        "cpu_split_ms": {k: float(v) for k, v in
                         zip(("hints", "observe", "forward", "act"), split / len(ms) * 1e3,
                             strict=True)},
        # per job = all the decisions of one job's placement
        "jobs": len(job_ms),
        "job_p50_ms": float(np.percentile(job_ms, 50)),
        "job_p99_ms": float(np.percentile(job_ms, 99)),
        "job_cpu_p50_ms": float(np.percentile(job_cpu_ms, 50)),
        "job_cpu_p99_ms": float(np.percentile(job_cpu_ms, 99)),
    }  # fmt: skip
