"""The shipped config files: an override file (a ``defaults:`` parent plus the keys that
change) parses to exactly the experiment its full file did, every section included; and
a signed config that names a retired ``train:`` field reads as before when the field is
off, and is refused, naming the archive tag, when it is on.

``tests/data/recipes_before.json`` holds the full files as they were at the commit it
names (read once from git history, YAML loaded as is); each is parsed here the same way
as its override file, and the parsed objects of every section must be equal.
"""

from __future__ import annotations

import json

import pytest

from agents.config import interference_config, model_config, train_config
from envs.config import env_config
from marl_sched.config import REPO_ROOT, ExperimentConfig, config_from_dict, load_config

BEFORE = json.loads((REPO_ROOT / "tests/data/recipes_before.json").read_text(encoding="utf-8"))


def parsed(cfg: ExperimentConfig) -> tuple:
    """Every section as its owner parses it (defaults filled in)."""
    return (
        cfg.topology,
        cfg.workload,
        cfg.simulation,
        env_config(cfg),
        model_config(cfg),
        train_config(cfg),
        interference_config(cfg),
    )


@pytest.mark.parametrize("name", sorted(BEFORE["configs"]))
def test_an_override_file_resolves_to_its_old_full_file(name):
    old = config_from_dict(BEFORE["configs"][name], f"{name}.yaml at {BEFORE['commit'][:8]}")
    new = load_config(REPO_ROOT / "configs" / f"{name}.yaml")
    assert parsed(new) == parsed(old)


def test_the_top_level_holds_at_most_eight_configs():
    assert len(list((REPO_ROOT / "configs").glob("*.yaml"))) <= 8


def test_a_retired_train_field_at_its_off_value_reads_as_absent():
    """The shipped checkpoint's signed config still carries the retired rollout fields
    at their "off" values: it parses to the same ``TrainConfig`` as without them."""
    from agents.config import RETIRED_TRAIN_FIELDS

    base = BEFORE["configs"]["train_tiny"]
    with_off = {**base, "train": {**base.get("train", {}), **RETIRED_TRAIN_FIELDS}}
    a = train_config(config_from_dict(base, "a.yaml"))
    b = train_config(config_from_dict(with_off, "b.yaml"))
    assert a == b


@pytest.mark.parametrize(
    ("key", "value"),
    [("update", "rollout"), ("improve_futures", 4), ("improve_target", "soft"),
     ("critic", "privileged"), ("critic_lr", 1e-3), ("job_gamma", 0.5), ("advantage", "job"),
     ("prior_kl", 0.5), ("algorithm", "APPO"), ("eval_load", 1.5)],
)  # fmt: skip
def test_a_retired_train_field_turned_on_is_refused_naming_the_tag(key, value):
    from agents.config import ARCHIVE_TAG
    from marl_sched.errors import InputError

    base = BEFORE["configs"]["train_tiny"]
    data = {**base, "train": {**base.get("train", {}), key: value}}
    with pytest.raises(InputError, match=rf"old\.yaml: train\.{key}: .*{ARCHIVE_TAG}") as e:
        train_config(config_from_dict(data, "old.yaml"))
    assert "\n" not in str(e.value)
