"""Observation layout of ClusterPlacement-v1: column counts = the builder's feature
names, padding rows zero with mask 0, local indices, features against the tentative
placement, the options' columns, fresh arrays every step."""

from __future__ import annotations

import dataclasses
import math
from functools import cache

import numpy as np
import pytest

import envs
from envs.observations import FEATURES, OBS_KEYS, feature_dims
from marl_sched.catalogue import CATALOGUE
from tests.envs.helpers import TINY, cluster, default_short, job, masked_random_action, server

ARRAY_KEYS = {"group_x": 1, "server_x": 1, "rack_x": 1, "job_x": 0, "peers_x": 1}


@cache
def _env(name: str):
    if name == "tiny":
        return envs.make_env(TINY)
    if name == "central":
        return envs.make_env(TINY, env={"central": True})
    return envs.make_env(default_short(60))


def _col(env, key: str, name: str) -> int:
    return env.builder.features[key].index(name)


@pytest.mark.parametrize("name", ["tiny", "central", "default"])
def test_feature_columns_match_the_builders_names(name):
    env = _env(name)
    b = env.builder
    space = env.get_observation_space(env.possible_agents[0])
    assert set(space.spaces) == set(OBS_KEYS)
    for key, axis in ARRAY_KEYS.items():
        assert space[key].shape[axis] == len(b.features[key]), key
    dims = feature_dims(space)
    assert dims["A"] == b.n_agents and dims["H"] == len(b.hints)
    assert (dims["G_max"], dims["S_max"], dims["R_max"]) == b.pad
    obs, _ = env.reset(seed=0)
    for o in obs.values():
        for key in ARRAY_KEYS:
            assert o[key].shape == space[key].shape, key
    if name == "default":
        h = len(b.hints)
        assert h == 5 and len(b.global_hints) == 2
        assert len(b.features["group_x"]) == len(FEATURES["group_x"]) + 1 + h  # residents
        assert len(b.features["job_x"]) == len(FEATURES["job_x"]) + 1 + h  # job length
        assert len(b.features["peers_x"]) == len(FEATURES["peers_x"]) + 1 + 2
    else:
        assert b.features == FEATURES
        assert [len(FEATURES[k]) for k in ARRAY_KEYS] == [10, 10, 5, 20, 9]


def _all_views(env):
    """Every agent's observation of the pending task (the builder's, as the env's)."""
    s = env.session
    return {a: env.builder.observe(s, k) for k, a in enumerate(env.possible_agents)}


def test_each_agent_sees_its_own_padded_subcluster():
    env = _env("tiny")
    obs, _ = env.reset(seed=0)
    topo, b = env.topology, env.builder
    assert b.pad == (16, 4, 2)
    views = _all_views(env)
    (acting,) = obs
    for key in OBS_KEYS:
        np.testing.assert_array_equal(views[acting][key], obs[acting][key], err_msg=key)
    speed_col = _col(env, "group_x", "gpu_speed")
    for k, o in enumerate(views.values()):
        groups = topo.subcluster_groups(k)
        n = len(groups)
        assert n == (16 if k == 0 else 8)
        assert o["group_mask"].sum() == n and not o["group_mask"][n:].any()
        assert o["server_mask"].sum() == 4 and o["rack_mask"].sum() == 2
        servers = np.flatnonzero(topo.server_subcluster == k)
        np.testing.assert_array_equal(o["group_server"][:n], topo.group_server[groups] - servers[0])
        np.testing.assert_array_equal(
            o["server_rack"][:4], topo.server_rack[servers] - topo.server_rack[servers[0]]
        )
        # padding rows are zero and illegal
        assert not o["group_x"][n:].any() and not o["group_server"][n:].any()
        assert not o["action_mask"][n:16].any()
        np.testing.assert_array_equal(
            o["group_x"][:n, speed_col], topo.group_speed[groups].astype(np.float32)
        )
        np.testing.assert_array_equal(
            o["peers_x"][:, _col(env, "peers_x", "is_self")], np.arange(2) == k
        )
        assert o["peers_mask"].tolist() == [1.0, 1.0]
        # the exchange: every agent sees the same summary rows but its own is_self
        other = views[env.possible_agents[1 - k]]["peers_x"]
        same = [c for c in range(9) if FEATURES["peers_x"][c] != "is_self"]
        np.testing.assert_array_equal(o["peers_x"][:, same], other[:, same])


