"""agents/reports.py: the learned baselines' search table reads the search's JSON as
experiments/train_baselines.py writes it, orders points by score and marks the chosen
one and the first search's choice."""

from __future__ import annotations

import json

from agents.reports import baseline_search


def _row(lr, gamma, score, it=5):
    return {"lr": lr, "gamma": gamma, "epsilon_start": 0.5, "best_val_score": score,
            "best_iteration": it, "iterations_run": it + 15, "stop_reason": "patience",
            "wall_s": 40.0}  # fmt: skip


def test_the_search_table_orders_points_and_marks_the_choices(tmp_path):
    folder = tmp_path / "baselines" / "search-s5" / "harmony"
    folder.mkdir(parents=True)
    rows = [_row(3e-4, 0.5, 0.996, 0), _row(1e-4, 0.9, 0.928, 30), _row(1e-4, 0.5, 0.984)]
    (folder / "search_harmony.json").write_text(json.dumps({
        "learner": "harmony", "seed": 1, "grid": {"lr": [1e-4, 3e-4], "gamma": [0.5, 0.9]},
        "fixed": {"entropy_coef": 0.01, "epsilon_start": 0.5, "bc_epochs": 40},
        "rows": rows, "chosen": {"lr": 1e-4, "gamma": 0.9}, "total_wall_s": 120.0,
    }))  # fmt: skip
    text = baseline_search(tmp_path)
    lines = [x for x in text.splitlines() if x.startswith("| lr") or x.startswith("| **")]
    assert [x.split("|")[2].strip() for x in lines] == ["0.928", "0.984", "0.996"]
    assert lines[0].startswith("| **lr 0.0001, gamma 0.9** (chosen)")
    assert "(the first search's choice)" in lines[2]
    assert "epsilon_start 0.5" in text and "3 points in 120 s" in text
    assert "No search results for mlfs-rl" in text
