"""SIGTERM, SIGHUP or Ctrl-C during ``train``: one line, a non-zero status (128 +
the signal), no half-made checkpoint, and a run that resumes. The Ray-free
tests signal the process itself at a chosen point; one Ray test stops a real run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.run_folder import (
    RunPaths,
    Stopped,
    deferred_signals,
    resume_point,
    stop_on_signals,
    write_checkpoint,
)
from marl_sched.cli import main
from marl_sched.config import REPO_ROOT
from tests.agents.crafted import Payload

TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")


@pytest.fixture(autouse=True)
def own_key(tmp_path, monkeypatch):
    monkeypatch.setenv("MARL_SCHED_KEY_FILE", str(tmp_path / "keys" / "resume.key"))


def _signal_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(5)  # the handler raises here, long before this ends
    raise AssertionError("the signal did not stop the run")


def test_a_signal_while_ray_starts_exits_with_one_line_leaving_nothing(tmp_path, capsys,
                                                                        monkeypatch):  # fmt: skip
    before = signal.getsignal(signal.SIGHUP)
    monkeypatch.setattr("agents.commands.start_ray", lambda *a, **k: _signal_self(signal.SIGHUP))
    out = tmp_path / "run"
    rc = main(["train", "--config", TINY, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 128 + signal.SIGHUP
    assert err.count("\n") == 1 and "stopped by SIGHUP" in err and "Traceback" not in err
    assert not out.exists()
    assert signal.getsignal(signal.SIGHUP) is before  # handlers restored


def test_a_signal_before_the_first_checkpoint_removes_the_fresh_run(tmp_path, capsys,
                                                                     monkeypatch):  # fmt: skip
    """Stopped before its first checkpoint, a fresh run keeps nothing: the same
    command starts it again (a folder with no checkpoint could neither restart nor
    resume)."""
    from agents.run_folder import write_run_config

    def run(self, iterations):
        write_run_config(self.paths, {"train": {}})
        (self.paths.tb).mkdir()
        _signal_self(signal.SIGTERM)

    monkeypatch.setattr("agents.commands.start_ray", lambda *a, **k: None)
    monkeypatch.setattr("agents.training.Trainer.run", run)
    out = tmp_path / "run"
    out.mkdir()  # an empty --out is accepted: it is emptied again, not removed
    rc = main(["train", "--config", TINY, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 128 + signal.SIGTERM and err.count("\n") == 1, err
    assert "nothing kept" in err
    assert out.is_dir() and not any(out.iterdir())


def test_a_signal_while_a_checkpoint_is_written_leaves_none_of_it(tmp_path):
    paths = RunPaths(tmp_path / "run")
    state = {"iteration": 1, "env_steps": 1.0, "wall_s": 1.0, "best": None,
             "best_runs": None, "scores": {"iter_000001": None}}  # fmt: skip

    def save(folder: Path) -> None:
        (folder / "rllib").mkdir()
        (folder / "rllib" / "algorithm_state.pkl").write_bytes(b"\x80\x04N.")
        (folder / "config.yaml").write_text("{}\n")

    write_checkpoint(paths, 1, state, save)

    def save_and_stop(folder: Path) -> None:
        save(folder)
        _signal_self(signal.SIGTERM)

    state2 = {**state, "iteration": 2, "scores": {**state["scores"], "iter_000002": None}}
    with stop_on_signals(), pytest.raises(Stopped):
        write_checkpoint(paths, 2, state2, save_and_stop)
    assert sorted(p.name for p in paths.checkpoints.iterdir()) == ["iter_000001", "latest"]
    (paths.root / "config.yaml").write_text("{}\n")
    ckpt, saved = resume_point(paths)  # the last complete one, signed and intact
    assert ckpt.name == "iter_000001" and saved["iteration"] == 1


def test_a_signal_inside_a_deferred_block_waits_for_its_end():
    steps = []
    with stop_on_signals(), pytest.raises(Stopped) as stop:
        with deferred_signals():
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.05)
            steps.append("rename")
            steps.append("pointer")
        steps.append("after")  # never: the held signal is raised as the block ends
    assert steps == ["rename", "pointer"] and stop.value.signum == signal.SIGHUP


@pytest.mark.ray
def test_sigterm_during_a_real_run_exits_with_one_line_and_the_run_resumes(tmp_path):
    """A real ``train`` (its own Ray), stopped by SIGTERM once it has checkpointed:
    exit 143 and one line (no Ray C++ stack dump, no 134), no half checkpoint, and
    the run passes every resume check."""
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1",
           "MARL_SCHED_KEY_FILE": str(tmp_path / "keys" / "resume.key")}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "marl_sched.cli", "train", "--config", TINY, "--out", str(out),
         "--iterations", "100", "--quiet"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not (out / "checkpoints" / "latest").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no checkpoint within 180 s"
            time.sleep(0.2)
        time.sleep(1.0)  # into the next iteration
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = err.decode()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.count("\n") == 1 and "stopped by SIGTERM" in err and "--resume" in err, err
    names = [p.name for p in (out / "checkpoints").iterdir()]
    assert not [n for n in names if n.startswith(".")], names  # no staging folder left
    ckpt, state = resume_point(RunPaths(out))
    assert ckpt.name in err and state["iteration"] >= 0
    _attack_a_real_checkpoint(out, ckpt, tmp_path)


def _attack_a_real_checkpoint(run: Path, ckpt: Path, tmp_path: Path) -> None:
    """The attack on a real RLlib checkpoint: RLlib restores any optional
    sub-folder that exists (``env_runner/rl_module``) with pickle. A symlinked one
    holding crafted pickles passed the old signature check and RLlib ran the payload
    (this test failed so, marker written); now it is refused before Ray starts."""
    import pickle
    import shutil

    marker, evil = tmp_path / "pwned", tmp_path / "evil"
    shutil.copytree(ckpt / "rllib" / "learner_group" / "learner" / "rl_module", evil)
    for pkl in evil.rglob("*.pkl"):
        pkl.write_bytes(pickle.dumps(Payload(marker)))
    link = ckpt / "rllib" / "env_runner" / "rl_module"
    link.symlink_to(evil, target_is_directory=True)
    try:
        rc = main(["train", "--config", TINY, "--out", str(run), "--resume", "--quiet",
                   "--iterations", "200"])  # fmt: skip
    except Exception as exc:  # noqa: BLE001  (what the unpickled payload leads to)
        rc = exc
    assert not marker.exists(), "the crafted pickle ran"
    assert rc == 2
