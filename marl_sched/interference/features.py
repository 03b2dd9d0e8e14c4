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


def _assemble(
    perf: PerformanceModel,
    job: Job,
    layout: JobLayout,
    nbr: tuple[np.ndarray, np.ndarray, np.ndarray],
    busy: tuple[np.ndarray, np.ndarray, np.ndarray],
    link_others: np.ndarray,
    link_total_load: np.ndarray,
) -> np.ndarray:
    """One feature row from the job's layout and its neighbours' state.

    ``link_others`` (other jobs) and ``link_total_load`` (``U_l``, this job
    included) are aligned with ``layout.link_ids``.
    """
    topo = perf.topology
    spec = CATALOGUE[job.model]
    x = np.empty(N_FEATURES)
    x[0:5] = spec.pressure
    x[5:10] = spec.sensitivity
    x[10] = math.log(spec.compute_s)
    x[11] = math.log(spec.model_mb)
    x[12] = layout.speed
    x[13] = job.num_workers
    x[14] = job.num_ps
    racks = np.unique(topo.server_rack[layout.servers])
    x[15] = len(layout.groups)
    x[16] = len(layout.servers)
    x[17] = len(racks)
    x[18] = len(np.unique(topo.rack_subcluster[racks]))
    i = 19
    for p in nbr:  # (k, 5) per level
        x[i : i + 10 : 2] = p.max(axis=0)
        x[i + 1 : i + 10 : 2] = p.mean(axis=0)
        i += 10
    for b in busy:
        x[i], x[i + 1] = b.max(), b.mean()
        i += 2
    n_kinds = len(LINK_KINDS)
    jobs_max, load_max = np.zeros(n_kinds), np.zeros(n_kinds)
    alone, shared = np.zeros(n_kinds), np.zeros(n_kinds)
    if len(layout.link_ids):
        kind = topo.link_kind[layout.link_ids]
        cost = layout.link_cost
        np.maximum.at(jobs_max, kind, link_others)
        np.maximum.at(load_max, kind, np.maximum(link_total_load - layout.link_util, 0.0))
        np.maximum.at(alone, kind, cost)
        np.maximum.at(shared, kind, cost * np.maximum(link_total_load, 1.0))
    x[i : i + 5] = jobs_max
    x[i + 5 : i + 10] = load_max
    x[i + 10 : i + 15] = np.log(_TIME_FLOOR_S + alone)
    x[i + 15 : i + 20] = np.log(_TIME_FLOOR_S + shared)
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
    nbr = tuple(np.where(np.abs(p) < 1e-9, 0.0, p) for p in nbr)
    prefix = _busy_prefix(topo, view)
    s_lo, s_hi, v_lo, v_hi = _level_spans(topo, g)
    busy = (
        (prefix[g + 1] - prefix[g]) - layout.group_workers,
        (prefix[s_hi] - prefix[s_lo]) - _own_workers(layout, s_lo, s_hi),
        (prefix[v_hi] - prefix[v_lo]) - _own_workers(layout, v_lo, v_hi),
    )
    ids = layout.link_ids
    others = np.asarray(view.link_jobs)[ids] - 1
    return _assemble(perf, job, layout, nbr, busy, others, np.asarray(view.link_load)[ids])


def candidate_features(
    view: ClusterView,
    job: Job,
    worker_groups: Sequence[int] | Sequence[Sequence[int]],
    ps_groups: Sequence[int] | Sequence[Sequence[int]],
) -> np.ndarray:
    """Features of *hypothetical* placements of ``job``, before they are applied.

    Equal to what :func:`job_features` gives once the simulator has applied the
    placement (the job's own pressure and link use are exactly what the simulator
    would add, and are excluded from the neighbour features either way).

    Args:
        view: the current cluster state, without the job.
        job: the job to place.
        worker_groups: one placement's worker group ids, or a list of K of them.
        ps_groups: the matching PS group ids (one list, or K lists).

    Returns:
        (F,) for one placement, (K, F) for K candidates.
    """
    perf, topo = view.perf, view.topology
    spec = CATALOGUE[job.model]
    batch = len(worker_groups) > 0 and not np.isscalar(worker_groups[0])
    wgs = list(worker_groups) if batch else [worker_groups]
    pgs = list(ps_groups) if batch else [ps_groups]
    if len(wgs) != len(pgs):
        raise ValueError(f"{len(wgs)} worker-group lists but {len(pgs)} PS-group lists")
    prefix = _busy_prefix(topo, view)
    gp = np.asarray(view.group_pressure)
    sp = np.asarray(view.socket_pressure)
    vp = np.asarray(view.server_pressure)
    link_jobs, link_load = np.asarray(view.link_jobs), np.asarray(view.link_load)
    rows = []
    for wg, pg in zip(wgs, pgs, strict=True):
        layout = perf.layout(spec, wg, pg)
        g = layout.groups
        s_lo, s_hi, v_lo, v_hi = _level_spans(topo, g)
        nbr = (gp[g], sp[layout.worker_sockets], vp[layout.worker_servers])
        busy = (
            (prefix[g + 1] - prefix[g]).astype(np.float64),
            (prefix[s_hi] - prefix[s_lo]).astype(np.float64),
            (prefix[v_hi] - prefix[v_lo]).astype(np.float64),
        )
        ids = layout.link_ids
        total = link_load[ids] + layout.link_util  # what the simulator will add
        rows.append(_assemble(perf, job, layout, nbr, busy, link_jobs[ids], total))
    out = np.stack(rows)
    return out if batch else out[0]


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
    """Index into :data:`COLOCATION_LEVELS` of feature rows (n, F) or (F,).

    The closest level at which the job meets other jobs' tasks: their workers or
    pressure in one of its GPU groups (group), its sockets (socket), its servers
    (server); else sharing one of its links (cross-server); else none.
    """
    x = np.atleast_2d(x)
    idx = {n: i for i, n in enumerate(FEATURE_NAMES)}
    out = np.zeros(len(x), dtype=np.int8)
    link_cols = [idx[f"link_{k}_jobs_max"] for k in LINK_KINDS]
    out[x[:, link_cols].max(axis=1) > 0] = 4
    for code, level in ((3, "server"), (2, "socket"), (1, "group")):
        cols = [idx[f"nbr_{level}_{r}_max"] for r in RESOURCES] + [idx[f"nbr_{level}_workers_max"]]
        out[x[:, cols].max(axis=1) > 1e-9] = code
    return out
