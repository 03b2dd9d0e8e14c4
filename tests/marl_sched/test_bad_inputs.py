"""Bad input, as a careless or hostile user gives it (issues 26 and 27): every case
exits 2 with ONE line on stderr that names the file/line/key and the problem, no
traceback, and leaves nothing at ``--out``. One table; each row is a command line
(``{tmp}``: the test's folder, ``{repo}``: the repository), the files it needs, and a
fragment the error line must contain.

The rows reach only checks made before any work, so none starts Ray or trains.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from marl_sched.cli import main
from marl_sched.config import REPO_ROOT

TINY = "{repo}/configs/tiny.yaml"
TRAIN_TINY = "{repo}/configs/train_tiny.yaml"
OUT = "{tmp}/out"
SIM = ["simulate", "--config", TINY, "--out", OUT, "--quiet"]
TRACE_HEAD = "job_id,submit_time,num_gpus,duration,model,num_ps\n"


def _trace(*rows: str) -> dict[str, str]:
    return {"t.csv": TRACE_HEAD + "".join(r + "\n" for r in rows)}


def _config(body: str) -> dict[str, str]:
    """A config file: the tiny experiment plus ``body``."""
    return {"c.yaml": f"defaults: [{REPO_ROOT}/configs/tiny.yaml]\n{body}"}


SIM_C = ["simulate", "--config", "{tmp}/c.yaml", "--out", OUT, "--quiet"]
SIM_T = [*SIM, "--trace", "{tmp}/t.csv", "--start", "0"]
LONG = "x" * 131_073

# (id, argv, files, fragment of the error line)
CASES = [
    # ---- every section's unknown keys, refused by every command (simulate included)
    ("env-key", SIM_C, _config("env:\n  bogus: 1\n"), "c.yaml: env.bogus: unknown key"),
    ("model-key", SIM_C, _config("model:\n  bogus: 1\n"), "c.yaml: model.bogus: unknown key"),
    ("train-key", SIM_C, _config("train:\n  lrr: 1\n"), "c.yaml: train.lrr: unknown key"),
    (
        "interference-key",
        SIM_C,
        _config("interference:\n  bogus: 1\n"),
        "c.yaml: interference.bogus: unknown key",
    ),
    ("section", SIM_C, _config("tarin:\n  lr: 1\n"), "c.yaml: tarin: unknown section"),
    (
        "topology-key",
        SIM_C,
        _config("topology:\n  rackz: 1\n"),
        "c.yaml: topology.rackz: unknown key",
    ),
    (
        "compare-train-key",
        ["compare", "--config", "{tmp}/c.yaml", "--policies", "first-fit", "--out", OUT],
        _config("train:\n  lrr: 1\n"),
        "c.yaml: train.lrr: unknown key",
    ),
    (
        "interference-fit-env-key",
        ["interference", "fit", "--config", "{tmp}/c.yaml", "--out", OUT],
        _config("env:\n  bogus: 1\n"),
        "c.yaml: env.bogus: unknown key",
    ),
    # ---- YAML files
    (
        "duplicate-key",
        SIM_C,
        _config("workload:\n  load: 1.0\n  seed: 1\n  load: 2.0\n"),
        "c.yaml:5: invalid YAML: duplicate key 'load' (first on line 3)",
    ),
    (
        "defaults-missing",
        SIM_C,
        {"c.yaml": "defaults: [nope.yaml]\n"},
        "c.yaml: defaults: nope.yaml: no such config file",
    ),
    (
        "defaults-cycle",
        SIM_C,
        {"c.yaml": "defaults: [d.yaml]\n", "d.yaml": "defaults: [c.yaml]\n"},
        "defaults: c.yaml: includes itself",
    ),
    (
        "interpolation",
        SIM_C,
        _config("workload:\n  seed: ${simulation.nope}\n"),
        "cannot resolve an interpolation",
    ),
    (
        "suite-duplicate-key",
        ["benchmark", "--suite", "{tmp}/s.yaml", "--split", "validation", "--policies"]
        + ["first-fit", "--out", OUT, "--local"],
        {"s.yaml": "version: 1\nbase_config: configs/tiny.yaml\nversion: 2\n"},
        "s.yaml:3: invalid YAML: duplicate key 'version' (first on line 1)",
    ),
    # ---- overrides: validated like the file, named by key
    ("override-unknown", [*SIM, "train.lrr=1"], {}, "command line: train.lrr: unknown key"),
    ("override-section", [*SIM, "tarin.lr=1"], {}, "command line: tarin: unknown section"),
    (
        "override-nested-unknown",
        [*SIM, "env.reward.scale=1"],
        {},
        "command line: env.reward.scale: unknown key",
    ),
    ("override-type", [*SIM, "train.lr=abc"], {}, "command line: train.lr: expected a number"),
    (
        "override-int",
        [*SIM, "topology.subclusters=1.5"],
        {},
        "topology.subclusters: expected an integer, got 1.5",
    ),
    (
        "override-range",
        [*SIM, "topology.pcie_gbps=1e308"],
        {},
        "topology.pcie_gbps: must be a finite number in",
    ),
    ("override-empty", [*SIM, "workload.load="], {}, "workload.load: override 'workload.load='"),
    ("override-no-key", [*SIM, "=3"], {}, "override '=3'"),
    ("override-dots", [*SIM, "train..lr=1"], {}, "'train..lr' is not a dotted key"),
    (
        "override-under-value",
        [*SIM, "workload.seed.x=1"],
        {},
        "workload.seed.x: override: workload.seed is a value",
    ),
    ("override-list", [*SIM, "env.hints=[first-fit"], {}, "env.hints: override"),
    (
        "override-not-a-command-with-config",
        ["trace", "inspect", f"{REPO_ROOT}/configs/traces/philly_sample.csv", "a.b=1"],
        {},
        "trace inspect: unrecognized arguments: a.b=1",
    ),
    (
        "override-train",
        ["train", "--config", TRAIN_TINY, "--out", OUT, "train.lr=-1"],
        {},
        "command line: train.lr: must be > 0",
    ),
    (
        "override-train-resume",
        ["train", "--config", TRAIN_TINY, "--out", OUT, "--resume", "train.lr=0.1"],
        {},
        "train.lr: --resume continues the run",
    ),
    (
        "override-evaluate",
        ["evaluate", "--checkpoint", f"{REPO_ROOT}/checkpoints/baselines/harmony.pt"]
        + ["--config", TINY, "--out", OUT, "model.hiden=3"],
        {},
        "command line: model.hiden: unknown key",
    ),
    (
        "override-interference-fit",
        ["interference", "fit", "--config", TINY, "--out", OUT, "interference.samples=10"],
        {},
        "command line: interference.samples: must be >= 50",
    ),
    # ---- arguments: named as flags, one prefix
    ("load-0", [*SIM, "--load", "0"], {}, "marl-sched: error: --load: must be > 0"),
    ("load-tiny", [*SIM, "--load", "1e-310"], {}, "--load: must be in [0.001, 1e+06]"),
    ("load-nan", [*SIM, "--load", "nan"], {}, "--load: must be finite"),
    ("start-negative", [*SIM, "--start", "-1"], {}, "--start: must be >= 0"),
    ("max-jobs-0", [*SIM, "--max-jobs", "0"], {}, "--max-jobs: must be >= 1"),
    (
        "missing-out",
        ["simulate", "--config", TINY],
        {},
        "marl-sched: error: simulate: the following arguments are required: --out",
    ),
    ("unknown-flag", [*SIM, "--lod", "2"], {}, "simulate: unrecognized arguments: --lod"),
    # ---- trace rows: finite, bounded, placeable
    ("duration-huge", SIM_T, _trace("a,0,1,1e308,resnet-50,"), "t.csv:2: duration: must be <="),
    (
        "submit-huge",
        SIM_T,
        _trace("a,0,1,10,resnet-50,", "b,1e308,1,10,resnet-50,"),
        "t.csv:3: submit_time: must be within",
    ),
    (
        "submit-minus-huge",
        SIM_T,
        _trace("a,-1e308,1,10,resnet-50,"),
        "t.csv:2: submit_time: must be within",
    ),
    (
        "iterations-huge",
        SIM_T,
        {"t.csv": "job_id,submit_time,num_gpus,duration,iterations\na,0,1,10,1e300\n"},
        "t.csv:2: iterations: must be <=",
    ),
    ("field-too-long", SIM_T, _trace(f"{LONG},0,1,10,resnet-50,"), "t.csv:2: row: field larger"),
    (
        "gpus-100000",
        SIM_T,
        _trace("a,0,1,10,resnet-50,", "b,5,100000,10,resnet-50,"),
        "t.csv:3: job b: cannot be placed on this cluster: needs 100000 GPUs whose memory",
    ),
    (
        "num-ps-1e9",
        SIM_T,
        _trace("a,0,2,10,resnet-50,1000000000"),
        "t.csv:2: job a: cannot be placed on this cluster: needs 1000000000 parameter servers",
    ),
    (
        "memory-0.001",
        [*SIM, "topology.server_types=[{name: a, count: 8, memory_gb: 0.001}]"],
        {},
        "philly_sample.csv:2152: job philly-14243: cannot be placed on this cluster: needs 1 "
        "workers of",
    ),
    (
        "gpu-memory",
        [*SIM_T, "topology.server_types=[{name: k, count: 8, gpu_type: k80}]"],
        _trace("a,0,1,10,resnet-50,", "b,5,1,10,imagenet,"),
        "t.csv:3: job b: cannot be placed on this cluster: needs 1 GPUs whose memory holds a "
        "imagenet worker; the cluster has 0",
    ),
    (
        "pollux-application",
        [*SIM, "--trace", "{tmp}/p.csv"],
        {"p.csv": "name,time,application,num_replicas,batch_size\na,0,alexnet9000,1,32\n"},
        "p.csv:2: application: unknown model 'alexnet9000'",
    ),
    # ---- a physical quantity that would make the clock overflow
    (
        "oversubscription-1e308",
        SIM_C,
        _config("topology:\n  rack_oversubscription: 1.0e+308\n"),
        "topology.rack_oversubscription: must be a finite number in",
    ),
]


@pytest.mark.parametrize(
    ("argv", "files", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(argv, files, fragment, tmp_path, capsys):
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    argv = [
        a.format(tmp=tmp_path, repo=REPO_ROOT) if "{" in a and "[{" not in a else a for a in argv
    ]
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err and lines[0].startswith("marl-sched: error: ")
    assert "marl-sched: error: marl-sched" not in lines[0]
    assert fragment in lines[0]
    assert not (tmp_path / "out").exists()
    assert not any(p.name.startswith(".out.tmp") for p in tmp_path.iterdir())


def test_the_table_counts_its_cases():
    """The report quotes this number."""
    assert len(CASES) == len({c[0] for c in CASES}) >= 40


# ---------------------------------------------------------------- overrides that work


def test_overrides_of_every_type_reach_the_resolved_config(tmp_path):
    """int, float, list, a list of mappings, keys nested two and three deep and a null,
    anywhere on the line; the run folder's config.yaml holds them."""
    import yaml

    out = tmp_path / "run"
    argv = ["simulate", "topology.subclusters=2", "--config", str(REPO_ROOT / "configs/tiny.yaml")]
    argv += ["--out", str(out), "--quiet", "workload.load=1.5", "workload.max_jobs=20"]
    argv += ["env.hints=[first-fit, locality]", "workload.max_job_gpus=null"]
    argv += ["env.reward.time_scale_s=1800"]  # three levels deep
    argv += ["topology.server_types=[{name: a, count: 4}, {name: b, count: 4, gpu_type: p100}]"]
    assert main(argv) == 0
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["workload"]["load"] == 1.5 and isinstance(saved["workload"]["load"], float)
    assert saved["workload"]["max_jobs"] == 20 and saved["workload"]["max_job_gpus"] is None
    assert saved["env"]["hints"] == ["first-fit", "locality"]
    assert [s["gpu_type"] for s in saved["topology"]["server_types"]] == ["v100", "p100"]
    assert saved["topology"]["subclusters"] == 2
    assert saved["env"]["reward"] == {"time_scale_s": 1800}


