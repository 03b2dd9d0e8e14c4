"""The vectorised hint paths equal their definitions bit for bit: the learned model's
candidate features of K placements assembled together, the segment max/mean, the
busy counts around a group, the per-server least open cost, a restarted draft, and
the greedy fill of a server (``marl_sched/interference/features.py``,
``marl_sched/policies/heuristics.py``). Each is checked inside a seeded run, on the
cluster states the interference-aware heuristic meets (with and without GPU sharing).
``tests/envs/test_golden_decisions.py`` pins the decisions they lead to."""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import marl_sched.interference.features as features
from marl_sched.catalogue import CATALOGUE
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.policies import heuristics
from marl_sched.policies.heuristics import InterferenceAwarePolicy
from marl_sched.runner import build_cluster, load_workload, simulate


def _window(sharing: int | None):
    cfg = load_config(REPO_ROOT / "configs" / "default.yaml")
    cfg = dataclasses.replace(
        cfg, workload=dataclasses.replace(cfg.workload, max_jobs=40, load=2.5)
    )
    if sharing is not None:
        cfg = dataclasses.replace(
            cfg, topology=dataclasses.replace(cfg.topology, gpu_sharing=sharing)
        )
    topo, perf = build_cluster(cfg)
    return cfg, topo, perf, load_workload(cfg, perf)


def _reference_rows(view, job, options) -> np.ndarray:
    """The candidate features as defined before the vectorisation: one placement at a
    time, busy GPUs by prefix sums over the whole cluster, per-level means and maxima
    of each placement's own rows, link maxima by ``np.maximum.at``."""
    perf, topo = view.perf, view.topology
    spec = CATALOGUE[job.model]
    busy = (
        topo.group_capacity - np.asarray(view.group_free)
        if view.gpu_load is None
        else np.bincount(topo.gpu_group, weights=view.gpu_load, minlength=topo.n_groups)
    )
    prefix = np.concatenate([[0], np.cumsum(busy)])
    rows = []
    for o in options:
        lay = perf.layout(spec, o.worker_groups, o.ps_groups)
        g = lay.groups
        s_lo, s_hi, v_lo, v_hi = features._level_spans(topo, g)
        nbr = (
            view.group_pressure[g],
            view.socket_pressure[lay.worker_sockets],
            view.server_pressure[lay.worker_servers],
        )
        level_busy = (
            (prefix[g + 1] - prefix[g]).astype(np.float64),
            (prefix[s_hi] - prefix[s_lo]).astype(np.float64),
            (prefix[v_hi] - prefix[v_lo]).astype(np.float64),
        )
        x = np.empty(features.N_FEATURES)
        x[0:5], x[5:10] = spec.pressure, spec.sensitivity
        x[10], x[11] = math.log(spec.compute_s), math.log(spec.model_mb)
        x[12], x[13], x[14] = lay.speed, job.num_workers, job.num_ps
        racks = np.unique(topo.server_rack[lay.servers])
        x[15], x[16], x[17] = len(g), len(lay.servers), len(racks)
        x[18] = len(np.unique(topo.rack_subcluster[racks]))
        i = 19
        for p in nbr:
            x[i : i + 10 : 2], x[i + 1 : i + 10 : 2] = p.max(axis=0), p.mean(axis=0)
            i += 10
        for b in level_busy:
            x[i], x[i + 1] = b.max(), b.mean()
            i += 2
        ids = lay.link_ids
        total = view.link_load[ids] + lay.link_util
        link = np.zeros((4, 5))
        if len(ids):
            kind = topo.link_kind[ids]
            np.maximum.at(link[0], kind, view.link_jobs[ids])
            np.maximum.at(link[1], kind, np.maximum(total - lay.link_util, 0.0))
            np.maximum.at(link[2], kind, lay.link_cost)
            np.maximum.at(link[3], kind, lay.link_cost * np.maximum(total, 1.0))
        x[i : i + 10] = link[:2].ravel()
        x[i + 10 : i + 20] = np.log(1e-4 + link[2:]).ravel()
        rows.append(x)
    return np.stack(rows)


def _reference_fill(d, s: int, cost: np.ndarray, own: np.ndarray) -> None:
    """The greedy fill of one server as numpy arrays (the definition)."""
    topo = d.topo
    a, n = int(topo.server_groups_start[s]), int(topo.server_n_groups[s])
    local = cost[a : a + n].copy()
    while d.missing:
        room = np.array([d.worker_room(a + i) for i in range(n)])
        if not room.any():
            return
        i = int(np.argmin(np.where(room > 0, local, np.inf)))
        d.add_workers(a + i, 1)
        local[i] += own[0]
        local[topo.group_socket[a : a + n] == topo.group_socket[a + i]] += own[1]
        local += own[2]


