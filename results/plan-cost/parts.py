"""Where a plan hint's plan spends its time: per arriving job, CPU ms of
``masked:lookahead-learned``'s placement (the plan
:meth:`envs.hints.SessionHints.job_plans` asks), split into its parts, at 500 and
4,000 servers (``agents.latency.cluster_workload``: the Philly export from job 20,000,
60 jobs, load scaled with the cluster), one torch thread. Writes ``parts.json`` here.

The parts, timed by wrapping the functions the plan calls (the placement is unchanged;
the script checks it against an unwrapped policy's, job for job):

- ``scoped``: the heuristics asked on each subcluster that can hold the job alone;
- ``whole``: the heuristics asked on the whole view;
- ``legality``: the masks' check that the agents can reach a proposal from the job's
  home agent (:func:`envs.session.follows_forward_rule`), asked of every proposal;
- ``predictor``: the learned predictor's estimate of the legal proposals
  (:func:`marl_sched.interference.estimate.estimated_iteration_times`);
- ``rest``: the total less those (views, deduplication, following the plan in the masks);
- ``whole+predictor``: per job, the whole view's heuristics and the predictor together
  (what a plan on the whole view alone would still cost, with every check free).

    python results/plan-cost/parts.py
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

import agents.teachers as teachers
import envs.session as session
import marl_sched.interference.estimate as estimate
from agents.latency import cluster_workload, ms_summary, run_header
from marl_sched.policies import make_policy
from marl_sched.simulator import Simulator

HERE = Path(__file__).resolve().parent
POLICY = "masked:lookahead-learned"
PARTS = ("scoped", "whole", "legality", "predictor")
clock = time.process_time


class Timed:
    """Wraps the plan's functions and adds each call's CPU time to ``self.ms``."""

    def __init__(self) -> None:
        self.ms = dict.fromkeys(PARTS, 0.0)

    def wrap(self, module, name: str, part: str) -> None:
        inner = getattr(module, name)

        def timed(*args, **kwargs):
            c = clock()
            try:
                return inner(*args, **kwargs)
            finally:
                self.ms[part] += (clock() - c) * 1e3

        setattr(module, name, timed)


def placements(topo, perf, work) -> list:
    """The policy's placement of each job, the simulator advancing on it."""
    policy = make_policy(POLICY)
    policy.reset(topo, 0)
    sim, out = Simulator(topo, work.jobs, perf=perf), []
    while (job := sim.next_decision()) is not None:
        out.append(policy.place(job, sim.view()))
        sim.apply(out[-1])
    return out


def measure(n_servers: int, jobs: int = 60) -> dict:
    topo, perf, work = cluster_workload(n_servers, jobs)
    reference = placements(topo, perf, work)  # unwrapped
    timed = Timed()
    saved = [(m, n, getattr(m, n)) for m, n in ((session, "follows_forward_rule"),
             (estimate, "estimated_iteration_times"), (teachers, "proposals"))]  # fmt: skip
    timed.wrap(session, "follows_forward_rule", "legality")
    timed.wrap(estimate, "estimated_iteration_times", "predictor")

    def proposals(candidates, job, views, legal=None):
        """:func:`agents.teachers.proposals`, each view's heuristics timed apart."""
        out, seen = [], set()
        with teachers.shared_candidates(candidates):
            for i, view in enumerate(views):
                part = "whole" if i == len(views) - 1 else "scoped"
                c = clock()
                found = [p for h in candidates if (p := h.place(job, view)) is not None]
                timed.ms[part] += (clock() - c) * 1e3
                for p in found:
                    key = teachers.placement_key(p)
                    if key not in seen:
                        seen.add(key)
                        if legal is None or legal(p):
                            out.append(p)
        return out

    teachers.proposals = proposals
    policy = make_policy(POLICY)
    policy.reset(topo, 0)
    sim, rows = Simulator(topo, work.jobs, perf=perf), []
    try:
        while (job := sim.next_decision()) is not None:
            view = sim.view()
            before = dict(timed.ms)
            c = clock()
            p = policy.place(job, view)
            total = (clock() - c) * 1e3
            if teachers.placement_key(p) != teachers.placement_key(reference[len(rows)]):
                raise SystemExit(f"the timed plan differs from the policy's at job {job.job_id}")
            part = {k: timed.ms[k] - before[k] for k in PARTS}
            part["rest"] = total - sum(part.values())
            part["total"] = total
            part["whole+predictor"] = part["whole"] + part["predictor"]
            rows.append(part)
            sim.apply(p)
    finally:
        for module, name, fn in saved:
            setattr(module, name, fn)
    out = {"servers": n_servers, "subclusters": topo.n_subclusters, "jobs": len(rows)}
    for k in (*PARTS, "rest", "total", "whole+predictor"):
        out[k] = ms_summary([r[k] for r in rows])
    return out


def main() -> None:
    torch.set_num_threads(1)
    rows = [measure(n) for n in (500, 4000)]
    out = {**run_header("python results/plan-cost/parts.py"), "policy": POLICY, "rows": rows}
    (HERE / "parts.json").write_text(json.dumps(out, indent=1) + "\n")
    for r in rows:
        print(f"{r['servers']} servers ({r['subclusters']} subclusters): " + "; ".join(
            f"{k} {r[k]['mean_ms']:.2f}/{r[k]['p99_ms']:.2f}" for k in (*PARTS, "rest", "total")
        ) + " ms mean/p99")  # fmt: skip


if __name__ == "__main__":
    main()