def test_the_train_override_is_in_the_resolved_config_without_ray(tmp_path):
    """The acceptance command's plumbing: ``train.lr=0.0001`` reaches the config the
    trainer saves (resolved_config), checked without starting Ray."""
    from agents.commands import _load_train_config
    from agents.training import resolved_config

    cfg, mc, tc = _load_train_config(REPO_ROOT / "configs/train_tiny.yaml", ["train.lr=0.0001"])
    assert tc.lr == 0.0001
    assert resolved_config(cfg, mc, tc)["train"]["lr"] == 0.0001
    assert cfg.source.endswith("train_tiny.yaml")


def test_drop_unplaceable_leaves_the_job_out_and_counts_it(tmp_path, capsys):
    import json

    trace = tmp_path / "t.csv"
    rows = "".join(f"j{i},{i * 10},1,100,resnet-50,\n" for i in range(5))
    trace.write_text(TRACE_HEAD + rows + "big,25,100000,100,resnet-50,\n")
    out = tmp_path / "run"
    argv = ["simulate", "--config", str(REPO_ROOT / "configs/tiny.yaml"), "--trace", str(trace)]
    assert main([*argv, "--out", str(out), "--start", "0", "--quiet", "--drop-unplaceable"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["unplaceable_dropped"] == 1
    assert metrics["jobs_total"] == metrics["jobs_completed"] == 5


# ---------------------------------------------------------------- what gets written


def test_outputs_honour_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        out = tmp_path / "run"
        argv = ["simulate", "--config", str(REPO_ROOT / "configs/tiny.yaml"), "--out", str(out)]
        assert main([*argv, "--quiet"]) == 0
        modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()}
        assert modes == {"metrics.json": 0o644, "jobs.csv": 0o644, "config.yaml": 0o644}
        assert out.stat().st_mode & 0o777 == 0o755
        os.umask(0o027)
        from marl_sched.metrics import atomic_write_text

        atomic_write_text(tmp_path / "x.txt", "x")
        assert (tmp_path / "x.txt").stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)