def test_padding_stays_zero_in_every_observation_of_an_episode():
    env = _env("tiny")
    obs, _ = env.reset(seed=2)
    rng = np.random.default_rng(2)
    while not env.done:
        (agent,) = obs
        o = obs[agent]
        n = int(o["group_mask"].sum())
        assert n == len(env.builder.scopes[env.possible_agents.index(agent)].groups)
        assert not o["group_x"][n:].any() and not o["action_mask"][n:16].any()
        s = int(o["server_mask"].sum())
        assert not o["server_x"][s:].any() and not o["server_rack"][s:].any()
        # local slots are legal only where the task fits (its fit column)
        fit = "worker_fits" if env.session.is_worker else "ps_fits"
        assert np.all(o["action_mask"][:16] <= o["group_x"][:, _col(env, "group_x", fit)])
        obs, *_ = env.step({agent: masked_random_action(o, rng)})


def test_features_follow_the_tentative_placement():
    env = envs.make_env(TINY)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    while env.pending_job.num_workers < 2 or env.session.task:
        agent = env.acting_agent
        obs, *_ = env.step({agent: masked_random_action(obs[agent], rng)})
    (agent,) = obs
    k = env.possible_agents.index(agent)
    o, job0 = obs[agent], env.pending_job
    c = lambda key, name: _col(env, key, name)  # noqa: E731
    assert o["job_x"][c("job_x", "is_worker")] == 1
    assert o["job_x"][c("job_x", "tasks_done_frac")] == 0
    assert o["job_x"][c("job_x", "workers_left_frac")] == 1
    assert o["job_x"][c("job_x", "log2_workers/6")] == np.float32(math.log2(job0.num_workers) / 6)
    assert o["job_x"][c("job_x", "ps/4")] == np.float32(job0.num_ps / 4)
    spec = CATALOGUE[job0.model]
    np.testing.assert_array_equal(o["job_x"][10:15], spec.sensitivity.astype(np.float32))
    slot = int(np.flatnonzero(o["action_mask"][:16])[0])
    group = int(env.builder.scopes[k].groups[slot])
    sim_free = int(env.sim.group_free[group])
    obs, *_ = env.step({agent: slot})
    o2 = obs[agent]  # the job's next task starts at the agent that placed this one
    cap = env.topology.group_capacity[group]
    n = job0.num_tasks
    assert o2["group_x"][slot, c("group_x", "free_frac")] == np.float32((sim_free - 1) / cap)
    assert o2["group_x"][slot, c("group_x", "free_gpus/8")] == np.float32((sim_free - 1) / 8)
    assert o2["group_x"][slot, c("group_x", "job_tasks_in_group")] == np.float32(1 / n)
    assert o2["job_x"][c("job_x", "tasks_done_frac")] == np.float32(1 / n)
    assert o2["job_x"][c("job_x", "workers_left_frac")] == np.float32(
        (job0.num_workers - 1) / job0.num_workers
    )
    assert o2["job_x"][c("job_x", "in_scope_frac")] == np.float32(1 / n)
    srv = env.builder.scopes[k].group_server[slot]
    assert o2["server_x"][srv, c("server_x", "job_tasks_on_server")] == np.float32(1 / n)
    assert o2["peers_x"][k, c("peers_x", "job_tasks_frac")] == np.float32(1 / n)
    assert env.sim.group_free[group] == sim_free  # the simulator waits for the whole job


