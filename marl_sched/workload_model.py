"""The planner's model of the future: a workload model fitted on the benchmark's train
split only (``benchmarks/default.yaml``, :func:`marl_sched.benchmark.suite.load_suite`;
never a validation or test window).

What it holds (``marl_sched/data/workload_model.json``):

- ``rate_per_h``: the train windows' pooled arrival rate (jobs / hour), a prior worth
  :data:`PRIOR_JOBS` arrivals on the window's own observed rate
  (:meth:`WorkloadModel.rate`);
- ``jobs``: up to :data:`MAX_ROWS` rows ``[model, workers, ps, est_work_s]`` sampled
  with replacement from the train jobs (``est_work_s``: reference-GPU seconds per worker);
- ``log_ratio``: 101 quantiles of ``ln(true / estimate)`` of the train jobs' lengths
  (:mod:`marl_sched.duration`): a job's true length is its estimate times a draw.

Fit (once; the file records the command, split and seed)::

    python -m marl_sched.workload_model fit [--seed 0]
    python -m marl_sched.workload_model latency CONFIG [--k 4] [--decisions 100]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import resource
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job

MODEL_PATH = Path(__file__).parent / "data" / "workload_model.json"
MAX_ROWS = 1000
#: the prior's weight in arrivals (:meth:`WorkloadModel.rate`)
PRIOR_JOBS = 5.0


@dataclass(frozen=True)
class WorkloadModel:
    """A fitted workload model (see the module docstring)."""

    rate_per_h: float
    jobs: tuple[tuple[str, int, int, float], ...]
    log_ratio: np.ndarray

    @classmethod
    def load(cls, path: str | Path = MODEL_PATH) -> WorkloadModel:
        data = json.loads(Path(path).read_text())
        rows = tuple((str(m), int(w), int(p), float(s)) for m, w, p, s in data["jobs"])
        return cls(float(data["rate_per_h"]), rows, np.asarray(data["log_ratio"], float))

    def rate(self, arrived: int, elapsed_s: float) -> float:
        """Arrivals per second: the window's own rate so far (``arrived`` jobs in
        ``elapsed_s``), shrunk towards the train rate by :data:`PRIOR_JOBS` arrivals
        of prior (a Gamma prior's posterior mean)."""
        prior = self.rate_per_h / 3600.0
        return (arrived + PRIOR_JOBS) / (max(elapsed_s, 0.0) + PRIOR_JOBS / prior)

    def ratio(self, rng: np.random.Generator, size: int | None = None):
        """Draws of true length / estimate (interpolated quantiles)."""
        q = self.log_ratio
        u = rng.random(size) * (len(q) - 1)
        return np.exp(np.interp(u, np.arange(len(q)), q))

    def true_total(self, est: float, done: float, rng, prior: float = 1.0) -> float:
        """A draw of a job's true total iterations given its estimate ``est`` and the
        ``done`` iterations it has run: ``est`` × a ratio, redrawn (up to 20 times)
        while not above ``done``; a job that outlived the draws finishes after another
        10 % of its estimate. No estimate (``nan``): ``prior`` (iterations) instead."""
        if not math.isfinite(est) or est <= 0:
            est = prior
        for r in self.ratio(rng, 20):
            if est * r > done:
                return float(est * r)
        return done + 0.1 * est

    def prior_iterations(self, model: str, rng: np.random.Generator) -> float:
        """A train job's estimated iterations of ``model`` (any model's when none)."""
        rows = [r for r in self.jobs if r[0] == model] or list(self.jobs)
        return rows[int(rng.integers(len(rows)))][3] / CATALOGUE[model].compute_s

    def sample_future(self, pending: list[Job], now: float, rate_s: float, rng) -> list[Job]:
        """``pending`` (the jobs still to arrive, ids kept) with sampled submit times
        (exponential gaps at ``rate_s`` from ``now``), sizes, models and true lengths."""
        rows = rng.integers(len(self.jobs), size=len(pending))
        gaps = rng.exponential(1.0 / rate_s, size=len(pending))
        ratios = self.ratio(rng, len(pending))
        out, t = [], now
        for job, row, gap, r in zip(pending, rows, gaps, ratios, strict=True):
            model, workers, ps, work_s = self.jobs[row]
            t += float(gap)
            iters = max(1.0, work_s * r / CATALOGUE[model].compute_s)
            out.append(replace(job, model=model, num_workers=workers, num_ps=ps,
                               iterations=iters, submit_time=t, duration=math.nan))  # fmt: skip
        return out


def fit(seed: int = 0) -> dict:
    """The workload model of the default suite's train split, its utilisation tiers
    (the queue tiers repeat the same windows; workload seed ``seed``)."""
    from marl_sched.benchmark.suite import load_suite
    from marl_sched.runner import build_cluster, load_workload

    suite = load_suite()
    rows, logs, n_jobs, span_s = [], [], 0, 0.0
    scenarios = suite.split("train", suite.tiers)
    for sc in scenarios:
        cfg = suite.config_for(sc, seed=seed)
        _, perf = build_cluster(cfg)
        wl = load_workload(cfg, perf)
        pred = wl.predictor()
        times = [j.submit_time for j in wl.jobs]
        n_jobs += len(times) - 1
        span_s += times[-1] - times[0]
        for j in wl.jobs:
            est = pred.est_iterations(j)
            if math.isfinite(est) and est > 0:
                rows.append([j.model, j.num_workers, j.num_ps, est * CATALOGUE[j.model].compute_s])
                logs.append(math.log(j.iterations / est))
    rng = np.random.default_rng(seed)
    pick = rng.integers(len(rows), size=min(MAX_ROWS, len(rows)))
    return {
        "note": (
            f"python -m marl_sched.workload_model fit --seed {seed}: benchmarks/default.yaml "
            f"train split only ({len(scenarios)} scenarios, {len(rows)} jobs, workload seed "
            f"{seed}, the base config's duration estimate); rows sampled with seed {seed}"
        ),
        "rate_per_h": round(3600.0 * n_jobs / span_s, 4),
        "jobs": [[m, w, p, round(s, 2)] for m, w, p, s in (rows[i] for i in pick)],
        "log_ratio": [round(float(v), 5) for v in np.quantile(logs, np.linspace(0, 1, 101))],
    }


def latency(
    config: str, k: int, decisions: int, policy: str, overrides: list[str] | None = None
) -> tuple[float, float]:
    """Mean wall ms per decision of ``policy`` over the first ``decisions`` jobs of
    ``config``'s window (K = ``k`` futures; the other options the config's ``planner:``
    section and ``overrides``), and per decision it played out (``planner.min_run_s``
    lets short jobs take the base's choice; nan when none was)."""
    from marl_sched.config import load_config
    from marl_sched.policies import build_policy
    from marl_sched.runner import TraceOptions, build_cluster, load_workload, simulate

    cfg = load_config(config, overrides or [])
    cfg = dataclasses.replace(cfg, planner={**cfg.planner, "k": k})
    topo, perf = build_cluster(cfg)
    wl = load_workload(cfg, perf, TraceOptions(max_jobs=decisions))
    pol = build_policy(policy, config=cfg)
    t0 = time.perf_counter()
    _, _, sim = simulate(cfg, policy, wl, topo, perf, policy=pol)
    ms = 1000.0 * (time.perf_counter() - t0)
    planned = getattr(pol, "planned", 0)
    return ms / max(1, sim.stats.decisions), (ms / planned if planned else math.nan)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m marl_sched.workload_model")
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit", help="fit on the train split and write the JSON")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--out", default=str(MODEL_PATH))
    lat = sub.add_parser("latency", help="ms per decision of the planner on a config")
    lat.add_argument("config")
    lat.add_argument("--k", type=int, default=4)
    lat.add_argument("--decisions", type=int, default=100)
    lat.add_argument("--policy", default="planner")
    lat.add_argument("--set", action="append", default=[], help="a config override key=value")
    args = parser.parse_args(argv)
    if args.command == "fit":
        Path(args.out).write_text(json.dumps(fit(args.seed), separators=(",", ":")) + "\n")
        print(f"wrote {args.out}")
        return 0
    if args.k < 1 or args.decisions < 1:
        print("--k and --decisions: must be >= 1", file=sys.stderr)
        return 2
    from marl_sched.errors import InputError

    try:
        ms, per_planned = latency(args.config, args.k, args.decisions, args.policy, args.set)
    except InputError as err:
        print(err, file=sys.stderr)
        return 2
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    what = f"{args.policy} k={args.k} on {args.config}"
    print(f"{what}: {ms:.1f} ms per decision ({per_planned:.1f} per decision played out), "
          f"peak {peak:.0f} MB")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
