"""End to end: ``marl-sched train`` (tiny config, a few PPO iterations), resume,
evaluate; the run folder's files and TensorBoard tags (x axis: environment steps,
200 per iteration); same-seed and resumed runs reproduce. Uses the session Ray."""

from __future__ import annotations

import json

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agents.records import read_tags
from marl_sched.cli import main
from marl_sched.config import REPO_ROOT


def read_scalars(run, tag: str) -> dict[int, float]:
    """One tag's ``{env step: value}`` from the run's ``tb/``."""
    return read_tags(run, [tag])[tag]


TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")
TAGS = {
    "charts/episode_return",
    "charts/normalised_return",
    "charts/avg_jct_s",
    "losses/policy_loss",
    "losses/value_loss",
    "losses/entropy",
    "charts/learning_rate",
    "charts/env_steps_per_s",
    "charts/episode_length",
    "charts/agent_return/sc0",
    "losses/approx_kl",
    "losses/explained_variance",
    "losses/clip_fraction",
    "losses/agent/sc0/entropy",  # each agent's own, from the shared module
    "losses/agent/sc1/approx_kl",
    "losses/grad_norm",
    "imitation/loss",
    "imitation/accuracy",
    "hparam/validation_avg_jct_s",
}
#: where the time goes (agents.records.phase_times, timed): tag → the steps it is at
TIME_TAGS = {
    "time/warm_start_s": {0},
    "time/warm_start_cpu_s": {0},
    "time/sample_s": {200, 400},
    "time/learn_s": {200, 400},
    "time/iteration_s": {200, 400},
    "time/train_cpu_s": {200, 400},
    "time/validate_s": {0, 400},
    "time/validate_cpu_s": {0, 400},
}


def scalar_steps(run) -> dict[str, set[int]]:
    steps: dict[str, set[int]] = {}
    for f in sorted((run / "tb").glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(f))
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            steps.setdefault(tag, set()).update(e.step for e in acc.Scalars(tag))
    return steps


@pytest.fixture(scope="module")
def run(ray_session, tmp_path_factory):
    out = tmp_path_factory.mktemp("train") / "run"
    assert main(["train", "--config", TINY, "--out", str(out), "--quiet"]) == 0
    return out


def test_run_folder_after_two_iterations(run):
    assert (run / "config.yaml").is_file()
    assert (run / "checkpoints" / "latest").read_text().strip() == "iter_000002"
    ckpt = run / "checkpoints" / "iter_000002"
    assert (ckpt / "manifest.json").is_file() and (ckpt / "rllib").is_dir()
    metrics = json.loads((run / "evals" / "iter_000002" / "metrics.json").read_text())
    assert metrics["jobs_total"] == 20 and metrics["avg_jct_s"] > 0
    steps = scalar_steps(run)
    assert TAGS <= set(steps), TAGS - set(steps)
    assert steps["losses/policy_loss"] == {200, 400}  # env steps
    assert steps["charts/avg_jct_s"] == {0, 400}  # 0 = the warm-started policy
    assert steps["imitation/accuracy"] == {1, 2}  # the warm start's epochs
    for tag, at in TIME_TAGS.items():
        values = read_scalars(run, tag)
        assert set(values) == at and all(v > 0 for v in values.values()), (tag, values)
    sample, learn, whole = (
        read_scalars(run, f"time/{k}_s") for k in ("sample", "learn", "iteration")
    )
    for step in (200, 400):  # the two phases are most of the iteration, inside it
        assert 0.5 * whole[step] <= sample[step] + learn[step] <= whole[step]
    state = json.loads((ckpt / "state.json").read_text())
    best = json.loads((run / "evals" / state["best"][0] / "metrics.json").read_text())
    assert state["best"][1] == state["best_runs"][0] == best["avg_jct_s"]


