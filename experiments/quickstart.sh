#!/usr/bin/env bash
# Set up a fresh machine and run the main job on the embedded default config.
#   bash experiments/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
python -m pip install --quiet torch==2.13.0          # the CPU build, before anything pulls CUDA
python -m pip install --quiet -e ".[dev]"
out=runs/quickstart
# every heuristic on the default trace window, then the comparison table
marl-sched compare --config configs/default.yaml --trace configs/traces/philly_sample.csv --max-jobs 2000 \
  --policies random,first-fit,load-balance,tetris,locality,congestion-aware,interference-aware \
  --out "$out"
