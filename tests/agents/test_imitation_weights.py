"""Work-weighted imitation (``train.bc_weight_power``), on the tiny config."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from agents.config import model_config, train_config
from agents.warm_start import behaviour_cloning, imitation_weights, teacher_decisions
from marl_sched.catalogue import CATALOGUE
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.runner import build_cluster, load_workload

TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")


def test_weights_grow_with_work_and_average_one():
    works = [1.0, 10.0, 100.0, 0.0]
    np.testing.assert_array_equal(imitation_weights(works, 0.0), np.ones(4, np.float32))
    w = imitation_weights(works, 1.0)
    assert w.mean() == pytest.approx(1.0)
    # proportional to work, a job with no work counted as 1 GPU-second
    np.testing.assert_allclose(w / w[0], [1.0, 10.0, 100.0, 1.0], rtol=1e-6)
    half = imitation_weights(works, 0.5)
    np.testing.assert_allclose(half / half[0], [1.0, 10**0.5, 10.0, 1.0], rtol=1e-6)


def test_each_decision_carries_its_jobs_estimated_gpu_work():
    """The weights read the job as the agents see it (the duration predictor's
    estimate), not its true length."""
    cfg = load_config(TINY)
    tc = dataclasses.replace(train_config(cfg), bc_episodes=1)
    observations, actions, _, works = teacher_decisions(cfg, model_config(cfg), tc, 0)
    assert len(works) == len(actions) == len(observations) > 0
    workload = load_workload(cfg, build_cluster(cfg)[1])
    seen = [workload.predictor().visible_job(j) for j in workload.jobs]  # the estimates
    possible = {j.num_workers * j.iterations * CATALOGUE[j.model].compute_s for j in seen}
    assert all(any(w == pytest.approx(p) for p in possible) for w in works)
    assert len(set(works)) > 1  # several jobs, not one value repeated


def test_the_weights_change_what_is_learned():
    cfg = load_config(TINY)
    tc = dataclasses.replace(train_config(cfg), bc_episodes=1, bc_epochs=2)
    plain = behaviour_cloning(cfg, model_config(cfg), tc, 0, lambda _: None)
    again = behaviour_cloning(cfg, model_config(cfg), tc, 0, lambda _: None)
    heavy = dataclasses.replace(tc, bc_weight_power=1.0)
    weighted = behaviour_cloning(cfg, model_config(cfg), heavy, 0, lambda _: None)
    assert all(torch.equal(plain[k], again[k]) for k in plain)  # seeded: repeatable
    assert any(not torch.equal(plain[k], weighted[k]) for k in plain)
