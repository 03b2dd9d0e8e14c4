"""The PS rule (``env.ps_rule``): the agents place a job's workers; its parameter
servers go where every heuristic puts them."""

from __future__ import annotations

import numpy as np
import pytest

from agents.policy import agents_from_weights, check_manifest_env
from envs.config import DECISION_OPTIONS, EnvConfig
from envs.observations import ObservationBuilder
from envs.session import PlacementSession
from marl_sched.config import REPO_ROOT
from marl_sched.errors import InputError
from marl_sched.jobs import Job
from marl_sched.policies import make_policy
from marl_sched.policies.heuristics import ps_near_workers
from tests.helpers import partly_occupied, untrained_checkpoint

TINY = str(REPO_ROOT / "configs" / "tiny.yaml")


@pytest.mark.parametrize("name", ["first-fit", "locality", "interference-aware"])
def test_ps_near_workers_is_the_heuristics_own_ps_placement(name):
    topo, perf, sim = partly_occupied(TINY, seed=4)
    view = sim.view()
    policy = make_policy(name)
    policy.reset(topo, 0)
    for i, (workers, ps) in enumerate([(4, 2), (3, 1), (6, 3), (1, 1)]):
        job = Job(500 + i, f"p{i}", "vgg-16", workers, ps, 100.0, view.now, 10.0)
        p = policy.place(job, view)
        assert p is not None
        assert ps_near_workers(job, view, p.worker_groups) == tuple(p.ps_groups)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_agents_place_workers_only_and_the_ps_follow_them(seed):
    topo, perf, sim = partly_occupied(TINY, seed=seed)
    view = sim.view()
    rng = np.random.default_rng(seed)
    for rule in (False, True):
        builder = ObservationBuilder(topo, perf, EnvConfig(ps_rule=rule))
        for i, (workers, ps) in enumerate([(4, 2), (3, 1), (2, 2), (5, 1)]):
            job = Job(600 + i, f"p{i}", "vgg-16", workers, ps, 100.0, view.now, 10.0)
            session = PlacementSession(builder, job, view, i % builder.n_agents)
            placed = 0
            while not session.done:
                mask = session.action_mask(session.agent)
                before = session.task
                session.act(int(rng.choice(np.flatnonzero(mask))))
                placed += session.task > before
            if rule:  # one placing action per worker; the PS where the heuristics put them
                assert placed == workers
                assert tuple(session.ps) == ps_near_workers(job, view, session.workers)
                servers = set(topo.group_server[session.workers].tolist())
                assert set(topo.group_server[session.ps].tolist()) <= servers
            else:
                assert placed == workers + ps
            assert len(session.ps) == ps and len(session.workers) == workers
            # the session's own accounting holds the PS too (CPU and memory taken)
            srv = topo.group_server[session.ps]
            assert (session.cpu[srv] < np.asarray(view.server_cpu_free)[srv]).all()


def test_option_recorded_and_served_from_the_manifest():
    assert "ps_rule" in DECISION_OPTIONS and EnvConfig().ps_rule is False
    topo, perf, _ = partly_occupied(TINY, seed=5)
    builder = ObservationBuilder(topo, perf, EnvConfig(ps_rule=True))
    manifest, weights = untrained_checkpoint(builder, {"hidden": 8, "layers": 1})
    # recorded by the checkpoint from the builder, not written here
    assert manifest["env"]["options"]["ps_rule"] is True
    assert agents_from_weights(manifest, weights).env_options()["ps_rule"] is True
    del manifest["env"]["options"]["ps_rule"]  # a manifest must record every option
    with pytest.raises(InputError, match="option ps_rule missing"):
        check_manifest_env(manifest, "ckpt")
