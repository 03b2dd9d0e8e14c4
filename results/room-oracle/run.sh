#!/bin/bash
# Stage A and the later stages of results/room-oracle/README.md: `bash results/room-oracle/run.sh oracle` and `... planner` (two processes).
cd "$(dirname "$0")/../.."  # the repository root
export OMP_NUM_THREADS=1
A=pollux-1-heavy,pollux-7-heavy,sia-philly-5-heavy,sia-philly-7-heavy,sia-philly-8-heavy,pollux-1-medium,pollux-7-medium,sia-philly-5-medium,sia-philly-7-medium,sia-philly-8-medium
L=pollux-1-light,pollux-7-light,sia-philly-5-light,sia-philly-7-light,sia-philly-8-light
B=philly-52000-heavy,philly-57000-heavy,sia-new-6-heavy,philly-52000-medium,philly-57000-medium,sia-new-6-medium,alibaba-100-medium
SETS="--set planner.base=masked:lookahead --set planner.min_run_s=3600"
OUT=results/room-oracle/validation
if [ "$1" = oracle ]; then
  for s in 0 1 2; do python results/room-planner/run_cells.py --split validation --scenarios $A --policies masked:lookahead,oracle --seeds $s --out $OUT $SETS; done
  for s in 0 1; do python results/room-planner/run_cells.py --split validation --scenarios $A --policies oracle-lengths,oracle-arrivals --seeds $s --out $OUT $SETS --set planner.k=2; done  # stage D
  for s in 0 1 2; do python results/room-planner/run_cells.py --split validation --scenarios $L --policies masked:lookahead,oracle --seeds $s --out $OUT $SETS; done
  python results/room-planner/run_cells.py --split validation --scenarios $B --policies masked:lookahead,oracle --seeds 0 --out $OUT $SETS
else
  for s in 0 1 2; do python results/room-planner/run_cells.py --split validation --scenarios $A --policies planner --seeds $s --out $OUT $SETS --set planner.k=2; done
fi
echo DONE
