#!/bin/bash
# The stages after C and E in results/room-oracle/README.md (addendum 19:27):
# `bash run-after.sh planner` waits for run-margin.sh, `bash run-after.sh oracle` for run-contention-margin.sh.
cd "$(dirname "$0")/../.."  # the repository root
export OMP_NUM_THREADS=1
L=pollux-1-light,pollux-7-light,sia-philly-5-light,sia-philly-7-light,sia-philly-8-light
B=philly-52000-heavy,philly-57000-heavy,sia-new-6-heavy,philly-52000-medium,philly-57000-medium,sia-new-6-medium,alibaba-100-medium,sia-new-6-contention
SETS="--set planner.base=masked:lookahead --set planner.min_run_s=3600"
if [ "$1" = planner ]; then
  while pgrep -f "run-margin.sh" > /dev/null; do sleep 20; done
  POL=masked:lookahead,planner; OUT=results/room-oracle/validation-margin
  SETS="$SETS --set planner.k=2 --set planner.margin=0.002"
else
  while pgrep -f "run-contention-margin.sh" > /dev/null; do sleep 20; done
  POL=masked:lookahead,oracle; OUT=results/room-oracle/validation
fi
for s in 0 1 2; do python results/room-planner/run_cells.py --split validation --scenarios $L --policies $POL --seeds $s --out $OUT $SETS; done
python results/room-planner/run_cells.py --split validation --scenarios $B --policies $POL --seeds 0 --out $OUT $SETS
echo DONE
