"""The speed-floor masks (``env.speed_floor``): a worker only goes to GPUs at least
``f`` times as fast as the fastest type that still has room for the job's remaining
workers (lowered to the slowest GPU the job already holds)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from agents.policy import agents_from_weights, check_manifest_env
from envs.config import DECISION_OPTIONS, EnvConfig, env_config
from envs.observations import ObservationBuilder
from envs.rules import server_worker_slots
from envs.session import PlacementSession
from marl_sched.catalogue import CATALOGUE
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.errors import InputError
from marl_sched.jobs import Job
from marl_sched.perf import PerformanceModel
from marl_sched.simulator import Simulator
from tests.helpers import tiny_topology, untrained_checkpoint

MODEL = "resnet-50"


def _cluster():
    """2 subclusters x 2 racks x 2 servers of 8 GPUs: subcluster 0 V100, 1 K80."""
    topo = tiny_topology(gpu_types=("v100", "k80"))
    assert set(topo.server_gpu_speed[topo.server_subcluster == 0]) == {1.0}
    assert topo.server_gpu_speed[topo.server_subcluster == 1].max() < 0.5
    return topo, PerformanceModel(topo)


def _occupy(topo, perf, v100_gpus_left: int):
    """A view of the cluster with only ``v100_gpus_left`` V100 GPUs free (K80s free)."""
    sim = Simulator(topo, [], perf=perf)
    view = sim.view()
    free = np.array(view.group_free)
    v100 = np.flatnonzero(topo.group_speed == 1.0)
    left = v100_gpus_left
    for g in v100:
        keep = min(left, int(free[g]))
        free[g], left = keep, left - keep
    return replace(view, group_free=free)


def _walk(builder, view, job, home, rng):
    """Place ``job`` from agent ``home`` by uniformly random legal actions; per worker
    ``(its server, the fastest speed with room for the rest just before it)``."""
    t, s = builder.topology, CATALOGUE[job.model]
    session = PlacementSession(builder, job, view, home)
    trail = []
    while not session.done:
        mask = session.action_mask(session.agent)
        action = int(rng.choice(np.flatnonzero(mask)))  # fails if nothing is legal
        worker, before = session.is_worker, len(session.workers)
        slots = server_worker_slots(
            t, session.group_free, session.cpu, session.mem, s.cpu_worker, s.mem_gb
        )
        speed = t.server_gpu_speed
        room = [v for v in np.unique(speed) if slots[speed >= v].sum() >= session.workers_left]
        top = max(room) if room else 0.0
        held = speed[t.group_server[session.workers]].min() if session.workers else top
        session.act(action)
        if worker and len(session.workers) > before:
            trail.append((int(t.group_server[session.workers[-1]]), min(top, held)))
    return session, trail


@pytest.mark.parametrize("keep_together", [False, True])
def test_random_legal_walks_stay_on_fast_gpus_while_they_have_room(keep_together):
    """Jobs arriving at the K80 agent: with the floor every worker lands on a V100
    while the V100s have room for the rest; without it, random walks use K80s."""
    topo, perf = _cluster()
    view = _occupy(topo, perf, v100_gpus_left=32)
    rng = np.random.default_rng(0)
    on_k80 = {}
    for floor in (0.0, 0.9):
        builder = ObservationBuilder(
            topo, perf, EnvConfig(keep_together=keep_together, speed_floor=floor, consolidate=True)
        )
        on_k80[floor] = 0
        for i, workers in enumerate([1, 2, 3, 4, 6, 8, 2, 5]):
            job = Job(100 + i, f"p{i}", MODEL, workers, 1, 100.0, view.now, 10.0)
            session, trail = _walk(builder, view, job, home=1, rng=rng)
            speeds = topo.server_gpu_speed[[srv for srv, _ in trail]]
            on_k80[floor] += int((speeds < 0.5).sum())
            if floor:
                for srv, top in trail:
                    assert topo.server_gpu_speed[srv] >= floor * top - 1e-9, (i, srv, top)
            assert len(session.workers) == workers
    assert on_k80[0.9] == 0 and on_k80[0.0] > 0


def test_slow_gpus_are_allowed_once_the_fast_ones_lack_room():
    """3 V100 GPUs free, a 4-worker job: no type above the K80 has room for it, so the
    floor allows every server and the job is placed (mixing types)."""
    topo, perf = _cluster()
    view = _occupy(topo, perf, v100_gpus_left=3)
    builder = ObservationBuilder(topo, perf, EnvConfig(speed_floor=0.9))
    job = Job(7, "big", MODEL, 4, 1, 100.0, view.now, 10.0)
    session = PlacementSession(builder, job, view, 0)
    assert session.fast_servers().all()
    # a 3-worker job fits the V100s: K80 servers are barred and agent 1 must forward
    small = PlacementSession(builder, replace(job, num_workers=3), view, 1)
    fast = small.fast_servers()
    assert fast.tolist() == (topo.server_gpu_speed == 1.0).tolist()
    mask = small.action_mask(1)
    g_max = builder.pad[0]
    assert not mask[:g_max].any() and mask[g_max : g_max + builder.n_agents].tolist() == [1, 0]


def test_the_floor_falls_to_the_slowest_gpu_the_job_holds():
    topo, perf = _cluster()
    view = _occupy(topo, perf, v100_gpus_left=32)
    builder = ObservationBuilder(topo, perf, EnvConfig(speed_floor=0.9))
    job = Job(8, "mixed", MODEL, 4, 1, 100.0, view.now, 10.0)
    session = PlacementSession(builder, job, view, 1)
    assert not session.fast_servers()[topo.server_subcluster == 1].any()
    session.workers.append(int(topo.subcluster_groups(1)[0]))  # a K80 worker already
    session._fast = None
    assert session.fast_servers().all()


def test_option_validated_recorded_and_served_from_the_manifest():
    assert "speed_floor" in DECISION_OPTIONS and EnvConfig().speed_floor == 0.0
    tiny = load_config(str(REPO_ROOT / "configs" / "tiny.yaml"))
    for bad in (1.5, -0.1):
        cfg = replace(tiny, env={"speed_floor": bad})
        with pytest.raises(InputError, match=r"env.speed_floor: must be in \[0, 1\]"):
            env_config(cfg)
    with pytest.raises(ValueError, match="speed_floor"):
        ObservationBuilder(*_cluster(), EnvConfig(speed_floor=2.0))
    builder = ObservationBuilder(*_cluster(), EnvConfig(speed_floor=0.9))
    manifest, weights = untrained_checkpoint(builder, {"hidden": 8, "layers": 1})
    # recorded by the checkpoint from the builder, not written here
    assert manifest["env"]["options"]["speed_floor"] == 0.9
    assert agents_from_weights(manifest, weights).env_options()["speed_floor"] == 0.9
    del manifest["env"]["options"]["speed_floor"]  # a manifest must record every option
    with pytest.raises(InputError, match="option speed_floor missing"):
        check_manifest_env(manifest, "ckpt")


def test_the_floor_binds_only_jobs_with_enough_work():
    topo, perf = _cluster()
    view = _occupy(topo, perf, v100_gpus_left=32)
    builder = ObservationBuilder(topo, perf, EnvConfig(speed_floor=0.9, speed_floor_min_work=1e5))
    short = Job(9, "short", MODEL, 2, 1, 10.0, view.now, 10.0)
    long = replace(short, iterations=1e7)
    assert short.num_workers * short.work_s < 1e5 <= long.num_workers * long.work_s
    assert PlacementSession(builder, short, view, 1).fast_servers() is None
    fast = PlacementSession(builder, long, view, 1).fast_servers()
    assert fast.tolist() == (topo.server_gpu_speed == 1.0).tolist()
    tiny = load_config(str(REPO_ROOT / "configs" / "tiny.yaml"))
    bad = replace(tiny, env={"speed_floor_min_work": -1})
    with pytest.raises(InputError, match="env.speed_floor_min_work: must be >= 0"):
        env_config(bad)
