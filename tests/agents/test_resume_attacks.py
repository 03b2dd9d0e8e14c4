"""A crafted or edited run folder can neither run code nor touch anything outside it
on ``train --resume``. No Ray: the run folder is written by the trainer's
own checkpoint code with a stand-in algorithm, and Ray's start is replaced by a
sentinel, so every attack must be refused before Ray would start (and long before
RLlib unpickles anything)."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path

import pytest
import torch
import yaml

from agents.config import model_config, train_config
from agents.records import resolved_config
from agents.training import Trainer
from marl_sched.cli import main
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.metrics import atomic_write_text
from tests.agents.crafted import Payload, ReachedRay

TINY = REPO_ROOT / "configs" / "train_tiny.yaml"


class _FakeAlgo:
    """Writes what ``Algorithm.save_to_path`` writes, in miniature (harmless pickles)."""

    def save_to_path(self, path: str) -> None:
        root = Path(path)
        (root / "env_runner").mkdir(parents=True)
        (root / "algorithm_state.pkl").write_bytes(pickle.dumps({"counters": 1}))
        (root / "env_runner" / "state.pkl").write_bytes(pickle.dumps({}))
        (root / "rllib_checkpoint.json").write_text("{}")


pytestmark = pytest.mark.usefixtures("own_key")


def _trainer(run: Path, **train) -> Trainer:
    cfg = load_config(TINY, [f"train.{k}={v}" for k, v in train.items()])
    return Trainer(cfg, model_config(cfg), train_config(cfg), run)


def _checkpoint(trainer: Trainer, it: int, score: float | None) -> Path:
    """Checkpoint ``it`` written by the trainer's own code (fake algorithm state)."""
    name = f"iter_{it:06d}"
    trainer.state.update(iteration=it, env_steps=100.0 * it, wall_s=float(it))
    trainer.state["scores"][name] = score
    if score is not None and (trainer.state["best"] is None or score < trainer.state["best"][1]):
        trainer.state["best"], trainer.state["best_runs"] = [name, score], [score]
    config = resolved_config(trainer.cfg, trainer.mc, trainer.tc)
    manifest = {"format": "marl-sched-agents", "config": config}
    weights = {"shared": {"gnn.w": torch.zeros(2)}}
    return trainer._checkpoint(_FakeAlgo(), it, weights, manifest)


def _signed_run(tmp_path: Path, iterations: int = 2) -> Path:
    """A run folder as ``train`` leaves it after ``iterations`` iterations."""
    run = tmp_path / "run"
    trainer = _trainer(run)
    trainer.state = {"iteration": 0, "env_steps": 0.0, "wall_s": 0.0, "best": None,
                     "best_runs": None, "scores": {}}  # fmt: skip
    run.mkdir()
    data = resolved_config(trainer.cfg, trainer.mc, trainer.tc)
    atomic_write_text(run / "config.yaml", yaml.safe_dump(data, sort_keys=False))
    for it in range(1, iterations + 1):
        _checkpoint(trainer, it, 100.0 - it)
    return run


