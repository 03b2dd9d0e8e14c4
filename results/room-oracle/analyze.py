"""Room above masked:lookahead by the oracle, the half-oracles and the planner whose
rollout base is masked:lookahead itself: each one's geomean avg-JCT ratio over it,
paired on scenario and seed, per load tier and over all (interval, MDE flat and by
scenario, queue share, JCT over isolated run time: ``results/room-rules/analyze.py``'s
comparison, reused).
Reads ``validation/cells``, ``validation-margin/cells`` (the planner with
``planner.margin=0.002``) and ``validation-k8/cells`` (the same with K = 8), each
planner paired with the ``masked:lookahead`` cells beside it;
writes ``room.csv`` and ``room.md`` here.

    python results/room-oracle/analyze.py
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location(
    "room_rules", HERE.parent / "room-rules" / "analyze.py"
)
rules = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rules)
_spec = importlib.util.spec_from_file_location(
    "room_planner", HERE.parent / "room-planner" / "analyze.py"
)
planner = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(planner)

REF = "masked:lookahead"
ROWS = ("oracle", "oracle-lengths", "oracle-arrivals", "planner")
TIERS = ("light", "medium", "heavy", "contention", "all")


#: (folder, policy name in its cells, the row's label)
SOURCES = [("validation", pol, pol) for pol in ROWS] + [
    ("validation-margin", "planner", "planner, margin 0.002"),
    ("validation-k8", "planner", "planner, margin 0.002, K = 8"),
]


def main() -> None:
    folders = {f: planner.read(HERE / f) for f in {f for f, _, _ in SOURCES}}
    comparisons = [
        (f"{label} / {REF}", folders[f], pol, folders[f], REF) for f, pol, label in SOURCES
    ]
    print("\n".join(rules.report(comparisons, HERE, TIERS, queue_digits=3)))


if __name__ == "__main__":
    main()
