"""The environment on a cluster with GPU sharing (``topology.gpu_sharing: 2``): it
steps to the end under random masked actions, every observation stays inside its
space (free-GPU fractions count the GPUs a job may still use, so never above 1), and
the simulator's per-GPU accounting holds after every step."""

from __future__ import annotations

import dataclasses

import numpy as np

import envs
from tests.envs.helpers import default_short, masked_random_action
from tests.marl_sched.test_sharing import check_sharing


def _shared(sharing: int, jobs: int):
    cfg = default_short(jobs)
    topo = dataclasses.replace(cfg.topology, gpu_sharing=sharing)
    workload = dataclasses.replace(cfg.workload, load=4.0)
    return dataclasses.replace(cfg, topology=topo, workload=workload)


def test_env_steps_with_gpu_sharing_and_observations_stay_in_their_space():
    env = envs.make_env(_shared(2, 60))
    space = env.get_observation_space(env.possible_agents[0])
    rng = np.random.default_rng(1)
    obs, _ = env.reset(seed=0)
    most = 0
    for _ in range(20_000):
        for o in obs.values():
            assert space.contains(o)
        agent = env.acting_agent
        obs, _, term, trunc, _ = env.step({agent: masked_random_action(obs[agent], rng)})
        check_sharing(env.sim)
        most = max(most, int(env.sim.gpu_load.max()))
        if term["__all__"] or trunc["__all__"]:
            break
    else:
        raise AssertionError("the episode did not end")
    assert most == 2  # some GPU was shared, none beyond the limit
