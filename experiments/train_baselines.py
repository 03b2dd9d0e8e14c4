"""Train the learned baselines (Harmony, MLF-RL) and compare them on held-out jobs.

    python experiments/train_baselines.py --config configs/default.yaml --out DIR \
        [--iterations N] [--seed S] [--only harmony|mlfs-rl] [--train-fraction 0.6] [--quiet]

The config's trace window is split: the first ``--train-fraction`` of its jobs are the
training trace (episodes are windows of consecutive jobs from it; the validation window
that picks the kept weights is its last jobs); the rest is held out. Writes, each
atomically:

- ``DIR/harmony.pt``, ``DIR/mlfs_rl.pt``: the checkpoints (what ``HarmonyPolicy`` /
  ``MlfsRlPolicy`` load; ``checkpoint=DIR`` finds them);
- ``DIR/training.json``: configs, histories, wall times, reward-model accuracy;
- ``DIR/heldout.json`` + ``DIR/heldout.md``: metrics of first-fit, load-balance,
  mlfs-h, harmony and mlfs-rl on the held-out jobs (the same jobs as
  ``marl-sched compare --config C --start S --max-jobs M``, printed in the table);
- ``DIR/learning_curve_<learner>.png``, ``DIR/heldout_avg_jct.png``.

``--iterations`` overrides both learners' iteration counts (Harmony: episodes; MLF-RL:
policy-gradient iterations). Bad input: one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import torch

from agents.baselines.episodes import split_train
from agents.baselines.harmony import HarmonyPolicy, save_harmony
from agents.baselines.harmony_train import HarmonyConfig, train_harmony
from agents.baselines.mlf_h import MlfHPolicy
from agents.baselines.mlfs import MlfsRlPolicy, save_mlfs
from agents.baselines.mlfs_train import MlfsConfig, train_mlfs_rl
from marl_sched.config import load_config
from marl_sched.errors import InputError
from marl_sched.metrics import atomic_write_text, write_json
from marl_sched.plots import bars, curve
from marl_sched.policies import make_policy
from marl_sched.runner import TraceOptions, build_cluster, load_workload, simulate

LEARNERS = ("harmony", "mlfs-rl")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--iterations", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", choices=LEARNERS, default=None)
    p.add_argument("--train-fraction", type=float, default=0.6)
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    if args.iterations is not None and args.iterations < 1:
        raise InputError(f"--iterations: must be >= 1, got {args.iterations}")
    if not 0.0 < args.train_fraction < 1.0:
        raise InputError(f"--train-fraction: must be in (0, 1), got {args.train_fraction}")
    return args


def _log(quiet: bool):
    def progress(name: str):
        def report(it: int, row: dict) -> None:
            if quiet or "val_avg_jct_s" not in row:
                return
            extra = ", ".join(
                f"{k}={v:.3f}"
                for k, v in row.items()
                if isinstance(v, float) and k not in ("val_avg_jct_s", "wall_s")
            )
            print(
                f"[{name}] it {it:4d} {row.get('phase', '')}  val avg JCT "
                f"{row['val_avg_jct_s']:,.0f} s  ({row['wall_s']:.0f} s)  {extra}",
                flush=True,
            )

        return report

    return progress


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
        return run(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    torch.set_num_threads(1)  # small networks; deterministic and polite on a shared box
    cfg = load_config(args.config)
    out = Path(args.out)
    topo, perf = build_cluster(cfg)
    window = load_workload(cfg, perf)
    train_jobs, n_train = split_train(window.jobs, args.train_fraction)
    n_heldout = len(window.jobs) - n_train
    if n_heldout < 1:
        raise InputError(
            f"{args.config}: workload window of {len(window.jobs)} jobs leaves none held out"
        )
    heldout_opts = TraceOptions(start=cfg.workload.start + n_train, max_jobs=n_heldout)
    heldout = load_workload(cfg, perf, heldout_opts)
    progress = _log(args.quiet)
    over = {"seed": args.seed} | ({"iterations": args.iterations} if args.iterations else {})
    summary: dict = {
        "config": args.config,
        "topology": topo.describe(),
        "train_jobs": n_train,
        "heldout": {"start": heldout_opts.start, "max_jobs": n_heldout},
        "torch_threads": 1,
    }
    learned = {}
    if args.only in (None, "harmony"):
        hcfg = dataclasses.replace(HarmonyConfig(), **over)
        res = train_harmony(topo, perf, train_jobs, hcfg, progress("harmony"))
        meta = {**res.metadata, "trained_on": args.config}
        save_harmony(out / "harmony.pt", res.net, res.reward_fit.net, meta)
        summary["harmony"] = meta
        learned["harmony"] = HarmonyPolicy(checkpoint=out / "harmony.pt")
    if args.only in (None, "mlfs-rl"):
        mcfg = dataclasses.replace(MlfsConfig(), **over)
        res = train_mlfs_rl(topo, perf, train_jobs, mcfg, progress("mlfs-rl"))
        meta = {**res.metadata, "trained_on": args.config}
        save_mlfs(out / "mlfs_rl.pt", res.net, meta)
        summary["mlfs-rl"] = meta
        learned["mlfs-rl"] = MlfsRlPolicy(checkpoint=out / "mlfs_rl.pt")
    write_json(out / "training.json", summary)

    policies = {
        "first-fit": make_policy("first-fit"),
        "load-balance": make_policy("load-balance"),
        "mlfs-h": MlfHPolicy(),
        **learned,
    }
    rows = []
    for name, pol in policies.items():
        metrics, _, _ = simulate(cfg, name, heldout, topo, perf, policy=pol, seed=args.seed)
        rows.append(
            {
                k: metrics[k]
                for k in (
                    "policy",
                    "jobs_completed",
                    "avg_jct_s",
                    "p50_jct_s",
                    "p95_jct_s",
                    "avg_slowdown",
                    "decision_ms_p50",
                )
            }
        )
    write_json(out / "heldout.json", {"heldout": summary["heldout"], "rows": rows})
    lines = [
        f"# Held-out jobs {heldout_opts.start}..{heldout_opts.start + n_heldout - 1} of "
        f"`{args.config}`'s trace window",
        "",
        "| policy | jobs | avg JCT (s) | p50 | p95 | avg slowdown | decision p50 (ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['policy']} | {r['jobs_completed']} | {r['avg_jct_s']:.0f} | "
            f"{r['p50_jct_s']:.0f} | {r['p95_jct_s']:.0f} | {r['avg_slowdown']:.3f} | "
            f"{r['decision_ms_p50']:.3f} |"
        )
    atomic_write_text(out / "heldout.md", "\n".join(lines) + "\n")
    bars(
        {r["policy"]: r["avg_jct_s"] for r in rows},
        out / "heldout_avg_jct.png",
        ylabel="average JCT (s)",
        title="Held-out average JCT",
    )
    for name in learned:
        hist = [h for h in summary[name]["history"] if h.get("phase") != "init"]
        curve(
            [h["iteration"] for h in hist],
            {name: [h["val_avg_jct_s"] for h in hist]},
            out / f"learning_curve_{name}.png",
            "iteration",
            "validation average JCT (s)",
            f"{name}: greedy validation during training",
        )
    print("\n".join(lines[2:]))
    print(
        json.dumps(
            {
                "heldout_avg_jct_s": {r["policy"]: round(r["avg_jct_s"], 1) for r in rows},
                "train_wall_s": {n: round(summary[n]["wall_s"], 1) for n in learned},
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
