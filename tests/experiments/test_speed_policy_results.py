"""experiments/speed_policy.py's results file: a bad ``--out`` is refused before any
work, and docs/agents.md's "Measured" block renders the file's figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from experiments import make_docs
from marl_sched.config import REPO_ROOT

SCRIPT = REPO_ROOT / "experiments" / "speed_policy.py"


def test_an_out_that_is_a_directory_exits_2_in_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}  # this checkout's packages
    got = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert got.returncode == 2
    assert got.stderr.strip().splitlines() == [f"error: --out {tmp_path}: is a directory"]


def _row(servers: int, p50: float) -> dict:
    return {"policy": "marl", "servers": servers, "groups_per_agent": 1000, "p50_ms": p50,
            "p99_ms": 2 * p50, "cpu_p50_ms": p50 / 2, "cpu_p99_ms": p50,
            "cpu_split_ms": {"hints": 1.0, "observe": 0.5, "forward": 2.0,
                             "act": 0.05}}  # fmt: skip


def test_the_block_quotes_the_file_and_its_load(tmp_path: Path):
    root = tmp_path / "results"
    assert "not written yet" in make_docs.decision_latency(root)
    record = {"command": "python experiments/speed_policy.py --quick", "date": "2026-01-02",
              "network": "checkpoints/marl-default", "torch_threads": 1, "cores": 2,
              "load_average_1min": {"before": 0.04, "after": 1.26}, "target_p50_ms": 3.0,
              "target_p99_ms": 10.0, "meets_target": False,
              "rows": [_row(500, 2.5), _row(4000, 4.25)]}  # fmt: skip
    (root / "speed").mkdir(parents=True)
    (root / "speed" / "policy.json").write_text(json.dumps(record), encoding="utf-8")
    text = make_docs.decision_latency(root)
    assert "p50 2.5 / 4.2 ms, p99 5.0 / 8.5 ms at 500 / 4,000 servers" in text
    assert "load average 0.0 before and 1.3 after" in text and "2026-01-02" in text
    assert "the GNN forward 2.00" in text and "is not met" in text
