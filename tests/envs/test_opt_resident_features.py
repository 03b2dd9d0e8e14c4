"""The ``harm_to_residents`` group column (``env.resident_features``)."""

from __future__ import annotations

import numpy as np

from envs.config import EnvConfig
from envs.observations import FEATURES, ObservationBuilder
from envs.session import PlacementSession
from marl_sched.catalogue import CATALOGUE
from marl_sched.config import REPO_ROOT
from marl_sched.jobs import Job
from marl_sched.simulator import harm_to_residents
from tests.helpers import check_served_or_refused, partly_occupied

TINY = str(REPO_ROOT / "configs" / "tiny.yaml")
COLUMN = len(FEATURES["group_x"])  # the column comes right after the base features


def _busy(resident_features: bool = True):
    topo, perf, sim = partly_occupied(TINY, seed=5)
    return ObservationBuilder(topo, perf, EnvConfig(resident_features=resident_features)), sim


def test_column_is_the_log_harm_of_the_current_task_kind():
    builder, sim = _busy()
    assert builder.features["group_x"][COLUMN] == "harm_to_residents"
    view = sim.view()
    job = Job(999, "probe", "bert", 1, 1, 100.0, view.now, 10.0)
    session = PlacementSession(builder, job, view, 0)
    scope = builder.scopes[0]
    pressure = CATALOGUE["bert"].pressure
    for ps in (False, True):
        if ps:  # place the worker; the next task is the PS
            session.act(int(np.flatnonzero(session.action_mask(0)[: builder.pad[0]])[0]))
            assert not session.is_worker
        obs = builder.observe(session, 0)
        want = np.log1p(harm_to_residents(view, pressure, ps=ps)[scope.gslice])
        got = obs["group_x"][: len(scope.groups), COLUMN]
        np.testing.assert_allclose(got, want, rtol=1e-6)
        assert want.max() > 0, "the busy cluster should have residents in scope 0"
    assert not np.allclose(
        harm_to_residents(view, pressure), harm_to_residents(view, pressure, ps=True)
    )


def test_a_checkpoint_is_served_with_its_own_column_or_refused():
    check_served_or_refused(*_busy(), "resident_features")
