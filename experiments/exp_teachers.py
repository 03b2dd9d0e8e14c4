"""The behaviour-cloning teachers run as (privileged) policies on the test windows.

::

    python experiments/exp_teachers.py [--teachers lookahead,rollout] [--windows a,b,...]

Each teacher places every job of a window itself, under the agents' masks (forward
rule from the job's home agent), exactly as it labels training states
(:func:`agents.teachers.teacher_plan`). The rollout teacher sees future arrivals, so
this is the ceiling of imitation, not an admissible scheduler. Windows: those of
``experiments/train_marl.py`` plus ``pollux-2`` … ``pollux-6`` (training/validation
windows of the agents). Prints average JCT per window and teacher next to the best
heuristic, then one JSON object. The rollout teacher costs ≈ 1–3 min per Pollux window.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from agents.teachers import make_teacher, teacher_plan
from envs.observations import ObservationBuilder
from envs.rules import home_agent
from envs.session import PlacementSession
from marl_sched.config import load_config
from marl_sched.metrics import compute_metrics
from marl_sched.policies import heuristic_names, make_policy
from marl_sched.runner import TraceOptions, build_cluster, load_workload
from marl_sched.simulator import Simulator, run_policy


def run(cfg, topo, perf, window: dict, place_factory) -> float:
    """Average JCT of one window under the placement function ``place_factory(sim)``."""
    opts = TraceOptions(trace=window["trace"], start=window["start"], max_jobs=window["max_jobs"])
    workload = load_workload(cfg, perf, opts)
    sim = Simulator(
        topo, workload.jobs, perf=perf,
        ordering=cfg.simulation.ordering, backfill=cfg.simulation.backfill,
    )  # fmt: skip
    run_policy(sim, place_factory(sim))
    return compute_metrics(sim, policy="", trace=workload.trace_path, wall_s=0.0)["avg_jct_s"]


def main() -> None:
    import train_marl as tm  # the held-out windows (experiments/ is on the path of a script)

    windows = dict(tm.WINDOWS)
    for k in (2, 3, 4, 5, 6):
        windows[f"pollux-{k}"] = {
            "trace": str(tm.TRACES / "pollux_workloads" / f"workload-{k}.csv"),
            "start": 0,
            "max_jobs": 500,
        }
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--teachers", default="lookahead,rollout")
    ap.add_argument("--windows", default=",".join(tm.WINDOWS))
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = load_config(tm.CONFIG)
    topo, perf = build_cluster(cfg)
    builder = ObservationBuilder(topo, perf)
    figures: dict = {}
    for name in args.windows.split(","):
        window = windows[name]
        if not tm.trace_exists(window):
            print(f"skipping {name}: {window['trace']} not found")
            continue
        row: dict[str, float] = {}
        for h in heuristic_names():
            policy = make_policy(h)
            policy.reset(topo, cfg.simulation.seed)
            row[h] = run(cfg, topo, perf, window, lambda sim, p=policy: p.place)
        best = min(row, key=row.get)
        for t in args.teachers.split(","):
            teacher = make_teacher(t)
            teacher.reset(topo, cfg.simulation.seed)

            def factory(sim, teacher=teacher):
                def place(job, view):
                    home = home_agent(job, builder.n_agents)
                    session = PlacementSession(builder, job, view, home)
                    return teacher_plan(teacher, session, sim=sim) if session.feasible() else None

                return place

            t0 = time.perf_counter()
            row[f"teacher:{t}"] = run(cfg, topo, perf, window, factory)
            wall = time.perf_counter() - t0
            print(f"  {name}: teacher {t} {row[f'teacher:{t}']:,.0f} s ({wall:.0f} s)")
        figures[name] = {"best_heuristic": best, **{k: round(v, 1) for k, v in row.items()}}
        teachers = "  ".join(
            f"{t} {row[f'teacher:{t}']:,.0f} ({(row[best] - row[f'teacher:{t}']) / row[best]:+.1%})"
            for t in args.teachers.split(",")
        )
        print(f"{name}: best heuristic {best} {row[best]:,.0f} s; {teachers}", flush=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
