"""Learning curves of training runs from their TensorBoard files: the mean over
seeds with a 95 % band, against environment steps.

::

    python experiments/plot_learning_curve.py RUN_OR_EXPERIMENT [...]
        [--out docs/figures/learning_curve.png] [--tag charts/avg_jct_s] [--together]

Runs are grouped by name without the ``seedN`` suffix (``--together``: one group);
one PNG per tag."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from agents.records import read_tags
from agents.tune import EXPERIMENT, read_experiment
from marl_sched.errors import InputError
from marl_sched.plots import band_curves

DEFAULT_TAGS = ("charts/avg_jct_s", "charts/episode_return")
LABELS = {
    "charts/avg_jct_s": "validation average JCT (s)",
    "charts/episode_return": "training episode return (-avg JCT / 3600 s)",
}


def find_runs(paths: list[Path]) -> list[Path]:
    """Run folders of the arguments (an experiment's trials in its order);
    ``InputError`` for the first argument that is neither."""
    runs = []
    for p in paths:
        if (p / EXPERIMENT).is_file():
            _, _, trials = read_experiment(p, "plot_learning_curve")
            runs += [p / t["name"] for t in trials if (p / t["name"] / "tb").is_dir()]
        elif (p / "tb").is_dir():
            runs.append(p)
        else:
            raise InputError(f"{p}: not a run folder (no tb/) nor an experiment (no {EXPERIMENT})")
    return runs


def group_of(run: Path) -> str:
    """``lr=1e-4_seed3`` → ``lr=1e-4``; ``seed3`` → its experiment folder's name."""
    label = re.sub(r"_?seed\d+$", "", run.name)
    return label or run.parent.name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=Path("docs/figures/learning_curve.png"))
    ap.add_argument("--tag", action="append", dest="tags")
    ap.add_argument("--together", action="store_true", help="all runs in one group")
    args = ap.parse_args(argv)
    try:
        runs = find_runs(args.runs)
    except InputError as exc:
        print(exc, file=sys.stderr)
        return 2
    tags = args.tags or list(DEFAULT_TAGS)
    logged = {run: read_tags(run, tags) for run in runs}  # each run's tb/ read once
    for tag in tags:
        groups: dict[str, list[dict[int, float]]] = {}
        names: dict[str, list[str]] = {}  # the runs each group's interval covers
        for run in runs:
            series = logged[run][tag]
            if series:
                group = "all runs" if args.together else group_of(run)
                groups.setdefault(group, []).append(series)
                names.setdefault(group, []).append(run.name)
        if not groups:
            print(f"{tag}: no run logged it", file=sys.stderr)
            return 2
        file = f"{args.out.stem}_{tag.split('/')[-1]}{args.out.suffix}"
        path = args.out if len(tags) == 1 else args.out.with_name(file)
        label = LABELS.get(tag, tag)
        drawn = band_curves(groups, path, xlabel="environment steps (0 = warm start)",
                            ylabel=label, title=f"{label} ({tag})")  # fmt: skip
        print(f"\n{tag}")
        for name, (xs, mean, half) in drawn.items():
            band = len(names[name]) > 1  # no interval from one sample
            print(f"{name} (mean of {', '.join(names[name])}): env steps, mean, 95 % CI "
                  "half-width" if band else f"{name} ({names[name][0]}): env steps, value; "
                  "1 seed: no interval")  # fmt: skip
            for x, m, h in zip(xs, mean, half, strict=True):
                print(f"  {x:10.0f}  {m:14.4g}" + (f"  {h:12.3g}" if band else ""))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
