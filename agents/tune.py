"""Experiments as Ray Tune trials: seeds × a grid of config overrides.

``marl-sched train --seeds N --grid train.lr=1e-4,3e-4 ...`` runs one Tune trial per
(grid point, seed): a function trainable (:func:`trainable`) wrapping
:class:`agents.training.Trainer`, reporting every iteration (``tune.report``, the
validation figure ``validation_avg_jct_s`` with every checkpoint) under
``CheckpointConfig(num_to_keep=train.keep_checkpoints, checkpoint_score_attribute=
"validation_avg_jct_s", mode min)``. Layout of ``--out DIR``::

    DIR/experiment.json     the base config, the trials (name, seed, overrides), written first
    DIR/results.csv         one row per trial: seed, grid values, final and best validation
                            figures, best checkpoint (path, digest), wall time
    DIR/<trial>/            one run folder per trial, the layout of a single run
    DIR/tune/session_XX/    Ray Tune's own records of each invocation

Resuming (``--resume``) starts a fresh Tuner over the trials of ``experiment.json``;
each continues from its run folder's last (signed, verified) checkpoint or starts over.
``Tuner.restore`` is not used: it unpickles Tune's state and cannot extend a trial.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import shutil
import tempfile
from pathlib import Path

from marl_sched.errors import InputError
from marl_sched.files import check_owned_tree, owned_path

EXPERIMENT = "experiment.json"
RESULTS = "results.csv"
METRIC = "validation_avg_jct_s"


# ------------------------------------------------------------------- overrides


def split_values(text: str) -> list[str]:
    """``a,b,[c,d]`` → ``["a", "b", "[c,d]"]``: commas outside brackets separate."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def _split(item: str, where: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not p for p in key.split(".")):
        raise InputError(f"{where}: {item!r}: expected key=value with a dotted key")
    return key, value


def parse_grid(specs: list[str]) -> list[tuple[str, list[str]]]:
    """``--grid key=v1,v2`` options → ``[(key, ["v1", "v2"]), ...]`` (values as text)."""
    grid = []
    for spec in specs:
        key, values = _split(spec, "--grid")
        if key == "train.seed":
            raise InputError("--grid: train.seed: seeds are --seed S --seeds N")
        parts = [v for v in split_values(values)]
        if any(not v.strip() for v in parts):
            raise InputError(f"--grid: {key}: empty value in {values!r}")
        if key in (k for k, _ in grid):
            raise InputError(f"--grid: {key}: given twice")
        if len(set(parts)) != len(parts):
            raise InputError(f"--grid: {key}: a value repeats in {values!r}")
        grid.append((key, parts))
    return grid


def make_trials(seeds: list[int], grid: list[tuple[str, list[str]]]) -> list[dict]:
    """One trial per grid point × seed: ``{"name", "seed", "overrides"}``."""
    trials = []
    points = itertools.product(*[[(k, v) for v in vs] for k, vs in grid]) if grid else [()]
    for point in points:
        for seed in seeds:
            label = ",".join(f"{k.split('.')[-1]}={v}" for k, v in point)
            name = f"{label}_seed{seed}" if label else f"seed{seed}"
            name = name.replace("/", "_").replace(" ", "")
            trials.append({"name": name, "seed": seed, "overrides": [f"{k}={v}" for k, v in point]})
    return trials


def trial_config(base: dict, trial: dict, source: str):
    """(ExperimentConfig, ModelConfig, TrainConfig) of one trial, validated
    (``InputError`` naming the key and the trial)."""
    from agents.config import model_config, train_config
    from marl_sched.config import apply_overrides, config_from_dict

    where = f"{source} [trial {trial['name']}]"
    try:
        raw = apply_overrides(base, [*trial["overrides"], f"train.seed={trial['seed']}"])
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    cfg = config_from_dict(raw, where)
    return cfg, model_config(cfg), train_config(cfg)


# ------------------------------------------------------------------- the trainable


#: the columns of Tune's live progress table (``iteration``: the trial's own count)
PROGRESS_COLUMNS = {
    "iteration": "iteration",
    "env_steps": "env steps",
    METRIC: "validation avg JCT (s)",
}


def progress_reporter():
    """Tune's progress table with :data:`PROGRESS_COLUMNS` only."""
    from ray.tune import CLIReporter

    return CLIReporter(metric_columns=PROGRESS_COLUMNS, max_report_frequency=30)


