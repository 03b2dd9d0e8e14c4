"""``train.extra_windows`` and the rollout teacher in the warm start (tiny config)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from agents.config import model_config, train_config
from agents.warm_start import teacher_decisions
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.errors import InputError
from tests.helpers import untrained_checkpoint

TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")
SAMPLE = "configs/traces/philly_sample.csv"


def _with_train(**train):
    cfg = load_config(TINY)
    return dataclasses.replace(cfg, train={**cfg.train, **train})


def test_default_config_trains_and_validates_on_shipped_pollux_windows_only():
    cfg = load_config(REPO_ROOT / "configs" / "default.yaml")
    tc = train_config(cfg)
    assert tc.bc_teacher == "rollout"
    traces = [w.trace for w in tc.extra_windows]
    assert traces == [f"configs/traces/pollux/workload-{k}.csv" for k in (2, 3, 4, 5)]
    validation = [w.trace for w in tc.eval_extra_windows]
    assert validation == ["configs/traces/pollux/workload-6.csv"]
    assert all(cfg.resolve_path(t).is_file() for t in traces + validation)


@pytest.mark.parametrize(
    "window, message",
    [
        ({"trace": SAMPLE, "share": 0}, r"train.extra_windows\[0\].share: must be > 0"),
        ({"trace": SAMPLE, "start": -1}, r"train.extra_windows\[0\].start: must be >= 0"),
        ({"trace": SAMPLE, "colour": 1}, r"train.extra_windows\[0\].colour: unknown key"),
        ({"start": 3}, r"train.extra_windows\[0\].trace: required key is missing"),
        # the tiny config evaluates on jobs 2190..2209 of the sample
        ({"trace": SAMPLE, "start": 2200, "max_jobs": 50}, "overlaps the evaluation window"),
    ],
)
def test_bad_extra_windows_name_the_key(window, message):
    with pytest.raises(InputError, match=message):
        train_config(_with_train(extra_windows=[window]))


def test_unknown_teacher_is_refused():
    with pytest.raises(InputError, match="train.bc_teacher: must be one of lookahead, rollout"):
        train_config(_with_train(bc_teacher="oracle"))
    with pytest.raises(InputError, match=r"train.bc_margin: must be in \[0, 1\)"):
        train_config(_with_train(bc_margin=1.5))
    for key in ("bc_protect", "bc_speed", "bc_weight_power"):
        with pytest.raises(InputError, match=rf"train.{key}: must be >= 0, got -1"):
            train_config(_with_train(**{key: -1}))
    with pytest.raises(InputError, match=r"train.bc_base: must be one of .*, got 'oracle'"):
        train_config(_with_train(bc_base="oracle"))
    assert train_config(_with_train(bc_base="resident-aware")).bc_base == "resident-aware"


def test_rollout_teacher_labels_and_a_repeated_episode_is_reused():
    """A window shorter than an episode is drawn whole, so the same episode comes up
    again; its (deterministic) teacher decisions are reused, not recomputed."""
    extra = {"trace": SAMPLE, "start": 2300, "max_jobs": 10, "load": 2.0, "share": 1000.0}
    cfg = _with_train(bc_teacher="rollout", bc_episodes=3, extra_windows=[extra])
    tc = train_config(cfg)
    obs, actions, returns, works = teacher_decisions(cfg, model_config(cfg), tc, seed=0)
    assert len(actions) % 3 == 0 and actions
    n = len(actions) // 3
    assert actions[:n] == actions[n : 2 * n] == actions[2 * n :]
    assert returns[:n] == returns[n : 2 * n]
    assert works[:n] == works[n : 2 * n]
    for a, o in zip(actions, obs, strict=True):
        assert o["action_mask"][a] == 1  # every label is a legal action
    assert all(np.isfinite(returns)) and min(returns) < 0


def test_validation_over_several_windows_averages_over_all_their_jobs(tmp_path):
    import json

    import torch

    from agents.algorithm import env_setup
    from agents.selection import evaluate_weights

    extra = {"trace": SAMPLE, "start": 2300, "max_jobs": 15, "load": 2.0}
    cfg = _with_train(eval_extra_windows=[extra])
    mc, tc = model_config(cfg), train_config(cfg)
    _, _, builder = env_setup(cfg, mc, tc, 0)
    torch.manual_seed(0)
    model = dataclasses.asdict(mc)
    manifest, weights = untrained_checkpoint(builder, model)
    summary = evaluate_weights(cfg, mc, tc, manifest, weights, tmp_path)
    main = json.loads((tmp_path / "metrics.json").read_text())
    other = json.loads((tmp_path / "extra_0" / "metrics.json").read_text())
    n_main, n_other = tc.eval_max_jobs, 15
    assert [w["jobs"] for w in summary["windows"]] == [n_main, n_other]
    assert summary["jobs"] == n_main + n_other
    expected = (main["avg_jct_s"] * n_main + other["avg_jct_s"] * n_other) / (n_main + n_other)
    assert summary["avg_jct_s"] == pytest.approx(expected)
    assert json.loads((tmp_path / "validation.json").read_text()) == summary


def test_a_validation_window_may_not_overlap_training():
    # the tiny config trains on jobs 2150..2189 of the sample
    bad = _with_train(eval_extra_windows=[{"trace": SAMPLE, "start": 2180, "max_jobs": 5}])
    with pytest.raises(InputError, match=r"train.eval_extra_windows\[0\]: .* overlaps"):
        train_config(bad)
    # nor the main validation window the config's own workload
    with pytest.raises(InputError, match=r"train.eval_start: training window \[2150, 2190\)"):
        train_config(_with_train(eval_start=2170))
    # nor may a training window overlap an extra validation window
    bad = _with_train(
        extra_windows=[{"trace": SAMPLE, "start": 2300, "max_jobs": 10}],
        eval_extra_windows=[{"trace": SAMPLE, "start": 2305, "max_jobs": 10}],
    )
    with pytest.raises(InputError, match=r"train.extra_windows\[0\]: .* overlaps"):
        train_config(bad)


@pytest.mark.parametrize(
    ("window", "key"),
    [
        ({"extra_windows": [{"trace": "configs/traces/pollux/workload-2.csv"},
                            {"trace": "PHILLY", "start": 70000, "max_jobs": 100}]},
         "train.extra_windows[1]"),
        ({"eval_extra_windows": [{"trace": "PHILLY", "start": 61990, "max_jobs": 50}]},
         "train.eval_extra_windows[0]"),
    ],
)  # fmt: skip
def test_a_training_or_validation_window_in_the_test_split_exits_2(
    window, key, shared_data, tmp_path, capsys
):
    """docs/benchmark.md: Philly jobs from 62,000 on are test; training and checkpoint
    selection refuse them before any work (one line, exit 2)."""
    import yaml

    from marl_sched.cli import main
    from marl_sched.config import absolute_paths, compose_file, load_config

    philly = str(shared_data / "traces" / "philly.csv")
    tiny = REPO_ROOT / "configs" / "train_tiny.yaml"
    # written elsewhere, the config names its paths absolute (they resolve against its folder)
    raw = absolute_paths(compose_file(tiny), load_config(tiny))
    for k, v in window.items():
        raw["train"][k] = [{**w, "trace": philly} if w["trace"] == "PHILLY" else w for w in v]
    for w in raw["train"].get("extra_windows", []):
        w["trace"] = str(REPO_ROOT / w["trace"]) if not w["trace"].startswith("/") else w["trace"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    rc = main(["train", "--config", str(path), "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert f"{key}: jobs" in err and "overlap the test split" in err
    assert not (tmp_path / "run").exists()


def test_episode_warmup_jobs_reach_the_training_env():
    """``train.episode_warmup_jobs`` is the training env's ``env.window_warmup_jobs``:
    its episodes carry that many unscored jobs before the slice (a slice drawn far
    enough from the window's start), and the option is not a decision option (a
    checkpoint trained with it serves an environment without it)."""
    from agents.algorithm import env_setup
    from envs.config import DECISION_OPTIONS

    cfg = _with_train(episode_warmup_jobs=5, episode_jobs=8)
    env_cls, env_config, _ = env_setup(cfg, model_config(cfg), train_config(cfg), 0)
    env = env_cls(env_config)
    env.reset(seed=0, options={"window_start": 12})
    assert env.warmup == 5 and len(env.sim.jobs) == 13
    assert "window_warmup_jobs" not in DECISION_OPTIONS
    with pytest.raises(InputError, match="train.episode_warmup_jobs"):
        train_config(_with_train(episode_warmup_jobs=-1))


def test_split_share_adds_the_benchmark_train_scenarios_as_windows():
    """``train.split_share``: every train-split scenario of the default suite's
    utilisation tiers on the default topology, warm-up included, at its own load,
    sharing the given weight; nothing at 0; a negative share exits 2 naming the key."""
    from agents.config import split_windows
    from marl_sched.benchmark import DEFAULT_SUITE, check_not_test, load_suite

    assert split_windows(train_config(_with_train())) == ()
    tc = train_config(_with_train(split_share=0.4))
    windows = split_windows(tc)
    suite = load_suite(DEFAULT_SUITE)
    train = [sc for sc in suite.split("train", suite.tiers) if sc.topology == "default"]
    assert {sc.tier for sc in train} == {"medium"}  # the queue tiers' windows are not added
    assert len(windows) == len(train) >= 2
    assert sum(w.share for w in windows) == pytest.approx(0.4)
    for w, sc in zip(windows, train, strict=True):
        assert w.load == sc.load and w.start == sc.start - sc.warmup_jobs
        assert w.start + w.max_jobs == sc.start + sc.max_jobs
        check_not_test(w.trace, w.start, w.max_jobs, where="test")  # raises if it touched test
    with pytest.raises(InputError, match=r"train.split_share: must be in \[0, 1e6\], got -1"):
        train_config(_with_train(split_share=-1))


def test_split_windows_reach_the_training_env(shared_data):
    """The env draws episodes from them: with the config's own workload weighed almost
    nothing, episodes come from the benchmark's train traces."""
    from agents.algorithm import env_setup

    cfg = _with_train(split_share=1.0, workload_share=1e-9, episode_jobs=8)
    env_cls, env_config, _ = env_setup(cfg, model_config(cfg), train_config(cfg), 0)
    assert len(env_config["windows"]) >= 2
    env = env_cls(env_config)
    assert len(env.sources) == 1 + len(env_config["windows"])
    assert env.source_p[0] < 1e-6
    drawn = set()
    for seed in range(6):
        env.reset(seed=seed)
        assert len(env.sim.jobs) == 8
        drawn.add(env.source)
    assert 0 not in drawn and len(drawn) >= 2
