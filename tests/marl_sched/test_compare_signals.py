"""A SIGTERM to the whole process group mid-compare: the parent prints one line and
exits 143; the worker processes end quietly (no traceback each) and nothing is left
in or beside ``--out``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from marl_sched.config import REPO_ROOT


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def _compare(out: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "marl_sched.cli", "compare", "--config",
            str(REPO_ROOT / "configs" / "default.yaml"), "--trace",
            str(REPO_ROOT / "configs" / "traces" / "philly_sample.csv"), "--max-jobs", "3000",
            "--policies", "first-fit,tetris,random,load-balance", "--out", str(out),
            "--quiet"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while len(_children(proc.pid)) < 2 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    assert len(_children(proc.pid)) >= 2, "the workers never started"
    time.sleep(1.0)  # the workers are simulating
    return proc


def _gone(pid: int) -> bool:
    try:
        return "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return True


def test_a_group_sigterm_mid_compare_is_one_line(tmp_path):
    out = tmp_path / "cmp"
    proc = _compare(out)
    try:
        workers = _children(proc.pid)
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err == "marl-sched: terminated by SIGTERM\n", err
    assert not out.exists() and list(tmp_path.iterdir()) == []
    assert all(_gone(pid) for pid in workers)


def test_compare_workers_die_with_a_killed_parent(tmp_path):
    proc = _compare(tmp_path / "cmp")
    workers = _children(proc.pid)
    try:
        proc.kill()  # SIGKILL to the parent alone
        proc.communicate(timeout=60)
        deadline = time.monotonic() + 10
        while not all(_gone(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_gone(pid) for pid in workers)
    finally:
        for pid in workers:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_rays_stack_dump_is_off_before_any_command_runs(monkeypatch, capsys):
    from marl_sched.cli import main

    monkeypatch.delenv("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", raising=False)
    assert main(["policies"]) == 0
    assert os.environ["RAY_DISABLE_FAILURE_SIGNAL_HANDLER"] == "1"
    monkeypatch.setenv("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "0")  # the user's choice holds
    assert main(["policies"]) == 0
    assert os.environ["RAY_DISABLE_FAILURE_SIGNAL_HANDLER"] == "0"
