"""The rules of ``ClusterPlacement-v1`` that are not a feature: capacity checks, the
forward rule, scope views and home agents (pure functions; :mod:`envs.cluster_env`
documents the rules)."""

from __future__ import annotations

import dataclasses
import weakref
import zlib
from typing import TYPE_CHECKING, Protocol

import numpy as np

from marl_sched.jobs import Job, Placement
from marl_sched.policies.heuristics import scoped
from marl_sched.simulator import ClusterView
from marl_sched.topology import Topology

if TYPE_CHECKING:
    from envs.observations import ObservationBuilder

_EPS = 1e-9  # the simulator's capacity tolerance (Simulator._check)


class ScopeMap(Protocol):
    """Which agent owns each GPU group and server (a protocol:
    :class:`envs.observations.ObservationBuilder` is one)."""

    topology: Topology
    group_scope: np.ndarray  # (n_groups,) owning agent of each GPU group
    server_scope: np.ndarray  # (n_servers,) owning agent of each server


def action_towards(builder: ObservationBuilder, agent: int, g: int) -> int:
    """``agent``'s action that brings a task closer to GPU group ``g``: the local slot
    of ``g`` when ``agent`` owns it, else forwarding straight to its owner."""
    owner = int(builder.group_scope[g])
    if owner != agent:
        return builder.pad[0] + owner
    return int(np.searchsorted(builder.scopes[owner].groups, g))


def placement_key(p: Placement) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """What makes two placements the same: the multisets of their worker and PS
    groups (the order of a job's tasks does not matter to the simulator)."""
    return tuple(sorted(p.worker_groups)), tuple(sorted(p.ps_groups))


def _slots(x: np.ndarray, d: float) -> np.ndarray:
    """Tasks needing ``d`` each entry of ``x`` can take (inf when ``d`` is 0)."""
    if d <= 0:
        return np.full(x.shape, np.inf)
    return np.floor(np.maximum(x + _EPS, 0.0) / d)


def server_worker_slots(
    topology: Topology,
    group_free: np.ndarray,
    cpu_free: np.ndarray,
    mem_free: np.ndarray,
    cpu_worker: float,
    mem_gb: float,
) -> np.ndarray:
    """(n_servers,) workers each server can take: min(free GPUs, cores // cpu_worker,
    memory // mem_gb)."""
    gpus = np.add.reduceat(np.maximum(group_free, 0), topology.server_groups_start)
    return np.minimum(gpus, np.minimum(_slots(cpu_free, cpu_worker), _slots(mem_free, mem_gb)))


def scopes_can_host_rest(
    topology: Topology,
    group_start: np.ndarray,
    group_free: np.ndarray,
    cpu_free: np.ndarray,
    mem_free: np.ndarray,
    demands: tuple[float, float, float],
    workers_left: int,
    ps_left: int,
) -> np.ndarray:
    """(A,) bool: can scope ``a`` alone host all of a job's remaining tasks.

    Scopes are contiguous group ranges from ``group_start``; ``demands`` = (cores per
    worker, cores per PS, GB per task). Greedy: workers fill the servers with the most
    slots (min of free GPUs, cores and memory) first, PS take the cores and memory left.
    Never "yes" for a job that cannot fit."""
    t = topology
    cw, cp, m = demands
    n = len(group_start)
    w_slots = server_worker_slots(t, group_free, cpu_free, mem_free, cw, m)
    srv_bounds = np.searchsorted(t.server_groups_start, [*group_start, t.n_groups])
    scope = np.repeat(np.arange(n), np.diff(srv_bounds))  # of each server (sorted)
    # all scopes at once: per scope, servers with the most worker slots first (stable);
    # slot counts are whole numbers, so these float sums are exact in any order
    order = np.lexsort((-w_slots, scope))
    ws = w_slots[order]
    total = np.bincount(scope, weights=w_slots, minlength=n)
    scope_ahead = np.concatenate([[0.0], np.cumsum(total)[:-1]])
    ahead = np.cumsum(ws) - ws - scope_ahead[scope]  # slots of the servers filled before
    x = np.zeros(len(ws))
    x[order] = np.clip(workers_left - ahead, 0.0, ws)
    cpu = cpu_free - x * cw
    mem = mem_free - x * m
    ps_slots = np.bincount(scope, weights=np.minimum(_slots(cpu, cp), _slots(mem, m)), minlength=n)
    return (total >= workers_left) & (ps_slots >= ps_left)


