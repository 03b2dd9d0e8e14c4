"""experiments/train_baselines.py's command line: the search grid and its bad inputs
(checked before any data is loaded)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
import train_baselines  # noqa: E402

from agents.baselines.search import GRID, search_grid  # noqa: E402


def test_the_default_search_is_the_learners_grid():
    args = train_baselines.parse_args(["--learner", "mlfs-rl", "--out", "x", "--search"])
    assert search_grid(args.learner, args.grid) == GRID["mlfs-rl"]


def test_grid_flags_replace_the_grid_and_keep_their_types():
    args = train_baselines.parse_args([
        "--learner", "mlfs-rl", "--out", "x", "--search",
        "--grid", "lr=1e-2,3e-2", "--grid", "episode_jobs=100,200",
    ])  # fmt: skip
    grid = search_grid(args.learner, args.grid)
    assert grid == {"lr": [0.01, 0.03], "episode_jobs": [100, 200]}
    assert all(isinstance(v, int) for v in grid["episode_jobs"])


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--grid", "lr=1e-2"], "--grid: only with --search"),
        (["--search", "--grid", "lrr=1,2"], "--grid lrr=1,2"),
        (["--search", "--grid", "lr"], "--grid lr:"),
        (["--search", "--grid", "lr=1,x"], "--grid lr=1,x: every value must be a float"),
        (["--search", "--grid", "lr=1,1"], "a value is repeated"),
        (["--search", "--grid", "lr=1,2", "--grid", "lr=3"], "each at most once"),
        (["--search", "--grid", "validate_init=1,0"], "--grid validate_init=1,0"),
    ],
)
def test_a_bad_grid_exits_2_with_one_line_before_any_work(argv, named, capsys, monkeypatch):
    def no_work(*a, **k):  # the split must not be loaded for a bad command line
        raise AssertionError("data loaded before the command line was checked")

    monkeypatch.setattr(train_baselines, "load_split", no_work)
    code = train_baselines.main(["--learner", "mlfs-rl", "--out", "x", *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert named in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("item", "named"),
    [
        ("lrr=1", "--set lrr=1: expected KEY=VALUE with KEY one of"),
        ("lr=fast", "--set: lr: expected a number, got 'fast'"),
        ("episode_jobs=1.5", "--set: episode_jobs: expected an integer, got 1.5"),
        ("validate_init=maybe", "--set: validate_init: expected true or false, got 'maybe'"),
        ("lr=[1", "--set lr=[1: cannot read the value"),
    ],
)
def test_a_bad_set_exits_2_with_one_line_naming_the_key(item, named, capsys, monkeypatch):
    monkeypatch.setattr(train_baselines, "load_split", None)  # never reached
    code = train_baselines.main(["--learner", "mlfs-rl", "--out", "x", "--set", item])
    err = capsys.readouterr().err
    assert code == 2
    assert named in err and err.count("\n") == 1


def test_set_values_are_read_as_the_config_files_values():
    args = train_baselines.parse_args([
        "--learner", "harmony", "--out", "x", "--set", "lr=3e-3", "--set", "hidden=16",
        "--set", "validate_init=false", "--set", "reward=placement", "--set", "gamma=1",
    ])  # fmt: skip
    got = train_baselines.overrides(args)
    assert got == {"seed": 1, "lr": 3e-3, "hidden": 16, "validate_init": False,
                   "reward": "placement", "gamma": 1.0}  # fmt: skip
    assert isinstance(got["gamma"], float)
