"""Heuristic placement policies.

=======================  ===================================================================
name                     rule
=======================  ===================================================================
``random``               workers on uniformly random free GPUs; PS on random servers
``first-fit``            lowest-numbered server that holds the whole job, else fill GPU
                         groups in index order (consolidates)
``load-balance``         each worker on the server with the most free GPUs (spreads)
``tetris``               servers by alignment of their free (GPU, CPU, memory) vector with
                         the job's demand vector, packing the best-aligned first
``locality``             an anchor server with the most free GPUs holds the PS; workers on
                         the free GPUs closest to it (socket, server, rack, subcluster)
``congestion-aware``     the rack (else subcluster) whose uplink and NICs carry the fewest
                         jobs, packing inside it on the least-loaded NICs
``interference-aware``   each worker on the GPU group where the interference it suffers
                         and causes is predicted lowest, with a locality penalty
``speed-aware``          interference-aware that also counts how much slower each GPU type
                         runs the job's compute
``resident-aware``       interference-aware that also counts, 3 times, the harm a worker
                         does to resident jobs weighted by their size
=======================  ===================================================================

All of them place parameter servers on the servers holding most of the job's
workers (CPU and memory permitting), then on the nearest server with room. Each
respects GPU, CPU and memory capacity; when a job cannot be placed whole, it returns
``None`` and the job stays queued.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import weakref
from collections.abc import Iterator, Sequence

import numpy as np

from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job, Placement
from marl_sched.policies.base import Policy, heuristic_names, make_policy, register
from marl_sched.simulator import ClusterView, harm_to_residents
from marl_sched.topology import Topology


@dataclasses.dataclass(frozen=True)
class ScopedView(ClusterView):
    """A :class:`ClusterView` whose free GPUs, cores and memory are zero outside GPU
    groups ``[g0, g1)`` and servers ``[s0, s1)`` (``span``; an agent's scope, or the
    whole cluster), with a ``memo`` of what the heuristics asked to place a job on it
    derive from it (free GPUs per server): they read only the span, and share the
    memo. Its arrays must not change while it is in use (the callers build one per
    job and scope, from the view the job arrived on)."""

    span: tuple[int, int, int, int] = (0, 0, 0, 0)
    memo: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)


_VIEW_FIELDS = tuple(f.name for f in dataclasses.fields(ClusterView))


def scoped(
    view: ClusterView, span: tuple[int, int, int, int] | None = None, **changes
) -> ScopedView:
    """``view`` (with ``changes`` to its fields) as a :class:`ScopedView` over ``span``
    (default: the whole cluster) with an empty memo; the caller promises what
    :class:`ScopedView` says of it."""
    t = view.topology
    fields = {name: getattr(view, name) for name in _VIEW_FIELDS}
    fields.update(changes)
    span = (0, t.n_groups, 0, t.n_servers) if span is None else tuple(int(x) for x in span)
    return ScopedView(**fields, span=span)


def _span(view: ClusterView) -> tuple[int, int, int, int]:
    """``(g0, g1, s0, s1)``: the groups and servers outside which ``view`` has no free
    capacity (the whole cluster for a plain view)."""
    if isinstance(view, ScopedView):
        return view.span
    t = view.topology
    return 0, t.n_groups, 0, t.n_servers


def _open_groups(group_free: np.ndarray, span: tuple[int, int, int, int]) -> np.ndarray:
    """``np.flatnonzero(group_free > 0)`` when every group outside the span's is 0."""
    g0, g1 = span[0], span[1]
    return g0 + np.flatnonzero(group_free[g0:g1] > 0)


