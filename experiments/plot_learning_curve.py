"""Learning curves of one or more training runs, read back from their TensorBoard files.

::

    python experiments/plot_learning_curve.py RUN [RUN ...] [--out docs/figures/learning_curve.png]
                                              [--tag charts/avg_jct_s] [--tag charts/episode_return]

One panel per tag (default: the validation average JCT and the training episode
return), one line per run, x = training iteration (0 = the warm-started policy).
Prints the values as a table, then writes the PNG atomically.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from marl_sched.plots import curve

DEFAULT_TAGS = ("charts/avg_jct_s", "charts/episode_return")
LABELS = {
    "charts/avg_jct_s": "validation average JCT (s)",
    "charts/episode_return": "training episode return (-avg JCT / 3600 s)",
}


def read_scalars(run: Path, tag: str) -> dict[int, float]:
    """``{iteration: value}`` of ``tag`` over the run's event files (last write wins)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    values: dict[int, float] = {}
    for f in sorted((run / "tb").glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(f))
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            values.update({e.step: e.value for e in acc.Scalars(tag)})
    return values


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=Path("docs/figures/learning_curve.png"))
    ap.add_argument("--tag", action="append", dest="tags")
    args = ap.parse_args(argv)
    for run in args.runs:
        if not (run / "tb").is_dir():
            print(f"{run}: not a run folder (no tb/)", file=sys.stderr)
            return 2
    tags = args.tags or list(DEFAULT_TAGS)
    for tag in tags:
        series = {str(run): read_scalars(run, tag) for run in args.runs}
        steps = sorted({s for v in series.values() for s in v})
        print(f"\n{tag}")
        print("iteration  " + "  ".join(f"{name[-24:]:>24}" for name in series))
        for s in steps:
            cells = [f"{v[s]:24.4g}" if s in v else f"{'':24}" for v in series.values()]
            print(f"{s:9d}  " + "  ".join(cells))
        path = args.out.with_name(f"{args.out.stem}_{tag.split('/')[-1]}{args.out.suffix}")
        if len(tags) == 1:
            path = args.out
        ys = {Path(name).name: [v[s] for s in steps if s in v] for name, v in series.items()}
        label = LABELS.get(tag, tag)
        curve(steps, ys, path, xlabel="training iteration (0 = warm start)", ylabel=label,
              title=f"{label} ({tag})")  # fmt: skip
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