class _Checking(InterferenceAwarePolicy):
    """``interference-aware`` that checks the vectorised paths on every state it sees."""

    def __init__(self) -> None:
        super().__init__()
        self.checked = {"rows": 0, "open": 0, "fill": 0, "restart": 0, "busy": 0}

    def _candidate_rows(self, job, view, options):
        got = super()._candidate_rows(job, view, options)
        assert np.array_equal(got, _reference_rows(view, job, options))
        self.checked["rows"] += len(options)
        return got

    def place(self, job, view):
        topo = view.topology
        rng = np.random.default_rng(job.job_id)
        cost = rng.random(topo.n_groups) * rng.choice([1e-3, 1.0, 40.0])
        free = np.asarray(view.group_free)
        for size in (3, topo.n_servers):  # a scope's few servers; the whole cluster
            servers = np.sort(rng.choice(topo.n_servers, min(size, topo.n_servers), False))
            dense = np.array(
                [
                    np.where(free[g] > 0, cost[g], np.inf).min()
                    for g in (
                        np.arange(a, a + n)
                        for a, n in zip(
                            topo.server_groups_start[servers],
                            topo.server_n_groups[servers],
                            strict=True,
                        )
                    )
                ]
            )
            assert np.array_equal(heuristics._open_min(topo, free, cost, servers), dense)
            self.checked["open"] += 1
        own = CATALOGUE[job.model].pressure @ (view.perf.level_weights * 0.7).T
        for s in rng.choice(topo.n_servers, 3, replace=False):
            a, b = heuristics._Draft(job, view), heuristics._Draft(job, view)
            heuristics._fill_server_by_cost(a, int(s), cost, own)
            _reference_fill(b, int(s), cost, own)
            assert a.workers == b.workers
            assert np.array_equal(a.group_free, b.group_free)
            assert np.array_equal(a.cpu, b.cpu) and np.array_equal(a.memf, b.memf)
            a.result()
            a.restart()
            fresh = heuristics._Draft(job, view)
            assert (a.workers, a.ps) == ([], [])
            for key in ("group_free", "cpu", "memf"):
                assert np.array_equal(getattr(a, key), getattr(fresh, key)), key
            self.checked["fill"] += 1
            self.checked["restart"] += 1
        groups = rng.choice(topo.n_groups, 6)
        spans = features._level_spans(topo, groups)
        busy = (
            topo.group_capacity - free
            if view.gpu_load is None
            else np.bincount(topo.gpu_group, weights=view.gpu_load, minlength=topo.n_groups)
        )
        prefix = np.concatenate([[0], np.cumsum(busy)])
        s_lo, s_hi, v_lo, v_hi = spans
        want = np.stack(
            [
                prefix[groups + 1] - prefix[groups],
                prefix[s_hi] - prefix[s_lo],
                prefix[v_hi] - prefix[v_lo],
            ],
            axis=1,
        )
        assert np.array_equal(features._busy_around(topo, view, groups, spans), want)
        self.checked["busy"] += 1
        return super().place(job, view)


@pytest.mark.parametrize("sharing", [None, 2])
def test_the_vectorised_hint_paths_equal_their_definitions(sharing):
    cfg, topo, perf, workload = _window(sharing)
    policy = _Checking()
    simulate(cfg, "interference-aware", workload, topo, perf, seed=0, policy=policy)
    assert policy.checked["rows"] >= 100
    assert min(policy.checked.values()) >= 20


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 40), min_size=1, max_size=6),
    columns=st.integers(2, 18),  # one column would be a 1-D (pairwise) sum
    seed=st.integers(0, 2**32 - 1),
)
def test_segment_max_and_mean_are_each_segments_own(lengths, columns, seed):
    rng = np.random.default_rng(seed)
    counts = np.array(lengths, dtype=np.int64)
    n = int(counts.sum())
    rows = rng.random((n, columns)) * rng.choice([1e-3, 1.0, 50.0], (n, 1))
    rows[rng.random(n) < 0.3] = 0.0
    top, mean = features._segment_max_mean(rows, counts)
    start = 0
    for k, n in enumerate(counts):
        seg = rows[start : start + n]
        assert np.array_equal(top[k], seg.max(axis=0))
        assert np.array_equal(mean[k], seg.mean(axis=0))
        start += n


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), size=st.integers(0, 40))
def test_groups_by_server_order_lists_each_servers_groups_in_turn(seed, size):
    """The one-arange listing equals its definition, server by server in the given order
    (any order, repeats and servers of several groups), on the default cluster."""
    topo = _default_topology()
    order = np.random.default_rng(seed).integers(0, topo.n_servers, size=size)
    starts, counts = topo.server_groups_start, topo.server_n_groups
    want = [g for s in order for g in range(starts[s], starts[s] + counts[s])]
    got = heuristics._groups_by_server_order(topo, order)
    assert got.dtype == np.int64 and got.tolist() == want


@functools.cache
def _default_topology():
    return build_cluster(load_config(REPO_ROOT / "configs" / "default.yaml"))[0]
