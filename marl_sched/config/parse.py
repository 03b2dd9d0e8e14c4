"""The typed section parser every config key goes through, and its checks.

:func:`parse_section` builds a dataclass from a mapping read from YAML, checking every
key against the field's annotation (:func:`_coerce`); the ``check*`` helpers give the
one-line ``<file>: <dotted key>: <problem>`` errors every section's ``validate`` raises.
This module knows no section: the schema (:mod:`marl_sched.config.schema`) and the
heavier packages' sections are built on it.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, TypeVar

from marl_sched.errors import InputError

T = TypeVar("T")


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, where: str, key: str) -> Any:
    """Check ``value`` against the annotation ``tp``; return it converted."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], where, key)
    if dataclasses.is_dataclass(tp):
        return parse_section(tp, value, where, key)
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise InputError(f"{where}: {key}: expected a list, got {shown_value(value)}")
        if len(value) > MAX_CONFIG_LIST:
            raise InputError(f"{where}: {key}: at most {MAX_CONFIG_LIST} items, got {len(value):,}")
        return tuple(_coerce(v, args[0], where, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise InputError(f"{where}: {key}: expected a mapping, got {shown_value(value)}")
        return dict(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise InputError(f"{where}: {key}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{where}: {key}: expected an integer, got {shown_value(value)}")
        check_int_range(value, where, key)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(f"{where}: {key}: expected a number, got {shown_value(value)}")
        if isinstance(value, int):
            check_int_range(value, where, key)
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError(f"{where}: {key}: must be finite, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise InputError(f"{where}: {key}: expected a string, got {shown_value(value)}")
        check_text(value, where, key)
        return value
    if tp is Any:
        return value
    raise TypeError(f"unsupported config annotation {_type_name(tp)} for {key}")


#: the largest integer any config key may hold (a width, a count, a seed); every key
#: with a meaning has a tighter bound of its own, checked by its section
MAX_CONFIG_INT = 10**15
#: the most items a list in a config may hold
MAX_CONFIG_LIST = 10_000


def check_int_range(value: int, where: str, key: str, high: int = MAX_CONFIG_INT) -> None:
    """An integer within ``[-high, high]``, else ``InputError`` naming the limit (the
    value shown shortened: a 4,000-digit number is not echoed)."""
    if abs(value) > high:
        raise InputError(f"{where}: {key}: must be within +-{high:.0e}, got {shown_value(value)}")


def check_text(value: str, where: str, key: str) -> None:
    """A text value without control characters (NUL, escape sequences, newlines)."""
    bad = next((c for c in value if _is_control(c)), None)
    if bad is not None:
        raise InputError(
            f"{where}: {key}: contains the control character {bad!r}: {shown_value(value)}"
        )


def _is_control(c: str) -> bool:
    o = ord(c)
    return o < 32 or 127 <= o < 160


def shown_value(value: Any, limit: int = 60) -> str:
    """``repr(value)`` for a message, cut to ``limit`` characters (a huge integer is
    described by its digit count, never converted to text in full)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**60:
        if value.bit_length() > 13_000:  # str() refuses more than 4,300 digits
            return "an integer of more than 3,900 digits"
        return f"an integer of {len(str(abs(value))):,} digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: the git tag that keeps the code of retired options and studies
ARCHIVE_TAG = "studies-archive"


def drop_retired(data: Any, retired: dict[str, Any], where: str, prefix: str) -> Any:
    """``data`` without the keys of ``retired`` (each mapped to the value that meant
    "off") set to that value; ``InputError`` naming ``prefix.<key>`` of the first set to
    anything else, and the tag that keeps its code. A non-mapping is returned as is."""
    if not isinstance(data, dict):
        return data
    for key, off in retired.items():
        if key in data and data[key] != off:
            raise InputError(
                f"{where}: {prefix}.{key}: {data[key]!r} belongs to a study that no longer "
                f"ships; its code is kept at git tag {ARCHIVE_TAG}"
            )
    return {k: v for k, v in data.items() if k not in retired}


def parse_section(
    cls: type[T], data: Any, where: str, prefix: str, given: dict[str, Any] | None = None
) -> T:
    """Build dataclass ``cls`` from mapping ``data``, checking every key.

    Args:
        cls: a dataclass whose fields have simple annotations (int, float, str, bool,
            optionals, tuples of those or of dataclasses, nested dataclasses).
        data: the mapping read from YAML (``None`` means all defaults).
        where: the file name used in error messages.
        prefix: the dotted key of this section, e.g. ``"topology"``.
        given: fields the caller supplies (not read from ``data``, where they are
            unknown keys), e.g. the split a suite's scenario is listed under.

    Raises:
        InputError: unknown key, missing required key, wrong type; after building,
            the dataclass's ``validate(where, prefix)`` method runs if it has one.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(f"{where}: {prefix}: expected a mapping, got {shown_value(data)}")
    hints = typing.get_type_hints(cls)
    given = given or {}
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and f.name not in given}
    for key in data:
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise InputError(f"{where}: {prefix}.{key}: unknown key (known: {known})")
    kwargs = dict(given)
    for name, f in fields.items():
        dotted = f"{prefix}.{name}" if prefix else name
        if name in data:
            kwargs[name] = _coerce(data[name], hints[name], where, dotted)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise InputError(f"{where}: {dotted}: required key is missing")
    obj = cls(**kwargs)
    validate = getattr(obj, "validate", None)
    if callable(validate):
        validate(where, prefix)
    return obj


#: the range every physical quantity of a config must lie in (bandwidths in Gbit/s,
#: memory in GB, ratios): values outside it make the simulator's clock overflow or stall
PHYSICAL_RANGE = (1e-3, 1e7)


def check_physical(value: float, where: str, key: str) -> None:
    """``value`` is a finite number within :data:`PHYSICAL_RANGE`, else ``InputError``."""
    lo, hi = PHYSICAL_RANGE
    check(math.isfinite(value) and lo <= value <= hi, where, key,
          f"must be a finite number in [{lo:g}, {hi:g}], got {value!r}")  # fmt: skip


def check_bounds(obj: Any, bounds: dict[str, tuple[float, float]], where: str, key: str) -> None:
    """Each attribute ``name`` of ``obj`` (None skipped) lies in ``bounds[name]`` =
    (low, high), else ``InputError`` naming the key and both limits."""
    for name, (lo, hi) in bounds.items():
        value = getattr(obj, name)
        if value is None:
            continue
        check(value >= lo, where, f"{key}.{name}", f"must be >= {lo:,}, got {shown_value(value)}")
        check(value <= hi, where, f"{key}.{name}", f"must be <= {hi:,}, got {shown_value(value)}")


def check(cond: bool, where: str, key: str, problem: str) -> None:
    """Raise ``InputError(f"{where}: {key}: {problem}")`` unless ``cond``."""
    if not cond:
        raise InputError(f"{where}: {key}: {problem}")
