"""The job's own model's speed in the speed columns (``env.model_speed``)."""

from __future__ import annotations

import numpy as np
import pytest

from envs.config import DECISION_OPTIONS, LATER_OPTIONS, EnvConfig
from envs.observations import FEATURES, ObservationBuilder
from envs.session import PlacementSession
from marl_sched.config import REPO_ROOT
from marl_sched.jobs import Job
from tests.helpers import check_served_or_refused, partly_occupied

TINY = str(REPO_ROOT / "configs" / "tiny.yaml")  # v100 and p100 servers


def _busy(model_speed: bool = True):
    topo, perf, sim = partly_occupied(TINY, seed=5)
    return ObservationBuilder(
        topo, perf, EnvConfig(model_speed=model_speed, hints=("first-fit",))
    ), sim


def _col(builder, key: str, name: str) -> int:
    return builder.features[key].index(name)


@pytest.mark.parametrize("model", ["dssm", "cifar10", "resnet-50"])
def test_columns_are_the_models_speed_on_each_gpu(model):
    builder, sim = _busy()
    topo, perf, view = builder.topology, builder.perf, sim.view()
    job = Job(999, "probe", model, 2, 1, 100.0, view.now, 10.0)
    obs = builder.observe(PlacementSession(builder, job, view, 0), 0)
    want = perf.group_speed_for(model)
    groups, servers = builder.scopes[0].groups, builder.scopes[0].servers
    g, s = len(groups), len(servers)
    got_g = obs["group_x"][:g, _col(builder, "group_x", "model_speed")]
    np.testing.assert_allclose(got_g, want[groups], rtol=1e-6)
    got_s = obs["server_x"][:s, _col(builder, "server_x", "model_speed")]
    np.testing.assert_allclose(got_s, want[topo.server_groups_start[servers]], rtol=1e-6)
    # the peers' column: the free GPUs' mean speed for this model, per scope
    free = PlacementSession(builder, job, view, 0).group_free
    a = builder.n_agents
    scope = builder.group_scope
    mean = [(free * want)[scope == k].sum() / max(free[scope == k].sum(), 1) for k in range(a)]
    got_p = obs["peers_x"][:, _col(builder, "peers_x", "free_model_speed")]
    np.testing.assert_allclose(got_p, mean, rtol=1e-5)


def test_two_models_differ_only_in_the_speed_columns():
    builder, sim = _busy()
    view = sim.view()
    fast_on_p100 = Job(998, "a", "dssm", 2, 1, 100.0, view.now, 10.0)  # p100 2.17x a v100
    slow_on_p100 = Job(998, "a", "cifar10", 2, 1, 100.0, view.now, 10.0)  # 0.75x
    assert builder.perf.group_speed_for("dssm").max() > 2.0
    topo = builder.topology
    k = int(builder.group_scope[np.flatnonzero(topo.group_speed < 1.0)[0]])  # has p100s
    o1, o2 = (builder.observe(PlacementSession(builder, j, view, k), k)
              for j in (fast_on_p100, slow_on_p100))  # fmt: skip
    col = _col(builder, "group_x", "model_speed")
    p100 = np.flatnonzero(topo.group_speed[builder.scopes[k].groups] < 1.0)
    assert len(p100) and (o1["group_x"][p100, col] > o2["group_x"][p100, col]).all()
    # every other column is the same for the two jobs
    others = [c for c in range(o1["group_x"].shape[1]) if c != col]
    np.testing.assert_array_equal(o1["group_x"][:, others], o2["group_x"][:, others])
    # off, both see the GPU type's catalogue-wide figure
    off, _ = _busy(model_speed=False)
    q1, q2 = (
        off.observe(PlacementSession(off, j, view, 0), 0) for j in (fast_on_p100, slow_on_p100)
    )
    c = _col(off, "group_x", "gpu_speed")
    np.testing.assert_array_equal(q1["group_x"][:, c], q2["group_x"][:, c])


def test_off_by_default_and_older_checkpoints_were_trained_without_it():
    builder, _ = _busy(model_speed=False)
    assert builder.features["group_x"][: len(FEATURES["group_x"])] == FEATURES["group_x"]
    assert builder.features["server_x"] == FEATURES["server_x"]
    assert "model_speed" in DECISION_OPTIONS and EnvConfig().model_speed is False
    assert LATER_OPTIONS["model_speed"] is False
    on, _ = _busy()
    assert len(on.features["group_x"]) == len(builder.features["group_x"])  # renamed, same width


def test_a_checkpoint_is_served_with_its_own_columns_or_refused():
    check_served_or_refused(*_busy(), "model_speed")
