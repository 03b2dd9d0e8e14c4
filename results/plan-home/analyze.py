"""The cheaper plan (``masked:lookahead-learned-home``) against the plan hint's plan
(``masked:lookahead-learned``) on the validation split's placement track, paired on
scenario and evaluation seed (README.md: the registered plan). Reads ``bench/runs.csv``
and ``plan_cost.json``; writes ``room.csv`` and ``room.md`` here (``report``) and prints
the reading.
The comparison is ``results/room-rules/analyze.py``'s (geomean ratio of average JCT,
hierarchical-bootstrap 95 % CI over scenarios and seeds, MDE at 80 % power).

    python results/plan-home/analyze.py
"""

from __future__ import annotations

import csv
import json
import runpy
from pathlib import Path

HERE = Path(__file__).resolve().parent
rules = runpy.run_path(str(HERE.parent / "room-rules" / "analyze.py"))
PLAIN, HOME = "masked:lookahead-learned", "masked:lookahead-learned-home"
TIERS = ("light", "medium", "heavy", "contention", "all")
#: the registered bound: the whole interval below it
BOUND = 1.01


def main() -> None:
    with (HERE / "bench" / "runs.csv").open(newline="") as fh:
        rows = {(r["scenario"], r["policy"], int(r["seed"])): r for r in csv.DictReader(fh)}
    lines = rules["report"]([(f"{HOME} / {PLAIN}", rows, HOME, rows, PLAIN)], HERE, TIERS)
    print("\n".join(lines))
    with (HERE / "room.csv").open(newline="") as fh:
        row = next(r for r in csv.DictReader(fh) if r["tier"] == "all")
    whole = {k: float(row[k]) if row[k] else None for k in ("geomean_ratio", "ci_low", "ci_high")}
    cost = {r["servers"]: r for r in json.loads((HERE / "plan_cost.json").read_text())["rows"]}
    big = cost[4000]
    cheaper = big[HOME]["p99_ms"] < big[PLAIN]["p99_ms"]
    within = whole["ci_high"] is not None and whole["ci_high"] < BOUND
    print(
        f"all tiers {whole['geomean_ratio']:.3f} [{whole['ci_low']:.3f}, {whole['ci_high']:.3f}]; "
        f"plan p99 at 4,000 servers {big[HOME]['p99_ms']:.1f} vs {big[PLAIN]['p99_ms']:.1f} ms: "
        + ("the registered rule is met" if within and cheaper else "the registered rule is not met")
    )


if __name__ == "__main__":
    main()
