"""Configs: every shipped config loads; every bad key or value is named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from marl_sched.config import REPO_ROOT, absolute_paths, load_config
from marl_sched.errors import InputError

SHIPPED = sorted((REPO_ROOT / "configs").glob("*.yaml"))
RECIPES = sorted((REPO_ROOT / "configs" / "recipes").glob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED + RECIPES, ids=lambda p: p.name)
def test_shipped_configs_load(path):
    cfg = load_config(path)
    assert cfg.topology.n_servers == sum(s.count for s in cfg.topology.server_types)


def test_fixed_configs_exist_with_their_sizes():
    from marl_sched.topology import Topology

    names = {p.name for p in SHIPPED}
    assert {"default.yaml", "philly.yaml", "large.yaml"} <= names
    default = Topology(load_config(REPO_ROOT / "configs/default.yaml").topology)
    assert default.n_subclusters == 4 and 200 <= default.n_gpus <= 999
    philly = Topology(load_config(REPO_ROOT / "configs/philly.yaml").topology)
    assert 500 <= philly.n_servers <= 600 and 2400 <= philly.n_gpus <= 2600
    large = Topology(load_config(REPO_ROOT / "configs/large.yaml").topology)
    assert (large.n_servers, large.n_gpus, large.n_subclusters) == (4000, 32000, 16)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "text, message",
    [
        ("topology:\n  racks: 3\n", "topology.racks: unknown key"),
        ("topology:\n  subclusters: 0\n", "topology.subclusters: must be >= 1, got 0"),
        ("topology:\n  subclusters: two\n", "topology.subclusters: expected an integer, got 'two'"),
        ("workload:\n  load: -1\n", "workload.load: must be > 0, got -1"),
        ("simulation:\n  ordering: lifo\n", "simulation.ordering: must be one of"),
        ("simulation:\n  migration_cost: -5\n", "simulation.migration_cost: must be measured"),
        ("simulation:\n  migration_cost: soon\n", "simulation.migration_cost: must be measured"),
        ("bogus: {}\n", "bogus: unknown section"),
        (
            "topology:\n  subclusters: 1\n  racks_per_subcluster: 1\n  servers_per_rack: 2\n"
            "  server_types:\n    - {name: a, count: 3}\n",
            "topology.server_types: counts sum to 3 servers, but",
        ),
        (
            "topology:\n  subclusters: 1\n  racks_per_subcluster: 1\n  servers_per_rack: 1\n"
            "  server_types:\n    - {name: a, count: 1, gpu_type: h999}\n",
            "topology.server_types[0].gpu_type: unknown GPU type 'h999'",
        ),
        (
            "topology:\n  server_types:\n    - {count: 48}\n",
            "topology.server_types[0].name: required key is missing",
        ),
        ("topology: [1, 2\n", "invalid YAML"),
    ],
)
def test_bad_config_names_file_and_key(tmp_path, text, message):
    p = _write(tmp_path, text)
    with pytest.raises(InputError) as err:
        load_config(p)
    assert str(err.value).startswith(f"{p}:")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_config_file(tmp_path):
    with pytest.raises(InputError, match="cannot read config"):
        load_config(tmp_path / "nope.yaml")


def test_round_trip_to_dict(tmp_path):
    import yaml

    cfg = load_config(REPO_ROOT / "configs/default.yaml")
    # relative paths resolve against the config's folder: a copy elsewhere records them absolute
    p = _write(tmp_path, yaml.safe_dump(absolute_paths(cfg.to_dict(), cfg)))
    again = load_config(p)
    assert again.topology == cfg.topology
    assert again.workload.trace == str(cfg.resolve_path(cfg.workload.trace))


@pytest.mark.parametrize(
    ("key", "value"),
    [("rack_oversubscription", 1e308), ("pcie_gbps", 1e-320), ("qpi_gbps", float("nan")),
     ("subcluster_uplink_gbps", float("inf"))],
)  # fmt: skip
def test_physical_quantities_out_of_range_are_refused(key, value):
    """Values that would make the simulator's clock overflow or stall (NaN time) are
    input errors naming the key, not a hang."""
    import dataclasses

    from marl_sched.config import PHYSICAL_RANGE, REPO_ROOT, TopologyConfig, load_config
    from marl_sched.errors import InputError

    topo = load_config(REPO_ROOT / "configs" / "tiny.yaml").topology
    raw = {f.name: getattr(topo, f.name) for f in dataclasses.fields(TopologyConfig)}
    raw["server_types"] = [dataclasses.asdict(s) for s in topo.server_types]
    raw[key] = value
    from marl_sched.config import parse_section

    with pytest.raises(InputError, match=rf"topology\.{key}: must be (a )?finite"):
        parse_section(TopologyConfig, raw, "x.yaml", "topology")
    assert PHYSICAL_RANGE[0] <= getattr(topo, key) <= PHYSICAL_RANGE[1]


# ------------------------------------------------------------ composition and overrides


def test_defaults_merge_mappings_key_by_key_and_replace_lists_and_values(tmp_path):
    from marl_sched.config import compose_file

    (tmp_path / "sub").mkdir()
    (tmp_path / "a.yaml").write_text(
        "workload: {load: 1.0, seed: 1}\nenv: {hints: [first-fit, locality], pad: 2}\n"
    )
    (tmp_path / "b.yaml").write_text("workload: {seed: 2}\n")
    (tmp_path / "sub" / "c.yaml").write_text(
        "defaults: [../a.yaml, ../b.yaml]\nenv: {hints: [tetris]}\nworkload: {load: 3.0}\n"
    )
    assert compose_file(tmp_path / "sub" / "c.yaml") == {
        "workload": {"load": 3.0, "seed": 2},  # b over a, then the file over both
        "env": {"hints": ["tetris"], "pad": 2},  # a list is replaced whole
    }
    (tmp_path / "d.yaml").write_text("defaults: a.yaml\n")  # one parent without a list
    assert compose_file(tmp_path / "d.yaml")["workload"] == {"load": 1.0, "seed": 1}


def test_defaults_must_be_a_list_of_files(tmp_path):
    path = _write(tmp_path, "defaults: {a: 1}\n")
    with pytest.raises(InputError, match=r"c.yaml: defaults: expected a list of config files"):
        load_config(path)


def test_a_duplicate_key_is_named_at_any_depth(tmp_path):
    path = _write(tmp_path, "env:\n  reward:\n    kind: a\n    kind: b\n")
    with pytest.raises(InputError, match=r"c.yaml:4: invalid YAML: duplicate key 'kind'"):
        load_config(path)


def test_overrides_apply_after_the_file_and_name_the_command_line(tmp_path):
    path = _write(tmp_path, "workload:\n  load: 2.0\nenv:\n")
    cfg = load_config(path, ["workload.load=0.5", "env.hints=[first-fit]", "model.hidden=8"])
    assert cfg.workload.load == 0.5 and cfg.env == {"hints": ["first-fit"]}
    assert cfg.model == {"hidden": 8} and cfg.source == str(path)
    assert load_config(path).workload.load == 2.0  # the file itself is unchanged
    with pytest.raises(InputError, match=r"^command line: workload.loadd: unknown key"):
        load_config(path, ["workload.loadd=1"])
    # the file's own problem names the file even when overrides would fix it
    bad = _write(tmp_path, "workload:\n  load: -1\n")
    with pytest.raises(InputError, match=r"c.yaml: workload.load: must be > 0"):
        load_config(bad, ["workload.load=1"])


def test_the_saved_config_reads_back_to_the_same_experiment(tmp_path):
    cfg = load_config(REPO_ROOT / "configs/train_tiny.yaml", ["train.lr=0.0001"])
    saved = tmp_path / "config.yaml"
    saved.write_text(cfg.to_yaml())
    back = load_config(saved)
    assert back.to_dict() == absolute_paths(cfg.to_dict(), cfg) and back.train["lr"] == 0.0001
    assert back.to_yaml() == cfg.to_yaml()


def test_checking_every_section_loads_neither_torch_nor_ray():
    """The owned sections' parsers (env, model, train, interference) are torch-free, so
    ``simulate`` checks them without loading the training stack."""
    import subprocess
    import sys

    code = (
        "import sys; from marl_sched.config import load_config;"
        f"load_config({str(REPO_ROOT / 'configs/default.yaml')!r});"
        "print(','.join(m for m in ('torch', 'ray', 'torch_geometric') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_relative_path_resolves_against_the_config_files_folder(tmp_path):
    """Issue 36: a copied config read the original checkout's trace."""
    import shutil

    sample = REPO_ROOT / "configs" / "traces" / "philly_sample.csv"
    shipped = load_config(REPO_ROOT / "configs" / "tiny.yaml")
    assert shipped.resolve_path(shipped.workload.trace) == sample  # repo-relative, in the repo
    raw = yaml.safe_load((REPO_ROOT / "configs" / "tiny.yaml").read_text())
    raw["workload"]["trace"] = "traces/philly_sample.csv"
    copy = tmp_path / "exp" / "tiny.yaml"
    copy.parent.mkdir()
    copy.write_text(yaml.safe_dump(raw))
    cfg = load_config(copy)
    # a copy elsewhere never falls back to the checkout
    assert cfg.resolve_path(cfg.workload.trace) == tmp_path / "exp" / "traces" / "philly_sample.csv"
    raw["workload"]["trace"] = "configs/traces/philly_sample.csv"  # the checkout's layout
    copy.write_text(yaml.safe_dump(raw))
    cfg = load_config(copy)
    assert (
        cfg.resolve_path(cfg.workload.trace)
        == tmp_path / "exp" / "configs" / "traces" / sample.name
    )
    (tmp_path / "exp" / "traces").mkdir()
    shutil.copy(sample, tmp_path / "exp" / "traces" / sample.name)
    raw["workload"]["trace"] = "traces/philly_sample.csv"
    copy.write_text(yaml.safe_dump(raw))
    cfg = load_config(copy)
    assert cfg.resolve_path(cfg.workload.trace) == tmp_path / "exp" / "traces" / sample.name
    assert cfg.resolve_path(str(sample)) == sample  # absolute: as is
    assert load_config(cfg).source == str(copy)


