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
# the comparison and the report, as the room study with the planner has them
_oracle = runpy.run_path(str(HERE.parent / "room-oracle" / "analyze.py"))

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
    lines = _oracle["report"]([(cells, pol, ref, pol) for pol, ref in COMPARISONS], HERE, TIERS)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
