"""Spread-cost sensitivity on the validation split (heuristics; no policy migrates).

Run on 2026-11-26 (commit e439996 + this folder), from the repo root:

    PYTHONPATH=. python benchmarks/results/spread-validation/run.py /tmp/sens-val 1 \
        benchmarks/results/spread-validation/suite.yaml "the 11 medium-tier scenarios"

``suite.yaml`` is benchmarks/default.yaml with only its 11 medium-tier validation
scenarios (a subset, to fit the shared 2-core machine: 110 cells, 1,174 s). This calls
what ``marl-sched benchmark --split validation --gavel-spread`` calls, without a track
(the branch predates ``simulation.migration``; heuristics never migrate). The folders
hold each variant's runs.csv and report; sensitivity.md / .csv the comparison.
"""

import sys
import time
from pathlib import Path

from marl_sched.benchmark.command import run_benchmark
from marl_sched.benchmark.sensitivity import check_sensitivity, run_sensitivity

out = Path(sys.argv[1])
seeds = int(sys.argv[2])
policies = ["first-fit", "tetris", "locality", "congestion-aware", "interference-aware"]
variants = check_sensitivity(None, True, None)
t = time.time()
path = run_sensitivity(
    variants,
    lambda o, ov: run_benchmark(
        sys.argv[3],
        "validation",
        policies,
        seeds,
        o,
        overrides=ov,
        ledger=None,
        figures=True,
        log=print,
    )[0],
    out,
    [],
    f"validation split, heuristics (no policy migrates), {seeds} seed(s), " + sys.argv[4],
)
print(path.read_text())
print("wall", time.time() - t)
