"""How much of each window's work is in jobs that run at least an hour in isolation:
the share of jobs and of work (isolated run time x workers) at or above 1 h and 2 h,
per train and validation scenario (seed 0, the placement track; test windows are not
read). Writes ``lengths.md`` here; run from the repository root:

    python results/room-oracle/lengths.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from marl_sched.benchmark.suite import DEFAULT_SUITE, load_suite, track_overrides
from marl_sched.runner import build_cluster, load_workload

HERE = Path(__file__).resolve().parent


def main() -> None:
    suite = load_suite(DEFAULT_SUITE).with_overrides(list(track_overrides("placement")))
    lines = ["| split | scenario | jobs | jobs >= 1 h | their work | jobs >= 2 h | their work |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for split in ("train", "validation"):
        for sc in suite.split(split):
            cfg = suite.config_for(sc, seed=0)
            topo, perf = build_cluster(cfg)
            jobs = load_workload(cfg, perf).jobs
            run = np.array([j.iterations * perf.isolated_iteration_time(
                j.model, j.num_workers, j.num_ps) for j in jobs])  # fmt: skip
            work = run * np.array([j.num_workers for j in jobs])
            ok = np.isfinite(work)
            run, work = run[ok], work[ok]
            cells = [f"{(run >= h).mean():.2f} | {work[run >= h].sum() / work.sum():.2f}"
                     for h in (3600, 7200)]  # fmt: skip
            lines.append(f"| {split} | {sc.name} | {len(run)} | {cells[0]} | {cells[1]} |")
    (HERE / "lengths.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
