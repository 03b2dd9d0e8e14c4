"""``train`` on a disk that fills: one line and exit 2 naming the file it could not
write, the checkpoint it was staging removed, and the run folder resumable from its last
complete checkpoint once there is room again. On a tmpfs (skipped where one cannot be
mounted). Fails on code that let ``torch.save``'s RuntimeError through as a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from marl_sched.config import REPO_ROOT

TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")


def _train(out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "marl_sched.cli", "train", "--config", TINY, "--out", str(out),
           "--quiet", *extra]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, env=env,
                          timeout=600)  # fmt: skip


@pytest.mark.ray
def test_train_on_a_full_disk_is_one_line_and_resumes_when_there_is_room(tmp_path):
    point = tmp_path / "disk"
    point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(point)],
                             capture_output=True, text=True)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        run = point / "run"
        assert _train(run, "--iterations", "1").returncode == 0
        filler = point / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT)  # the rest of the disk, to the byte
        try:
            while os.write(fd, b"\0" * 512):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        full = _train(run, "--iterations", "2", "--resume")
        assert full.returncode == 2, full.stderr
        assert full.stderr.count("\n") == 1 and "Traceback" not in full.stderr, full.stderr
        assert "No space left on device" in full.stderr and str(run) in full.stderr
        ckpts = run / "checkpoints"
        assert not [p.name for p in ckpts.iterdir() if p.name.endswith(".tmp")]
        assert (ckpts / "latest").read_text().strip() == "iter_000001"
        filler.unlink()
        again = _train(run, "--iterations", "2", "--resume")
        assert again.returncode == 0, again.stderr
        assert (ckpts / "latest").read_text().strip() == "iter_000002"
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)
