"""Bad input, as a careless or hostile user gives it: every case
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


PHILLY_HEAD = "timestamp,duration,num_gpus,gpu_time,cluster\n"
ALIBABA_HEAD = "name,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n"
POLLUX_HEAD = "name,time,application,num_replicas,batch_size\n"


def _suite(name: str = "early", start: int = 5, load: float = 1.0, **extra) -> dict[str, str]:
    """A one-scenario suite over the golden trace (the whole file in the train split)."""
    trace, base = f"{REPO_ROOT}/tests/data/golden_trace.csv", f"{REPO_ROOT}/tests/data/golden.yaml"
    more = "".join(f", {k}: {v}" for k, v in extra.items())
    return {
        "s.yaml": f"version: 1\nbase_config: {base}\ntiers: {{medium: 0.6}}\n"
        f"topologies: {{small: {base}}}\nregions: [{{trace: {trace}, split: train}}]\n"
        f"scenarios:\n  train:\n    - {{name: '{name}', trace: {trace}, start: {start}, "
        f"max_jobs: 5, load: {load}, tier: medium, topology: small{more}}}\n"
    }


BENCH = ["benchmark", "--suite", "{tmp}/s.yaml", "--split", "train", "--policies", "first-fit"]
BENCH += ["--seeds", "1", "--out", OUT, "--local", "--quiet"]


def _trace(*rows: str) -> dict[str, str]:
    return {"t.csv": TRACE_HEAD + "".join(r + "\n" for r in rows)}


def _config(body: str) -> dict[str, str]:
    """A config file: the tiny experiment plus ``body``."""
    return {"c.yaml": f"defaults: [{REPO_ROOT}/configs/tiny.yaml]\n{body}"}


SIM_C = ["simulate", "--config", "{tmp}/c.yaml", "--out", OUT, "--quiet"]
SIM_T = [*SIM, "--trace", "{tmp}/t.csv", "--start", "0"]
SIM_P = [*SIM, "--policy", "planner"]
LONG = "x" * 131_073

#: a file value that is not text: made by the test itself (:func:`_make`)
FIFO = "<fifo>"
BIG = "<sparse 2 MiB>"
#: a 9-level YAML alias bomb (the "billion laughs": 9^9 strings from ~300 bytes)
BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)
#: a diamond of defaults: d0 names d1 twice, d1 names d2 twice, ... (2^30 compositions)
DIAMOND = {f"d{i}.yaml": f"defaults: [d{i + 1}.yaml, d{i + 1}.yaml]\n" for i in range(30)}
DIAMOND["d30.yaml"] = "workload:\n  seed: 1\n"
#: a chain of defaults deeper than the cap
DEEP = {f"c{i}.yaml" if i else "c.yaml": f"defaults: [c{i + 1}.yaml]\n" for i in range(40)}
DEEP["c40.yaml"] = "workload:\n  seed: 1\n"


def _make(path: Path, text: str) -> None:
    if text == FIFO:
        os.mkfifo(path)
    elif text == BIG:
        with path.open("wb") as fh:
            fh.truncate(2 << 20)
    else:
        path.write_text(text, encoding="utf-8")


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
    # ---- hostile YAML: refused before anything expands (< 1 s, ~40 MB peak)
    ("yaml-alias-bomb", SIM_C, {"c.yaml": BOMB}, "c.yaml:1: invalid YAML: aliases (*name)"),
    (
        "yaml-merge-key",
        SIM_C,
        _config("x: &w {seed: 1}\nworkload:\n  <<: *w\n"),
        "invalid YAML: aliases (*name) and merges",
    ),
    (
        "suite-alias-bomb",
        ["benchmark", "--suite", "{tmp}/s.yaml", "--split", "validation", "--policies"]
        + ["first-fit", "--out", OUT, "--local"],
        {"s.yaml": BOMB},
        "s.yaml:1: invalid YAML: aliases",
    ),
    ("defaults-diamond", [*SIM_C[:2], "{tmp}/d0.yaml", *SIM_C[3:]], DIAMOND, "composed twice"),
    ("defaults-deep", SIM_C, DEEP, "defaults: nested more than 32 files deep"),
    (
        "interpolation-env",
        SIM_C,
        _config("simulation:\n  policy: ${oc.env:HOME}\n"),
        "c.yaml: simulation.policy: interpolation '${oc.env:HOME}' is not allowed",
    ),
    (
        "interpolation-env-override",
        [*SIM, "simulation.policy=${oc.env:HOME}"],
        {},
        "command line: simulation.policy: interpolation '${oc.env:HOME}' is not allowed",
    ),
    (
        "interpolation-doubling",
        SIM_C,
        _config("env:\n  hints: ['${env.forward_rule}${env.forward_rule}']\n"),
        "c.yaml: env.hints[0]: interpolation",
    ),
    (
        "interpolation-section",
        SIM_C,
        _config("workload:\n  seed: ${topology}\n"),
        "workload.seed: interpolation ${topology} names a section",
    ),
    ("yaml-int-5000-digits", SIM_C, _config("workload:\n  seed: " + "9" * 5000 + "\n"), "c.yaml"),
    (
        "batch-size-400-digits",
        SIM_C,
        _config("interference:\n  batch_size: " + "9" * 400 + "\n"),
        "interference.batch_size: must be within +-1e+15, got an integer of 400 digits",
    ),
    (
        "control-character",
        SIM_C,
        _config('simulation:\n  policy: "first-fit\\x1b[2J"\n'),
        "simulation.policy: contains the control character '\\x1b'",
    ),
    # ---- files that are not regular files, or too large, refused before reading
    ("config-fifo", SIM_C, {"c.yaml": FIFO}, "c.yaml: cannot read config: not a regular file"),
    (
        "config-dev-zero",
        ["simulate", "--config", "/dev/zero", "--out", OUT],
        {},
        "/dev/zero: cannot read config: not a regular file",
    ),
    (
        "config-folder",
        ["simulate", "--config", "{tmp}", "--out", OUT],
        {},
        "cannot read config: is a folder, not a file",
    ),
    (
        "config-too-big",
        SIM_C,
        {"c.yaml": BIG},
        "c.yaml: cannot read config: 2,097,152 bytes, more than the 1 MiB a config file may have",
    ),
    (
        "trace-fifo",
        [*SIM, "--trace", "{tmp}/t.csv"],
        {"t.csv": FIFO},
        "t.csv: cannot read trace: not a regular file",
    ),
    (
        "trace-dev-zero",
        [*SIM, "--trace", "/dev/zero"],
        {},
        "/dev/zero: cannot read trace: not a regular file",
    ),
    # ---- trace fields: bounded integers, ASCII digits, no control characters, every format
    (
        "canonical-int-5000-digits",
        SIM_T,
        _trace("a,0," + "9" * 5000 + ",10,resnet-50,"),
        "t.csv:2: num_gpus: must have at most 15 digits, got 5,000",
    ),
    (
        "philly-int-5000-digits",
        [*SIM, "--trace", "{tmp}/p.csv", "--start", "0"],
        {"p.csv": PHILLY_HEAD + "2017-10-01 00:00:00,100," + "9" * 5000 + ",100,vc1\n"},
        "p.csv:2: num_gpus: must have at most 15 digits",
    ),
    (
        "alibaba-int-5000-digits",
        [*SIM, "--trace", "{tmp}/a.csv", "--start", "0"],
        {"a.csv": ALIBABA_HEAD + "p1," + "9" * 5000 + ",1000,0,100,10\n"},
        "a.csv:2: num_gpu: must have at most 15 digits",
    ),
    (
        "pollux-int-5000-digits",
        [*SIM, "--trace", "{tmp}/p.csv", "--start", "0"],
        {"p.csv": POLLUX_HEAD + "a,0,cifar10,1," + "9" * 5000 + "\n"},
        "p.csv:2: batch_size: must have at most 15 digits",
    ),
    (
        "alibaba-duration-beyond-1e11",
        [*SIM, "--trace", "{tmp}/a.csv", "--start", "0"],
        {"a.csv": ALIBABA_HEAD + "p1,1,1000,0,90000000000,-90000000000\n"},
        "a.csv:2: deletion_time: run time deletion_time - scheduled_time must be <= 1e+11 s",
    ),
    (
        "arabic-digit",
        SIM_T,
        _trace("a,0,\u0663,10,resnet-50,"),
        "t.csv:2: num_gpus: not an integer",
    ),
    (
        "fullwidth-float",
        SIM_T,
        _trace("a,0,1,\uff11\uff10,resnet-50,"),
        "t.csv:2: duration: not a number",
    ),
    (
        "job-id-escape",
        SIM_T,
        _trace("a\x1b[2Jb,0,1,10,resnet-50,"),
        "t.csv:2: job_id: contains the control character '\\x1b'",
    ),
    (
        "ansi-in-message",
        SIM_T,
        _trace("a,0,\x1b[31mred,10,resnet-50,"),
        "t.csv:2: num_gpus: not an integer: '\\x1b[31mred'",
    ),
    (
        "vc-control",
        SIM_T,
        {"t.csv": "job_id,submit_time,num_gpus,duration,vc\na,0,1,10,v\x07c\n"},
        "t.csv:2: vc: contains the control character '\\x07'",
    ),
    (
        "line-too-long",
        SIM_T,
        _trace("a,0,1,10,resnet-50," + " " * (1 << 20)),
        "t.csv:2: row: longer than 1,048,576 bytes",
    ),
    # ---- benchmark suites: safe names, every scenario checked before the first cell
    (
        "scenario-name-traversal",
        BENCH,
        _suite(name="../../x"),
        "s.yaml: scenarios.train[0].name: '../../x' is not a scenario name",
    ),
    (
        "scenario-window-past-end",
        BENCH,
        _suite(start=100000),
        "s.yaml: scenario early: ",
    ),
    (
        "scenario-load-out-of-range",
        BENCH,
        _suite(load="1.0e-9"),
        "s.yaml: scenarios.train[0].load: must be in [0.001, 1e+06], got 1e-09",
    ),
    (
        "scenario-start-huge",
        BENCH,
        _suite(start=10**30),
        "s.yaml: scenarios.train[0].start: must be within +-1e+15",
    ),
    # ---- sections of the wrong type
    ("env-list", SIM_C, _config("env: []\n"), "c.yaml: env: expected a mapping of keys, got []"),
    (
        "model-zero",
        SIM_C,
        _config("model: 0\n"),
        "c.yaml: model: expected a mapping of keys, got 0",
    ),
    (
        "env-list-override",
        [*SIM, "env=[]"],
        {},
        "command line: env: expected a mapping, got []",
    ),
    # ---- sizes bounded before anything is allocated
    (
        "servers-1e9",
        [
            *SIM,
            "topology.subclusters=1000",
            "topology.racks_per_subcluster=1000",
            "topology.servers_per_rack=1000",
        ],  # fmt: skip
        {},
        "command line: topology: subclusters x racks_per_subcluster x servers_per_rack = "
        "1,000,000,000 servers, more than the 100,000",
    ),
    (
        "gpus-per-group-1e8",
        [*SIM, "topology.server_types=[{name: a, count: 48, gpus_per_group: 100000000}]"],
        {},
        "topology.server_types[0].gpus_per_group: must be <= 64, got 100000000",
    ),
    (
        "cpu-cores-2e30",
        [
            *SIM,
            "topology.server_types=[{name: a, count: 48, cpu_cores: 2" + "0" * 30 + "}]",
        ],
        {},
        "topology.server_types[0].cpu_cores: must be within +-1e+15",
    ),
    (
        "total-gpus",
        [
            *SIM,
            "topology.servers_per_rack=4",
            "topology.server_types=[{name: a, count: 16, "
            "sockets: 16, groups_per_socket: 64, gpus_per_group: 64}]",
        ],  # fmt: skip
        {},
        "1,048,576 GPUs in all, more than the 1,000,000 a topology may have",
    ),
    (
        "model-hidden-1e23",
        [*SIM, "model.hidden=100000000000000000000000"],
        {},
        "model.hidden: must be within +-1e+15",
    ),
    ("model-hidden-1e6", [*SIM, "model.hidden=1000000"], {}, "model.hidden: must be <= 4,096"),
    (
        "interference-hidden",
        [*SIM, "interference.hidden=[1000000]"],
        {},
        "interference.hidden[0]: must be <= 4096",
    ),
    (
        "samples-huge",
        ["interference", "fit", "--config", TINY, "--out", OUT, "--samples", "1000000000000"],
        {},
        "--samples: must be <= 10,000,000",
    ),
    (
        "seeds-huge",
        ["benchmark", "--split", "validation", "--policies", "first-fit", "--out", OUT]
        + ["--local", "--seeds", "10000000"],
        {},
        "--seeds: must be in [0, 1,000]",
    ),
    (
        "train-grid-huge",
        [
            "train",
            "--config",
            TRAIN_TINY,
            "--out",
            OUT,
            "--seeds",
            "10",
            "--grid",
            "train.lr=1,2,3,4,5,6,7,8,9,10",
            "--grid",
            "train.gamma=1,2,3,4,5,6,7,8,9,10,11",
        ],  # fmt: skip
        {},
        "--grid: 2 grid keys x --seeds make more than 1,000 trials",
    ),
    (
        "train-iterations-huge",
        ["train", "--config", TRAIN_TINY, "--out", OUT, "train.iterations=100000000000"],
        {},
        "train.iterations: must be <= 10,000,000",
    ),
    # ---- number flags: ASCII digits, bounded length
    (
        "start-arabic-digits",
        [*SIM, "--start", "\u0663"],
        {},
        "--start: not an integer (ASCII digits",
    ),
    ("max-jobs-5000-digits", [*SIM, "--max-jobs", "9" * 5000], {}, "--max-jobs: not an integer"),
    ("load-fullwidth", [*SIM, "--load", "\uff12"], {}, "--load: not a number (ASCII"),
    # ---- messages name the right thing
    ("policy-empty", [*SIM, "--policy", ""], {}, "--policy: empty name"),
    (
        "config-policy",
        SIM_C,
        _config("simulation:\n  policy: nope\n"),
        "c.yaml: simulation.policy: unknown policy 'nope'",
    ),
    # ---- the planner's options (the planner: section) and its horizon
    ("planner-k-0", [*SIM_P, "planner.k=0"], {}, "command line: planner.k: must be an integer >= "),
    ("planner-k-float", [*SIM_P, "planner.k=1.5"], {}, "command line: planner.k: expected an"),
    (
        "planner-horizon-0",
        [*SIM_P, "planner.horizon_s=0"],
        {},
        "command line: planner.horizon_s: must be > 0, got 0",
    ),
    (
        "planner-horizon-negative",
        [*SIM_C, "--policy", "oracle"],
        _config("planner:\n  horizon_s: -5\n"),
        "c.yaml: planner.horizon_s: must be > 0, got -5",
    ),
    (
        "planner-base",
        [*SIM_P, "planner.base=nope"],
        {},
        "command line: planner.base: must be one of lookahead, ",
    ),
    (
        "planner-base-not-a-heuristic",
        [*SIM_P, "planner.base=oracle"],
        {},
        "command line: planner.base: must be one of lookahead, ",
    ),
    ("planner-key", [*SIM_P, "planner.kk=2"], {}, "command line: planner.kk: unknown key"),
    (
        "planner-min-run",
        [*SIM_P, "planner.min_run_s=-1"],
        {},
        "command line: planner.min_run_s: must be a finite number >= 0, got -1",
    ),
    (
        "planner-candidate",
        [*SIM_C, "--policy", "oracle"],
        _config("planner:\n  candidates: [tetris, oracle]\n"),
        "c.yaml: planner.candidates: must be registered heuristics or levers (",
    ),
    (
        "planner-window-shorter-than-horizon",
        SIM_P,
        {},
        "tiny.yaml: planner.horizon_s: 3600 s is longer than the window's span, 2477 s",
    ),
    (
        "oracle-window-shorter-than-horizon",
        [*SIM, "--policy", "oracle", "planner.horizon_s=1200", "--max-jobs", "10"],
        {},
        "tiny.yaml: planner.horizon_s: 1200 s is longer than the window's span, 13.5 s",
    ),
    (
        "compare-planner-window",
        ["compare", "--config", TINY, "--policies", "first-fit,planner", "--out", OUT],
        {},
        "tiny.yaml: planner.horizon_s: 3600 s is longer than the window's span, 2477 s",
    ),
    (
        "compare-planner-k",
        ["compare", "--config", TINY, "--policies", "planner", "--out", OUT, "planner.k=-1"],
        {},
        "command line: planner.k: must be an integer >= 1, got -1",
    ),
    (
        "benchmark-planner-window",
        [*BENCH[:6], "first-fit,planner", *BENCH[7:]],
        _suite(),
        "tests/data/golden.yaml: planner.horizon_s: 3600 s is longer than the window's span, 543 s",
    ),
    (
        "benchmark-planner-base",
        [*BENCH[:6], "planner", *BENCH[7:], "planner.base=marl"],
        _suite(),
        "command line: planner.base: must be one of lookahead, ",
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
        _make(tmp_path / name, text)
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{repo}", str(REPO_ROOT)) for a in argv]
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
    from agents.records import resolved_config

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
    naming --out, and neither file appears (no metrics.json without jobs.csv)."""
    import errno

    import marl_sched.files as files

    real = files.atomic_write_bytes

    def full_after_metrics(path, data):
        if Path(path).name == "jobs.csv":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    monkeypatch.setattr(files, "atomic_write_bytes", full_after_metrics)
    out = tmp_path / "run"
    argv = ["simulate", "--config", str(REPO_ROOT / "configs/tiny.yaml"), "--out", str(out)]
    assert main([*argv, "--quiet"]) == 2
    assert capsys.readouterr().err == (
        f"marl-sched: error: --out: {out}: cannot write there: No space left on device\n"
    )
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------- files the tool wrote, read back


