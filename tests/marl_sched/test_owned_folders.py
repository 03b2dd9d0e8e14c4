"""The folder helpers of :mod:`marl_sched.files` and the benchmark ``--out`` folder:
a link, FIFO or device anywhere in a folder the tool owns is refused with one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from marl_sched.cli import main
from marl_sched.errors import InputError
from marl_sched.files import check_owned_tree, owned_path
from tests.marl_sched.benchmark_helpers import golden_suite_data

pytestmark = pytest.mark.usefixtures("fingerprint_cache")


def test_check_owned_tree_refuses_a_link_or_fifo_at_any_depth(tmp_path):
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_text("x")
    check_owned_tree(root, "--out")
    check_owned_tree(tmp_path / "missing", "--out")
    (root / "a" / "b" / "l").symlink_to(tmp_path)
    with pytest.raises(InputError, match=r"--out: .*a/b/l: a symbolic link"):
        check_owned_tree(root, "--out")
    (root / "a" / "b" / "l").unlink()
    os.mkfifo(root / "a" / "p")
    with pytest.raises(InputError, match="FIFO"):
        check_owned_tree(root, "--out")


def test_check_owned_tree_is_bounded(tmp_path):
    for i in range(5):
        (tmp_path / f"f{i}").write_text("")
    with pytest.raises(InputError, match="more than 4 entries"):
        check_owned_tree(tmp_path, "--out", max_entries=4)


def test_owned_path_refuses_a_linked_step(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "cells").symlink_to(tmp_path / "real")
    with pytest.raises(InputError, match="cells: a symbolic link"):
        owned_path(tmp_path, "cells/x.json", "--out")
    with pytest.raises(InputError, match="not inside"):
        owned_path(tmp_path, "../x", "--out")
    assert owned_path(tmp_path, "new/x.json", "--out") == tmp_path / "new" / "x.json"


@pytest.mark.parametrize("name", ["cells", "ccdf"])
def test_benchmark_out_with_a_linked_folder_is_refused(tmp_path, capsys, name):
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump(golden_suite_data(), sort_keys=False))
    out, elsewhere = tmp_path / "bench", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / name).symlink_to(elsewhere, target_is_directory=True)
    rc = main(["benchmark", "--suite", str(suite), "--split", "train", "--policies",
               "first-fit", "--seeds", "1", "--out", str(out), "--local", "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and f"{name}: a symbolic link" in err
    assert list(elsewhere.iterdir()) == []
    assert sorted(p.name for p in out.iterdir()) == [name]


def test_benchmark_report_checks_again_when_writing(tmp_path):
    from marl_sched.benchmark.report import write_report

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "ccdf").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InputError, match="ccdf: a symbolic link"):
        write_report(Path(tmp_path), [], ["first-fit"], 1)
