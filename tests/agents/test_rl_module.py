"""The RLModule and Ray-free checkpoints (no Ray cluster needed)."""

from __future__ import annotations

import dataclasses
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
from agents.rl_module import HierarchicalGNNModule
from envs import make_env
from envs.config import env_config
from envs.observations import ObservationBuilder, feature_dims
from marl_sched.cli import main
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.errors import InputError
from marl_sched.runner import build_cluster, load_workload, simulate

TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")
MODEL = {"hidden": 16, "layers": 1, "exchange": True, "share_parameters": True}


def rollout(env, seed: int, pick=lambda mask: int(np.flatnonzero(mask)[0])):
    """Observations of one episode under ``pick``."""
    obs, _ = env.reset(seed=seed)
    seen = []
    while True:
        agent, o = next(iter(obs.items()))
        seen.append(o)
        obs, _, terminated, _, _ = env.step({agent: pick(o["action_mask"])})
        if terminated["__all__"]:
            return seen


@pytest.fixture(scope="module")
def env():
    return make_env(TINY, env={"window_jobs": 20})


def batch(obs_list) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(np.stack([o[k] for o in obs_list])) for k in obs_list[0]}


def _module(env) -> HierarchicalGNNModule:
    return RLModuleSpec(
        module_class=HierarchicalGNNModule,
        observation_space=env.observation_spaces["sc0"],
        action_space=env.action_spaces["sc0"],
        model_config=MODEL,
    ).build()


def test_module_forward_and_values_with_masks(env):
    module = _module(env)
    obs = rollout(env, seed=1)
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


# ------------------------------------------------------------------------ checkpoints


def write_checkpoint(
    folder: Path, config: str = TINY, model=MODEL, group_dim=None, central=False
) -> Path:
    """A checkpoint of an untrained network, written without Ray (``group_dim``: pretend
    it was trained on another observation layout)."""
    cfg = load_config(config)
    if central:
        cfg = dataclasses.replace(cfg, env={**(cfg.env or {}), "central": True})
    topo, perf = build_cluster(cfg)
    builder = ObservationBuilder(topo, perf, env_config(cfg))
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
            *(["--config", config] if config else []),
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
    base = str(REPO_ROOT / "configs" / "base.yaml")  # 4 subclusters, 48 servers, no options
    ckpt = write_checkpoint(tmp_path / "ckpt", config=str(REPO_ROOT / "configs" / "tiny.yaml"))
    rc, err = _evaluate(ckpt, tmp_path, capsys, config=base)
    assert rc == 0, err


def test_an_environment_with_other_options_is_refused(tmp_path, capsys):
    """The default config turns decision options on; a checkpoint trained without them
    is refused with one line naming the first differing option, before any work."""
    default = str(REPO_ROOT / "configs" / "default.yaml")
    rc, err = _evaluate(write_checkpoint(tmp_path / "ckpt"), tmp_path, capsys, config=default)
    assert rc == 2 and err.count("\n") == 1
    assert "env.hints: is ['interference-aware', 'resident-aware'" in err
    assert "trained with ['interference-aware', 'first-fit']" in err
    assert not (tmp_path / "eval").exists()


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
    rc, err = _evaluate(ckpt, tmp_path, capsys)  # a config without env.central: refused
    assert rc == 2 and "env.central: is False" in err
    rc, err = _evaluate(ckpt, tmp_path, capsys, config=None)  # the manifest's config
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
    assert "checkpoint expects" in err and "Fg=7" in err and "Fg=13" in err


def test_per_agent_checkpoint_refuses_other_agent_counts(tmp_path, capsys):
    model = dict(MODEL, share_parameters=False)
    tiny = str(REPO_ROOT / "configs" / "tiny.yaml")
    ckpt = write_checkpoint(tmp_path / "ckpt", config=tiny, model=model)
    rc, err = _evaluate(ckpt, tmp_path, capsys, config=tiny)
    assert rc == 0, err
    base = str(REPO_ROOT / "configs" / "base.yaml")
    rc, err = _evaluate(ckpt, tmp_path, capsys, config=base)
    assert rc == 2 and "2 per-agent modules but config gives 4 subclusters" in err


def test_missing_checkpoint_exits_2(tmp_path, capsys):
    rc, err = _evaluate(tmp_path / "nothing", tmp_path, capsys)
    assert rc == 2 and "not a checkpoint" in err


def test_mode_switches_and_exploration_forward_match_rllibs_defaults(env):
    """``train``/``eval`` set the flags ``nn.Module.train`` sets, and the exploration and
    inference forwards (``torch.inference_mode``) give the bit-identical logits and,
    under one seed, the same sampled actions as RLlib's ``no_grad`` default."""
    from ray.rllib.core.rl_module.torch import TorchRLModule
    from torch import nn

    class OwnTrain(nn.Linear):  # a submodule with a train() of its own is still called
        calls = 0

        def train(self, mode=True):
            OwnTrain.calls += 1
            return super().train(mode)

    module = _module(env)
    module.gnn.extra = nn.Sequential(nn.ReLU(), OwnTrain(2, 2))
    for mode in (False, True, False):
        assert module.train(mode) is module
        assert all(m.training is mode for m in module.modules())
    assert OwnTrain.calls == 3
    module.gnn.blocks[0].training = False  # a mixed state: every flag is overwritten
    module.train()
    assert all(m.training for m in module.modules())
    with pytest.raises(ValueError):
        module.train("yes")
    del module.gnn.extra

    b = {Columns.OBS: batch(rollout(env, seed=2)[:8])}
    for ours, rllib in (
        (module.forward_exploration, TorchRLModule._forward_exploration),
        (module.forward_inference, TorchRLModule._forward_inference),
    ):
        got = ours(b)[Columns.ACTION_DIST_INPUTS]
        assert module.training  # restored after the forward
        want = rllib(module, b)[Columns.ACTION_DIST_INPUTS]
        assert torch.equal(got, want)
        dist_cls = module.get_exploration_action_dist_cls()
        torch.manual_seed(5)
        a = dist_cls.from_logits(got).sample()
        torch.manual_seed(5)
        assert torch.equal(a, dist_cls.from_logits(want).sample())
