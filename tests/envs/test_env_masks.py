"""Action masks: random masked play never breaks capacity; illegal actions are
refused by name; a task nobody has room for drops the job back into the queue."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envs import make_env
from marl_sched.catalogue import MODEL_NAMES
from marl_sched.config import ExperimentConfig, ServerTypeConfig, TopologyConfig
from marl_sched.jobs import Job
from marl_sched.simulator import Simulator

EPS = 1e-9


@st.composite
def small_cluster(draw):
    """A random small topology (tight CPU and memory) and a few jobs that fit it."""
    subclusters = draw(st.integers(1, 3))
    racks = draw(st.integers(1, 2))
    servers_per_rack = draw(st.integers(1, 2))
    n_servers = subclusters * racks * servers_per_rack
    n_types = draw(st.integers(1, min(2, n_servers)))
    counts = [n_servers - (n_types - 1)] + [1] * (n_types - 1)
    types = tuple(
        ServerTypeConfig(
            name=f"t{i}",
            count=c,
            gpu_type=draw(st.sampled_from(["v100", "p100", "k80"])),
            sockets=draw(st.integers(1, 2)),
            groups_per_socket=draw(st.integers(1, 2)),
            gpus_per_group=draw(st.integers(1, 2)),
            cpu_cores=draw(st.integers(1, 8)),
            memory_gb=float(draw(st.sampled_from([8, 16, 24, 64]))),
        )
        for i, c in enumerate(counts)
    )
    topo = TopologyConfig(
        subclusters=subclusters,
        racks_per_subcluster=racks,
        servers_per_rack=servers_per_rack,
        server_types=types,
    )
    n_gpus = sum(t.count * t.sockets * t.groups_per_socket * t.gpus_per_group for t in types)
    jobs = []
    submit = 0.0
    for i in range(draw(st.integers(1, 6))):
        workers = draw(st.integers(1, min(n_gpus, 5)))
        submit += draw(st.sampled_from([0.0, 1.0, 50.0]))
        jobs.append(
            Job(
                job_id=i,
                name=f"j{i}",
                model=draw(st.sampled_from(MODEL_NAMES)),
                num_workers=workers,
                num_ps=draw(st.integers(0 if workers == 1 else 1, 2)),
                iterations=float(draw(st.integers(10, 500))),
                submit_time=submit,
                duration=100.0,
                vc=draw(st.sampled_from([None, "a", "b", "c"])),
            )
        )
    return topo, jobs


def _env(topo: TopologyConfig, jobs: list[Job], **env):
    cfg = ExperimentConfig(topology=topo, env={"window_jobs": None, **env})
    return make_env(cfg, jobs=jobs)


def _check_capacity(sim: Simulator) -> None:
    topo = sim.topology
    assert np.all(sim.group_free >= 0)
    assert np.all(sim.server_cpu_free >= -EPS) and np.all(sim.server_mem_free >= -EPS)
    used = np.zeros(topo.n_groups, dtype=np.int64)
    for run in sim.running.values():
        np.add.at(used, list(run.placement.worker_groups), 1)
    assert np.all(used <= topo.group_capacity)  # no GPU booked twice
    assert np.array_equal(used, topo.group_capacity - sim.group_free)


def _check_mask(env, obs: dict) -> None:
    """Every legal local slot really fits the next task, given the draft."""
    (agent,) = obs
    k = env.possible_agents.index(agent)
    mask = obs[agent]["action_mask"]
    lay, sim, draft = env.layout, env._sim, env._draft
    worker = len(draft.worker_groups) < draft.job.num_workers
    (cpu_w, cpu_p), mem = Simulator.task_demands(draft.job)
    assert not mask[lay.sc_groups[k] : lay.max_groups].any()  # padding
    assert mask[lay.max_groups + k] == 0  # forward to self
    for slot in np.flatnonzero(mask[: lay.max_groups]):
        g = lay.group_start[k] + slot
        s = env.topology.group_server[g]
        if worker:
            assert sim.group_free[g] - draft.group_used[g] >= 1
        need_cpu = draft.cpu_used[s] + (cpu_w if worker else cpu_p)
        assert need_cpu <= sim.server_cpu_free[s] + EPS
        assert draft.mem_used[s] + mem <= sim.server_mem_free[s] + EPS
    assert mask.any()  # the acting agent always has a legal action


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    case=small_cluster(),
    seed=st.integers(0, 2**16),
    rule=st.sampled_from(["vc", "least-loaded", "round-robin"]),
)
def test_random_masked_actions_never_break_capacity(case, seed, rule):
    topo, jobs = case
    env = _env(topo, jobs, home_rule=rule)
    rng = np.random.default_rng(seed)
    try:
        obs, _ = env.reset(seed=seed)
    except RuntimeError:  # no job of this cluster can ever be placed
        return
    for _ in range(10_000):
        _check_mask(env, obs)
        (agent,) = obs
        action = int(rng.choice(np.flatnonzero(obs[agent]["action_mask"])))
        obs, _, term, trunc, _ = env.step({agent: action})  # PlacementError would raise
        _check_capacity(env._sim)
        if term["__all__"]:
            break
    assert env.done and not trunc["__all__"]
    sim = env._sim
    assert len(sim.records) + len(sim.unplaceable) == len(jobs)


MODEL = "cifar10"
TASK_MEM_GB = Simulator.task_demands(Job(0, "j", MODEL, 1, 0, 1.0, 0.0, 1.0))[1]


def _two_tight_servers() -> TopologyConfig:
    """Two subclusters of one single-group, 2-GPU server each, with memory for one task."""
    server = ServerTypeConfig(
        name="tight",
        count=2,
        sockets=1,
        groups_per_socket=1,
        gpus_per_group=2,
        cpu_cores=64,
        memory_gb=1.5 * TASK_MEM_GB,
    )
    return TopologyConfig(
        subclusters=2, racks_per_subcluster=1, servers_per_rack=1, server_types=(server,)
    )


def _job(i: int, workers: int, ps: int, vc: str | None = None) -> Job:
    return Job(i, f"j{i}", MODEL, workers, ps, 100.0, 0.0, 10.0, vc=vc)


def test_a_task_nobody_has_room_for_drops_the_job_back_into_the_queue():
    # memory for one task per server: one worker each side, and no room for the PS
    env = _env(_two_tight_servers(), [_job(0, workers=2, ps=1)])
    obs, _ = env.reset(seed=0)
    g = env.layout.max_groups
    assert list(obs) == ["sc0"]
    # no subcluster can host the whole job, and sc0 has room for this worker: place it
    np.testing.assert_array_equal(obs["sc0"]["action_mask"], [1, 0, 0])
    obs, *_ = env.step({"sc0": 0})
    # the second worker: no memory left in sc0, so the only legal action is forwarding
    np.testing.assert_array_equal(obs["sc0"]["action_mask"], [0, 0, 1])
    obs, *_ = env.step({"sc0": g + 1})
    assert list(obs) == ["sc1"]
    np.testing.assert_array_equal(obs["sc1"]["action_mask"], [1, 0, 0])
    obs, rew, term, trunc, info = env.step({"sc1": 0})
    # the PS fits nowhere: the job is dropped (sim.apply(None)) and, with nothing else
    # to happen, stays unplaceable
    assert term["__all__"] and set(obs) == {"sc0", "sc1"}
    metrics = info["sc0"]["metrics"]
    assert metrics["jobs_completed"] == 0 and metrics["jobs_unplaceable"] == 1
    assert metrics["decisions"] == 1
    assert np.all(env._sim.group_free == 2)  # nothing of the draft reached the simulator


def test_forwarding_is_limited_to_n_agents_minus_one_hops():
    topo = dataclasses.replace(
        _two_tight_servers(),
        subclusters=3,
        server_types=(dataclasses.replace(_two_tight_servers().server_types[0], count=3),),
    )
    env = _env(topo, [_job(0, workers=1, ps=0)], forward_rule="free")
    obs, _ = env.reset(seed=0)
    g = env.layout.max_groups
    hops = 0
    while True:
        (agent,) = obs
        mask = obs[agent]["action_mask"]
        forwards = np.flatnonzero(mask[g:])
        if hops == 2:
            assert forwards.size == 0  # A - 1 = 2 forwards used up: must place locally
            break
        assert forwards.size == 2
        obs, *_ = env.step({agent: int(g + forwards[0])})
        hops += 1
    assert obs[agent]["job_x"][22] == 1.0  # hops / (A - 1)
    env.step({agent: 0})
    assert env.done


def test_illegal_actions_raise_value_errors_naming_agent_and_action(tiny_env):
    env = tiny_env(forward_rule="free")
    obs, _ = env.reset(seed=0)
    (agent,) = obs
    k = env.possible_agents.index(agent)
    other = env.possible_agents[1 - k]
    g = env.layout.max_groups
    cases = [
        ({agent: g + k}, rf"agent {agent}: illegal action {g + k}: forward to self"),
        ({agent: g + 2}, rf"agent {agent}: illegal action {g + 2}: out of range \[0, {g + 2}\)"),
        ({agent: -1}, rf"agent {agent}: illegal action -1: out of range"),
        ({agent: 1.5}, rf"agent {agent}: action must be an integer, got 1\.5"),
        ({other: 0}, rf"only {agent} acts now"),
        ({agent: 0, other: 0}, rf"actions for \['{other}'\], but only {agent} acts now"),
        ({}, rf"no action for the acting agent {agent}"),
    ]
    for action, pattern in cases:
        with pytest.raises(ValueError, match=pattern):
            env.step(action)
    # a padding slot: find the agent with fewer groups acting (sc1 has 8 of 16)
    small = int(np.argmin(env.layout.sc_groups))
    name = env.possible_agents[small]
    if agent != name:
        obs, *_ = env.step({agent: g + small})
    with pytest.raises(ValueError, match=rf"agent {name}: illegal action {g - 1}: padding slot"):
        env.step({name: g - 1})
    # the env is unharmed by refused actions
    legal = int(np.flatnonzero(obs[name]["action_mask"])[0])
    env.step({name: legal})


def test_a_full_group_is_refused_with_its_free_capacity():
    roomy = dataclasses.replace(_two_tight_servers().server_types[0], memory_gb=256.0)
    topo = dataclasses.replace(_two_tight_servers(), server_types=(roomy,))
    same_vc = [_job(0, 2, 1, vc="x"), _job(1, 1, 0, vc="x")]
    env = _env(topo, same_vc, home_rule="vc")
    obs, _ = env.reset(seed=0)
    (agent,) = obs
    for _ in range(3):  # job 0 fills its home's only group (and adds its PS there)
        obs, *_ = env.step({agent: 0})
    assert list(obs) == [agent]  # job 1 has the same home
    with pytest.raises(
        ValueError,
        match=rf"agent {agent}: illegal action 0: GPU group \d has no room for a "
        r"worker \(free GPUs 0, server \d free CPU [\d.]+ cores, memory [\d.]+ GB\)",
    ):
        env.step({agent: 0})


def _roomy_two_servers(gpus: int = 2) -> TopologyConfig:
    roomy = dataclasses.replace(
        _two_tight_servers().server_types[0], memory_gb=256.0, gpus_per_group=gpus
    )
    return dataclasses.replace(_two_tight_servers(), server_types=(roomy,))


def test_forward_when_you_must_moves_jobs_whole_and_never_splits_them_needlessly():
    env = _env(_roomy_two_servers(), [_job(0, workers=2, ps=1)])
    obs, _ = env.reset(seed=0)
    g = env.layout.max_groups
    # nothing placed yet and sc1 can host the whole job: it may move there whole
    np.testing.assert_array_equal(obs["sc0"]["action_mask"][g:], [0, 1])
    obs, *_ = env.step({"sc0": 0})
    for _ in range(2):  # part of the job is in sc0, which can host the rest: no forward
        np.testing.assert_array_equal(obs["sc0"]["action_mask"][g:], [0, 0])
        with pytest.raises(ValueError, match="forward when you must"):
            env.step({"sc0": g + 1})
        obs, *_ = env.step({"sc0": 0})
    assert env.done
    assert env.metrics()["jobs_completed"] == 1


def test_a_job_only_another_subcluster_can_hold_whole_may_not_go_to_one_that_cannot():
    # three subclusters of one 2-GPU group; jobs 0 and 1 leave sc0 and sc2 one free GPU
    # each: job 2 (2 workers, home sc2) may go, whole, to sc1 only
    topo = dataclasses.replace(
        _roomy_two_servers(),
        subclusters=3,
        server_types=(dataclasses.replace(_roomy_two_servers().server_types[0], count=3),),
    )
    jobs = [_job(0, 1, 0, vc=None), _job(1, 1, 0, vc=None), _job(2, 2, 0, vc=None)]
    env = _env(topo, jobs, home_rule="round-robin")
    obs, _ = env.reset(seed=0)
    g = env.layout.max_groups
    obs, *_ = env.step({"sc0": 0})  # job 0 in sc0
    obs, *_ = env.step({"sc1": g + 2})  # job 1 moves whole from sc1 to sc2
    obs, *_ = env.step({"sc2": 0})
    (agent,) = obs
    assert agent == "sc2"  # job 2 arrives at sc2, which has room for 1 of its 2 workers
    np.testing.assert_array_equal(obs[agent]["action_mask"][g:], [0, 1, 0])


def test_forward_when_you_must_moves_a_job_its_home_cannot_hold():
    # sc0 has one free GPU after job 0 takes one; job 1 needs 2 workers and sc1 is empty
    env = _env(_roomy_two_servers(), [_job(0, 1, 0, vc="x"), _job(1, 2, 0, vc="x")])
    obs, _ = env.reset(seed=0)
    g = env.layout.max_groups
    (home,) = obs
    k = env.possible_agents.index(home)
    obs, *_ = env.step({home: 0})  # job 0 on the home's group
    assert list(obs) == [home]  # job 1, same home: room for one worker, not for both
    mask = obs[home]["action_mask"]
    assert mask[0] == 1 and mask[g + 1 - k] == 1  # may place, or forward to the other
    # and once a worker is placed at home, the other can't host "the rest" (1 worker)
    # better than home can't: home is full, so forwarding is the only legal action
    obs, *_ = env.step({home: 0})
    mask = obs[home]["action_mask"]
    assert not mask[:g].any() and mask[g + 1 - k] == 1


def test_free_rule_allows_needless_forwards():
    env = _env(_roomy_two_servers(), [_job(0, workers=2, ps=1)], forward_rule="free")
    obs, _ = env.reset(seed=0)
    g = env.layout.max_groups
    np.testing.assert_array_equal(obs["sc0"]["action_mask"][g:], [0, 1])
