"""The inference API: ``agents.load_agents(path).act`` in the one environment, and the
same decisions behind ``marl-sched evaluate``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from agents import load_agents
from envs import make_parallel_env
from envs.config import env_config
from marl_sched.cli import main
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.errors import InputError

DEFAULT = str(REPO_ROOT / "configs" / "default.yaml")
SHIPPED = REPO_ROOT / "checkpoints" / "marl-default"
WINDOW = 150  # jobs: the default window's first 150 (the whole: exp_one_env.py@4bf3552)


def _default_window(jobs: int = WINDOW):
    """``configs/default.yaml`` with its window's first ``jobs`` jobs."""
    cfg = load_config(DEFAULT)
    return dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, max_jobs=jobs))


def _rollout(agents, cfg):
    env = make_parallel_env(cfg)
    obs, _ = env.reset(seed=0)
    steps, infos = 0, {}
    while env.agents:
        actions = agents.act(obs)
        acting = env.acting_agent
        for agent, a in actions.items():  # idle agents answer with their no-op
            if agent != acting:
                assert a == env.env.builder.pad[0] + env.possible_agents.index(agent)
        obs, _, _, _, infos = env.step(actions)
        steps += 1
    return next(iter(infos.values())), steps


def test_the_shipped_checkpoint_acts_in_the_env_exactly_as_evaluate(tmp_path, capsys):
    agents = load_agents(SHIPPED)
    cfg = _default_window()
    agents.check_env(env_config(cfg))  # trained in this environment, with these options
    info, steps = _rollout(agents, cfg)
    assert steps > WINDOW and info["metrics"]["jobs_completed"] == WINDOW
    rc = main(
        ["evaluate", "--checkpoint", str(SHIPPED), "--config", DEFAULT,
         "--max-jobs", str(WINDOW), "--quiet", "--out", str(tmp_path / "ev")]
    )  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    record = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    evaluated = record["avg_jct_s"]
    # the run records the checkpoint it acted with and its content digest
    from marl_sched.benchmark.cells import checkpoint_id

    assert record["checkpoint"] == "checkpoints/marl-default"
    assert record["checkpoint_sha256"] == checkpoint_id(SHIPPED) != ""
    assert info["avg_jct_s"] == pytest.approx(evaluated, rel=1e-9)
    # and the episode's team return is -avg JCT / time_scale_s
    assert info["team_return"] == pytest.approx(-evaluated / 3600.0, rel=1e-9)


def test_act_is_deterministic_and_answers_only_the_agents_present():
    agents = load_agents(SHIPPED)
    env = make_parallel_env(_default_window())
    obs, _ = env.reset(seed=0)
    first = agents.act(obs)
    assert first == agents.act(obs) and set(first) == set(obs)
    acting = env.acting_agent
    assert obs[acting]["action_mask"][first[acting]] == 1
    one = {acting: obs[acting]}
    assert agents.act(one) == {acting: first[acting]}
    with pytest.raises(ValueError, match="unknown agent id"):
        agents.act({"worker-7": obs[acting]})


@pytest.mark.parametrize(
    ("option", "value"),
    [("hints", ["first-fit"]), ("speed_floor", 0.5), ("wait_to_fit", 0.0), ("central", True)],
)
def test_an_environment_with_another_decision_option_is_refused(option, value):
    agents = load_agents(SHIPPED)
    cfg = load_config(DEFAULT)
    other = dataclasses.replace(cfg, env={**cfg.env, option: value})
    with pytest.raises(InputError, match=rf"env\.{option}: is .* but checkpoint .* trained with"):
        agents.check_env(env_config(other), "env")
    # what a network serves: padding, episode cutting and the reward's scale
    served = dataclasses.replace(
        cfg, env={**cfg.env, "window_jobs": 50, "reward": {"time_scale_s": 60.0}}
    )
    agents.check_env(env_config(served))


def test_a_checkpoint_from_before_v1_or_of_another_env_is_refused(tmp_path):
    import shutil

    ckpt = tmp_path / "ckpt"
    shutil.copytree(SHIPPED, ckpt)
    manifest = json.loads((ckpt / "manifest.json").read_text())
    for env, message in (
        (None, "records no environment"),
        ({**manifest["env"], "version": 0}, "trained in 'marl_sched/ClusterPlacement-v1'"),
        ({**manifest["env"], "id": "other/Env-v1"}, "trained in 'other/Env-v1'"),
    ):
        bad = {k: v for k, v in manifest.items() if k != "env"}
        if env is not None:
            bad["env"] = env
        (ckpt / "manifest.json").write_text(json.dumps(bad))
        with pytest.raises(InputError, match=message):
            load_agents(ckpt)


