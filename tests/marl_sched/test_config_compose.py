"""Config files: safe YAML, ``defaults:`` composition, interpolation, overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from marl_sched.config import load_config
from marl_sched.errors import InputError


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_missing_config_file(tmp_path):
    with pytest.raises(InputError, match="cannot read config"):
        load_config(tmp_path / "nope.yaml")


def test_defaults_merge_mappings_key_by_key_and_replace_lists_and_values(tmp_path):
    from marl_sched.config import compose_file

    (tmp_path / "sub").mkdir()
    (tmp_path / "a.yaml").write_text(
        "workload: {load: 1.0, seed: 1}\nenv: {hints: [first-fit, locality], pad: 2}\n"
    )
    (tmp_path / "b.yaml").write_text("workload: {seed: 2}\n")
    (tmp_path / "sub" / "c.yaml").write_text(
        "defaults: [../a.yaml, ../b.yaml]\nenv: {hints: [tetris]}\nworkload: {load: 3.0}\n"
    )
    assert compose_file(tmp_path / "sub" / "c.yaml") == {
        "workload": {"load": 3.0, "seed": 2},  # b over a, then the file over both
        "env": {"hints": ["tetris"], "pad": 2},  # a list is replaced whole
    }
    (tmp_path / "d.yaml").write_text("defaults: a.yaml\n")  # one parent without a list
    assert compose_file(tmp_path / "d.yaml")["workload"] == {"load": 1.0, "seed": 1}


def test_defaults_must_be_a_list_of_files(tmp_path):
    path = _write(tmp_path, "defaults: {a: 1}\n")
    with pytest.raises(InputError, match=r"c.yaml: defaults: expected a list of config files"):
        load_config(path)


def test_a_duplicate_key_is_named_at_any_depth(tmp_path):
    path = _write(tmp_path, "env:\n  reward:\n    kind: a\n    kind: b\n")
    with pytest.raises(InputError, match=r"c.yaml:4: invalid YAML: duplicate key 'kind'"):
        load_config(path)


def test_overrides_apply_after_the_file_and_name_the_command_line(tmp_path):
    path = _write(tmp_path, "workload:\n  load: 2.0\nenv:\n")
    cfg = load_config(path, ["workload.load=0.5", "env.hints=[first-fit]", "model.hidden=8"])
    assert cfg.workload.load == 0.5 and cfg.env == {"hints": ["first-fit"]}
    assert cfg.model == {"hidden": 8} and cfg.source == str(path)
    assert load_config(path).workload.load == 2.0  # the file itself is unchanged
    with pytest.raises(InputError, match=r"^command line: workload.loadd: unknown key"):
        load_config(path, ["workload.loadd=1"])
    # the file's own problem names the file even when overrides would fix it
    bad = _write(tmp_path, "workload:\n  load: -1\n")
    with pytest.raises(InputError, match=r"c.yaml: workload.load: must be > 0"):
        load_config(bad, ["workload.load=1"])
