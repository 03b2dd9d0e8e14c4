"""What a plan hint's plan costs per job: CPU ms of ``policy.place(job, view)`` (the
plan made inside the agents' masks, as :meth:`envs.hints.SessionHints.job_plans` asks
it) for ``masked:lookahead-learned`` and ``masked:lookahead-learned-home`` on the same
jobs, at 500 and 4,000 servers (``agents.latency.cluster_workload``: the Philly export
from job 20,000, 60 jobs, load scaled with the cluster), one torch thread; the
simulator advances on the first policy's placement. Writes ``plan_cost.json`` here.

    python results/plan-home/plan_cost.py
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from agents.latency import cluster_workload, ms_summary, run_header
from marl_sched.policies import make_policy
from marl_sched.simulator import Simulator

HERE = Path(__file__).resolve().parent
POLICIES = ("masked:lookahead-learned", "masked:lookahead-learned-home")


def measure(n_servers: int, jobs: int = 60) -> dict:
    topo, perf, work = cluster_workload(n_servers, jobs)
    policies = [make_policy(name) for name in POLICIES]
    for p in policies:
        p.reset(topo, 0)
    sim = Simulator(topo, work.jobs, perf=perf)
    ms = {name: [] for name in POLICIES}
    placed = {name: 0 for name in POLICIES}
    while (job := sim.next_decision()) is not None:
        view = sim.view()
        plans = []
        for name, p in zip(POLICIES, policies, strict=True):
            c = time.process_time()
            plans.append(p.place(job, view))
            ms[name].append((time.process_time() - c) * 1e3)
            placed[name] += plans[-1] is not None
        sim.apply(plans[0])
    row = {"servers": n_servers, "subclusters": topo.n_subclusters, "jobs": len(ms[POLICIES[0]])}
    for name in POLICIES:
        row[name] = {**ms_summary(ms[name]), "placed": placed[name]}
    return row


def main() -> None:
    torch.set_num_threads(1)
    rows = [measure(n) for n in (500, 4000)]
    out = {**run_header("python results/plan-home/plan_cost.py"), "rows": rows}
    (HERE / "plan_cost.json").write_text(json.dumps(out, indent=1) + "\n")
    for r in rows:
        print(r["servers"], "servers,", r["subclusters"], "subclusters:",
              "; ".join(f"{n} mean {r[n]['mean_ms']:.2f} p50 {r[n]['p50_ms']:.2f} "
                        f"p99 {r[n]['p99_ms']:.2f} ms" for n in POLICIES))  # fmt: skip


if __name__ == "__main__":
    main()
