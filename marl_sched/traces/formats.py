"""The trace formats: each one's columns, adapter and drop rules, and telling them
apart by header."""

from __future__ import annotations

import os
from collections.abc import Sequence

import marl_sched.traces.alibaba as alibaba
import marl_sched.traces.canonical as canonical
import marl_sched.traces.philly as philly
import marl_sched.traces.pollux as pollux
from marl_sched.errors import InputError
from marl_sched.traces.canonical import CANONICAL_COLUMNS, OPTIONAL_COLUMNS
from marl_sched.traces.checks import _shown
from marl_sched.traces.source import _open_source, _Source

TRACE_FORMATS = ("canonical", "philly", "alibaba", "pollux")
_MODULES = {
    "canonical": canonical,
    "philly": philly,
    "alibaba": alibaba,
    "pollux": pollux,
}

# Columns each format needs in its header (detect_format picks the first format, in
# TRACE_FORMATS order, whose required columns are all present).
_REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    fmt: module.REQUIRED_COLUMNS for fmt, module in _MODULES.items()
}

_ADAPTERS = {
    "canonical": canonical._parse_canonical,
    "philly": philly._parse_philly,
    "alibaba": alibaba._parse_alibaba,
    "pollux": pollux._parse_pollux,
}

#: the rows each format drops by a documented rule (counted in ``Trace.dropped``)
_DROP_RULES: dict[str, tuple[str, ...]] = {
    fmt: module.DROP_RULES for fmt, module in _MODULES.items()
}

#: formats whose jobs train by ring all-reduce, not with parameter servers: their
#: rows get ``num_ps = 0`` (Pollux's and Sia's jobs are PyTorch all-reduce jobs)
ALL_REDUCE_FORMATS = frozenset({"pollux"})


def _detect(header: Sequence[str]) -> str | None:
    """The first format whose required columns are all in ``header``."""
    names = set(header)
    for fmt in TRACE_FORMATS:
        if all(col in names for col in _REQUIRED_COLUMNS[fmt]):
            return fmt
    return None


def _check_header(src: _Source, fmt: str) -> None:
    """Fill ``src.index``; error on a missing, repeated or (canonical) unknown column."""
    for pos, name in enumerate(src.header):
        if name in src.index:
            raise InputError(f"{src.path}:1: header: duplicate column '{_shown(name)}'")
        src.index[name] = pos
    for col in _REQUIRED_COLUMNS[fmt]:
        if col not in src.index:
            raise InputError(f"{src.path}:1: header: missing required column '{col}'")
    if fmt == "canonical":
        allowed = CANONICAL_COLUMNS + OPTIONAL_COLUMNS
        for name in src.header:
            if name not in allowed:
                raise InputError(
                    f"{src.path}:1: header: unknown column '{_shown(name)}' "
                    f"(allowed: {', '.join(allowed)})"
                )


def detect_format(path: str | os.PathLike) -> str:
    """The trace format of ``path``, from its header line (only that line is read).

    The first format of :data:`TRACE_FORMATS` whose required columns all appear in
    the header wins. InputError when the file cannot be read or no format matches.
    """
    with _open_source(path) as src:
        fmt = _detect(src.header)
        if fmt is None:
            raise _unknown_format(src)
    return fmt


def _unknown_format(src: _Source) -> InputError:
    return InputError(
        f"{src.path}:1: header: unknown trace format (columns: "
        f"{_shown(', '.join(src.header), 200)}; expected one of: {', '.join(TRACE_FORMATS)})"
    )
