"""The datacenter as a hierarchy of flat arrays.

::

    datacenter → subcluster → rack (ToR switch) → server (NIC) → CPU socket (QPI/UPI)
               → GPU group (GPUs behind one PCIe switch) → GPU

With ``topology.gpu_sharing`` k > 1 a GPU holds up to k jobs' workers (space
sharing): a group offers ``group_slots`` = GPUs × k worker slots, and the simulator
gives each worker a concrete GPU of its group (:mod:`marl_sched.simulator`).

Each entity has a dense integer id; parents are arrays (``rack_subcluster``,
``server_rack``, ``socket_server``, ``group_socket``, ``gpu_group``) and derived maps
(``group_server``, ``group_rack``, ...) are precomputed.

Links, each with a bandwidth in bytes/s (nominal Gbit/s × the calibrated efficiency
of that link kind, see :mod:`marl_sched.catalogue`):

=================  =====================  ================================================
kind               one per                nominal bandwidth
=================  =====================  ================================================
``pcie``           GPU group              ``topology.pcie_gbps``
``qpi``            server                 ``topology.qpi_gbps`` (only if sockets > 1)
``nic``            server                 the server type's ``nic_gbps``
``rack_uplink``    rack                   Σ NIC of the rack / ``rack_oversubscription``
``sc_uplink``      subcluster             ``topology.subcluster_uplink_gbps``
=================  =====================  ================================================

"""

from __future__ import annotations

import copy
import re

import numpy as np

from marl_sched.catalogue import CALIBRATION, GPU_SPEED
from marl_sched.config import TopologyConfig
from marl_sched.errors import InputError

#: a server type's name: an identifier (reports, observations and checkpoints name it)
SERVER_TYPE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")

LINK_KINDS = ("pcie", "qpi", "nic", "rack_uplink", "sc_uplink")
LINK_PCIE, LINK_QPI, LINK_NIC, LINK_RACK, LINK_SC = range(5)
GBPS = 1e9 / 8.0  # bytes per second in one Gbit/s


def check_server_type_names(names) -> None:
    """Each name matches :data:`SERVER_TYPE_NAME` (ASCII, not blank, at most 64
    characters) and none repeats (``InputError`` naming it)."""
    for i, name in enumerate(names):
        if not isinstance(name, str) or not SERVER_TYPE_NAME.fullmatch(name):
            raise InputError(
                f"topology.server_types[{i}].name: {name!r} is not a name (a letter or _, "
                "then letters, digits, _ . -; at most 64 characters)"
            )
        if name in names[:i]:
            raise InputError(f"topology.server_types[{i}].name: {name!r} is named twice")


