"""Learning curves of training runs, read back from their TensorBoard files: the mean
over seeds with a 95 % confidence band, against environment steps.

::

    python experiments/plot_learning_curve.py RUN_OR_EXPERIMENT [...]
        [--out docs/figures/learning_curve.png] [--tag charts/avg_jct_s] [--together]

Each argument is a run folder (``marl-sched train --out DIR``) or an experiment
folder (``marl-sched train --seeds N [--grid ...] --out DIR``: its trials). Runs are
grouped by their name without the ``seedN`` suffix (one group per grid point; with
``--together``, every run in one group); per group the curve is the mean over its
runs, with a 95 % Student-t band when it has several (one run: its line, printed as
"1 seed: no interval"; the printout names the runs each interval covers). Runs
evaluated at different steps are aligned on the steps every run covers, each
interpolated linearly
(:func:`marl_sched.plots.align`). One panel per tag (default: the validation
average JCT and the training episode return). Prints what it draws, then writes the
PNGs atomically.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from marl_sched.plots import band_curves

DEFAULT_TAGS = ("charts/avg_jct_s", "charts/episode_return")
LABELS = {
    "charts/avg_jct_s": "validation average JCT (s)",
    "charts/episode_return": "training episode return (-avg JCT / 3600 s)",
}


def read_scalars(run: Path, tag: str) -> dict[int, float]:
    """``{env step: value}`` of ``tag`` in the run's ``tb/``, read as TensorBoard reads
    it: TensorBoard's own ``EventAccumulator`` over the whole folder (every event
    file in order, the steps a resumed run purged dropped), every point kept (its
    default keeps a sample of 10,000 per tag). Not tbparse: it reads each file on its
    own, purged steps included, and TensorBoard is already a dependency."""
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(run / "tb"), size_guidance={ea.SCALARS: 0})
    acc.Reload()
    if tag not in acc.Tags()["scalars"]:
        return {}
    return {e.step: e.value for e in acc.Scalars(tag)}


def find_runs(paths: list[Path]) -> list[Path] | str:
    """Run folders of the arguments (an experiment's trials in its order), or the
    error line for the first argument that is neither."""
    runs = []
    for p in paths:
        if (p / "experiment.json").is_file():
            trials = json.loads((p / "experiment.json").read_text(encoding="utf-8"))["trials"]
            runs += [p / t["name"] for t in trials if (p / t["name"] / "tb").is_dir()]
        elif (p / "tb").is_dir():
            runs.append(p)
        else:
            return f"{p}: not a run folder (no tb/) nor an experiment (no experiment.json)"
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
    runs = find_runs(args.runs)
    if isinstance(runs, str):
        print(runs, file=sys.stderr)
        return 2
    tags = args.tags or list(DEFAULT_TAGS)
    for tag in tags:
        groups: dict[str, list[dict[int, float]]] = {}
        names: dict[str, list[str]] = {}  # the runs each group's interval covers
        for run in runs:
            series = read_scalars(run, tag)
            if series:
                group = "all runs" if args.together else group_of(run)
                groups.setdefault(group, []).append(series)
                names.setdefault(group, []).append(run.name)
        if not groups:
            print(f"{tag}: no run logged it", file=sys.stderr)
            return 2
        path = args.out.with_name(f"{args.out.stem}_{tag.split('/')[-1]}{args.out.suffix}")
        if len(tags) == 1:
            path = args.out
        label = LABELS.get(tag, tag)
        drawn = band_curves(groups, path, xlabel="environment steps (0 = warm start)",
                            ylabel=label, title=f"{label} ({tag})")  # fmt: skip
        print(f"\n{tag}")
        for name, (xs, mean, half) in drawn.items():
            runs_of = ", ".join(names[name])
            if len(names[name]) < 2:  # no interval from one sample
                print(f"{name} ({runs_of}): env steps, value; 1 seed: no interval")
            else:
                print(f"{name} (mean of {runs_of}): env steps, mean, 95 % CI half-width")
            for x, m, h in zip(xs, mean, half, strict=True):
                print(f"  {x:10.0f}  {m:14.4g}" + (f"  {h:12.3g}" if len(names[name]) > 1 else ""))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
