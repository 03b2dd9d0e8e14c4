"""experiments/exp_residents.py: the heaviest jobs and what slowed them; bad input."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from marl_sched.config import REPO_ROOT

SCRIPT = REPO_ROOT / "experiments" / "exp_residents.py"
SAMPLE = str(REPO_ROOT / "configs" / "traces" / "philly_sample.csv")


def _module():
    sys.path.insert(0, str(SCRIPT.parent))  # as when run as a script (imports train_marl)
    try:
        spec = importlib.util.spec_from_file_location("exp_residents", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(SCRIPT.parent))


def test_heaviest_jobs_are_ranked_and_their_slowdowns_explained():
    mod = _module()
    loaded = mod.load({"trace": SAMPLE, "start": 100, "max_jobs": 60})
    rows = mod.heaviest_jobs(loaded, top=4)
    assert len(rows) == 4
    shares = [r["share_of_total_jct"] for r in rows]
    assert shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 1
    for r in rows:
        assert r["slowdown"] >= 1.0 - 1e-9  # JCT >= isolated runtime
        assert r["max_interference"] >= 1.0 and r["max_comm_stretch"] >= 1.0 - 1e-9
    assert mod.avg_jct(loaded, 3.0) > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--protect", "0,3"], "--protect: expected weights > 0, got '0,3'"),
        (["--protect", "x"], "--protect: expected weights > 0"),
        (["--speed", "-1"], "--speed: expected weights > 0, got '-1'"),
        (["--windows", "nope"], "--windows: unknown window 'nope'"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(tmp_path, args, message):
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()
