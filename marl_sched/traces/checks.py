"""The checks every trace format applies to its fields: integers, numbers, times,
text, model names and repeated values, each failing with a :class:`_RowError` that
the reader turns into an ``InputError`` naming the file and line."""

from __future__ import annotations

import hashlib
import math
import os
import re

# ASCII digits only: Python's \d (and int(), float()) also take "٣" or "３"
_INT_RE = re.compile(r"[+-]?[0-9]+")
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class _RowError(Exception):
    """A bad field in the current row; turned into an InputError with path and line."""

    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(f"{field_name}: {problem}")


#: the longest line a trace may have, in bytes (a row of the real traces is < 200)
MAX_LINE_BYTES = 1 << 20
#: the most digits an integer field may have (checked before ``int()`` reads it)
MAX_INT_DIGITS = 15
#: the longest text a number field may have
MAX_NUMBER_CHARS = 64


def _shown(value: str, limit: int = 40) -> str:
    """A field's value for a message, cut to ``limit`` characters."""
    return value if len(value) <= limit else value[: limit - 3] + "..."


def _check_plain(value: str, name: str) -> str:
    """A text field without control characters (a NUL, an escape sequence)."""
    bad = _CONTROL_RE.search(value)
    if bad is not None:
        raise _RowError(name, f"contains the control character {bad.group()!r}")
    return value


_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f]")


def _text(value: str, name: str) -> str:
    """A required non-empty string field without control characters."""
    if value == "":
        raise _RowError(name, "missing value")
    return _check_plain(value, name)


def _int(value: str, name: str, low: int, high: int | None = None) -> int:
    """A required integer field (ASCII digits, at most :data:`MAX_INT_DIGITS`) that
    must be >= ``low`` (and <= ``high`` when given)."""
    if value == "":
        raise _RowError(name, "missing value")
    if not _INT_RE.fullmatch(value):
        raise _RowError(name, f"not an integer: '{_shown(value)}'")
    digits = len(value.lstrip("+-"))
    if digits > MAX_INT_DIGITS:
        raise _RowError(
            name, f"must have at most {MAX_INT_DIGITS} digits, got {digits:,}: '{_shown(value)}'"
        )
    number = int(value)
    if number < low:
        raise _RowError(name, f"must be >= {low}, got {value}")
    if high is not None and number > high:
        raise _RowError(name, f"must be <= {high}, got {value}")
    return number


_NON_FINITE = frozenset({"inf", "infinity", "nan"})


def _float(value: str, name: str) -> float:
    """A required finite number (ASCII decimal or scientific notation)."""
    if value == "":
        raise _RowError(name, "missing value")
    if len(value) > MAX_NUMBER_CHARS or not _FLOAT_RE.fullmatch(value):
        if value.strip().lstrip("+-").lower() in _NON_FINITE:
            raise _RowError(name, f"must be a finite number, got '{value}'")
        raise _RowError(name, f"not a number: '{_shown(value)}'")
    number = float(value)
    if not math.isfinite(number):
        raise _RowError(name, f"must be a finite number, got '{value}'")
    return number


def _positive(value: str, name: str, high: float | None = None) -> float:
    """A required finite number > 0 (and <= ``high`` when given)."""
    number = _float(value, name)
    if number <= 0:
        raise _RowError(name, f"must be > 0, got {value}")
    if high is not None and number > high:
        raise _RowError(name, f"must be <= {high:g}, got {value}")
    return number


#: the largest time a trace may give, in seconds (a submit time, a duration: about
#: 3,000 years; Unix timestamps are ~1.7e9): beyond it the simulator's clock loses
#: its resolution and a JCT overflows to inf or NaN. Every format's durations, read
#: or derived (Alibaba's deletion - scheduled time, Pollux's iterations x compute
#: time), are held to it.
MAX_TRACE_SECONDS = 1e11
#: the most iterations a job may ask for
MAX_ITERATIONS = 1e15


def _seconds(value: str, name: str) -> float:
    """A required finite time in [-MAX_TRACE_SECONDS, MAX_TRACE_SECONDS]."""
    number = _float(value, name)
    if abs(number) > MAX_TRACE_SECONDS:
        raise _RowError(name, f"must be within +-{MAX_TRACE_SECONDS:g} s, got {value}")
    return number


def _check_model(model: str, known_models: set[str] | None, column: str = "model") -> None:
    """Error (on ``column``) when ``known_models`` is given and ``model`` is not in it."""
    if known_models is not None and model not in known_models:
        known = ", ".join(sorted(known_models))
        raise _RowError(column, f"unknown model '{_shown(model)}' (known: {known})")


class _Seen:
    """The first line of every value of a column seen so far, to refuse a repeat
    (values kept as 16-byte BLAKE2b digests keyed per process)."""

    _KEY = os.urandom(16)

    def __init__(self, column: str = "job_id") -> None:
        self.column = column
        self.first: dict[bytes, int] = {}

    def digest(self, value: str) -> bytes:
        data = value.encode("utf-8", "surrogatepass")
        return hashlib.blake2b(data, digest_size=16, key=self._KEY).digest()

    def check(self, value: str, line: int) -> None:
        """Error when ``value`` was already used on an earlier line."""
        first = self.first.setdefault(self.digest(value), line)
        if first != line:
            raise _RowError(self.column, f"duplicate of line {first}")

    def add(self, key: str, line: int) -> bool:
        """Record ``key``; False when it was seen before."""
        return self.first.setdefault(self.digest(key), line) == line


def _number_text(value: object) -> str:
    """``value`` for an argument error message: -1, 0.5, 'x'."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value) if isinstance(value, str) else str(value)
