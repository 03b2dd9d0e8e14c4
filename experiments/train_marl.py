"""Train the MARL agents on ``configs/default.yaml`` over several seeds and compare them
with every heuristic on trace windows not used in training.

::

    python experiments/train_marl.py [--quick] [--seeds 0,1,2] [--iterations N]
                                     [--runs DIR] [--reuse]

Training uses jobs 0..1999 of the shipped Philly sample (``workload`` of the config)
and Pollux workloads 2-5 (``train.extra_windows``); checkpoint selection uses the
validation windows (Philly sample jobs 2000..2199 and Pollux workload 6, ``train.eval_*``);
the test windows below share no job with either. For each seed the checkpoint with the
best validation JCT (``DIR/s<seed>/checkpoints/best``) is rolled out greedily on every
test window, next to every heuristic, through ``marl_sched.compare.run_compare``.

Prints one table per window (average JCT and the margin of MARL over each baseline,
``(baseline - marl) / baseline``, mean ± std over seeds), then, as its last line, one
JSON object with every figure.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
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


def train(seed: int, out: Path, iterations: int, reuse: bool, config: str = CONFIG) -> dict:
    """Train one seed (unless reusing a finished run); its wall time and best checkpoint."""
    done = out / "checkpoints" / "latest"
    if not (reuse and done.is_file()):
        cmd = [sys.executable, "-m", "marl_sched.cli", "train", "--config", config,
               "--out", str(out), "--iterations", str(iterations), "--seed", str(seed),
               "--quiet"]  # fmt: skip
        subprocess.run(cmd, check=True)
    latest = out / "checkpoints" / done.read_text().strip()
    state = json.loads((latest / "state.json").read_text())
    best = state.get("best") or [latest.name, None]
    return {
        "seed": seed,
        "iterations": state["iteration"],
        "env_steps": state["env_steps"],
        "wall_s": state["wall_s"],
        "checkpoint": str(out / "checkpoints" / best[0]),
        "validation_avg_jct_s": best[1],
    }


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
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("--runs", default="/tmp/marl_runs")
    parser.add_argument("--reuse", action="store_true",
                        help="reuse finished runs and comparisons in --runs")  # fmt: skip
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = Path(args.runs)
    windows = {k: WINDOWS[k] for k in (QUICK_WINDOWS if args.quick else WINDOWS)}

    reuse = args.reuse or args.quick
    trained = [train(s, runs / f"s{s}", args.iterations, reuse, args.config) for s in seeds]
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
