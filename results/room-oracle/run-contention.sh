#!/bin/bash
# Stage C of results/room-oracle/README.md (starts when `run.sh planner` has ended).
cd "$(dirname "$0")/../.."  # the repository root
export OMP_NUM_THREADS=1
while pgrep -f "run.sh planner" > /dev/null; do sleep 30; done
C=pollux-1-contention,sia-philly-5-contention,sia-philly-7-contention,sia-philly-8-contention
SETS="--set planner.base=masked:lookahead --set planner.min_run_s=3600 --set planner.k=2"
for s in 0 1 2; do python results/room-planner/run_cells.py --split validation --scenarios $C --policies masked:lookahead,oracle,planner --seeds $s --out results/room-oracle/validation $SETS; done
echo DONE
