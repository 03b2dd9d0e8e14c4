"""Run benchmark cells of a pre-registered subset (scenarios x policies x seeds) into a
resumable cell folder, one process, with a progress line per finished cell.

    python results/room-planner/run_cells.py --split validation \
        --scenarios philly-52000-light,pollux-1-light --policies oracle,masked:lookahead \
        --seeds 0,1 --out results/room-planner/validation

A cell whose file exists is not run again (the benchmark's own store, so an interrupted
run resumes). Every policy of a scenario x seed runs
before the next, so a stopped run leaves complete pairs. ``--set key=value`` changes the
suite's base config (e.g. ``planner.base=lookahead``), as ``benchmark`` does.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from marl_sched.benchmark.cells import Cell, CellStore, run_cell
from marl_sched.benchmark.suite import DEFAULT_SUITE, load_suite, track_overrides


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", required=True, choices=("train", "validation"))
    ap.add_argument("--scenarios", required=True)
    ap.add_argument("--policies", required=True)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--track", default="placement")
    ap.add_argument("--out", required=True)
    ap.add_argument("--set", action="append", default=[], help="a config override key=value")
    args = ap.parse_args(argv)
    suite = load_suite(DEFAULT_SUITE)
    names = {s.name for s in suite.split(args.split)}
    scenarios = args.scenarios.split(",")
    bad = [s for s in scenarios if s not in names]
    if bad:
        print(f"--scenarios: not in the {args.split} split: {', '.join(bad)}", file=sys.stderr)
        return 2
    policies = args.policies.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    store = CellStore(args.out)
    store.dir.mkdir(parents=True, exist_ok=True)
    todo = [
        (sc, p, s) for sc in scenarios for s in seeds for p in policies
        if not store.done(Cell(sc, p, s, track=args.track))
    ]  # fmt: skip
    t0 = time.time()
    log = Path(args.out) / "timing.jsonl"
    for i, (sc, p, s) in enumerate(todo, 1):
        c0 = time.time()
        spec = {
            "suite": str(DEFAULT_SUITE), "split": args.split, "scenario": sc, "policy": p,
            "seed": s, "track": args.track,
            "track_overrides": list(track_overrides(args.track)), "overrides": args.set,
        }  # fmt: skip
        result = run_cell(spec)
        store.save(Cell(sc, p, s, track=args.track), result)
        took = time.time() - c0
        with log.open("a") as fh:
            fh.write(json.dumps({"scenario": sc, "policy": p, "seed": s, "s": took}) + "\n")
        eta = (time.time() - t0) / i * (len(todo) - i)
        print(f"[{i}/{len(todo)}] {sc} {p} s{s}: {took:.0f} s, ETA {eta / 60:.0f} min", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
