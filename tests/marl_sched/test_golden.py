"""Golden trace: a small trace replayed under every heuristic must reproduce the stored
metrics — counts exactly, times to 1e-9 relative (the last bits of a float sum may
differ between numpy builds; any change of a decision moves them far more). A change
of the model or the calibration that moves them must regenerate the file on purpose:

    python -m tests.marl_sched.test_golden --update
"""

from __future__ import annotations

import json
import sys

import pytest

from marl_sched.config import REPO_ROOT, load_config
from marl_sched.metrics import OUTCOME_KEYS
from marl_sched.policies import heuristic_names
from marl_sched.runner import build_cluster, load_workload, simulate

GOLDEN = REPO_ROOT / "tests" / "data" / "golden_metrics.json"
CONFIG = REPO_ROOT / "tests" / "data" / "golden.yaml"
KEYS = (*OUTCOME_KEYS, "events")
HEURISTICS = heuristic_names()


def golden_metrics(policy: str) -> dict:
    cfg = load_config(CONFIG)
    topo, perf = build_cluster(cfg)
    workload = load_workload(cfg, perf)
    metrics, _, _ = simulate(cfg, policy, workload, topo, perf, seed=0)
    return {k: metrics[k] for k in KEYS}


@pytest.mark.parametrize("policy", HEURISTICS)
def test_golden_trace_metrics_are_unchanged(policy):
    stored = json.loads(GOLDEN.read_text())
    got, want = golden_metrics(policy), stored[policy]
    assert got.keys() == want.keys()
    for k, v in want.items():
        if isinstance(v, float):
            assert got[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k
        else:
            assert got[k] == v, k


if __name__ == "__main__" and "--update" in sys.argv:
    GOLDEN.write_text(json.dumps({p: golden_metrics(p) for p in HEURISTICS}, indent=1) + "\n")
    print(f"wrote {GOLDEN}")
