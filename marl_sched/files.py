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
