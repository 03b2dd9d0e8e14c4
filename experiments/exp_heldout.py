"""Claim (a): MARL's average JCT against every baseline on held-out trace windows.

    python experiments/exp_heldout.py [--quick] [--out runs/exp_heldout]
                                      [--checkpoint checkpoints/marl-default]

Runs ``marl-sched compare`` (every heuristic, Harmony, MLF-H, MLF-RL and the shipped
MARL agents) on the windows of ``experiments/train_marl.py`` — none of them was used
to train or select any checkpoint — and prints, per window, each policy's average JCT
and MARL's margin over it, ``(baseline - marl) / baseline``. Writes ``heldout.md``,
``heldout.csv`` and ``heldout.png`` into ``--out``. Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from marl_sched.compare import run_compare
from marl_sched.config import REPO_ROOT
from marl_sched.metrics import write_report
from marl_sched.plots import bars
from marl_sched.policies import heuristic_names

CONFIG = str(REPO_ROOT / "configs" / "default.yaml")
BASELINES = ["harmony", "mlfs-h", "mlfs-rl", *heuristic_names()]


def main() -> None:
    # the held-out windows, defined once (experiments/ is on the path of a script)
    from train_marl import QUICK_WINDOWS, WINDOWS, options, trace_exists

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="two windows only")
    ap.add_argument("--out", default="runs/exp_heldout")
    ap.add_argument("--checkpoint", default=str(REPO_ROOT / "checkpoints" / "marl-default"))
    args = ap.parse_args()
    out = Path(args.out)
    names = QUICK_WINDOWS if args.quick else tuple(WINDOWS)
    rows, figures = [], {}
    t0 = time.perf_counter()
    for name in names:
        window = WINDOWS[name]
        if not trace_exists(window):
            print(f"skipping {name}: {window['trace']} not found")
            continue
        results = run_compare(
            CONFIG,
            ["marl", *BASELINES],
            out / name,
            options(window),
            checkpoint=args.checkpoint,
        )
        jct = {r["policy"]: r["avg_jct_s"] for r in results}
        marl = jct["marl"]
        print(f"\n{name}: MARL avg JCT {marl:,.0f} s")
        for policy in BASELINES:
            margin = (jct[policy] - marl) / jct[policy]
            rows.append(
                {
                    "window": name,
                    "baseline": policy,
                    "baseline_avg_jct_s": round(jct[policy], 1),
                    "marl_avg_jct_s": round(marl, 1),
                    "margin": round(margin, 4),
                }
            )
            print(f"  {policy:<20} {jct[policy]:>12,.0f} s   MARL margin {margin:+.1%}")
        best = min(BASELINES, key=jct.__getitem__)
        figures[name] = {
            "marl": marl,
            "best_baseline": best,
            "best_baseline_jct": jct[best],
            "margin_over_best": (jct[best] - marl) / jct[best],
        }
        bars(
            {"marl": marl, **{p: jct[p] for p in BASELINES}},
            out / f"{name}.png",
            ylabel="average JCT (s)",
            title=f"held-out window {name}",
            highlight="marl",
        )
    cols = ["window", "baseline", "baseline_avg_jct_s", "marl_avg_jct_s", "margin"]
    md = ["| window | " + " | ".join(BASELINES) + " | MARL |", "|" + "---|" * (len(BASELINES) + 2)]
    for name, f in figures.items():
        cells = [
            f"{r['baseline_avg_jct_s']:,.0f} ({r['margin']:+.1%})"
            for r in rows
            if r["window"] == name
        ]
        md.append(f"| {name} | " + " | ".join(cells) + f" | **{f['marl']:,.0f}** |")
    write_report(out, "heldout", "\n".join(md) + "\n", rows, cols)
    print("\n" + "\n".join(md))
    print(json.dumps({"wall_s": round(time.perf_counter() - t0, 1), "windows": figures}))


if __name__ == "__main__":
    main()