def trainable(config: dict) -> None:
    """One Tune trial: train (or resume) its run folder, reporting every iteration."""
    from ray import tune

    from agents.run_folder import RunPaths, read_state
    from agents.training import Trainer

    trial = config["trials"][config["trial"]]
    cfg, mc, tc = trial_config(config["base"], trial, config["source"])
    run = owned_path(config["root"], trial["name"], "experiment folder")
    paths = RunPaths(run)
    latest = paths.latest()
    if latest is None and run.exists():  # never checkpointed: start over
        shutil.rmtree(run)
    if latest is not None:
        state = read_state(latest)
        if state["iteration"] >= config["iterations"]:
            tune.report({"iteration": state["iteration"], "env_steps": state["env_steps"]})
            return

    def on_result(metrics: dict, folder: Path | None) -> None:
        if folder is None or METRIC not in metrics:
            tune.report(metrics)
            return
        # Tune keeps a pointer to our signed checkpoint, not an unsigned copy
        with tempfile.TemporaryDirectory(prefix="marl-sched-ckpt-") as tmp:
            (Path(tmp) / "checkpoint.json").write_text(json.dumps({"checkpoint": str(folder)}))
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(tmp))

    Trainer(cfg, mc, tc, run, resume=latest is not None, on_result=on_result).run(
        config["iterations"]
    )


# ------------------------------------------------------------------- the experiment


def write_experiment(out: Path, base: dict, source: str, trials: list[dict]) -> None:
    from marl_sched.metrics import write_json

    out.mkdir(parents=True, exist_ok=True)
    path = owned_path(out, EXPERIMENT, "experiment folder")
    write_json(path, {"source": source, "config": base, "trials": trials})


def read_experiment(out: Path, where: str = "--resume") -> tuple[dict, str, list[dict]]:
    """The recorded base config, its source and trials (``InputError`` if unreadable,
    starting with ``where``)."""
    from marl_sched.files import read_input_text

    # the trial folders and tune/ too: no link, FIFO or device at any depth
    check_owned_tree(out, where)
    path = owned_path(out, EXPERIMENT, where)
    try:
        data = json.loads(read_input_text(path, "json", f"{where}: {path}"))
        base, source, trials = data["config"], str(data["source"]), list(data["trials"])
        names = [str(t["name"]) for t in trials]
        if (
            not isinstance(base, dict)
            or not trials
            or any(
                not isinstance(t["seed"], int) or not isinstance(t["overrides"], list)
                for t in trials
            )
        ):
            raise ValueError("bad trial records")
        if any("/" in n or n in ("", ".", "..", "tune") for n in names):
            raise ValueError("bad trial name")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{where}: {path}: unreadable ({exc.__class__.__name__})") from None
    return base, source, trials


def run_experiment(
    out: Path, base: dict, source: str, trials: list[dict], iterations: int, *, quiet: bool,
    env_runners: int, keep: int,
) -> list[dict]:  # fmt: skip
    """Run (or resume) every trial under Ray Tune; one row per trial (:func:`results_rows`),
    also written to ``DIR/results.csv`` (Tune's TensorBoard logger is off: each trial's
    curves are its run folder's ``tb/``)."""
    from ray import tune
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    storage = owned_path(out, "tune", "experiment folder").resolve()
    storage.mkdir(parents=True, exist_ok=True)
    session = f"session_{len(list(storage.glob('session_*'))) + 1:02d}"
    resources = tune.PlacementGroupFactory([{"CPU": 1}] * (1 + env_runners))
    tuner = tune.Tuner(
        tune.with_resources(trainable, resources),
        param_space={
            "trial": tune.grid_search([t["name"] for t in trials]),
            "trials": {t["name"]: t for t in trials},
            "base": base,
            "source": source,
            "root": str(out.resolve()),
            "iterations": iterations,
        },
        tune_config=tune.TuneConfig(
            trial_name_creator=_trial_name, trial_dirname_creator=_trial_name
        ),
        run_config=tune.RunConfig(
            name=session,
            storage_path=str(storage),
            callbacks=[CSVLoggerCallback(), JsonLoggerCallback()],
            checkpoint_config=tune.CheckpointConfig(
                num_to_keep=keep or None,
                checkpoint_score_attribute=METRIC,
                checkpoint_score_order="min",
            ),
            failure_config=tune.FailureConfig(max_failures=0),
            verbose=0 if quiet else 1,
            progress_reporter=progress_reporter(),
        ),
    )
    with (
        # no TBXLoggerCallback added; the table of progress_reporter(), not the new
        # output's (whose "iter" counts reports, one more than the iterations trained)
        _env(TUNE_DISABLE_AUTO_CALLBACK_LOGGERS="1", RAY_AIR_NEW_OUTPUT="0"),
        contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext(),
    ):
        grid = tuner.fit()  # Tune prints its header whatever the verbosity
    for result in grid:
        if result.error is not None:
            name = result.config["trial"]
            lines = [ln for ln in str(result.error).splitlines() if ln.strip()]
            raise TrialError(f"trial {name} failed: {lines[-1] if lines else result.error}")
    rows = results_rows(out, trials, grid)
    write_results(owned_path(out, RESULTS, "experiment folder"), rows)
    return rows


