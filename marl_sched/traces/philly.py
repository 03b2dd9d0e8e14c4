"""The Philly trace format (Microsoft's Philly trace as Pollux exports it,
``simulator/traces/philly.csv``).

Columns read: ``timestamp`` (``YYYY-MM-DD HH:MM:SS``, UTC), ``duration`` (s, > 0),
``num_gpus`` (integer >= 1), ``cluster``; others ignored.

- submit_time = the timestamp in seconds; vc = cluster (empty = None); job_id =
  ``philly-<line>``; model, num_ps, iterations = None.
- dropped["duplicate_rows"]: a row identical to an earlier one (the first is kept)."""

from __future__ import annotations

import re
from datetime import date

from marl_sched.errors import InputError
from marl_sched.traces.checks import (
    MAX_TRACE_SECONDS,
    _check_plain,
    _int,
    _positive,
    _RowError,
    _Seen,
    _shown,
)
from marl_sched.traces.source import _Rows, _Source

#: columns the header must have
REQUIRED_COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")
#: rows dropped by a documented rule (counted in ``Trace.dropped``)
DROP_RULES = ("duplicate_rows",)

_PHILLY_TS_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}")
_EPOCH = date(1970, 1, 1)


def _philly_seconds(value: str, day_cache: dict[str, float]) -> float:
    """``YYYY-MM-DD HH:MM:SS`` (UTC) -> seconds since 1970-01-01."""
    if not _PHILLY_TS_RE.fullmatch(value):
        raise _RowError("timestamp", f"not a 'YYYY-MM-DD HH:MM:SS' time: '{_shown(value)}'")
    day = value[:10]
    base = day_cache.get(day)
    if base is None:
        try:
            base = float((date.fromisoformat(day) - _EPOCH).days * 86400)
        except ValueError:
            raise _RowError("timestamp", f"not a valid date: '{value}'") from None
        day_cache[day] = base
    hour, minute, second = int(value[11:13]), int(value[14:16]), int(value[17:19])
    if hour > 23 or minute > 59 or second > 59:
        raise _RowError("timestamp", f"not a valid time of day: '{value}'")
    return base + hour * 3600 + minute * 60 + second


def philly_timestamp(value: str) -> float:
    """Seconds since 1970-01-01 UTC of a Philly ``YYYY-MM-DD HH:MM:SS`` timestamp."""
    try:
        return _philly_seconds(value, {})
    except _RowError as err:
        raise InputError(str(err)) from None


def _parse_philly(src: _Source, known_models: set[str] | None, dropped: dict) -> _Rows:
    """Adapter for the Philly export (see the module docstring)."""
    i_ts, i_dur = src.index["timestamp"], src.index["duration"]
    i_gpu, i_vc = src.index["num_gpus"], src.index["cluster"]
    seen = _Seen()
    day_cache: dict[str, float] = {}
    for line, f in src.rows:
        if not seen.add("\0".join(f), line):  # NUL never occurs in a field (csv refuses it)
            dropped["duplicate_rows"] += 1
            continue
        try:
            submit = _philly_seconds(f[i_ts], day_cache)
            duration = _positive(f[i_dur], "duration", MAX_TRACE_SECONDS)
            num_gpus = _int(f[i_gpu], "num_gpus", 1)
            vc = _check_plain(f[i_vc], "cluster") or None
        except _RowError as err:
            raise src.error(line, err) from None
        yield (
            submit,
            {
                "job_id": f"philly-{line}",
                "num_gpus": num_gpus,
                "duration": duration,
                "vc": vc,
                "line": line,
            },
        )