@pytest.fixture(scope="module")
def finished_benchmark(tmp_path_factory) -> Path:
    """A one-cell benchmark folder (``out``) beside its suite (``s.yaml``)."""
    root = tmp_path_factory.mktemp("bench")
    _make(root / "s.yaml", _suite()["s.yaml"])
    assert main([a.replace("{tmp}", str(root)) for a in BENCH]) == 0
    return root


def _cell_file(out: Path) -> Path:
    (cell,) = (out / "cells").iterdir()
    return cell


def _edit_json(path: Path, change) -> None:
    import json

    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _folder_for_cell(out: Path) -> None:
    cell = _cell_file(out)
    cell.unlink()
    cell.mkdir()


CORRUPT = [
    (
        "cell-truncated",
        lambda out: _cell_file(out).write_text(_cell_file(out).read_text()[:30]),
        "not a cell written by marl-sched",
    ),
    ("cell-list", lambda out: _cell_file(out).write_text("[1, 2]"), "exactly 'row' and 'jct'"),
    (
        "cell-other-scenario",
        lambda out: _edit_json(_cell_file(out), lambda d: d["row"].update(scenario="x")),
        "it holds x / first-fit / seed 0, not early / first-fit / seed 0",
    ),
    (
        "cell-jct-text",
        lambda out: _edit_json(_cell_file(out), lambda d: d.update(jct=["a"])),
        "'jct' is not a list of finite numbers",
    ),
    ("cell-folder", _folder_for_cell, "not a cell file written by marl-sched"),
    (
        "manifest-list",
        lambda out: (out / "benchmark.json").write_text("[]"),
        "benchmark.json: not a benchmark.json written by marl-sched (expected an object",
    ),
    (
        "manifest-no-digest",
        lambda out: _edit_json(out / "benchmark.json", lambda d: d.pop("suite_sha256")),
        "(suite_sha256 missing or of the wrong type)",
    ),
    (
        "manifest-huge",
        lambda out: os.truncate(out / "benchmark.json", 100 << 20),
        "benchmark.json: cannot read json: 104,857,600 bytes, more than the 64 MiB",
    ),
]


