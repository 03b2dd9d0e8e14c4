"""Opening input files: regular files only, their size checked before a byte is read.

Every file a command reads from a user (a trace, a config, a suite, a checkpoint's
weights) or reads back from a folder it wrote (a benchmark cell, ``benchmark.json``)
goes through :func:`open_input` or :func:`read_input`: a FIFO would block the command
forever, ``/dev/zero`` would be read until memory runs out, and a folder or a huge file
would fail deep inside a parser. Each is refused with one line naming the file:

    ``/dev/zero: cannot read trace: not a regular file``
    ``big.yaml: cannot read config: 2,000,000,000 bytes, more than the 1 MiB a config may have``

The limits (:data:`SIZE_LIMITS`) are per kind of file, far above every real input
(the shipped Philly trace is 3.4 MB, the largest config a few KB, a baseline
checkpoint under 1 MB).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from marl_sched.errors import InputError

MIB = 1 << 20

#: the most bytes each kind of input file may hold
SIZE_LIMITS = {
    "trace": 1024 * MIB,
    "config": 1 * MIB,
    "suite": 1 * MIB,
    "weights": 512 * MIB,
    "model": 512 * MIB,
    "json": 64 * MIB,
    "cell": 64 * MIB,
    "ledger": 16 * MIB,  # an entry is about 1 KB
    "fitted-choice model": 64 << 10,  # ten weights and their fit's figures
}


def _size_text(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n:,} bytes"


def open_input(
    path: str | os.PathLike, kind: str, where: str | None = None, *, follow_links: bool = True
) -> BinaryIO:
    """``path`` opened for binary reading, after checking that it is a regular file of at
    most ``SIZE_LIMITS[kind]`` bytes. The file is opened without blocking (a FIFO opens
    at once and is then refused) and checked on the opened descriptor, so a path
    swapped between the check and the read cannot slip through. ``follow_links``
    False: a symlink (as the last component) is refused, never opened.

    Raises:
        InputError: ``<where>: cannot read <kind>: <reason>`` (``where`` defaults to
            the path as given).
    """
    shown = os.fspath(path) if where is None else where
    limit = SIZE_LIMITS[kind]

    def refuse(reason: str) -> InputError:
        return InputError(f"{shown}: cannot read {kind}: {reason}")

    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_links and exc.errno == errno.ELOOP:
            raise refuse("a symlink; refusing to follow it") from None
        raise refuse(exc.strerror or str(exc)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise refuse("is a folder, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise refuse("not a regular file")
        if info.st_size > limit:
            raise refuse(
                f"{info.st_size:,} bytes, more than the {_size_text(limit)} a {kind} file may have"
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_input(
    path: str | os.PathLike, kind: str, where: str | None = None, *, follow_links: bool = True
) -> bytes:
    """The bytes of a regular file checked by :func:`open_input` (at most the limit,
    even if the file grows while it is read)."""
    shown = os.fspath(path) if where is None else where
    with open_input(path, kind, where, follow_links=follow_links) as fh:
        try:
            data = fh.read(SIZE_LIMITS[kind] + 1)
        except OSError as exc:
            raise InputError(f"{shown}: cannot read {kind}: {exc.strerror or exc}") from None
    if len(data) > SIZE_LIMITS[kind]:
        raise InputError(
            f"{shown}: cannot read {kind}: grew past the {_size_text(SIZE_LIMITS[kind])} "
            f"a {kind} file may have"
        )
    return data


def read_input_text(
    path: str | os.PathLike, kind: str, where: str | None = None, *, follow_links: bool = True
) -> str:
    """:func:`read_input` decoded as UTF-8; a bad byte is an ``InputError`` naming the
    file and the line."""
    shown = os.fspath(path) if where is None else where
    data = read_input(path, kind, where, follow_links=follow_links)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{shown}:{line}: cannot read {kind}: not valid UTF-8 "
            f"(byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def check_input(path: str | os.PathLike, kind: str, where: str | None = None) -> Path:
    """Check (and close at once) what :func:`open_input` checks; returns ``Path(path)``,
    for loaders that must open the file themselves (``torch.load``, ``np.load``)."""
    open_input(path, kind, where).close()
    return Path(path)


# ------------------------------------------------------------------ checkpoints

#: the file naming a learned policy's checkpoint folder (beside ``modules/*.pt``)
CHECKPOINT_MANIFEST = "manifest.json"


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint folder from a checkpoint, a pointer file (``checkpoints/latest``,
    ``checkpoints/best``) or a run folder: its ``best`` checkpoint (by validation),
    else its ``latest`` (a run that never validated)."""
    from marl_sched.config import REPO_ROOT

    p = Path(path)
    if not p.exists() and not p.is_absolute() and (REPO_ROOT / p).exists():
        p = REPO_ROOT / p
    if (target := _pointer_target(p)) is not None:
        return target
    for cand in (p, p / "checkpoints"):
        if (cand / CHECKPOINT_MANIFEST).is_file():
            return cand
        for pointer in ("best", "latest"):
            if (target := _pointer_target(cand / pointer)) is not None:
                return target
    raise InputError(
        f"{path}: not a checkpoint (no {CHECKPOINT_MANIFEST} and no checkpoints/latest)"
    )


def _pointer_target(p: Path) -> Path | None:
    """The checkpoint a pointer file (a sibling folder's name) names, if ``p`` is one."""
    if not p.is_file() or p.stat().st_size >= 256:
        return None
    name = p.read_bytes().decode("utf-8", errors="replace").strip()
    if name and "/" not in name and (p.parent / name / CHECKPOINT_MANIFEST).is_file():
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
    """The content digest (64 hex) of a learned policy's checkpoint: what it acts with,
    nothing beside it. A checkpoint file (``mlfs_rl.pt``): SHA-256 of its name, a NUL
    and its bytes. A checkpoint folder (or a run folder or pointer, resolved as
    :func:`resolve_checkpoint` does): SHA-256 over ``manifest.json`` and
    ``modules/*.pt``, each as its relative path, a NUL and the SHA-256 of its bytes,
    in that order — a README, config or warm start beside them does not count. Only
    regular files under their size limit are read and no link is followed (a link
    or a special file among them is refused, ``InputError`` naming it, unopened)."""
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


# ------------------------------------------------------------------ atomic writes


def new_file_mode() -> int:
    """The permission bits a new file gets under the process's umask (0o644 under
    umask 022): ``tempfile.mkstemp`` creates 0o600 files whatever the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder + rename;
    the file gets the umask's mode (:func:`new_file_mode`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), new_file_mode())
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8, newlines as given) like :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"))
