"""Write benchmarks/default.yaml: the pre-registered splits, windows and load tiers.

    python -m marl_sched.benchmark.make_suite [--out benchmarks/default.yaml]
        [--reuse benchmarks/default.yaml]

Measures, per window and tier, the load at which first-fit reaches the tier's steady
utilisation, or for a queue tier its share of JCT spent queued
(:mod:`marl_sched.benchmark.calibrate`); ``--reuse FILE`` keeps the load of every
unchanged scenario of FILE (docs/benchmark.md). New scenarios come after the old
ones of their split, so a suite re-written with ``--reuse`` only gains lines."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from marl_sched.benchmark.calibrate import QUEUE_SLACK, calibrate_load, calibrate_queue_share
from marl_sched.benchmark.suite import Scenario, Suite
from marl_sched.config import REPO_ROOT

TIERS = {"light": 0.30, "medium": 0.60, "heavy": 0.85}
#: queue tiers: first-fit's mean queue time / mean JCT over the scored jobs, reached
#: within [target, target + QUEUE_SLACK] (since 2026-12-01: docs/benchmark.md)
QUEUE_TIERS = {"contention": 0.20}
TOPOLOGIES = {
    "default": "configs/default.yaml",
    "k80-heavy": "benchmarks/topologies/k80-heavy.yaml",
    "oversubscribed": "benchmarks/topologies/oversubscribed.yaml",
}
DATA = "../shared/data/traces"
PHILLY = f"{DATA}/philly.csv"
ALIBABA = f"{DATA}/alibaba_openb_pods.csv"


def pollux(n: int) -> str:
    return f"{DATA}/pollux_workloads/workload-{n}.csv"


def sia(source: str, n: int) -> str:
    return f"{DATA}/sia_workloads/{source}/workload-{n}.csv"


# Which split owns what. Philly by time (jobs in submit order: 0-49,999 up to
# 2017-10-27, train, holding the shipped sample 44,222-46,721; 50,000-61,999
# validation; 62,000 on, from 2017-11-12, test). Pollux workloads: 2-5 train (the
# shipped training windows), 1 and 6-8 validation (the old "held-out" windows were
# the development set, so they cannot be test). Sia workloads by file, except that
# Sia's philly workload-N repeats Pollux's workload-N's arrival times and most of its
# jobs, so Sia philly 7 and 8 (test until 2026-11-26) are validation like Pollux 7
# and 8. Alibaba: jobs 0-499 designed earlier recipes (the "held-out" Alibaba window
# of the old configs), so they are validation (since 2026-11-26); 500 on, test.
# docs/benchmark.md, "Changes to the registration", says why and when.
REGIONS = [
    {"trace": PHILLY, "jobs": [0, 50000], "split": "train"},
    {"trace": PHILLY, "jobs": [50000, 62000], "split": "validation"},
    {"trace": PHILLY, "jobs": [62000, None], "split": "test"},
    {"trace": "configs/traces/philly_sample.csv", "split": "train"},
    *({"trace": pollux(n), "split": "train"} for n in (2, 3, 4, 5)),
    *({"trace": pollux(n), "split": "validation"} for n in (1, 6, 7, 8)),
    *({"trace": f"configs/traces/pollux/workload-{n}.csv", "split": "train"} for n in (2, 3, 4, 5)),
    {"trace": "configs/traces/pollux/workload-6.csv", "split": "validation"},
    *({"trace": sia("philly", n), "split": "train"} for n in (1, 2, 3, 4)),
    *({"trace": sia("philly", n), "split": "validation"} for n in (5, 6, 7, 8)),
    *({"trace": sia("newtrace", n), "split": "train"} for n in (1, 2, 3, 4, 5)),
    *({"trace": sia("newtrace", n), "split": "validation"} for n in (6, 7)),
    *({"trace": sia("newtrace", n), "split": "test"} for n in (8, 9, 10)),
    {"trace": ALIBABA, "jobs": [0, 500], "split": "validation"},
    {"trace": ALIBABA, "jobs": [500, 4000], "split": "test"},
    {"trace": ALIBABA, "jobs": [4000, None], "split": "train"},
]
#: workload.arrival_jitter of every cell: each seed draws the window's inter-arrival
#: gaps x Uniform(0.8, 1.2), so a seed varies every scenario even for policies that
#: do not read job lengths (docs/benchmark.md, "What a seed varies")
ARRIVAL_JITTER = 0.2

# (name, trace, start, max_jobs, warm-up) per split; the validation and test windows
# at every utilisation tier on the default topology, plus the topology variants at
# medium (train: medium, default topology); then every window of every split at each
# queue tier on the default topology.
SMALL = (40, 120, 40)  # 160-job Pollux / Sia-philly files: 40 warm-up, 120 scored
NEW = (160, 800, 160)  # 960-job Sia newtrace files
WINDOWS = {
    "train": [
        ("philly-10000", PHILLY, 10000, 1000, 200),
        ("philly-30000", PHILLY, 30000, 1000, 200),
        *((f"pollux-{n}", pollux(n), *SMALL) for n in (2, 3)),
        *((f"sia-philly-{n}", sia("philly", n), *SMALL) for n in (1, 2)),
        *((f"sia-new-{n}", sia("newtrace", n), *NEW) for n in (1, 2)),
    ],
    "validation": [
        ("philly-52000", PHILLY, 52000, 1000, 200),
        ("philly-57000", PHILLY, 57000, 1000, 200),
        *((f"pollux-{n}", pollux(n), *SMALL) for n in (1, 7)),
        *((f"sia-philly-{n}", sia("philly", n), *SMALL) for n in (5, 7, 8)),
        ("sia-new-6", sia("newtrace", 6), *NEW),
        ("alibaba-100", ALIBABA, 100, 400, 100),
    ],
    "test": [
        ("philly-62200", PHILLY, 62200, 1000, 200),
        ("philly-67000", PHILLY, 67000, 1000, 200),
        ("philly-72000", PHILLY, 72000, 1000, 200),
        ("philly-77000", PHILLY, 77000, 1000, 200),
        *((f"sia-new-{n}", sia("newtrace", n), *NEW) for n in (8, 9, 10)),
        ("alibaba-2000", ALIBABA, 2000, 1000, 200),
    ],
}
VARIANTS = {
    "validation": [("philly-52000", "k80-heavy"), ("philly-52000", "oversubscribed")],
    "test": [("philly-62200", "k80-heavy"), ("philly-62200", "oversubscribed")],
}
#: the fields that make a scenario the same measurement (--reuse)
SAME = ("trace", "start", "max_jobs", "warmup_jobs", "tier", "topology")
#: a scenario whose first-fit utilisation ends further than this from its tier's
#: target (the window cannot reach the tier at any load in LOAD_RANGE) is not
#: registered: a "heavy" scenario at 0.6 would be mislabelled (a queue tier: its share
#: must end in [target, target + QUEUE_SLACK])
REACH = 0.05


def _suite(scenarios: dict) -> Suite:
    return Suite(
        "benchmarks/default.yaml", "configs/default.yaml", TIERS, TOPOLOGIES, (), scenarios,
        queue_tiers=QUEUE_TIERS,
    )  # fmt: skip


def _measure(sc: Scenario) -> tuple[float, float, float | None, bool]:
    """(load, first-fit utilisation, queue share or None, tier reached) of a new scenario."""
    cfg = _suite({}).config_for(sc)
    if sc.tier in QUEUE_TIERS:
        target = QUEUE_TIERS[sc.tier]
        load, share, util = calibrate_queue_share(cfg, target)
        return load, util, share, target <= share <= target + QUEUE_SLACK
    load, util = calibrate_load(cfg, TIERS[sc.tier])
    return load, util, None, abs(util - TIERS[sc.tier]) <= REACH


def _scenario(split, name, trace, start, max_jobs, warmup, tier, topology, reuse=()) -> dict | None:
    """The scenario's suite entry with its measured (or kept) load; None when the
    window cannot reach the tier (:data:`REACH`)."""
    row = dict(zip(SAME, (trace, start, max_jobs, warmup, tier, topology), strict=True))
    old = next((r for r in reuse if all(r.get(k) == row[k] for k in SAME)), None)
    if old is not None:
        load, util, share, how = old["load"], old["util"], old.get("queue_share"), "kept"
        reached = True  # registered when measured
    else:
        sc = Scenario(name, split, trace, start, max_jobs, 1.0, tier, topology, warmup)
        load, util, share, reached = _measure(sc)
        how = "measured"
    print(
        f"{split:10s} {name:40s} load {load:<8g} util {util:.3f}"
        + ("" if share is None else f" queue share {share:.3f}")
        + f" ({how})"
        + ("" if reached else f": tier {tier} out of reach, not registered"),
        file=sys.stderr,
        flush=True,
    )
    if not reached:
        return None
    return {
        "name": name,
        "trace": trace,
        "start": start,
        "max_jobs": max_jobs,
        "warmup_jobs": warmup,
        "load": load,
        "tier": tier,
        "topology": topology,
        "util": round(util, 3),
        **({} if share is None else {"queue_share": round(share, 3)}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="benchmarks/default.yaml")
    parser.add_argument("--reuse", help="keep the loads of unchanged scenarios of this suite")
    args = parser.parse_args(argv)
    reuse = []
    if args.reuse:
        old = yaml.safe_load(Path(args.reuse).read_text(encoding="utf-8"))
        reuse = [sc for items in old["scenarios"].values() for sc in items]
    scenarios: dict[str, list] = {}
    for split, windows in WINDOWS.items():
        tiers = TIERS if split != "train" else {"medium": TIERS["medium"]}
        rows = [
            _scenario(split, f"{name}-{tier}", trace, start, n, warm, tier, "default", reuse)
            for name, trace, start, n, warm in windows
            for tier in tiers
        ]
        for base, topology in VARIANTS.get(split, []):
            name, trace, start, n, warm = next(w for w in windows if w[0] == base)
            rows.append(
                _scenario(
                    split,
                    f"{name}-medium-{topology}",
                    trace,
                    start,
                    n,
                    warm,
                    "medium",
                    topology,
                    reuse,
                )  # fmt: skip
            )
        rows += [
            _scenario(split, f"{name}-{tier}", trace, start, n, warm, tier, "default", reuse)
            for tier in QUEUE_TIERS
            for name, trace, start, n, warm in windows
        ]
        scenarios[split] = [r for r in rows if r is not None]
    header = (REPO_ROOT / "benchmarks" / "default.header.txt").read_text(encoding="utf-8")
    body = {
        "version": 1,
        "base_config": "configs/default.yaml",
        "tiers": TIERS,
        "queue_tiers": QUEUE_TIERS,
        "arrival_jitter": ARRIVAL_JITTER,
        "topologies": TOPOLOGIES,
        "regions": REGIONS,
        "scenarios": scenarios,
    }
    text = yaml.safe_dump(body, sort_keys=False, default_flow_style=None, width=260)
    Path(args.out).write_text(header + text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
