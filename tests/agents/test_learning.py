"""The learning machinery learns: a few PPO iterations from a freshly
initialised network on ``configs/learn_smoke.yaml`` (the tiny cluster, Pollux windows
where placement matters 2-5x, the group baseline) lower the validation average JCT by
a clear margin. Seeded; uses the session Ray."""

from __future__ import annotations

import json

from marl_sched.cli import main
from marl_sched.config import REPO_ROOT

SMOKE = str(REPO_ROOT / "configs" / "learn_smoke.yaml")


def _validation(run, it: int) -> float:
    return json.loads((run / "evals" / f"iter_{it:06d}" / "metrics.json").read_text())["avg_jct_s"]


def test_a_few_ppo_iterations_lower_the_validation_jct(ray_session, tmp_path):
    run = tmp_path / "smoke"
    args = ["train", "--config", SMOKE, "--out", str(run), "--quiet", "--seed", "0",
            "--iterations", "4", "train.eval_interval=4"]  # fmt: skip
    assert main(args) == 0
    start, after = _validation(run, 0), _validation(run, 4)
    # the untrained network's greedy placements, then four updates of 1,600 decisions.
    # The margin is 0.9, a clear 10 %: with unpinned dependencies the same seeded run
    # once drifted from below 0.8 to 0.81-0.86 of the start, with no change of code
    assert after < 0.9 * start, (start, after)
    state = json.loads((run / "checkpoints" / "iter_000004" / "state.json").read_text())
    assert state["best"][0] != "iter_000000"  # selection kept a trained checkpoint
