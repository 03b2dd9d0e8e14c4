"""Train the MARL agents on ``configs/default.yaml`` over several seeds and compare them
with every heuristic on trace windows not used in training.

::

    python experiments/train_marl.py [--quick] [--seeds 3] [--seed 0] [--iterations N]
                                     [--runs DIR] [--reuse]

Training uses jobs 0..1999 of the shipped Philly sample (``workload`` of the config)
and Pollux workloads 2-5 (``train.extra_windows``); checkpoint selection uses the
validation windows (Philly sample jobs 2000..2199 and Pollux workload 6, ``train.eval_*``);
the test windows below share no job with either. The seeds train as Ray Tune trials of
one experiment (``marl-sched train --seeds N --out DIR/train``, two at a time on two
cores); for each seed the checkpoint with the best validation JCT
(``DIR/train/seed<S>/checkpoints/best``) is rolled out greedily on every test window,
next to every heuristic, through ``marl_sched.compare.run_compare``.

Prints one table per window (average JCT and the margin of MARL over each baseline,
``(baseline - marl) / baseline``, mean ± std over seeds), then, as its last line, one
JSON object with every figure.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

from marl_sched.compare import run_compare
from marl_sched.config import REPO_ROOT
from marl_sched.policies import heuristic_names

CONFIG = str(REPO_ROOT / "configs" / "default.yaml")
TRACES = REPO_ROOT.parent / "shared" / "data" / "traces"
HEURISTICS = heuristic_names()
WINDOWS = {
    "philly-sample-2200": {"trace": str(REPO_ROOT / "configs" / "traces" / "philly_sample.csv"),
                           "start": 2200, "max_jobs": 300},
    "philly-20000": {"trace": str(TRACES / "philly.csv"), "start": 20000, "max_jobs": 500},
    "philly-60000": {"trace": str(TRACES / "philly.csv"), "start": 60000, "max_jobs": 500},
    "alibaba-0": {"trace": str(TRACES / "alibaba_openb_pods.csv"), "start": 0, "max_jobs": 500},
    # Pollux workloads 2-5 train, 6 validates (configs/default.yaml); 1, 7, 8 held out
    **{f"pollux-{k}": {"trace": str(TRACES / "pollux_workloads" / f"workload-{k}.csv"),
                       "start": 0, "max_jobs": 500} for k in (1, 7, 8)},
}  # fmt: skip
QUICK_WINDOWS = ("philly-sample-2200", "philly-60000")


def train(seeds: int, first: int, out: Path, iterations: int, reuse: bool,
          config: str = CONFIG) -> list[dict]:  # fmt: skip
    """Train the seeds as one Tune experiment (unless reusing a finished one); per seed
    its wall time and best checkpoint."""
    from marl_sched.cli import main as cli

    if not (reuse and (out / "experiment.json").is_file()):
        rc = cli(["train", "--config", config, "--out", str(out), "--iterations", str(iterations),
                  "--seeds", str(seeds), "--seed", str(first), "--quiet"])  # fmt: skip
        if rc != 0:
            sys.exit(rc)
    trials = json.loads((out / "experiment.json").read_text())["trials"]
    rows = []
    for t in trials:
        run = out / t["name"]
        latest = run / "checkpoints" / (run / "checkpoints" / "latest").read_text().strip()
        state = json.loads((latest / "state.json").read_text())
        best = state.get("best") or [latest.name, None]
        rows.append({
            "seed": t["seed"],
            "iterations": state["iteration"],
            "env_steps": state["env_steps"],
            "wall_s": state["wall_s"],
            "checkpoint": str(run / "checkpoints" / best[0]),
            "validation_avg_jct_s": best[1],
        })  # fmt: skip
    return rows


def compare(
    config: str,
    policies: list[str],
    out: Path,
    window: dict,
    reuse: bool,
    checkpoint: str | None = None,
) -> list[dict]:
    """``run_compare`` rows, or with ``reuse`` the ``results.csv`` a finished earlier
    run of the same comparison left in ``out``."""
    done = out / "results.csv"
    if reuse and done.is_file():
        with done.open(newline="", encoding="utf-8") as f:
            rows = [{**r, "avg_jct_s": float(r["avg_jct_s"])} for r in csv.DictReader(f)]
        if sorted(r["policy"] for r in rows) == sorted(policies):
            return rows
    return run_compare(config, policies, out, options(window), checkpoint=checkpoint)


def options(window: dict) -> dict:
    return {"trace_format": None, "load": None, "seed": None, **window}


def trace_exists(window: dict) -> bool:
    """Is the window's trace on disk (the full traces live in ``../shared/data``)?"""
    return Path(window["trace"]).exists()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 windows, reuse runs")
    parser.add_argument("--config", default=CONFIG, help="training config")
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds")
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("--runs", default="/tmp/marl_runs")
    parser.add_argument("--reuse", action="store_true",
                        help="reuse finished runs and comparisons in --runs")  # fmt: skip
    args = parser.parse_args()
    runs = Path(args.runs)
    windows = {k: WINDOWS[k] for k in (QUICK_WINDOWS if args.quick else WINDOWS)}

    reuse = args.reuse or args.quick
    trained = train(args.seeds, args.seed, runs / "train", args.iterations, reuse, args.config)
    for t in trained:
        print(
            f"seed {t['seed']}: {t['iterations']} iterations, {t['env_steps']:.0f} env steps, "
            f"{t['wall_s'] / 60:.1f} min, best {Path(t['checkpoint']).name} "
            f"(validation avg JCT {t['validation_avg_jct_s']:.0f} s)"
        )

    figures: dict = {"seeds": trained, "windows": {}}
    for name, window in windows.items():
        t0 = time.perf_counter()
        out = runs / "compare" / name
        rows = compare(args.config, HEURISTICS, out / "heuristics", window, reuse)
        base = {r["policy"]: r["avg_jct_s"] for r in rows}
        marl = []
        for t in trained:
            r = compare(args.config, ["marl"], out / f"marl-s{t['seed']}", window, reuse,
                        checkpoint=t["checkpoint"])  # fmt: skip
            marl.append(r[0]["avg_jct_s"])
        ranked = sorted(base.items(), key=lambda x: x[1])
        margins = {b: [(jct - m) / jct for m in marl] for b, jct in ranked}
        figures["windows"][name] = {
            "window": window,
            "heuristics_avg_jct_s": base,
            "marl_avg_jct_s": marl,
            "margin_mean": {b: statistics.mean(v) for b, v in margins.items()},
            "margin_std": {b: statistics.pstdev(v) for b, v in margins.items()},
            "beats_every_heuristic": all(m < min(base.values()) for m in marl),
        }
        print(
            f"\n== {name}: {window['trace']} start {window['start']} "
            f"({time.perf_counter() - t0:.0f} s)"
        )
        print(f"{'policy':>20}  {'avg JCT (s)':>12}  {'MARL margin (mean ± std over seeds)':>36}")
        print(
            f"{'marl':>20}  {statistics.mean(marl):12.0f}  "
            f"{'seeds: ' + ', '.join(f'{m:.0f}' for m in marl):>36}"
        )
        for b, v in margins.items():
            print(
                f"{b:>20}  {base[b]:12.0f}  "
                f"{100 * statistics.mean(v):+17.1f}% ± {100 * statistics.pstdev(v):.1f}%"
            )
    wins = [w["beats_every_heuristic"] for w in figures["windows"].values()]
    figures["windows_won"] = f"{sum(wins)}/{len(wins)}"
    print(f"\nMARL beats every heuristic (all seeds) on {figures['windows_won']} windows")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