def forward_targets(
    can_task: np.ndarray,
    can_rest: np.ndarray,
    agent: int,
    allowed: np.ndarray,
    whole: bool = False,
) -> np.ndarray:
    """(A,) bool: the agents ``agent`` may forward the current task to, among
    ``allowed`` (never itself): forward when you must (:mod:`envs.cluster_env`,
    "Actions"). ``whole``: no task of the job is placed yet."""
    allowed = np.asarray(allowed, dtype=bool).copy()
    allowed[agent] = False
    if not can_task[agent]:
        return allowed & np.asarray(can_task, dtype=bool)
    rest = allowed & np.asarray(can_rest, dtype=bool)
    if whole or not can_rest[agent]:
        return rest
    return np.zeros_like(allowed)


def scope_view(builder: ScopeMap, view: ClusterView, agent: int) -> ClusterView:
    """``view`` with every GPU, core and GB outside ``agent``'s scope marked in use, so
    a heuristic asked to place a job on it keeps the job inside that scope.

    A scope whose groups (and servers) are one contiguous range (every scope of
    :class:`envs.observations.ObservationBuilder`) gives a
    :class:`~marl_sched.policies.heuristics.ScopedView` over that range, built from
    slices: the heuristics then read only the scope's groups and servers, and share
    what they derive from it."""
    t = builder.topology
    span = _contiguous_span(builder, agent)
    if span is None:
        return masked_scope_view(builder, view, agent)
    g0, g1, s0, s1 = span
    free = np.asarray(view.group_free)
    gfree = np.zeros_like(free)
    gfree[g0:g1] = free[g0:g1]
    inside = gfree[g0:g1]
    # integer counts sum exactly in any order; other kinds as the whole array would
    total = inside.sum() if free.dtype.kind in "iub" else gfree[: t.n_groups].sum()
    arrays = {}
    for name in ("server_cpu_free", "server_mem_free"):
        src = np.asarray(getattr(view, name))
        out = np.zeros(src.shape, dtype=np.result_type(src.dtype, 0.0))
        out[s0:s1] = src[s0:s1]
        arrays[name] = out
    for a in (gfree, *arrays.values()):
        a.setflags(write=False)
    return scoped(view, span, group_free=gfree, free_gpus=int(total), **arrays)


def masked_scope_view(builder: ScopeMap, view: ClusterView, agent: int) -> ClusterView:
    """:func:`scope_view` as whole-cluster arrays, zero outside ``agent``'s scope (any
    scope, contiguous or not)."""
    gfree = np.where(builder.group_scope == agent, view.group_free, 0)
    inside = builder.server_scope == agent
    return dataclasses.replace(
        view,
        group_free=gfree.astype(np.asarray(view.group_free).dtype),
        server_cpu_free=np.where(inside, view.server_cpu_free, 0.0),
        server_mem_free=np.where(inside, view.server_mem_free, 0.0),
        free_gpus=int(gfree[: builder.topology.n_groups].sum()),
    )


#: per scope map: its ``group_scope`` and ``server_scope`` arrays and the spans found
_SPANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _contiguous_span(builder: ScopeMap, agent: int) -> tuple[int, int, int, int] | None:
    """:func:`_find_span`, kept per scope map and agent (while its arrays stay the same
    objects)."""
    gs, ss = builder.group_scope, builder.server_scope
    try:
        known = _SPANS.get(builder)
    except TypeError:  # a scope map that cannot be weakly referenced
        return _find_span(builder, agent)
    if known is None or known[0] is not gs or known[1] is not ss:
        known = _SPANS[builder] = (gs, ss, {})
    spans = known[2]
    if agent not in spans:
        spans[agent] = _find_span(builder, agent)
    return spans[agent]


def _find_span(builder: ScopeMap, agent: int) -> tuple[int, int, int, int] | None:
    """``(g0, g1, s0, s1)``: ``agent``'s groups and servers as two ranges, or None when
    they are not contiguous (``group_scope`` and ``server_scope`` not sorted)."""
    gs, ss = builder.group_scope, builder.server_scope
    g0, g1 = (int(x) for x in np.searchsorted(gs, (agent, agent + 1)))
    s0, s1 = (int(x) for x in np.searchsorted(ss, (agent, agent + 1)))
    t = builder.topology
    n_g, n_s = int(np.count_nonzero(gs == agent)), int(np.count_nonzero(ss == agent))
    if g1 - g0 != n_g or s1 - s0 != n_s or n_g == 0:
        return None
    if (gs[g0:g1] != agent).any() or (ss[s0:s1] != agent).any():
        return None
    starts = t.server_groups_start
    if int(starts[s0]) != g0 or (s1 < t.n_servers and int(starts[s1]) != g1):
        return None
    if s1 == t.n_servers and g1 != t.n_groups:
        return None
    return g0, g1, s0, s1


def home_agent(job: Job, n_agents: int) -> int:
    """The agent a job arrives at: ``crc32(vc) mod A``, else ``job_id mod A``."""
    if n_agents == 1:
        return 0
    if job.vc:
        return zlib.crc32(job.vc.encode()) % n_agents
    return job.job_id % n_agents
