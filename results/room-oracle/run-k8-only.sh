#!/bin/bash
# Stage F of results/room-oracle/README.md in its own process (addendum 20:19).
cd "$(dirname "$0")/../.."  # the repository root
export OMP_NUM_THREADS=1
while pgrep -f "benchmark --split validation --track full" > /dev/null; do sleep 20; done
A=pollux-1-heavy,pollux-7-heavy,sia-philly-5-heavy,sia-philly-7-heavy,sia-philly-8-heavy,pollux-1-medium,pollux-7-medium,sia-philly-5-medium,sia-philly-7-medium,sia-philly-8-medium
SETS="--set planner.base=masked:lookahead --set planner.min_run_s=3600 --set planner.k=8 --set planner.margin=0.002"
python results/room-planner/run_cells.py --split validation --scenarios $A --policies masked:lookahead,planner --seeds 0 --out results/room-oracle/validation-k8 $SETS
echo DONE