def test_central_agent_sees_the_whole_datacenter():
    env = _env("central")
    obs, _ = env.reset(seed=0)
    (o,) = obs.values()
    assert list(obs) == ["central"]
    t = env.topology
    assert env.builder.pad == (t.n_groups, t.n_servers, t.n_racks)
    assert o["group_mask"].sum() == t.n_groups == 24
    assert o["peers_x"].shape == (1, 9) and o["action_mask"].shape == (24 + 1,)
    assert o["action_mask"][24] == 0  # no forward: its only forward is the no-op


def test_option_columns_of_the_default_recipe():
    env = envs.make_env(default_short(60))
    obs, _ = env.reset(seed=0)
    b = env.builder
    (agent,) = obs
    k = env.possible_agents.index(agent)
    o, job0 = obs[agent], env.pending_job
    f = b.features
    assert o["job_x"][f["job_x"].index("log10_work_s/7")] == np.float32(
        math.log10(1 + job0.work_s) / 7
    )
    # the hints: per plan, tasks it puts in each group / the job's workers; agreement 1
    plans = env.session.plans(k)
    groups = b.scopes[k].groups
    for i, h in enumerate(b.hints):
        col = o["group_x"][: len(groups), f["group_x"].index(f"hint_{h}")]
        agrees = o["job_x"][f["job_x"].index(f"hint_{h}_agrees")]
        if plans[i] is None:
            assert not col.any() and agrees == 0
            continue
        counts = np.bincount(plans[i].worker_groups, minlength=b.topology.n_groups)[groups]
        np.testing.assert_allclose(col, counts / job0.num_workers, rtol=1e-6)
        assert agrees == 1
    # global hints: the share of the job per scope (sums to 1 when the plan exists)
    for h in b.global_hints:
        share = o["peers_x"][:, f["peers_x"].index(f"global_{h}")]
        assert share.sum() == pytest.approx(1.0, abs=1e-6) or not share.any()
    harm = o["group_x"][:, f["group_x"].index("harm_to_residents")]
    assert np.all(harm >= 0) and np.all(np.isfinite(harm))


def test_observations_are_fresh_arrays_sharing_no_memory_with_the_simulator():
    env = envs.make_env(TINY, env={"window_jobs": 15})
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    history = []
    for _ in range(25):
        if env.done:
            break
        sim, s = env.sim, env.session
        sim_arrays = [v for v in vars(sim).values() if isinstance(v, np.ndarray)]
        sim_arrays += [v for v in vars(env.topology).values() if isinstance(v, np.ndarray)]
        sim_arrays += [v for v in vars(s).values() if isinstance(v, np.ndarray)]
        view = s.view
        sim_arrays += [
            getattr(view, fl.name)
            for fl in dataclasses.fields(view)
            if isinstance(getattr(view, fl.name), np.ndarray)
        ]
        assert sim_arrays
        (agent,) = obs
        for value in obs[agent].values():
            assert not any(np.shares_memory(value, a) for a in sim_arrays)
            for old in history:
                assert not any(np.shares_memory(value, v) for v in old[0].values())
        history.append((obs[agent], {k: v.copy() for k, v in obs[agent].items()}))
        obs, *_ = env.step({agent: masked_random_action(obs[agent], rng)})
    assert len(history) > 10
    for seen, copy in history:  # later steps never changed an observation handed out
        for key in seen:
            np.testing.assert_array_equal(seen[key], copy[key], err_msg=key)


def test_a_scope_with_fewer_groups_pads_the_action_mask():
    # sc0: one 2-group server, sc1: one 1-group server; pad = 2 groups
    cfg = cluster(2, server(count=1, groups=2, name="a"), server(count=1, groups=1, name="b"))
    env = envs.make_env(cfg, jobs=[job(1, 1)])  # arrives at sc1 (1 mod 2)
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs["sc1"]["group_mask"], [1, 0])
    np.testing.assert_array_equal(obs["sc1"]["action_mask"], [1, 0, 1, 0])
    assert not obs["sc1"]["group_x"][1].any()
