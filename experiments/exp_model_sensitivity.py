"""Does the ranking of the policies survive a different performance model?

::

    python experiments/exp_model_sensitivity.py [--policies first-fit,...]
        [--checkpoint marl=checkpoints/marl-default] [--seed 0] [--out DIR]

Re-runs every policy on every scenario of the benchmark's **validation** split
(``benchmarks/default.yaml``; the test split is never touched) under the nominal
performance model and under perturbed ones, each changing one constant that the
calibration could not pin down well (docs/performance-model.md §6):

* ``nic x0.5`` / ``nic x2``: the NIC (and rack / subcluster uplink) efficiency,
* ``coupling x0.5`` / ``coupling x2``: the interference level couplings λ_L,
* ``overlap off``: compute and communication add up (γ = 1; nominal γ = 1.41),
* ``per-type speed``: one GPU speed per GPU type instead of the per-model ones;

and ``other seed``, the nominal model with the next seed: its τ is the noise floor
(one seed per cell, as here, reorders near-tied policies by itself).

The perturbed model is the world: the simulator runs on it, and the workload's
iteration counts come from it (a trace's duration is the job's isolated runtime under
that model). Policies read the world through the simulator's view as usual.

A policy's score is the IQM over scenarios of its average JCT divided by first-fit's
on the same scenario and model (lower is better), as ``marl-sched benchmark`` ranks.
For every perturbed model, Kendall's τ (``scipy.stats.kendalltau``) between its
ranking and the nominal one. Writes ``model_sensitivity.md`` / ``.csv`` into
``--out`` and prints one JSON object last. Cells already in ``--out``'s CSV (an
earlier run) are reused, so the grid can be extended by policies or variants.
"""

from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import kendalltau

from marl_sched.benchmark.stats import iqm
from marl_sched.benchmark.suite import load_suite
from marl_sched.catalogue import CALIBRATION, Calibration, ModelSpec
from marl_sched.metrics import write_report
from marl_sched.perf import PerformanceModel
from marl_sched.policies import build_policy, heuristic_names
from marl_sched.runner import load_workload, simulate
from marl_sched.topology import Topology

#: name -> (NIC efficiency factor, coupling factor, overlap γ or None, per-type speeds,
#: seed offset). "other seed" is the nominal model with the next seed (workload fill
#: and policy seed): its τ is the noise floor the perturbations are read against.
VARIANTS: dict[str, tuple[float, float, float | None, bool, int]] = {
    "nominal": (1.0, 1.0, None, False, 0),
    "other seed": (1.0, 1.0, None, False, 1),
    "nic x0.5": (0.5, 1.0, None, False, 0),
    "nic x2": (2.0, 1.0, None, False, 0),
    "coupling x0.5": (1.0, 0.5, None, False, 0),
    "coupling x2": (1.0, 2.0, None, False, 0),
    "overlap off": (1.0, 1.0, 1.0, False, 0),
    "per-type speed": (1.0, 1.0, None, True, 0),
}
NETWORK_KINDS = (2, 3, 4)  # nic, rack_uplink, sc_uplink: the links link_efficiency.nic scales


class PerTypeSpeedModel(PerformanceModel):
    """The performance model with one GPU speed per GPU type (no per-model figures)."""

    def type_speeds(self, spec: ModelSpec) -> np.ndarray:
        return super().type_speeds(dataclasses.replace(spec, gpu_speed={}))


def perturbed_model(topology: Topology, variant: str) -> PerformanceModel:
    """The performance model of ``variant`` on (a copy of) ``topology``."""
    nic, coupling, gamma, per_type, _ = VARIANTS[variant]
    if nic != 1.0:
        topology = copy.copy(topology)
        bw = topology.link_bw.copy()
        bw[np.isin(topology.link_kind, NETWORK_KINDS)] *= nic
        bw.setflags(write=False)
        topology.link_bw = bw
    cal: Calibration = dataclasses.replace(
        CALIBRATION,
        level_coupling={k: v * coupling for k, v in CALIBRATION.level_coupling.items()},
        overlap_gamma=CALIBRATION.overlap_gamma if gamma is None else gamma,
    )
    cls = PerTypeSpeedModel if per_type else PerformanceModel
    return cls(topology, cal)


