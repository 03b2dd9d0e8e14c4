"""A learned policy's checkpoint on disk: where it is (:func:`resolve_checkpoint`) and
its one content digest (:func:`checkpoint_digest`), which the benchmark's cells are
keyed by and ``compare``, ``evaluate`` and ``tune`` record."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from marl_sched.config import REPO_ROOT
from marl_sched.errors import InputError
from marl_sched.files import SIZE_LIMITS, check_owned_tree, open_input, read_input

#: the file naming a learned policy's checkpoint folder (beside ``modules/*.pt``)
CHECKPOINT_MANIFEST = "manifest.json"


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint folder from a checkpoint, a pointer file or a run folder (its
    ``best``, else ``latest``), checked by :func:`marl_sched.files.check_owned_tree`; no
    pointer or folder on the way may be a link (``path`` itself may)."""
    p = Path(path)
    if not p.exists() and not p.is_absolute() and (REPO_ROOT / p).exists():
        p = REPO_ROOT / p
    ckpt = _find_checkpoint(p, path)
    check_owned_tree(ckpt, "--checkpoint")
    return ckpt


def _find_checkpoint(p: Path, path: str | Path) -> Path:
    if (target := _pointer_target(p, followed=True)) is not None:
        return target
    for cand in (p, p / "checkpoints"):
        if cand is not p and cand.is_symlink():
            raise InputError(f"--checkpoint: {cand}: a symbolic link (not followed)")
        if (cand / CHECKPOINT_MANIFEST).is_file() or (cand / CHECKPOINT_MANIFEST).is_symlink():
            return cand
        for pointer in ("best", "latest"):
            if (target := _pointer_target(cand / pointer)) is not None:
                return target
    raise InputError(
        f"{path}: not a checkpoint (no {CHECKPOINT_MANIFEST} and no checkpoints/latest)"
    )


def _pointer_target(p: Path, followed: bool = False) -> Path | None:
    """The checkpoint a pointer file names, if ``p`` is one; inside a run folder, a
    pointer that is or names a link is refused."""
    if not followed and p.is_symlink():
        raise InputError(f"--checkpoint: {p}: a symbolic link (not followed)")
    if not p.is_file() or p.stat().st_size >= 256:
        return None
    name = p.read_bytes().decode("utf-8", errors="replace").strip()
    if name and "/" not in name and name not in (".", "..") and (
        (p.parent / name / CHECKPOINT_MANIFEST).is_file()
    ):  # fmt: skip
        if (p.parent / name).is_symlink():
            raise InputError(f"--checkpoint: {p}: names {name}, a symbolic link (not followed)")
        return p.parent / name
    return None


def _sha256_of(path: Path, kind: str, where: str) -> str:
    """SHA-256 of a regular, non-symlink file of at most ``SIZE_LIMITS[kind]`` bytes."""
    h = hashlib.sha256()
    left = SIZE_LIMITS[kind]
    with open_input(path, kind, where, follow_links=False) as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            left -= len(block)
            if left < 0:
                raise InputError(f"{where}: cannot read {kind}: grew past its size limit")
            h.update(block)
    return h.hexdigest()


def checkpoint_digest(path: str | Path) -> str:
    """The SHA-256 content digest of what a learned policy acts with: for a file, of its
    name, a NUL and its bytes; for a checkpoint folder (resolved as
    :func:`resolve_checkpoint`), over ``manifest.json`` and ``modules/*.pt`` (path, NUL,
    SHA-256 each). Links and special files are refused (``InputError``)."""
    root = Path(path)
    where = f"--checkpoint: {path}"
    try:
        info = os.lstat(root)
    except OSError:
        raise InputError(f"{where}: no such file or folder") from None
    if stat.S_ISREG(info.st_mode):
        h = hashlib.sha256(root.name.encode() + b"\0")
        h.update(read_input(root, "weights", where, follow_links=False))
        return h.hexdigest()
    if stat.S_ISLNK(info.st_mode):
        raise InputError(f"{where}: a symlink; refusing to follow it (name the checkpoint)")
    if not stat.S_ISDIR(info.st_mode):
        raise InputError(f"{where}: not a regular file or folder; refusing")
    folder = resolve_checkpoint(root)
    modules = folder / "modules"
    files = [(CHECKPOINT_MANIFEST, "json")]
    if os.path.lexists(modules):
        if not stat.S_ISDIR(os.lstat(modules).st_mode):
            raise InputError(f"{where}: {modules}: not a folder (a symlink?); refusing")
        with os.scandir(modules) as it:
            names = sorted(e.name for e in it if e.name.endswith(".pt"))
        files += [(f"modules/{n}", "weights") for n in names]
    h = hashlib.sha256()
    for rel, kind in files:
        h.update(rel.encode("utf-8") + b"\0")
        h.update(bytes.fromhex(_sha256_of(folder / rel, kind, f"{where}: {rel}")))
    return h.hexdigest()