def _snapshot(root: Path, skip: Path) -> dict[str, tuple]:
    """Every entry under ``root`` but ``skip``: type, size, mtime and content digest."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        if here == skip or skip in here.parents:
            continue
        for name in dirnames + filenames:
            p = here / name
            if p == skip:
                continue
            st = p.lstat()
            digest = ""
            if p.is_file() and not p.is_symlink():
                digest = hashlib.sha256(p.read_bytes()).hexdigest()
            out[str(p.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return out


def _resume(run: Path, capsys, *extra: str):
    """``train --resume`` on ``run``: (exit status or "ray", stderr)."""
    args = ["train", "--config", str(run / "config.yaml"), "--out", str(run), "--resume",
            "--iterations", "3", "--quiet", *extra]  # fmt: skip
    try:
        rc = main(args)
    except ReachedRay:
        rc = "ray"
    return rc, capsys.readouterr().err


def _assert_refused(rc, err, ray_calls, marker=None, before=None, tmp_path=None, run=None):
    assert rc == 2, (rc, err)
    assert err.count("\n") == 1 and err.startswith("marl-sched: error: "), err
    assert "Traceback" not in err
    assert not ray_calls  # refused before Ray (and so before anything is unpickled)
    if marker is not None:
        assert not marker.exists()
    if before is not None:
        assert _snapshot(tmp_path, run) == before


def test_an_untouched_run_folder_reaches_ray(tmp_path, capsys, ray_calls):
    """The baseline the attacks below start from: a clean run folder passes every check."""
    run = _signed_run(tmp_path)
    rc, err = _resume(run, capsys)
    assert rc == "ray" and err == ""
    assert len(ray_calls) == 1


def _evil_folder(tmp_path: Path) -> tuple[Path, Path]:
    """A folder of crafted pickles outside the run folder, and the marker they write."""
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil"
    evil.mkdir()
    for name in ("class_and_ctor_args.pkl", "module_state.pkl", "state.pkl"):
        (evil / name).write_bytes(pickle.dumps(Payload(marker)))
    (evil / "metadata.json").write_text("{}")
    return evil, marker


def test_a_symlinked_folder_of_crafted_pickles_is_refused(tmp_path, capsys, ray_calls):
    run = _signed_run(tmp_path)
    evil, marker = _evil_folder(tmp_path)
    link = run / "checkpoints" / "iter_000002" / "rllib" / "env_runner" / "rl_module"
    link.symlink_to(evil, target_is_directory=True)
    before = _snapshot(tmp_path, run)
    rc, err = _resume(run, capsys)
    _assert_refused(rc, err, ray_calls, marker, before, tmp_path, run)
    # refused as a link, by name, whichever check sees it first (the owned-tree walk or
    # the signature's)
    assert "rl_module" in err and ("is a symlink" in err or "a symbolic link" in err), err


def test_a_symlinked_file_and_a_fifo_are_refused(tmp_path, capsys, ray_calls):
    run = _signed_run(tmp_path)
    evil, marker = _evil_folder(tmp_path)
    ckpt = run / "checkpoints" / "iter_000002" / "rllib"
    (ckpt / "algorithm_state.pkl").unlink()
    (ckpt / "algorithm_state.pkl").symlink_to(evil / "state.pkl")
    rc, err = _resume(run, capsys)
    _assert_refused(rc, err, ray_calls, marker)
    (ckpt / "algorithm_state.pkl").unlink()
    (ckpt / "algorithm_state.pkl").write_bytes(pickle.dumps({"counters": 1}))
    os.mkfifo(ckpt / "env_runner" / "pipe")
    rc, err = _resume(run, capsys)  # a FIFO is never opened (it would block)
    _assert_refused(rc, err, ray_calls, marker)
    assert "pipe" in err


def test_an_added_empty_folder_is_refused(tmp_path, capsys, ray_calls):
    """Folders are signed too: RLlib restores any optional sub-folder that exists."""
    run = _signed_run(tmp_path)
    (run / "checkpoints" / "iter_000002" / "rllib" / "env_runner" / "rl_module").mkdir()
    rc, err = _resume(run, capsys)
    _assert_refused(rc, err, ray_calls)
    assert "rl_module" in err


def _edit_state(run: Path, edit) -> None:
    path = run / "checkpoints" / "iter_000002" / "state.json"
    state = json.loads(path.read_text())
    edit(state)
    path.write_text(json.dumps(state))


@pytest.mark.parametrize("name", ["/ABS", "../../victim", "../iter_000001", "iter_1"])
def test_an_edited_state_naming_checkpoints_outside_is_refused(tmp_path, capsys, ray_calls,
                                                               name):  # fmt: skip
    run = _signed_run(tmp_path)
    victim = tmp_path / "victim"
    (victim / "keep.txt").parent.mkdir()
    (victim / "keep.txt").write_text("precious")
    name = str(victim) if name == "/ABS" else name

    def edit(state):
        state["scores"][name] = 1000.0

    _edit_state(run, edit)
    before = _snapshot(tmp_path, run)
    rc, err = _resume(run, capsys)
    _assert_refused(rc, err, ray_calls, before=before, tmp_path=tmp_path, run=run)
    assert (victim / "keep.txt").read_text() == "precious"


def test_an_edited_iteration_in_a_signed_state_is_refused(tmp_path, capsys, ray_calls):
    run = _signed_run(tmp_path)
    _edit_state(run, lambda state: state.update(iteration=1))
    rc, err = _resume(run, capsys)
    _assert_refused(rc, err, ray_calls)
    assert "state.json" in err


@pytest.mark.parametrize("drop", ["listing", "hmac"])
def test_a_signature_block_missing_its_field_is_refused(tmp_path, capsys, ray_calls, drop):
    run = _signed_run(tmp_path)

    def edit(state):
        record = state["integrity"]
        if drop == "listing":  # the entries it signs ("tree"; "files" in the older format)
            del record["tree" if "tree" in record else "files"]
        else:
            del record[drop]

    _edit_state(run, edit)
    rc, err = _resume(run, capsys)
    _assert_refused(rc, err, ray_calls)


def test_a_forged_signature_without_a_key_file_loads_nothing(tmp_path, capsys, ray_calls,
                                                              monkeypatch):  # fmt: skip
    """Correct digests, an HMAC made up, and no key on this machine: refused on what
    happens (exit 2, nothing loaded, Ray never started), not on a message's wording."""
    run = _signed_run(tmp_path)
    evil, marker = _evil_folder(tmp_path)
    rllib = run / "checkpoints" / "iter_000002" / "rllib"
    (rllib / "algorithm_state.pkl").write_bytes(pickle.dumps(Payload(marker)))
    loaded = []
    monkeypatch.setattr(pickle, "load", lambda *a, **k: loaded.append(a))
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: loaded.append(a))
    # re-sign the edited folder with a key, then take the key away
    from agents import integrity

    path = run / "checkpoints" / "iter_000002" / "state.json"
    state = json.loads(path.read_text())
    state.pop("integrity")
    record = _sign_like_the_tool(integrity, rllib.parent, state)
    record["hmac"] = "0" * 64
    path.write_text(json.dumps({**state, "integrity": record}))
    (tmp_path / "keys" / "resume.key").unlink()
    rc, err = _resume(run, capsys)
    _assert_refused(rc, err, ray_calls, marker)
    assert not loaded
    assert not (tmp_path / "keys" / "resume.key").exists()  # resume never makes a key


