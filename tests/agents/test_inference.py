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
    # what a network serves: padding, episode cutting and the reward source
    served = dataclasses.replace(
        cfg, env={**cfg.env, "window_jobs": 50, "reward": {"interference": "learned"}}
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
        (lambda m: m.update(modules="shared"), "modules: expected list"),
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
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules").glob("seed*")),  # the default recipe
    *sorted((REPO_ROOT / "checkpoints" / "marl-learn-seeds").glob("seed*")),  # the rules one
    *sorted((REPO_ROOT / "checkpoints" / "marl-nofloor").glob("seed*")),  # rules but the floor
    # session 8: the recipe's warm start taught by masked:mlfs-rl (the clone probe)
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "clone-mlfs-rl").glob("seed*")),
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "clone64-mlfs-rl").glob("seed*")),
    # session 9: the recipe's warm start seeing the job's model's GPU speeds (env.model_speed)
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "ms-warm").glob("seed*")),
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "clone64-ms").glob("seed*")),
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "clone-loaded").glob("seed*")),
    # session 10: the model-speed clone with the per-node raw path (model.raw_head)
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "clone64-rh").glob("seed*")),
    # session 10: the model-speed clone taught on the benchmark's train windows too
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "clone64-sw").glob("seed*")),
    # session 10: the recipe's own warm start with the speeds and the train windows
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "ms-sw-warm").glob("seed*")),
    # session 11: that recipe's three seeds with 12 PPO iterations (fixed sampler), as
    # selected (each its warm start): the next default recipe's test-split networks
    *sorted((REPO_ROOT / "checkpoints" / "marl-sw").glob("seed*")),
    # session 13: that recipe's warm start taught on loaded training slices
    # (train.episode_warmup_jobs=100)
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "ms-sw-load-warm").glob("seed*")),
]
#: the speed columns as the default env had them before session 12 (the GPU type's
#: catalogue-wide figure): networks trained then are refused by today's default env
NO_MODEL_SPEED = {"model_speed": False}


def without_model_speed(cfg):
    """``cfg`` with the default env as it was before session 12 (:data:`NO_MODEL_SPEED`)."""
    return dataclasses.replace(cfg, env={**cfg.env, **NO_MODEL_SPEED})


def _weights(folder: Path):
    """The network of a checkpoint folder (``folder / modules / shared.pt``): tensors
    only (``weights_only``)."""
    import torch

    return torch.load(folder / "modules" / "shared.pt", map_location="cpu", weights_only=True)


#: what a folder's seeds change in the default config's env, as they were trained (the
#: default recipe has no speed floor and no PS rule since session 6, and reads the job's
#: model's speeds since session 12)
TRAINED_WITH = {
    "marl-norules": NO_MODEL_SPEED,
    "marl-learn-seeds": {"speed_floor": 0.9, "ps_rule": True, **NO_MODEL_SPEED},
    "marl-nofloor": {"ps_rule": True, **NO_MODEL_SPEED},
    "clone-mlfs-rl": NO_MODEL_SPEED,
    "clone64-mlfs-rl": NO_MODEL_SPEED,
}
#: the default checkpoint is this seed's run, byte for byte
SHIPPED_SEED = REPO_ROOT / "checkpoints" / "marl-sw" / "seed0"
#: ... and so, bit for bit in its network, is that recipe's warm start made in session 10
SHIPPED_WARM_COPY = REPO_ROOT / "checkpoints" / "marl-norules" / "ms-sw-warm" / "seed0"


