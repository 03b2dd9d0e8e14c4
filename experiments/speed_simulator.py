"""Simulator benchmark: the whole Philly export's throughput and peak memory.

    python experiments/speed_simulator.py [--quick]

The whole Philly export (~82,000 jobs; ``--quick``: its first 10,000) on
``configs/philly.yaml`` (550 servers, 2,500 GPUs) under ``load-balance``, in a child
process so that its peak memory is its own. Target: <= 60 s, <= 2 GB
(``docs/results.md``; ``--quick``: ``docs/performance-model.md``). Prints a table and,
as its last line, one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

from marl_sched.config import REPO_ROOT

SHARED = REPO_ROOT.parent / "shared" / "data"
COLUMNS = [("jobs", "jobs", "d"), ("wall_s", "wall (s)", ".2f"), ("cpu_s", "CPU (s)", ".2f"),
           ("jobs_per_s", "jobs/s", ".1f"), ("events_per_s", "events/s", ".1f"),
           ("peak_mb", "peak MB", ".1f"), ("avg_jct_s", "avg JCT (s)", ".1f")]  # fmt: skip


def measure(max_jobs: int | None) -> dict:
    """Simulate the window here (the child process) and return its figures."""
    from marl_sched.config import load_config
    from marl_sched.runner import TraceOptions, build_cluster, load_workload, simulate

    t0 = time.perf_counter()
    cfg = load_config(REPO_ROOT / "configs" / "philly.yaml")
    topo, perf = build_cluster(cfg)
    wl = load_workload(cfg, perf, TraceOptions(max_jobs=max_jobs))
    setup_s = time.perf_counter() - t0
    cpu0 = time.process_time()
    metrics, _, _ = simulate(cfg, "load-balance", wl, topo, perf)
    return {
        "servers": topo.n_servers,
        "gpus": topo.n_gpus,
        "jobs": metrics["jobs_completed"],
        "setup_s": setup_s,
        "wall_s": metrics["wall_s"],
        # CPU seconds of the simulation: the figure to compare on a shared machine
        "cpu_s": time.process_time() - cpu0,
        "jobs_per_s": metrics["jobs_per_s"],
        "events_per_s": metrics["events_per_s"],
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "avg_jct_s": metrics["avg_jct_s"],
    }


def main() -> int:
    from marl_sched.cli import format_table

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the first 10,000 jobs")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(measure(args.child or None)))
        return 0
    if not SHARED.is_dir():
        print(f"speed_simulator: {SHARED} not found (the Philly export)", file=sys.stderr)
        return 2
    cmd = [sys.executable, __file__, "--child", "10000" if args.quick else "0"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    print("whole Philly export on configs/philly.yaml, load-balance (target <= 60 s, <= 2 GB)")
    print(format_table([figures], COLUMNS))
    print(json.dumps({"quick": args.quick, **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