def test_a_run_folder_records_the_trace_it_read_as_an_absolute_path(tmp_path):
    from marl_sched.cli import main

    out = tmp_path / "run"
    argv = ["simulate", "--config", str(REPO_ROOT / "configs" / "tiny.yaml"), "--max-jobs", "5",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    saved = load_config(out / "config.yaml")
    assert saved.workload.trace == str(REPO_ROOT / "configs" / "traces" / "philly_sample.csv")
    assert Path(saved.workload.trace).is_absolute()


def test_absolute_paths_resolves_every_path_key_and_nothing_else():
    from marl_sched.config import absolute_paths

    cfg = load_config(REPO_ROOT / "configs" / "default.yaml")
    data = {"workload": {"trace": "configs/traces/philly_sample.csv", "start": 200},
            "train": {"extra_windows": [{"trace": "configs/traces/pollux/workload-2.csv",
                                         "share": 0.25}],
                      "eval_trace": None, "algorithm": "PPO"},
            "interference": {"real_data": "/abs/data"}}  # fmt: skip
    out = absolute_paths(data, cfg)
    assert out["workload"] == {"trace": str(REPO_ROOT / "configs/traces/philly_sample.csv"),
                               "start": 200}  # fmt: skip
    window = out["train"]["extra_windows"][0]
    assert window == {"trace": str(REPO_ROOT / "configs/traces/pollux/workload-2.csv"),
                      "share": 0.25}  # fmt: skip
    assert out["train"]["eval_trace"] is None and out["train"]["algorithm"] == "PPO"
    assert out["interference"]["real_data"] == "/abs/data"