def test_act_matches_the_policy_on_a_random_walk_of_states():
    """Beyond the greedy trajectory: on states reached by random legal play, ``act``
    picks a legal action for the acting agent."""
    agents = load_agents(SHIPPED)
    env = make_parallel_env(_default_window())
    obs, _ = env.reset(seed=1)
    rng = np.random.default_rng(0)
    for _ in range(60):
        acting = env.acting_agent
        chosen = agents.act(obs)[acting]
        assert obs[acting]["action_mask"][chosen] == 1
        legal = np.flatnonzero(obs[acting]["action_mask"])
        obs, *_ = env.step({acting: int(rng.choice(legal))})
        if not env.agents:
            break


def _tampered(tmp_path, change):
    import shutil

    ckpt = tmp_path / "ckpt"
    if not ckpt.exists():
        shutil.copytree(SHIPPED, ckpt)
    manifest = json.loads((SHIPPED / "manifest.json").read_text())
    change(manifest)
    (ckpt / "manifest.json").write_text(json.dumps(manifest))
    return ckpt


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.pop("central"), "central: required key is missing"),
        (lambda m: m.pop("share_parameters"), "share_parameters: required key is missing"),
        (lambda m: m.update(modules=[]), "modules: empty"),
        (lambda m: m.update(modules=["../../x"]), "is not a module name"),
        (lambda m: m.update(central=True), "env.options.central disagrees|central is true"),
        (lambda m: m.update(agents=["central"]), "agents: expected sc0"),
        (lambda m: m.update(share_parameters=False), "per-agent modules must be named"),
        (lambda m: m["dims"].update(Fg="16"), "dims.Fg: expected an integer"),
        (lambda m: m.update(modules="shared"), "modules: expected a list"),
        (
            lambda m: m["env"]["options"].update(follow_commits=True),
            r"env\.options\.follow_commits: True belongs to a study",
        ),
    ],
)
def test_a_malformed_manifest_is_one_line_not_a_traceback(tmp_path, capsys, change, message):
    ckpt = _tampered(tmp_path, change)
    with pytest.raises(InputError, match=message):
        load_agents(ckpt)
    rc = main(["evaluate", "--checkpoint", str(ckpt), "--config", DEFAULT, "--max-jobs", "5",
               "--quiet", "--out", str(tmp_path / "ev")])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and not (tmp_path / "ev").exists()


def test_non_finite_weights_are_refused(tmp_path):
    import shutil

    import torch

    ckpt = tmp_path / "ckpt"
    shutil.copytree(SHIPPED, ckpt)
    state = torch.load(ckpt / "modules" / "shared.pt", weights_only=True)
    name = next(iter(state))
    state[name] = torch.full_like(state[name], float("nan"))
    torch.save(state, ckpt / "modules" / "shared.pt")
    with pytest.raises(InputError, match=r"modules/shared.pt: .*non-finite weights"):
        load_agents(ckpt)


SHIPPED_SEEDS = [
    SHIPPED / "warm_start",
    *sorted((REPO_ROOT / "checkpoints" / "marl-sw-migration").glob("seed*")),
]


def _weights(folder: Path):
    """The network of a checkpoint folder (``folder / modules / shared.pt``): tensors
    only (``weights_only``)."""
    import torch

    return torch.load(folder / "modules" / "shared.pt", map_location="cpu", weights_only=True)


@pytest.mark.parametrize("path", SHIPPED_SEEDS, ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_the_shipped_warm_start_and_migration_seeds_load_and_act_in_the_env(path):
    """Every shipped network is a real checkpoint: it loads with ``load_agents``, is
    accepted by its training config's environment and refused by one without the job's
    model's speeds (naming ``env.model_speed``), and places a whole window in it."""
    agents = load_agents(path)
    cfg = _default_window(40)
    if path.parent.name == "marl-sw-migration":
        cfg = dataclasses.replace(cfg, env={**cfg.env, "migration": True})
    with pytest.raises(InputError, match=r"env\.model_speed"):
        no_speed = dataclasses.replace(cfg, env={**cfg.env, "model_speed": False})
        agents.check_env(env_config(no_speed))
    agents.check_env(env_config(cfg))
    info, steps = _rollout(agents, cfg)
    assert steps > 40 and info["metrics"]["jobs_completed"] == 40


def test_the_shipped_checkpoint_is_its_warm_start():
    """What the README says of the shipped checkpoint: its network is its warm start's
    (no PPO iteration passed selection), and the migration seeds are other networks."""
    import torch

    final, warm = _weights(SHIPPED), _weights(SHIPPED / "warm_start")
    assert final.keys() == warm.keys()
    assert all(torch.equal(final[k], warm[k]) for k in final)
    assert json.loads((SHIPPED / "state.json").read_text())["iteration"] == 0
    for other in SHIPPED_SEEDS[1:]:
        w = _weights(other)
        assert any(not torch.equal(final[k], w[k]) for k in final if k in w)
