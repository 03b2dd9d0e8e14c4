"""The ``env:`` config section: every bad key or value names ``env.<key>``."""

from __future__ import annotations

import dataclasses

import pytest

from envs import EnvConfig, env_config, make_env
from marl_sched.config import load_config
from marl_sched.errors import InputError
from tests.envs.helpers import TINY


def test_defaults_parse_from_an_empty_section():
    cfg = dataclasses.replace(load_config(TINY), env={})
    assert env_config(cfg) == EnvConfig()


def test_tiny_config_section_parses():
    ec = env_config(load_config(TINY))
    assert ec.window_jobs is None and ec.window_sampling == "first" and ec.home_rule == "vc"


def test_unknown_key_in_yaml_names_the_file_and_the_key(tmp_path):
    text = open(TINY, encoding="utf-8").read().replace("home_rule: vc", "home_rul: vc")
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.yaml: env\.home_rul: unknown key \(known: "):
        make_env(str(path))


@pytest.mark.parametrize(
    "overrides, pattern",
    [
        ({"bogus": 1}, r"env\.bogus: unknown key"),
        ({"home_rule": "nearest"}, r"env\.home_rule: must be one of vc, round-robin, "),
        ({"window_jobs": 0}, r"env\.window_jobs: must be >= 1, got 0"),
        ({"window_jobs": "ten"}, r"env\.window_jobs: expected an integer, got 'ten'"),
        ({"window_sampling": "shuffle"}, r"env\.window_sampling: must be one of"),
        ({"window_starts": [3, -1]}, r"env\.window_starts\[1\]: must be >= 0, got -1"),
        ({"max_sim_time": -5.0}, r"env\.max_sim_time: must be > 0, got -5.0"),
        ({"time_scale_s": 0}, r"env\.time_scale_s: must be > 0"),
        ({"slowdown_weight": -1}, r"env\.slowdown_weight: must be >= 0"),
        ({"exchange": "yes"}, r"env\.exchange: expected true or false"),
        ({"max_groups": 5}, r"env\.max_groups: must be >= 16 \(the largest subcluster's\), got 5"),
        (
            {"window_jobs": 10, "window_starts": [31]},
            r"env\.window_starts\[0\]: a slice of 10 jobs from 31 passes the end",
        ),
    ],
)
def test_bad_env_values_raise_input_error_naming_the_key(overrides, pattern):
    with pytest.raises(InputError, match=pattern) as err:
        make_env(TINY, env=overrides)
    assert str(err.value).startswith(TINY)
    assert "\n" not in str(err.value)


def test_padding_overrides_enlarge_the_spaces():
    env = make_env(TINY, env={"max_groups": 20, "max_servers": 6, "max_racks": 3})
    space = env.observation_space
    assert space["group_x"].shape[0] == 20 and space["server_x"].shape[0] == 6
    assert space["rack_x"].shape[0] == 3 and env.get_action_space("sc0").n == 22
    obs, _ = env.reset(seed=0)
    (o,) = obs.values()
    assert space.contains(o)
