"""Opening input files: regular files only, their size checked before a byte is read.

Every file read from a user or read back from a folder the tool wrote goes through
:func:`open_input` or :func:`read_input`; anything else (FIFO, device, folder, a file
over :data:`SIZE_LIMITS` for its kind) is refused with one line naming the file, e.g.
``/dev/zero: cannot read trace: not a regular file``."""

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
    """``path`` opened for binary reading, non-blocking, once the opened descriptor is a
    regular file of at most ``SIZE_LIMITS[kind]`` bytes. ``follow_links`` False refuses a
    symlink.

    Raises:
        InputError: ``<where>: cannot read <kind>: <reason>``.
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


def why_unwritable(path: str | os.PathLike) -> str | None:
    """Why the file ``path`` cannot be written (None: it can): checked before any work,
    so a results file that cannot be written stops a benchmark before it runs."""
    path = Path(path)
    if path.is_dir():
        return "is a directory"
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot create a file under {parent}"
    return None


def write_figures(path: str | os.PathLike, command: str, load_before: float, figures: dict) -> None:
    """A benchmark's ``figures`` written to ``path`` (JSON, atomically) with what they
    depend on: the ``command``, the UTC date, the machine's cores and its one-minute load
    average before the work (``load_before``) and after it (now)."""
    import datetime
    import json

    record = {
        "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "cores": os.cpu_count(),
        "load_average_1min": {
            "before": round(load_before, 2),
            "after": round(os.getloadavg()[0], 2),
        },  # fmt: skip
        **figures,
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, indent=1) + "\n")


def new_file_mode() -> int:
    """The permission bits a new file gets under the process's umask (0o644 under
    umask 022): ``tempfile.mkstemp`` creates 0o600 files whatever the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


#: errors of writing a file that say the place, not the program, is wrong (a full
#: disk, a quota, a read-only or forbidden folder): the command line reports them as
#: one line naming the path, exit status 2 (:func:`write_failure`)
WRITE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EACCES, errno.EPERM}
)


def write_failure(exc: OSError) -> InputError | None:
    """The one line of a write that failed for the place (:data:`WRITE_ERRNOS`):
    ``<path>: cannot write: No space left on device``; None for other errors."""
    if exc.errno not in WRITE_ERRNOS:
        return None
    where = exc.filename if exc.filename is not None else "output"
    return InputError(f"{os.fsdecode(where)}: cannot write: {exc.strerror or exc}")


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder + rename
    (umask mode). On failure the temporary file is removed and an ``OSError`` of
    :data:`WRITE_ERRNOS` is raised again naming ``path``."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), new_file_mode())
            fh.write(data)
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8, newlines as given) like :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"))


# ------------------------------------------------------------------ folders the tool owns

#: the most entries :func:`check_owned_tree` walks (a run folder holds a few thousand)
MAX_OWNED_ENTRIES = 200_000


def _not_plain(mode: int) -> str | None:
    """Why an entry of an owned folder is refused, or None for a file or folder."""
    if stat.S_ISLNK(mode):
        return "a symbolic link (not followed)"
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
        return None
    return "not a regular file or folder (a FIFO, socket or device)"


def _owned_refusal(where: str, path: Path, reason: str) -> InputError:
    return InputError(f"{where}: {path}: {reason}; refusing")


def check_owned_tree(
    root: str | os.PathLike, where: str, *, max_entries: int = MAX_OWNED_ENTRIES
) -> None:
    """Refuse (``InputError`` naming the entry) a folder the tool owns that holds a
    symlink, FIFO, socket or device at any depth (``lstat``, at most ``max_entries``). A
    missing ``root`` passes."""
    root = Path(root)
    try:
        info = os.stat(root)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _owned_refusal(where, root, f"unreadable ({exc.strerror or exc})") from None
    if not stat.S_ISDIR(info.st_mode):
        raise _owned_refusal(where, root, "not a folder")
    todo, seen = [root], 0
    while todo:
        folder = todo.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as exc:
            raise _owned_refusal(where, folder, f"unreadable ({exc.strerror or exc})") from None
        for entry in entries:
            seen += 1
            if seen > max_entries:
                raise _owned_refusal(where, root, f"more than {max_entries:,} entries")
            path = Path(entry.path)
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except FileNotFoundError:
                continue  # removed while walked
            except OSError as exc:
                raise _owned_refusal(where, path, f"unreadable ({exc.strerror or exc})") from None
            reason = _not_plain(mode)
            if reason is not None:
                raise _owned_refusal(where, path, reason)
            if stat.S_ISDIR(mode):
                todo.append(path)


def owned_path(root: str | os.PathLike, rel: str | os.PathLike, where: str) -> Path:
    """``root / rel`` after checking (``lstat``, now) that each existing step is a folder
    and the last a regular file or folder (``InputError`` naming the entry). ``rel`` is
    relative, without ``..``."""
    root = Path(root)
    parts = Path(rel).parts
    if Path(rel).is_absolute() or ".." in parts:
        raise _owned_refusal(where, root / rel, "not inside the folder")
    path = root
    for i, part in enumerate(parts):
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            break
        except OSError as exc:
            raise _owned_refusal(where, path, f"unreadable ({exc.strerror or exc})") from None
        reason = _not_plain(mode)
        if reason is None and i < len(parts) - 1 and not stat.S_ISDIR(mode):
            reason = "not a folder"
        if reason is not None:
            raise _owned_refusal(where, path, reason)
    return root.joinpath(*parts)
