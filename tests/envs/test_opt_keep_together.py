"""The keep-together masks (``env.keep_together``): fill a server holding the job's
workers before opening another, and open one that takes every remaining worker when
the acting scope has it."""

from __future__ import annotations

import numpy as np
import pytest

from agents.policy import agents_from_weights, check_manifest_env
from envs.config import EnvConfig
from envs.observations import ObservationBuilder
from envs.rules import server_worker_slots
from envs.session import PlacementSession
from marl_sched.catalogue import CATALOGUE
from marl_sched.config import REPO_ROOT
from marl_sched.errors import InputError
from marl_sched.jobs import Job
from tests.helpers import partly_occupied, untrained_checkpoint

TINY = str(REPO_ROOT / "configs" / "tiny.yaml")
MODEL = "resnet-50"


def _walk(builder, view, job, rng):
    """Place ``job`` by uniformly random legal actions from its home agent. Per worker:
    ``(server, slots before, acting agent, workers left before)`` with ``slots`` every
    server's worker slots in the session just before the worker was placed."""
    t, s = builder.topology, CATALOGUE[job.model]
    session = PlacementSession(builder, job, view, job.job_id % builder.n_agents)
    trail = []
    while not session.done:
        mask = session.action_mask(session.agent)
        action = int(rng.choice(np.flatnonzero(mask)))
        worker, before = session.is_worker, len(session.workers)
        slots = server_worker_slots(
            t, session.group_free, session.cpu, session.mem, s.cpu_worker, s.mem_gb
        )
        agent, left = session.agent, session.workers_left
        session.act(action)
        if worker and len(session.workers) > before:
            srv = int(t.group_server[session.workers[-1]])
            trail.append((srv, slots, agent, left))
    return trail


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_legal_walks_keep_jobs_together_only_with_the_rule(seed):
    """Random legal actions on a busy cluster: with the rule, a worker goes to a server
    already holding the job's workers whenever one in the acting scope has room, and
    opens a server that takes every remaining worker whenever the acting scope has one
    — so a job whose first worker lands where one server takes it whole stays on one
    server; without the rule, such jobs split."""
    topo, perf, sim = partly_occupied(TINY, seed=seed)
    view = sim.view()
    rng = np.random.default_rng(seed)
    split = {True: 0, False: 0}
    for together in (True, False):
        builder = ObservationBuilder(
            topo, perf, EnvConfig(consolidate=True, keep_together=together)
        )
        for i, workers in enumerate([2, 3, 4, 4, 6, 8, 12, 3, 2, 5]):
            if workers > view.free_gpus:  # the simulator offers only jobs that fit
                continue
            job = Job(100 + i, f"p{i}", MODEL, workers, 1, 100.0, view.now, 10.0)
            trail = _walk(builder, view, job, rng)
            servers = [srv for srv, *_ in trail]
            _, slots0, agent0, _ = trail[0]
            whole_at_first = (slots0[builder.server_scope == agent0] >= workers).any()
            split[together] += bool(whole_at_first and len(set(servers)) > 1)
            if not together:
                continue
            for k, (srv, slots, agent, left) in enumerate(trail):
                mine = builder.server_scope == agent
                held = np.zeros(topo.n_servers, dtype=bool)
                held[servers[:k]] = True
                if (held & mine & (slots >= 1)).any():
                    assert held[srv], f"job {i} opened server {srv} before filling its own"
                elif (mine & (slots >= left)).any():
                    assert slots[srv] >= left, f"job {i}: server {srv} cannot take all {left}"
    assert split[True] == 0 and split[False] > 0


def test_masks_fill_the_open_server_and_bar_forwarding():
    topo, perf, sim = partly_occupied(TINY, seed=5)
    view = sim.view()
    job = Job(999, "probe", MODEL, 3, 1, 100.0, view.now, 10.0)
    free = ObservationBuilder(topo, perf, EnvConfig(keep_together=False))
    kept = ObservationBuilder(topo, perf, EnvConfig(keep_together=True))
    g_max, a = kept.pad[0], kept.n_agents
    first = {}
    for b in (free, kept):
        session = PlacementSession(b, job, view, 0)
        mask = session.action_mask(0)
        first[b.keep_together] = mask[:g_max].copy()
        session.act(int(np.flatnonzero(mask[:g_max])[0]))
        srv = topo.group_server[session.workers[0]]
        mask = session.action_mask(0)
        groups = b.scopes[0].groups
        local_servers = set(topo.group_server[groups[np.flatnonzero(mask[: len(groups)])]])
        if b.keep_together:
            assert local_servers == {srv} and not mask[g_max : g_max + a].any()
        else:
            assert len(local_servers) > 1
    # the first worker may only open a server that takes all 3 workers
    assert first[True].sum() < first[False].sum()


def test_the_option_is_recorded_and_served_from_the_manifest():
    topo, perf, sim = partly_occupied(TINY, seed=5)
    builder = ObservationBuilder(topo, perf, EnvConfig(keep_together=True))
    manifest, weights = untrained_checkpoint(builder, {"hidden": 8, "layers": 1})
    # recorded by the checkpoint from the builder, not written here
    assert manifest["env"]["options"]["keep_together"] is True
    agents = agents_from_weights(manifest, weights)
    assert agents.env_options()["keep_together"] is True
    del manifest["env"]["options"]["keep_together"]  # a manifest must record every option
    with pytest.raises(InputError, match="option keep_together missing"):
        check_manifest_env(manifest, "ckpt")
