"""Fit length-aware's long/short threshold from the train split only.

The threshold is on a job's estimated work per worker, ``Job.work_s`` (estimated
iterations x the model's compute per iteration on the reference V100, seconds): the
median over the scored jobs of every train-split scenario of benchmarks/default.yaml,
workload seed 0, under the config's default estimate (``noisy``) and, for reference,
the true lengths (``oracle``). Run from the repository root:

    python results/room-rules/fit_threshold.py
"""

from __future__ import annotations

import numpy as np

from marl_sched.benchmark.suite import load_suite
from marl_sched.runner import build_cluster, load_workload


def main() -> None:
    suite = load_suite("benchmarks/default.yaml")
    for estimate in ("noisy", "oracle"):
        work = []
        for sc in suite.split("train"):
            cfg = suite.config_for(sc, seed=0, duration_estimate=estimate)
            topo, perf = build_cluster(cfg)
            wl = load_workload(cfg, perf)
            pred = wl.predictor()
            work += [pred.visible_job(j).work_s for j in wl.jobs if j.job_id >= wl.warmup]
        w = np.asarray(work)
        print(
            f"{estimate}: {len(w)} jobs of {len(suite.split('train'))} train scenarios, "
            f"median work_s {np.median(w):.1f}, quartiles {np.percentile(w, 25):.1f} "
            f"{np.percentile(w, 75):.1f}"
        )


if __name__ == "__main__":
    main()