@pytest.mark.parametrize(
    ("corrupt", "fragment"), [c[1:] for c in CORRUPT], ids=[c[0] for c in CORRUPT]
)
def test_a_file_the_benchmark_wrote_and_someone_changed_is_one_line_exit_2(
    finished_benchmark, corrupt, fragment, tmp_path, capsys
):
    import shutil

    shutil.copy(finished_benchmark / "s.yaml", tmp_path / "s.yaml")
    shutil.copytree(finished_benchmark / "out", tmp_path / "out")
    corrupt(tmp_path / "out")
    before = sorted((p.relative_to(tmp_path), p.is_dir()) for p in tmp_path.rglob("*"))
    capsys.readouterr()
    assert main([a.replace("{tmp}", str(tmp_path)) for a in BENCH]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert fragment in err
    assert sorted((p.relative_to(tmp_path), p.is_dir()) for p in tmp_path.rglob("*")) == before


# ---------------------------------------------------------- signals and staging folders


def _staging(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if ".tmp-" in p.name]


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_terminating_signal_removes_the_staging_folder(sig, tmp_path, monkeypatch, capsys):
    import signal
    import time

    import marl_sched.runner as runner

    signum = getattr(signal, sig)

    def killed_midway(*args, **kwargs):
        assert _staging(tmp_path)  # the run writes into its staging folder
        os.kill(os.getpid(), signum)
        time.sleep(30)  # the handler raises in this frame long before
        raise AssertionError("the signal did not stop the run")

    monkeypatch.setattr(runner, "simulate", killed_midway)
    before = signal.getsignal(signum)
    assert main(
        [a.replace("{tmp}", str(tmp_path)).replace("{repo}", str(REPO_ROOT)) for a in SIM]
    ) == (128 + signum)
    assert capsys.readouterr().err.splitlines() == [f"marl-sched: terminated by {sig}"]
    assert list(tmp_path.iterdir()) == []  # no --out, no staging folder
    assert signal.getsignal(signum) == before  # main put the handler back


def test_sigterm_from_outside_leaves_no_staging_folder(tmp_path):
    """The real thing: another process sends SIGTERM while ``simulate`` runs."""
    import signal
    import subprocess
    import sys
    import time

    trace = tmp_path / "t.csv"
    rows = "".join(f"j{i},{i},1,{3600 + i % 7},resnet-50,\n" for i in range(20000))
    trace.write_text(TRACE_HEAD + rows)
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "marl_sched.cli", "simulate", "--quiet"]
    argv += ["--config", str(REPO_ROOT / "configs/tiny.yaml"), "--trace", str(trace)]
    argv += ["--start", "0", "--max-jobs", "20000", "--out", str(out)]
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not _staging(tmp_path) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _staging(tmp_path), "the run never started writing"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM
    assert err.splitlines() == ["marl-sched: terminated by SIGTERM"]
    assert not out.exists() and not _staging(tmp_path)