def _sign_like_the_tool(integrity, folder: Path, state: dict) -> dict:
    """The signature block the tool would write for ``folder`` with ``state``."""
    try:
        return integrity.sign_folder(folder, state)
    except TypeError:  # the signature of the version before state.json was signed
        return integrity.sign_folder(folder)


@pytest.mark.parametrize(
    "pointer",
    ["../../outside/iter_000002", "/ABS", "iter_000002/../iter_000001", "best", "iter_2",
     b"\xff\xfe\x00iter", b"iter_000002" + b" " * (1 << 20), "LINK"],
)  # fmt: skip
def test_a_latest_pointer_out_of_the_run_or_malformed_is_refused(tmp_path, capsys, ray_calls,
                                                                 pointer):  # fmt: skip
    run = _signed_run(tmp_path)
    # a checkpoint this tool signed, copied outside the run folder
    outside = tmp_path / "outside" / "iter_000002"
    import shutil

    shutil.copytree(run / "checkpoints" / "iter_000002", outside, symlinks=True)
    latest = run / "checkpoints" / "latest"
    if pointer == "/ABS":
        latest.write_text(str(outside) + "\n")
    elif pointer == "LINK":
        (tmp_path / "pointer").write_text("iter_000002\n")
        latest.unlink()
        latest.symlink_to(tmp_path / "pointer")
    elif isinstance(pointer, bytes):
        latest.write_bytes(pointer)
    else:
        latest.write_text(pointer + "\n")
    before = _snapshot(tmp_path, run)
    rc, err = _resume(run, capsys)
    _assert_refused(rc, err, ray_calls, before=before, tmp_path=tmp_path, run=run)
    assert "latest" in err and len(err) < 400


def test_latest_naming_an_older_checkpoint_than_its_state_says_is_refused(tmp_path, capsys,
                                                                          ray_calls):  # fmt: skip
    """A signed checkpoint renamed: its state's iteration no longer matches its name."""
    run = _signed_run(tmp_path)
    ckpts = run / "checkpoints"
    os.rename(ckpts / "iter_000002", ckpts / "iter_000005")
    (ckpts / "latest").write_text("iter_000005\n")
    rc, err = _resume(run, capsys)
    _assert_refused(rc, err, ray_calls)


