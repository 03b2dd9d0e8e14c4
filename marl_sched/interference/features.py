"""Feature rows of placed and candidate jobs (:data:`FEATURE_NAMES`).

The layout of the columns is documented in :mod:`marl_sched.interference`."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from marl_sched.catalogue import CATALOGUE, RESOURCES
from marl_sched.jobs import Job, Placement
from marl_sched.perf import JobLayout, PerformanceModel
from marl_sched.simulator import ClusterView
from marl_sched.topology import LINK_KINDS, Topology

FEATURE_SCHEMA_VERSION = 1
LEVELS = ("group", "socket", "server")
#: co-location level of a sample: the closest level at which it meets another job
COLOCATION_LEVELS = ("none", "group", "socket", "server", "cross-server")
_TIME_FLOOR_S = 1e-4


def _names() -> tuple[str, ...]:
    names = [f"own_pressure_{r}" for r in RESOURCES]
    names += [f"own_sensitivity_{r}" for r in RESOURCES]
    names += ["log_compute_s", "log_model_mb", "gpu_speed"]
    names += ["workers", "ps", "groups", "servers", "racks", "subclusters"]
    for level in LEVELS:
        for r in RESOURCES:
            names += [f"nbr_{level}_{r}_max", f"nbr_{level}_{r}_mean"]
    for level in LEVELS:
        names += [f"nbr_{level}_workers_max", f"nbr_{level}_workers_mean"]
    names += [f"link_{k}_jobs_max" for k in LINK_KINDS]
    names += [f"link_{k}_load_max" for k in LINK_KINDS]
    names += [f"log_link_{k}_alone_s" for k in LINK_KINDS]
    names += [f"log_link_{k}_shared_s" for k in LINK_KINDS]
    return tuple(names)


#: the feature layout, in column order (see the module docstring)
FEATURE_NAMES: tuple[str, ...] = _names()
N_FEATURES = len(FEATURE_NAMES)


# --------------------------------------------------------------------------- features


def _busy_prefix(topo: Topology, view: ClusterView) -> np.ndarray:
    """Prefix sums of busy GPUs over group ids (sockets and servers are contiguous);
    with GPU sharing, of the workers on them (a shared GPU counts each job's)."""
    if view.gpu_load is None:
        busy = topo.group_capacity - np.asarray(view.group_free)
    else:
        busy = np.bincount(topo.gpu_group, weights=view.gpu_load, minlength=topo.n_groups)
    return np.concatenate([[0], np.cumsum(busy)])


def _busy_around(
    topo: Topology, view: ClusterView, g: np.ndarray, spans: tuple[np.ndarray, ...]
) -> np.ndarray:
    """``(N, 3)`` busy GPUs (with sharing: workers) in each group ``g``, its socket and
    its server; whole numbers, so the prefix-sum differences are exact."""
    s_lo, s_hi, v_lo, v_hi = spans
    if view.gpu_load is not None:
        prefix = _busy_prefix(topo, view)
        return np.stack(
            [prefix[g + 1] - prefix[g], prefix[s_hi] - prefix[s_lo], prefix[v_hi] - prefix[v_lo]],
            axis=1,
        )
    free = np.asarray(view.group_free)
    pos = np.arange(int((v_hi - v_lo).max()) if len(g) else 0)
    idx = v_lo[:, None] + pos[None, :]  # a server's groups (a socket's lie inside them)
    inside = idx < v_hi[:, None]
    idx = np.where(inside, idx, v_lo[:, None])
    busy = np.where(inside, topo.group_capacity[idx] - free[idx], 0)
    in_socket = (idx >= s_lo[:, None]) & (idx < s_hi[:, None]) & inside
    mine = topo.group_capacity[g] - free[g]
    return np.stack([mine, np.where(in_socket, busy, 0).sum(axis=1), busy.sum(axis=1)], axis=1)


def _level_spans(topo: Topology, groups: np.ndarray) -> tuple[np.ndarray, ...]:
    """[first, last) group ids of each group's socket and server."""
    sock = topo.group_socket[groups]
    s_lo = np.searchsorted(topo.group_socket, sock, side="left")
    s_hi = np.searchsorted(topo.group_socket, sock, side="right")
    srv = topo.group_server[groups]
    v_lo = topo.server_groups_start[srv]
    v_hi = v_lo + topo.server_n_groups[srv]
    return s_lo, s_hi, v_lo, v_hi


def _own_workers(layout: JobLayout, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The job's own workers within each [lo, hi) group range."""
    g = layout.groups
    return np.array(
        [layout.group_workers[(g >= a) & (g < b)].sum() for a, b in zip(lo, hi, strict=True)],
        dtype=np.float64,
    )


def _segment_max_mean(rows: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per segment of ``rows`` (N, C), C >= 2 (consecutive runs of ``counts`` rows),
    the column max and mean, bit for bit ``seg.max(axis=0)`` / ``seg.mean(axis=0)``."""
    assert rows.shape[1] >= 2
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    top = np.maximum.reduceat(rows, starts, axis=0)
    width = int(counts.max())
    pos = np.arange(width)
    idx = np.where(pos[None, :] < counts[:, None], starts[:, None] + pos[None, :], len(rows))
    padded = np.concatenate([rows, np.zeros((1, rows.shape[1]))])[idx]  # (K, width, C)
    return top, padded.sum(axis=1) / counts[:, None]


def _assemble(
    perf: PerformanceModel,
    job: Job,
    layouts: Sequence[JobLayout],
    nbr: np.ndarray,
    busy: np.ndarray,
    link_others: np.ndarray,
    link_total_load: np.ndarray,
) -> np.ndarray:
    """``(K, F)`` feature rows of K layouts of ``job`` from their neighbours' state:
    ``nbr`` (N, 15) the other jobs' pressure at each worker group's group, socket and
    server, ``busy`` (N, 3) their workers there, ``link_others`` / ``link_total_load``
    aligned with the layouts' concatenated ``link_ids``; each row equals the one-layout
    result."""
    topo = perf.topology
    spec = CATALOGUE[job.model]
    k = len(layouts)
    x = np.empty((k, N_FEATURES))
    x[:, 0:5] = spec.pressure
    x[:, 5:10] = spec.sensitivity
    x[:, 10] = math.log(spec.compute_s)
    x[:, 11] = math.log(spec.model_mb)
    x[:, 13] = job.num_workers
    x[:, 14] = job.num_ps
    rack_of, sc_of = topo.server_rack, topo.rack_subcluster
    for j, layout in enumerate(layouts):
        racks = set(rack_of[layout.servers].tolist())
        x[j, 12] = layout.speed
        x[j, 15] = len(layout.groups)
        x[j, 16] = len(layout.servers)
        x[j, 17] = len(racks)
        x[j, 18] = len(set(sc_of[list(racks)].tolist()))
    counts = np.array([len(layout.groups) for layout in layouts], dtype=np.int64)
    top, mean = _segment_max_mean(np.concatenate([nbr, busy], axis=1), counts)
    i = 19
    for level in range(3):  # (k, 5) per level: max and mean interleaved per resource
        x[:, i : i + 10 : 2] = top[:, 5 * level : 5 * level + 5]
        x[:, i + 1 : i + 10 : 2] = mean[:, 5 * level : 5 * level + 5]
        i += 10
    for level in range(3):
        x[:, i], x[:, i + 1] = top[:, 15 + level], mean[:, 15 + level]
        i += 2
    n_kinds = len(LINK_KINDS)
    jobs_max, load_max = np.zeros((k, n_kinds)), np.zeros((k, n_kinds))
    alone, shared = np.zeros((k, n_kinds)), np.zeros((k, n_kinds))
    n_links = [len(layout.link_ids) for layout in layouts]
    if sum(n_links):
        ids = np.concatenate([layout.link_ids for layout in layouts])
        cost = np.concatenate([layout.link_cost for layout in layouts])
        util = np.concatenate([layout.link_util for layout in layouts])
        cell = np.repeat(np.arange(k) * n_kinds, n_links) + topo.link_kind[ids]
        np.maximum.at(jobs_max.reshape(-1), cell, link_others)
        np.maximum.at(load_max.reshape(-1), cell, np.maximum(link_total_load - util, 0.0))
        np.maximum.at(alone.reshape(-1), cell, cost)
        np.maximum.at(shared.reshape(-1), cell, cost * np.maximum(link_total_load, 1.0))
    x[:, i : i + 5] = jobs_max
    x[:, i + 5 : i + 10] = load_max
    x[:, i + 10 : i + 15] = np.log(_TIME_FLOOR_S + alone)
    x[:, i + 15 : i + 20] = np.log(_TIME_FLOOR_S + shared)
    return x


def job_features(
    view: ClusterView, job: Job, placement: Placement, layout: JobLayout | None = None
) -> np.ndarray:
    """Features (:data:`FEATURE_NAMES`) of a job already placed in ``view``'s state.

    Args:
        view: the cluster state *including* the job (its pressure and link use are
            subtracted here, as the performance model does).
        job: the placed job.
        placement: where its tasks run.
        layout: the job's :class:`~marl_sched.perf.JobLayout` if known (else built).

    Returns:
        (F,) float64.
    """
    perf, topo = view.perf, view.topology
    if layout is None:
        layout = perf.layout(CATALOGUE[job.model], placement.worker_groups, placement.ps_groups)
    g = layout.groups
    nbr = (
        np.asarray(view.group_pressure)[g] - layout.group_press,
        np.asarray(view.socket_pressure)[layout.worker_sockets] - layout.own_socket_press,
        np.asarray(view.server_pressure)[layout.worker_servers] - layout.own_server_press,
    )
    nbr = np.concatenate([np.where(np.abs(p) < 1e-9, 0.0, p) for p in nbr], axis=1)
    spans = s_lo, s_hi, v_lo, v_hi = _level_spans(topo, g)
    around = _busy_around(topo, view, g, spans)
    busy = np.stack(
        [
            around[:, 0] - layout.group_workers,
            around[:, 1] - _own_workers(layout, s_lo, s_hi),
            around[:, 2] - _own_workers(layout, v_lo, v_hi),
        ],
        axis=1,
    )
    ids = layout.link_ids
    others = np.asarray(view.link_jobs)[ids] - 1
    return _assemble(perf, job, [layout], nbr, busy, others, np.asarray(view.link_load)[ids])[0]


def candidate_features(
    view: ClusterView,
    job: Job,
    worker_groups: Sequence[int] | Sequence[Sequence[int]],
    ps_groups: Sequence[int] | Sequence[Sequence[int]],
) -> np.ndarray:
    """Features of *hypothetical* placements of ``job``, equal to :func:`job_features`
    once the simulator has applied them.

    Args:
        view: the current cluster state, without the job.
        job: the job to place.
        worker_groups: one placement's worker group ids, or a list of K of them.
        ps_groups: the matching PS group ids (one list, or K lists).

    Returns:
        (F,) for one placement, (K, F) for K candidates.
    """
    perf = view.perf
    spec = CATALOGUE[job.model]
    batch = len(worker_groups) > 0 and not np.isscalar(worker_groups[0])
    wgs = list(worker_groups) if batch else [worker_groups]
    pgs = list(ps_groups) if batch else [ps_groups]
    if len(wgs) != len(pgs):
        raise ValueError(f"{len(wgs)} worker-group lists but {len(pgs)} PS-group lists")
    if type(perf).layout is PerformanceModel.layout:
        layouts = [_CandidateLayout(perf, spec, wg, pg) for wg, pg in zip(wgs, pgs, strict=True)]
    else:
        layouts = [perf.layout(spec, wg, pg) for wg, pg in zip(wgs, pgs, strict=True)]
    out = layout_features(view, job, layouts)
    return out if batch else out[0]


class _CandidateLayout:
    """What :func:`layout_features` reads of a :class:`~marl_sched.perf.JobLayout`,
    computed as :meth:`PerformanceModel.layout` computes it (the same bits), without
    the rest (the pressures per socket and server that only the simulator needs)."""

    __slots__ = (
        "groups", "worker_sockets", "worker_servers", "servers", "speed",
        "link_ids", "link_cost", "link_util",
    )  # fmt: skip

    def __init__(self, perf: PerformanceModel, spec, worker_groups, ps_groups) -> None:
        topo = perf.topology
        wg = np.asarray(worker_groups, dtype=np.int64)
        pg = np.asarray(ps_groups, dtype=np.int64)
        if len(wg) == 1:
            groups, counts = wg, np.ones(1, dtype=np.int64)
        else:
            groups, counts = np.unique(wg, return_counts=True)
        self.groups = groups
        self.worker_sockets = w_sock = topo.group_socket[groups]
        self.worker_servers = topo.group_server[groups]
        all_sock = np.concatenate([w_sock, topo.group_socket[pg]])
        self.servers = np.array(sorted(set(topo.socket_server[all_sock].tolist())), dtype=np.int64)
        links = perf._traffic(spec, groups, counts, pg)
        self.speed = speed = float(perf.type_speeds(spec)[perf._group_type[groups]].min())
        self.link_ids = ids = np.fromiter(links.keys(), dtype=np.int64, count=len(links))
        nbytes = np.fromiter(links.values(), dtype=np.float64, count=len(links))
        self.link_cost = cost = nbytes / topo.link_bw[ids]
        self.link_util = cost / perf._alone(spec, speed, cost)


def layout_features(view: ClusterView, job: Job, layouts: Sequence[JobLayout]) -> np.ndarray:
    """``(K, F)`` features of hypothetical placements of ``job`` given as their
    layouts (:func:`candidate_features` once it has built them). A layout's
    ``link_util`` (the share of each of its links the job would use alone) is read
    for the link load it would add: a caller may hand in layouts whose ``link_util``
    it estimated itself."""
    perf, topo = view.perf, view.topology
    g = np.concatenate([layout.groups for layout in layouts])
    sockets = np.concatenate([layout.worker_sockets for layout in layouts])
    servers = np.concatenate([layout.worker_servers for layout in layouts])
    nbr = np.concatenate(
        [
            np.asarray(view.group_pressure)[g],
            np.asarray(view.socket_pressure)[sockets],
            np.asarray(view.server_pressure)[servers],
        ],
        axis=1,
    )
    busy = _busy_around(topo, view, g, _level_spans(topo, g)).astype(np.float64)
    ids = np.concatenate([layout.link_ids for layout in layouts])
    util = np.concatenate([layout.link_util for layout in layouts])
    total = np.asarray(view.link_load)[ids] + util  # what the simulator will add
    return _assemble(perf, job, layouts, nbr, busy, np.asarray(view.link_jobs)[ids], total)


def true_slowdown(view: ClusterView, job: Job, layout: JobLayout) -> float:
    """The simulator's slowdown of a placed job: its time now / its time alone."""
    perf = view.perf
    now = perf.iteration_time(
        CATALOGUE[job.model],
        layout,
        job.num_ps,
        view.link_load,
        view.group_pressure,
        view.socket_pressure,
        view.server_pressure,
        view.gpu_pressure,
    )
    return now / perf.alone_iteration_time(CATALOGUE[job.model], layout, job.num_ps)


def colocation_level(x: np.ndarray) -> np.ndarray:
    """Index into :data:`COLOCATION_LEVELS` of feature rows (n, F) or (F,): the closest
    level (group, socket, server, cross-server link, none) at which the job meets others."""
    x = np.atleast_2d(x)
    idx = {n: i for i, n in enumerate(FEATURE_NAMES)}
    out = np.zeros(len(x), dtype=np.int8)
    link_cols = [idx[f"link_{k}_jobs_max"] for k in LINK_KINDS]
    out[x[:, link_cols].max(axis=1) > 0] = 4
    for code, level in ((3, "server"), (2, "socket"), (1, "group")):
        cols = [idx[f"nbr_{level}_{r}_max"] for r in RESOURCES] + [idx[f"nbr_{level}_workers_max"]]
        out[x[:, cols].max(axis=1) > 1e-9] = code
    return out
