"""docs/extending.md: its example policy, written to a module, runs through
``simulate --policy module:Class`` and ``compare --policies``; a bad ``module:Class``
exits 2 with one line; an entry point of the ``marl_sched.policies`` group is listed
and used by its name. Its algorithm check tells the trained algorithms from the refused
ones, and the refused one it shows exits 2 with the line it shows; its topology file
composes with configs/default.yaml and simulates. (Its reward: tests/envs/
test_custom_reward.py.)"""

from __future__ import annotations

import csv
import json
import re
import shlex
import sys

import pytest

from marl_sched.cli import main
from marl_sched.config import REPO_ROOT, load_config

DOC = REPO_ROOT / "docs" / "extending.md"
DEFAULT = str(REPO_ROOT / "configs/default.yaml")
WINDOW = ["--max-jobs", "30", "--start", "0"]
#: (a bad module:Class path, what its one line says)
BAD_PATHS = [
    ("no_such_module_x:Policy", "cannot import no_such_module_x"),
    ("patient:Nope", "module patient has no Nope"),
    ("patient:np", "patient:np is not a policy"),
]


def doc_block(first_line: str, language: str = "python") -> str:
    """The doc's one fenced ``language`` block that starts with ``first_line``."""
    blocks = re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), re.S)
    (block,) = [b for b in blocks if b.startswith(first_line)]
    return block


@pytest.fixture
def patient(tmp_path, monkeypatch):
    """The doc's first Python block as ``patient.py`` on ``sys.path``."""
    (tmp_path / "patient.py").write_text(doc_block("# patient.py"))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "patient:PatientFirstFit"
    sys.modules.pop("patient", None)


def test_the_docs_policy_runs_in_simulate_and_compare(patient, tmp_path, capsys):
    out = tmp_path / "sim"
    assert main(["simulate", "--config", DEFAULT, "--policy", patient, *WINDOW,
                 "--out", str(out), "--quiet"]) == 0  # fmt: skip
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["policy"] == patient and metrics["jobs_completed"] == 30
    cmp = tmp_path / "cmp"
    assert main(["compare", "--config", DEFAULT, "--policies", f"first-fit,{patient}",
                 *WINDOW, "--out", str(cmp), "--quiet"]) == 0  # fmt: skip
    rows = {r["policy"]: r for r in csv.DictReader((cmp / "results.csv").open())}
    assert set(rows) == {"first-fit", patient}


def test_evaluate_builds_a_policy_path_with_its_checkpoint(patient, tmp_path, capsys):
    """``evaluate --policy module:Class`` passes ``--checkpoint`` to a class that takes one."""
    (tmp_path / "loading.py").write_text(
        "from patient import PatientFirstFit\n\n\n"
        "class Loading(PatientFirstFit):\n"
        "    def __init__(self, checkpoint=None):\n"
        "        self.path = checkpoint\n"
    )
    ckpt = tmp_path / "weights.bin"
    ckpt.write_bytes(b"w")
    out = tmp_path / "ev"
    assert main(["evaluate", "--checkpoint", str(ckpt), "--policy", "loading:Loading",
                 "--config", DEFAULT, *WINDOW, "--out", str(out), "--quiet"]) == 0  # fmt: skip
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["policy"] == "loading:Loading" and metrics["jobs_completed"] == 30
    assert metrics["checkpoint"].endswith("weights.bin")
    sys.modules.pop("loading", None)
    assert main(["evaluate", "--checkpoint", str(ckpt), "--policy", "loading:Nope",
                 "--out", str(tmp_path / "x")]) == 2  # fmt: skip
    assert "--policy: loading:Nope: module loading has no Nope" in capsys.readouterr().err


