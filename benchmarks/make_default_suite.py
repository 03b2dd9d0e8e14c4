"""Write benchmarks/default.yaml: the pre-registered splits, windows and load tiers.

    python benchmarks/make_default_suite.py [--out benchmarks/default.yaml]

The splits and windows below were fixed before any policy was run on them (see
docs/benchmark.md); the script only measures, for each window and tier, the load at
which first-fit reaches the tier's steady-state GPU utilisation
(marl_sched.benchmark.calibrate). Slow (a few hundred short simulations).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from marl_sched.benchmark.calibrate import calibrate_load
from marl_sched.benchmark.suite import Scenario, Suite

TIERS = {"light": 0.30, "medium": 0.60, "heavy": 0.85}
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
# the development set, so they cannot be test). Sia workloads by file. Alibaba: test.
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
    *({"trace": sia("philly", n), "split": "validation"} for n in (5, 6)),
    *({"trace": sia("philly", n), "split": "test"} for n in (7, 8)),
    *({"trace": sia("newtrace", n), "split": "train"} for n in (1, 2, 3, 4, 5)),
    *({"trace": sia("newtrace", n), "split": "validation"} for n in (6, 7)),
    *({"trace": sia("newtrace", n), "split": "test"} for n in (8, 9, 10)),
    {"trace": ALIBABA, "split": "test"},
]

# (name, trace, start, max_jobs, warm-up) per split; every window at every tier on
# the default topology, plus the topology variants (test only) at medium.
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
        ("sia-philly-5", sia("philly", 5), *SMALL),
        ("sia-new-6", sia("newtrace", 6), *NEW),
    ],
    "test": [
        ("philly-62200", PHILLY, 62200, 1000, 200),
        ("philly-67000", PHILLY, 67000, 1000, 200),
        ("philly-72000", PHILLY, 72000, 1000, 200),
        ("philly-77000", PHILLY, 77000, 1000, 200),
        *((f"sia-philly-{n}", sia("philly", n), *SMALL) for n in (7, 8)),
        *((f"sia-new-{n}", sia("newtrace", n), *NEW) for n in (8, 9, 10)),
        ("alibaba-2000", ALIBABA, 2000, 1000, 200),
    ],
}
VARIANTS = [("philly-62200", "k80-heavy"), ("philly-62200", "oversubscribed")]


def _suite(scenarios: dict) -> Suite:
    return Suite(
        "benchmarks/default.yaml", "configs/default.yaml", TIERS, TOPOLOGIES, (), scenarios
    )


def _scenario(split, name, trace, start, max_jobs, warmup, tier, topology) -> dict:
    sc = Scenario(name, split, trace, start, max_jobs, 1.0, tier, topology, warmup)
    load, util = calibrate_load(_suite({}).config_for(sc), TIERS[tier])
    print(f"{split:10s} {name:32s} load {load:<8g} util {util:.3f}", file=sys.stderr, flush=True)
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
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="benchmarks/default.yaml")
    args = parser.parse_args(argv)
    scenarios: dict[str, list] = {}
    for split, windows in WINDOWS.items():
        tiers = TIERS if split == "test" else {"medium": TIERS["medium"]}
        rows = [
            _scenario(split, f"{name}-{tier}", trace, start, n, warm, tier, "default")
            for name, trace, start, n, warm in windows
            for tier in tiers
        ]
        if split == "test":
            for base, topology in VARIANTS:
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
                    )
                )
        scenarios[split] = rows
    header = Path(__file__).with_name("default.header.txt").read_text(encoding="utf-8")
    body = {
        "version": 1,
        "base_config": "configs/default.yaml",
        "tiers": TIERS,
        "topologies": TOPOLOGIES,
        "regions": REGIONS,
        "scenarios": scenarios,
    }
    text = yaml.safe_dump(body, sort_keys=False, default_flow_style=None, width=200)
    Path(args.out).write_text(header + text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
