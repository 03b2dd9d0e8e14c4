"""``marl-sched interference fit | report``: fit, save and inspect the learned model.

::

    marl-sched interference fit --config C --out DIR [--samples N] [--seed S] [--quiet]
    marl-sched interference report --model P

``fit`` writes ``DIR/model.npz``, ``DIR/report.json`` and ``DIR/scatter.png`` together
(staged, then renamed); ``report`` prints a model's stored accuracy and warns when its
calibration differs from the current one."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from marl_sched.cli import prepare_out
from marl_sched.config import REPO_ROOT, load_config, parse_section
from marl_sched.errors import InputError
from marl_sched.interference import InterferenceModel, calibration_sha256
from marl_sched.metrics import atomic_write_text, staged_folder


def interference_command(args: argparse.Namespace) -> int:
    """Dispatch ``interference fit`` / ``interference report``."""
    if args.action == "fit":
        return fit_command(args)
    return report_command(args)


# --------------------------------------------------------------------------- fit


class _FitProgress:
    """One rich progress bar per phase (samples, train, evaluate), or nothing."""

    LABELS = {"samples": "simulate co-locations", "train": "train (epochs)", "evaluate": "evaluate"}

    def __init__(self, quiet: bool) -> None:
        self._bar = None
        self._tasks: dict[str, Any] = {}
        if quiet:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._bar = Progress(
            TextColumn("[bold]{task.description:<24}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
        )
        self._bar.start()

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self._bar is None:
            return
        if phase not in self._tasks:
            self._tasks[phase] = self._bar.add_task(self.LABELS.get(phase, phase), total=total)
        self._bar.update(self._tasks[phase], completed=done, total=total)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def fit_command(args: argparse.Namespace) -> int:
    from agents.config import MAX_SAMPLES
    from agents.interference.fit import (
        InterferenceConfig,
        fit_interference,
        report_json,
        scatter_png,
    )

    cfg = load_config(args.config, args.overrides)
    icfg = parse_section(InterferenceConfig, cfg.interference, cfg.source, "interference")
    if args.samples is not None:
        if args.samples < 50:
            raise InputError(f"--samples: must be >= 50, got {args.samples}")
        if args.samples > MAX_SAMPLES:
            raise InputError(f"--samples: must be <= {MAX_SAMPLES:,}, got {args.samples:,}")
        icfg = dataclasses.replace(icfg, samples=args.samples)
    if args.seed is not None:
        icfg = dataclasses.replace(icfg, seed=args.seed)
    out = prepare_out(args.out)  # a file, a path under one, an unwritable folder: exit 2
    real_root = cfg.resolve_path(icfg.real_data) if icfg.real_data else None
    command = "marl-sched interference fit " + " ".join(
        a
        for a in (
            f"--config {args.config}",
            f"--out {args.out}",
            f"--samples {args.samples}" if args.samples is not None else "",
            f"--seed {args.seed}" if args.seed is not None else "",
        )
        if a
    )
    source = {"command": command, "config_file": str(args.config)}
    bar = _FitProgress(args.quiet)
    try:
        result = fit_interference(
            icfg, [cfg.topology], real_root=real_root, progress=bar, source=source
        )
    finally:
        bar.close()
    # the resolved config the fit ran (overrides, --samples and --seed applied)
    resolved = dataclasses.replace(cfg, interference=dataclasses.asdict(icfg))
    with staged_folder(out) as tmp:  # the files appear together, or none
        result.model.save(tmp / "model.npz")
        atomic_write_text(tmp / "report.json", report_json(result.report) + "\n")
        atomic_write_text(tmp / "config.yaml", resolved.to_yaml())
        scatter_png(tmp / "scatter.png", result)
        InterferenceModel.load(tmp / "model.npz")  # never publish a file we cannot read
    if not args.quiet:
        print(format_report(result.report))
    print(
        f"wrote {out / 'model.npz'}, {out / 'report.json'}, {out / 'scatter.png'}, "
        f"{out / 'config.yaml'}"
    )
    return 0


# --------------------------------------------------------------------------- report


def _fmt(v: Any, spec: str = ".3f") -> str:
    ok = isinstance(v, int | float) and v == v  # not None, not NaN
    return format(v, spec) if ok else "-"


def format_report(report: dict[str, Any]) -> str:
    """The readable summary of a fit report."""
    sim = report.get("simulated", {})
    real = report.get("real", {})
    lines = [
        f"simulated held-out: MRE {_fmt(sim.get('mre'))}  p90 {_fmt(sim.get('p90'))}  "
        f"n={sim.get('n', '-')}  (trivial mean predictor MRE {_fmt(sim.get('trivial_mean_mre'))})",
        f"real measurements:  MRE {_fmt(real.get('mre'))}  p90 {_fmt(real.get('p90'))}  "
        f"n={real.get('n', '-')}  (the simulator itself: MRE "
        f"{_fmt(real.get('simulator', {}).get('mre'))})",
        f"train / val / test samples: {report.get('n_train', '-')} / {report.get('n_val', '-')} "
        f"/ {report.get('n_test', '-')}",
        f"throughput: {_fmt(report.get('throughput_predictions_per_s'), ',.0f')} predictions/s "
        f"(batches of {report.get('throughput_batch', 4096)})",
    ]
    wall = report.get("wall_s", {})
    if isinstance(wall, dict) and wall:
        lines.append(
            f"wall time: {_fmt(wall.get('total'), '.1f')} s "
            f"(samples {_fmt(wall.get('samples'), '.1f')} s, "
            f"training {_fmt(wall.get('train'), '.1f')} s)"
        )
    for title, key, width in (("co-location level", "per_level", 14), ("model", "per_model", 24)):
        rows = [
            f"  {name:<{width}} n={s.get('n', 0):>6}  MRE {_fmt(s.get('mre'))}  "
            f"p90 {_fmt(s.get('p90'))}"
            for name, s in sim.get(key, {}).items()
        ]
        if rows:
            lines += [f"simulated, by {title}:", *rows]
    rows = []
    for src, s in real.get("per_source", {}).items():
        rows.append(
            f"  {src:<8} n={s.get('n', 0):>5}  model MRE {_fmt(s.get('mre'))}  "
            f"p90 {_fmt(s.get('p90'))}"
            f"  simulator MRE {_fmt(s.get('simulator', {}).get('mre'))}  median measured "
            f"{_fmt(s.get('measured_median'))} vs simulated {_fmt(s.get('simulated_median'))}"
        )
    if rows:
        lines += ["real, by source:", *rows]
    return "\n".join(lines)


def report_command(args: argparse.Namespace) -> int:
    import json

    from marl_sched.files import check_input, read_input_text

    path = check_input(args.model, "model", f"--model: {args.model}")
    model = InterferenceModel.load(path)
    sibling = path.with_name("report.json")
    report = None
    if sibling.is_file():
        try:
            report = json.loads(read_input_text(sibling, "json"))
            if not isinstance(report, dict):
                raise ValueError(f"expected a JSON object, got {type(report).__name__}")
        except (InputError, ValueError) as exc:
            print(
                f"marl-sched: warning: {sibling}: unreadable ({exc}); using the model's "
                "own summary",
                file=sys.stderr,
            )
    if report is None:
        meta = model.metadata
        summary = meta.get("report_summary", {})
        report = {
            "simulated": {
                "mre": summary.get("simulated_mre"),
                "p90": summary.get("simulated_p90"),
                "n": meta.get("n_test"),
            },
            "real": {"mre": summary.get("real_mre"), "p90": summary.get("real_p90")},
            "n_train": meta.get("n_train"),
            "n_val": meta.get("n_val"),
            "n_test": meta.get("n_test"),
            "throughput_predictions_per_s": summary.get("throughput_predictions_per_s"),
            "wall_s": {"total": summary.get("wall_s")},
        }
    print(
        f"model: {path}  ({model.n_features} features, hidden "
        f"{[w.shape[1] for w in model.weights[:-1]]}, {model.activation})"
    )
    if model.metadata.get("command"):
        print(f"made by: {model.metadata['command']}")
    print(format_report(report))
    current = calibration_sha256()
    if model.calibration_sha256 != current:
        print(
            f"marl-sched: warning: {path}: fitted on calibration {model.calibration_sha256[:12]}, "
            f"but {Path(REPO_ROOT, 'marl_sched/data/calibration.json').relative_to(REPO_ROOT)} is "
            f"now {current[:12]}: refit with `marl-sched interference fit`",
            file=sys.stderr,
        )
    return 0
