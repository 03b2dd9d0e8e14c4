"""The RLModule, the builtin env and Ray-free checkpoints (no Ray cluster needed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from agents.gnn import MASKED_LOGIT, build_gnn
from agents.policy import (
    MarlPolicy,
    SingleAgentPolicy,
    load_checkpoint,
    manifest_for,
    save_modules,
)
from agents.rl_module import HierarchicalGNNModule, SchedulingEnv
from envs.observations import ObservationBuilder, feature_dims
from marl_sched.cli import main
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.errors import InputError
from marl_sched.runner import build_cluster, load_workload, simulate

TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")
MODEL = {"hidden": 16, "layers": 1, "exchange": True, "share_parameters": True}


def rollout(env: SchedulingEnv, seed: int, pick=lambda mask: int(np.flatnonzero(mask)[0])):
    """(observations, total reward) of one episode under ``pick``."""
    obs, _ = env.reset(seed=seed)
    seen, total = [], 0.0
    while True:
        agent, o = next(iter(obs.items()))
        seen.append(o)
        obs, rewards, terminated, _, _ = env.step({agent: pick(o["action_mask"])})
        total += sum(rewards.values())
        if terminated["__all__"]:
            return seen, total


@pytest.fixture(scope="module")
def env() -> SchedulingEnv:
    return SchedulingEnv({"experiment": TINY, "episode_jobs": 20, "seed": 0})


def batch(obs_list) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(np.stack([o[k] for o in obs_list])) for k in obs_list[0]}


def test_env_return_is_minus_average_jct(env):
    obs, total = rollout(env, seed=3)
    jct = np.mean([r.jct for r in env.sim.result()])
    assert len(env.sim.result()) == 20
    assert total == pytest.approx(-jct / 3600.0 / 1.0, rel=1e-9)
    space = env.observation_spaces["sc0"]
    assert all(space.contains(o) for o in obs)


def test_central_env_has_one_agent_over_the_whole_datacenter():
    env = SchedulingEnv({"experiment": TINY, "episode_jobs": 10, "central": True})
    assert env.possible_agents == ["central"]
    obs, total = rollout(env, seed=0)
    topo = env.topology
    assert obs[0]["group_mask"].sum() == topo.n_groups
    assert obs[0]["action_mask"][-1] == 0  # its only forward action is masked
    jct = np.mean([r.jct for r in env.sim.result()])
    assert total == pytest.approx(-jct / 3600.0, rel=1e-9)


def test_env_is_deterministic_under_a_seed(env):
    a, ra = rollout(env, seed=5)
    b, rb = rollout(env, seed=5)
    assert ra == rb and len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])


def test_extra_windows_mix_sources_and_keep_the_return_exact():
    """Episodes come from the config's window or an extra one in proportion to the
    shares; a window shorter than an episode is one whole episode, and the return is
    still -avg JCT over the jobs the episode has."""
    extra = {"trace": "configs/traces/philly_sample.csv", "start": 2300, "max_jobs": 12,
             "load": 2.0, "share": 3.0}  # fmt: skip
    env = SchedulingEnv(
        {
            "experiment": TINY,
            "episode_jobs": 20,
            "seed": 0,
            "extra_windows": [extra],
            "workload_share": 1.0,
        }  # fmt: skip
    )
    assert [len(s) for s in env.sources] == [40, 12]
    np.testing.assert_allclose(env.source_p, [0.25, 0.75])
    keys = []
    for seed in range(12):
        _, total = rollout(env, seed=seed)
        keys.append(env.episode_key)
        jcts = [r.jct for r in env.sim.result()]
        assert len(jcts) == (12 if env.episode_key[0] == 1 else 20)
        assert total == pytest.approx(-np.mean(jcts) / 3600.0, rel=1e-9)
    extra_keys = {k for k in keys if k[0] == 1}
    assert extra_keys == {(1, 0, 12)}  # drawn whole, always the same episode
    assert 0 < sum(k[0] == 1 for k in keys) < 12  # both sources drawn


def test_module_forward_and_values_with_masks(env):
    module = RLModuleSpec(
        module_class=HierarchicalGNNModule,
        observation_space=env.observation_spaces["sc0"],
        action_space=env.action_spaces["sc0"],
        model_config=MODEL,
    ).build()
    obs, _ = rollout(env, seed=1)
    b = {Columns.OBS: batch(obs[:16])}
    mask = b[Columns.OBS]["action_mask"] > 0.5
    for fwd in (module.forward_inference, module.forward_exploration):
        logits = fwd(b)[Columns.ACTION_DIST_INPUTS]
        assert logits.shape == mask.shape
        assert (logits[~mask] <= MASKED_LOGIT / 2).all()
        assert (logits[mask] > MASKED_LOGIT / 2).all()
    out = module.forward_train(b)
    values = module.compute_values(b)
    assert values.shape == (16,)
    torch.testing.assert_close(module.compute_values(b, out[Columns.EMBEDDINGS]), values)
    dist = module.get_exploration_action_dist_cls().from_logits(out[Columns.ACTION_DIST_INPUTS])
    sampled = torch.stack([dist.sample() for _ in range(50)], dim=1)  # (B, 50)
    assert mask.gather(1, sampled).all()


def test_module_reads_the_envs_observation_space():
    envs = pytest.importorskip("envs")
    real = envs.make_env(str(REPO_ROOT / "configs" / "tiny.yaml"))
    obs, _ = real.reset(seed=0)
    module = RLModuleSpec(
        module_class=HierarchicalGNNModule,
        observation_space=real.observation_space,
        action_space=real.action_space,
        model_config=MODEL,
    ).build()
    agent, o = next(iter(obs.items()))
    logits = module.forward_inference({Columns.OBS: batch([o])})[Columns.ACTION_DIST_INPUTS]
    mask = torch.as_tensor(o["action_mask"])[None] > 0.5
    assert (logits[~mask] <= MASKED_LOGIT / 2).all()
    real.step({agent: int(torch.argmax(logits))})


# ------------------------------------------------------------------------ checkpoints


def write_checkpoint(
    folder: Path, config: str = TINY, model=MODEL, group_dim=None, central=False
) -> Path:
    """A checkpoint of an untrained network, written without Ray (``group_dim``: pretend
    it was trained on another observation layout)."""
    cfg = load_config(config)
    topo, perf = build_cluster(cfg)
    builder = ObservationBuilder(topo, perf, central=central)
    ids = ["shared"] if model["share_parameters"] else list(builder.agent_ids)
    dims = feature_dims(builder.observation_space)
    if group_dim is not None:
        dims["Fg"] = group_dim
    torch.manual_seed(0)
    weights = {}
    for m in ids:
        net = build_gnn(dims, model)
        weights[m] = {f"gnn.{k}": v for k, v in net.state_dict().items()}
    manifest = manifest_for(builder, model, ids, extra={"config": cfg.to_dict()})
    manifest["dims"] = dims
    save_modules(folder, weights, manifest)
    return folder


def test_checkpoint_serves_simulate_without_ray(tmp_path):
    ckpt = write_checkpoint(tmp_path / "ckpt")
    code = (
        "import sys; from agents.policy import MarlPolicy; "
        "from marl_sched.config import load_config; "
        "from marl_sched.runner import build_cluster, load_workload, simulate; "
        f"cfg = load_config({TINY!r}); topo, perf = build_cluster(cfg); "
        "w = load_workload(cfg, perf); "
        f"m, r, _ = simulate(cfg, 'marl', w, topo, perf, policy=MarlPolicy({str(ckpt)!r})); "
        "print(m['jobs_completed'], 'ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["40", "False"]


def test_greedy_policy_is_deterministic(tmp_path):
    agents = load_checkpoint(write_checkpoint(tmp_path / "ckpt"))
    cfg = load_config(TINY)
    topo, perf = build_cluster(cfg)
    workload = load_workload(cfg, perf)
    runs = [
        simulate(cfg, "marl", workload, topo, perf, policy=MarlPolicy(agents=agents))[1]
        for _ in range(2)
    ]
    assert [(r.job.job_id, r.finish_time) for r in runs[0]] == [
        (r.job.job_id, r.finish_time) for r in runs[1]
    ]


def _evaluate(ckpt, tmp_path, capsys, config=TINY, extra=()):
    rc = main(
        [
            "evaluate",
            "--checkpoint", str(ckpt),
            "--config", config,
            "--trace", str(REPO_ROOT / "configs" / "traces" / "philly_sample.csv"),
            "--start", "2200", "--max-jobs", "10", "--quiet",
            "--out", str(tmp_path / "eval"),
            *extra,
        ]
    )  # fmt: skip
    return rc, capsys.readouterr().err


def test_evaluate_writes_metrics_and_jobs(tmp_path, capsys):
    rc, err = _evaluate(write_checkpoint(tmp_path / "ckpt"), tmp_path, capsys)
    assert rc == 0, err
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert metrics["policy"] == "marl" and metrics["jobs_total"] == 10
    assert (tmp_path / "eval" / "jobs.csv").read_text().count("\n") == 11


def test_a_shared_checkpoint_serves_a_bigger_topology(tmp_path, capsys):
    default = str(REPO_ROOT / "configs" / "default.yaml")
    rc, err = _evaluate(write_checkpoint(tmp_path / "ckpt"), tmp_path, capsys, config=default)
    assert rc == 0, err


def test_central_checkpoint_is_served_by_single_agent_only(tmp_path, capsys):
    ckpt = write_checkpoint(tmp_path / "ckpt", central=True)
    agents = load_checkpoint(ckpt)
    cfg = load_config(TINY)
    topo, perf = build_cluster(cfg)
    metrics, _, _ = simulate(
        cfg, "single-agent", load_workload(cfg, perf), topo, perf,
        policy=SingleAgentPolicy(agents=agents),
    )  # fmt: skip
    assert metrics["jobs_completed"] == 40
    with pytest.raises(InputError, match="single-agent \\(central\\) policy, not a 'marl'"):
        simulate(cfg, "marl", load_workload(cfg, perf), topo, perf,
                 policy=MarlPolicy(agents=agents))  # fmt: skip
    rc, err = _evaluate(ckpt, tmp_path, capsys)  # evaluate picks the right adapter
    assert rc == 0, err
    assert json.loads((tmp_path / "eval" / "metrics.json").read_text())["policy"] == "single-agent"


def test_corrupt_checkpoint_exits_2(tmp_path, capsys):
    ckpt = write_checkpoint(tmp_path / "ckpt")
    (ckpt / "modules" / "shared.pt").write_bytes(b"not a torch file")
    rc, err = _evaluate(ckpt, tmp_path, capsys)
    assert rc == 2
    assert err.count("\n") == 1 and "corrupt checkpoint" in err
    assert not (tmp_path / "eval").exists()
    (ckpt / "manifest.json").write_text("{")
    rc, err = _evaluate(ckpt, tmp_path, capsys)
    assert rc == 2 and "corrupt checkpoint" in err


def test_mismatched_observation_layout_exits_2(tmp_path, capsys):
    ckpt = write_checkpoint(tmp_path / "ckpt", group_dim=7)
    rc, err = _evaluate(ckpt, tmp_path, capsys)
    assert rc == 2 and err.count("\n") == 1
    assert "checkpoint expects" in err and "Fg=7" in err and "Fg=10" in err


def test_per_agent_checkpoint_refuses_other_agent_counts(tmp_path, capsys):
    model = dict(MODEL, share_parameters=False)
    ckpt = write_checkpoint(tmp_path / "ckpt", model=model)
    rc, err = _evaluate(ckpt, tmp_path, capsys)
    assert rc == 0, err
    default = str(REPO_ROOT / "configs" / "default.yaml")
    rc, err = _evaluate(ckpt, tmp_path, capsys, config=default)
    assert rc == 2 and "2 per-agent modules but config gives 4 subclusters" in err


def test_missing_checkpoint_exits_2(tmp_path, capsys):
    rc, err = _evaluate(tmp_path / "nothing", tmp_path, capsys)
    assert rc == 2 and "not a checkpoint" in err
