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
python -m pip install --quiet -c configs/constraints.txt torch==2.13.0  # CPU build first
python -m pip install --quiet -c configs/constraints.txt -e ".[dev]"  # pinned versions
out=runs/quickstart
# Every policy of the README's results table (the shipped MARL agents,
# checkpoints/marl-default; Harmony; MLFS; every heuristic and control) and the rule the
# agents imitate, masked:lookahead (a reference: it scores proposals with the
# simulator's own performance model), over 3 seeds, on the default config's own window (jobs 200-1999 of the shipped Philly sample at the
# medium load tier, after a 200-job warm-up; the agents' training episodes come from
# this window, so it is a development figure: test figures come from
# `marl-sched benchmark --split test`, docs/benchmark.md), then the comparison table.
marl-sched compare --config configs/default.yaml \
  --policies marl,masked:lookahead,mlfs-rl,harmony,mlfs-h,masked:interference-aware,masked:speed-aware,masked:first-fit,speed-aware,interference-aware,resident-aware,first-fit,locality,tetris,congestion-aware,load-balance,random \
  --seeds 3 --out "$out"
