"""Claim (c): the shipped agents adapt to topology changes without retraining.

    python experiments/exp_adaptivity.py [--quick] [--checkpoint checkpoints/marl-default]
                                         [--out runs/exp_adaptivity]

Evaluates the default checkpoint (trained on ``configs/default.yaml`` only), greedily
and without retraining, on variants of that topology, against every heuristic on the
same held-out window (Philly sample jobs 2200..2499, load 0.2, as in
``experiments/train_marl.py``). Variants keep the 48 servers (384 GPUs) and change one
thing each:

- ``racks x2``: 6 racks of 2 servers per subcluster (default 3 of 4);
- ``racks /1.5``: 2 racks of 6 servers (3 racks cannot be halved into whole racks;
  ``racks /3``: 1 rack of 12 servers is also run);
- ``oversub 1`` / ``oversub 8``: rack uplink oversubscription 1 and 8 (default 2);
- ``all V100``: 48 V100 servers (default 24 V100 / 16 P100 / 8 K80);
- ``K80-heavy``: 8 V100 / 8 P100 / 32 K80.

Margin = (best heuristic - marl) / best heuristic (positive: MARL wins). Writes
``adaptivity.md``, ``adaptivity.csv`` and ``adaptivity.png`` into ``--out``.
``--quick``: the first 120 jobs of the window and 4 variants. Last line: one JSON
object of the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from marl_sched.config import REPO_ROOT, load_config
from marl_sched.metrics import write_report
from marl_sched.policies import heuristic_names
from marl_sched.runner import TraceOptions, build_cluster, load_workload, simulate

HEURISTICS = heuristic_names()
WINDOW = {"trace": "configs/traces/philly_sample.csv", "start": 2200, "max_jobs": 300}


def variants(base) -> dict:
    t = base.topology
    v100, p100, k80 = t.server_types

    def topo(**kw):
        return dataclasses.replace(base, topology=dataclasses.replace(t, **kw))

    def mix(a: int, b: int, c: int):
        return (
            dataclasses.replace(v100, count=a),
            dataclasses.replace(p100, count=b),
            dataclasses.replace(k80, count=c),
        )

    return {
        "default": base,
        "racks x2": topo(racks_per_subcluster=6, servers_per_rack=2),
        "racks /1.5": topo(racks_per_subcluster=2, servers_per_rack=6),
        "racks /3": topo(racks_per_subcluster=1, servers_per_rack=12),
        "oversub 1": topo(rack_oversubscription=1.0),
        "oversub 8": topo(rack_oversubscription=8.0),
        "all V100": topo(server_types=(dataclasses.replace(v100, count=48),)),
        "K80-heavy": topo(server_types=mix(8, 8, 32)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--checkpoint", default=str(REPO_ROOT / "checkpoints" / "marl-default"))
    ap.add_argument("--out", default="runs/exp_adaptivity")
    args = ap.parse_args()
    import torch

    from agents.policy import MarlPolicy, load_checkpoint

    torch.set_num_threads(1)
    out = Path(args.out)
    base = load_config(REPO_ROOT / "configs" / "default.yaml")
    cases = variants(base)
    if args.quick:
        cases = {k: cases[k] for k in ("default", "racks x2", "oversub 8", "K80-heavy")}
    window = dict(WINDOW, max_jobs=120 if args.quick else WINDOW["max_jobs"])
    window["trace"] = str(REPO_ROOT / window["trace"])
    agents = load_checkpoint(args.checkpoint)
    rows, t_all = [], time.perf_counter()
    for name, cfg in cases.items():
        t0 = time.perf_counter()
        topo, perf = build_cluster(cfg)
        wl = load_workload(cfg, perf, TraceOptions(**window))
        jct = {}
        for h in HEURISTICS:
            m, _, _ = simulate(cfg, h, wl, topo, perf)
            jct[h] = m["avg_jct_s"]
        m, _, _ = simulate(cfg, "marl", wl, topo, perf, policy=MarlPolicy(agents=agents))
        best = min(jct, key=jct.get)
        row = {
            "variant": name,
            "gpus": topo.n_gpus,
            "marl_jct_s": round(m["avg_jct_s"]),
            "best_heuristic": best,
            "best_jct_s": round(jct[best]),
            "margin_vs_best_pct": round(100 * (jct[best] - m["avg_jct_s"]) / jct[best], 1),
            **{f"{h}_jct_s": round(v) for h, v in jct.items()},
        }
        rows.append(row)
        print(
            f"{name:<12} marl {row['marl_jct_s']:>8}  best {best} {row['best_jct_s']:>8}  "
            f"margin {row['margin_vs_best_pct']:+.1f}%  ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    cols = ["variant", "gpus", "marl_jct_s", "best_heuristic", "best_jct_s", "margin_vs_best_pct"]
    cols += [f"{h}_jct_s" for h in HEURISTICS]
    short = ["variant", "marl_jct_s", "best_heuristic", "best_jct_s", "margin_vs_best_pct"]
    short += ["first-fit_jct_s", "load-balance_jct_s", "locality_jct_s"]
    md = [
        f"Checkpoint `{Path(args.checkpoint).name}`, no retraining; window "
        f"{WINDOW['trace']} jobs {window['start']}..{window['start'] + window['max_jobs'] - 1}, "
        "load 0.2; average JCT (s); margin = (best heuristic - marl) / best heuristic.",
        "",
        "| " + " | ".join(short) + " |",
        "|" + "---|" * len(short),
    ]
    md += ["| " + " | ".join(str(r[c]) for c in short) + " |" for r in rows]
    table = "\n".join(md) + "\n"
    write_report(out, "adaptivity", table, rows, cols)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["marl_jct_s"] for r in rows], 0.4, label="marl")
    ax.bar([x + 0.2 for x in xs], [r["best_jct_s"] for r in rows], 0.4, label="best heuristic")
    ax.set_xticks(list(xs), [r["variant"] for r in rows], rotation=20, fontsize=8)
    ax.set_ylabel("avg JCT (s)")
    ax.set_title("Shipped MARL checkpoint on topology variants (no retraining)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "adaptivity.png", dpi=120)
    plt.close(fig)
    print(table)
    wall = time.perf_counter() - t_all
    print(json.dumps({"checkpoint": args.checkpoint, "window": window, "wall_s": wall,
                      "rows": rows}))  # fmt: skip


if __name__ == "__main__":
    main()
