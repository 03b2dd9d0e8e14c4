"""The training progress line (agents/training.py): ``iteration k/N, ETA …`` and as
many of the iteration's figures as fit on one line of the terminal."""

from __future__ import annotations

from agents.records import progress_line
from agents.training import iteration_line

SCALARS = {"charts/team_return": -1.25, "charts/env_steps_per_s": 812.0,
           "time/sample_s": 3.2, "time/learn_s": 1.1, "time/validate_s": 4.0}  # fmt: skip


def _line(width, it=3, eta=125.0):
    line = progress_line(it, 600, SCALARS, 42.0, {"avg_jct_s": 5123.0})
    return iteration_line(it, 10, line, eta, width)


def test_a_wide_terminal_gets_every_figure():
    line = _line(200)
    assert line.startswith("iteration 3/10, ETA 2 min 05 s  ")
    for part in ("steps 600", "return -1.250", "812 steps/s", "eval avg JCT 5123 s",
                 "(sample 3.2, learn 1.1, validate 4.0 s)", "42 s"):  # fmt: skip
        assert part in line, part
    assert "iter 3 " not in line


def test_a_narrow_terminal_drops_the_least_telling_figures_first():
    for width in (100, 80, 60, 40, 20):
        line = _line(width)
        assert len(line) <= width and "\n" not in line
    assert _line(80) == "iteration 3/10, ETA 2 min 05 s  return -1.250  eval avg JCT 5123 s  42 s"
    assert _line(40) == "iteration 3/10, ETA 2 min 05 s"


def test_the_eta_reads_in_hours_and_is_gone_at_the_end():
    assert _line(200, eta=7300.0).startswith("iteration 3/10, ETA 2 h 01 min  ")
    assert _line(200, eta=None).startswith("iteration 3/10  steps 600")
    assert _line(200, it=10, eta=0.0).startswith("iteration 10/10  steps 600")
