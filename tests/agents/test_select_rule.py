"""Checkpoint selection: validation at several loads (``train.eval_loads``) and the
``mean`` / ``dominate`` rules (``train.select_rule``), on the tiny config."""

from __future__ import annotations

import csv
import dataclasses
import json

import pytest

from agents.config import model_config, train_config
from agents.selection import is_new_best, validation_runs
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.errors import InputError
from tests.helpers import untrained_checkpoint

TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")


def _tc(**train):
    cfg = load_config(TINY)
    return train_config(dataclasses.replace(cfg, train={**cfg.train, **train}))


def test_mean_takes_a_lower_average_even_if_one_run_is_worse():
    tc = _tc()
    assert tc.select_rule == "mean" and tc.eval_loads == ()
    best = ["iter_000000", 100.0]
    assert is_new_best(tc, 90.0, [70.0, 110.0], best, [100.0, 100.0])
    assert not is_new_best(tc, 100.0, [90.0, 110.0], best, [100.0, 100.0])
    assert is_new_best(tc, 1e9, [1e9], None, None)  # the first evaluation is the best


def test_dominate_needs_a_lower_average_and_no_worse_run():
    tc = _tc(select_rule="dominate", select_tolerance=0.01)
    best, best_runs = ["iter_000000", 100.0], [100.0, 100.0]
    assert not is_new_best(tc, 90.0, [70.0, 110.0], best, best_runs)  # one run 10 % worse
    assert is_new_best(tc, 95.0, [89.5, 100.5], best, best_runs)  # within the 1 % slack
    assert not is_new_best(tc, 95.5, [89.5, 101.5], best, best_runs)  # beyond it
    assert not is_new_best(tc, 100.0, [100.0, 100.0], best, best_runs)  # a tie is no gain
    assert is_new_best(tc, 90.0, [70.0, 110.0], best, None)  # older folder: on the average
    with pytest.raises(ValueError, match="3 validation runs"):
        is_new_best(tc, 90.0, [90.0, 90.0, 90.0], best, best_runs)


@pytest.mark.parametrize(
    ("train", "key"),
    [
        ({"select_rule": "best"}, "train.select_rule"),
        ({"select_tolerance": -0.1}, "train.select_tolerance"),
        ({"eval_loads": [0.5, 0.0]}, r"train.eval_loads\[1\]"),
    ],
)
def test_bad_selection_keys_are_named(train, key):
    with pytest.raises(InputError, match=key):
        _tc(**train)


def test_validation_at_each_load_of_each_window(tmp_path):
    import torch

    from agents.algorithm import env_setup
    from agents.selection import evaluate_weights

    cfg = load_config(TINY)
    cfg = dataclasses.replace(cfg, train={**cfg.train, "eval_loads": [0.5, 2.0]})
    mc, tc = model_config(cfg), train_config(cfg)
    _, _, builder = env_setup(cfg, mc, tc, 0)
    torch.manual_seed(0)
    manifest, weights = untrained_checkpoint(builder, dataclasses.asdict(mc))
    summary = evaluate_weights(cfg, mc, tc, manifest, weights, tmp_path)
    assert [w["load"] for w in summary["windows"]] == [0.5, 2.0]
    assert summary["jobs"] == 2 * tc.eval_max_jobs
    runs = validation_runs(summary)
    assert summary["avg_jct_s"] == pytest.approx(sum(runs) / 2)
    first = json.loads((tmp_path / "metrics.json").read_text())
    assert first["avg_jct_s"] == pytest.approx(runs[0])

    def submits(folder):
        with open(folder / "jobs.csv", newline="") as f:
            return sorted(float(r["submit_time"]) for r in csv.DictReader(f))

    # the same jobs, arriving 4x as fast at load 2.0 as at 0.5
    slow, fast = submits(tmp_path), submits(tmp_path / "main_load_2")
    assert len(slow) == len(fast) == tc.eval_max_jobs and slow[-1] > 0
    assert [s / 4 for s in slow] == pytest.approx(fast)
    assert json.loads((tmp_path / "validation.json").read_text()) == summary
