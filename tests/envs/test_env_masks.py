"""Action masks of ClusterPlacement-v1: mask = the legal actions; random masked play
never breaks capacity under any rule option; forward when you must; a task nobody has
room for leaves the job queued; the rule options (consolidate, keep_together,
speed_floor, wait_to_fit, ps_rule) and the hints' follow actions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envs import make_env
from marl_sched.catalogue import CATALOGUE, MODEL_NAMES
from marl_sched.config import ExperimentConfig, ServerTypeConfig, TopologyConfig
from marl_sched.jobs import Job
from marl_sched.policies import make_policy
from marl_sched.policies.heuristics import ps_near_workers
from marl_sched.simulator import Simulator
from tests.envs.helpers import MODEL, cluster, job, record_placements, server

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
    options = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "forward_rule": st.sampled_from(["must", "free"]),
                "consolidate": st.booleans(),
                "keep_together": st.booleans(),
                "speed_floor": st.sampled_from([0.0, 0.5, 0.9, 1.0]),
                "wait_to_fit": st.sampled_from([0.0, 1.0]),
                "ps_rule": st.booleans(),
                "central": st.booleans(),
                "hints": st.sampled_from([[], ["first-fit"], ["interference-aware", "locality"]]),
            },
        )
    )
    return topo, jobs, options


def _check_mask(env, obs: dict) -> None:
    """The acting agent's mask: every legal local slot really fits the next task given
    the job's tasks placed so far; padding and the no-op slot are never legal;
    forwards go to unvisited agents only; every masked action is refused."""
    (agent,) = obs
    k = env.possible_agents.index(agent)
    mask = obs[agent]["action_mask"]
    b, s = env.builder, env.session
    g_max = b.pad[0]
    groups = b.scopes[k].groups
    spec = CATALOGUE[s.job.model]
    assert mask.any()  # the acting agent always has a legal action
    assert not mask[len(groups) : g_max].any()  # padding
    assert mask[g_max + k] == 0  # the no-op slot
    for v in s.visited:
        assert mask[g_max + v] == 0  # never back to a visited agent
    np.testing.assert_array_equal(mask, s.action_mask(k))
    for slot in np.flatnonzero(mask[:g_max]):
        g = groups[slot]
        srv = env.topology.group_server[g]
        if s.is_worker:
            assert s.group_free[g] >= 1
        assert s.cpu[srv] + EPS >= (spec.cpu_worker if s.is_worker else spec.cpu_ps)
        assert s.mem[srv] + EPS >= spec.mem_gb
    for target in s.follow_targets(k):
        if target is not None:
            assert b.group_scope[target] == k  # a hint's plan stays in the scope
    illegal = np.flatnonzero(mask == 0)
    for action in illegal[:: max(1, len(illegal) // 4)]:  # a sample of them
        with pytest.raises(ValueError, match=rf"agent {agent}: action {action} is masked"):
            env.step({agent: int(action)})


def _check_capacity(sim: Simulator) -> None:
    topo = sim.topology
    assert np.all(sim.group_unused >= 0)
    assert np.all(sim.server_cpu_free >= -EPS) and np.all(sim.server_mem_free >= -EPS)
    used = np.zeros(topo.n_groups, dtype=np.int64)
    for run in sim.running.values():
        np.add.at(used, list(run.placement.worker_groups), 1)
    assert np.array_equal(used, topo.group_capacity - sim.group_unused)  # no GPU booked twice


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(case=small_cluster(), seed=st.integers(0, 2**16))
def test_random_masked_play_never_breaks_capacity_under_any_rule_option(case, seed):
    topo, jobs, options = case
    env = make_env(ExperimentConfig(topology=topo, env={"window_jobs": None, **options}), jobs=jobs)
    rng = np.random.default_rng(seed)
    try:
        obs, _ = env.reset(seed=seed)
    except Exception as exc:  # no job of this cluster can ever be placed
        assert "no job of the window can ever be placed" in str(exc)
        return
    total = 0.0
    for _ in range(10_000):
        _check_mask(env, obs)
        (agent,) = obs
        action = int(rng.choice(np.flatnonzero(obs[agent]["action_mask"])))
        obs, rew, term, trunc, info = env.step({agent: action})  # PlacementError would raise
        total += sum(rew.values())
        _check_capacity(env.sim)
        if term["__all__"]:
            break
    assert env.done and not trunc["__all__"]
    sim = env.sim
    assert len(sim.records) + len(sim.unplaceable) == len(jobs)
    if not sim.unplaceable:
        assert total == pytest.approx(-info[agent]["avg_jct_s"] / 3600.0, rel=1e-9)


TASK_MEM_GB = CATALOGUE[MODEL].mem_gb


def _tight(count: int = 2) -> ServerTypeConfig:
    """A single-group 2-GPU server with memory for one task of MODEL."""
    return server(count=count, gpus=2, memory_gb=1.5 * TASK_MEM_GB)


def test_a_task_nobody_has_room_for_leaves_the_job_queued():
    # memory for one task per server: one worker each side, and no room for the PS
    env = make_env(cluster(2, _tight()), jobs=[job(0, workers=2, ps=1)])
    obs, _ = env.reset(seed=0)
    assert env.builder.pad[0] == 1
    assert list(obs) == ["sc0"]  # job 0 without a vc arrives at agent 0 mod 2
    # no subcluster can host the whole job, and sc0 has room for this worker: place it
    np.testing.assert_array_equal(obs["sc0"]["action_mask"], [1, 0, 0])
    obs, *_ = env.step({"sc0": 0})
    # the second worker: no memory left in sc0, so the only legal action is forwarding
    np.testing.assert_array_equal(obs["sc0"]["action_mask"], [0, 0, 1])
    obs, *_ = env.step({"sc0": 2})
    assert list(obs) == ["sc1"]
    np.testing.assert_array_equal(obs["sc1"]["action_mask"], [1, 0, 0])
    obs, rew, term, trunc, info = env.step({"sc1": 0})
    # the PS fits nowhere: the job stays queued (sim.apply(None)) and, with nothing
    # else to happen, can never be placed
    assert term["__all__"] and set(obs) == {"sc0", "sc1"} == set(info)
    metrics = info["sc0"]["metrics"]
    assert metrics["jobs_completed"] == 0 and metrics["jobs_unplaceable"] == 1
    assert metrics["decisions"] == 1
    assert np.all(env.sim.group_free == 2)  # nothing of the tentative placement was applied


def test_a_job_whose_first_task_fits_nowhere_is_never_offered_to_an_agent():
    big = job(0, workers=1, ps=0, model=MODEL)
    env = make_env(cluster(1, server(count=1, gpus=2, memory_gb=0.5 * TASK_MEM_GB)), jobs=[big])
    with pytest.raises(Exception, match="no job of the window can ever be placed"):
        env.reset(seed=0)


def test_forward_when_you_must_moves_jobs_whole_and_never_splits_them_needlessly():
    env = make_env(cluster(2, server()), jobs=[job(0, workers=2, ps=1)])
    obs, _ = env.reset(seed=0)
    g = env.builder.pad[0]
    # nothing placed yet and sc1 can host the whole job: it may move there whole
    np.testing.assert_array_equal(obs["sc0"]["action_mask"][g:], [0, 1])
    assert obs["sc0"]["action_mask"][0] == 1
    obs, *_ = env.step({"sc0": 0})
    for _ in range(2):  # part of the job is in sc0, which can host the rest: no forward
        np.testing.assert_array_equal(obs["sc0"]["action_mask"][g:], [0, 0])
        with pytest.raises(ValueError, match=r"agent sc0: action 2 is masked \(forward to 1\)"):
            env.step({"sc0": g + 1})
        obs, *_ = env.step({"sc0": 0})
    assert env.done
    assert env.metrics()["jobs_completed"] == 1


def test_free_rule_allows_needless_forwards():
    env = make_env(cluster(2, server()), jobs=[job(0, 2, 1)], env={"forward_rule": "free"})
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step({"sc0": 0})
    np.testing.assert_array_equal(obs["sc0"]["action_mask"], [1, 0, 1])  # may split


def test_a_job_only_another_subcluster_can_hold_whole_may_not_go_to_one_that_cannot():
    # three subclusters of one 2-GPU group; jobs 0 and 1 leave sc0 and sc1 one free GPU
    # each and job 2 fills sc2: job 3 must split, and may only go on to sc1
    cfg = cluster(3, server(count=3))
    jobs = [job(0, 1), job(1, 1), job(2, 2), job(3, 2)]
    env = make_env(cfg, jobs=jobs)
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["sc0"]
    obs, *_ = env.step({"sc0": 0})  # job 0 in sc0
    assert list(obs) == ["sc1"]
    obs, *_ = env.step({"sc1": 0})  # job 1 in sc1
    assert list(obs) == ["sc2"]  # job 2 fits sc2 whole: it may not leave
    np.testing.assert_array_equal(obs["sc2"]["action_mask"], [1, 0, 0, 0])
    obs, *_ = env.step({"sc2": 0})
    obs, *_ = env.step({"sc2": 0})  # job 2 fills sc2
    # job 3 (2 workers, home sc0 = 3 mod 3): nobody can hold it whole; sc0 has room
    # for one worker, so it places it; then it must forward to sc1 only
    assert list(obs) == ["sc0"]
    np.testing.assert_array_equal(obs["sc0"]["action_mask"], [1, 0, 0, 0])
    obs, *_ = env.step({"sc0": 0})
    np.testing.assert_array_equal(obs["sc0"]["action_mask"], [0, 0, 1, 0])


def test_forward_when_you_must_moves_a_job_its_home_cannot_hold():
    # sc0 keeps one free GPU after job 0; job 2 (home sc0) needs 2 workers, sc1 is empty
    env = make_env(cluster(2, server()), jobs=[job(0, 1), job(2, 2, submit=1.0)])
    obs, _ = env.reset(seed=0)
    g = env.builder.pad[0]
    obs, *_ = env.step({"sc0": 0})
    assert list(obs) == ["sc0"] and env.pending_job.name == "j2"
    mask = obs["sc0"]["action_mask"]
    np.testing.assert_array_equal(mask, [1, 0, 1])  # place here or move whole to sc1
    obs, *_ = env.step({"sc0": 0})
    # home is full now: forwarding is the only legal action
    np.testing.assert_array_equal(obs["sc0"]["action_mask"], [0, 0, 1])
    obs, *_ = env.step({"sc0": g + 1})
    np.testing.assert_array_equal(obs["sc1"]["action_mask"], [1, 0, 0])  # sc0: visited
    assert obs["sc1"]["job_x"][8] == pytest.approx(1 / 2)  # hops / A


def test_visited_agents_are_never_forward_targets():
    env = make_env(cluster(3, server(count=3)), jobs=[job(0, 1)], env={"forward_rule": "free"})
    obs, _ = env.reset(seed=0)
    g = env.builder.pad[0]
    path = []
    while True:
        (agent,) = obs
        path.append(agent)
        forwards = np.flatnonzero(obs[agent]["action_mask"][g:])
        assert forwards.size == 3 - len(path)
        if forwards.size == 0:
            break
        assert not {f"sc{f}" for f in forwards} & set(path)
        obs, *_ = env.step({agent: int(g + forwards[-1])})
    assert path == ["sc0", "sc2", "sc1"]
    assert obs["sc1"]["job_x"][8] == pytest.approx(2 / 3)  # hops / A
    np.testing.assert_array_equal(obs["sc1"]["peers_x"][:, 8], [1, 1, 1])  # visited
    env.step({"sc1": 0})
    assert env.done


def _two_sizes(**env):
    """sc0: one 2-GPU server; sc1: one 4-GPU server."""
    return cluster(
        2, server(count=1, gpus=2, name="a"), server(count=1, gpus=2, groups=2, name="b"), **env
    )


def test_consolidate_forwards_a_job_no_home_server_can_hold_to_one_that_can():
    jobs = [job(0, 3)]
    env = make_env(_two_sizes(), jobs=jobs)
    obs, _ = env.reset(seed=0)
    g = env.builder.pad[0]
    assert g == 2
    np.testing.assert_array_equal(obs["sc0"]["action_mask"], [1, 0, 0, 1])  # may split
    env = make_env(_two_sizes(consolidate=True), jobs=jobs)
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs["sc0"]["action_mask"], [0, 0, 0, 1])  # forward only
    obs, *_ = env.step({"sc0": g + 1})
    np.testing.assert_array_equal(obs["sc1"]["action_mask"], [1, 1, 0, 0])
    # a single-worker job is not constrained
    env = make_env(_two_sizes(consolidate=True), jobs=[job(0, 1)])
    obs, _ = env.reset(seed=0)
    assert obs["sc0"]["action_mask"][0] == 1


def test_keep_together_fills_the_server_holding_the_job_before_opening_another():
    # one subcluster of two servers with two 2-GPU groups each (groups 0,1 | 2,3)
    cfg = cluster(1, server(count=2, groups=2), per_rack=2)
    env = make_env(cfg, jobs=[job(0, 3)])
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step({"sc0": 0})
    np.testing.assert_array_equal(obs["sc0"]["action_mask"][:4], [1, 1, 1, 1])
    env = make_env(cfg, jobs=[job(0, 3)], env={"keep_together": True})
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs["sc0"]["action_mask"][:4], [1, 1, 1, 1])
    obs, *_ = env.step({"sc0": 2})
    # the next workers stay on server 1 while it has room
    np.testing.assert_array_equal(obs["sc0"]["action_mask"][:4], [0, 0, 1, 1])
    obs, *_ = env.step({"sc0": 3})
    np.testing.assert_array_equal(obs["sc0"]["action_mask"][:4], [0, 0, 1, 1])
    obs, *_ = env.step({"sc0": 3})
    assert env.done


def test_keep_together_opens_a_server_that_takes_every_remaining_worker():
    # server 0 has 2 free GPUs after job 0; job 1 (3 workers) must open server 1
    cfg = cluster(1, server(count=2, groups=2), per_rack=2)
    jobs = [job(0, 2, iterations=1e6), job(1, 3, submit=1.0)]
    for together, expected in ((False, [0, 1, 1, 1]), (True, [0, 0, 1, 1])):
        env = make_env(cfg, jobs=jobs, env={"keep_together": together})
        obs, _ = env.reset(seed=0)
        env.step({"sc0": 0})
        obs, *_ = env.step({"sc0": 0})  # job 0 fills group 0
        assert env.pending_job.name == "j1"
        np.testing.assert_array_equal(obs["sc0"]["action_mask"][:4], expected)


def test_speed_floor_keeps_workers_off_slow_gpus_while_fast_ones_have_room():
    # sc0: one K80 server, sc1: one V100 server; a 1-worker job arrives at sc0
    def cfg(**e):
        k80 = server(count=1, gpu_type="k80", name="k")
        return cluster(2, k80, server(count=1, gpu_type="v100", name="v"), **e)

    env = make_env(cfg(), jobs=[job(0, 1)])
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs["sc0"]["action_mask"], [1, 0, 1])  # place or move whole
    env = make_env(cfg(speed_floor=0.9), jobs=[job(0, 1)])
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs["sc0"]["action_mask"], [0, 0, 1])  # forward to V100s
    # a job below speed_floor_min_work is not bound
    small = job(0, 1, iterations=10.0)
    assert small.gpu_work_s < 1e6
    env = make_env(cfg(speed_floor=0.9, speed_floor_min_work=1e6), jobs=[small])
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs["sc0"]["action_mask"], [1, 0, 1])
    # once the V100s are full, the fastest type with room is the K80: no floor
    jobs = [job(1, 2, iterations=1e6), job(2, 1, submit=1.0)]
    env = make_env(cfg(speed_floor=0.9), jobs=jobs)
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["sc1"]
    env.step({"sc1": 0})
    obs, *_ = env.step({"sc1": 0})
    assert list(obs) == ["sc0"] and env.pending_job.name == "j2"
    np.testing.assert_array_equal(obs["sc0"]["action_mask"], [1, 0, 0])


def test_wait_to_fit_keeps_a_job_queued_until_one_server_can_take_it_whole():
    # one subcluster of two 2-GPU servers; jobs 0 and 1 take one GPU on each; job 2
    # (2 workers) could split now, or wait for job 0 to end
    cfg = cluster(1, server(count=2), per_rack=2)
    jobs = [job(0, 1, iterations=50.0), job(1, 1, iterations=5000.0), job(2, 2, submit=1.0)]
    placed = {}
    for wait in (0.0, 1e6):
        env = make_env(cfg, jobs=jobs, env={"wait_to_fit": wait})
        obs, _ = env.reset(seed=0)
        applied = record_placements(env)
        env.step({"sc0": 0})  # job 0 on server 0
        obs, *_ = env.step({"sc0": 1})  # job 1 on server 1
        if wait == 0.0:
            assert env.pending_job.name == "j2" and env.sim.now == 1.0
            np.testing.assert_array_equal(obs["sc0"]["action_mask"][:2], [1, 1])
        else:  # the env kept job 2 queued itself until job 0 finished
            assert env.pending_job.name == "j2"
            assert env.sim.now == env.sim.records[0].finish_time > 1.0
            assert env.sim.group_free.tolist() == [2, 1]
        while not env.done:
            agent = env.acting_agent
            obs, *_ = env.step({agent: int(np.flatnonzero(obs[agent]["action_mask"])[0])})
        placed[wait] = applied[2].worker_groups
    assert sorted(placed[0.0]) == [0, 1]  # split over both servers
    assert placed[1e6] == (0, 0)  # whole on server 0


def test_ps_rule_places_the_ps_where_the_heuristics_put_them():
    cfg = cluster(1, server(count=2, groups=2), per_rack=2)
    jobs = [job(0, 2, ps=2)]
    env = make_env(cfg, jobs=jobs)
    env.reset(seed=0)
    view = env.cluster_view()
    for action in (2, 3):
        obs, *_ = env.step({"sc0": action})
    assert not env.done and not env.session.is_worker  # the agents place the PS
    assert obs["sc0"]["job_x"][2] == 0.0  # is_worker
    env = make_env(cfg, jobs=jobs, env={"ps_rule": True})
    env.reset(seed=0)
    applied = record_placements(env)
    env.step({"sc0": 2})
    assert not env.done
    _, rew, term, *_ = env.step({"sc0": 3})  # the last worker: the PS follow
    assert term["__all__"]
    p = applied[0]
    assert p.worker_groups == (2, 3)
    assert p.ps_groups == ps_near_workers(jobs[0], view, [2, 3])
    assert set(p.ps_groups) <= {2, 3}  # on the server holding the workers


def test_a_hint_follow_action_places_the_task_where_the_hint_plans_it():
    cfg = cluster(2, server(count=4, groups=2), per_rack=2)
    jobs = [job(0, 3, ps=1, model="vgg-16")]
    env = make_env(cfg, jobs=jobs, env={"hints": ["first-fit", "interference-aware"]})
    obs, _ = env.reset(seed=0)
    applied = record_placements(env)
    b = env.builder
    g, a = b.pad[0], b.n_agents
    plans = env.session.plans(0)
    ff = make_policy("first-fit")
    ff.reset(env.topology, 0)
    from envs.rules import scope_view

    assert plans[0] == ff.place(jobs[0], scope_view(b, env.cluster_view(), 0))
    for _ in range(jobs[0].num_tasks):
        mask = obs["sc0"]["action_mask"]
        assert mask[g + a] == 1  # follow first-fit stays legal while the job agrees
        target = env.session.follow_targets(0)[0]
        obs, *_ = env.step({"sc0": g + a})
    assert env.done
    placed = applied[0]
    assert sorted(placed.worker_groups) == sorted(plans[0].worker_groups)
    assert sorted(placed.ps_groups) == sorted(plans[0].ps_groups)
    assert target is not None


def test_a_follow_action_is_illegal_once_the_job_disagrees_with_the_plan():
    cfg = cluster(1, server(count=2, groups=2), per_rack=2)
    env = make_env(cfg, jobs=[job(0, 2)], env={"hints": ["first-fit"]})
    obs, _ = env.reset(seed=0)
    g, a = env.builder.pad[0], 1
    plan = env.session.plans(0)[0]
    assert obs["sc0"]["action_mask"][g + a] == 1
    assert obs["sc0"]["job_x"][-1] == 1.0  # agrees
    off_plan = next(s for s in range(4) if s not in plan.worker_groups)
    obs, *_ = env.step({"sc0": off_plan})
    assert obs["sc0"]["action_mask"][g + a] == 0
    assert obs["sc0"]["job_x"][-1] == 0.0
    with pytest.raises(
        ValueError, match=r"agent sc0: action 5 is masked \(follow hint 'first-fit'\)"
    ):
        env.step({"sc0": g + a})


def test_wait_to_fit_does_not_hold_back_a_job_no_server_can_ever_hold_whole():
    # two 2-GPU servers with memory for one task each: the 2-worker job must split
    cfg = cluster(1, _tight(), per_rack=2)
    env = make_env(cfg, jobs=[job(0, 2)], env={"wait_to_fit": 0.0})
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["sc0"]  # without the option the job is placed (split)
    env = make_env(cfg, jobs=[job(0, 2)], env={"wait_to_fit": 1.0})
    obs, _ = env.reset(seed=0)  # no server can ever hold it whole: it does not wait
    assert list(obs) == ["sc0"]


def test_a_waiting_job_is_offered_again_at_the_next_completion_not_the_next_arrival():
    """The documented limitation of wait_to_fit (envs/cluster_env.py): a declined job is
    re-offered at the simulator's next completion, so an arrival after its wait is
    over is served first."""
    cfg = cluster(1, server(count=2), per_rack=2)
    jobs = [
        job(0, 1, iterations=1e6),
        job(1, 1, iterations=1e6),
        job(2, 2, submit=1.0, iterations=10.0),
        job(3, 1, submit=10.0, iterations=1e6),
    ]
    env = make_env(cfg, jobs=jobs, env={"wait_to_fit": 1.0})
    obs, _ = env.reset(seed=0)
    env.step({"sc0": 0})
    env.step({"sc0": 1})
    iso = env.builder.perf.isolated_iteration_time(MODEL, 2, 0) * 10.0
    assert 1.0 + iso < 10.0  # job 2's wait is over when job 3 arrives
    assert env.sim.now == 10.0
    assert env.pending_job.name == "j3"  # j2 waits for the first completion
    env.step({"sc0": env.session.action_mask(0).nonzero()[0][0]})
    assert env.pending_job.name == "j2" and env.sim.now > 1e3
