"""experiments/exp_sensitivity.py: one swapped decision, and nothing else changed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from marl_sched.config import REPO_ROOT, load_config
from marl_sched.policies import make_policy
from marl_sched.policies.base import Policy
from marl_sched.runner import build_cluster, load_workload, simulate

SCRIPT = REPO_ROOT / "experiments" / "exp_sensitivity.py"
CONFIG = REPO_ROOT / "tests" / "data" / "golden.yaml"


def _module():
    spec = importlib.util.spec_from_file_location("exp_sensitivity", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Recorder(Policy):
    name = "recorder"

    def __init__(self, inner: Policy) -> None:
        self.inner, self.decisions = inner, []

    def reset(self, topology, seed=0):
        super().reset(topology, seed)
        self.inner.reset(topology, seed)

    def place(self, job, view):
        p = self.inner.place(job, view)
        self.decisions.append((job.job_id, None if p is None else sorted(p.worker_groups)))
        return p


def _run(policy: Policy) -> list:
    cfg = load_config(CONFIG)
    topo, perf = build_cluster(cfg)
    rec = Recorder(policy)
    simulate(cfg, "recorder", load_workload(cfg, perf), topo, perf, policy=rec)
    return rec.decisions


def test_one_swap_changes_exactly_one_decision_and_keeps_what_came_before():
    mod = _module()
    base = _run(make_policy("interference-aware"))
    placed = {j for j, p in base if p is not None and len(p) > 1}
    for job_id in sorted(placed):
        swap = mod.OneSwap(
            make_policy("interference-aware"),
            [make_policy("locality"), make_policy("first-fit")],
            job_id,
        )
        got = _run(swap)
        if swap.swapped:
            break
    else:
        raise AssertionError("no multi-worker job where locality or first-fit differ")
    k = next(i for i, (j, p) in enumerate(got) if j == job_id and p is not None)
    assert got[:k] == base[:k]  # same decisions, so the same cluster, up to the swap
    assert got[k] != base[k]


def test_unknown_window_exits_2_with_one_line():
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--windows", "pollux-99"], capture_output=True, text=True
    )
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "unknown window 'pollux-99'" in r.stderr
