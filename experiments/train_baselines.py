"""Train a learned baseline (Harmony or MLF-RL) on the benchmark's train split.

    python experiments/train_baselines.py --learner harmony|mlfs-rl --out DIR \
        [--seed S] [--set key=value ...] [--wall-cap SECONDS] [--patience N]
        [--iterations N] [--search [--grid KEY=V1,V2 ...]] [--quiet]

docs/baselines.md, "Training", is the reference. Writes ``DIR/harmony.pt`` or
``DIR/mlfs_rl.pt``, ``DIR/<learner>_s<seed>.json`` and ``DIR/tb/<learner>_s<seed>/``;
``--search`` runs the grid (``agents/baselines/search.py``; ``--grid`` replaces it)
into ``DIR/points/<point>/`` and writes ``DIR/search_<learner>.json``. Bad input: one
line, exit 2."""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys
import time
from pathlib import Path

import torch

from agents.baselines.episodes import VALIDATION_SCENARIOS, load_split
from agents.baselines.harmony import save_harmony
from agents.baselines.harmony_train import train_harmony
from agents.baselines.mlfs import save_mlfs
from agents.baselines.mlfs_train import train_mlfs_rl
from agents.baselines.search import learner_configs, search_grid
from marl_sched.config import parse_section, read_value
from marl_sched.errors import InputError
from marl_sched.metrics import write_json


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--learner", required=True, choices=sorted(learner_configs()))
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--wall-cap", type=float, default=None, help="seconds (default: config's)")
    p.add_argument("--patience", type=int, default=None)
    p.add_argument("--iterations", type=int, default=None)
    p.add_argument("--search", action="store_true")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    if args.iterations is not None and args.iterations < 1:
        raise InputError(f"--iterations: must be >= 1, got {args.iterations}")
    if args.wall_cap is not None and args.wall_cap <= 0:
        raise InputError(f"--wall-cap: must be > 0 seconds, got {args.wall_cap}")
    if args.patience is not None and args.patience < 0:
        raise InputError(f"--patience: must be >= 0, got {args.patience}")
    if args.grid and not args.search:
        raise InputError("--grid: only with --search")
    return args


def overrides(args: argparse.Namespace) -> dict:
    """The config fields the command line sets (``--set`` and the cap flags)."""
    cls = learner_configs()[args.learner]
    fields = {f.name for f in dataclasses.fields(cls)}
    out: dict = {"seed": args.seed}
    given: dict = {}
    for item in args.set:
        key, eq, value = item.partition("=")
        if not eq or key not in fields:
            known = ", ".join(sorted(fields))
            raise InputError(f"--set {item}: expected KEY=VALUE with KEY one of {known}")
        given[key] = read_value(value, f"--set {item}")
    cfg = parse_section(cls, given, "--set", "")  # typed as the config files' keys
    out.update({key: getattr(cfg, key) for key in given})
    for key, value in (("wall_cap_s", args.wall_cap), ("patience", args.patience),
                       ("iterations", args.iterations)):  # fmt: skip
        if value is not None:
            out[key] = value
    return out


def _progress(name: str, quiet: bool):
    def report(it: int, row: dict) -> None:
        if not quiet:
            print(f"[{name}] it {it:4d} {row.get('phase', ''):3s} val score "
                  f"{row['val_score']:.3f} ({row['wall_s']:.0f} s)", flush=True)  # fmt: skip

    return report


def train_one(
    learner: str, cfg, train_runs, val_runs, out: Path, tag: str, quiet: bool, reward_fit=None
) -> dict:
    """Train one run; save its checkpoint in ``out`` and its summary as ``out/<tag>.json``."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(out / "tb" / tag))
    if learner == "harmony":
        res = train_harmony(train_runs, val_runs, cfg, _progress(tag, quiet), writer, reward_fit)
    else:
        res = train_mlfs_rl(train_runs, val_runs, cfg, _progress(tag, quiet), writer)
    meta = {**res.metadata, "trained_on": "benchmarks/default.yaml train split"}
    if learner == "harmony":
        save_harmony(out / "harmony.pt", res.net, res.reward_fit.net, meta)
    else:
        save_mlfs(out / "mlfs_rl.pt", res.net, meta, res.order_net)
    write_json(out / f"{tag}.json", meta)
    return {"result": res, "metadata": meta}


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
        return run(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    torch.set_num_threads(1)  # small networks; deterministic and polite on a shared box
    base = dataclasses.replace(learner_configs()[args.learner](), **overrides(args))
    grid = search_grid(args.learner, args.grid)  # checked before any work
    out = Path(args.out)
    train_runs = load_split("train", seed=args.seed)
    val_runs = load_split("validation", VALIDATION_SCENARIOS, seed=0)
    if not args.search:
        tag = f"{args.learner}_s{args.seed}"
        meta = train_one(args.learner, base, train_runs, val_runs, out, tag, args.quiet)["metadata"]
        print(f"{tag}: best validation score {meta['best_val_score']:.3f} at iteration "
              f"{meta['best_iteration']}; stopped by {meta['stop_reason']} after "
              f"{meta['wall_s']:.0f} s")  # fmt: skip
        return 0
    rows = []
    t0 = time.perf_counter()
    reward_fit = None  # Harmony: one reward model for the whole search (same seed)
    for values in itertools.product(*grid.values()):
        point = dict(zip(grid, values, strict=True))
        cfg = dataclasses.replace(base, **point)
        tag = f"search_{args.learner}_" + "_".join(f"{k}{v:g}" for k, v in point.items())
        got = train_one(args.learner, cfg, train_runs, val_runs, out / "points" / tag, tag,
                        args.quiet, reward_fit)  # fmt: skip
        meta, reward_fit = got["metadata"], got["result"].reward_fit
        last = meta["history"][-1]["iteration"]
        rows.append({**point, "best_val_score": meta["best_val_score"],
                     "best_iteration": meta["best_iteration"], "iterations_run": last,
                     "stop_reason": meta["stop_reason"], "wall_s": meta["wall_s"]})  # fmt: skip
        print(f"{tag}: {rows[-1]}", flush=True)
        best = min(rows, key=lambda r: r["best_val_score"])
        write_json(out / f"search_{args.learner}.json", {
            "learner": args.learner, "seed": args.seed, "grid": grid,
            "fixed": {k: v for k, v in dataclasses.asdict(base).items() if k not in grid},
            "validation_scenarios": list(VALIDATION_SCENARIOS),
            "rows": rows, "chosen": {k: best[k] for k in grid},
            "total_wall_s": time.perf_counter() - t0,
        })  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
