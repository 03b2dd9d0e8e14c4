"""The datacenter hierarchy as arrays, and its links."""

from __future__ import annotations

import numpy as np

from marl_sched.config import REPO_ROOT, load_config
from marl_sched.topology import LINK_NIC, LINK_RACK, Topology
from tests.helpers import tiny_topology


def test_counts_and_parents_are_consistent():
    t = tiny_topology(
        subclusters=2, racks=3, servers=2, sockets=2, groups_per_socket=2, gpus_per_group=2
    )
    assert (t.n_subclusters, t.n_racks, t.n_servers) == (2, 6, 12)
    assert (t.n_sockets, t.n_groups, t.n_gpus) == (24, 48, 96)
    # every level's parent array points to a valid entity, contiguous blocks
    assert np.all(np.diff(t.group_server) >= 0) and np.all(np.diff(t.server_rack) >= 0)
    assert np.array_equal(t.group_rack, t.server_rack[t.group_server])
    assert np.array_equal(t.server_gpus, np.full(12, 8))
    assert np.array_equal(np.bincount(t.gpu_group), t.group_capacity)
    for s in range(t.n_servers):
        a, n = t.server_groups_start[s], t.server_n_groups[s]
        assert np.all(t.group_server[a : a + n] == s)


def test_heterogeneous_types_and_link_bandwidths():
    cfg = load_config(REPO_ROOT / "configs/default.yaml")
    t = Topology(cfg.topology)
    assert len(set(t.server_gpu_speed)) == 3  # v100, p100, k80
    assert t.server_gpu_speed[0] > t.server_gpu_speed[-1]  # v100 first, k80 last
    # rack uplink = sum of the rack's NICs / oversubscription, same efficiency as NICs
    rack0 = t.link_bw[t.rack_link(0)]
    nics = t.link_bw[[t.nic_link(s) for s in range(4)]]
    assert np.isclose(rack0, nics.sum() / cfg.topology.rack_oversubscription)
    assert t.link_kind[t.nic_link(0)] == LINK_NIC and t.link_kind[t.rack_link(0)] == LINK_RACK
    # PCIe ≫ NIC, as the design requires
    assert t.link_bw[t.pcie_link(0)] > t.link_bw[t.nic_link(0)]


def test_large_datacenter_builds():
    t = Topology(load_config(REPO_ROOT / "configs/large.yaml").topology)
    assert t.n_gpus == 32000 and t.n_links == t.n_groups + 2 * t.n_servers + t.n_racks + 16
    assert len(t.subcluster_groups(0)) == t.n_groups // 16
