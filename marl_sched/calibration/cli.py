"""Fit every constant of ``marl_sched/data/calibration.json`` from measured data.

Run::

    python -m marl_sched.calibration --shared ../shared/data \\
        --out marl_sched/data/calibration.json

and ``python -m marl_sched.calibration report [--shared ../shared/data]`` for the
table of every calibration point with its error against the shipped file
(:mod:`marl_sched.calibration.report`; last line: one JSON object).

Inputs (``<shared>/profiles``, see ``<shared>/PROVENANCE.md``):

- ``gavel_simulation_throughputs.json``: isolated throughputs of 26 job types on
  K80/P100/V100 (→ ``gpu_speed``), throughputs of job pairs sharing one GPU
  (→ the interference vectors), consolidated vs ``*_unconsolidated`` (a check);
- ``pollux/<model>/placements.csv`` + ``scalability.csv``: T4 step and sync times of
  six models over placements on 4-GPU AWS g4dn.12xlarge nodes (→ ``gpu_speed.t4``,
  ``link_efficiency``, ``sync_overhead_s``, Pollux ``compute_s`` / ``model_mb``);
- ``dl2_ps_worker_config_speed.txt``: MXNet PS/worker speeds and CPU use
  (→ ``cpu_worker``/``cpu_ps``; a check of PS-bound scaling);
- the DL2/Harmony published catalogue (model size, compute time) quoted in
  PROVENANCE.md (→ the eight DL2 models' ``model_mb`` and ``compute_s``).

Everything is pure numpy/stdlib and deterministic: ``fit_all(shared)`` run twice
gives the same dictionary, and ``tests/marl_sched/test_calibration.py`` checks that
the shipped file equals a fresh refit. The link fits and the checks go through the
real :class:`~marl_sched.perf.PerformanceModel` code path (``layout`` on a small
:class:`~marl_sched.topology.Topology`) so they fit the code, not a copy of its
formula. The whole derivation is written up in ``docs/performance-model.md``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marl_sched.calibration.assemble import fit_all
from marl_sched.calibration.data import profiles_dir
from marl_sched.catalogue import calibration_text

# --------------------------------------------------------------------------- CLI


def write_json_atomic(data: dict[str, Any], out: Path) -> None:
    """``data`` as indented JSON, written atomically (:func:`atomic_write_text`)."""
    from marl_sched.metrics import atomic_write_text  # noqa: PLC0415

    atomic_write_text(out, calibration_text(data))


def report_main(argv: Sequence[str]) -> int:
    """``python -m marl_sched.calibration report``."""
    from marl_sched.calibration.holdout import holdout_errors  # noqa: PLC0415
    from marl_sched.calibration.report import all_rows, format_report  # noqa: PLC0415
    from marl_sched.config import REPO_ROOT  # noqa: PLC0415

    parser = argparse.ArgumentParser(
        prog="python -m marl_sched.calibration report",
        description="every calibration point of the shipped model, with its error",
    )
    parser.add_argument(
        "--shared",
        default=str(REPO_ROOT.parent / "shared" / "data"),
        help="the shared data directory (default: ../shared/data beside the repo)",
    )
    args = parser.parse_args(argv)
    shared = Path(args.shared)
    if not (profiles_dir(shared) / "gavel_simulation_throughputs.json").is_file():
        print(f"calibration report: no profiles under {shared}", file=sys.stderr)
        return 2
    print(format_report(all_rows(shared), holdout_errors(shared)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["report"]:
        return report_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m marl_sched.calibration", description=__doc__)
    parser.add_argument("--shared", required=True, help="the shared data directory")
    parser.add_argument("--out", required=True, help="calibration.json to write")
    args = parser.parse_args(argv)
    shared = Path(args.shared)
    if not (profiles_dir(shared) / "gavel_simulation_throughputs.json").is_file():
        print(f"calibration: no profiles under {shared}", file=sys.stderr)
        return 2
    data = fit_all(shared)
    write_json_atomic(data, Path(args.out))
    print(f"wrote {args.out}")
    for key in ("gpu_speed", "link_efficiency", "sync_overhead_s", "level_coupling"):
        print(f"  {key}: {data[key]}")
    print(f"  {data['notes']['fit_errors']}")
    return 0
