"""The Pollux trace format (Pollux's and Sia's workloads, columns ``name,time,
application,num_replicas,batch_size``).

- job_id = name (unique); submit_time = time (s); num_gpus = num_replicas (>= 1);
  model = application (non-empty, with a length profile); batch_size an integer >= 1;
  num_ps, vc = None.
- iterations: what the application trains for at its batch size
  (:func:`marl_sched.pollux_lengths.pollux_iterations`); duration = iterations x the
  catalogue's reference compute time. Nothing is drawn."""

from __future__ import annotations

from marl_sched.catalogue import CATALOGUE
from marl_sched.pollux_lengths import POLLUX_MAX_EPOCHS, pollux_applications, pollux_iterations
from marl_sched.traces.checks import (
    MAX_ITERATIONS,
    MAX_TRACE_SECONDS,
    _check_model,
    _int,
    _RowError,
    _seconds,
    _Seen,
    _shown,
    _text,
)
from marl_sched.traces.source import _Rows, _Source

#: columns the header must have
REQUIRED_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
#: rows dropped by a documented rule: none
DROP_RULES: tuple[str, ...] = ()


def _parse_pollux(src: _Source, known_models: set[str] | None, dropped: dict) -> _Rows:
    """Adapter for Pollux-schema workloads (see the module docstring)."""
    ix = src.index
    seen = _Seen("name")
    for line, f in src.rows:
        try:
            name = _text(f[ix["name"]], "name")
            seen.check(name, line)
            submit = _seconds(f[ix["time"]], "time")
            model = _text(f[ix["application"]], "application")
            _check_model(model, known_models, "application")
            if model not in POLLUX_MAX_EPOCHS:
                known = ", ".join(pollux_applications())
                raise _RowError(
                    "application", f"no length profile for {_shown(model)!r} (known: {known})"
                )
            num_gpus = _int(f[ix["num_replicas"]], "num_replicas", 1)
            batch_size = _int(f[ix["batch_size"]], "batch_size", 1)
            iterations = pollux_iterations(model, batch_size)
            duration = iterations * CATALOGUE[model].compute_s
            if not (0 < iterations <= MAX_ITERATIONS and duration <= MAX_TRACE_SECONDS):
                raise _RowError(
                    "batch_size",
                    f"{batch_size} gives {iterations:g} iterations ({duration:g} s), beyond "
                    f"the bounds ({MAX_ITERATIONS:g} iterations, {MAX_TRACE_SECONDS:g} s)",
                )
        except _RowError as err:
            raise src.error(line, err) from None
        yield (
            submit,
            {
                "job_id": name,
                "num_gpus": num_gpus,
                "model": model,
                "iterations": iterations,
                "duration": duration,
                "line": line,
            },
        )
