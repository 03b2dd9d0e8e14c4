"""The smaller network (``hidden: 32``, one hierarchy block) against the shipped
``checkpoints/marl-default`` and ``masked:lookahead``, on the validation split's
placement track, paired on scenario and evaluation seed (README.md: the registered
plan). Reads ``bench/runs.csv`` (the three small networks, one training run each, and
``masked:lookahead``) and ``bench-default/runs.csv`` (``marl-default``); writes
``room.csv``, ``room.md`` and ``strata.md`` here. The comparisons are
``results/marl-upgrade/analyze.py``'s (geomean ratio of average JCT,
hierarchical-bootstrap 95 % CI over scenarios, runs and seeds, MDE at 80 % power).

    python results/marl-small/analyze.py
"""

from __future__ import annotations

import runpy
from pathlib import Path

HERE = Path(__file__).resolve().parent
upgrade = runpy.run_path(str(HERE.parent / "marl-upgrade" / "analyze.py"))
rules = upgrade["rules"]
BASE = "masked:lookahead"
DEFAULT = "marl-default"
TIERS = ("light", "medium", "heavy", "contention", "all")


def main() -> None:
    read, by_run, pooled = upgrade["read"], upgrade["by_run"], upgrade["pooled"]
    bench = read(HERE / "bench" / "runs.csv")
    refs = {(r["scenario"], r["policy"], int(r["seed"])): r for r in bench if r["policy"] == BASE}
    default = by_run(read(HERE / "bench-default" / "runs.csv"))
    upgrade["pooled_refs"](refs, default, DEFAULT)
    small = by_run(bench)
    out = []
    for ref in (DEFAULT, BASE):
        for tier in TIERS:
            row = pooled(small, refs, ref, tier)
            if row is not None:
                out.append({**row, "comparison": f"small ({len(small)} runs pooled) / {ref}"})
    for k, cells in small.items():
        one = {(sc, f"small (run {k})", s): r for (sc, s), r in cells.items()}
        row = rules["compare"](one, f"small (run {k})", refs, "all", DEFAULT)
        if row is not None:
            out.append({"comparison": f"small (run {k}) / {DEFAULT}", **row})
    for tier in TIERS:
        row = rules["compare"](refs, DEFAULT, refs, tier, BASE)
        if row is not None:
            out.append({"comparison": f"{DEFAULT} / {BASE}", **row})
    rules["write_csv"](out, HERE / "room.csv")
    lines = rules["markdown_table"](out)
    (HERE / "room.md").write_text("\n".join(lines) + "\n")
    strata = upgrade["strata"](small, refs)
    (HERE / "strata.md").write_text("\n".join(strata).replace("marl /", "small /") + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
