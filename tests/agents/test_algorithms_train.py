"""Every algorithm train.algorithm accepts trains: two iterations of the learning
smoke config (episodes, batches and validation cut down) change the weights. Starts
Ray."""

from __future__ import annotations

import pytest

from agents.config import ALGORITHMS
from marl_sched.cli import main
from marl_sched.config import REPO_ROOT

SMOKE = str(REPO_ROOT / "configs" / "learn_smoke.yaml")
SMALL = ["train.train_batch_size=200", "train.minibatch_size=100", "train.num_epochs=1",
         "train.episode_jobs=20", "train.eval_max_jobs=20", "train.eval_extra_windows=[]",
         "train.eval_interval=2", "train.checkpoint_interval=1"]  # fmt: skip
#: what each algorithm needs on top of the smoke config (PPO: nothing)
ON_TOP = {"PPO": []}


def _weights(ckpt):
    import torch

    files = sorted((ckpt / "modules").glob("*.pt"))
    return {p.name: torch.load(p, weights_only=True) for p in files}


def test_every_accepted_algorithm_has_its_settings():
    assert set(ON_TOP) == set(ALGORITHMS)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_two_iterations_of_the_smoke_config_change_the_weights(
    ray_session, tmp_path, capsys, algorithm
):
    out = tmp_path / "run"
    args = ["train", "--config", SMOKE, "--out", str(out), "--iterations", "2", "--quiet",
            f"train.algorithm={algorithm}", *SMALL, *ON_TOP[algorithm]]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    ckpts = out / "checkpoints"
    before, after = _weights(ckpts / "iter_000000"), _weights(ckpts / "iter_000002")
    assert before and before.keys() == after.keys()
    changed = [
        name for name in before for key in before[name]
        if not before[name][key].equal(after[name][key])
    ]  # fmt: skip
    assert changed, f"{algorithm}: the weights after 2 iterations are the starting ones"
