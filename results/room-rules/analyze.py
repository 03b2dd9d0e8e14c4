"""Room above masked:lookahead: each rule's geomean avg-JCT ratio over it, paired.

Reads the cells of ``noisy/`` and ``oracle/`` (``marl-sched benchmark`` folders; their
``cells.csv`` when the cells are gone)
and writes ``room.csv`` and ``room.md`` here. Per comparison, per load tier and over
all scenarios: the geomean of avg JCT(rule) / avg JCT(masked:lookahead) paired on
scenario and seed, its hierarchical-bootstrap 95 % interval
(``marl_sched.benchmark.stats.geomean_ratio``), and the minimum detectable effect at
80 % power, alpha 0.05 (``marl_sched.benchmark.power``), flat over scenario x seed
pairs and with scenarios as the unit; beside them each side's mean queue share of
JCT and mean slowdown (JCT over isolated run time). Run from the repository root:

    python results/room-rules/analyze.py
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from marl_sched.benchmark.power import as_ratio_change, mde_log, mde_log_clustered
from marl_sched.benchmark.stats import geomean_ratio

HERE = Path(__file__).resolve().parent
REF = "masked:lookahead"
RULES = ("length-aware", "defer-long", "first-fit")
TIERS = ("light", "medium", "heavy", "all")


FIELDS = ("scenario", "policy", "seed", "tier", "avg_jct_s", "avg_queue_s", "avg_slowdown")


def read(mode: str) -> dict[tuple[str, str, int], dict]:
    """Every finished cell of the folder (``cells/*.json``, written to ``cells.csv``
    beside it, which is read when the cells are not there), by (scenario, policy, seed)."""
    folder = HERE / mode
    if (folder / "cells").is_dir():
        cells = sorted((folder / "cells").glob("*.json"))
        rows = [{k: json.loads(p.read_text())["row"][k] for k in FIELDS} for p in cells]
        with (folder / "cells.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(rows)
    else:
        with (folder / "cells.csv").open() as fh:
            rows = list(csv.DictReader(fh))
    return {(r["scenario"], r["policy"], int(r["seed"])): r for r in rows}


def compare(
    rule_rows: dict, rule_key: str, ref_rows: dict, tier: str, ref_key: str = REF
) -> dict | None:
    by_sc: dict[str, list[float]] = defaultdict(list)
    q_rule, q_ref, s_rule, s_ref = [], [], [], []
    for (sc, pol, seed), row in sorted(ref_rows.items()):
        if pol != ref_key or (tier != "all" and row["tier"] != tier):
            continue
        other = rule_rows.get((sc, rule_key, seed))
        if other is None:
            continue
        a, b = float(other["avg_jct_s"]), float(row["avg_jct_s"])
        by_sc[sc].append(math.log(a / b))
        q_rule.append(float(other["avg_queue_s"]) / a)
        q_ref.append(float(row["avg_queue_s"]) / b)
        s_rule.append(float(other["avg_slowdown"]))
        s_ref.append(float(row["avg_slowdown"]))
    if not by_sc:
        return None
    scores = [np.asarray(v) for v in by_sc.values()]
    return summary_row(tier, scores, np.concatenate(scores), scores, (q_rule, q_ref, s_rule, s_ref))


def summary_row(tier: str, scores, flat, by_scenario, sides) -> dict:
    """One comparison's row in one tier: the geomean ratio of ``scores`` (log ratios in
    ``marl_sched.benchmark.stats.Scores`` layout) with its interval, the MDE over the
    ``flat`` pairs and with ``by_scenario`` (one array per scenario) as the unit, and
    the means of ``sides`` = (queue shares of the row, of the reference, slowdowns of
    the row, of the reference)."""
    est = geomean_ratio(scores)
    q_rule, q_ref, s_rule, s_ref = sides
    return {
        "tier": tier,
        "scenarios": len(scores),
        "pairs": len(flat),
        "geomean_ratio": est.point,
        "ci_low": est.low,
        "ci_high": est.high,
        "mde_pairs_pct": 100 * as_ratio_change(mde_log(flat)),
        "mde_scenarios_pct": 100 * as_ratio_change(mde_log_clustered(by_scenario)),
        # mean over cells of avg queue time / avg JCT, and of avg JCT / isolated run time
        "queue_share_rule": float(np.mean(q_rule)),
        "queue_share_ref": float(np.mean(q_ref)),
        "slowdown_rule": float(np.mean(s_rule)),
        "slowdown_ref": float(np.mean(s_ref)),
    }


def write_csv(rows: list[dict], path: Path) -> None:
    """``rows`` (one comparison x tier each) as CSV, floats to 4 decimals."""
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: f"{v:.4f}" if isinstance(v, float) else v for k, v in r.items()})


def markdown_table(rows: list[dict], queue_digits: int = 2) -> list[str]:
    """``rows`` (one comparison x tier each) as the lines of a Markdown table: interval,
    MDE over pairs and with scenarios as the unit, queue share and JCT over isolated run
    time of each side (queue shares to ``queue_digits`` decimals)."""
    lines = [
        "| comparison | tier | n (sc x seeds) | geomean ratio [95 % CI] | MDE pairs / scenarios "
        "| queue share rule / ref | JCT/isolated rule / ref |",
        "|---|---|---|---|---|---|---|",
    ]
    q = queue_digits
    for r in rows:
        ci = f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]" if r["ci_low"] is not None else "(no CI)"
        lines.append(
            f"| {r['comparison']} | {r['tier']} | {r['scenarios']} x "
            f"{r['pairs'] / r['scenarios']:.3g} | {r['geomean_ratio']:.3f} {ci} | "
            f"{r['mde_pairs_pct']:.1f} % / {r['mde_scenarios_pct']:.1f} % | "
            f"{r['queue_share_rule']:.{q}f} / {r['queue_share_ref']:.{q}f} | "
            f"{r['slowdown_rule']:.2f} / {r['slowdown_ref']:.2f} |"
        )
    return lines


def report(comparisons, here: Path, tiers, queue_digits: int = 2) -> list[str]:
    """Every ``(label, row cells, row policy, reference cells, reference policy)`` of
    ``comparisons`` per tier (:func:`compare`) in ``here/room.csv`` and ``here/room.md``
    (:func:`markdown_table`); returns the Markdown lines."""
    out = []
    for label, rows, key, ref_rows, ref_key in comparisons:
        for tier in tiers:
            row = compare(rows, key, ref_rows, tier, ref_key)
            if row is not None:
                out.append({"comparison": label, **row})
    write_csv(out, here / "room.csv")
    lines = markdown_table(out, queue_digits)
    (here / "room.md").write_text("\n".join(lines) + "\n")
    return lines


def main() -> None:
    runs = {mode: read(mode) for mode in ("noisy", "oracle") if (HERE / mode).is_dir()}
    # (label, rule, its mode, reference mode, reference policy)
    plans = []
    for rule in RULES:
        plans.append((f"{rule} (noisy) / lookahead (noisy)", rule, "noisy", "noisy", REF))
        if "oracle" in runs:
            plans.append((f"{rule} (oracle) / lookahead (noisy)", rule, "oracle", "noisy", REF))
            plans.append((f"{rule} (oracle) / lookahead (oracle)", rule, "oracle", "oracle", REF))
    # the levers one at a time: deferral on top of length-aware, exact lengths over noisy
    plans.append(
        ("defer-long / length-aware (noisy)", "defer-long", "noisy", "noisy", "length-aware")
    )
    plans.append(
        ("length-aware / first-fit (noisy)", "length-aware", "noisy", "noisy", "first-fit")
    )
    if "oracle" in runs:
        for rule in RULES[:2]:
            plans.append((f"{rule} (oracle) / {rule} (noisy)", rule, "oracle", "noisy", rule))
    lines = report(
        [(label, runs[mode], rule, runs[ref_mode], ref_key)
         for label, rule, mode, ref_mode, ref_key in plans],
        HERE, TIERS,
    )  # fmt: skip
    print("\n".join(lines))


if __name__ == "__main__":
    main()
