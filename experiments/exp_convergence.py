"""Claim (b): multi-agent vs single-agent convergence on a 1,000-server datacenter.

    python experiments/exp_convergence.py [--quick] [--iterations N] [--out runs/exp_convergence]

Trains both decision processes from scratch with the same PPO settings on
``configs/recipes/convergence.yaml`` (1,000 servers / 8,000 GPUs in 8 subclusters): ``marl``
(8 cooperating agents with shared parameters, each seeing its own subcluster, 500
GPU groups) and ``central`` (``env.central``: one agent whose scope is the whole
datacenter, 4,000 GPU groups). Every iteration is evaluated greedily on the
validation window (jobs 2000..2099). Reports, per variant, the iterations and wall
time to first reach the *common* validation average JCT (the worse of the two
variants' best, i.e. a level both reach), the best and final validation JCT, and
the wall time per iteration; writes ``convergence.md``, ``convergence.csv`` and
``convergence.png`` (learning curves against iterations and wall time) into
``--out``. ``--quick``: 3 iterations of smaller batches (a smoke run, ~3 min).
Last line: one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import time
from pathlib import Path

from marl_sched.config import REPO_ROOT, load_config
from marl_sched.metrics import write_report

CONFIG = REPO_ROOT / "configs" / "recipes" / "convergence.yaml"
PROGRESS = re.compile(r"^iter (\d+) .*eval avg JCT (\d+) s\s+(\d+) s$")


def train_variant(name: str, central: bool, iterations: int, quick: bool, out: Path) -> dict:
    import torch

    from agents.config import model_config, train_config
    from agents.training import Trainer

    torch.set_num_threads(1)
    cfg = load_config(CONFIG)
    cfg = dataclasses.replace(cfg, env={**(cfg.env or {}), "central": central})
    mc = model_config(cfg)
    tc = train_config(cfg)
    if quick:
        tc = dataclasses.replace(
            tc, train_batch_size=150, minibatch_size=75, episode_jobs=40, eval_max_jobs=40
        )
    points: list[tuple[int, float, float]] = []

    def log(line: str) -> None:
        m = PROGRESS.match(line.strip())
        if m:
            points.append((int(m[1]), float(m[3]), float(m[2])))
            print(f"  {name}: {line.strip()}", flush=True)

    t0 = time.perf_counter()
    Trainer(cfg, mc, tc, out / name, log=log).run(iterations)
    return {
        "variant": name,
        "agents": 1 if central else cfg.topology.subclusters,
        "iterations": [p[0] for p in points],
        "wall_s": [p[1] for p in points],
        "val_avg_jct_s": [p[2] for p in points],
        "total_wall_s": time.perf_counter() - t0,
        "batch": tc.train_batch_size,
    }


def first_reach(run: dict, target: float) -> tuple[int | None, float | None]:
    for it, wall, jct in zip(run["iterations"], run["wall_s"], run["val_avg_jct_s"], strict=True):
        if jct <= target + 1e-9:
            return it, wall
    return None, None


def plot(runs: list[dict], target: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for r in runs:
        label = f"{r['variant']} ({r['agents']} agent{'s' if r['agents'] > 1 else ''})"
        axes[0].plot(r["iterations"], r["val_avg_jct_s"], marker="o", ms=3, label=label)
        axes[1].plot(r["wall_s"], r["val_avg_jct_s"], marker="o", ms=3, label=label)
    for ax, xlabel in zip(axes, ("PPO iteration", "wall time (s)"), strict=True):
        ax.axhline(target, color="grey", ls="--", lw=1, label="common target")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("validation avg JCT (s)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("MARL vs single agent, 1,000 servers / 8 subclusters, from scratch")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--out", default="runs/exp_convergence")
    args = ap.parse_args()
    out = Path(args.out)
    iterations = args.iterations or (3 if args.quick else 8)
    runs = [
        train_variant("marl", False, iterations, args.quick, out),
        train_variant("central", True, iterations, args.quick, out),
    ]
    target = max(min(r["val_avg_jct_s"]) for r in runs)
    rows = []
    for r in runs:
        it, wall = first_reach(r, target)
        rows.append(
            {
                "variant": r["variant"],
                "agents": r["agents"],
                "iters_to_target": it,
                "wall_s_to_target": None if wall is None else round(wall),
                "best_val_jct_s": round(min(r["val_avg_jct_s"])),
                "final_val_jct_s": round(r["val_avg_jct_s"][-1]),
                "first_val_jct_s": round(r["val_avg_jct_s"][0]),
                "s_per_iteration": round(r["wall_s"][-1] / max(r["iterations"][-1], 1), 1),
                "total_wall_s": round(r["total_wall_s"]),
            }
        )
    cols = list(rows[0])
    md = [
        f"Common target: validation avg JCT ≤ {target:.0f} s "
        f"({iterations} PPO iterations of {runs[0]['batch']} decisions per variant).",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    md += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    table = "\n".join(md) + "\n"
    curves = [
        {"variant": r["variant"], "iteration": i, "wall_s": round(w, 1), "val_avg_jct_s": j}
        for r in runs
        for i, w, j in zip(r["iterations"], r["wall_s"], r["val_avg_jct_s"], strict=True)
    ]
    write_report(out, "convergence", table, curves, list(curves[0]))
    plot(runs, target, out / "convergence.png")
    print(table)
    print(json.dumps({"target_val_jct_s": target, "rows": rows, "curves": runs}))


if __name__ == "__main__":
    main()
