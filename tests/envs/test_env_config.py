"""The ``env:`` config section: every option of v1, every bad key or value names
``env.<key>``, overrides through ``make_env(cfg, env={...})``."""

from __future__ import annotations

import dataclasses

import pytest

from envs import EnvConfig, env_config, make_env
from envs.config import DECISION_OPTIONS, RewardConfig
from marl_sched.config import load_config
from marl_sched.errors import InputError
from tests.envs.helpers import DEFAULT, TINY


def test_defaults_parse_from_an_empty_section():
    cfg = dataclasses.replace(load_config(TINY), env={})
    ec = env_config(cfg)
    assert ec == EnvConfig()
    assert ec.forward_rule == "must" and ec.window_jobs is None and ec.pad == ()
    assert ec.reward == RewardConfig(time_scale_s=3600.0)
    assert not (ec.central or ec.consolidate or ec.keep_together or ec.ps_rule)
    assert ec.speed_floor == ec.wait_to_fit == 0.0 and ec.hints == ec.global_hints == ()


def test_default_recipe_section_parses_with_its_options_on():
    """The default recipe's options: no speed floor and no PS rule (the floor's work
    threshold is still recorded: it binds nothing at 0), and the job's model's speeds (an
    observation option: the controls, which keep the rules recipe's masks, read no
    observation)."""
    ec = env_config(load_config(DEFAULT))
    assert ec.hints == (
        "interference-aware",
        "resident-aware",
        "locality",
        "first-fit",
        "speed-aware",
    )
    assert ec.global_hints == ("interference-aware", "speed-aware")
    assert ec.consolidate and ec.resident_features and ec.keep_together and ec.job_length
    assert not ec.ps_rule and ec.speed_floor == 0.0 and ec.speed_floor_min_work == 1e5
    assert ec.wait_to_fit == 1.0 and ec.forward_rule == "must" and ec.model_speed
    # the pre-registered rules the controls keep (envs/controls.py)
    import dataclasses

    from envs.controls import CONTROL_RULES

    base = load_config(DEFAULT)
    rules = env_config(dataclasses.replace(base, env={**base.env, **CONTROL_RULES}))
    assert rules.ps_rule and rules.speed_floor == 0.9 and rules.speed_floor_min_work == 1e5
    assert not rules.model_speed
    differ = ("ps_rule", "speed_floor", "model_speed")
    others = {k: v for k, v in rules.decision_options().items() if k not in differ}
    assert others == {k: ec.decision_options()[k] for k in others}


def test_decision_options_are_every_option_but_the_episode_and_space_ones():
    names = {f.name for f in dataclasses.fields(EnvConfig)}
    assert set(DECISION_OPTIONS) == names - {"window_jobs", "window_warmup_jobs", "pad", "reward"}
    d = env_config(load_config(DEFAULT)).decision_options()
    assert list(d) == list(DECISION_OPTIONS)
    assert d["hints"] == [
        "interference-aware",
        "resident-aware",
        "locality",
        "first-fit",
        "speed-aware",
    ]
    assert isinstance(d["global_hints"], list) and d["speed_floor"] == 0.0


