"""The measured testbeds as :class:`~marl_sched.topology.Topology` objects, and the
byte accounting of a layout per link kind (through perf.py's own ``layout``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from marl_sched.calibration.constants import POLLUX_MAX_NODES, POLLUX_NIC_GBPS, POLLUX_PCIE_GBPS
from marl_sched.catalogue import RESOURCES, ModelSpec
from marl_sched.config import ServerTypeConfig, TopologyConfig
from marl_sched.perf import JobLayout
from marl_sched.topology import GBPS, LINK_KINDS, Topology

# --------------------------------------------------------------------------- topologies


#: an AWS g4dn.12xlarge, where Pollux measured: 4 T4s, each its own GPU group
POLLUX_SERVER = ServerTypeConfig(
    name="g4dn.12xlarge",
    count=1,
    gpu_type="t4",
    sockets=1,
    groups_per_socket=4,
    gpus_per_group=1,
    cpu_cores=48,
    memory_gb=192.0,
    nic_gbps=POLLUX_NIC_GBPS,
)


def pollux_topology(nodes: int = POLLUX_MAX_NODES) -> Topology:
    """``nodes`` g4dn.12xlarge servers in one rack, one GPU group per T4."""
    cfg = TopologyConfig(
        subclusters=1,
        racks_per_subcluster=1,
        servers_per_rack=nodes,
        server_types=(dataclasses.replace(POLLUX_SERVER, count=nodes),),
        pcie_gbps=POLLUX_PCIE_GBPS,
    )
    return Topology.from_config(cfg)


def pollux_groups(topology: Topology, placement: str) -> list[int]:
    """Worker GPU groups of a Pollux placement (digit i = GPUs on node i)."""
    groups: list[int] = []
    for node, digit in enumerate(placement):
        first = int(topology.server_groups_start[node])
        groups += [first + k for k in range(int(digit))]
    return groups


#: DL2's testbed as the calibration models it: one task per server, one GPU each
DL2_SERVER = ServerTypeConfig(
    name="dl2",
    count=1,
    gpu_type="v100",
    sockets=1,
    groups_per_socket=1,
    gpus_per_group=1,
    cpu_cores=8,
    memory_gb=48.0,
)


def dl2_topology(nodes: int, nic_gbps: float) -> Topology:
    """One task per server (1 GPU each), for the DL2 PS/worker check."""
    cfg = TopologyConfig(
        subclusters=1,
        racks_per_subcluster=1,
        servers_per_rack=nodes,
        server_types=(dataclasses.replace(DL2_SERVER, count=nodes, nic_gbps=nic_gbps),),
        rack_oversubscription=1.0,
    )
    return Topology.from_config(cfg)


def unit_spec(model_mb: float = 1.0, compute_s: float = 0.0) -> ModelSpec:
    """A neutral model for byte accounting."""
    return ModelSpec(
        name="unit",
        index=0,
        compute_s=compute_s,
        model_mb=model_mb,
        cpu_worker=0.0,
        cpu_ps=0.0,
        mem_gb=0.0,
        pressure=np.zeros(len(RESOURCES)),
        sensitivity=np.zeros(len(RESOURCES)),
        source="calibration",
    )


def kind_seconds(topology: Topology, layout: JobLayout) -> dict[str, float]:
    """Per link kind, the largest ``B_l / nominal_l`` (seconds at efficiency 1)."""
    out: dict[str, float] = {}
    for link, nbytes in layout.links.items():
        kind = LINK_KINDS[int(topology.link_kind[link])]
        kind = "nic" if kind in ("rack_uplink", "sc_uplink") else kind
        t = nbytes / (float(topology.link_nominal_gbps[link]) * GBPS)
        out[kind] = max(out.get(kind, 0.0), t)
    return out


def comm_time_at(kind_s: dict[str, float], efficiency: dict[str, float]) -> float:
    """``C = max_l B_l / bw_l`` (one job on its links) at given link efficiencies;
    identical to :meth:`PerformanceModel.comm_time` with ``n_l = 1``."""
    return max((t / efficiency[k] for k, t in kind_s.items()), default=0.0)
