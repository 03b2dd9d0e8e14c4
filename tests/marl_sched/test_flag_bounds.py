"""Bounds checked before any work: the migration cost, ``--seeds``, ``--checkpoint``
naming a policy twice, server type names."""

from __future__ import annotations

import pytest

from marl_sched.cli import main
from marl_sched.config import REPO_ROOT
from marl_sched.migration import MAX_COST_JOB_MULTIPLE

GOLDEN = str(REPO_ROOT / "tests" / "data" / "golden.yaml")
TRACE = str(REPO_ROOT / "tests" / "data" / "golden_trace.csv")


def _refused(capsys, argv, words: str, out) -> None:
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith("marl-sched: error: "), err
    assert words in err, err
    assert not out.exists()


def test_a_migration_cost_past_the_bound_is_refused(tmp_path, capsys):
    out = tmp_path / "sim"
    base = ["simulate", "--config", GOLDEN, "--trace", TRACE, "--out", str(out), "--quiet"]
    for override in ("simulation.migration_cost=1e300", "simulation.migration_cost_scale=1e9"):
        _refused(capsys, [*base, override], "simulation.migration_cost", out)
    _refused(capsys, [*base, "simulation.migration_cost=1e300"],
             f"more than {MAX_COST_JOB_MULTIPLE} times the longest job", out)  # fmt: skip
    assert main([*base, "simulation.migration_cost=600"]) == 0  # an ordinary cost runs


@pytest.mark.parametrize("seeds", ["\u0663", "1_0", "2.0", "0x2"])
def test_compare_seeds_take_ascii_digits_only(tmp_path, capsys, seeds):
    out = tmp_path / "cmp"
    _refused(capsys, ["compare", "--config", GOLDEN, "--trace", TRACE, "--policies",
                      "first-fit", "--seeds", seeds, "--out", str(out), "--quiet"],
             "--seeds", out)  # fmt: skip


def test_a_policy_named_twice_in_checkpoint_is_refused(tmp_path, capsys):
    out = tmp_path / "cmp"
    _refused(capsys, ["compare", "--config", GOLDEN, "--trace", TRACE, "--policies",
                      "harmony,first-fit", "--checkpoint",
                      "harmony=checkpoints/baselines/harmony.pt,harmony=x.pt",
                      "--out", str(out), "--quiet"], "'harmony' is named twice", out)  # fmt: skip


@pytest.mark.parametrize("name", ["' '", "''", "'a b'", "'x\\u202e'", "'-x'"])
def test_a_server_type_name_that_is_not_an_identifier_is_refused(tmp_path, capsys, name):
    out = tmp_path / "sim"
    types = (f"topology.server_types=[{{name: {name}, count: 8, gpu_type: v100, sockets: 2, "
             "groups_per_socket: 2, gpus_per_group: 2, cpu_cores: 48, memory_gb: 384, "
             "nic_gbps: 25}]")  # fmt: skip
    _refused(capsys, ["simulate", "--config", GOLDEN, "--trace", TRACE, "--out", str(out),
                      "--quiet", types], "server_types[0].name", out)  # fmt: skip