@contextlib.contextmanager
def _env(**values: str):
    """Environment variables set while the block runs, then restored."""
    import os

    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class TrialError(RuntimeError):
    """A trial raised: its last error line (the full log is in Tune's folder)."""


def _trial_name(trial) -> str:
    return trial.config["trial"]


def _number(value) -> float | None:
    import math

    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def results_rows(out: Path, trials: list[dict], grid) -> list[dict]:
    """One row per trial, in the order of ``trials``: name, seed, one column per
    ``--grid`` key; from Tune's ``ResultGrid`` the last report's iteration, env steps and
    validation figure; from the run folder's ``state.json`` the best checkpoint's
    figure, path (relative to ``out``) and digest, and the wall time over every session."""
    from agents.run_folder import RunPaths
    from marl_sched.checkpoints import checkpoint_digest

    by_name = {r.config["trial"]: r for r in grid}
    rows = []
    for t in trials:
        result = by_name[t["name"]]
        reported = result.metrics or {}
        history = result.metrics_dataframe
        final = None
        if history is not None and METRIC in history:
            figures = history[METRIC].dropna()
            final = _number(figures.iloc[-1]) if len(figures) else None
        latest = RunPaths(out / t["name"]).latest()
        state = json.loads((latest / "state.json").read_text(encoding="utf-8"))
        if final is None:  # already trained to the end: this session reported no figure
            final = _number((state.get("scores") or {}).get(latest.name))
        best = state.get("best") or [None, None]
        best_dir = RunPaths(out / t["name"]).checkpoints / best[0] if best[0] else None
        rows.append(
            {
                "trial": t["name"],
                "seed": t["seed"],
                **dict(o.split("=", 1) for o in t["overrides"]),
                "iterations": int(reported.get("iteration", state["iteration"])),
                "env_steps": int(reported.get("env_steps", state["env_steps"])),
                f"final_{METRIC}": final,
                f"best_{METRIC}": _number(best[1]),
                "best_checkpoint": best_dir.relative_to(out).as_posix() if best_dir else "",
                "best_checkpoint_sha256": checkpoint_digest(best_dir) if best_dir else "",
                "wall_s": round(float(state["wall_s"]), 1),
            }
        )
    return rows


def write_results(path: Path, rows: list[dict]) -> None:
    """``results.csv`` (pandas; empty figures for a run never evaluated), atomically."""
    import pandas as pd

    from marl_sched.metrics import atomic_write_text

    atomic_write_text(path, pd.DataFrame(rows).to_csv(index=False, float_format="%.6g"))


#: columns of the table ``train --seeds/--grid`` prints (grid keys go after the seed)
TABLE_COLUMNS = (
    ("iterations", "iters", "d"),
    ("env_steps", "env steps", "d"),
    (f"final_{METRIC}", "final val JCT (s)", ".0f"),
    (f"best_{METRIC}", "best val JCT (s)", ".0f"),
    ("best_checkpoint", "best", ""),
    ("wall_s", "wall (s)", ".0f"),
)


def results_table(rows: list[dict]) -> str:
    """The trials as a plain text table (the columns of ``results.csv`` but the
    digest)."""
    from marl_sched.cli import format_table

    fixed = {"trial", "seed", "best_checkpoint_sha256", *(key for key, _, _ in TABLE_COLUMNS)}
    grid = [k for k in (rows[0] if rows else {}) if k not in fixed]
    columns = [("trial", "trial", ""), ("seed", "seed", "d"), *((k, k, "") for k in grid)]
    shown = [{k: "-" if v is None else v for k, v in r.items()} for r in rows]
    return format_table(shown, [*columns, *TABLE_COLUMNS])
