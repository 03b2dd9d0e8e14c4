"""Resume never unpickles a run folder this tool did not write (no Ray needed)."""

from __future__ import annotations

import json
import pickle

import pytest

from agents.integrity import sign_folder, verify_folder
from marl_sched.cli import main
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.errors import InputError
from tests.agents.crafted import Payload

_Payload = Payload  # the name tests/agents/test_tune.py imports


@pytest.fixture(autouse=True)
def own_key(tmp_path, monkeypatch):
    monkeypatch.setenv("MARL_SCHED_KEY_FILE", str(tmp_path / "keys" / "resume.key"))


def _folder(tmp_path):
    f = tmp_path / "ckpt"
    (f / "rllib").mkdir(parents=True)
    (f / "rllib" / "algorithm_state.pkl").write_bytes(b"\x80\x04N.")
    (f / "manifest.json").write_text("{}")
    return f


STATE = {"iteration": 1, "env_steps": 10.0, "wall_s": 1.0, "best": None, "scores": {}}


def test_a_signed_folder_verifies_and_any_change_is_refused(tmp_path):
    f = _folder(tmp_path)
    record = sign_folder(f, STATE)
    assert record["tree"].keys() == {"rllib", "rllib/algorithm_state.pkl", "manifest.json"}
    assert record["tree"]["rllib"] == "dir"
    assert (tmp_path / "keys" / "resume.key").stat().st_mode & 0o777 == 0o600
    verify_folder(f, record, STATE)
    (f / "rllib" / "algorithm_state.pkl").write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(InputError, match="algorithm_state.pkl was changed"):
        verify_folder(f, record, STATE)
    (f / "rllib" / "algorithm_state.pkl").write_bytes(b"\x80\x04N.")
    (f / "rllib" / "extra.pkl").write_bytes(b"x")
    with pytest.raises(InputError, match="extra.pkl was added"):
        verify_folder(f, record, STATE)
    (f / "rllib" / "extra.pkl").unlink()
    (f / "manifest.json").unlink()
    with pytest.raises(InputError, match="manifest.json was missing"):
        verify_folder(f, record, STATE)
    (f / "manifest.json").write_text("{}")
    (f / "rllib" / "sub").mkdir()
    with pytest.raises(InputError, match="rllib/sub was added"):
        verify_folder(f, record, STATE)
    (f / "rllib" / "sub").rmdir()
    verify_folder(f, record, STATE)
    with pytest.raises(InputError, match="state.json was edited"):
        verify_folder(f, record, {**STATE, "iteration": 2})


@pytest.mark.parametrize("edit", ["add", "edit"])
def test_a_nested_state_json_is_signed(tmp_path, edit):
    """Only the top-level ``state.json`` (which holds the signature) is left out of the
    tree: a ``state.json`` in a sub-folder is signed like any file, so adding or editing
    one is refused. Catches the skip compared with the entry's name instead of its
    path relative to the folder (``entry.name != skip`` in ``tree``)."""
    f = _folder(tmp_path)
    if edit == "edit":
        (f / "rllib" / "state.json").write_text("{}")
    record = sign_folder(f, STATE)
    if edit == "edit":
        assert "rllib/state.json" in record["tree"]
    (f / "rllib" / "state.json").write_text('{"iteration": 9}')
    what = "changed" if edit == "edit" else "added"
    with pytest.raises(InputError, match=f"rllib/state.json was {what}"):
        verify_folder(f, record, STATE)


@pytest.mark.parametrize("depth", ["rllib", "rllib/env_runner", "rllib/env_runner/rl_module"])
def test_a_folder_replaced_by_a_symlink_to_an_identical_copy_is_refused(tmp_path, depth):
    """At any depth, a sub-folder swapped for a symlink to an exact copy of itself (so
    every file's digest still matches) is refused naming the link, and the link is never
    followed. Catches ``entry.is_dir()`` following links in ``tree`` (with or without
    its ``is_symlink`` check)."""
    import shutil

    f = _folder(tmp_path)
    (f / "rllib" / "env_runner" / "rl_module").mkdir(parents=True)
    (f / "rllib" / "env_runner" / "rl_module" / "module_state.pkl").write_bytes(b"\x80\x04N.")
    record = sign_folder(f, STATE)
    verify_folder(f, record, STATE)
    target = f / depth
    copy = tmp_path / "copy"
    shutil.copytree(target, copy)
    shutil.rmtree(target)
    target.symlink_to(copy, target_is_directory=True)
    with pytest.raises(InputError, match=f"{depth} is a symlink") as info:
        verify_folder(f, record, STATE)
    assert "\n" not in str(info.value)
    with pytest.raises(InputError, match="symlink"):
        sign_folder(f, STATE)


