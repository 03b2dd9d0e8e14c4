"""What knowing the residents is worth to a heuristic: interference-aware with and
without protecting them.

::

    python experiments/exp_residents.py [--protect 1,3,10] [--speed 1] [--windows NAME,...]
        [--out DIR]

Interference-aware scores a GPU group by the pressure of the tasks around it, which
cannot tell a one-GPU job from one worker of a 48-GPU job; a synchronous job runs at
its slowest worker's pace, so slowing that worker stalls all 48 GPUs.
``InterferenceAwarePolicy(protect=k)`` adds ``k`` times the harm a worker would do to
the resident jobs, each weighted by its workers
(:func:`marl_sched.simulator.harm_to_residents`) — the information
``env.resident_features`` gives the agents. Run on the held-out windows of
``experiments/train_marl.py`` and on the shipped Pollux training and validation
workloads (2–6), so the reader can see which windows the information can move at all.
Beside it, ``InterferenceAwarePolicy(speed=k)``: interference-aware that also counts how
much slower a GPU type runs the job's compute (the ``speed-aware`` hint variant of
``configs/recipes/speed.yaml`` is ``k = 1``).

Prints a table of average JCT (s) per window and ``protect`` value with the change
against plain interference-aware (positive: protecting is better); then, per window,
the ``--top`` jobs with the largest JCT under interference-aware: their share of the
window's summed JCT, their slowdown over the isolated runtime, and the largest
interference factor and communication stretch (over the job alone on its placement)
they met while running — a job that never meets either is slow for its placement's
own sake (for a 16-worker job on two 8-GPU servers the NIC bytes are the same for every
PS split), and no choice of neighbours moves it. Writes ``residents.md`` and
``residents.csv`` into ``--out`` (atomically), and ends with one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from marl_sched.catalogue import CATALOGUE
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.metrics import write_report
from marl_sched.policies.heuristics import InterferenceAwarePolicy
from marl_sched.runner import TraceOptions, build_cluster, load_workload, simulate
from marl_sched.simulator import Simulator

CONFIG = REPO_ROOT / "configs" / "default.yaml"
POLLUX = REPO_ROOT / "configs" / "traces" / "pollux"


def windows() -> dict[str, tuple[str, dict]]:
    """Name -> (role, window): the held-out windows, then the shipped Pollux training
    and validation workloads."""
    import train_marl as tm  # experiments/ is on the path of a script

    out = {name: ("held out", w) for name, w in tm.WINDOWS.items()}
    for k in range(2, 7):
        window = {"trace": str(POLLUX / f"workload-{k}.csv"), "start": 0, "max_jobs": 500}
        out[f"pollux-{k}"] = ("training" if k < 6 else "validation", window)
    return out


def load(window: dict) -> tuple:
    """``(config, topology, perf, workload)`` of ``window`` on the default cluster."""
    cfg = load_config(CONFIG)
    topo, perf = build_cluster(cfg)
    options = TraceOptions(**{k: window[k] for k in ("trace", "start", "max_jobs")})
    return cfg, topo, perf, load_workload(cfg, perf, options)


def avg_jct(loaded: tuple, protect: float, speed: float = 0.0) -> float:
    """Interference-aware's average JCT (s) with ``protect`` and ``speed`` on a
    :func:`load`-ed window."""
    cfg, topo, perf, workload = loaded
    policy = InterferenceAwarePolicy(protect=protect, speed=speed)
    metrics, _, _ = simulate(cfg, policy.name, workload, topo, perf, policy=policy)
    return float(metrics["avg_jct_s"])


def heaviest_jobs(loaded: tuple, top: int) -> list[dict]:
    """Interference-aware on a :func:`load`-ed window: the ``top`` jobs with the
    largest JCT and what slowed them (sampled after every decision while they ran)."""
    _, topo, perf, workload = loaded
    sim = Simulator(topo, workload.jobs, perf=perf)
    policy = InterferenceAwarePolicy()
    policy.reset(topo, 0)
    worst: dict[int, list[float]] = {}  # job id -> [max interference, max comm stretch]
    idle = np.zeros_like(sim.link_load)
    while (job := sim.next_decision()) is not None:
        sim.apply(policy.place(job, sim.view()))
        for jid, run in sim.running.items():
            spec = CATALOGUE[run.job.model]
            i = perf.interference(
                spec, run.layout, sim.group_pressure, sim.socket_pressure, sim.server_pressure
            )
            alone = perf.comm_time(run.layout, idle)
            stretch = perf.comm_time(run.layout, sim.link_load) / alone if alone > 0 else 1.0
            w = worst.setdefault(jid, [1.0, 1.0])
            w[0], w[1] = max(w[0], i), max(w[1], stretch)
    records = sorted(sim.result(), key=lambda r: -r.jct)
    total = sum(r.jct for r in records)
    return [
        {
            "job_id": r.job.job_id,
            "model": r.job.model,
            "workers": r.job.num_workers,
            "servers": r.n_servers,
            "share_of_total_jct": r.jct / total,
            "slowdown": r.jct / r.isolated_runtime,
            "max_interference": worst.get(r.job.job_id, [1.0, 1.0])[0],
            "max_comm_stretch": worst.get(r.job.job_id, [1.0, 1.0])[1],
        }
        for r in records[:top]
    ]


def _weights(flag: str, text: str) -> list[float]:
    """Comma-separated weights > 0; anything else exits 2 with one line."""
    try:
        weights = [float(k) for k in text.split(",")]
    except ValueError:
        weights = []
    if not weights or min(weights) <= 0:
        print(f"error: {flag}: expected weights > 0, got {text!r}", file=sys.stderr)
        raise SystemExit(2)
    return weights


def main() -> None:
    known = windows()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--protect", default="1,3,10", help="comma-separated protect weights > 0")
    ap.add_argument("--speed", default="1", help="comma-separated speed weights > 0")
    ap.add_argument("--windows", default=None, help="comma-separated names (default: all)")
    ap.add_argument("--top", type=int, default=3, help="heaviest jobs shown per window")
    ap.add_argument("--out", default="runs/exp_residents")
    args = ap.parse_args()
    weights, speeds = _weights("--protect", args.protect), _weights("--speed", args.speed)
    names = list(known) if args.windows is None else args.windows.split(",")
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"error: --windows: unknown window {unknown[0]!r} (known: {', '.join(known)})",
              file=sys.stderr)  # fmt: skip
        raise SystemExit(2)

    rows, t0 = [], time.perf_counter()
    for name in names:
        role, window = known[name]
        if not Path(window["trace"]).exists():
            print(f"skipping {name}: {window['trace']} not found")
            continue
        loaded = load(window)
        base = avg_jct(loaded, 0.0)
        row = {"window": name, "role": role, "interference_aware": base}
        for k in weights:
            row[f"protect_{k:g}"] = avg_jct(loaded, k)
        for k in speeds:
            row[f"speed_{k:g}"] = avg_jct(loaded, 0.0, k)
        row["heaviest"] = heaviest_jobs(loaded, args.top)
        rows.append(row)
    variants = [*(f"protect_{k:g}" for k in weights), *(f"speed_{k:g}" for k in speeds)]
    keys = ["window", "role", "interference_aware", *variants]
    header = "| window | role | interference-aware | "
    header += " | ".join(v.replace("_", " ") for v in variants)
    lines = [header + " |", "|---" * len(keys) + "|"]
    for r in rows:
        base = r["interference_aware"]
        cells = [f"{r[key]:,.0f} ({(base - r[key]) / base:+.1%})" for key in keys[3:]]
        lines.append(f"| {r['window']} | {r['role']} | {base:,.0f} | " + " | ".join(cells) + " |")
    lines += ["", "| window | job | model | workers | servers | share of Σ JCT | slowdown "
              "| max interference | max comm stretch |", "|---" * 9 + "|"]  # fmt: skip
    for r in rows:
        for h in r["heaviest"]:
            lines.append(
                f"| {r['window']} | {h['job_id']} | {h['model']} | {h['workers']} | "
                f"{h['servers']} | {h['share_of_total_jct']:.1%} | {h['slowdown']:.2f} | "
                f"{h['max_interference']:.2f} | {h['max_comm_stretch']:.2f} |"
            )
    table = "\n".join(lines)
    print(table)
    write_report(args.out, "residents", table + "\n", rows, keys)
    print(json.dumps({"wall_s": round(time.perf_counter() - t0, 1), "windows": rows}))


if __name__ == "__main__":
    main()