def test_a_failed_run_leaves_an_existing_out_as_it_was(tmp_path, monkeypatch, capsys):
    """simulate stages its outputs beside --out: a run that fails after the checks
    (here: the simulator raising) neither adds nor removes a file there."""
    import marl_sched.runner as runner

    out = tmp_path / "run"
    out.mkdir()
    (out / "old.txt").write_text("kept")

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_policy", boom)
    argv = ["simulate", "--config", str(REPO_ROOT / "configs/tiny.yaml"), "--out", str(out)]
    assert main([*argv, "--quiet"]) == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert sorted(p.name for p in out.iterdir()) == ["old.txt"]


def test_warnings_never_precede_the_error_line(tmp_path, monkeypatch, capsys):
    import warnings

    import marl_sched.cli as cli

    def warn_then_fail(args):
        warnings.warn("a library's deprecation", DeprecationWarning, stacklevel=1)
        warnings.warn("a library's noise", UserWarning, stacklevel=1)
        from marl_sched.errors import InputError

        raise InputError("x.yaml: a: bad")

    monkeypatch.setitem(cli.LOCAL_COMMANDS, "policies", warn_then_fail)
    assert main(["policies"]) == 2
    assert capsys.readouterr().err == "marl-sched: error: x.yaml: a: bad\n"


