"""agents.credit_signal: the per-kind group advantages of random rollouts."""

from __future__ import annotations

import json

import numpy as np

from agents.credit_signal import main
from marl_sched.config import REPO_ROOT

SMOKE = str(REPO_ROOT / "configs" / "learn_smoke.yaml")


def test_kinds_pool_the_group_advantages_in_sd_units(tmp_path):
    out = tmp_path / "s.json"
    args = ["--config", SMOKE, "--out", str(out), "--rollouts", "3", "--windows", "1",
            "--episode-jobs", "8"]  # fmt: skip
    assert main(args) == 0
    r = json.loads(out.read_text())
    assert r["rollouts"] == 3 and len(r["rollout_avg_jct_s"]) == 1
    kinds = r["kinds"]
    assert kinds and set(kinds) <= {"group", "forward"} | {
        f"follow:{h}" for h in ("interference-aware", "first-fit", "load-balance")
    }
    n = sum(k["n"] for k in kinds.values())
    # advantages against the other rollouts' mean: over all decisions they average to
    # about 0, and in sd units the pooled second moment is 1
    mean = sum(k["n"] * k["mean_sd_units"] for k in kinds.values()) / n
    assert abs(mean) < 1.0
    assert all(np.isfinite(k["se_sd_units"]) and k["se_sd_units"] >= 0 for k in kinds.values())
    assert main(args) == 0 and json.loads(out.read_text()) == r  # seeded


def test_bad_counts_exit_2(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["--config", SMOKE, "--out", str(out), "--rollouts", "1"]) == 2
    assert "--rollouts" in capsys.readouterr().err and not out.exists()
