"""The upgrade lever on the full track: ``upgrade`` over ``masked:lookahead+lc`` (the
track's reference) and over ``length-aware`` (the same placement without the moves),
paired on scenario and seed, per tier and over all (``results/room-rules/analyze.py``'s
comparison). Reads ``runs.csv`` (the benchmark's row per cell; its cells are not
kept, the rows hold every figure read); writes ``room.csv`` and ``room.md`` here.

    python results/room-upgrade/analyze.py
"""

from __future__ import annotations

import csv
import runpy
from pathlib import Path

HERE = Path(__file__).resolve().parent
# the comparison and its report (results/room-rules/analyze.py)
rules = runpy.run_path(str(HERE.parent / "room-rules" / "analyze.py"))

#: (row, reference)
COMPARISONS = (
    ("upgrade", "masked:lookahead+lc"),
    ("upgrade", "length-aware"),
    ("length-aware", "masked:lookahead+lc"),
    ("masked:lookahead+upgrade", "masked:lookahead+lc"),
    ("masked:lookahead+upgrade", "masked:lookahead"),
)
TIERS = ("light", "medium", "heavy", "contention", "all")


def main() -> None:
    with (HERE / "runs.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    cells = {(r["scenario"], r["policy"], int(r["seed"])): r for r in rows}
    comparisons = [(f"{pol} / {ref}", cells, pol, cells, ref) for pol, ref in COMPARISONS]
    print("\n".join(rules["report"](comparisons, HERE, TIERS, queue_digits=3)))


if __name__ == "__main__":
    main()
