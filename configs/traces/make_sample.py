"""Derive the Philly trace sample shipped in ``configs/traces/philly_sample.csv``.

The sample is the window of ``--jobs`` (2,500) consecutive Philly jobs, in submit
order after dropping duplicate rows, starting at the first job submitted on or after
``--since`` (2017-10-23 00:00:00, a Monday of the trace's busy weeks). It is written
in the canonical format (job_id, submit_time rebased to 0, num_gpus, duration, vc;
model, num_ps and iterations empty). See ``configs/traces/README.md``.

Run from anywhere::

    python configs/traces/make_sample.py
    python configs/traces/make_sample.py --philly ../shared/data/traces/philly.csv \\
        --out configs/traces/philly_sample.csv
"""

from __future__ import annotations

import argparse
import bisect
import sys
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

from marl_sched.errors import InputError  # noqa: E402
from marl_sched.traces import (  # noqa: E402
    format_summary,
    load_trace,
    philly_timestamp,
    summarize,
    write_canonical,
)

DEFAULT_PHILLY = REPO_ROOT.parent / "shared" / "data" / "traces" / "philly.csv"
DEFAULT_OUT = REPO_ROOT / "configs" / "traces" / "philly_sample.csv"
DEFAULT_SINCE = "2017-10-23 00:00:00"
DEFAULT_JOBS = 2500


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--philly",
        type=Path,
        default=DEFAULT_PHILLY,
        help="Philly trace CSV (default: ../shared/data/traces/philly.csv beside the repo)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="canonical CSV to write (default: configs/traces/philly_sample.csv)",
    )
    parser.add_argument(
        "--since",
        default=DEFAULT_SINCE,
        help=f"window starts at the first job submitted at or after this UTC time "
        f"'YYYY-MM-DD HH:MM:SS' (default: {DEFAULT_SINCE})",
    )
    parser.add_argument(
        "--jobs", type=int, default=DEFAULT_JOBS, help=f"jobs in the window ({DEFAULT_JOBS})"
    )
    return parser.parse_args(argv)


def window_start(philly: Path, since: str) -> int:
    """Index, in submit order, of the first Philly job submitted at or after ``since``."""
    full = load_trace(philly, "philly")
    cutoff = philly_timestamp(since) - full.origin
    start = bisect.bisect_left([job.submit_time for job in full.jobs], cutoff)
    if start == len(full.jobs):
        raise InputError(f"--since: no job of {philly} is submitted at or after {since}")
    return start


def main(argv: Sequence[str] | None = None) -> int:
    """Write the sample; 0 on success, 2 on bad input."""
    args = parse_args(argv)
    try:
        if args.jobs < 1:
            raise InputError(f"--jobs: must be >= 1, got {args.jobs}")
        start = window_start(args.philly, args.since)
        sample = load_trace(args.philly, "philly", start=start, max_jobs=args.jobs)
        if len(sample.jobs) < args.jobs:
            raise InputError(
                f"--jobs: only {len(sample.jobs)} jobs from {args.since} on, wanted {args.jobs}"
            )
        write_canonical(sample, args.out)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: jobs {start}..{start + len(sample.jobs) - 1} of the Philly trace")
    print(format_summary(summarize(sample)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
