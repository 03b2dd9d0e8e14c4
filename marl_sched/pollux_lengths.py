"""How many iterations a Pollux-schema job trains for: its application's measured
training run at its batch size, as the Pollux simulator defines it.

Rule (``../shared/data/PROVENANCE.md``, profiles/pollux; petuum/adaptdl osdi21-artifact
``simulator/applications.py``): an application trains for :data:`POLLUX_MAX_EPOCHS`
epochs; ``profiles/pollux/<app>/validation-<B>.csv`` holds one row per epoch of a
run at total batch size ``B`` with the cumulative ``iteration`` at the end of that
epoch. A job of application ``app`` at batch size ``b`` runs ``iteration`` at epoch
``max_epochs - 1`` (0-based row), linearly interpolated in ``b`` between the two
nearest measured batch sizes (``numpy.interp``; a batch size outside the measured
range takes the nearest end's figure: no shipped workload has one).

The table of measured points (:data:`ITERATIONS_FILE`, a few hundred bytes) ships with
the package so loading a workload needs no profile files; it is derived from the
profiles by :func:`derive_iterations_table` (``python -m marl_sched.pollux_lengths
--profiles ../shared/data/profiles/pollux --out marl_sched/data/pollux_iterations.json``)
and ``tests/marl_sched/test_pollux_lengths.py`` re-derives it from the shared data.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

#: epochs each application trains for in the Pollux simulator (applications.py)
POLLUX_MAX_EPOCHS: dict[str, int] = {
    "bert": 2,
    "cifar10": 100,
    "deepspeech2": 80,
    "imagenet": 90,
    "ncf": 10,
    "yolov3": 50,
}

ITERATIONS_FILE = Path(__file__).resolve().parent / "data" / "pollux_iterations.json"

_VALIDATION_RE = re.compile(r"validation-(\d+)\.csv")


def derive_iterations_table(profiles: str | os.PathLike) -> dict[str, dict[str, float]]:
    """``{app: {batch size (str): iterations}}`` from ``<profiles>/<app>/validation-<B>.csv``.

    Iterations = the ``iteration`` column at 0-based row ``max_epochs - 1``.
    Raises ValueError when a file has fewer rows than the application's epochs.
    """
    table: dict[str, dict[str, float]] = {}
    for app, epochs in POLLUX_MAX_EPOCHS.items():
        points: dict[int, float] = {}
        for path in sorted(Path(profiles, app).glob("validation-*.csv")):
            match = _VALIDATION_RE.fullmatch(path.name)
            if match is None:
                continue
            with open(path, newline="", encoding="utf-8") as fh:
                rows = list(csv.DictReader(fh))
            if len(rows) < epochs:
                raise ValueError(f"{path}: {len(rows)} epochs, {app} trains for {epochs}")
            points[int(match.group(1))] = float(rows[epochs - 1]["iteration"])
        table[app] = {str(b): points[b] for b in sorted(points)}
    return table


@functools.cache
def _points(app: str) -> tuple[np.ndarray, np.ndarray]:
    table = json.loads(ITERATIONS_FILE.read_text(encoding="utf-8"))
    entry = table[app]
    return np.array([float(b) for b in entry]), np.array(list(entry.values()), dtype=float)


def pollux_applications() -> tuple[str, ...]:
    """Applications with a length profile."""
    return tuple(POLLUX_MAX_EPOCHS)


def pollux_iterations(app: str, batch_size: float) -> float:
    """Iterations a job of ``app`` trains for at total batch size ``batch_size``.

    KeyError for an application without a profile (see :func:`pollux_applications`).
    """
    if app not in POLLUX_MAX_EPOCHS:
        raise KeyError(app)
    sizes, iterations = _points(app)
    return float(np.interp(float(batch_size), sizes, iterations))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profiles", required=True, help="shared data profiles/pollux folder")
    parser.add_argument("--out", default=str(ITERATIONS_FILE))
    args = parser.parse_args(argv)
    table = derive_iterations_table(args.profiles)
    Path(args.out).write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
