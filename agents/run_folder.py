"""The run folder of a training run: its paths, records and checkpoints.

::

    DIR/config.yaml                     the resolved experiment config
    DIR/tb/events.out.tfevents.*        TensorBoard (:mod:`agents.records`)
    DIR/checkpoints/iter_000010/        rllib/ (for --resume), modules/<id>.pt +
                                        manifest.json (inference without Ray),
                                        config.yaml, state.json (signed,
                                        :mod:`agents.integrity`)
    DIR/checkpoints/latest              name of the newest complete checkpoint
    DIR/checkpoints/best                name of the best-validated checkpoint
    DIR/evals/iter_000010/metrics.json  greedy rollout on the evaluation window

A checkpoint is written under a temporary name, signed and renamed into place before
``latest`` points at it; stop signals wait for that. ``--resume`` checks everything
before Ray starts or anything is unpickled (:func:`resume_point`): pointers, signatures,
the config copy; deletes touch only ``iter_NNNNNN``
entries of ``checkpoints/``."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import shutil
import signal
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agents.integrity import read_regular, sign_folder, verify_folder
from marl_sched.errors import InputError
from marl_sched.files import check_owned_tree, owned_path
from marl_sched.metrics import atomic_write_text

CHECKPOINTS = "checkpoints"
LATEST = "latest"
BEST = "best"
STATE = "state.json"
CHECKPOINT_NAME = re.compile(r"iter_\d{6}")
SHA256 = re.compile(r"[0-9a-f]{64}")
#: size caps of the files a resume reads back (far above what this tool writes)
MAX_POINTER_BYTES = 64
MAX_STATE_BYTES = 16 << 20
MAX_CONFIG_BYTES = 4 << 20
#: signals that stop a run; during a checkpoint's last step they wait for its end
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def checkpoint_name(iteration: int) -> str:
    return f"iter_{iteration:06d}"


@dataclasses.dataclass
class RunPaths:
    """The paths of a run folder; each is checked when it is asked for
    (:func:`marl_sched.files.owned_path`): no step of it a link, FIFO or device."""

    root: Path

    def _owned(self, rel: str) -> Path:
        return owned_path(self.root, rel, "run folder")

    @property
    def config(self) -> Path:
        return self._owned("config.yaml")

    @property
    def tb(self) -> Path:
        return self._owned("tb")

    @property
    def checkpoints(self) -> Path:
        return self._owned(CHECKPOINTS)

    def checkpoint(self, iteration: int) -> Path:
        return self._owned(f"{CHECKPOINTS}/{checkpoint_name(iteration)}")

    def eval(self, iteration: int) -> Path:
        return self._owned(f"evals/{checkpoint_name(iteration)}")

    def check_tree(self, where: str = "--resume") -> None:
        """The whole run folder (config, ``tb/``, ``evals/``, every
        checkpoint) holds only regular files and folders: refused otherwise."""
        check_owned_tree(self.root, where)

    def latest(self) -> Path | None:
        """The checkpoint ``checkpoints/latest`` names, None without a pointer;
        ``InputError`` for a bad pointer (:func:`read_pointer`)."""
        return read_pointer(self.checkpoints / LATEST)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"{path}: unreadable ({exc.strerror or exc})") from None


def _is_real_dir(path: Path) -> bool:
    st = _lstat(path)
    return st is not None and stat.S_ISDIR(st.st_mode)


def read_pointer(pointer: Path) -> Path | None:
    """The checkpoint folder a pointer file (``latest``, ``best``) names, inside the
    pointer's own folder; None when the pointer (or its folder) does not exist."""
    folder = pointer.parent
    st = _lstat(folder)
    if st is None:
        return None
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"{folder}: not a folder (a symlink?); refusing to follow it")
    if _lstat(pointer) is None:
        return None
    data = read_regular(pointer, str(pointer), MAX_POINTER_BYTES)
    try:
        name = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise InputError(f"{pointer}: not ASCII text; expected a checkpoint name") from None
    if not CHECKPOINT_NAME.fullmatch(name):
        raise InputError(f"{pointer}: {name!r} is not a checkpoint name (iter_NNNNNN)")
    target = folder / name
    st = _lstat(target)
    if st is None:
        raise InputError(f"{pointer}: names {name}, which is missing")
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"{pointer}: names {name}, which is not a folder (a symlink?)")
    return target


