#!/bin/bash
# Stage C of results/room-oracle/README.md as run: the oracle into validation/, the margin planner into validation-margin/.
cd "$(dirname "$0")/../.."  # the repository root
export OMP_NUM_THREADS=1
C=pollux-1-contention,sia-philly-5-contention,sia-philly-7-contention,sia-philly-8-contention
SETS="--set planner.base=masked:lookahead --set planner.min_run_s=3600"
for s in 0 1 2; do
  python results/room-planner/run_cells.py --split validation --scenarios $C --policies masked:lookahead,oracle --seeds $s --out results/room-oracle/validation $SETS
  python results/room-planner/run_cells.py --split validation --scenarios $C --policies masked:lookahead,planner --seeds $s --out results/room-oracle/validation-margin $SETS --set planner.k=2 --set planner.margin=0.002
done
echo DONE
