"""Simulator benchmark: the whole Philly export's throughput and peak memory, and the
cost of a what-if playout (a fork of the state plus the next jobs played out).

    python experiments/speed_simulator.py [--quick] [--playout-jobs 100]
                                          [--out results/speed/simulator.json]
                                          [--against OTHER_CHECKOUT --pairs 2]

The whole Philly export (~82,000 jobs; ``--quick``: its first 10,000) on
``configs/philly.yaml`` (550 servers, 2,500 GPUs) under ``load-balance``, in a child
process so that its peak memory is its own. Target: <= 60 s, <= 2 GB
(``docs/results.md``; ``--quick``: ``docs/performance-model.md``). Then, in another
child, the same cluster is run to its 2,000th decision and forked: the median time of a
fork, and of playing the fork on for ``--playout-jobs`` more decisions (what an online
planner pays per candidate and sampled future), and of one planner decision from the
same state (K = 2 futures, ``masked:lookahead`` as the rollout base, every option
played out to the horizon: ``docs/planner.md``), so that the fork and the playout can be
read as shares of it; then that child's peak RSS and, traced, what one more planner
decision allocates at its peak (target <= 1 GiB). Prints two tables and, as its last
line, one JSON object with every figure, which it also writes to ``--out`` with the
command, the date and the machine's cores and load (``docs/performance-model.md``
quotes it through ``python -m experiments.make_docs``).

``--against`` times this checkout against another one (say an older commit's,
``git worktree add ../old <commit>``) on the same whole-export run, in alternating pairs
(this, other, this, other, ...: the ratio is taken pair by pair, so a drift of the
machine's speed cuts both alike). Each run is a fresh process; its figure is the whole
process's CPU seconds (user + system, start-up and set-up included, from
``getrusage(RUSAGE_CHILDREN)``), and each checkout's average JCT is kept beside it. The
other checkout runs with its own code and its own ``configs/philly.yaml``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from marl_sched.benchmark.ledger import git_commit
from marl_sched.config import REPO_ROOT
from marl_sched.files import why_unwritable, write_figures

SHARED = REPO_ROOT.parent / "shared" / "data"
#: where the figures are kept
RESULTS = REPO_ROOT / "results" / "speed" / "simulator.json"
#: the planner whose decision the playout is a share of (docs/planner.md)
PLANNER = ("planner.base=masked:lookahead", "planner.k=2", "planner.min_run_s=0")
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


PLAYOUT_COLUMNS = [("running", "running jobs", "d"), ("queued", "queued", "d"),
                   ("fork_ms", "fork (ms)", ".2f"), ("forks_per_s", "forks/s", ".0f"),
                   ("playout_ms", "playout (ms)", ".1f"),
                   ("playout_jobs_per_s", "playout jobs/s", ".0f"),
                   ("fork_share", "fork share", ".3f"),
                   ("planner_ms", "planner decision (ms)", ".0f"),
                   ("playout_share", "fork+playout share", ".3f"),
                   ("planner_alloc_peak_mb", "planner decision peak alloc (MB)", ".1f"),
                   ("peak_mb", "peak MB", ".0f")]  # fmt: skip


def measure_playout(jobs: int, at: int = 2000, reps: int = 20, planner_reps: int = 3) -> dict:
    """Run ``configs/philly.yaml`` under load-balance to its ``at``-th decision, then
    time ``reps`` forks and ``reps`` playouts of ``jobs`` decisions from that state
    (each on a fresh fork; the medians), and ``planner_reps`` decisions of the
    :data:`PLANNER` on the pending job (each on a fresh fork; the median)."""
    import statistics

    from marl_sched.config import load_config
    from marl_sched.policies import build_policy, make_policy
    from marl_sched.runner import TraceOptions, build_cluster, load_workload, make_simulator

    cfg_path = REPO_ROOT / "configs" / "philly.yaml"
    cfg = load_config(cfg_path)
    topo, perf = build_cluster(cfg)
    wl = load_workload(cfg, perf, TraceOptions(max_jobs=at + 20 * jobs))
    pol = make_policy("load-balance")
    pol.reset(topo, 0)
    predictor = wl.predictor()
    sim = make_simulator(cfg, topo, perf, wl.jobs, predictor, pol)

    def decide(s, n: int) -> int:
        done = 0
        while done < n and (job := s.next_decision()) is not None:
            predictor.sync(s.records)
            s.apply(pol.place(predictor.visible_job(job), s.view()))
            done += 1
        return done

    decide(sim, at)
    clock = time.perf_counter
    forks, plays, played = [], [], 0
    for _ in range(reps):
        t0 = clock()
        f = sim.fork()
        forks.append(clock() - t0)
        t0 = clock()
        played = decide(f, jobs)
        plays.append(clock() - t0)
    fork_s, play_s = statistics.median(forks), statistics.median(plays)
    planner = build_policy("planner", config=load_config(cfg_path, list(PLANNER)))
    planner.reset(topo, 0)
    decisions = []
    for _ in range(planner_reps):
        f = sim.fork()
        job = f.next_decision()
        t0 = clock()
        planner.place(predictor.visible_job(job), f.view(), sim=f)
        decisions.append(clock() - t0)
    planner_s = statistics.median(decisions)
    alloc_mb = _planner_alloc_mb(planner, predictor, sim)
    return {
        "at_decision": at,
        "running": len(sim.running),
        "queued": len(sim.queue),
        "playout_decisions": played,
        "fork_ms": 1e3 * fork_s,
        "forks_per_s": 1.0 / fork_s,
        "playout_ms": 1e3 * play_s,
        "playout_jobs_per_s": played / play_s,
        "fork_share": fork_s / (fork_s + play_s),
        "planner": list(PLANNER),
        "planner_ms": 1e3 * planner_s,
        # one fork and one playout of ``jobs`` decisions over one planner decision
        "playout_share": (fork_s + play_s) / planner_s,
        # this process's peak RSS (the cluster at the fork point, the timed forks and
        # planner decisions): a bound on what a planner decision needs in all
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "planner_alloc_peak_mb": alloc_mb,
    }


def _planner_alloc_mb(planner, predictor, sim) -> float:
    """The peak of what one planner decision on a fresh fork allocates beyond what was
    allocated before it (MB, ``tracemalloc``: Python objects and numpy's arrays), in one
    more decision after the timed ones (tracing slows it)."""
    import tracemalloc

    f = sim.fork()
    job = f.next_decision()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        planner.place(predictor.visible_job(job), f.view(), sim=f)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return (peak - base) / 1e6


#: the whole-export run of a ``--against`` pair: only names every checkout since the
#: runner split has (load_config, build_cluster, load_workload, TraceOptions, simulate)
PAIR_CHILD = """
import json
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.runner import TraceOptions, build_cluster, load_workload, simulate
cfg = load_config(REPO_ROOT / "configs" / "philly.yaml")
topo, perf = build_cluster(cfg)
wl = load_workload(cfg, perf, TraceOptions(max_jobs=None))
metrics, _, _ = simulate(cfg, "load-balance", wl, topo, perf)
print(json.dumps({"jobs": metrics["jobs_completed"], "avg_jct_s": metrics["avg_jct_s"]}))
"""


def _timed_run(root: Path) -> dict:
    """One whole-export run of ``root``'s code in a fresh process: its CPU seconds and
    wall seconds, whole process, and what it printed."""
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", PAIR_CHILD], capture_output=True, text=True,
                         check=True, env=env, cwd=str(root))  # fmt: skip
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_s": cpu, "wall_s": wall, **json.loads(out.stdout.strip().splitlines()[-1])}


def compare_against(other: Path, pairs: int) -> dict:
    """``pairs`` alternating whole-export runs of this checkout and ``other``: each
    run's figures and the per-pair ratios other / this (> 1: this checkout is faster)."""
    import statistics

    runs: dict[str, list[dict]] = {"this": [], "other": []}
    for i in range(pairs):
        for name, root in (("this", REPO_ROOT), ("other", other)):
            runs[name].append(_timed_run(root))
            r = runs[name][-1]
            print(f"pair {i + 1}/{pairs}, {name}: {r['cpu_s']:.1f} CPU s", file=sys.stderr)
    ratios = [o["cpu_s"] / t["cpu_s"] for t, o in zip(runs["this"], runs["other"], strict=True)]
    return {
        "other_commit": git_commit(other),
        "this_commit": git_commit(REPO_ROOT),
        "pairs": pairs,
        "this_cpu_s": [r["cpu_s"] for r in runs["this"]],
        "other_cpu_s": [r["cpu_s"] for r in runs["other"]],
        "speedup_per_pair": ratios,
        "speedup_median": statistics.median(ratios),
        "this_avg_jct_s": runs["this"][0]["avg_jct_s"],
        "other_avg_jct_s": runs["other"][0]["avg_jct_s"],
        # the same code must give the same schedule in every run
        "this_deterministic": len({r["avg_jct_s"] for r in runs["this"]}) == 1,
    }


def main() -> int:
    from marl_sched.cli import format_table

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the first 10,000 jobs")
    ap.add_argument(
        "--playout-jobs",
        type=int,
        default=100,
        help="decisions a timed playout makes after the fork (1-10000)",
    )
    ap.add_argument("--out", default=str(RESULTS), help="the results file (JSON)")
    ap.add_argument("--against", help="another checkout to time this one against")
    ap.add_argument("--pairs", type=int, default=2, help="alternating pairs (1-10)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--child-playout", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not 1 <= args.playout_jobs <= 10_000:
        ap.error(f"--playout-jobs: must be in 1..10000, got {args.playout_jobs}")
    if not 1 <= args.pairs <= 10:
        ap.error(f"--pairs: must be in 1..10, got {args.pairs}")
    other = None
    if args.against is not None:
        other = Path(args.against).resolve()
        if not (other / "marl_sched" / "runner.py").is_file():
            ap.error(f"--against {args.against}: not a checkout of this project "
                     "(no marl_sched/runner.py)")  # fmt: skip
        if other == REPO_ROOT.resolve():
            ap.error(f"--against {args.against}: that is this checkout")
    if args.child is not None:
        print(json.dumps(measure(args.child or None)))
        return 0
    if args.child_playout is not None:
        print(json.dumps(measure_playout(args.child_playout)))
        return 0
    if not SHARED.is_dir():
        print(f"speed_simulator: {SHARED} not found (the Philly export)", file=sys.stderr)
        return 2
    if (why := why_unwritable(args.out)) is not None:
        print(f"speed_simulator: --out {args.out}: {why}", file=sys.stderr)
        return 2
    load_before = os.getloadavg()[0]
    cmd = [sys.executable, __file__, "--child", "10000" if args.quick else "0"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    print("whole Philly export on configs/philly.yaml, load-balance (target <= 60 s, <= 2 GB)")
    print(format_table([figures], COLUMNS))
    cmd = [sys.executable, __file__, "--child-playout", str(args.playout_jobs)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    playout = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"fork at decision {playout['at_decision']}, then {playout['playout_decisions']} "
        "decisions played out (medians of 20)"
    )
    print(format_table([playout], PLAYOUT_COLUMNS))
    record = {"quick": args.quick, **figures, "playout": playout}
    flags = [f"--playout-jobs {args.playout_jobs}"] + (["--quick"] if args.quick else [])
    if other is not None:
        record["against"] = compare_against(other, args.pairs)
        a = record["against"]
        print(f"whole export, this checkout vs {a['other_commit'][:12]}, {a['pairs']} pairs: "
              f"{a['speedup_median']:.2f}x faster (median of the pairs; CPU s, whole "
              "process)")  # fmt: skip
        flags.append(f"--against OTHER_CHECKOUT --pairs {args.pairs}")
    print(json.dumps(record))
    command = " ".join(["python experiments/speed_simulator.py", *flags])
    write_figures(args.out, command, load_before, record)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
