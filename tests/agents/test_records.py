"""What a run folder records (agents/records.py): the resolved config with every
section and the iterations that ran, HParams of every section, per-module losses.
Ray-free."""

from __future__ import annotations

import yaml

from agents.config import model_config, train_config
from agents.records import (
    hparams,
    module_scalars,
    phase_times,
    progress_line,
    read_tags,
    resolved_config,
    scalars_from_result,
    timed,
)
from envs.config import env_config
from marl_sched.checkpoints import checkpoint_digest
from marl_sched.config import REPO_ROOT, load_config

TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")


def _tiny(overrides=()):
    cfg = load_config(TINY, list(overrides))
    return cfg, model_config(cfg), train_config(cfg)


def test_the_resolved_config_records_the_iterations_run_and_reads_back(tmp_path):
    """train_tiny.yaml says 2 iterations; a run of 4 records 4, and the record (env
    defaults filled in) loads back to the same env, model and train settings."""
    cfg, mc, tc = _tiny()
    assert tc.iterations == 2
    data = resolved_config(cfg, mc, tc, iterations=4)
    assert data["train"]["iterations"] == 4
    assert resolved_config(cfg, mc, tc)["train"]["iterations"] == 2
    assert data["env"]["reward"]["time_scale_s"] == env_config(cfg).reward.time_scale_s
    assert "forward_rule" in data["env"]  # a default the file never names
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    cfg2 = load_config(str(path))
    assert env_config(cfg2) == env_config(cfg)
    assert model_config(cfg2) == mc and train_config(cfg2).iterations == 4


def test_hparams_flatten_every_section_with_dotted_keys():
    cfg, mc, tc = _tiny(["env.hints=[first-fit]", "workload.load=1.5"])
    h = hparams(resolved_config(cfg, mc, tc), agents=2, modules=1)
    assert h["topology.subclusters"] == 2
    assert h["topology.server_types[1].gpu_type"] == "p100"
    assert h["workload.load"] == 1.5 and h["workload.max_job_gpus"] == "null"
    assert h["simulation.ordering"] == "fifo"
    assert h["env.hints"] == "[first-fit]"
    assert h["env.reward.time_scale_s"] == env_config(cfg).reward.time_scale_s
    assert h["model.hidden"] == mc.hidden and h["train.lr"] == tc.lr
    assert h["agents.count"] == 2 and h["agents.modules"] == 1
    assert all(isinstance(v, bool | int | float | str) for v in h.values())
    sections = {k.split(".")[0].split("[")[0] for k in h}
    assert {"topology", "workload", "simulation", "env", "model", "train"} <= sections


def test_module_scalars_name_each_module_only_when_there_are_several():
    one = {"shared": {"policy_loss": 0.5, "entropy": 1.0}}
    assert module_scalars(one) == {}
    two = {
        "sc0": {"policy_loss": 0.5, "vf_loss": 2.0, "entropy": 1.2, "mean_kl_loss": 0.01},
        "sc1": {"policy_loss": -0.1, "entropy": float("nan"), "vf_explained_var": 0.3},
    }
    out = module_scalars(two)
    assert out == {
        "losses/sc0/policy_loss": 0.5,
        "losses/sc0/value_loss": 2.0,
        "losses/sc0/entropy": 1.2,
        "losses/sc0/approx_kl": 0.01,
        "losses/sc1/policy_loss": -0.1,
        "losses/sc1/explained_variance": 0.3,
    }


def test_the_checkpoint_digest_covers_the_inference_files_only(tmp_path):
    a = tmp_path / "a"
    (a / "modules").mkdir(parents=True)
    (a / "manifest.json").write_text("{}")
    (a / "modules" / "shared.pt").write_bytes(b"weights")
    (a / "state.json").write_text('{"iteration": 1}')
    digest = checkpoint_digest(a)
    (a / "state.json").write_text('{"iteration": 2}')  # not an inference file
    assert checkpoint_digest(a) == digest and len(digest) == 64
    (a / "modules" / "shared.pt").write_bytes(b"weightz")
    assert checkpoint_digest(a) != digest
    (a / "modules" / "shared.pt").write_bytes(b"weights")
    (a / "modules" / "sc1.pt").write_bytes(b"")
    assert checkpoint_digest(a) != digest


