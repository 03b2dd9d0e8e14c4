"""The number of agents as an env option (``env.subclusters_per_agent``): agent ``i``
schedules subclusters ``i*k .. i*k+k-1``, so a topology's subclusters no longer fix the
number of agents."""

from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

import envs
from agents.policy import DEFAULT_CHECKPOINT, load_agents
from envs.config import EnvConfig
from envs.observations import ObservationBuilder
from marl_sched.cli import main
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.errors import InputError
from marl_sched.runner import build_cluster

DEFAULT = REPO_ROOT / "configs" / "default.yaml"


def _builder(k: int) -> ObservationBuilder:
    topo, perf = build_cluster(load_config(DEFAULT))
    return ObservationBuilder(topo, perf, EnvConfig(subclusters_per_agent=k))


@pytest.mark.parametrize(("k", "agents"), [(1, 4), (2, 2), (3, 2), (4, 1), (9, 1)])
def test_each_agent_holds_k_consecutive_subclusters(k, agents):
    b = _builder(k)
    t = b.topology
    assert t.n_subclusters == 4 and b.n_agents == agents
    assert b.agent_ids == [f"sc{i}" for i in range(agents)]
    for i, scope in enumerate(b.scopes):
        subclusters = range(i * k, min(i * k + k, t.n_subclusters))
        want = np.concatenate([t.subcluster_groups(j) for j in subclusters])
        np.testing.assert_array_equal(scope.groups, want)
        assert (b.group_scope[want] == i).all()
    # every group in exactly one scope, scopes in index order
    assert sorted(np.concatenate([s.groups for s in b.scopes]).tolist()) == list(range(t.n_groups))
    assert (np.diff(b.group_scope) >= 0).all()
    assert b.action_space.n == b.pad[0] + agents  # groups, then a forward per agent


def test_one_per_subcluster_is_today_s_builder():
    one, today = _builder(1), ObservationBuilder(*build_cluster(load_config(DEFAULT)))
    assert one.agent_ids == today.agent_ids and one.pad == today.pad
    np.testing.assert_array_equal(one.group_scope, today.group_scope)


@pytest.mark.parametrize("k", [2, 3])
def test_an_episode_with_fewer_agents_passes_the_parallel_api_test(k):
    env = envs.make_parallel_env(
        {"config": DEFAULT, "env": {"subclusters_per_agent": k, "window_jobs": 15}, "seed": 1}
    )
    assert len(env.possible_agents) == 2
    parallel_api_test(env, num_cycles=400)


def test_a_checkpoint_trained_with_one_agent_per_subcluster_refuses_another_count(tmp_path):
    agents = load_agents(DEFAULT_CHECKPOINT)  # its manifest predates the option: 1
    assert agents.manifest["env"]["options"]["subclusters_per_agent"] == 1
    with pytest.raises(InputError, match="subclusters_per_agent"):
        agents.check_env(envs.env_config(load_config(DEFAULT, ["env.subclusters_per_agent=2"])))


@pytest.mark.parametrize(
    ("value", "message"),
    [("0", "env.subclusters_per_agent: must be in [1, 100,000]"),
     ("2 env.central=true", "env.subclusters_per_agent: must be 1 with central: true")],
)  # fmt: skip
def test_a_bad_count_is_one_line_exit_2(value, message, tmp_path, capsys):
    words = f"env.subclusters_per_agent={value}".split()
    argv = ["simulate", "--config", str(REPO_ROOT / "configs" / "tiny.yaml"),
            "--out", str(tmp_path / "o"), "--quiet", *words]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not (tmp_path / "o").exists()


def test_job_tasks_frac_counts_each_agent_s_own_scope_at_k_2():
    """Hand-computed ``peers_x`` ``job_tasks_frac`` at k = 2 on the default topology:
    agent 0 holds subclusters 0 and 1 (groups 0-95), agent 1 holds 2 and 3. One task of
    a 10-task job on group 10 is 1/10 of the job in agent 0's scope and none in agent
    1's: ``[0.1, 0]``. Fails on the code that reused the uplinks' per-subcluster starts
    (0, 2) as group starts and showed ``[0, 0.1]``."""
    from envs.session import PlacementSession
    from marl_sched.jobs import Job
    from marl_sched.simulator import Simulator

    b = _builder(2)
    t = b.topology
    assert b.n_agents == 2 and b.group_scope[10] == 0 and b.scope_group_start[1] > 10
    view = Simulator(t, [], perf=b.perf).view()
    job = Job(0, "j", "resnet-50", 9, 1, 100.0, view.now, 10.0)
    session = PlacementSession(b, job, view, 0)
    session.act(int(np.searchsorted(b.scopes[0].groups, 10)))  # the first worker on group 10
    assert session.workers == [10]
    column = b.features["peers_x"].index("job_tasks_frac")
    for agent in (0, 1):
        peers = b.observe(session, agent)["peers_x"]
        np.testing.assert_allclose(peers[:, column], [0.1, 0.0], atol=1e-7)