def test_a_signed_folder_that_is_itself_a_symlink_is_refused(tmp_path):
    """The folder handed in is not followed either (the walk starts with ``lstat``)."""
    f = _folder(tmp_path)
    record = sign_folder(f, STATE)
    link = tmp_path / "link"
    link.symlink_to(f, target_is_directory=True)
    with pytest.raises(InputError, match="is a symlink"):
        verify_folder(link, record, STATE)


def test_a_record_forged_without_the_key_is_refused(tmp_path, monkeypatch):
    f = _folder(tmp_path)
    record = sign_folder(f, STATE)
    monkeypatch.setenv("MARL_SCHED_KEY_FILE", str(tmp_path / "other.key"))
    sign_folder(_folder(tmp_path / "elsewhere"), STATE)  # creates another user's key
    with pytest.raises(InputError, match="signature does not match"):
        verify_folder(f, record, STATE)
    with pytest.raises(InputError, match="no signature"):
        verify_folder(f, None, STATE)
    with pytest.raises(InputError, match="format 1"):
        verify_folder(f, {"files": record["tree"], "hmac": record["hmac"]}, STATE)


def _crafted_run(tmp_path, state):
    run = tmp_path / "run"
    ckpt = run / "checkpoints" / "iter_000001"
    (ckpt / "rllib").mkdir(parents=True)
    # a run folder holds the resolved config (no defaults: to follow)
    resolved = load_config(REPO_ROOT / "configs" / "train_tiny.yaml").to_yaml()
    (run / "config.yaml").write_text(resolved)
    marker = tmp_path / "pwned"
    (ckpt / "rllib" / "algorithm_state.pkl").write_bytes(pickle.dumps(Payload(marker)))
    (ckpt / "state.json").write_text(state if isinstance(state, str) else json.dumps(state))
    (run / "checkpoints" / "latest").write_text("iter_000001\n")
    return run, marker


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({"iteration": 1, "env_steps": 10, "wall_s": 1.0}, "no signature"),
        (
            {
                "iteration": 1,
                "env_steps": 10,
                "wall_s": 1.0,
                "integrity": {"format": 2, "tree": {}, "hmac": "0" * 64},
            },
            "no resume key",
        ),  # fmt: skip
        ({"iteration": "two", "env_steps": 10, "wall_s": 1.0}, "iteration: expected a number"),
        ("{garbage", "unreadable"),
    ],
)
def test_resume_refuses_a_crafted_run_folder_without_unpickling_it(tmp_path, capsys, state,
                                                                   message):  # fmt: skip
    run, marker = _crafted_run(tmp_path, state)
    rc = main(["train", "--config", str(run / "config.yaml"), "--out", str(run), "--resume",
               "--iterations", "2", "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and message in err
    assert not marker.exists()


def test_a_run_folder_resolves_to_its_best_checkpoint_then_its_latest(tmp_path):
    """``evaluate RUN_DIR`` acts with the run's best checkpoint, not its last."""
    from agents.policy import MANIFEST, resolve_checkpoint

    run = tmp_path / "run"
    for it in ("iter_000001", "iter_000004"):
        (run / "checkpoints" / it).mkdir(parents=True)
        (run / "checkpoints" / it / MANIFEST).write_text("{}")
    (run / "checkpoints" / "latest").write_text("iter_000004\n")
    assert resolve_checkpoint(run) == run / "checkpoints" / "iter_000004"
    (run / "checkpoints" / "best").write_text("iter_000001\n")
    assert resolve_checkpoint(run) == run / "checkpoints" / "iter_000001"
    assert resolve_checkpoint(run / "checkpoints" / "latest") == run / "checkpoints" / "iter_000004"
