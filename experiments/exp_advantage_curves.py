"""Learning curves of the three advantage options at equal budget: validation average
JCT against environment steps for ``gae`` (plain critic), ``privileged`` (GAE on the
privileged critic) and ``group`` (the group baseline).

::

    python experiments/exp_advantage_curves.py [--config experiments/configs/learn_advantage.yaml]
        [--seeds 2] [--runs runs/advantage_curves] [--out FILE]

Runs ``marl-sched train --seeds N`` once per option (the config's recipe, with
``--grid train.critic=privileged`` or ``--grid train.advantage=group``: one Ray Tune
trial per seed, the same seeds, iterations and decisions per iteration for each),
skipping an option whose experiment folder already exists under ``--runs``, then reads
each trial's validation figure (TensorBoard ``charts/avg_jct_s``) back and prints one
JSON object: per option and seed ``{env steps: validation avg JCT (s)}``, per option
the mean over seeds at the first and the last evaluation, and for scale the
validation figure of ``random``, ``first-fit`` and ``interference-aware``
(``marl-sched simulate`` on the same windows). ``--out`` also writes it.
``python experiments/plot_learning_curve.py RUNS/gae RUNS/privileged RUNS/group`` draws
the curves with their seed bands.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARMS = {
    "gae": [],
    "privileged": ["--grid", "train.critic=privileged"],
    "group": ["--grid", "train.advantage=group"],
}
REFERENCES = ("random", "first-fit", "interference-aware")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="experiments/configs/learn_advantage.yaml")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--runs", type=Path, default=Path("runs/advantage_curves"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO / "experiments"))
    from plot_learning_curve import find_runs, read_scalars

    result: dict = {"config": args.config, "seeds": args.seeds, "options": {}}
    for arm, grid in ARMS.items():
        folder = args.runs / arm
        if not folder.exists():
            cmd = [sys.executable, "-m", "marl_sched.cli", "train", "--config", args.config,
                   "--out", str(folder), "--seeds", str(args.seeds), "--quiet", *grid]  # fmt: skip
            print(" ".join(cmd[1:]), flush=True)
            # this checkout's code, in the Tune trials' workers too
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            subprocess.run(cmd, cwd=REPO, check=True, env=env)
        runs = find_runs([folder])
        if isinstance(runs, str):
            raise SystemExit(runs)
        curves = {run.name: read_scalars(run, "charts/avg_jct_s") for run in runs}
        first = [c[min(c)] for c in curves.values() if c]
        last = [c[max(c)] for c in curves.values() if c]
        result["options"][arm] = {
            "runs": {name: {str(k): v for k, v in sorted(c.items())} for name, c in curves.items()},
            "mean_first_eval": sum(first) / len(first) if first else None,
            "mean_last_eval": sum(last) / len(last) if last else None,
        }
    result["references"] = {p: _validation_jct(args.config, p) for p in REFERENCES}
    print(json.dumps(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


def _validation_jct(config: str, policy: str) -> float:
    """The validation figure of a heuristic: avg JCT over the jobs of every validation
    window of ``config``'s ``train:`` (``marl-sched simulate`` on each)."""
    from agents.config import train_config
    from marl_sched.config import load_config

    tc = train_config(load_config(REPO / config))
    if tc.eval_trace is None or tc.eval_start is None:
        raise SystemExit(f"{config}: set train.eval_trace and train.eval_start")
    windows = [(tc.eval_trace, tc.eval_start, tc.eval_max_jobs)]
    windows += [(w.trace, w.start, w.max_jobs) for w in tc.eval_extra_windows]
    total = jobs = 0.0
    for trace, start, n in windows:
        with tempfile.TemporaryDirectory() as out:
            cmd = [sys.executable, "-m", "marl_sched.cli", "simulate", "--config", config,
                   "--policy", policy, "--trace", trace, "--start", str(start),
                   "--max-jobs", str(n), "--out", out, "--quiet"]  # fmt: skip
            subprocess.run(cmd, cwd=REPO, check=True, capture_output=True)
            m = json.loads((Path(out) / "metrics.json").read_text(encoding="utf-8"))
        total += m["avg_jct_s"] * m["jobs_completed"]
        jobs += m["jobs_completed"]
    return total / jobs


if __name__ == "__main__":
    main(sys.argv[1:])
