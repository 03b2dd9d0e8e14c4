"""Weights load for acting without running pickled code, and a module file that is a
FIFO, a device or huge is refused at once, with one line."""

from __future__ import annotations

import os
import pickle
import shutil

import pytest

from agents.policy import DEFAULT_CHECKPOINT, load_agents
from marl_sched.cli import main
from marl_sched.errors import InputError
from tests.agents.crafted import Payload


def _copy(tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(DEFAULT_CHECKPOINT, ckpt)
    return ckpt


def test_the_shipped_checkpoint_loads(tmp_path):
    agents = load_agents(_copy(tmp_path))
    assert set(agents.nets) == {"shared"}


def test_a_fifo_as_module_weights_is_refused_not_waited_on(tmp_path, capsys):
    ckpt = _copy(tmp_path)
    (ckpt / "modules" / "shared.pt").unlink()
    os.mkfifo(ckpt / "modules" / "shared.pt")
    with pytest.raises(InputError, match=r"modules/shared.pt: not a regular file"):
        load_agents(ckpt)  # before: blocked forever in torch.load
    rc = main(["evaluate", "--checkpoint", str(ckpt), "--out", str(tmp_path / "out"),
               "--max-jobs", "3", "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "not a regular file" in err
    assert not (tmp_path / "out").exists()


def test_a_device_as_module_weights_is_refused(tmp_path):
    ckpt = _copy(tmp_path)
    (ckpt / "modules" / "shared.pt").unlink()
    (ckpt / "modules" / "shared.pt").symlink_to("/dev/zero")
    with pytest.raises(InputError, match=r"modules/shared.pt: a symbolic link"):
        load_agents(ckpt)  # before: read until memory ran out


def test_a_pickle_with_code_as_module_weights_runs_nothing(tmp_path):
    ckpt = _copy(tmp_path)
    marker = tmp_path / "pwned"
    (ckpt / "modules" / "shared.pt").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(InputError, match="corrupt checkpoint"):
        load_agents(ckpt)
    assert not marker.exists()


def test_a_huge_manifest_is_refused_before_it_is_read(tmp_path):
    """manifest.json past the JSON size cap (a sparse 65 MiB file) is one line, not a
    read of the whole file into memory."""
    ckpt = _copy(tmp_path)
    with (ckpt / "manifest.json").open("r+b") as fh:
        fh.truncate(65 * 1024 * 1024)
    with pytest.raises(InputError, match=r"manifest.json: cannot read json: .*than the 64 MiB"):
        load_agents(ckpt)


def test_a_baseline_checkpoint_that_is_huge_is_refused_before_torch_reads_it(tmp_path, capsys):
    big = tmp_path / "huge.pt"
    with big.open("wb") as fh:
        fh.truncate(513 * 1024 * 1024)  # sparse: past the weights cap, no disk used
    rc = main(["evaluate", "--checkpoint", str(big), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "huge.pt" in err
    assert not (tmp_path / "out").exists()
