"""Episodes of ``ClusterPlacement-v1``: the return identity, the central variant,
seeded determinism and extra episode sources (training's ``train.extra_windows``)."""

from __future__ import annotations

import numpy as np
import pytest

from envs import make_env
from marl_sched.config import REPO_ROOT

TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")


def rollout(env, seed: int, pick=lambda mask: int(np.flatnonzero(mask)[0])):
    """(observations, total reward) of one episode under ``pick``."""
    obs, _ = env.reset(seed=seed)
    seen, total = [], 0.0
    while True:
        agent, o = next(iter(obs.items()))
        seen.append(o)
        obs, rewards, terminated, _, _ = env.step({agent: pick(o["action_mask"])})
        total += sum(rewards.values())
        if terminated["__all__"]:
            return seen, total


@pytest.fixture(scope="module")
def env():
    return make_env(TINY, env={"window_jobs": 20})


def test_env_return_is_minus_average_jct(env):
    obs, total = rollout(env, seed=3)
    jct = np.mean([r.jct for r in env.sim.result()])
    assert len(env.sim.result()) == 20
    assert total == pytest.approx(-jct / 3600.0 / 1.0, rel=1e-9)
    space = env.observation_spaces["sc0"]
    assert all(space.contains(o) for o in obs)


def test_central_env_has_one_agent_over_the_whole_datacenter():
    env = make_env(TINY, env={"window_jobs": 10, "central": True})
    assert env.possible_agents == ["central"]
    obs, total = rollout(env, seed=0)
    topo = env.topology
    assert obs[0]["group_mask"].sum() == topo.n_groups
    assert obs[0]["action_mask"][env.builder.pad[0]] == 0  # its only forward action is masked
    jct = np.mean([r.jct for r in env.sim.result()])
    assert total == pytest.approx(-jct / 3600.0, rel=1e-9)


def test_env_is_deterministic_under_a_seed(env):
    a, ra = rollout(env, seed=5)
    b, rb = rollout(env, seed=5)
    assert ra == rb and len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])


def test_extra_windows_mix_sources_and_keep_the_return_exact():
    """Episodes come from the config's window or an extra one in proportion to the
    shares; a window shorter than an episode is one whole episode, and the return is
    still -avg JCT over the jobs the episode has."""
    extra = {"trace": "configs/traces/philly_sample.csv", "start": 2300, "max_jobs": 12,
             "load": 2.0, "share": 3.0}  # fmt: skip
    env = make_env(
        {"config": TINY, "env": {"window_jobs": 20}, "seed": 0, "windows": [extra],
         "workload_share": 1.0}
    )  # fmt: skip
    assert [len(jobs) for jobs, _, _ in env.sources] == [40, 12]
    np.testing.assert_allclose(env.source_p, [0.25, 0.75])
    keys = []
    for seed in range(12):
        _, total = rollout(env, seed=seed)
        keys.append(env.episode_key)
        jcts = [r.jct for r in env.sim.result()]
        assert len(jcts) == (12 if env.episode_key[0] == 1 else 20)
        assert total == pytest.approx(-np.mean(jcts) / 3600.0, rel=1e-9)
    extra_keys = {k for k in keys if k[0] == 1}
    assert extra_keys == {(1, 0, 12)}  # drawn whole, always the same episode
    assert 0 < sum(k[0] == 1 for k in keys) < 12  # both sources drawn


def _default_short(**workload):
    import dataclasses

    from marl_sched.config import load_config

    cfg = load_config(REPO_ROOT / "configs" / "default.yaml")
    return dataclasses.replace(
        cfg, workload=dataclasses.replace(cfg.workload, max_jobs=60, **workload)
    )


def test_a_warm_up_is_placed_but_not_scored_and_the_return_is_the_windows():
    cfg = _default_short()
    assert cfg.workload.warmup_jobs > 0
    env = make_env(cfg)
    obs, _ = env.reset(seed=0)
    total = 0.0
    while True:
        (agent,) = obs
        obs, rewards, terminated, _, infos = env.step(
            {agent: int(np.flatnonzero(obs[agent]["action_mask"])[0])}
        )
        total += sum(rewards.values())
        if terminated["__all__"]:
            break
    info = next(iter(infos.values()))
    warm = cfg.workload.warmup_jobs
    assert info["metrics"]["jobs_warmup"] == warm and info["metrics"]["jobs_total"] == 60
    scored = [r.jct for r in env.sim.result() if r.job.job_id >= warm]
    assert len(scored) == 60 and len(env.sim.result()) == 60 + warm  # warm-up simulated
    assert info["avg_jct_s"] == pytest.approx(np.mean(scored), rel=1e-12)
    assert total == pytest.approx(-info["avg_jct_s"] / 3600.0, rel=1e-9)


@pytest.mark.parametrize("estimate", ["none", "noisy", "oracle"])
def test_the_agents_see_a_job_as_the_duration_predictor_shows_it(estimate):
    env = make_env(_default_short(duration_estimate=estimate))
    env.reset(seed=0)
    seen = env.session.job
    true = env.sim.jobs[seen.job_id]
    if estimate == "oracle":
        assert seen.iterations == true.iterations
    else:
        assert np.isnan(seen.duration) and seen.iterations != true.iterations
    if estimate == "none":
        assert np.isnan(seen.iterations)
        # the job-length column reads 0, not nan, when there is no estimate
        obs = env.builder.observe(env.session, env.session.agent)
        assert np.isfinite(obs["job_x"]).all()


def test_a_slice_with_warmup_scores_only_its_own_jobs_on_a_loaded_cluster():
    """``env.window_warmup_jobs``: the jobs just before a slice come first, placed by
    the agents and unscored; the slice's jobs are scored on the cluster they leave
    (the return identity holds over the scored jobs), fewer warm-up jobs near the
    window's start, and 0 is the plain slice."""
    plain = make_env(TINY, env={"window_jobs": 10})
    warm = make_env(TINY, env={"window_jobs": 10, "window_warmup_jobs": 6})
    for start, warmup in ((9, 6), (4, 4), (0, 0)):
        warm.reset(seed=0, options={"window_start": start})
        plain.reset(seed=0, options={"window_start": start})
        assert warm.warmup == warmup and len(warm.sim.jobs) == 10 + warmup
        assert plain.warmup == 0 and len(plain.sim.jobs) == 10
        # the same scored jobs, in the same order and spacing
        scored = sorted(warm.sim.jobs, key=lambda j: j.job_id)[warmup:]
        ref = sorted(plain.sim.jobs, key=lambda j: j.job_id)
        assert [j.name for j in scored] == [j.name for j in ref]
        gaps = np.diff([j.submit_time for j in scored])
        np.testing.assert_allclose(gaps, np.diff([j.submit_time for j in ref]))
    obs, _ = warm.reset(seed=0, options={"window_start": 9})
    total = 0.0
    while True:
        agent, o = next(iter(obs.items()))
        obs, rewards, term, _, _ = warm.step({agent: int(np.flatnonzero(o["action_mask"])[0])})
        total += sum(rewards.values())
        if term["__all__"]:
            break
    records = sorted(warm.sim.result(), key=lambda r: r.job.job_id)
    assert len(records) == 16
    jct = np.mean([r.jct for r in records[6:]])
    assert warm.final_info()["avg_jct_s"] == pytest.approx(jct, rel=1e-9)
    assert total == pytest.approx(-jct / 3600.0, rel=1e-9)
    with pytest.raises(Exception, match="window_warmup_jobs"):
        make_env(TINY, env={"window_jobs": 10, "window_warmup_jobs": -1})