def test_an_out_folder_that_cannot_be_written_is_refused_before_any_work(
    tmp_path, monkeypatch, capsys
):
    """A read-only parent of --out (simulated: the tests may run as root, for whom
    every folder is writable) is named before the simulation starts."""
    import marl_sched.runner as runner

    real_access = os.access
    locked = tmp_path / "ro"
    locked.mkdir()
    monkeypatch.setattr(os, "access", lambda p, m: Path(p) != locked and real_access(p, m))
    monkeypatch.setattr(runner, "run_policy", None)  # never reached
    argv = ["simulate", "--config", str(REPO_ROOT / "configs/tiny.yaml"), "--quiet"]
    assert main([*argv, "--out", str(locked / "run")]) == 2
    err = capsys.readouterr().err
    assert err == f"marl-sched: error: --out: {locked / 'run'}: cannot write in {locked}\n"
    assert list(locked.iterdir()) == []


def test_a_full_disk_while_writing_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    """ENOSPC in the middle of the outputs (after metrics.json, before jobs.csv): exit 2
    naming --out, and neither file appears (issue 27: metrics.json without jobs.csv)."""
    import errno

    import marl_sched.metrics as metrics

    real = metrics.atomic_write_bytes

    def full_after_metrics(path, data):
        if Path(path).name == "jobs.csv":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    monkeypatch.setattr(metrics, "atomic_write_bytes", full_after_metrics)
    out = tmp_path / "run"
    argv = ["simulate", "--config", str(REPO_ROOT / "configs/tiny.yaml"), "--out", str(out)]
    assert main([*argv, "--quiet"]) == 2
    assert capsys.readouterr().err == (
        f"marl-sched: error: --out: {out}: cannot write there: No space left on device\n"
    )
    assert list(tmp_path.iterdir()) == []
