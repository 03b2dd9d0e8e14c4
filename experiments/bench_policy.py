"""Decision latency of the trained MARL policy, by cluster size.

::

    python experiments/bench_policy.py [--quick] [--checkpoint P] [--central]

Clusters of 500, 2,000 and 4,000 servers shaped like ``configs/large.yaml`` (250
servers = 1,000 GPU groups per subcluster, so 2, 8 and 16 agents; V100/P100/K80 mix),
driven by the Philly export sped up so the cluster fills. Every job is placed by the
policy (:class:`agents.policy.MarlPolicy`'s own decision path, greedy, one CPU
thread).

Two units, both printed:

- **a decision** is one agent step: building the acting agent's observation (with the
  heuristic hints it holds), the GNN forward pass and arg-max, and applying the action
  — placing one task, or forwarding it to another agent. The unit of issue 34's target
  (p50 <= 3 ms, p99 <= 10 ms at 4,000 servers) and of every earlier figure of this
  script (the column was called "tasks").
- **a job** is all the decisions of one job's placement (one decision for most Philly
  jobs, which have one task).

Each is timed with ``time.perf_counter`` (wall) and, steadier on a shared machine, the
process's CPU time; the mean CPU split per decision (observe / forward / act) is in
the JSON. ``--central`` also times the single-agent variant (one agent over the whole
datacenter, untrained network with the default options) for contrast. Prints a table,
then one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch

from agents.gnn import build_gnn
from agents.policy import (
    DEFAULT_CHECKPOINT,
    MarlPolicy,
    SingleAgentPolicy,
    TrainedAgents,
    load_checkpoint,
    manifest_for,
)
from envs.observations import ObservationBuilder, feature_dims
from envs.rules import home_agent
from envs.session import PlacementSession
from marl_sched.config import REPO_ROOT, ServerTypeConfig, TopologyConfig, load_config
from marl_sched.errors import InputError
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


def bench(n_servers: int, agents, central: bool, jobs: int, seed: int) -> dict:
    topo = topology(n_servers)
    perf = PerformanceModel(topo)
    cfg = load_config(REPO_ROOT / "configs" / "large.yaml")
    load = 13.0 * n_servers / 4000
    work = load_workload(cfg, perf, TraceOptions(start=20000, max_jobs=jobs, load=load))
    if agents is None:  # an untrained network with the default options' feature dims
        builder = ObservationBuilder(topo, perf, central=central)
        torch.manual_seed(seed)
        net = build_gnn(feature_dims(builder.observation_space), {})
        agents = TrainedAgents(manifest_for(builder, {}, ["shared"]), {"shared": net.eval()})
    policy = (SingleAgentPolicy if central else MarlPolicy)(agents=agents)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer jobs per size")
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    parser.add_argument("--central", action="store_true", help="also the single-agent variant")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.checkpoint == str(DEFAULT_CHECKPOINT) and not DEFAULT_CHECKPOINT.exists():
        # no shipped checkpoint: latency does not depend on the weights
        agents, source = None, "untrained network (default ModelConfig)"
    else:
        try:
            agents, source = load_checkpoint(args.checkpoint), args.checkpoint
        except InputError as e:
            print(f"error: {e}", file=sys.stderr)
            raise SystemExit(2) from None
    jobs = 60 if args.quick else 300
    rows = []
    variants = [("marl", False)] + ([("single-agent", True)] if args.central else [])
    for name, central in variants:
        for n in SIZES:
            row = {"policy": name, **bench(n, None if central else agents, central, jobs, 0)}
            rows.append(row)
    print(
        f"network: {source}; one CPU thread; decision = one agent step (observe + GNN "
        "forward + act: place or forward one task); job = all the decisions of one job"
    )
    print(f"{'policy':>12} {'servers':>8} {'agents':>6} {'groups/agent':>12} {'decisions':>9} "
          f"{'p50 ms':>8} {'p99 ms':>8} {'CPU p50':>8} {'CPU p99':>8} {'jobs':>5} "
          f"{'job p50':>8} {'job p99':>8} {'CPU p50':>8} {'CPU p99':>8}")  # fmt: skip
    for r in rows:
        print(f"{r['policy']:>12} {r['servers']:>8} {r['agents']:>6} {r['groups_per_agent']:>12} "
              f"{r['tasks']:>9} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} "
              f"{r['cpu_p50_ms']:8.2f} {r['cpu_p99_ms']:8.2f} {r['jobs']:>5} "
              f"{r['job_p50_ms']:8.2f} {r['job_p99_ms']:8.2f} "
              f"{r['job_cpu_p50_ms']:8.2f} {r['job_cpu_p99_ms']:8.2f}")  # fmt: skip
    print("mean CPU ms per decision: hints' placements / rest of observe / forward / act")
    for r in rows:
        split = " / ".join(f"{v:.2f}" for v in r["cpu_split_ms"].values())
        print(f"{r['policy']:>12} {r['servers']:>8}  {split}")
    at_4000 = next(r for r in rows if r["policy"] == "marl" and r["servers"] == 4000)
    # issue 34's targets per decision at 4,000 servers (quiet machine): p99 <= 10 ms,
    # p50 <= 3 ms; judged on wall time (as before) and on CPU time
    meets = at_4000["p99_ms"] <= 10.0 and at_4000["p50_ms"] <= 3.0
    meets_cpu = at_4000["cpu_p99_ms"] <= 10.0 and at_4000["cpu_p50_ms"] <= 3.0
    print(json.dumps({"rows": rows, "marl_p99_ms_at_4000": at_4000["p99_ms"],
                      "marl_p50_ms_at_4000": at_4000["p50_ms"],
                      "marl_cpu_p99_ms_at_4000": at_4000["cpu_p99_ms"],
                      "marl_cpu_p50_ms_at_4000": at_4000["cpu_p50_ms"], "target_p99_ms": 10.0,
                      "target_p50_ms": 3.0, "meets_target": meets,
                      "meets_target_cpu": meets_cpu}))  # fmt: skip


if __name__ == "__main__":
    main()
