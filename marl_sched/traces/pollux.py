"""The Pollux trace format (Pollux's and Sia's workloads).

Source: Pollux's semi-synthetic workloads (petuum/adaptdl,
``simulator/workloads/workload-N.csv``). Columns ``name,time,application,
num_replicas,batch_size``.

- job_id = name; submit_time = time (s); num_gpus = num_replicas (integer >= 1);
  model = application as given (bert, cifar10, deepspeech2, imagenet, ncf, yolov3),
  non-empty, with a length profile; batch_size must be an integer >= 1;
  num_ps, vc = None. A repeated name is an error (``name: duplicate of line 2``).
- The file has no run time: a job runs the iterations its application trains for at
  its batch size, as the Pollux simulator defines them
  (:func:`marl_sched.pollux_lengths.pollux_iterations`: the measured run's iteration
  count at epoch ``max_epochs - 1``, interpolated linearly between the two nearest
  measured batch sizes). duration = iterations x the catalogue's compute time per
  iteration on the reference GPU, a reference run time for summaries (the simulator
  runs the iterations). Nothing is drawn: a job depends only on its row, never on
  the seed. The Sia workloads (``traces/sia_workloads/{philly,newtrace}``) share
  this schema and load the same way.
"""

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
