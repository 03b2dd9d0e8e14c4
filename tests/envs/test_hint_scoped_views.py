"""Scope views built from slices (a ScopedView): every heuristic places a job on one
exactly as on the whole-cluster view with everything outside the scope marked in use
(masked_scope_view: how every scope view was built before)."""

from __future__ import annotations

import numpy as np
import pytest

from envs.config import EnvConfig
from envs.observations import ObservationBuilder
from envs.rules import masked_scope_view, scope_view
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.jobs import Job
from marl_sched.policies import make_policy
from marl_sched.policies.heuristics import ScopedView, hint_names, scoped
from tests.helpers import partly_occupied

TINY = str(REPO_ROOT / "configs" / "tiny.yaml")
JOBS = [(1, 0), (1, 1), (2, 1), (3, 2), (4, 0), (5, 1), (8, 2), (12, 3)]


def _plans(view_of, topo, jobs):
    """Per job: every heuristic's placement on ``view_of()`` (one view per job, shared
    by the heuristics in turn, as the hints ask them)."""
    policies = [make_policy(n) for n in hint_names()]
    for p in policies:
        p.reset(topo, 0)
    return [[p.place(job, v) for p in policies] for job in jobs for v in [view_of()]]


@pytest.mark.parametrize("decisions", [0, 6, 12])
def test_every_heuristic_places_the_same_on_a_scoped_view(decisions):
    topo, perf, sim = partly_occupied(TINY, decisions=decisions)
    builder = ObservationBuilder(topo, perf, EnvConfig())
    view = sim.view()
    jobs = [Job(900 + i, "probe", m, w, p, 100.0, 0.0, 10.0)
            for i, (w, p) in enumerate(JOBS) for m in ("resnet-50", "vgg-16")]  # fmt: skip
    placed = 0
    for agent in range(builder.n_agents):
        scoped_view = scope_view(builder, view, agent)
        assert isinstance(scoped_view, ScopedView)
        full = masked_scope_view(builder, view, agent)
        for name in ("group_free", "server_cpu_free", "server_mem_free"):
            a, b = np.asarray(getattr(scoped_view, name)), np.asarray(getattr(full, name))
            assert a.dtype == b.dtype and np.array_equal(a, b)
        assert scoped_view.free_gpus == full.free_gpus
        got = _plans(lambda a=agent: scope_view(builder, view, a), topo, jobs)
        want = _plans(lambda a=agent: masked_scope_view(builder, view, a), topo, jobs)
        assert got == want
        placed += sum(p is not None for row in got for p in row)
    assert placed > 0
    # the whole cluster, with a memo shared by the heuristics
    assert _plans(lambda: scoped(view), topo, jobs) == _plans(lambda: view, topo, jobs)


def test_scopes_that_are_not_ranges_keep_the_whole_cluster_arrays():
    topo, perf, sim = partly_occupied(TINY, decisions=12)
    builder = ObservationBuilder(topo, perf, EnvConfig())

    class Interleaved:  # every other server's groups belong to agent 1
        topology = topo
        server_scope = np.arange(topo.n_servers) % 2
        group_scope = server_scope[topo.group_server]

    view = sim.view()
    got = scope_view(Interleaved(), view, 1)
    assert not isinstance(got, ScopedView)
    assert np.array_equal(got.group_free, masked_scope_view(Interleaved(), view, 1).group_free)
    assert builder.n_agents == 2


@pytest.mark.parametrize("config", ["tiny.yaml", "learn_smoke.yaml", "philly.yaml"])
def test_per_server_reductions_equal_reduceat(config):
    from marl_sched.policies.heuristics import _per_server
    from marl_sched.runner import build_cluster

    topo, _ = build_cluster(load_config(str(REPO_ROOT / "configs" / config)))
    rng = np.random.default_rng(1)
    starts = topo.server_groups_start
    ints = rng.integers(0, 5, topo.n_groups)
    floats = np.where(rng.random(topo.n_groups) < 0.3, np.inf, rng.random(topo.n_groups))
    assert np.array_equal(
        _per_server(np.add, ints, topo, 0, topo.n_servers, 0), np.add.reduceat(ints, starts)
    )
    want = np.minimum.reduceat(floats, starts)
    assert np.array_equal(_per_server(np.minimum, floats, topo, 0, topo.n_servers, 0), want)
    s0, s1 = topo.n_servers // 3, topo.n_servers // 2
    g0, g1 = int(starts[s0]), int(starts[s1])
    part = _per_server(np.minimum, floats[g0:g1], topo, s0, s1, g0)
    assert np.array_equal(part, want[s0:s1])
