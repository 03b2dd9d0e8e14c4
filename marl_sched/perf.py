"""The placement-aware performance model: the simulator's ground truth
(docs/performance-model.md, §1, is its reference).

One synchronous iteration of a job on worker groups ``G`` takes::

    T = (c^γ + C^γ)^(1/γ)  +  sync_overhead·[the job communicates],
    c = compute_s(m) / min_{g∈G} speed(m, g) × I,   C = max_l B_l / bw_l · max(1, U_l)

``I`` the interference of other jobs' tasks in the workers' group, socket, server (and
GPU, with sharing), ``B_l`` the job's bytes per iteration on link ``l`` (PS push/pull
or ring all-reduce), ``U_l`` the link's summed load. The isolated time uses a lower
bound of ``C``, so ``JCT ≥ isolated runtime`` for every job; :meth:`PerformanceModel.group_fits`
masks GPU types whose memory the model does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from marl_sched.catalogue import CALIBRATION, CATALOGUE, N_RESOURCES, Calibration, ModelSpec
from marl_sched.topology import Topology

#: which resources are shared at each level: rows group, socket, server
LEVEL_RESOURCES = np.array(
    [
        [0.0, 1.0, 0.0, 0.0, 0.0],  # GPU group: the PCIe switch
        [1.0, 0.0, 1.0, 0.0, 0.0],  # CPU socket: caches, memory bandwidth, QPI
        [1.0, 0.0, 0.0, 1.0, 1.0],  # server: CPU cores, disk, NIC
    ]
)
#: up to this many own links, comm_time computes over Python floats, else over an array
_PY_LINKS = 16
#: a PS task presses on cpu, membw and net only
PS_PRESSURE_MASK = np.array([1.0, 0.0, 1.0, 0.0, 1.0])


@dataclass
class JobLayout:
    """Where a placed job's tasks sit, aggregated for the performance model.

    Attributes:
        groups: unique worker groups; ``group_workers`` the workers in each.
        worker_sockets, worker_servers: the socket / server of each worker group.
        worker_socket_set, worker_server_set: the unique ones (where the job's
            workers can be slowed).
        sockets, servers: unique sockets / servers touched by any task.
        socket_press, server_press: the job's own pressure there, (k, 5).
        group_press: the job's own pressure in each worker group, (k, 5).
        links: link id → bytes per iteration.
        speed: slowest worker's GPU speed.
        gpus, gpu_group_idx: with GPU sharing, each worker's GPU id and the index of
            its group in ``groups`` (set by the simulator; None without sharing).
    """

    groups: np.ndarray
    group_workers: np.ndarray
    group_press: np.ndarray
    worker_sockets: np.ndarray
    worker_servers: np.ndarray
    worker_socket_set: np.ndarray
    worker_server_set: np.ndarray
    sockets: np.ndarray
    socket_press: np.ndarray
    servers: np.ndarray
    server_press: np.ndarray
    links: dict[int, float]
    speed: float
    link_ids: np.ndarray | None = None
    link_cost: np.ndarray | None = None  # bytes / bandwidth per own link (s)
    link_util: np.ndarray | None = None  # u_l: share of each own link the job uses alone
    weights: np.ndarray | None = None  # (3, 5) λ_L · M^L · sensitivity
    own_socket_press: np.ndarray | None = None  # socket_press at each worker group's socket
    own_server_press: np.ndarray | None = None  # server_press at each worker group's server
    # (group, socket, server) of a job whose workers share one GPU group, else None:
    # lets interference() read the pressures through slices instead of fancy indexing
    single_unit: tuple[int, int, int] | None = None
    comm_alone: float = 0.0  # max(link_cost): the communication time with no link shared
    gpus: np.ndarray | None = None  # GPU id of each worker (GPU sharing only)
    gpu_group_idx: np.ndarray | None = None  # index into groups of each worker's group
    # the simulator's hot path reads these (the same values as above, laid out for it):
    # one-worker-group jobs' own pressure per level as 1-D rows (weights' rows beside),
    # and the own links' costs as Python floats
    unit_rows: tuple[np.ndarray, ...] | None = None
    link_cost_list: list[float] = field(default_factory=list)


def overlap_time(compute, comm, gamma: float):
    """``(compute^γ + comm^γ)^(1/γ)``, γ ≥ 1 (Pollux's overlap): their sum at γ = 1,
    never below either term; floats or numpy arrays."""
    if gamma == 1.0:
        return compute + comm
    if isinstance(compute, float) and isinstance(comm, float):  # the simulator's hot path
        hi, lo = (compute, comm) if compute >= comm else (comm, compute)
        return hi * (1.0 + (lo / hi) ** gamma) ** (1.0 / gamma) if hi > 0.0 else 0.0
    hi = np.maximum(compute, comm)
    lo = np.minimum(compute, comm)
    safe = np.where(hi > 0, hi, 1.0)
    return hi * (1.0 + (lo / safe) ** gamma) ** (1.0 / gamma)


def unit_term(pressure: np.ndarray, own: np.ndarray, weights: np.ndarray) -> float:
    """One level's term of a one-worker-group job's interference: the others' pressure
    there (``pressure`` minus the job's ``own``, rows of 5) weighted by ``weights``; a 1-D
    dot product, BLAS's ddot, the kernel a (1, 5) @ (5,) product calls (the same bits)."""
    return float((pressure - own).dot(weights))


def unit_interference(group: float, socket: float, server: float) -> float:
    """``I`` of a one-worker-group job from its three :func:`unit_term` values (the
    simulator caches the group and socket terms while their pressure rows are unchanged)."""
    return 1.0 + max(group + socket + server, 0.0)


def _sum_by_key(keys: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys)`` and, per unique key, the sum of its ``rows`` in input order:
    what ``np.add.at`` into zeros gives, bit for bit, without its overhead (a job has
    a few tasks)."""
    ks = keys.tolist()
    uniq = sorted(set(ks))
    pos = {k: i for i, k in enumerate(uniq)}
    out = np.zeros((len(uniq), rows.shape[1]))
    for k, row in zip(ks, rows, strict=True):
        out[pos[k]] += row
    return np.array(uniq, dtype=np.int64), out


class PerformanceModel:
    """Iteration times of placed jobs on one topology.

    Args:
        topology: the datacenter.
        calibration: fitted constants (default: the shipped calibration).
    """

    def __init__(self, topology: Topology, calibration: Calibration = CALIBRATION) -> None:
        self.topology = topology
        self.calibration = calibration
        lc = calibration.level_coupling
        self.coupling = np.array([lc["group"], lc["socket"], lc["server"]])
        self.level_weights = self.coupling[:, None] * LEVEL_RESOURCES  # (3, R)
        #: the same-GPU level (GPU sharing): what the three levels leave of 1 per resource
        self.gpu_coupling = np.maximum(1.0 - self.level_weights.sum(axis=0), 0.0)
        self.sync_overhead_s = calibration.sync_overhead_s
        self.overlap_gamma = calibration.overlap_gamma
        self._group_type = topology.server_type[topology.group_server]
        # charge's lookups as Python lists (a job's few transfers walk them one by one)
        self._charge_tables = (
            topology.group_socket.tolist(),
            topology.group_server.tolist(),
            topology.server_rack.tolist(),
            topology.rack_subcluster.tolist(),
            [int(o) for o in topology.link_offset],
        )
        self._present_types = np.unique(topology.server_type)
        self._type_speed_cache: dict[tuple, np.ndarray] = {}
        self._fits_cache: dict[tuple, np.ndarray] = {}
        self._isolated_cache: dict[tuple, tuple[ModelSpec, float]] = {}
        self._max_pcie = float(topology.link_bw[: topology.n_groups].max())
        nic = topology.link_bw[topology.link_offset[2] : topology.link_offset[3]]
        self._max_nic = float(nic.max())
        self._max_server_gpus = int(topology.server_gpus.max())

    # ------------------------------------------------------------------ GPU speed

    def type_speeds(self, spec: ModelSpec) -> np.ndarray:
        """The model's relative speed on each server type of the topology (V100 = 1):
        its measured per-model figure where there is one, else the type's."""
        key = (spec.name, tuple(sorted(spec.gpu_speed.items())))
        got = self._type_speed_cache.get(key)
        if got is None:
            per_type = self.calibration.gpu_speed
            got = np.array([spec.speed_on(g, per_type) for g in self.topology.server_gpu_type])
            self._type_speed_cache[key] = got
        return got

    def group_speed_for(self, model: str | ModelSpec) -> np.ndarray:
        """Per GPU group, the relative speed of ``model`` there (the per-model
        counterpart of :attr:`Topology.group_speed`, which is per GPU type)."""
        spec = CATALOGUE[model] if isinstance(model, str) else model
        return self.type_speeds(spec)[self._group_type]

    def group_fits(self, model: str | ModelSpec) -> np.ndarray:
        """Per GPU group, whether one worker of ``model`` fits in its GPUs' memory
        (read-only bool array; all True for a model without a measured limit)."""
        spec = CATALOGUE[model] if isinstance(model, str) else model
        key = (spec.name, spec.gpu_unfit)
        got = self._fits_cache.get(key)
        if got is None:
            ok = np.array([spec.fits_on(g) for g in self.topology.server_gpu_type], dtype=bool)
            got = ok[self._group_type]
            got.setflags(write=False)
            self._fits_cache[key] = got
        return got

    def best_speed(self, spec: ModelSpec) -> float:
        """The model's speed on the fastest GPU type present that it fits on."""
        speeds = self.type_speeds(spec)[self._present_types]
        fits = [spec.fits_on(self.topology.server_gpu_type[t]) for t in self._present_types]
        return float(speeds[fits].max() if any(fits) else speeds.max())

    # ------------------------------------------------------------------ layout

    def layout(self, spec: ModelSpec, worker_groups, ps_groups) -> JobLayout:
        """Aggregate a placement into what the model needs (computed once per job)."""
        topo = self.topology
        wg = np.asarray(worker_groups, dtype=np.int64)
        pg = np.asarray(ps_groups, dtype=np.int64)
        if len(wg) == 1:  # np.unique's result, without its sort (most jobs have one worker)
            groups, group_workers = wg, np.ones(1, dtype=np.int64)
        else:
            groups, group_workers = np.unique(wg, return_counts=True)
        w_press = spec.pressure
        ps_press = spec.pressure * PS_PRESSURE_MASK
        group_press = group_workers[:, None] * w_press[None, :]

        w_sock = topo.group_socket[groups]
        p_sock = topo.group_socket[pg]
        all_sock = np.concatenate([w_sock, p_sock])
        sock_weights = np.concatenate(
            [group_press, np.broadcast_to(ps_press, (len(pg), N_RESOURCES))]
        )
        sockets, socket_press = _sum_by_key(all_sock, sock_weights)
        servers, server_press = _sum_by_key(topo.socket_server[all_sock], sock_weights)

        links = self._traffic(spec, groups, group_workers, pg)
        speed = float(self.type_speeds(spec)[self._group_type[groups]].min())
        link_ids = np.fromiter(links.keys(), dtype=np.int64, count=len(links))
        link_bytes = np.fromiter(links.values(), dtype=np.float64, count=len(links))
        link_cost = link_bytes / topo.link_bw[link_ids]
        alone = self._alone(spec, speed, link_cost)
        sock_idx = np.searchsorted(sockets, w_sock)
        srv_idx = np.searchsorted(servers, topo.group_server[groups])
        weights = self.level_weights * spec.sensitivity
        own_socket_press = socket_press[sock_idx]
        own_server_press = server_press[srv_idx]
        return JobLayout(
            groups=groups,
            group_workers=group_workers,
            group_press=group_press,
            worker_sockets=w_sock,
            worker_servers=topo.group_server[groups],
            worker_socket_set=w_sock if len(w_sock) == 1 else np.unique(w_sock),
            worker_server_set=(
                topo.group_server[groups]
                if len(groups) == 1
                else np.unique(topo.group_server[groups])
            ),
            sockets=sockets,
            socket_press=socket_press,
            servers=servers,
            server_press=server_press,
            links=links,
            speed=speed,
            link_ids=link_ids,
            link_cost=link_cost,
            link_util=link_cost / alone,
            comm_alone=float(link_cost.max()) if len(link_cost) else 0.0,
            weights=weights,
            own_socket_press=own_socket_press,
            own_server_press=own_server_press,
            single_unit=(
                (int(groups[0]), int(w_sock[0]), int(topo.group_server[groups[0]]))
                if len(groups) == 1
                else None
            ),
            unit_rows=(
                (group_press[0], own_socket_press[0], own_server_press[0], *weights)
                if len(groups) == 1
                else None
            ),
            link_cost_list=link_cost.tolist(),
        )

    def _traffic(
        self, spec: ModelSpec, groups: np.ndarray, counts: np.ndarray, ps_groups: np.ndarray
    ) -> dict[int, float]:
        """Bytes per iteration on every link the job's transfers cross: per (PS, worker)
        pair ``2·model_bytes / p`` from the worker to the PS; all-reduce, a ring over the
        workers in group order, ``2(n-1)/n · model_bytes`` per edge through both PCIe links."""
        p = len(ps_groups)
        if p == 0:
            n = int(counts.sum())
            if n < 2:
                return {}
            ring = np.repeat(groups, counts)
            edge = np.full(n, 2.0 * (n - 1) / n * spec.model_bytes)
            return self.charge(ring, np.roll(ring, -1), edge, pcie_both=True)
        per_pair = 2.0 * spec.model_bytes / p
        # pairs: (PS k, worker group g) weighted by workers in g
        gk = np.repeat(groups, p)
        cw = np.repeat(counts, p).astype(np.float64) * per_pair
        pk = np.tile(ps_groups, len(groups))
        return self.charge(gk, pk, cw, pcie_both=False)

    def charge(
        self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, pcie_both: bool
    ) -> dict[int, float]:
        """Sum ``nbytes`` of each transfer ``src`` group → ``dst`` group on the links
        between them: the source's PCIe link (and the destination's if ``pcie_both``),
        the server's QPI link across sockets, both NICs across servers, both rack
        uplinks across racks, both subcluster uplinks across subclusters."""
        # plain Python over the few transfers of a job; each link's bytes are summed
        # from 0.0 in the order np.bincount over the concatenated (link, bytes) lists
        # would sum them (all sources' PCIe, all destinations', QPI, source-side then
        # destination-side NICs, rack and subcluster uplinks): the same bits
        gsock, gsrv, rack, subc, off = self._charge_tables
        src_l, dst_l, nb = src.tolist(), dst.tolist(), nbytes.tolist()
        total: dict[int, float] = {}
        get = total.get
        for g, b in zip(src_l, nb, strict=True):
            total[g] = get(g, 0.0) + b
        if pcie_both:
            for g, b in zip(dst_l, nb, strict=True):
                total[g] = get(g, 0.0) + b
        w_srv = [gsrv[g] for g in src_l]
        p_srv = [gsrv[g] for g in dst_l]
        for g, h, ws, ps, b in zip(src_l, dst_l, w_srv, p_srv, nb, strict=True):
            if ws == ps and gsock[g] != gsock[h]:
                k = off[1] + ws
                total[k] = get(k, 0.0) + b
        for a_side, b_side, level in (
            (w_srv, p_srv, 2),
            ([rack[v] for v in w_srv], [rack[v] for v in p_srv], 3),
            ([subc[rack[v]] for v in w_srv], [subc[rack[v]] for v in p_srv], 4),
        ):
            crossing = [i for i, (x, y) in enumerate(zip(a_side, b_side, strict=True)) if x != y]
            for side in (a_side, b_side):
                for i in crossing:
                    k = off[level] + side[i]
                    total[k] = get(k, 0.0) + nb[i]
        return {k: total[k] for k in sorted(total)}

    # ------------------------------------------------------------------ terms

    def comm_time(self, layout: JobLayout, link_load: np.ndarray) -> float:
        """``max_l B_l / bw_l · max(1, U_l)``, ``U_l`` = ``link_load`` (summed ``u_l``).

        Passing zeros (or ones) gives the job's communication time alone.
        """
        if not layout.links:
            return 0.0
        # each product max(U_l, 1) · cost_l and their max are exact in any order, so
        # every form below gives the same bits: with no link oversubscribed, max(cost)
        u = link_load.take(layout.link_ids)
        if len(u) > _PY_LINKS:  # in place (on a float copy), three array calls
            u = u.astype(np.float64, copy=False)
            np.maximum(u, 1.0, out=u)
            np.multiply(u, layout.link_cost, out=u)
            return float(np.maximum.reduce(u))
        costs, loads = layout.link_cost_list, u.tolist()  # a few links: Python floats
        return max([c * x if x > 1.0 else c for c, x in zip(costs, loads, strict=True)])

    def interference(
        self,
        spec: ModelSpec,
        layout: JobLayout,
        group_pressure: np.ndarray,
        socket_pressure: np.ndarray,
        server_pressure: np.ndarray,
        gpu_pressure: np.ndarray | None = None,
    ) -> float:
        """The interference factor ``I`` ≥ 1 given the cluster's summed pressures (which
        include this job's own tasks, subtracted here; ``gpu_pressure`` with GPU sharing)."""
        w = layout.weights
        unit = layout.single_unit
        if unit is not None and (layout.gpus is None or gpu_pressure is None):
            # one worker group: the same arithmetic on 1-D rows (unit_term), the three
            # sums added as Python floats (the same IEEE additions in the same order):
            # the same bits as below, a third of the array calls
            g, a, v = unit
            own_g, own_a, own_v, w0, w1, w2 = layout.unit_rows
            return unit_interference(
                unit_term(group_pressure[g], own_g, w0),
                unit_term(socket_pressure[a], own_a, w1),
                unit_term(server_pressure[v], own_v, w2),
            )
        # (take: fancy indexing's rows, with less overhead)
        p_group = group_pressure.take(layout.groups, axis=0) - layout.group_press
        p_sock = socket_pressure.take(layout.worker_sockets, axis=0) - layout.own_socket_press
        p_srv = server_pressure.take(layout.worker_servers, axis=0) - layout.own_server_press
        weighted = p_group @ w[0] + p_sock @ w[1] + p_srv @ w[2]
        if layout.gpus is not None and gpu_pressure is not None:
            # per worker: its group's levels plus its own GPU (one worker of the job each)
            p_gpu = gpu_pressure[layout.gpus] - spec.pressure
            same_gpu = p_gpu @ (self.gpu_coupling * spec.sensitivity)
            weighted = weighted[layout.gpu_group_idx] + same_gpu
        return 1.0 + max(float(np.maximum.reduce(weighted)), 0.0)

    def overlapped(self, compute: float, comm: float) -> float:
        """Compute and communication of one iteration, partly overlapped:
        :func:`overlap_time` at the calibrated ``overlap_gamma``."""
        return float(overlap_time(float(compute), float(comm), self.overlap_gamma))

    def iteration_time(
        self,
        spec: ModelSpec,
        layout: JobLayout,
        n_ps: int,
        link_load: np.ndarray,
        group_pressure: np.ndarray,
        socket_pressure: np.ndarray,
        server_pressure: np.ndarray,
        gpu_pressure: np.ndarray | None = None,
    ) -> float:
        """Seconds per iteration of a placed job in the current cluster state (``n_ps``
        unused: the layout says whether the job synchronises)."""
        interference = self.interference(
            spec, layout, group_pressure, socket_pressure, server_pressure, gpu_pressure
        )
        comm = self.comm_time(layout, link_load)
        return self.combine(spec, layout, interference, comm)

    def combine(
        self, spec: ModelSpec, layout: JobLayout, interference: float, comm: float
    ) -> float:
        """Seconds per iteration from the interference factor and the communication time
        (the simulator caches each term per job); :meth:`iteration_time` with both fresh."""
        compute = spec.compute_s / layout.speed * interference
        if not layout.links:
            return compute
        # overlap_time directly: compute and comm are floats here (what overlapped()
        # would convert them to), one call less on the simulator's hottest path
        return overlap_time(compute, comm, self.overlap_gamma) + self.sync_overhead_s

    def _alone(self, spec: ModelSpec, speed: float, link_cost: np.ndarray) -> float:
        if not len(link_cost):
            return spec.compute_s / speed
        comm = float(link_cost.max())
        return self.overlapped(spec.compute_s / speed, comm) + self.sync_overhead_s

    def alone_iteration_time(self, spec: ModelSpec, layout: JobLayout, n_ps: int) -> float:
        """Seconds per iteration on this placement with the cluster to itself (``T⁰``)."""
        return self._alone(spec, layout.speed, layout.link_cost)

    def isolated_iteration_time(self, model: str, num_workers: int, num_ps: int) -> float:
        """A lower bound on the iteration time under any placement: the fastest GPU type,
        no interference, and the least communication any placement needs (PCIe always; a
        NIC's share when the workers cannot share one server with a PS, or span servers for
        all-reduce)."""
        spec = CATALOGUE[model]
        key = (model, num_workers, num_ps)
        got = self._isolated_cache.get(key)
        if got is not None and got[0] is spec:  # a pure function of the spec and shape
            return got[1]
        value = self._isolated(spec, num_workers, num_ps)
        self._isolated_cache[key] = (spec, value)
        return value

    def _isolated(self, spec: ModelSpec, num_workers: int, num_ps: int) -> float:
        compute = spec.compute_s / self.best_speed(spec)
        if num_ps >= 1:
            pcie = 2.0 * spec.model_bytes / self._max_pcie
            remote = max(num_workers - self._max_server_gpus, 0)
            nic = remote * 2.0 * spec.model_bytes / num_ps / self._max_nic
        elif num_workers >= 2:
            both_edges = 4.0 * (num_workers - 1) / num_workers * spec.model_bytes
            pcie = both_edges / self._max_pcie
            nic = both_edges / self._max_nic if num_workers > self._max_server_gpus else 0.0
        else:
            return compute
        return self.overlapped(compute, max(pcie, nic)) + self.sync_overhead_s
