"""The one checkpoint digest (marl_sched.checkpoints.checkpoint_digest): what the benchmark's
cells are keyed by, what ``compare``/``evaluate`` record and what ``tune`` records,
over the weights and the manifest only, reading only regular files under a size cap
and following no link."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from marl_sched.benchmark.cells import checkpoint_id
from marl_sched.checkpoints import checkpoint_digest
from marl_sched.config import REPO_ROOT
from marl_sched.errors import InputError

SHIPPED = REPO_ROOT / "checkpoints" / "marl-default"
BASELINE = REPO_ROOT / "checkpoints" / "baselines" / "mlfs_rl.pt"


@pytest.fixture
def ckpt(tmp_path):
    """A copy of the shipped checkpoint's inference files plus what lies beside them."""
    c = tmp_path / "ckpt"
    (c / "modules").mkdir(parents=True)
    for rel in ("manifest.json", "modules/shared.pt", "README.md", "config.yaml"):
        shutil.copy(SHIPPED / rel, c / rel)
    return c


def test_the_cell_id_is_the_digest_of_the_weights_and_the_manifest(ckpt, tmp_path):
    """Catches a digest over every file of the folder (a README edit changed the
    digest the docs cite) and a second digest function drifting from this one."""
    digest = checkpoint_digest(SHIPPED)
    assert len(digest) == 64 and checkpoint_id(SHIPPED) == digest[:12]
    assert checkpoint_digest(ckpt) == digest  # the README and config do not count
    (ckpt / "README.md").write_text("edited\n")
    (ckpt / "notes.txt").write_text("beside\n")
    (ckpt / "warm_start").mkdir()
    assert checkpoint_digest(ckpt) == digest
    (ckpt / "modules" / "shared.pt").write_bytes(b"other weights")
    assert checkpoint_digest(ckpt) != digest
    shutil.copy(SHIPPED / "modules" / "shared.pt", ckpt / "modules" / "shared.pt")
    (ckpt / "manifest.json").write_text((SHIPPED / "manifest.json").read_text() + " ")
    assert checkpoint_digest(ckpt) != digest
    assert len(checkpoint_id(BASELINE)) == 12  # a checkpoint file: its own bytes


def test_a_run_folder_digests_the_checkpoint_it_resolves_to(ckpt, tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copytree(ckpt, run / "checkpoints" / "iter_000003")
    (run / "checkpoints" / "best").write_text("iter_000003\n")
    assert checkpoint_digest(run) == checkpoint_digest(ckpt)


def _fast_refusal(path, match):
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=match) as info:
        checkpoint_digest(path)
    assert time.perf_counter() - t0 < 5.0
    assert "\n" not in str(info.value)
    return str(info.value)


@pytest.mark.parametrize("target", ["/proc/self/pagemap", "/dev/zero", "SHIPPED"])
def test_a_link_among_the_weights_is_refused_unread(ckpt, target):
    """Catches following links: ``/proc/self/pagemap`` or ``/dev/zero`` would be read
    for ever; a link to the real weights is refused too (never followed)."""
    target = str(SHIPPED / "modules" / "shared.pt") if target == "SHIPPED" else target
    (ckpt / "modules" / "extra.pt").symlink_to(target)
    assert "extra.pt" in _fast_refusal(ckpt, "symlink|symbolic link")


def test_links_to_the_manifest_the_modules_or_the_checkpoint_are_refused(ckpt, tmp_path):
    (ckpt / "manifest.json").unlink()
    (ckpt / "manifest.json").symlink_to(SHIPPED / "manifest.json")
    _fast_refusal(ckpt, "manifest.json: .*(symlink|symbolic link)")
    (ckpt / "manifest.json").unlink()
    shutil.copy(SHIPPED / "manifest.json", ckpt / "manifest.json")
    shutil.rmtree(ckpt / "modules")
    (ckpt / "modules").symlink_to(SHIPPED / "modules", target_is_directory=True)
    _fast_refusal(ckpt, "modules: (not a folder|a symbolic link)")
    link = tmp_path / "link.pt"
    link.symlink_to(BASELINE)
    _fast_refusal(link, "symlink|symbolic link")


def test_a_huge_sparse_file_or_a_fifo_is_refused_without_reading(ckpt):
    """A 64 GiB sparse file among the weights is refused by its size before a byte is
    read; beside the weights it is not read at all; a FIFO is never waited on."""
    big = ckpt / "big.bin"
    with big.open("wb") as fh:
        fh.truncate(64 << 30)
    assert checkpoint_digest(ckpt) == checkpoint_digest(SHIPPED)
    os.rename(big, ckpt / "modules" / "big.pt")
    _fast_refusal(ckpt, "big.pt: .*bytes, more than")
    (ckpt / "modules" / "big.pt").unlink()
    os.mkfifo(ckpt / "modules" / "pipe.pt")
    _fast_refusal(ckpt, "pipe.pt: .*not a regular file")


def test_a_missing_checkpoint_is_one_line(tmp_path):
    _fast_refusal(tmp_path / "nowhere", "no such file or folder")
    (tmp_path / "empty").mkdir()
    _fast_refusal(tmp_path / "empty", "not a checkpoint")