def test_unknown_key_in_yaml_names_the_file_and_the_key(tmp_path):
    text = open(TINY, encoding="utf-8").read().replace("window_jobs: null", "window_job: null")
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.yaml: env\.window_job: unknown key \(known: "):
        make_env(str(path))


@pytest.mark.parametrize(
    "overrides, pattern",
    [
        ({"bogus": 1}, r"env\.bogus: unknown key \(known: .*forward_rule"),
        ({"home_rule": "vc"}, r"env\.home_rule: unknown key"),  # v0 options are gone
        ({"window_sampling": "random"}, r"env\.window_sampling: unknown key"),
        ({"max_sim_time": 60.0}, r"env\.max_sim_time: unknown key"),
        ({"slowdown_weight": 1.0}, r"env\.slowdown_weight: unknown key"),
        ({"speed_floor": 2}, r"env\.speed_floor: must be in \[0, 1\], got 2"),
        ({"speed_floor": -0.1}, r"env\.speed_floor: must be in \[0, 1\]"),
        ({"speed_floor_min_work": -1}, r"env\.speed_floor_min_work: must be >= 0"),
        ({"wait_to_fit": -0.5}, r"env\.wait_to_fit: must be >= 0, got -0\.5"),
        ({"forward_rule": "x"}, r"env\.forward_rule: must be one of must, free, got 'x'"),
        ({"pad": [16, 4]}, r"env\.pad: must be empty or three sizes >= 1 .*got \[16, 4\]"),
        ({"pad": [16, 0, 2]}, r"env\.pad: must be empty or three sizes >= 1"),
        ({"pad": 16}, r"env\.pad: expected a list, got 16"),
        (
            {"reward": {"interference": "x"}},
            r"env\.reward\.interference: 'x' belongs to a study that no longer ships",
        ),
        ({"reward": {"time_scale_s": 0}}, r"env\.reward\.time_scale_s: must be > 0"),
        ({"reward": {"slowdown_weight": 1}}, r"env\.reward\.slowdown_weight: unknown key"),
        ({"reward": 5}, r"env\.reward: expected a mapping, got 5"),
        (
            {"hints": ["first-fit", "nope"]},
            r"env\.hints: 'nope' is not a heuristic or hint variant",
        ),
        ({"hints": ["first-fit", "first-fit"]}, r"env\.hints: repeats a name"),
        ({"global_hints": ["bogus"]}, r"env\.global_hints: 'bogus' is not a heuristic"),
        ({"window_jobs": 0}, r"env\.window_jobs: must be >= 1, got 0"),
        ({"window_jobs": "ten"}, r"env\.window_jobs: expected an integer, got 'ten'"),
        ({"central": "yes"}, r"env\.central: expected true or false, got 'yes'"),
        ({"follow_only": True}, r"env\.follow_only: True belongs to a study .*studies-archive"),
        ({"follow_commits": True}, r"env\.follow_commits: True belongs to a study"),
        ({"subclusters_per_agent": 2}, r"env\.subclusters_per_agent: 2 belongs to a study"),
        (
            {"pad": [5, 4, 2]},
            r"env: padding \(5, 4, 2\) is smaller than the largest scope \(16, 4, 2\)",
        ),
    ],
)
def test_bad_env_values_raise_input_error_naming_the_key(overrides, pattern):
    with pytest.raises(InputError, match=pattern) as err:
        make_env(TINY, env=overrides)
    assert str(err.value).startswith(TINY)
    assert "\n" not in str(err.value)


def test_overrides_through_make_env_take_effect():
    env = make_env(TINY, env={"window_jobs": 5, "forward_rule": "free", "hints": ["first-fit"]})
    ec = env.env_config
    assert ec.window_jobs == 5 and ec.forward_rule == "free" and ec.hints == ("first-fit",)
    assert env.builder.forward_rule == "free" and env.builder.hints == ("first-fit",)
    assert env.get_action_space("sc0").n == 16 + 2 + 1  # one follow action
    env.reset(seed=0)
    assert len(env.sim.jobs) == 5
    # the config itself is untouched
    assert env_config(load_config(TINY)) == EnvConfig()


def test_reward_overrides_merge_into_the_configs_reward_section():
    cfg = dataclasses.replace(
        load_config(TINY), env={"reward": {"function": "operator:add", "time_scale_s": 60.0}}
    )
    env = make_env(cfg, env={"reward": {"time_scale_s": 10.0}})
    assert env.env_config.reward == RewardConfig(time_scale_s=10.0, function="operator:add")
    assert env_config(cfg).reward.time_scale_s == 60.0


def test_rllib_dict_config_carries_overrides_and_seed():
    env = make_env({"config": TINY, "env": {"window_jobs": 6}, "seed": 11})
    env.reset()
    first = env.window_start
    again = make_env({"config": TINY, "env": {"window_jobs": 6}, "seed": 11})
    again.reset()
    assert again.window_start == first
    assert env.env_config.window_jobs == 6 and len(env.sim.jobs) == 6
    # keyword overrides win over the dict's
    env = make_env({"config": TINY, "env": {"window_jobs": 6}}, env={"window_jobs": 3})
    assert env.env_config.window_jobs == 3


def test_padding_overrides_enlarge_the_spaces():
    env = make_env(TINY, env={"pad": [20, 6, 3]})
    assert env.builder.pad == (20, 6, 3)
    space = env.get_observation_space("sc0")
    assert space["group_x"].shape[0] == 20 and space["server_x"].shape[0] == 6
    assert space["rack_x"].shape[0] == 3 and env.get_action_space("sc0").n == 22
    obs, _ = env.reset(seed=0)
    (o,) = obs.values()
    assert space.contains(o)
    assert not o["group_x"][16:].any() and not o["action_mask"][16:20].any()
