"""Simulator benchmark: throughput, peak memory, and whether placement matters.

    python experiments/bench_simulator.py [--quick]

Scenarios (each in its own process, so peak memory is its own):

1. ``philly``: the whole Philly export (~82,000 jobs) on ``configs/philly.yaml``
   (550 servers, 2,500 GPUs) under ``load-balance``. Target: ≤ 60 s, ≤ 2 GB.
2. ``large``: a 10,000-job Philly window on ``configs/large.yaml`` (4,000 servers,
   32,000 GPUs, 16 subclusters) under ``load-balance``.
3. ``placement``: every heuristic on ``configs/default.yaml``'s trace window: the
   spread between the best and worst average JCT, and interference-aware vs random.

``--quick`` shrinks scenarios 1 and 2 (10,000 and 2,000 jobs). Prints a table per
scenario and, as its last line, one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"


def _child(config: str, policy: str, max_jobs: int | None) -> dict:
    from marl_sched.config import load_config
    from marl_sched.runner import TraceOptions, build_cluster, load_workload, simulate

    t0 = time.perf_counter()
    cfg = load_config(REPO / config)
    topo, perf = build_cluster(cfg)
    wl = load_workload(cfg, perf, TraceOptions(max_jobs=max_jobs))
    load_s = time.perf_counter() - t0
    cpu0 = time.process_time()
    metrics, _, _ = simulate(cfg, policy, wl, topo, perf)
    cpu_s = time.process_time() - cpu0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {
        "config": config,
        "policy": policy,
        "gpus": topo.n_gpus,
        "servers": topo.n_servers,
        "jobs": metrics["jobs_completed"],
        "setup_s": round(load_s, 2),
        "wall_s": round(metrics["wall_s"], 2),
        # CPU seconds of the simulation: the figure to compare on a shared machine
        "cpu_s": round(cpu_s, 2),
        "jobs_per_s": round(metrics["jobs_per_s"], 1),
        "events_per_s": round(metrics["events_per_s"], 1),
        "peak_mb": round(peak_mb, 1),
        "avg_jct_s": round(metrics["avg_jct_s"], 1),
        "gpu_utilization": round(metrics["gpu_utilization"], 3),
    }


def _run_child(config: str, policy: str, max_jobs: int | None) -> dict:
    cmd = [sys.executable, __file__, "--child", config, policy, str(max_jobs or 0)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _table(rows: list[dict], keys: list[str]) -> str:
    widths = [max(len(k), *(len(str(r[k])) for r in rows)) for k in keys]
    line = "  ".join(f"{k:>{w}}" for k, w in zip(keys, widths, strict=True))
    body = ["  ".join(f"{str(r[k]):>{w}}" for k, w in zip(keys, widths, strict=True)) for r in rows]
    return "\n".join([line, "  ".join("-" * w for w in widths), *body])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller windows")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        config, policy, n = args.child
        print(json.dumps(_child(config, policy, int(n) or None)))
        return

    figures: dict = {"quick": args.quick}
    keys = [
        "config",
        "policy",
        "servers",
        "gpus",
        "jobs",
        "wall_s",
        "cpu_s",
        "jobs_per_s",
        "events_per_s",
        "peak_mb",
    ]
    if SHARED.is_dir():
        philly = _run_child("configs/philly.yaml", "load-balance", 10000 if args.quick else None)
        large = _run_child("configs/large.yaml", "load-balance", 2000 if args.quick else 10000)
        print("Throughput (target: whole Philly on 2,500 GPUs in <= 60 s, <= 2 GB)")
        print(_table([philly, large], keys))
        figures["philly"] = philly
        figures["large"] = large
    else:
        print(f"skipping the Philly scenarios: {SHARED} not found")

    from marl_sched.policies import heuristic_names

    heuristics = heuristic_names()
    rows = [_run_child("configs/default.yaml", p, None) for p in heuristics]
    rows.sort(key=lambda r: r["avg_jct_s"])
    best, worst = rows[0], rows[-1]
    by = {r["policy"]: r for r in rows}
    print("\nPlacement matters (configs/default.yaml, its trace window)")
    print(_table(rows, ["policy", "jobs", "avg_jct_s", "gpu_utilization", "wall_s"]))
    ratio = worst["avg_jct_s"] / best["avg_jct_s"]
    ia_vs_random = by["interference-aware"]["avg_jct_s"] / by["random"]["avg_jct_s"]
    print(
        f"worst/best avg JCT: {ratio:.2f}x ({worst['policy']} / {best['policy']}); "
        f"interference-aware / random: {ia_vs_random:.3f}"
    )
    figures["placement"] = {r["policy"]: r["avg_jct_s"] for r in rows}
    figures["worst_over_best"] = round(ratio, 3)
    figures["interference_aware_over_random"] = round(ia_vs_random, 3)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
