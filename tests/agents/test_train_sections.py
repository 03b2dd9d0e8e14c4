"""The ``train:`` section's four parts (agents/train_sections): each validates its own
keys, together they hold every key of :class:`agents.config.TrainConfig` once, and the
flat ``train:`` keys parse to what they parsed to before the split.

``tests/data/train_sections_expected.json`` holds ``dataclasses.asdict`` of the parsed
``model:`` and ``train:`` sections of three shipped configs, written once by the parser
as it was before ``train:`` had sections (its ``_note`` says how).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from agents.config import (
    LATER_MODEL_FIELDS,
    LATER_TRAIN_FIELDS,
    RETIRED_MODEL_FIELDS,
    RETIRED_TRAIN_FIELDS,
    TRAIN_BOUNDS,
    TrainConfig,
    model_config,
    train_config,
)
from agents.train_sections.data import DATA_BOUNDS, DataSection
from agents.train_sections.ppo import PPO_BOUNDS, PPOSection
from agents.train_sections.selection import SELECTION_BOUNDS, SelectionSection
from agents.train_sections.warm_start import WARM_START_BOUNDS, WarmStartSection
from marl_sched.config import REPO_ROOT, load_config, parse_section
from marl_sched.errors import InputError

EXPECTED = json.loads(
    (REPO_ROOT / "tests/data/train_sections_expected.json").read_text(encoding="utf-8")
)
SECTIONS = {
    PPOSection: PPO_BOUNDS,
    DataSection: DATA_BOUNDS,
    SelectionSection: SELECTION_BOUNDS,
    WarmStartSection: WARM_START_BOUNDS,
}
#: one bad value of each section's keys (alone; the other keys at their defaults)
BAD = {
    PPOSection: [
        ("algorithm", "DQN"),
        ("algorithm", "A2C"),
        ("iterations", 0),
        ("lr", -1.0),
        ("gamma", 1.5),
        ("gae_lambda", -0.1),
        ("advantage", "td"),
        ("group_size", 1, {"advantage": "group"}),
        ("advantage_scale", "window"),
        ("train_batch_size", 10**8),
        ("minibatch_size", 300, {"train_batch_size": 200}),
        ("num_epochs", 0),
        ("entropy_coeff", -0.01),
        ("clip_param", 0.0),
        ("vf_clip_param", 0.0),
        ("grad_clip", 0.0),
        ("kl_coeff", -1.0),
        ("seed", -1),
        ("num_env_runners", 1025),
        ("num_envs_per_env_runner", 0),
        ("rllib", {"env_runners": {"num_env_runners": 2}}),
    ],
    DataSection: [
        ("episode_jobs", 0),
        ("episode_warmup_jobs", -1),
        ("extra_windows", [{"trace": "t.csv", "start": -1}]),
        ("workload_share", 0.0),
        ("split_share", -1.0),
        ("eval_start", -1),
        ("eval_max_jobs", 0),
        ("eval_extra_windows", [{"trace": "t.csv", "share": 0.0}]),
        ("eval_loads", [1.0, 0.0]),
    ],
    SelectionSection: [
        ("eval_interval", -1),
        ("checkpoint_interval", 10**8),
        ("keep_checkpoints", -1),
        ("select_rule", "median"),
        ("select_tolerance", -0.1),
    ],
    WarmStartSection: [
        ("bc_teacher", "oracle"),
        ("bc_margin", 1.0),
        ("bc_base", "nobody"),
        ("bc_protect", -1.0),
        ("bc_speed", -1.0),
        ("bc_episodes", 0),
        ("bc_epochs", 0),
        ("bc_weight_power", -1.0),
        ("dagger_rounds", -1),
    ],
}
CASES = [(cls, *case) for cls, cases in BAD.items() for case in cases]


def _names(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _case(case) -> tuple[str, dict]:
    key, value, *others = case
    return key, {**(others[0] if others else {}), key: value}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0].__name__}.{c[1]}")
def test_each_section_refuses_a_bad_value_of_its_own_keys(case):
    cls, *rest = case
    key, data = _case(rest)
    message = f"f.yaml: train.{key}"
    with pytest.raises(InputError, match=f"^{message}"):
        parse_section(cls, data, "f.yaml", "train")
    with pytest.raises(InputError, match=f"^{message}"):
        parse_section(TrainConfig, data, "f.yaml", "train")


@pytest.mark.parametrize("cls", list(SECTIONS), ids=lambda c: c.__name__)
def test_each_section_knows_only_its_own_keys(cls):
    assert {case[0] for case in BAD[cls]} <= _names(cls)
    assert set(SECTIONS[cls]) <= _names(cls)
    other = next(name for c in SECTIONS if c is not cls for name in sorted(_names(c)))
    with pytest.raises(InputError, match=f"train.{other}: unknown key"):
        parse_section(cls, {other: None}, "f.yaml", "train")


def test_the_sections_hold_every_train_key_once():
    names = [f.name for cls in SECTIONS for f in dataclasses.fields(cls)]
    assert len(names) == len(set(names))
    assert set(names) == _names(TrainConfig)
    bounds = [name for b in SECTIONS.values() for name in b]
    assert len(bounds) == len(set(bounds)) == len(TRAIN_BOUNDS)
    assert TRAIN_BOUNDS == {k: v for b in SECTIONS.values() for k, v in b.items()}


def test_a_sections_check_runs_on_the_whole_train_section():
    """A retired algorithm (the algorithm's section) is refused beside a warm-start key."""
    data = {"bc_epochs": 3, "algorithm": "APPO"}
    assert parse_section(WarmStartSection, {"bc_epochs": 3}, "f.yaml", "train").bc_epochs == 3
    with pytest.raises(InputError, match=r"^f.yaml: train.algorithm: 'APPO' belongs to a "
                       r"study that no longer ships; its code is kept at git tag "
                       r"studies-archive$"):  # fmt: skip
        parse_section(TrainConfig, data, "f.yaml", "train")


@pytest.mark.parametrize("name", sorted(k for k in EXPECTED if not k.startswith("_")))
def test_the_flat_keys_parse_as_before_the_split(name):
    cfg = load_config(REPO_ROOT / name)
    for section, parse in (("model", model_config), ("train", train_config)):
        got = json.loads(json.dumps(dataclasses.asdict(parse(cfg)), sort_keys=True))
        # less the fields retired since, at their one value
        retired = {**RETIRED_MODEL_FIELDS, **RETIRED_TRAIN_FIELDS}
        expected = {k: v for k, v in EXPECTED[name][section].items()
                    if k not in retired or v != retired[k]}  # fmt: skip
        # plus the fields added since, at the value that means the old behaviour
        later = LATER_TRAIN_FIELDS if section == "train" else LATER_MODEL_FIELDS
        expected |= {k: v for k, v in later.items() if k not in expected}
        assert got == expected, section


def test_flat_attributes_read_through_the_sections():
    tc = parse_section(TrainConfig, {"lr": 1e-4, "bc_episodes": 3}, "f.yaml", "train")
    assert (tc.lr, tc.bc_episodes, tc.select_rule, tc.episode_jobs) == (1e-4, 3, "mean", 200)
    assert isinstance(tc, PPOSection | DataSection | SelectionSection | WarmStartSection)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tc.lr = 1.0  # type: ignore[misc]


def test_every_name_agents_config_exported_is_still_there():
    import agents.config as config

    names = (
        "ADVANTAGES ADVANTAGE_SCALES ALGORITHMS ARCHIVE_TAG "
        "LATER_MODEL_FIELDS LATER_TRAIN_FIELDS MAX_LAYERS MAX_SAMPLES MAX_WIDTH "
        "REFUSED_ALGORITHMS RETIRED_ALGORITHMS RETIRED_TRAIN_FIELDS SELECT_RULES TRAIN_BOUNDS "
        "InterferenceConfig ModelConfig RLlibConfig TrainConfig TrainWindow drop_retired "
        "eval_window eval_windows interference_config model_config split_windows train_config"
    ).split()
    assert not [n for n in names if not hasattr(config, n)]
    assert set(names) <= set(config.__all__)
