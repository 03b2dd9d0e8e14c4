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
# The shipped MARL agents (checkpoints/marl-default), Harmony, MLFS and every heuristic
# on the held-out part of the shipped Philly sample (jobs 2200-2499: not used to
# train or select any checkpoint), then the comparison table.
marl-sched compare --config configs/default.yaml --trace configs/traces/philly_sample.csv \
  --start 2200 --max-jobs 300 \
  --policies marl,harmony,mlfs-h,mlfs-rl,random,first-fit,load-balance,tetris,locality,congestion-aware,interference-aware \
  --out "$out"
