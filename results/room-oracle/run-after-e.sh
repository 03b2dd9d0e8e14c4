#!/bin/bash
# Process 1 after stage E (addendum 20:19): its registered continuation.
cd "$(dirname "$0")/../.."  # the repository root
while pgrep -f "run-margin.sh" > /dev/null; do sleep 20; done
bash results/room-oracle/run-after.sh planner
