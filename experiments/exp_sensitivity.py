"""The noise floor of a window: how far one changed placement moves its average JCT.

::

    python experiments/exp_sensitivity.py [--windows pollux-1,philly-20000,...]
                                          [--swaps 12] [--seed 0] [--out DIR]

For each held-out window of ``experiments/train_marl.py``: interference-aware's run,
then ``--swaps`` runs in each of which **one** multi-worker job (drawn at random,
seeded) is placed by locality instead (first-fit when locality places it the same way
or not at all); every other job is interference-aware's. The spread of these runs is
what a single different decision does to the window — the scale against which a
learned policy's margin over interference-aware should be read (a policy's seeds
differ from each other, and from interference-aware, in many decisions).

Prints per window interference-aware's average JCT and the relative changes of the
one-swap runs (min / median / max, how many move it by more than 2 %), writes
``sensitivity.md`` and ``sensitivity.csv`` into ``--out`` (atomically), and ends with
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from marl_sched.config import REPO_ROOT, load_config
from marl_sched.jobs import Job, Placement
from marl_sched.metrics import write_report
from marl_sched.policies import make_policy
from marl_sched.policies.base import Policy
from marl_sched.runner import TraceOptions, build_cluster, load_workload, simulate
from marl_sched.simulator import ClusterView
from marl_sched.topology import Topology

CONFIG = REPO_ROOT / "configs" / "default.yaml"


class OneSwap(Policy):
    """``base`` for every job but ``job_id``, which ``alternatives`` place (the first
    whose workers land on other GPU groups than ``base``'s); ``swapped`` says whether
    one did."""

    name = "one-swap"

    def __init__(self, base: Policy, alternatives: list[Policy], job_id: int) -> None:
        self.base, self.alternatives, self.job_id = base, alternatives, job_id
        self.swapped = False

    def reset(self, topology: Topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        for p in (self.base, *self.alternatives):
            p.reset(topology, seed)

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        mine = self.base.place(job, view)
        if job.job_id != self.job_id or mine is None:
            return mine
        for alt in self.alternatives:
            other = alt.place(job, view)
            if other is not None and sorted(other.worker_groups) != sorted(mine.worker_groups):
                self.swapped = True
                return other
        return mine


def window_sensitivity(name: str, window: dict, swaps: int, seed: int, options) -> dict:
    cfg = load_config(CONFIG)
    topo, perf = build_cluster(cfg)
    work = load_workload(cfg, perf, TraceOptions(**options(window)))
    base, _, _ = simulate(cfg, "interference-aware", work, topo, perf)
    multi = [j.job_id for j in work.jobs if j.num_workers > 1]
    rng = np.random.default_rng(seed)
    picked = rng.choice(multi, size=min(swaps, len(multi)), replace=False)
    changes = []
    for job_id in sorted(int(j) for j in picked):
        policy = OneSwap(
            make_policy("interference-aware"),
            [make_policy("locality"), make_policy("first-fit")],
            job_id,
        )
        m, _, _ = simulate(cfg, "one-swap", work, topo, perf, policy=policy)
        if policy.swapped:
            changes.append((job_id, (m["avg_jct_s"] - base["avg_jct_s"]) / base["avg_jct_s"]))
        print(f"  {name}: job {job_id} swapped={policy.swapped} "
              f"avg JCT {m['avg_jct_s']:.0f} s", file=sys.stderr)  # fmt: skip
    rel = np.array([c for _, c in changes]) if changes else np.zeros(0)
    return {
        "window": name,
        "jobs": len(work.jobs),
        "multi_worker_jobs": len(multi),
        "ia_avg_jct_s": base["avg_jct_s"],
        "swaps": len(changes),
        "min": float(rel.min()) if len(rel) else None,
        "median": float(np.median(rel)) if len(rel) else None,
        "max": float(rel.max()) if len(rel) else None,
        "beyond_2pct": int((np.abs(rel) > 0.02).sum()),
        "changes": [{"job_id": j, "rel": c} for j, c in changes],
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def main() -> None:
    import train_marl as tm  # the held-out windows (experiments/ is on the path of a script)

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--windows", default=",".join(tm.WINDOWS), help="comma-separated names")
    ap.add_argument("--swaps", type=int, default=12, help="one-swap runs per window")
    ap.add_argument("--seed", type=int, default=0, help="which jobs are swapped")
    ap.add_argument("--out", default="runs/exp_sensitivity")
    args = ap.parse_args()
    names = [w for w in args.windows.split(",") if w]
    unknown = [w for w in names if w not in tm.WINDOWS]
    if unknown:
        print(f"error: --windows: unknown window {unknown[0]!r} "
              f"(known: {', '.join(tm.WINDOWS)})", file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    rows, t0 = [], time.perf_counter()
    for name in names:
        window = tm.WINDOWS[name]
        if not tm.trace_exists(window):
            print(f"skipping {name}: {window['trace']} not found")
            continue
        rows.append(window_sensitivity(name, window, args.swaps, args.seed, tm.options))
    header = "| window | IA avg JCT (s) | one-swap runs | min | median | max | beyond ±2 % |"
    lines = [header, "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['window']} | {r['ia_avg_jct_s']:,.0f} | {r['swaps']} | {_pct(r['min'])} | "
            f"{_pct(r['median'])} | {_pct(r['max'])} | {r['beyond_2pct']} |"
        )
    table = "\n".join(lines)
    print(table)
    keys = ["window", "ia_avg_jct_s", "swaps", "min", "median", "max", "beyond_2pct"]
    write_report(args.out, "sensitivity", table + "\n", rows, keys)
    print(json.dumps({"wall_s": round(time.perf_counter() - t0, 1), "windows": rows}))


if __name__ == "__main__":
    main()