class _Draft:
    """A tentative placement with its own copy of free capacity."""

    def __init__(self, job: Job, view: ClusterView) -> None:
        self.job = job
        self.view = view
        self.topo = view.topology
        spec = CATALOGUE[job.model]
        self.cpu_w, self.cpu_p, self.mem = spec.cpu_worker, spec.cpu_ps, spec.mem_gb
        self.group_free = np.array(view.group_free)
        self.cpu = np.array(view.server_cpu_free)
        self.memf = np.array(view.server_mem_free)
        self.workers: list[int] = []
        self.ps: list[int] = []

    def restart(self) -> None:
        """Back to an empty draft on the view, as a new ``_Draft(job, view)``: only the
        groups and servers its tasks took are copied back (not the whole cluster)."""
        v = self.view
        if self.workers:  # (a group listed twice is copied back twice: the same value)
            self.group_free[self.workers] = np.asarray(v.group_free)[self.workers]
        touched = self.workers + self.ps
        if touched:
            servers = self.topo.group_server[touched]
            self.cpu[servers] = np.asarray(v.server_cpu_free)[servers]
            self.memf[servers] = np.asarray(v.server_mem_free)[servers]
        self.workers, self.ps = [], []

    @property
    def missing(self) -> int:
        return self.job.num_workers - len(self.workers)

    def server_room(self, s: int) -> int:
        """Workers server ``s``'s free cores and memory can still take (GPUs aside)."""
        by_cpu = int((self.cpu[s] + 1e-9) // self.cpu_w) if self.cpu_w > 0 else 1 << 30
        by_mem = int((self.memf[s] + 1e-9) // self.mem) if self.mem > 0 else 1 << 30
        return min(by_cpu, by_mem)

    def worker_room(self, g: int) -> int:
        """Workers group ``g`` can still take (GPU, CPU and memory of its server)."""
        s = self.topo.group_server[g]
        return max(min(int(self.group_free[g]), self.server_room(s)), 0)

    def add_workers(self, g: int, k: int) -> None:
        s = self.topo.group_server[g]
        self.group_free[g] -= k
        self.cpu[s] -= k * self.cpu_w
        self.memf[s] -= k * self.mem
        self.workers.extend([int(g)] * k)

    def fill(self, order, spread: bool = False) -> None:
        """Take workers from groups in ``order`` (all a group can give, or one each)."""
        for g in order:
            if self.missing == 0:
                return
            k = min(self.worker_room(int(g)), self.missing)
            if spread:
                k = min(k, 1)
            if k > 0:
                self.add_workers(int(g), k)

    def ps_fits(self, s: int) -> bool:
        return self.cpu[s] + 1e-9 >= self.cpu_p and self.memf[s] + 1e-9 >= self.mem

    def place_ps(self) -> None:
        """PS on servers holding most workers, round-robin; else nearest with room."""
        topo = self.topo
        if self.job.num_ps == 0:
            return
        wg = np.asarray(self.workers, dtype=np.int64)
        servers, counts = np.unique(topo.group_server[wg], return_counts=True)
        order = servers[np.argsort(-counts, kind="stable")]
        rev = wg[::-1]
        group_of = {int(s): int(g) for g, s in zip(rev, topo.group_server[rev], strict=True)}
        anchor_rack = topo.server_rack[order[0]]
        anchor_sc = topo.server_subcluster[order[0]]
        fallback = None
        i = 0
        while len(self.ps) < self.job.num_ps:
            candidates = [int(s) for s in order if self.ps_fits(int(s))]
            if candidates:
                s = candidates[i % len(candidates)]
                i += 1
                g = group_of[s]
            else:
                if fallback is None:
                    dist = (topo.server_rack != anchor_rack).astype(np.int64) + (
                        topo.server_subcluster != anchor_sc
                    )
                    fallback = np.argsort(dist, kind="stable")
                s = next((int(x) for x in fallback if self.ps_fits(int(x))), None)
                if s is None:
                    return
                g = int(topo.server_groups_start[s])
            self.cpu[s] -= self.cpu_p
            self.memf[s] -= self.mem
            self.ps.append(g)

    def result(self) -> Placement | None:
        if self.missing > 0:
            return None
        self.place_ps()
        if len(self.ps) < self.job.num_ps:
            return None
        return Placement(tuple(self.workers), tuple(self.ps))


def ps_near_workers(job: Job, view: ClusterView, worker_groups) -> tuple[int, ...] | None:
    """The PS groups every heuristic here gives a job whose workers sit on
    ``worker_groups`` (:meth:`_Draft.place_ps`: round-robin over the servers holding
    most of its workers, else the nearest servers with room); None if they do not
    fit. ``view``: the cluster before any of the job's tasks is placed."""
    d = _Draft(job, view)
    for g in worker_groups:
        d.add_workers(int(g), 1)
    d.place_ps()
    return tuple(d.ps) if len(d.ps) == job.num_ps else None


def _server_free(view: ClusterView) -> np.ndarray:
    """Free GPUs per server (float64; read-only, kept in a :class:`ScopedView`'s memo)."""
    memo = view.memo if isinstance(view, ScopedView) else None
    if memo is not None and "server_free" in memo:
        return memo["server_free"]
    t = view.topology
    g0, g1, s0, s1 = _span(view)
    free = np.asarray(view.group_free)[g0:g1]
    out = np.zeros(t.n_servers)
    if free.dtype.kind in "iu" and _servers_have_groups(t):
        # a server's groups are contiguous; integer sums are exact in any order, so
        # this is bincount's float sum, without its per-element weights
        if s1 > s0:
            out[s0:s1] = _per_server(np.add, free, t, s0, s1, g0)
    else:  # each server's groups lie in the span: the same sums, in the same order
        out += np.bincount(t.group_server[g0:g1], weights=free, minlength=t.n_servers)
    out.setflags(write=False)
    if memo is not None:
        memo["server_free"] = out
    return out


#: per topology: the number of GPU groups of every server when they all have as many
#: (else 0)
_WIDTHS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _servers_have_groups(topo: Topology) -> bool:
    """Has every server a GPU group (so per-server ``reduceat`` over
    ``server_groups_start`` sees no empty segment)?"""
    return bool(topo.server_n_groups.min() > 0) if topo.n_servers else False


def _per_server(op: np.ufunc, x: np.ndarray, topo: Topology, s0: int, s1: int, g0: int):
    """``op.reduceat`` of ``x`` (the values of groups ``g0`` .. of servers ``s0`` ..
    ``s1``) over each server's groups, for an ``op`` exact in any order (a minimum, an
    integer sum); every server needs a group. When all servers have ``k`` groups, ``k``
    strided passes (much faster than ``reduceat``)."""
    k = _WIDTHS.get(topo)
    if k is None:
        n = topo.server_n_groups
        k = _WIDTHS[topo] = int(n[0]) if len(n) and n.min() == n.max() else 0
    if k:
        out = x[0::k].copy()
        for j in range(1, k):
            op(out, x[j::k], out=out)
        return out
    return op.reduceat(x, topo.server_groups_start[s0:s1] - g0)


def _open_min(
    topo: Topology,
    group_free: np.ndarray,
    cost: np.ndarray,
    servers: np.ndarray,
    span: tuple[int, int, int, int] | None = None,
) -> np.ndarray:
    """Per server of ``servers``, the least ``cost`` of its groups with a free GPU (inf
    if none): only the groups of ``span`` (a scope's, holding ``servers``) are read when
    it is given, else only those servers' groups when they are a small part of the
    cluster, else the whole cluster's at once (a minimum is exact in any order)."""
    g0, g1, s0, s1 = (0, topo.n_groups, 0, topo.n_servers) if span is None else span
    n = topo.server_n_groups[servers]
    if len(servers) and _servers_have_groups(topo):
        narrow = s1 - s0 < topo.n_servers and s0 <= int(servers.min()) and int(servers.max()) < s1
        if narrow or 4 * int(n.sum()) > topo.n_groups:
            if not narrow:
                g0, g1, s0, s1 = 0, topo.n_groups, 0, topo.n_servers
            masked = np.where(np.asarray(group_free)[g0:g1] > 0, cost[g0:g1], np.inf)
            return _per_server(np.minimum, masked, topo, s0, s1, g0)[servers - s0]
    width = int(n.max()) if len(n) else 0
    pos = np.arange(width)
    inside = pos[None, :] < n[:, None]
    # (servers, width) group ids; a slot past a server's groups repeats its first
    idx = topo.server_groups_start[servers][:, None] + np.where(inside, pos[None, :], 0)
    open_ = inside & (np.asarray(group_free)[idx] > 0)
    return np.where(open_, cost[idx], np.inf).min(axis=1, initial=np.inf)


def _groups_by_server_order(topo: Topology, server_order: np.ndarray) -> np.ndarray:
    """GPU groups, server by server in ``server_order``, groups in id order."""
    starts = np.asarray(topo.server_groups_start[server_order], dtype=np.int64)
    counts = np.asarray(topo.server_n_groups[server_order], dtype=np.int64)
    # each group id is its server's first group plus its rank among that server's groups
    # (one arange over all of them, not one per server)
    first = np.cumsum(counts) - counts  # where each server's groups begin in the output
    return np.repeat(starts - first, counts) + np.arange(int(counts.sum()), dtype=np.int64)


@register
class RandomPolicy(Policy):
    name = "random"
    description = "workers on uniformly random free GPUs, PS on random servers with room"

    def reset(self, topology: Topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        self.rng = np.random.default_rng(seed)

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        if not hasattr(self, "rng"):
            self.reset(view.topology)
        d = _Draft(job, view)
        slots = np.repeat(np.arange(view.topology.n_groups), view.group_free)
        order = self.rng.permutation(slots)
        d.fill(order, spread=True)
        if d.missing:
            return None
        if job.num_ps:
            # random servers for the PS: shuffle worker order so place_ps starts anywhere
            # (passes over the shuffled servers until every PS is placed: a server may
            # hold several PS, as with every other policy)
            servers = self.rng.permutation(view.topology.n_servers)
            while len(d.ps) < job.num_ps:
                placed = len(d.ps)
                for s in servers:
                    if len(d.ps) == job.num_ps:
                        break
                    if d.ps_fits(int(s)):
                        d.cpu[s] -= d.cpu_p
                        d.memf[s] -= d.mem
                        d.ps.append(int(view.topology.server_groups_start[s]))
                if len(d.ps) == placed:
                    return None
        return Placement(tuple(d.workers), tuple(d.ps))


@register
class FirstFitPolicy(Policy):
    name = "first-fit"
    description = "first server that holds the whole job, else GPU groups in index order"

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        topo = view.topology
        d = _Draft(job, view)
        free = _server_free(view)
        whole = np.flatnonzero(free >= job.num_workers)
        if len(whole):
            d.fill(_groups_by_server_order(topo, whole[:1]))
        d.fill(_open_groups(d.group_free, _span(view)))
        return d.result()


@register
class LoadBalancePolicy(Policy):
    name = "load-balance"
    description = "each worker on the server with the most free GPUs (spreads load)"

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        topo = view.topology
        d = _Draft(job, view)
        free = _server_free(view).astype(np.float64)
        frac = free / np.maximum(topo.server_gpus, 1)
        for _ in range(job.num_workers):
            s = int(np.argmax(frac))
            if frac[s] <= 0:
                return None
            a, n = topo.server_groups_start[s], topo.server_n_groups[s]
            groups = np.arange(a, a + n)
            room = d.group_free[groups]
            g = int(groups[np.argmax(room)])
            if d.worker_room(g) == 0:
                frac[s] = 0.0  # CPU or memory full: stop offering this server
                continue
            d.add_workers(g, 1)
            free[s] -= 1
            frac[s] = free[s] / topo.server_gpus[s]
        return d.result()


@register
class TetrisPolicy(Policy):
    name = "tetris"
    description = "servers by alignment of free (GPU, CPU, memory) with the job's demand"

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        topo = view.topology
        d = _Draft(job, view)
        free = _server_free(view)
        cap = np.stack([topo.server_gpus, topo.server_cpu, topo.server_memory_gb], axis=1)
        have = np.stack([free, view.server_cpu_free, view.server_mem_free], axis=1) / cap
        demand = np.array([1.0, d.cpu_w, d.mem]) * job.num_workers / cap.max(axis=0)
        score = have @ demand
        score[free <= 0] = -np.inf
        order = np.argsort(-score, kind="stable")
        order = order[np.isfinite(score[order])]
        d.fill(_groups_by_server_order(topo, order) if len(order) else [])
        return d.result()


def _distance_order(
    topo: Topology, anchor: int, group_free: np.ndarray, span: tuple[int, int, int, int]
) -> np.ndarray:
    """Groups with free GPUs (all inside ``span``) by hierarchy distance from server
    ``anchor``."""
    groups = _open_groups(group_free, span)
    srv = topo.group_server[groups]
    dist = (
        (srv != anchor).astype(np.int64)
        + (topo.server_rack[srv] != topo.server_rack[anchor])
        + (topo.server_subcluster[srv] != topo.server_subcluster[anchor])
    )
    order = np.lexsort((groups, -group_free[groups], dist))
    return groups[order]


@register
class LocalityPolicy(Policy):
    name = "locality"
    description = "PS on an anchor server, workers on the free GPUs closest to it"

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        topo = view.topology
        d = _Draft(job, view)
        free = _server_free(view)
        anchor = int(np.argmax(free))
        if free[anchor] <= 0:
            return None
        d.fill(_distance_order(topo, anchor, d.group_free, _span(view)))
        return d.result()


@register
class CongestionAwarePolicy(Policy):
    name = "congestion-aware"
    description = "the rack whose uplink and NICs carry the fewest jobs, packed on quiet NICs"

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        topo = view.topology
        d = _Draft(job, view)
        free = _server_free(view)
        off = topo.link_offset
        nic_load = view.link_jobs[off[2] : off[3]].astype(np.float64)
        rack_load = view.link_jobs[off[3] : off[4]].astype(np.float64)
        sc_load = view.link_jobs[off[4] :].astype(np.float64)
        rack_free = np.bincount(topo.server_rack, weights=free, minlength=topo.n_racks)
        rack_nic = np.bincount(topo.server_rack, weights=nic_load, minlength=topo.n_racks)
        rack_key = (
            rack_load
            + rack_nic / np.bincount(topo.server_rack)
            + sc_load[topo.rack_subcluster] * 0.1
        )
        fits = rack_free >= job.num_workers
        if fits.any():
            racks = np.flatnonzero(fits)
            racks = racks[np.lexsort((racks, rack_key[racks]))]
        else:
            racks = np.lexsort((np.arange(topo.n_racks), rack_key, -rack_free))
        rank = np.empty(topo.n_racks, dtype=np.int64)
        rank[racks] = np.arange(len(racks))
        rank_all = np.full(topo.n_racks, len(racks), dtype=np.int64)
        rank_all[racks] = rank[racks]
        servers = np.flatnonzero(free > 0)
        order = np.lexsort(
            (servers, -free[servers], nic_load[servers], rank_all[topo.server_rack[servers]])
        )
        d.fill(_groups_by_server_order(topo, servers[order]) if len(servers) else [])
        return d.result()


def _fill_server_by_cost(d: _Draft, s: int, cost: np.ndarray, own: np.ndarray) -> None:
    """Workers onto server ``s``'s cheapest groups, each adding its own pressure.

    One worker at a time: the cheapest group with room (the first of equals), then its
    pressure ``own`` (per level: group, socket, server) is added to the costs it
    raises. A group has room (:meth:`_Draft.worker_room` > 0) when it has a free GPU
    and its server a worker's cores and memory. The few groups of one server are
    walked as Python floats, in the order numpy's ``local[i] += own[0]``,
    ``local[same socket] += own[1]``, ``local += own[2]`` adds (the same IEEE
    sums; the costs are finite, so the first least cost is ``np.argmin``'s)."""
    topo = d.topo
    a, n = int(topo.server_groups_start[s]), int(topo.server_n_groups[s])
    local = cost[a : a + n].tolist()
    free = d.group_free[a : a + n].tolist()
    socket = topo.group_socket[a : a + n].tolist()
    own0, own1, own2 = (float(x) for x in own)
    while d.missing:
        if d.server_room(s) <= 0:
            return
        i, low = -1, math.inf
        for j in range(n):
            if free[j] > 0 and local[j] < low:
                i, low = j, local[j]
        if i < 0:
            return
        d.add_workers(a + i, 1)
        free[i] -= 1
        local[i] += own0
        mine = socket[i]
        for j in range(n):
            local[j] = (local[j] + own1) + own2 if socket[j] == mine else local[j] + own2


@register
class InterferenceAwarePolicy(Policy):
    """Greedy: consolidate as communication requires, then pick the quietest spot.

    The interference cost of a GPU group ``g`` for a job with sensitivity ``s`` and
    pressure ``p``, with ``P^L(g)`` the residents' summed pressure at level ``L``:

    ``Σ_L λ_L (s·M^L)·P^L(g)  +  Σ_L λ_L (p·M^L)·P^L(g)``

    — what the job would suffer from the residents and (with the residents' pressure
    as a proxy for their sensitivity) what it would inflict on them. A job that fits
    one server goes to one server: the ``candidates`` servers whose cheapest free
    groups cost least are each filled greedily, and the learned interference model
    (``checkpoints/interference``, :func:`marl_sched.interference.load_default`)
    predicts the job's slowdown on each; the lowest wins (without a learned model,
    the lowest cost wins). A larger job fills servers of the least-loaded rack
    first. Within a server, workers take the cheapest groups one by one, each
    raising the cost its own pressure adds.

    With ``protect > 0`` the cost of a group also counts, ``protect`` times, the
    slowdown a worker there would add to the resident jobs weighted by their size
    (:func:`~marl_sched.simulator.harm_to_residents`): the inflicted term above
    treats a one-GPU resident and one worker of a 48-GPU job alike, although the
    second stalls 48 GPUs. Off in the registered heuristic (the foundation's
    ``interference-aware``); the rollout teacher can propose with it
    (``train.bc_protect``).

    Args:
        candidates: servers scored by the learned model per decision (default 4).
        learned: use the learned model when it is available (default True).
        protect: weight of the harm to residents in the cost (default 0: off).
    """

    name = "interference-aware"
    description = "consolidate, then the spot with the least predicted interference"

    def __init__(
        self, candidates: int = 4, learned: bool = True, protect: float = 0.0, speed: float = 0.0
    ) -> None:
        self.candidates = candidates
        self.learned = learned
        self.protect = protect
        self.speed = speed
        self._model = None
        #: ``{(worker groups, PS groups): feature row}`` shared by the callers of one
        #: job on one cluster state (None: no sharing), and the job's per-group cost
        #: terms under ``("cost",)``, ``("harm",)``, ``("slow",)`` (:meth:`_shared`).
        #: The candidate features of a placement depend only on the job, the placement
        #: and the residents' pressure and links, not on which groups a view leaves
        #: free, so the hints of a job (each scope's, the global ones) and a teacher's
        #: proposals on its views share them: :func:`shared_candidates` sets it while
        #: they are asked, and restores it after.
        self.candidate_cache: dict | None = None

    def reset(self, topology: Topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        self._model = None
        if self.learned:
            from marl_sched.interference.model import default_model_path, load_default

            if default_model_path().exists():
                self._model = load_default()

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        topo = view.topology
        spec = CATALOGUE[job.model]
        weights = view.perf.level_weights  # (3, R) = λ_L · M^L
        both = weights * (spec.sensitivity + spec.pressure)
        cost = self._shared(
            "cost",
            lambda: (
                view.group_pressure @ both[0]
                + (view.socket_pressure @ both[1])[topo.group_socket]
                + (view.server_pressure @ both[2])[topo.group_server]
            ),
        )
        if self.protect > 0:
            harm = self._shared("harm", lambda: harm_to_residents(view, spec.pressure))
            cost = cost + self.protect * harm
        slow = None
        if self.speed > 0:
            slow = self._shared("slow", lambda: self._slowness(job, view))
            cost = cost + self.speed * slow
        own = spec.pressure @ both.T  # what one more worker of ours adds, per level
        free = _server_free(view)
        fits = np.flatnonzero(free >= job.num_workers)
        if len(fits):
            best = _open_min(topo, view.group_free, cost, fits, _span(view))
            order = fits[np.argsort(best + own[2] * (job.num_workers - 1), kind="stable")]
            options = []
            d = _Draft(job, view)
            for s in order:
                d.restart()  # each candidate server on its own, from the view
                _fill_server_by_cost(d, int(s), cost, own)
                placement = d.result()
                if placement is not None:
                    options.append(placement)
                    if self._model is None or len(options) >= self.candidates:
                        break
            if options:
                return options[self._pick(job, view, options, slow)]
        d = _Draft(job, view)
        rack_free = np.bincount(topo.server_rack, weights=free, minlength=topo.n_racks)
        rank = np.argsort(np.argsort(-rack_free, kind="stable"), kind="stable")
        # only the span's servers have free GPUs (the others would take no worker): the
        # same order of them as among all servers
        _, _, s0, s1 = _span(view)
        sv = np.arange(s0, s1)
        servers = sv[np.lexsort((sv, -free[sv], rank[topo.server_rack[sv]]))]
        # a server without a free GPU takes no worker: skipping it changes nothing
        for s in servers[free[servers] > 0]:
            if d.missing == 0:
                break
            _fill_server_by_cost(d, int(s), cost, own)
        return d.result()

    def _shared(self, name: str, compute) -> np.ndarray:
        """``compute()``, kept in :attr:`candidate_cache` under ``(name,)`` when there
        is one: the job's per-group cost terms depend on the job and the residents'
        pressure, not on which groups a view leaves free, so the hints of one job
        (each scope's, the global ones) compute them once. Read-only."""
        cache = self.candidate_cache
        if cache is not None and (name,) in cache:
            return cache[(name,)]
        out = compute()
        out.setflags(write=False)
        if cache is not None:
            cache[(name,)] = out
        return out

    def _slowness(self, job: Job, view: ClusterView) -> np.ndarray:
        """Per GPU group, the fraction by which a worker there stretches the job's
        isolated iteration time for its GPU type alone: the compute share of the
        isolated time times ``max_speed / speed - 1`` (0 on the fastest type)."""
        topo, perf = view.topology, view.perf
        spec = CATALOGUE[job.model]
        fastest = float(topo.group_speed.max())
        iso = perf.isolated_iteration_time(job.model, job.num_workers, job.num_ps)
        share = spec.compute_s / fastest / iso
        return share * (fastest / topo.group_speed - 1.0)

    def _candidate_rows(self, job: Job, view: ClusterView, options: list[Placement]) -> np.ndarray:
        """``(K, F)`` learned-model features of the options, from ``candidate_cache``
        where it holds them (each row is computed on its own, so the same either way)."""
        from marl_sched.interference.features import candidate_features

        cache = self.candidate_cache
        if cache is None:
            return candidate_features(
                view, job, [o.worker_groups for o in options], [o.ps_groups for o in options]
            )
        keys = [(tuple(o.worker_groups), tuple(o.ps_groups)) for o in options]
        todo = list(dict.fromkeys(k for k in keys if k not in cache))
        if todo:
            rows = candidate_features(view, job, [k[0] for k in todo], [k[1] for k in todo])
            cache.update(zip(todo, rows, strict=True))
        return np.stack([cache[k] for k in keys])

    def _predicted(self, job: Job, view: ClusterView, options: list[Placement]) -> np.ndarray:
        """The learned model's slowdowns of the options, kept in ``candidate_cache``
        per list of options (the same rows in, the same bits out)."""
        cache = self.candidate_cache
        key = ("predicted", *((tuple(o.worker_groups), tuple(o.ps_groups)) for o in options))
        if cache is not None and key in cache:
            return cache[key]
        out = self._model.predict(self._candidate_rows(job, view, options))
        out.setflags(write=False)
        if cache is not None:
            cache[key] = out
        return out

    def _pick(
        self, job: Job, view: ClusterView, options: list[Placement], slow: np.ndarray | None
    ) -> int:
        if (self._model is None and slow is None) or len(options) == 1:
            return 0
        score = np.zeros(len(options))
        if self._model is not None:
            score = score + self._predicted(job, view, options)
        if slow is not None:
            # a synchronous job runs at its slowest worker's pace
            worst = [slow[list(o.worker_groups)].max() for o in options]
            score = score + self.speed * np.array(worst)
        return int(np.argmin(score))


@contextlib.contextmanager
def shared_candidates(policies: Sequence[Policy], cache: dict | None = None) -> Iterator[dict]:
    """Let the :class:`InterferenceAwarePolicy` among ``policies`` share one
    :attr:`~InterferenceAwarePolicy.candidate_cache` (``cache``, else a new one) while
    the block asks them to place one job on views of one cluster state (the whole view
    and scoped ones); each gets back the cache it had before."""
    cache = {} if cache is None else cache
    sharing = [h for h in policies if isinstance(h, InterferenceAwarePolicy)]
    before = [h.candidate_cache for h in sharing]
    for h in sharing:
        h.candidate_cache = cache
    try:
        yield cache
    finally:
        for h, old in zip(sharing, before, strict=True):
            h.candidate_cache = old


@register
class SpeedAwarePolicy(InterferenceAwarePolicy):
    """``interference-aware`` that also counts how much slower a GPU type runs the
    job's compute (its ``speed`` option at the natural weight 1: the cost is then in
    units of relative iteration time, like the learned interference model's slowdown),
    and among candidate servers prefers the one whose slowest worker is fastest."""

    name = "speed-aware"
    description = "interference-aware that also counts each GPU type's speed for the job"

    def __init__(self, **options) -> None:
        super().__init__(**{"speed": 1.0, **options})


@register
class ResidentAwarePolicy(InterferenceAwarePolicy):
    """``interference-aware`` that also counts, 3 times, the slowdown a worker would
    add to the resident jobs weighted by their size (its ``protect`` option; the
    rollout teacher's ``train.bc_protect: 3.0`` proposer)."""

    name = "resident-aware"
    description = "interference-aware that also spares big resident jobs (3x their harm)"

    def __init__(self, **options) -> None:
        super().__init__(**{"protect": 3.0, **options})


#: policies whose whole placement of the job, made inside the agents' masks from the
#: job's home agent, may be a hint (a *plan hint*, :mod:`envs.hints`): one plan for every
#: agent, its follow action forwarding towards the plan's next task when another scope
#: holds it
PLAN_HINTS = ("masked:lookahead-learned", "masked:lookahead-learned-home")


def hint_names() -> list[str]:
    """What ``env.hints`` may name: the registered heuristics and :data:`PLAN_HINTS`."""
    return [*heuristic_names(), *PLAN_HINTS]


def make_hint(name: str) -> Policy:
    """A registered heuristic (or a :data:`PLAN_HINTS` policy) by name, as a hint or a
    teacher's proposer."""
    return make_policy(name)
