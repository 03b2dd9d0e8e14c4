"""Fit every constant of ``marl_sched/data/calibration.json`` from measured data.

Run::

    python -m marl_sched.calibration --shared ../shared/data \
        --out marl_sched/data/calibration.json

and ``python -m marl_sched.calibration report [--shared ../shared/data]`` for every
calibration point's error against the shipped file (last line: one JSON object).

Inputs (``<shared>/profiles``, see ``<shared>/PROVENANCE.md``): Gavel's
``gavel_simulation_throughputs.json`` (GPU speeds, interference vectors, a
consolidation check), Pollux's ``pollux/<model>/placements.csv`` + ``scalability.csv``
(link efficiencies, sync overhead, Pollux compute and sizes), DL2's
``dl2_ps_worker_config_speed.txt`` (CPU use, a PS-scaling check) and the published DL2
catalogue. Deterministic, pure numpy; fits go through the real
:class:`~marl_sched.perf.PerformanceModel` (docs/performance-model.md)."""

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