class Topology:
    """A built datacenter. Construct with :meth:`from_config`.

    Counts: ``n_subclusters``, ``n_racks``, ``n_servers``, ``n_sockets``, ``n_groups``,
    ``n_gpus``, ``n_links``. Arrays are read-only.
    """

    def __init__(self, config: TopologyConfig) -> None:
        self.config = config
        c = config
        eff = CALIBRATION.link_efficiency
        self.n_subclusters = c.subclusters
        self.n_racks = c.subclusters * c.racks_per_subcluster
        self.n_servers = self.n_racks * c.servers_per_rack
        self.server_type_names = tuple(s.name for s in c.server_types)
        check_server_type_names(self.server_type_names)

        # servers: types dealt in order, racks filled in order
        self.server_type = np.repeat(
            np.arange(len(c.server_types)), [s.count for s in c.server_types]
        )
        self.server_rack = np.arange(self.n_servers) // c.servers_per_rack
        self.rack_subcluster = np.arange(self.n_racks) // c.racks_per_subcluster
        self.server_subcluster = self.rack_subcluster[self.server_rack]
        st = c.server_types
        t = self.server_type
        self.server_cpu = np.array([s.cpu_cores for s in st], dtype=np.float64)[t]
        self.server_memory_gb = np.array([s.memory_gb for s in st], dtype=np.float64)[t]
        self.server_nic_gbps = np.array([s.nic_gbps for s in st], dtype=np.float64)[t]
        self.server_gpu_speed = np.array([GPU_SPEED[s.gpu_type] for s in st])[t]
        self.server_gpu_type = tuple(s.gpu_type for s in st)

        # sockets and GPU groups
        sockets_per = np.array([s.sockets for s in st])[t]
        self.socket_server = np.repeat(np.arange(self.n_servers), sockets_per)
        self.n_sockets = len(self.socket_server)
        self.server_first_socket = np.concatenate([[0], np.cumsum(sockets_per)[:-1]])
        groups_per_socket = np.array([s.groups_per_socket for s in st])[t][self.socket_server]
        self.group_socket = np.repeat(np.arange(self.n_sockets), groups_per_socket)
        self.n_groups = len(self.group_socket)
        self.group_server = self.socket_server[self.group_socket]
        self.group_rack = self.server_rack[self.group_server]
        self.group_subcluster = self.rack_subcluster[self.group_rack]
        self.group_capacity = np.array([s.gpus_per_group for s in st])[t][self.group_server]
        self.group_first_gpu = np.concatenate([[0], np.cumsum(self.group_capacity)[:-1]])
        self.group_speed = self.server_gpu_speed[self.group_server]
        self.n_gpus = int(self.group_capacity.sum())
        self.gpu_group = np.repeat(np.arange(self.n_groups), self.group_capacity)
        # GPU space sharing: at most gpu_sharing jobs' workers per GPU, so a group
        # offers group_capacity × gpu_sharing worker slots (1 = no sharing)
        self.gpu_sharing = int(c.gpu_sharing)
        self.group_slots = self.group_capacity * self.gpu_sharing
        self.server_groups_start = np.searchsorted(self.group_server, np.arange(self.n_servers))
        self.server_n_groups = np.bincount(self.group_server, minlength=self.n_servers)
        self.server_gpus = np.bincount(
            self.group_server, weights=self.group_capacity, minlength=self.n_servers
        ).astype(np.int64)
        self.server_sockets = sockets_per

        # links: pcie per group, qpi per server, nic per server, uplink per rack / subcluster
        self.link_offset = np.cumsum(
            [0, self.n_groups, self.n_servers, self.n_servers, self.n_racks]
        )
        self.n_links = int(self.link_offset[-1] + self.n_subclusters)
        rack_nic = np.bincount(self.server_rack, weights=self.server_nic_gbps)
        nominal = np.concatenate(
            [
                np.full(self.n_groups, c.pcie_gbps),
                np.where(sockets_per > 1, c.qpi_gbps, np.inf),
                self.server_nic_gbps,
                rack_nic / c.rack_oversubscription,
                np.full(self.n_subclusters, c.subcluster_uplink_gbps),
            ]
        )
        kind_eff = np.array(
            [eff["pcie"], eff["qpi"], eff["nic"], eff["nic"], eff["nic"]], dtype=np.float64
        )
        self.link_kind = np.repeat(
            np.arange(5),
            [self.n_groups, self.n_servers, self.n_servers, self.n_racks, self.n_subclusters],
        ).astype(np.int8)
        self.link_nominal_gbps = nominal
        self.link_bw = nominal * GBPS * kind_eff[self.link_kind]  # effective bytes/s
        for name in dir(self):
            value = getattr(self, name)
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_config(cls, config: TopologyConfig) -> Topology:
        return cls(config)

    def with_network_efficiency(self, scale: float) -> Topology:
        """A copy whose network links (NIC, rack and subcluster uplinks: the kinds
        ``link_efficiency.nic`` calibrates) carry ``scale`` x their effective bandwidth
        (``simulation.nic_efficiency_scale``); ``self`` when ``scale`` is 1."""
        if scale == 1.0:
            return self
        out = copy.copy(self)
        bw = self.link_bw.copy()
        bw[self.link_kind >= LINK_KINDS.index("nic")] *= scale
        bw.setflags(write=False)
        out.link_bw = bw
        return out

    # ------------------------------------------------------------------ link ids

    def pcie_link(self, group: int) -> int:
        return int(group)

    def nic_link(self, server: int) -> int:
        return int(self.link_offset[2] + server)

    def rack_link(self, rack: int) -> int:
        return int(self.link_offset[3] + rack)

    # ------------------------------------------------------------------ summaries

    def subcluster_groups(self, subcluster: int) -> np.ndarray:
        """GPU-group ids of one subcluster (contiguous, ascending)."""
        return np.flatnonzero(self.group_subcluster == subcluster)

    def describe(self) -> str:
        types = ", ".join(
            f"{s.count}× {s.name} ({s.gpu_type}, "
            f"{s.sockets * s.groups_per_socket * s.gpus_per_group} GPUs)"
            for s in self.config.server_types
        )
        return (
            f"{self.n_subclusters} subclusters, {self.n_racks} racks, {self.n_servers} servers "
            f"[{types}], {self.n_sockets} sockets, {self.n_groups} GPU groups, {self.n_gpus} GPUs"
            + (f", up to {self.gpu_sharing} jobs per GPU" if self.gpu_sharing > 1 else "")
        )
