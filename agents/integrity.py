"""Resume never runs foreign code: run-folder checkpoints are signed by this tool.

RLlib restores its state with pickle, so each checkpoint's ``state.json`` carries an
HMAC-SHA256 (keyed by this user's secret, :func:`key_path`: 32 random bytes, mode 0600)
over the whole tree (names and SHA-256 of every file) and the rest of ``state.json``.
:func:`verify_folder` checks it before anything is unpickled, walking without following
links: a symlink, special file, added, removed or changed entry, or another key is
refused with one line. Files are opened ``O_NOFOLLOW | O_NONBLOCK`` and ``fstat``-checked.
A writer racing the resume is out of scope."""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
from pathlib import Path

from marl_sched.errors import InputError

KEY_ENV = "MARL_SCHED_KEY_FILE"
SIGNED = "state.json"  # holds the signature; its other fields are signed in canonical form
FORMAT = 2  # 1 (an older format) signed file contents only: refused, it cannot be trusted
KEY_BYTES = 32
MAX_KEY_BYTES = 4096
#: a checkpoint tree larger than this is not one this tool wrote
MAX_ENTRIES = 100_000
_HEX64 = re.compile(r"[0-9a-f]{64}")
_DIR = "dir"


def key_path() -> Path:
    """``$MARL_SCHED_KEY_FILE``, else ``~/.config/marl-sched/resume.key``."""
    if os.environ.get(KEY_ENV):
        return Path(os.environ[KEY_ENV])
    return Path.home() / ".config" / "marl-sched" / "resume.key"


def check_key(create: bool) -> bytes | None:
    """This user's key (created when absent and ``create``; else None); ``InputError``
    naming the path when it is not a readable regular file of the right size."""
    path = key_path()
    where = f"{path} (the resume key; {KEY_ENV} to move it)"
    try:
        st = os.stat(path)  # the user's own config: a link to it is theirs to make
    except FileNotFoundError:
        if not create:
            return None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(KEY_BYTES))
        except OSError as exc:
            raise InputError(f"{where}: cannot create it ({exc.strerror or exc})") from None
        return check_key(create=False)
    except OSError as exc:
        raise InputError(f"{where}: unreadable ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{where}: not a regular file")
    if not 16 <= st.st_size <= MAX_KEY_BYTES:
        raise InputError(f"{where}: {st.st_size} bytes; expected {KEY_BYTES}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            return fh.read(MAX_KEY_BYTES)
    except OSError as exc:
        raise InputError(f"{where}: unreadable ({exc.strerror or exc})") from None


def open_regular(path: Path, where: str) -> int:
    """A read-only descriptor of ``path`` if it is a regular file and not a symlink
    (``InputError`` naming ``where`` otherwise); never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW on a symlink
            raise InputError(f"{where}: a symlink; refusing to follow it") from None
        raise InputError(f"{where}: unreadable ({exc.strerror or exc})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{where}: not a regular file; refusing")
    return fd


def read_regular(path: Path, where: str, limit: int) -> bytes:
    """The bytes of a regular, non-symlink file of at most ``limit`` bytes."""
    fd = open_regular(path, where)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{where}: larger than {limit} bytes; not written by this tool")
    return data


def tree(folder: Path, where: str, skip: str | None = SIGNED) -> dict[str, str]:
    """``{relative path: "dir" | sha256}`` of every entry under ``folder`` but the
    top-level ``skip``; ``InputError`` on a symlink or special file."""
    out: dict[str, str] = {}

    def walk(here: Path, prefix: str) -> None:
        with os.scandir(here) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            rel = prefix + entry.name
            if len(out) >= MAX_ENTRIES:
                raise InputError(f"{where}: more than {MAX_ENTRIES} entries; refusing")
            if entry.is_symlink():
                raise InputError(f"{where}: {rel} is a symlink; refusing to follow it")
            if entry.is_dir(follow_symlinks=False):
                out[rel] = _DIR
                walk(Path(entry.path), rel + "/")
            elif entry.is_file(follow_symlinks=False):
                if rel != skip:
                    out[rel] = _sha256(Path(entry.path), f"{where}: {rel}")
            else:
                raise InputError(f"{where}: {rel} is not a regular file or folder; refusing")

    try:
        top = os.lstat(folder)
    except OSError as exc:
        raise InputError(f"{where}: unreadable ({exc.strerror or exc})") from None
    if stat.S_ISLNK(top.st_mode):
        raise InputError(f"{where}: {folder} is a symlink; refusing to follow it")
    if not stat.S_ISDIR(top.st_mode):
        raise InputError(f"{where}: not a folder; refusing")
    walk(Path(folder), "")
    return out


def _sha256(path: Path, where: str) -> str:
    h = hashlib.sha256()
    with os.fdopen(open_regular(path, where), "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def canonical(state: dict) -> bytes:
    """The signed form of ``state.json``'s fields (the signature block excluded)."""
    return json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _mac(key: bytes, files: dict[str, str], state: dict) -> str:
    payload = json.dumps({"format": FORMAT, "tree": files}, sort_keys=True).encode("utf-8")
    return hmac.new(key, payload + b"\n" + canonical(state), hashlib.sha256).hexdigest()


def sign_folder(folder: Path, state: dict) -> dict:
    """The signature block of ``folder`` whose ``state.json`` will hold ``state``
    (plus this block under ``integrity``): ``{"format", "tree", "hmac"}``."""
    files = tree(Path(folder), str(folder))
    key = check_key(create=True)
    assert key is not None
    return {"format": FORMAT, "tree": files, "hmac": _mac(key, files, state)}


def verify_folder(folder: Path, record: object, state: dict) -> None:
    """Refuse (``InputError``) unless ``record`` is this user's signature over exactly
    the tree under ``folder`` and ``state``."""
    folder = Path(folder)
    where = f"--resume: {folder}"
    if not isinstance(record, dict):
        raise InputError(f"{where}: {SIGNED} has no signature (not written by this tool)")
    if record.get("format") != FORMAT:
        raise InputError(
            f"{where}: {SIGNED}: signature format {record.get('format', 1)!r}, this version "
            f"signs format {FORMAT} (older run folders cannot be resumed: retrain)"
        )
    files, mac = record.get("tree"), record.get("hmac")
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in files.items()
    ):
        raise InputError(f"{where}: {SIGNED}: signature block has no valid 'tree'")
    if not isinstance(mac, str) or not _HEX64.fullmatch(mac):
        raise InputError(f"{where}: {SIGNED}: signature block has no valid 'hmac'")
    key = check_key(create=False)
    if key is None:
        raise InputError(
            f"{where}: no resume key at {key_path()} (signed on another machine or by "
            "another user?); refusing to unpickle a run folder this tool did not write"
        )
    if not hmac.compare_digest(_mac(key, files, state), mac):
        raise InputError(
            f"{where}: signature does not match this user's key ({key_path()}), or "
            f"{SIGNED} was edited; refusing to unpickle a run folder this tool did not write"
        )
    compare_tree(where, tree(folder, where), files)


def compare_tree(where: str, actual: dict[str, str], files: dict[str, str]) -> None:
    """Refuse (``InputError``, one line naming the first entry) unless the tree read
    (:func:`tree`) is the signed one: nothing added, missing or changed."""
    for name in sorted(set(actual) | set(files)):
        if actual.get(name) != files.get(name):
            what = "added" if name not in files else (
                "missing" if name not in actual else "changed")  # fmt: skip
            raise InputError(f"{where}: {name} was {what} since this tool wrote it; refusing")
