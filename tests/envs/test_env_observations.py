"""Observation layout: padding and masks, local indices, features against the
simulator, the exchange, and no memory shared with the simulator."""

from __future__ import annotations

import dataclasses

import numpy as np

from envs.observations import GROUP_FEATURES, JOB_FEATURES, PEER_FEATURES, RACK_FEATURES, SERVER_FEATURES

G_FREE = GROUP_FEATURES.index("free_frac")
G_WORKERS = GROUP_FEATURES.index("job_workers_here")
G_FITS = GROUP_FEATURES.index("fits_task")
J_WORKER = JOB_FEATURES.index("task_is_worker")
J_PS = JOB_FEATURES.index("task_is_ps")
J_LEFT = JOB_FEATURES.index("remaining_frac")


def test_feature_names_match_the_space(tiny_env):
    space = tiny_env().observation_space
    assert space["group_x"].shape[1] == len(GROUP_FEATURES) == 25
    assert space["server_x"].shape[1] == len(SERVER_FEATURES) == 14
    assert space["rack_x"].shape[1] == len(RACK_FEATURES) == 12
    assert space["job_x"].shape == (len(JOB_FEATURES),) == (24,)
    assert space["peers_x"].shape == (2, len(PEER_FEATURES)) == (2, 16)


def test_each_agent_sees_its_own_padded_subcluster(tiny_env):
    env = tiny_env()
    env.reset(seed=0)
    topo, lay = env.topology, env.layout
    assert (lay.max_groups, lay.max_servers, lay.max_racks) == (16, 4, 2)
    for k, obs in enumerate(env.observe_all().values()):
        groups = topo.subcluster_groups(k)
        n = len(groups)
        assert obs["group_mask"].sum() == n == lay.sc_groups[k]
        assert obs["server_mask"].sum() == 4 and obs["rack_mask"].sum() == 2
        servers = np.flatnonzero(topo.server_subcluster == k)
        local_server = topo.group_server[groups] - servers[0]
        np.testing.assert_array_equal(obs["group_server"][:n], local_server)
        np.testing.assert_array_equal(
            obs["server_rack"][:4], topo.server_rack[servers] - topo.server_rack[servers[0]]
        )
        assert not obs["group_x"][n:].any() and not obs["group_server"][n:].any()
        speed = topo.group_speed[groups].astype(np.float32)
        np.testing.assert_array_equal(obs["group_x"][:n, 2], speed)
        np.testing.assert_array_equal(obs["peers_x"][:, 0], np.arange(2) == k)
        assert obs["peers_mask"].tolist() == [1.0, 1.0]


def test_masks_and_features_follow_the_draft(tiny_env):
    env = tiny_env()
    obs, _ = env.reset(seed=0)
    # find a job with at least two workers
    rng = np.random.default_rng(0)
    while env.pending_job.num_workers < 2 or env._draft.placed:
        agent = env.acting_agent
        obs, *_ = env.step({agent: int(rng.choice(np.flatnonzero(obs[agent]["action_mask"])))})
    (agent,) = obs
    k = env.possible_agents.index(agent)
    o = obs[agent]
    job = env.pending_job
    g = env.layout.max_groups
    np.testing.assert_array_equal(o["action_mask"][:g], o["group_x"][:, G_FITS])
    assert o["job_x"][J_WORKER] == 1 and o["job_x"][J_PS] == 0 and o["job_x"][J_LEFT] == 1
    slot = int(np.flatnonzero(o["action_mask"][: env.layout.max_groups])[0])
    group = int(env.layout.group_start[k] + slot)
    free_before = o["group_x"][slot, G_FREE]
    sim_free = int(env._sim.group_free[group])
    obs, *_ = env.step({agent: slot})
    o2 = obs[agent]  # the job's next task starts at the agent that placed this one
    cap = env.topology.group_capacity[group]
    assert o2["group_x"][slot, G_FREE] == np.float32(free_before - 1 / cap)
    assert o2["group_x"][slot, G_WORKERS] == np.float32(1 / job.num_workers)
    assert o2["job_x"][J_LEFT] == np.float32((job.num_tasks - 1) / job.num_tasks)
    assert env._sim.group_free[group] == sim_free  # the simulator waits for the whole job


def test_without_exchange_agents_see_only_their_own_row(tiny_env):
    env = tiny_env(exchange=False)
    env.reset(seed=0)
    for k, obs in enumerate(env.observe_all().values()):
        assert obs["peers_mask"].tolist() == [float(i == k) for i in range(2)]
        assert not obs["peers_x"][1 - k].any() and obs["peers_x"][k].any()


def test_observations_share_no_memory_with_the_simulator(tiny_env):
    env = tiny_env()
    obs, _ = env.reset(seed=0)
    sim = env._sim
    sim_arrays = [v for v in vars(sim).values() if isinstance(v, np.ndarray)]
    sim_arrays += [v for v in vars(env.topology).values() if isinstance(v, np.ndarray)]
    assert sim_arrays
    for o in (*obs.values(), *env.observe_all().values()):
        for value in o.values():
            assert value.flags.owndata or value.base is None or value.base.flags.owndata
            assert not any(np.shares_memory(value, a) for a in sim_arrays)
    view = env.cluster_view()
    for f in dataclasses.fields(view):
        value = getattr(view, f.name)
        if isinstance(value, np.ndarray):
            assert not any(np.shares_memory(value, a) for a in sim_arrays)
