"""The ``log10_work_s/7`` job column (``env.job_length``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from envs.config import DECISION_OPTIONS, EnvConfig
from envs.observations import FEATURES, ObservationBuilder
from envs.session import PlacementSession
from marl_sched.catalogue import CATALOGUE
from marl_sched.config import REPO_ROOT
from marl_sched.jobs import Job
from tests.helpers import check_served_or_refused, partly_occupied

TINY = str(REPO_ROOT / "configs" / "tiny.yaml")
COLUMN = len(FEATURES["job_x"])  # right after the base job features, before hint columns


def _busy(job_length: bool = True, hints: tuple[str, ...] = ()):
    topo, perf, sim = partly_occupied(TINY, seed=5)
    return ObservationBuilder(topo, perf, EnvConfig(job_length=job_length, hints=hints)), sim


@pytest.mark.parametrize("hints", [(), ("first-fit",)])
def test_column_is_the_log_of_the_requested_work(hints):
    builder, sim = _busy(hints=hints)
    assert builder.features["job_x"][COLUMN] == "log10_work_s/7"
    assert len(builder.features["job_x"]) == len(FEATURES["job_x"]) + 1 + len(hints)
    view = sim.view()
    got = {}
    for iterations in (10.0, 1e6):
        job = Job(999, "probe", "resnet-50", 2, 1, iterations, view.now, 10.0)
        obs = builder.observe(PlacementSession(builder, job, view, 0), 0)
        assert obs["job_x"].shape == builder.observation_space["job_x"].shape
        got[iterations] = obs["job_x"]
        want = math.log10(1.0 + iterations * CATALOGUE["resnet-50"].compute_s) / 7.0
        assert obs["job_x"][COLUMN] == pytest.approx(want, rel=1e-6)
    # the two jobs differ in that column and nowhere else
    differs = np.flatnonzero(got[10.0] != got[1e6])
    assert differs.tolist() == [COLUMN]


def test_off_by_default_and_the_option_is_a_builder_option():
    builder, _ = _busy(job_length=False)
    assert builder.features["job_x"] == FEATURES["job_x"]
    assert "job_length" in DECISION_OPTIONS
    assert EnvConfig().job_length is False


def test_a_checkpoint_is_served_with_its_own_column_or_refused():
    check_served_or_refused(*_busy(), "job_length")