def run_grid(
    policies: list[str],
    checkpoints: dict[str, str],
    seed: int,
    only: set[str] | None = None,
    done: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Every (validation scenario, variant, policy) cell; cells in ``done`` (rows of an
    earlier run into the same folder) are kept, not rerun."""
    suite = load_suite()
    rows = list(done or [])
    have = {(r["scenario"], r["variant"], r["policy"]) for r in rows}
    for scenario in suite.split("validation"):
        if only and scenario.name not in only:
            continue
        base_topo = None
        for variant in VARIANTS:
            todo = [p for p in policies if (scenario.name, variant, p) not in have]
            if not todo:
                continue
            cell_seed = seed + VARIANTS[variant][4]
            cfg = suite.config_for(scenario, seed=cell_seed)
            base_topo = base_topo or Topology.from_config(cfg.topology)
            perf = perturbed_model(base_topo, variant)
            work = load_workload(cfg, perf)
            for name in todo:
                t0 = time.perf_counter()
                policy = build_policy(name, checkpoints.get(name))
                m, _, _ = simulate(
                    cfg, name, work, perf.topology, perf, seed=cell_seed, policy=policy
                )
                rows.append(
                    {
                        "scenario": scenario.name,
                        "variant": variant,
                        "policy": name,
                        "seed": seed,
                        "avg_jct_s": m["avg_jct_s"],
                        "wall_s": time.perf_counter() - t0,
                    }
                )
                print(f"{scenario.name:<22} {variant:<15} {name:<20} "
                      f"avg JCT {m['avg_jct_s']:>12.0f} s  ({rows[-1]['wall_s']:.1f} s)",
                      file=sys.stderr, flush=True)  # fmt: skip
    return rows


def scores(rows: list[dict[str, Any]], policies: list[str]) -> dict[str, dict[str, float]]:
    """variant -> policy -> IQM over scenarios of avg JCT / first-fit's."""
    ref = "first-fit" if "first-fit" in policies else policies[0]
    jct = {(r["scenario"], r["variant"], r["policy"]): r["avg_jct_s"] for r in rows}
    scen = sorted({r["scenario"] for r in rows})
    out: dict[str, dict[str, float]] = {}
    for v in VARIANTS:
        out[v] = {
            p: float(iqm(np.array([jct[(s, v, p)] / jct[(s, v, ref)] for s in scen])))
            for p in policies
        }
    return out


def taus(score: dict[str, dict[str, float]], policies: list[str]) -> dict[str, float]:
    nominal = [score["nominal"][p] for p in policies]
    return {
        v: float(kendalltau(nominal, [score[v][p] for p in policies]).statistic)
        for v in VARIANTS
        if v != "nominal"
    }


def table(score, tau, policies: list[str]) -> str:
    variants = list(VARIANTS)
    lines = [
        "| policy | " + " | ".join(variants) + " |",
        "|---|" + "---|" * len(variants),
    ]
    for p in sorted(policies, key=lambda p: score["nominal"][p]):
        cells = []
        for v in variants:
            rank = 1 + sorted(score[v].values()).index(score[v][p])
            cells.append(f"{score[v][p]:.3f} ({rank})")
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    lines.append(
        "| **Kendall τ vs nominal** | – | "
        + " | ".join(f"**{tau[v]:.2f}**" for v in variants if v != "nominal")
        + " |"
    )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policies", default=",".join(heuristic_names()))
    ap.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        help="NAME=PATH for a learned policy listed in --policies",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scenarios", default="", help="validation scenarios (default: all)")
    ap.add_argument("--out", default="runs/exp_model_sensitivity")
    args = ap.parse_args()
    policies = [p for p in args.policies.split(",") if p]
    checkpoints = dict(c.split("=", 1) for c in args.checkpoint)
    t0 = time.perf_counter()
    stored = Path(args.out) / "model_sensitivity.csv"
    done = []
    if stored.is_file():
        with open(stored, newline="", encoding="utf-8") as f:
            done = [
                {**r, "avg_jct_s": float(r["avg_jct_s"]), "wall_s": float(r["wall_s"])}
                for r in csv.DictReader(f)
                if r["policy"] in policies
            ]
    only = set(filter(None, args.scenarios.split(",")))
    done = [r for r in done if int(r["seed"]) == args.seed and (not only or r["scenario"] in only)]
    rows = run_grid(policies, checkpoints, args.seed, only, done)
    score = scores(rows, policies)
    tau = taus(score, policies)
    text = table(score, tau, policies)
    print(text)
    write_report(
        args.out,
        "model_sensitivity",
        text + "\n",
        rows,
        ["scenario", "variant", "policy", "seed", "avg_jct_s", "wall_s"],
    )
    print(json.dumps({"wall_s": round(time.perf_counter() - t0, 1), "kendall_tau": tau,
                      "scores": score}))  # fmt: skip


if __name__ == "__main__":
    main()