def test_learning_curve_plot_reads_the_runs_scalars(run, tmp_path, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "plot_learning_curve", REPO_ROOT / "experiments" / "plot_learning_curve.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    jct = module.read_tags(run, ["charts/avg_jct_s"])["charts/avg_jct_s"]
    assert set(jct) == {0, 400}
    metrics = json.loads((run / "evals" / "iter_000002" / "metrics.json").read_text())
    assert jct[400] == pytest.approx(metrics["avg_jct_s"], rel=1e-6)
    out = tmp_path / "curve.png"
    assert module.main([str(run), "--out", str(out), "--tag", "charts/avg_jct_s"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert module.main([str(tmp_path), "--out", str(out)]) == 2  # not a run folder
    assert "not a run folder" in capsys.readouterr().err


def test_refuses_a_non_empty_folder_without_resume(run, capsys):
    assert main(["train", "--config", TINY, "--out", str(run), "--quiet"]) == 2
    assert "not empty" in capsys.readouterr().err


def test_bad_config_key_exits_2_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"defaults: [{REPO_ROOT / 'configs' / 'train_tiny.yaml'}]\ntrain:\n  lrr: 1\n")
    out = tmp_path / "out"
    assert main(["train", "--config", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train.lrr: unknown key" in err
    assert not out.exists()


def test_resume_runs_exactly_the_missing_iterations_then_evaluate(run, tmp_path, capsys):
    args = ["train", "--config", TINY, "--out", str(run), "--resume", "--quiet"]
    assert main([*args, "--iterations", "3"]) == 0
    assert (run / "checkpoints" / "latest").read_text().strip() == "iter_000003"
    steps = scalar_steps(run)
    assert steps["losses/policy_loss"] == {200, 400, 600}
    assert (run / "evals" / "iter_000003" / "metrics.json").is_file()
    state = json.loads((run / "checkpoints" / "iter_000003" / "state.json").read_text())
    assert state["iteration"] == 3 and state["env_steps"] == 600
    # config.yaml is what the run started with (train_tiny's 2 iterations), signed by
    # its checkpoints, so a resume never rewrites it; state.json says what was reached
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["iterations"] == 2
    assert main([*args, "--iterations", "3"]) == 2
    assert "already has 3 iterations" in capsys.readouterr().err

    out = tmp_path / "eval"
    trace = str(REPO_ROOT / "configs" / "traces" / "philly_sample.csv")
    rc = main(
        ["evaluate", "--checkpoint", str(run), "--trace", trace, "--start", "2300",
         "--max-jobs", "15", "--out", str(out), "--quiet"]
    )  # fmt: skip
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["policy"] == "marl" and metrics["jobs_total"] == 15


def _weights(ckpt) -> dict:
    import torch

    files = sorted((ckpt / "modules").glob("*.pt"))
    return {p.name: torch.load(p, weights_only=True) for p in files}


def _assert_identical(a, b) -> None:
    import torch

    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys() and wa
    for name in wa:
        assert wa[name].keys() == wb[name].keys()
        for key in wa[name]:
            assert torch.equal(wa[name][key], wb[name][key]), f"{a.name}/{name}: {key} differs"


def test_same_seed_and_resumed_runs_give_identical_weights(run, tmp_path):
    """A second same-seed run gives the same weights bit for bit, and one
    interrupted after iteration 1 and resumed to 2 equals the uninterrupted run."""
    other = tmp_path / "other"
    args = ["train", "--config", TINY, "--out", str(other), "--quiet"]
    assert main([*args, "--iterations", "1"]) == 0
    _assert_identical(run / "checkpoints" / "iter_000001", other / "checkpoints" / "iter_000001")
    assert main([*args, "--resume", "--iterations", "2"]) == 0
    _assert_identical(run / "checkpoints" / "iter_000002", other / "checkpoints" / "iter_000002")
    # and a different seed does not (the check can fail)
    third = tmp_path / "third"
    assert main(["train", "--config", TINY, "--out", str(third), "--quiet", "--iterations", "1",
                 "--seed", "1"]) == 0  # fmt: skip
    first = "checkpoints/iter_000001"
    with pytest.raises(AssertionError):
        _assert_identical(run / first, third / first)