def test_an_edited_run_config_is_refused(tmp_path, capsys, ray_calls):
    run = _signed_run(tmp_path)
    data = yaml.safe_load((run / "config.yaml").read_text())
    data["train"]["lr"] = 0.5
    (run / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    rc, err = _resume(run, capsys)
    _assert_refused(rc, err, ray_calls)
    assert "config.yaml" in err


def test_a_run_config_that_is_a_symlink_is_refused(tmp_path, capsys, ray_calls):
    run = _signed_run(tmp_path)
    (tmp_path / "elsewhere.yaml").write_text((run / "config.yaml").read_text())
    (run / "config.yaml").unlink()
    (run / "config.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    rc, err = _resume(run, capsys)
    _assert_refused(rc, err, ray_calls)
    assert "config.yaml" in err


def test_overrides_on_resume_are_refused(tmp_path, capsys, ray_calls):
    run = _signed_run(tmp_path)
    rc, err = _resume(run, capsys, "train.lr=0.5")
    _assert_refused(rc, err, ray_calls)
    assert "train.lr" in err


def test_a_key_path_that_is_a_folder_is_refused_before_any_output(tmp_path, capsys, ray_calls,
                                                                  monkeypatch):  # fmt: skip
    """A fresh run would sign its first checkpoint only after training; the key is
    checked before Ray starts, so no run folder is left that can neither restart nor
    resume."""
    run = _signed_run(tmp_path)  # signed with the fixture's key
    key = tmp_path / "keydir"
    key.mkdir()
    monkeypatch.setenv("MARL_SCHED_KEY_FILE", str(key))
    out = tmp_path / "fresh"
    try:
        rc = main(["train", "--config", str(TINY), "--out", str(out), "--quiet"])
    except ReachedRay:
        rc = "ray"
    err = capsys.readouterr().err
    _assert_refused(rc, err, ray_calls)
    assert str(key) in err
    assert not out.exists()
    rc, err = _resume(run, capsys)
    _assert_refused(rc, err, ray_calls)
    assert str(key) in err


def test_pruning_never_deletes_a_name_that_is_not_a_checkpoint(tmp_path):
    """Defence in depth under the signature: names reaching a delete are checked."""
    run = _signed_run(tmp_path, iterations=3)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious")
    trainer = _trainer(run, keep_checkpoints=1)
    trainer.state = json.loads((run / "checkpoints" / "iter_000003" / "state.json").read_text())
    for name in (str(victim), "../../victim", "../iter_000001"):
        trainer.state["scores"][name] = 1000.0
    with pytest.raises(Exception):  # noqa: B017  (refused; which error is the code's)
        trainer._prune()
    assert (victim / "keep.txt").read_text() == "precious"
    assert (run / "checkpoints" / "iter_000001").is_dir()


def test_a_run_signed_before_a_decision_option_existed_resumes_as_its_old_behaviour(tmp_path):
    """check_config_data fills the options added since (envs.config.LATER_OPTIONS) with
    the behaviour the run had; the same option set otherwise is still refused."""
    from agents.config import LATER_MODEL_FIELDS, LATER_TRAIN_FIELDS
    from agents.run_folder import check_config_data
    from envs.config import LATER_OPTIONS
    from marl_sched.errors import InputError

    now = {
        "env": {"hints": ["first-fit"], **LATER_OPTIONS},
        "model": {"hidden": 64, **LATER_MODEL_FIELDS},
        "train": {"seed": 0},
    }
    now["train"].update(LATER_TRAIN_FIELDS)
    old = {"env": {"hints": ["first-fit"]}, "model": {"hidden": 64}, "train": {"seed": 0}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(old))
    check_config_data(tmp_path, now)  # no error: the run followed task by task
    changed = {**now, "env": {**now["env"], "ps_rule": True}}
    with pytest.raises(InputError, match="differs from the one the checkpoint signed"):
        check_config_data(tmp_path, changed)
    # train fields added since: the old run had no split share (0)
    assert LATER_TRAIN_FIELDS == {
        "split_share": 0.0, "advantage_scale": "batch", "bc_move": "load-control"
    }  # fmt: skip
    assert LATER_OPTIONS == {
        "model_speed": False, "migration_offer": "slowdown", "migration_where": "agent"
    }  # fmt: skip
    with pytest.raises(InputError, match="differs from the one the checkpoint signed"):
        check_config_data(tmp_path, {**now, "env": {**now["env"], "migration_where": "rule"}})
    for key, value in (
        ("split_share", 1.0),
        ("advantage_scale", "window"),
        ("bc_move", "upgrade"),
    ):
        with pytest.raises(InputError, match="differs from the one the checkpoint signed"):
            check_config_data(tmp_path, {**now, "train": {**now["train"], key: value}})
    # a run signed with the retired rollout fields at their "off" values resumes as
    # before; one signed with them on is refused naming the archive tag
    from agents.config import ARCHIVE_TAG, RETIRED_TRAIN_FIELDS

    retired = {**old, "train": {**old["train"], **RETIRED_TRAIN_FIELDS}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(retired))
    check_config_data(tmp_path, now)
    (tmp_path / "config.yaml").write_text(
        yaml.safe_dump({**retired, "train": {**retired["train"], "update": "rollout"}})
    )
    with pytest.raises(InputError, match=ARCHIVE_TAG):
        check_config_data(tmp_path, now)
    # likewise the retired decision options
    from envs.config import RETIRED_OPTIONS

    retired = {**old, "env": {**old["env"], **RETIRED_OPTIONS}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(retired))
    check_config_data(tmp_path, now)
    (tmp_path / "config.yaml").write_text(
        yaml.safe_dump({**retired, "env": {**retired["env"], "follow_only": True}})
    )
    with pytest.raises(InputError, match=r"env\.follow_only: True belongs to a study"):
        check_config_data(tmp_path, now)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(old))
    # the retired raw head: a run signed with it off resumes, one with it on is refused
    assert LATER_MODEL_FIELDS == {}
    for value in (False, True):
        signed = {**old, "model": {**old["model"], "raw_head": value}}
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(signed))
        if value:
            with pytest.raises(InputError, match=r"model\.raw_head: True belongs to a study"):
                check_config_data(tmp_path, now)
        else:
            check_config_data(tmp_path, now)