@pytest.mark.parametrize("path", SHIPPED_SEEDS, ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_the_shipped_warm_start_and_other_seeds_load_and_act_in_the_env(path):
    """Issue 34: the warm start ships beside the final policy, and the recipe's other
    training seeds (pooled in the test-split figure) are real checkpoints too: each
    loads with ``load_agents``, is accepted by the default config's environment, and
    places a whole window in it (the folders trained with other options, :data:`TRAINED_WITH`:
    with the default's options set as they were trained; the default's are refused,
    naming the first option that differs). Those trained with the default's options,
    the shipped warm start among them, are refused by an environment without the job's
    model's speeds."""
    agents = load_agents(path)
    cfg = _default_window(40)
    changed = TRAINED_WITH.get(path.parent.name)
    if changed:
        with pytest.raises(InputError, match=r"env\.(speed_floor|ps_rule|model_speed)"):
            agents.check_env(env_config(cfg))
        cfg = dataclasses.replace(cfg, env={**cfg.env, **changed})
    else:
        with pytest.raises(InputError, match=r"env\.model_speed"):
            agents.check_env(env_config(without_model_speed(cfg)))
    agents.check_env(env_config(cfg))
    info, steps = _rollout(agents, cfg)
    assert steps > 40 and info["metrics"]["jobs_completed"] == 40
    state = json.loads((path / "state.json").read_text())
    assert state["iteration"] == 0  # a warm start: no PPO iteration passed selection


def test_the_shipped_checkpoint_is_its_warm_start_and_the_seeds_differ():
    """What the README says of the shipped checkpoint: its network is its warm start's
    (no PPO update was kept), it is ``marl-sw/seed0``'s files, and every other shipped
    seed is another network (but ``marl-norules/ms-sw-warm/seed0``, the same recipe's
    warm start made in session 10: the same network, checked below)."""
    import torch

    final, warm = _weights(SHIPPED), _weights(SHIPPED / "warm_start")
    assert final.keys() == warm.keys()
    assert all(torch.equal(final[k], warm[k]) for k in final)
    for name in ("manifest.json", "state.json", "config.yaml", "modules/shared.pt"):
        assert (SHIPPED / name).read_bytes() == (SHIPPED_SEED / name).read_bytes(), name
    others = [p for p in SHIPPED_SEEDS[1:] if p not in (SHIPPED_SEED, SHIPPED_WARM_COPY)]
    assert len(others) == len(SHIPPED_SEEDS) - 3
    copy = _weights(SHIPPED_WARM_COPY)
    assert all(torch.equal(final[k], copy[k]) for k in final)
    for other in others:
        w = _weights(other)
        assert any(not torch.equal(final[k], w[k]) for k in final)


PPO_ITER12 = [
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "ppo-iter12").glob("seed*")),
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "kl-iter12").glob("seed*")),  # prior_kl
    # session 7: rollout improvement with soft targets, its last round (4)
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "soft-iter4").glob("seed*")),
    # and with each label confirmed on four resampled futures (train.improve_futures)
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "fut-iter4").glob("seed*")),
    # session 8: PPO with the job-aligned credit (train.advantage: job), iteration 12
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "job-iter12").glob("seed*")),
    # and the same runs trained to iteration 48
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "job-iter48").glob("seed*")),
]


@pytest.mark.parametrize("path", PPO_ITER12, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_default_recipes_last_ppo_iterations_load_and_act(path):
    """The networks behind docs/agents.md's "Does PPO improve on its warm start" and
    the updates measured after it: each seed's last iteration (12; 48 for the long
    job-credit runs; 4 for the rollout rounds) of the default recipe of sessions 6-11
    serves the default config's environment as it was then (without the job's model's
    speeds), places a window, and is an update of that seed's warm start (another
    network)."""
    import torch

    assert len(PPO_ITER12) == 18
    agents = load_agents(path)
    cfg = _default_window(40)
    with pytest.raises(InputError, match=r"env\.model_speed"):
        agents.check_env(env_config(cfg))
    cfg = without_model_speed(cfg)
    agents.check_env(env_config(cfg))
    info, _ = _rollout(agents, cfg)
    assert info["metrics"]["jobs_completed"] == 40
    last = int(path.parent.name.rsplit("-iter", 1)[1])
    assert json.loads((path / "state.json").read_text())["iteration"] == last
    warm = REPO_ROOT / "checkpoints" / "marl-norules" / path.name
    a, b = _weights(path), _weights(warm)
    assert a.keys() == b.keys() and any(not torch.equal(a[k], b[k]) for k in a)


MODEL_SPEED_ITER12 = [
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "ms-iter12").glob("seed*")),
    # session 10: the same with the benchmark's train windows (train.split_share)
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "ms-sw-iter12").glob("seed*")),
    # session 12: the same with 10,000-decision batches and the windows weighed alike
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "ms-sw-big-iter12").glob("seed*")),
    # session 13: the same on loaded training slices (train.episode_warmup_jobs=100)
    *sorted((REPO_ROOT / "checkpoints" / "marl-norules" / "ms-sw-load-iter12").glob("seed*")),
    # ... and ms-sw-big-iter12's seed 2 at iteration 3, the one its dominance rule kept
    REPO_ROOT / "checkpoints" / "marl-norules" / "ms-sw-big-picks" / "seed2",
]
#: each folder's warm starts
ITER12_WARM = {
    "ms-iter12": "ms-warm",
    "ms-sw-iter12": "ms-sw-warm",
    "ms-sw-big-iter12": "ms-sw-warm",
    "ms-sw-load-iter12": "ms-sw-load-warm",
    "ms-sw-big-picks": "ms-sw-warm",
}
#: the PPO iteration a folder's networks are at, when not the last (12)
KEPT_ITERATION = {"ms-sw-big-picks": 3}


