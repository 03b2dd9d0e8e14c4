"""Config sections: every shipped config loads; every bad key or value is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from marl_sched.config import REPO_ROOT, load_config
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