# ------------------------------------------------------------------------------ reading


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_state(state: Any, path: Path) -> dict:
    """``state.json``'s fields, checked for type and shape (one ``InputError`` line)."""
    if not isinstance(state, dict):
        raise InputError(f"--resume: {path}: expected a JSON object")
    for key in ("iteration", "env_steps", "wall_s"):
        value = state.get(key)
        if not _number(value) or not value >= 0 or not math.isfinite(value):
            raise InputError(f"--resume: {path}: {key}: expected a number >= 0, got {value!r}")
    if not isinstance(state["iteration"], int):
        raise InputError(f"--resume: {path}: iteration: expected an integer")
    scores = state.get("scores", {})
    if not isinstance(scores, dict) or not all(
        isinstance(k, str) and CHECKPOINT_NAME.fullmatch(k) and (v is None or _number(v))
        for k, v in scores.items()
    ):
        raise InputError(f"--resume: {path}: scores: expected {{iter_NNNNNN: number or null}}")
    best = state.get("best")
    if best is not None and not (
        isinstance(best, list) and len(best) == 2 and isinstance(best[0], str)
        and CHECKPOINT_NAME.fullmatch(best[0]) and _number(best[1])
    ):  # fmt: skip
        raise InputError(f"--resume: {path}: best: expected [iter_NNNNNN, number] or null")
    runs = state.get("best_runs")
    if runs is not None and not (isinstance(runs, list) and all(_number(r) for r in runs)):
        raise InputError(f"--resume: {path}: best_runs: expected a list of numbers or null")
    return state


def read_state(ckpt: Path) -> dict:
    """The checkpoint's ``state.json`` fields (without the signature), checked and
    signature-verified (``InputError``)."""
    ckpt = Path(ckpt)
    path = ckpt / STATE
    if not _is_real_dir(ckpt):
        raise InputError(f"--resume: {ckpt}: not a checkpoint folder (missing or a symlink)")
    try:
        state = json.loads(read_regular(path, f"--resume: {path}", MAX_STATE_BYTES))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"--resume: {path}: unreadable ({exc.__class__.__name__})") from None
    _check_state(state, path)
    record = state.pop("integrity", None)
    verify_folder(ckpt, record, state)
    if CHECKPOINT_NAME.fullmatch(ckpt.name) and state["iteration"] != int(ckpt.name[5:]):
        raise InputError(
            f"--resume: {path}: iteration {state['iteration']} in folder {ckpt.name}; refusing"
        )
    if not _is_real_dir(ckpt / "rllib"):
        raise InputError(f"--resume: {ckpt}: no rllib/ folder (the algorithm state)")
    return state


def check_run_config(paths: RunPaths, ckpt: Path) -> None:
    """``DIR/config.yaml`` must be, byte for byte, the signed copy in ``ckpt``: a
    resumed run trains what it started (``InputError`` for an edit)."""
    signed = read_regular(ckpt / "config.yaml", f"--resume: {ckpt}/config.yaml", MAX_CONFIG_BYTES)
    where = f"--resume: {paths.config}"
    if _lstat(paths.config) is None:
        raise InputError(f"{where}: missing (the run's config)")
    if read_regular(paths.config, where, MAX_CONFIG_BYTES) != signed:
        raise InputError(
            f"{where}: differs from the copy signed in {ckpt.name}/config.yaml (edited?); "
            "--resume continues the run with its own config (start a new run to change it)"
        )


def check_config_data(ckpt: Path, data: dict) -> None:
    """Refuse a resumed run whose resolved config differs from its checkpoint's
    signed one; options and fields added since count as their old behaviour
    (``LATER_OPTIONS``, ``LATER_MODEL_FIELDS``, ``LATER_TRAIN_FIELDS``)."""
    import yaml

    from agents.config import (
        LATER_MODEL_FIELDS,
        LATER_TRAIN_FIELDS,
        RETIRED_MODEL_FIELDS,
        RETIRED_TRAIN_FIELDS,
    )
    from envs.config import LATER_OPTIONS, drop_retired_options
    from marl_sched.config import drop_retired

    where = f"--resume: {ckpt}/config.yaml"
    signed = yaml.safe_load(read_regular(ckpt / "config.yaml", where, MAX_CONFIG_BYTES))
    # a run signed before a decision option, model or train field existed ran with its
    # old behaviour, which is its value in LATER_OPTIONS / LATER_MODEL_FIELDS /
    # LATER_TRAIN_FIELDS
    for section, later in (
        ("env", LATER_OPTIONS),
        ("model", LATER_MODEL_FIELDS),
        ("train", LATER_TRAIN_FIELDS),
    ):
        if isinstance(signed, dict) and isinstance(signed.get(section), dict):
            signed[section] = {**later, **signed[section]}
    # and without the retired options and fields at their "off" values
    if isinstance(signed, dict) and "env" in signed:
        signed["env"] = drop_retired_options(signed["env"], where)
    for section, retired in (("model", RETIRED_MODEL_FIELDS), ("train", RETIRED_TRAIN_FIELDS)):
        if isinstance(signed, dict) and section in signed:
            signed[section] = drop_retired(signed[section], retired, where, section)
    if signed != data:
        raise InputError(
            f"--resume: {ckpt}: the config to resume with differs from the one the "
            "checkpoint signed (experiment.json or config.yaml edited?); refusing"
        )


def resume_point(paths: RunPaths) -> tuple[Path, dict]:
    """(the checkpoint to resume from, its verified state), after every check of the
    module docstring, starting with no link, FIFO or device anywhere in the run folder."""
    paths.check_tree()
    ckpt = paths.latest()
    if ckpt is None:
        raise InputError(f"--resume: {paths.root}: no checkpoint to resume from")
    state = read_state(ckpt)
    check_run_config(paths, ckpt)
    return ckpt, state


