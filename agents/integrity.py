"""Resume never runs foreign code: run-folder checkpoints are signed by this tool.

``marl-sched train --resume`` restores RLlib's algorithm state, which RLlib stores with
pickle — loading a crafted file executes code. So every checkpoint folder a run writes
carries, in its ``state.json``, the SHA-256 of every file under it and an HMAC-SHA256
of that list keyed by a secret of this user (:func:`key_path`: a 32-byte random key
created on first use with mode 0600, outside any run folder). Before anything is
unpickled, :func:`verify_folder` recomputes every digest and the HMAC; a file added,
removed or changed, or a folder signed with another key (someone else's run, a
hand-made folder), is refused with one line. A run folder copied from another machine
cannot be resumed (retrain, or evaluate its ``modules/*.pt``, which load without
pickle).

Python's ``hmac``/``hashlib`` are the kept libraries here; there is nothing to add.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from marl_sched.errors import InputError

KEY_ENV = "MARL_SCHED_KEY_FILE"
SIGNED = "state.json"  # the file that holds the signature is not itself signed


def key_path() -> Path:
    """``$MARL_SCHED_KEY_FILE``, else ``~/.config/marl-sched/resume.key``."""
    if os.environ.get(KEY_ENV):
        return Path(os.environ[KEY_ENV])
    return Path.home() / ".config" / "marl-sched" / "resume.key"


def _key(create: bool) -> bytes | None:
    path = key_path()
    if path.is_file():
        return path.read_bytes()
    if not create:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(secrets.token_bytes(32))
    return path.read_bytes()


def _digests(folder: Path) -> dict[str, str]:
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.relative_to(folder).as_posix() != SIGNED:
            h = hashlib.sha256()
            with path.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            out[path.relative_to(folder).as_posix()] = h.hexdigest()
    return out


def _mac(key: bytes, files: dict[str, str]) -> str:
    payload = json.dumps(files, sort_keys=True).encode("utf-8")
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def sign_folder(folder: Path) -> dict:
    """``{"files": {path: sha256}, "hmac": hex}`` of every file under ``folder``."""
    files = _digests(Path(folder))
    return {"files": files, "hmac": _mac(_key(create=True), files)}


def verify_folder(folder: Path, record: object) -> None:
    """Refuse (``InputError``) unless ``folder`` holds exactly the files ``record``
    lists, with those digests, signed with this user's key."""
    folder = Path(folder)
    where = f"--resume: {folder}"
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        raise InputError(f"{where}: {SIGNED} has no signature (not written by this tool)")
    key = _key(create=False)
    if key is None or not hmac.compare_digest(_mac(key, record["files"]), str(record["hmac"])):
        raise InputError(
            f"{where}: signature does not match this user's key ({key_path()}); refusing to "
            "unpickle a run folder this tool did not write"
        )
    actual = _digests(folder)
    for name in sorted(set(actual) | set(record["files"])):
        if actual.get(name) != record["files"].get(name):
            what = "added" if name not in record["files"] else (
                "missing" if name not in actual else "changed")  # fmt: skip
            raise InputError(f"{where}: {name} was {what} since this tool wrote it; refusing")
