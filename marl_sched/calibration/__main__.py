"""``python -m marl_sched.calibration``: :func:`marl_sched.calibration.cli.main`."""

from marl_sched.calibration.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
