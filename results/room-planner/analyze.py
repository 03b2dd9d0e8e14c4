"""Room above masked:lookahead by the planner, the oracle and the unmasked lookahead:
each one's geomean avg-JCT ratio over masked:lookahead, paired on scenario and seed,
per load tier and over all (interval, MDE, queue share, JCT over isolated run time:
the paired comparison of ``results/room-rules/analyze.py``, reused). Reads the cells of
``validation/``, ``../lookahead-learned/`` (the learned-predictor lookahead, a
contender: ``marl-sched benchmark``) and ``pilot-train-ffbase/``; writes ``room.csv``
and ``room.md`` here.

    python results/room-planner/analyze.py
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
_RULES = HERE.parent / "room-rules" / "analyze.py"
_spec = importlib.util.spec_from_file_location("room_rules", _RULES)
rules = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rules)

REF = "masked:lookahead"
ROWS = ("oracle", "planner", "lookahead", "masked:lookahead-learned")


def read(folder: Path) -> dict:
    """Every finished cell of ``folder`` by (scenario, policy, seed)."""
    rows = [json.loads(p.read_text())["row"] for p in sorted((folder / "cells").glob("*.json"))]
    return {(r["scenario"], r["policy"], int(r["seed"])): r for r in rows}


def main() -> None:
    out = []
    folders = (("validation", HERE / "validation"),
               ("validation", HERE.parent / "lookahead-learned"),
               ("train pilot, first-fit base", HERE / "pilot-train-ffbase"))  # fmt: skip
    for label, folder in folders:
        cells = read(folder)
        for pol in ROWS:
            for tier in rules.TIERS:
                row = rules.compare(cells, pol, cells, tier, REF)
                if row is not None:
                    out.append({"split": label, "comparison": f"{pol} / {REF}", **row})
    rules.write_csv(out, HERE / "room.csv")
    lines = [
        "| split | comparison | tier | scenarios | geomean ratio [95 % CI] | MDE pairs "
        "| queue share row / ref | JCT/isolated row / ref |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in out:
        ci = f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]" if r["ci_low"] is not None else "(no CI)"
        mde = f"{r['mde_pairs_pct']:.1f} %" if r["pairs"] > 1 else "—"
        lines.append(
            f"| {r['split']} | {r['comparison']} | {r['tier']} | {r['scenarios']} | "
            f"{r['geomean_ratio']:.3f} {ci} | {mde} | {r['queue_share_rule']:.3f} / "
            f"{r['queue_share_ref']:.3f} | {r['slowdown_rule']:.2f} / {r['slowdown_ref']:.2f} |"
        )
    (HERE / "room.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
