#!/bin/bash
# Stage E of results/room-oracle/README.md: the planner with planner.margin=0.002 on stage A.
cd "$(dirname "$0")/../.."  # the repository root
export OMP_NUM_THREADS=1
A=pollux-1-heavy,pollux-7-heavy,sia-philly-5-heavy,sia-philly-7-heavy,sia-philly-8-heavy,pollux-1-medium,pollux-7-medium,sia-philly-5-medium,sia-philly-7-medium,sia-philly-8-medium
SETS="--set planner.base=masked:lookahead --set planner.min_run_s=3600 --set planner.k=2 --set planner.margin=0.002"
for s in 0 1 2; do python results/room-planner/run_cells.py --split validation --scenarios $A --policies masked:lookahead,planner --seeds $s --out results/room-oracle/validation-margin $SETS; done
echo DONE
