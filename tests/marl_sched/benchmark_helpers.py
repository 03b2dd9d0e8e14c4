"""Helpers of the benchmark tests: a small suite over the golden trace."""

from __future__ import annotations

import dataclasses

from marl_sched.config import REPO_ROOT, SimulationConfig

TRACE = str(REPO_ROOT / "tests" / "data" / "golden_trace.csv")
BASE = str(REPO_ROOT / "tests" / "data" / "golden.yaml")
#: does the simulator have ``simulation.migration`` yet?
HAS_MIGRATION = "migration" in {f.name for f in dataclasses.fields(SimulationConfig)}


def golden_suite_data(trace: str = TRACE) -> dict:
    """Jobs 0-19 of the golden trace are train, 20 on test; one train scenario, two
    test ones."""
    return {
        "version": 1,
        "base_config": BASE,
        "tiers": {"medium": 0.6},
        "topologies": {"small": BASE},
        "regions": [
            {"trace": trace, "jobs": [0, 20], "split": "train"},
            {"trace": trace, "jobs": [20, None], "split": "test"},
        ],
        "scenarios": {
            "train": [
                {
                    "name": "early",
                    "trace": trace,
                    "start": 5,
                    "max_jobs": 10,
                    "warmup_jobs": 5,
                    "load": 1.0,
                    "tier": "medium",
                    "topology": "small",
                },
            ],
            "test": [
                {
                    "name": f"late-{start}",
                    "trace": trace,
                    "start": start,
                    "max_jobs": 8,
                    "warmup_jobs": 4,
                    "load": 1.5,
                    "tier": "medium",
                    "topology": "small",
                }
                for start in (24, 30)
            ],
        },
    }