@pytest.mark.parametrize(("spec", "message"), BAD_PATHS)
@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_a_bad_policy_path_exits_2_with_one_line(patient, tmp_path, capsys, spec, message,
                                                 command):  # fmt: skip
    flag = "--policy" if command == "simulate" else "--policies"
    out = tmp_path / "o"
    assert main([command, "--config", DEFAULT, flag, spec, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{flag}: {spec}: {message}" in err, err
    assert not out.exists()


def test_an_entry_point_is_listed_and_used_by_name(patient, tmp_path, capsys, monkeypatch):
    from importlib import metadata

    from marl_sched.policies import base

    point = metadata.EntryPoint("patient-first-fit", patient, base.ENTRY_POINT_GROUP)

    def entry_points(group=None):
        return [point] if group == base.ENTRY_POINT_GROUP else []

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    monkeypatch.setattr(base, "_PLUGINS", [])
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    assert main(["policies"]) == 0
    listed = [ln for ln in capsys.readouterr().out.splitlines() if "patient" in ln]
    assert len(listed) == 1 and listed[0].split()[:2] == ["patient-first-fit", "plugin"]
    out = tmp_path / "sim"
    assert main(["simulate", "--config", DEFAULT, "--policy", "patient-first-fit", *WINDOW,
                 "--out", str(out), "--quiet"]) == 0  # fmt: skip


def doc_command(command: str, holding: str) -> list[str]:
    """The arguments of the doc's one ``sh`` line that runs ``marl-sched command`` with
    ``holding`` in it."""
    lines = [ln for b in re.findall(r"```sh\n(.*?)```", DOC.read_text(), re.S)
             for ln in b.splitlines()
             if ln.startswith(f"marl-sched {command} ") and holding in ln]  # fmt: skip
    (line,) = lines
    return shlex.split(line)[1:]


def test_the_docs_algorithm_check_accepts_the_trained_and_not_the_q_learners(tmp_path):
    from agents.train_sections.ppo import ALGORITHMS, REFUSED_ALGORITHMS

    space: dict = {}
    exec(compile(doc_block("# can_train.py"), "can_train.py", "exec"), space)
    for name in ALGORITHMS:
        assert space["missing_apis"](name) == [], name
    for name in ("DQN", "SAC"):
        assert name in REFUSED_ALGORITHMS and space["missing_apis"](name), name


def test_the_docs_refused_algorithm_exits_2_with_the_docs_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = doc_command("train", "train.algorithm=DQN")
    assert main(args) == 2
    err = capsys.readouterr().err
    (expected,) = [b for b in re.findall(r"```text\n(.*?)```", DOC.read_text(), re.S)
                   if "train.algorithm: DQN" in b]  # fmt: skip
    assert err == expected
    assert not (tmp_path / "runs").exists()


def _topology_file(tmp_path, text: str | None = None):
    """The doc's topology file in ``tmp_path``, its ``defaults:`` the repo's default."""
    block = text if text is not None else doc_block("# configs/small-mixed.yaml", "yaml")
    assert "defaults: [default.yaml]\n" in block
    path = tmp_path / "small-mixed.yaml"
    path.write_text(block.replace("[default.yaml]", f"[{DEFAULT}]"))
    return path


def test_the_docs_topology_composes_and_simulates(tmp_path, capsys):
    path = _topology_file(tmp_path)
    cfg, default = load_config(path), load_config(DEFAULT)
    assert cfg.topology.subclusters == 2 and cfg.topology.n_gpus == 96
    assert cfg.resolve_path(cfg.workload.trace) == default.resolve_path(default.workload.trace)
    assert cfg.workload.load == default.workload.load and cfg.env == default.env
    args = doc_command("simulate", "small-mixed.yaml")
    out = tmp_path / "small"
    args[args.index("--config") + 1] = str(path)
    args[args.index("--out") + 1] = str(out)
    assert main([*args, "--quiet"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["policy"] == "first-fit" and metrics["jobs_completed"] == 50


def test_a_bad_key_of_the_docs_topology_names_the_file_and_key(tmp_path, capsys):
    block = doc_block("# configs/small-mixed.yaml", "yaml")
    block = block.replace("subclusters: 2", "subclusters: 0")
    path = _topology_file(tmp_path, block)
    assert main(["simulate", "--config", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: topology.subclusters: must be >= 1, got 0" in err


def _golden_suite(tmp_path) -> str:
    import yaml

    from tests.marl_sched.benchmark_helpers import golden_suite_data

    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(golden_suite_data(), sort_keys=False))
    return str(path)


def _benchmark(suite: str, policies: str, out, *extra: str) -> int:
    return main(["benchmark", "--suite", suite, "--split", "test", "--policies", policies,
                 "--seeds", "1", "--out", str(out), "--quiet", *extra])  # fmt: skip


def test_benchmark_runs_a_policy_path_locally(patient, tmp_path, capsys):
    out = tmp_path / "bench"
    assert _benchmark(_golden_suite(tmp_path), f"first-fit,{patient}", out, "--local") == 0
    with (out / "runs.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["policy"] for r in rows} == {"first-fit", patient} and len(rows) == 2 * 2


@pytest.mark.parametrize(("spec", "message"), BAD_PATHS)
def test_benchmark_refuses_a_bad_policy_path_before_any_cell(patient, tmp_path, capsys, spec,
                                                             message):  # fmt: skip
    out = tmp_path / "bench"
    assert _benchmark(_golden_suite(tmp_path), f"first-fit,{spec}", out, "--local") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--policies: {spec}: {message}" in err, err
    assert not (out / "cells").exists()


@pytest.mark.ray
def test_benchmark_runs_a_policy_path_on_ray(patient, tmp_path, capsys, monkeypatch):
    """The module is on the driver's ``sys.path`` only (not on ``PYTHONPATH``): the Ray
    workers import it from the folder the driver did."""
    from marl_sched.benchmark.command import policy_import_roots

    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert policy_import_roots([patient, "first-fit"]) == [str(tmp_path.resolve())]
    out = tmp_path / "bench"
    assert _benchmark(_golden_suite(tmp_path), patient, out) == 0, capsys.readouterr().err
    with (out / "runs.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["policy"] for r in rows} == {patient} and len(rows) == 2
