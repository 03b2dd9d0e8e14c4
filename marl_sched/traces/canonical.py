"""The canonical trace format: the project's own.

The project's own format, written by :func:`write_canonical`. Columns (any order):

============  =====  ====  =========  ===========================================
column        type   unit  required   meaning
============  =====  ====  =========  ===========================================
job_id        str    -     yes        unique, non-empty job name
submit_time   float  s     yes        submit time (any finite value; rebased)
num_gpus      int    GPUs  yes        workers, one GPU each, >= 1
duration      float  s     yes        run time in the original trace, > 0
model         str    -     no         model name (empty = unknown)
num_ps        int    -     no         parameter servers, >= 0 (empty = unknown)
iterations    float  -     no         training iterations, > 0 (empty = unknown)
vc            str    -     no         virtual cluster id (empty = none)
============  =====  ====  =========  ===========================================

Optional columns may be missing from the header or empty in a row. A column not in
this table is an error (``header: unknown column 'x'``). A repeated ``job_id`` is an
error (``job_id: duplicate of line 3``); nothing is dropped.
"""

from __future__ import annotations

from marl_sched.traces.checks import (
    MAX_ITERATIONS,
    MAX_TRACE_SECONDS,
    _check_model,
    _int,
    _positive,
    _RowError,
    _seconds,
    _Seen,
    _text,
)
from marl_sched.traces.source import _optional, _Rows, _Source

CANONICAL_COLUMNS = ("job_id", "submit_time", "num_gpus", "duration")
OPTIONAL_COLUMNS = ("model", "num_ps", "iterations", "vc")
#: columns the header must have
REQUIRED_COLUMNS = CANONICAL_COLUMNS
#: rows dropped by a documented rule: none
DROP_RULES: tuple[str, ...] = ()


def _parse_canonical(src: _Source, known_models: set[str] | None, dropped: dict) -> _Rows:
    """Adapter for the canonical format (see the module docstring)."""
    ix = src.index
    seen = _Seen()
    for line, f in src.rows:
        try:
            job_id = _text(f[ix["job_id"]], "job_id")
            seen.check(job_id, line)
            submit = _seconds(f[ix["submit_time"]], "submit_time")
            num_gpus = _int(f[ix["num_gpus"]], "num_gpus", 1)
            duration = _positive(f[ix["duration"]], "duration", MAX_TRACE_SECONDS)
            model = _optional(src, f, "model") or None
            if model is not None:
                _check_model(model, known_models)
            raw_ps = _optional(src, f, "num_ps")
            num_ps = _int(raw_ps, "num_ps", 0) if raw_ps else None
            raw_it = _optional(src, f, "iterations")
            iterations = _positive(raw_it, "iterations", MAX_ITERATIONS) if raw_it else None
            vc = _optional(src, f, "vc") or None
        except _RowError as err:
            raise src.error(line, err) from None
        yield (
            submit,
            {
                "job_id": job_id,
                "num_gpus": num_gpus,
                "duration": duration,
                "model": model,
                "num_ps": num_ps,
                "iterations": iterations,
                "vc": vc,
                "line": line,
            },
        )