@pytest.mark.parametrize("path", MODEL_SPEED_ITER12, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_model_speed_recipes_last_ppo_iterations_load_and_act(path):
    """Session 9's PPO from the model-speed warm starts (docs/agents.md, "PPO seeing the
    speeds"): each seed's iteration 12 is refused by an environment without
    ``env.model_speed``, naming it, serves the default one (the option on since session
    12), places a window, and is an update of that seed's warm start (``ms-warm``);
    likewise the later recipes' iteration 12 and the one kept PPO iteration measured on
    the whole split (:data:`KEPT_ITERATION`)."""
    import torch

    assert len(MODEL_SPEED_ITER12) == 13
    agents = load_agents(path)
    cfg = _default_window(40)
    agents.check_env(env_config(cfg))
    with pytest.raises(InputError, match=r"env\.model_speed"):
        agents.check_env(env_config(without_model_speed(cfg)))
    info, _ = _rollout(agents, cfg)
    assert info["metrics"]["jobs_completed"] == 40
    expected = KEPT_ITERATION.get(path.parent.name, 12)
    assert json.loads((path / "state.json").read_text())["iteration"] == expected
    warm = REPO_ROOT / "checkpoints" / "marl-norules" / ITER12_WARM[path.parent.name] / path.name
    a, b = _weights(path), _weights(warm)
    assert a.keys() == b.keys() and any(not torch.equal(a[k], b[k]) for k in a)


def test_the_loaded_recipes_selected_networks_are_the_iterations_its_rule_kept():
    """``checkpoints/marl-sw-load`` (docs/agents.md, "Loaded episodes on today's
    recipe"): each seed is the iteration its dominance rule kept (3, the warm start, 3),
    trained on loaded slices; seed 1 is bit for bit ``marl-norules/ms-sw-load-warm``'s
    network, seeds 0 and 2 are updates of theirs; each loads, is accepted by the default
    env and refused without the job's model's speeds, and seed 0 places a window."""
    import torch

    cfg = _default_window(40)
    for s, kept in ((0, 3), (1, 0), (2, 3)):
        path = REPO_ROOT / "checkpoints" / "marl-sw-load" / f"seed{s}"
        assert json.loads((path / "state.json").read_text())["iteration"] == kept
        assert "episode_warmup_jobs: 100" in (path / "config.yaml").read_text()
        mine, warm = (
            _weights(p)
            for p in (path, REPO_ROOT / "checkpoints/marl-norules/ms-sw-load-warm" / f"seed{s}")
        )
        assert mine.keys() == warm.keys()
        assert all(torch.equal(mine[k], warm[k]) for k in mine) == (kept == 0)
        agents = load_agents(path)
        agents.check_env(env_config(cfg))
        with pytest.raises(InputError, match=r"env\.model_speed"):
            agents.check_env(env_config(without_model_speed(cfg)))
        if s == 0:
            info, _ = _rollout(agents, cfg)
            assert info["metrics"]["jobs_completed"] == 40


def test_the_speed_windows_recipes_selected_networks_are_its_warm_starts():
    """``checkpoints/marl-sw`` (12 PPO iterations, the dominance rule kept iteration 0
    in every seed) holds the same networks as ``marl-norules/ms-sw-warm`` (the same
    recipe's warm starts, made in session 10), bit for bit: the validation figures of
    the one are the other's."""
    import torch

    for s in range(3):
        mine, warm = (
            _weights(REPO_ROOT / "checkpoints" / d / f"seed{s}")
            for d in ("marl-sw", "marl-norules/ms-sw-warm")
        )
        assert mine.keys() == warm.keys()
        assert all(torch.equal(mine[k], warm[k]) for k in mine)
        config = (REPO_ROOT / f"checkpoints/marl-sw/seed{s}/config.yaml").read_text()
        assert "iterations: 12" in config and "split_share: 1.0" in config