def write_run_config(paths: RunPaths, data: dict) -> None:
    """The run folder of a fresh run, with its resolved config."""
    import yaml

    paths.root.mkdir(parents=True, exist_ok=True)
    atomic_write_text(paths.config, yaml.safe_dump(data, sort_keys=False))


class Stopped(BaseException):
    """A stop signal arrived (``signum``); a ``BaseException``, so ``except
    Exception`` does not swallow it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_held: list[int] | None = None  # stop signals received inside deferred_signals()


def _on_stop(signum, frame) -> None:
    if _held is not None:
        _held.append(signum)
        return
    raise Stopped(signum)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """While the block runs (main thread), :data:`STOP_SIGNALS` raise
    :class:`Stopped`, except inside :func:`deferred_signals`."""
    old = {s: signal.signal(s, _on_stop) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold stop signals until the block ends, then raise :class:`Stopped`."""
    global _held
    outer = _held is not None
    if not outer:
        _held = []
    try:
        yield
    except BaseException:
        if not outer:
            _held = None
        raise
    if not outer:
        pending, _held = _held, None
        if pending:
            raise Stopped(pending[0])


def _remove_inside(path: Path, checkpoints: Path) -> None:
    """Delete ``path``, an entry of ``checkpoints`` itself (a folder, never through a
    symlink); anything else is refused with ``ValueError``."""
    if path.parent != checkpoints or path.name in ("", ".", ".."):
        raise ValueError(f"{path}: not an entry of {checkpoints}; not deleting")
    st = _lstat(path)
    if st is None:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)  # removes links inside, never follows them
    else:
        path.unlink()


def remove_checkpoint(paths: RunPaths, name: str) -> None:
    """Delete checkpoint ``name`` (``iter_NNNNNN`` only: ``ValueError`` otherwise),
    first renamed aside so that a stop mid-delete leaves no half checkpoint."""
    if not CHECKPOINT_NAME.fullmatch(name):
        raise ValueError(f"{name!r}: not a checkpoint name; not deleting")
    target, trash = paths.checkpoints / name, paths.checkpoints / f".{name}.del"
    _remove_inside(trash, paths.checkpoints)
    if _lstat(target) is None:
        return
    with deferred_signals():
        os.rename(target, trash)
    _remove_inside(trash, paths.checkpoints)


def _sweep(paths: RunPaths) -> None:
    """Remove what a killed run left: ``.iter_NNNNNN.tmp`` / ``.del`` folders."""
    with os.scandir(paths.checkpoints) as it:
        names = [e.name for e in it]
    for name in names:
        stem, dot, suffix = name[1:].rpartition(".")
        if name.startswith(".") and dot and suffix in ("tmp", "del") and (
            CHECKPOINT_NAME.fullmatch(stem)
        ):  # fmt: skip
            _remove_inside(paths.checkpoints / name, paths.checkpoints)


def write_checkpoint(
    paths: RunPaths, iteration: int, state: dict, save: Callable[[Path], None]
) -> Path:
    """``checkpoints/iter_X``: ``save(folder)`` under a temporary name, then
    ``state.json`` with the signature, the rename, ``best`` and ``latest``."""
    final = paths.checkpoint(iteration)
    tmp = final.with_name(f".{final.name}.tmp")
    paths.checkpoints.mkdir(parents=True, exist_ok=True)
    _sweep(paths)
    try:
        tmp.mkdir()
        save(tmp)
        # every entry signed with this user's key: --resume unpickles only what we wrote
        record = sign_folder(tmp, state)
        atomic_write_text(tmp / STATE, json.dumps({**state, "integrity": record}, indent=2) + "\n")
        with deferred_signals():
            _remove_inside(final, paths.checkpoints)
            os.replace(tmp, final)
            if state["best"] is not None:
                atomic_write_text(paths.checkpoints / BEST, state["best"][0] + "\n")
            atomic_write_text(paths.checkpoints / LATEST, final.name + "\n")
    except OSError as exc:
        _remove_inside(tmp, paths.checkpoints)
        if exc.filename is None:  # a writer that named no file: the checkpoint's
            raise OSError(exc.errno, exc.strerror, str(final)) from exc
        raise
    except BaseException:
        _remove_inside(tmp, paths.checkpoints)
        raise
    return final


def prune(paths: RunPaths, state: dict, keep: int) -> None:
    """Delete the checkpoints outside the ``keep`` best-validated, the newest and
    ``best`` (``keep`` = ``train.keep_checkpoints``, 0 = keep all); drop them from
    ``state["scores"]``."""
    if not keep:
        return
    scores = state["scores"]
    ranked = sorted(scores, key=lambda n: (scores[n] is None, scores[n] or 0.0, n))
    kept = set(ranked[:keep]) | {checkpoint_name(state["iteration"])}
    if state["best"] is not None:
        kept.add(state["best"][0])
    for name in sorted(set(scores) - kept):
        remove_checkpoint(paths, name)
        del scores[name]