def test_a_staging_folder_left_by_a_killed_run_is_removed_by_the_next(tmp_path, capsys):
    dead = 2**22 + 12345  # above the default pid_max: no such process
    live = 1  # init: running, not ours
    for pid in (dead, live):
        (tmp_path / f".out.tmp-{pid}").mkdir()
        (tmp_path / f".out.tmp-{pid}" / "metrics.json").write_text("{}")
    (tmp_path / ".other.tmp-7").mkdir()  # another --out's: not touched
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{repo}", str(REPO_ROOT)) for a in SIM]
    assert main(argv) == 0
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [".other.tmp-7", f".out.tmp-{live}", "out"]


def test_an_out_that_links_to_a_folder_is_accepted_and_the_link_kept(tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "out").symlink_to(real)
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{repo}", str(REPO_ROOT)) for a in SIM]
    assert main(argv) == 0
    assert (tmp_path / "out").is_symlink()
    assert sorted(p.name for p in real.iterdir()) == ["config.yaml", "jobs.csv", "metrics.json"]
    assert not _staging(tmp_path)


@pytest.mark.parametrize(
    ("target", "fragment"),
    [("nothing", "a link to nothing"), ("file", "exists and is not a folder")],
)
def test_an_out_that_links_to_no_folder_is_refused_before_work(
    target, fragment, tmp_path, monkeypatch, capsys
):
    import marl_sched.runner as runner

    if target == "file":
        (tmp_path / "file").write_text("x")
    (tmp_path / "out").symlink_to(tmp_path / target)
    monkeypatch.setattr(runner, "load_workload", lambda *a, **k: pytest.fail("work started"))
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{repo}", str(REPO_ROOT)) for a in SIM]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert fragment in line


def test_a_long_out_name_keeps_its_staging_name_within_255_bytes(tmp_path, monkeypatch):
    from marl_sched import metrics

    name = "é" * 122 + "x"  # 245 bytes: a valid name, whose plain staging name is not
    seen = []
    real_mkdir = Path.mkdir

    def mkdir(self, *args, **kwargs):
        seen.append(self.name)
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(metrics.Path, "mkdir", mkdir)
    argv = ["simulate", "--config", str(REPO_ROOT / TINY.removeprefix("{repo}/"))]
    assert main([*argv, "--out", str(tmp_path / name), "--quiet"]) == 0
    staging = [n for n in seen if ".tmp-" in n]
    assert staging and all(len(n.encode()) <= 255 for n in staging)
    assert (tmp_path / name / "metrics.json").is_file()
