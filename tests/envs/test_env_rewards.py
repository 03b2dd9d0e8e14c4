"""The reward: the exact jobs-in-system integral, and slowdown shaping that pays
less for a placement the simulator makes slower."""

from __future__ import annotations

import numpy as np
import pytest

from envs import make_env
from envs.rewards import (
    JobsInSystem,
    LearnedSlowdown,
    PerfModelSlowdown,
    default_predictor,
    snapshot_view,
)
from marl_sched import interference
from marl_sched.catalogue import CATALOGUE
from marl_sched.config import ExperimentConfig, ServerTypeConfig, TopologyConfig
from marl_sched.jobs import Job, Placement
from tests.envs.helpers import masked_random_action


def _brute_force_integral(sim) -> float:
    total = 0.0
    for job in sim.jobs:
        if job.submit_time >= sim.now:
            continue
        rec = sim.records.get(job.job_id)
        end = rec.finish_time if rec is not None else sim.now
        total += end - job.submit_time
    return total


def test_jobs_in_system_integral_matches_brute_force(tiny_env):
    env = tiny_env()
    obs, _ = env.reset(seed=0)
    check = JobsInSystem(np.array([j.submit_time for j in env._sim.jobs]))
    rng = np.random.default_rng(1)
    while not env.done:
        agent = env.acting_agent
        obs, *_ = env.step({agent: masked_random_action(obs[agent], rng)})
        assert check.value(env._sim) == pytest.approx(_brute_force_integral(env._sim), rel=1e-9)
    assert check.value(env._sim) == pytest.approx(sum(r.jct for r in env._sim.result()), rel=1e-12)


def _one_subcluster_two_servers() -> ExperimentConfig:
    server = ServerTypeConfig(name="s", count=2, sockets=1, groups_per_socket=2, gpus_per_group=2)
    topo = TopologyConfig(
        subclusters=1, racks_per_subcluster=1, servers_per_rack=2, server_types=(server,)
    )
    return ExperimentConfig(topology=topo)


# a network- and memory-heavy job, then a sensitive one that arrives with it
JOBS = [
    Job(0, "heavy", "vgg-16", 2, 1, 5_000.0, 0.0, 1.0),
    Job(1, "victim", "resnet-50", 1, 0, 5_000.0, 0.0, 1.0),
]


def _place_victim(group: int, **env_overrides):
    """Place the heavy job on group 0 (server 0), the victim on ``group``; returns the
    env and the reward of the step that placed the victim."""
    env = make_env(
        _one_subcluster_two_servers(),
        jobs=JOBS,
        env={"window_jobs": None, "use_learned_reward": False, **env_overrides},
    )
    env.reset(seed=0)
    env.replay_placement(Placement((0, 0), (0,)))
    assert env.pending_job.name == "victim"
    env.step({"sc0": group})
    return env, env.last_team_reward


def test_a_placement_the_simulator_makes_slower_is_rewarded_less():
    # group 1 shares server 0 (socket, memory bandwidth, NIC) with the heavy job; group 2
    # is on the empty server 1
    near, r_near = _place_victim(1)
    far, r_far = _place_victim(2)
    victim_near = near._sim.records[1]
    victim_far = far._sim.records[1]
    assert victim_near.jct > victim_far.jct  # the simulator: co-location is slower
    assert r_near < r_far
    # the shaping term alone (time term made negligible) says the same
    _, s_near = _place_victim(1, slowdown_weight=1.0, time_scale_s=1e15)
    _, s_far = _place_victim(2, slowdown_weight=1.0, time_scale_s=1e15)
    assert s_far == pytest.approx(0.0, abs=1e-9)  # alone on its server: slowdown 1
    assert s_near < -1e-3


def test_perf_model_predictor_reports_job_and_neighbour_slowdowns():
    env = make_env(_one_subcluster_two_servers(), jobs=JOBS, env={"window_jobs": None})
    env.reset(seed=0)
    env.replay_placement(Placement((0, 0), (0,)))
    sim, victim = env._sim, env.pending_job
    heavy_before = sim.running[0].iter_time
    pred = PerfModelSlowdown()
    placement = Placement((1,), ())
    prepared = pred.prepare(sim, victim, placement)
    sim.apply(placement)
    est = pred.estimate(sim, victim, placement, prepared)
    heavy = sim.running[0]
    assert heavy.iter_time > heavy_before  # the heavy job got slower too
    assert est.job > 1.0
    alone = sim.perf.alone_iteration_time(
        CATALOGUE[heavy.job.model], heavy.layout, heavy.job.num_ps
    )
    assert est.neighbours == pytest.approx((heavy.iter_time - heavy_before) / alone)


class _StubModel:
    """Slowdown = 1 + 0.01 · Σ features (any deterministic function will do)."""

    def predict(self, x):
        x = np.asarray(x, dtype=np.float64)
        assert x.ndim == 2
        return 1.0 + 0.01 * np.abs(x).sum(axis=1)


def test_learned_predictor_uses_candidate_and_job_features():
    env = make_env(_one_subcluster_two_servers(), jobs=JOBS, env={"window_jobs": None})
    env.reset(seed=0)
    env.replay_placement(Placement((0, 0), (0,)))
    sim, victim = env._sim, env.pending_job
    placement = Placement((1,), ())
    pred = LearnedSlowdown(_StubModel(), interference.candidate_features, interference.job_features)
    before = snapshot_view(sim.view())
    prepared = pred.prepare(sim, victim, placement)
    sim.apply(placement)
    est = pred.estimate(sim, victim, placement, prepared)
    model = _StubModel()
    cand = interference.candidate_features(before, victim, (1,), ())
    assert est.job == pytest.approx(model.predict(cand[None])[0])
    heavy = sim.running[0]
    f_before = interference.job_features(before, heavy.job, heavy.placement, heavy.layout)
    f_after = interference.job_features(sim.view(), heavy.job, heavy.placement, heavy.layout)
    expected = model.predict(f_after[None])[0] - model.predict(f_before[None])[0]
    assert est.neighbours == pytest.approx(expected)


def test_env_runs_whole_episodes_with_a_learned_predictor(tiny_env):
    env = tiny_env()
    env._predictor = LearnedSlowdown(
        _StubModel(), interference.candidate_features, interference.job_features
    )
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    while not env.done:
        agent = env.acting_agent
        obs, *_ = env.step({agent: masked_random_action(obs[agent], rng)})
    assert env.metrics()["jobs_completed"] == 40


def test_default_predictor_falls_back_without_a_model_file(monkeypatch, tmp_path):
    pred, note = default_predictor(False)
    assert isinstance(pred, PerfModelSlowdown) and "use_learned_reward is false" in note
    missing = tmp_path / "model.npz"
    monkeypatch.setattr(interference, "default_model_path", lambda: missing)
    pred, note = default_predictor(True)
    assert isinstance(pred, PerfModelSlowdown) and str(missing) in note
    missing.write_bytes(b"")
    monkeypatch.setattr(interference, "load_default", lambda: _StubModel())
    pred, note = default_predictor(True)
    assert isinstance(pred, LearnedSlowdown) and note.startswith("learned")