def test_phase_times_come_from_rllibs_timers_and_reach_the_progress_line():
    """PPO's sampling and learner-update timers and the iteration's time; missing or
    non-finite timers give no scalar."""
    ppo = {
        "timers": {"env_runner_sampling_timer": 1.25, "learner_update_timer": 0.5,
                   "synch_weights": 0.01},
        "time_this_iter_s": 1.8,
        "num_env_steps_sampled_lifetime": 600,
    }  # fmt: skip
    assert phase_times(ppo) == {"time/sample_s": 1.25, "time/learn_s": 0.5,
                                "time/iteration_s": 1.8}  # fmt: skip
    scalars, steps = scalars_from_result(ppo, 400.0)
    assert steps == 600 and scalars["time/sample_s"] == 1.25
    assert scalars["charts/env_steps_per_s"] == 200 / 1.8
    nan = {"timers": {"env_runner_sampling_timer": 0.75, "learner_update_timer": float("nan")}}
    assert phase_times(nan) == {"time/sample_s": 0.75}
    assert phase_times({}) == {}
    line = progress_line(3, 600, {**scalars, "time/validate_s": 4.0}, 12.0, None)
    assert "(sample 1.2, learn 0.5, validate 4.0 s)" in line


def test_timed_records_wall_and_cpu_seconds_of_the_block_and_nothing_when_it_raises():
    import time

    scalars: dict[str, float] = {}
    with timed(scalars, "validate"):
        cpu_end, wall_end = time.process_time() + 0.05, time.perf_counter() + 0.05
        # busy until both clocks moved 0.05 s (the process's CPU time counts every
        # thread, so it can run ahead of the wall clock)
        while time.process_time() < cpu_end or time.perf_counter() < wall_end:
            pass
    assert set(scalars) == {"time/validate_s", "time/validate_cpu_s"}
    assert scalars["time/validate_s"] >= 0.05 and scalars["time/validate_cpu_s"] >= 0.05
    other: dict[str, float] = {}
    try:
        with timed(other, "learn"):
            raise ValueError
    except ValueError:
        pass
    assert other == {}


TAG = "charts/avg_jct_s"


def _run(folder, points: dict[int, float], *, purge: int | None = None):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder / "tb"), purge_step=purge)
    for step, value in points.items():
        writer.add_scalar(TAG, value, step)
    writer.close()
    return folder


def test_a_resumed_runs_purged_steps_are_dropped_and_every_point_is_kept(tmp_path):
    run = _run(tmp_path / "run", {s: float(s) for s in range(10_050)})
    assert len(read_tags(run, [TAG])[TAG]) == 10_050  # TensorBoard samples 10,000 by default
    # the interrupted run logged steps 10,000-10,049 past its last checkpoint (9,999);
    # the resumed one starts again at 10,000 and has logged one step so far
    _run(run, {10_000: -1.0}, purge=10_000)
    values = read_tags(run, [TAG])[TAG]
    assert max(values) == 10_000 and values[10_000] == -1.0 and values[9_999] == 9_999.0
    assert read_tags(run, ["charts/episode_return"])["charts/episode_return"] == {}
    both = read_tags(run, [TAG, "charts/episode_return"])
    assert both == {TAG: values, "charts/episode_return": {}}


def test_the_episode_figures_of_the_env_runners_become_chart_scalars():
    """The team return, the team's avg JCT and the per-window normalised return that
    ``log_team_return`` logs from the env's final info reach TensorBoard; a missing or
    non-finite one gives no scalar."""
    runners = {"team_return": -2.5, "team_avg_jct_s": 9000.0, "normalised_return": -1.75,
               "episode_len_mean": float("nan")}  # fmt: skip
    result = {"env_runners": runners}
    scalars, _ = scalars_from_result(result, 0.0)
    assert scalars["charts/team_return"] == -2.5
    assert scalars["charts/episode_avg_jct_s"] == 9000.0
    assert scalars["charts/normalised_return"] == -1.75
    assert "charts/episode_length" not in scalars
