"""Config files: safe YAML, ``defaults:`` composition, interpolation, overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from marl_sched.config import REPO_ROOT, compose_file, load_config
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


def test_a_long_interpolation_chain_is_refused_at_once(tmp_path):
    """Every chain is followed from every key that starts it: 40,000 links would take
    hours, so a chain longer than the cap is refused, naming the key."""
    import time

    from marl_sched.config import MAX_INTERPOLATION_CHAIN, MAX_INTERPOLATION_DEPTH

    n = 40_000
    links = "".join(f" a{i}: ${{x.a{i + 1}}}\n" for i in range(n))  # under the 1 MiB cap
    path = _write(tmp_path, f"x:\n{links} a{n}: 1\n")
    t0 = time.perf_counter()
    with pytest.raises(InputError) as err:
        compose_file(path)
    assert time.perf_counter() - t0 < 30
    assert str(err.value) == (
        f"{path}: x.a0: interpolation chain longer than {MAX_INTERPOLATION_CHAIN} "
        "references (a: ${b}, b: ${c}, ...)"
    )
    short = "".join(f"    a{i}: ${{env.x.a{i + 1}}}\n" for i in range(MAX_INTERPOLATION_CHAIN))
    path = _write(tmp_path, f"env:\n  x:\n{short}    a{MAX_INTERPOLATION_CHAIN}: 1\n")
    assert compose_file(path)["env"]["x"]["a0"] == 1  # a chain within the cap resolves
    deep = ".".join(["s"] * (MAX_INTERPOLATION_DEPTH + 1))
    path = _write(tmp_path, f"env:\n  y: ${{{deep}}}\n")
    with pytest.raises(InputError, match=r"c.yaml: env.y: interpolation .* levels deep$"):
        load_config(path)


def test_a_parents_relative_paths_resolve_against_the_parents_folder(tmp_path):
    """A config outside the repo may take a shipped config as its parent: the trace the
    parent names (relative to the repo) is the one the child reads."""
    tiny = REPO_ROOT / "configs" / "tiny.yaml"
    child = tmp_path / "elsewhere" / "child.yaml"
    child.parent.mkdir()
    child.write_text(f"defaults: [{tiny}]\nworkload: {{max_jobs: 5}}\n")
    cfg = load_config(child)
    parent = load_config(tiny)
    assert cfg.resolve_path(cfg.workload.trace) == parent.resolve_path(parent.workload.trace)
    assert cfg.resolve_path(cfg.workload.trace).is_file()
    # a parent outside the repo: its paths are relative to its own folder
    (tmp_path / "base" / "traces").mkdir(parents=True)
    (tmp_path / "base" / "base.yaml").write_text(
        "workload: {trace: traces/t.csv}\ntrain: {eval_trace: '${workload.trace}'}\n"
    )
    child.write_text("defaults: [../base/base.yaml]\n")
    data = compose_file(child)
    assert data["workload"]["trace"] == str(tmp_path / "base" / "traces" / "t.csv")
    assert data["train"]["eval_trace"] == data["workload"]["trace"]  # a reference stays one
    # the file's own relative paths still resolve against its own folder
    child.write_text("defaults: [../base/base.yaml]\nworkload: {trace: mine.csv}\n")
    assert compose_file(child)["workload"]["trace"] == "mine.csv"
