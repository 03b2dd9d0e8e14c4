"""Small builders shared by the tests (tiny hand-made clusters and workloads)."""

from __future__ import annotations

import sys
from contextlib import contextmanager

import numpy as np

from marl_sched.catalogue import MODEL_NAMES
from marl_sched.config import ServerTypeConfig, TopologyConfig, load_config
from marl_sched.jobs import Job, default_num_ps
from marl_sched.perf import PerformanceModel
from marl_sched.policies import make_policy
from marl_sched.runner import build_cluster
from marl_sched.simulator import Simulator
from marl_sched.topology import Topology


def tiny_topology(
    subclusters: int = 2,
    racks: int = 2,
    servers: int = 2,
    sockets: int = 2,
    groups_per_socket: int = 2,
    gpus_per_group: int = 2,
    gpu_types: tuple[str, ...] = ("v100",),
    oversubscription: float = 2.0,
    gpu_sharing: int = 1,
) -> Topology:
    n = subclusters * racks * servers
    counts = [n // len(gpu_types)] * len(gpu_types)
    counts[0] += n - sum(counts)
    types = tuple(
        ServerTypeConfig(
            name=f"t{i}",
            count=c,
            gpu_type=g,
            sockets=sockets,
            groups_per_socket=groups_per_socket,
            gpus_per_group=gpus_per_group,
        )
        for i, (g, c) in enumerate(zip(gpu_types, counts, strict=True))
        if c > 0
    )
    cfg = TopologyConfig(
        subclusters=subclusters,
        racks_per_subcluster=racks,
        servers_per_rack=servers,
        server_types=types,
        rack_oversubscription=oversubscription,
        gpu_sharing=gpu_sharing,
    )
    return Topology(cfg)


def random_jobs(
    perf: PerformanceModel, n: int, seed: int, max_workers: int = 8, mean_gap: float = 200.0
) -> list[Job]:
    """``n`` random jobs with isolated runtimes of minutes to hours."""
    rng = np.random.default_rng(seed)
    jobs, t = [], 0.0
    for i in range(n):
        t += float(rng.exponential(mean_gap))
        w = int(rng.choice([1, 1, 2, 3, 4, 8, max_workers]))
        w = min(w, max_workers)
        model = str(rng.choice(MODEL_NAMES))
        p = default_num_ps(w)
        duration = float(rng.uniform(60, 7200))
        iters = duration / perf.isolated_iteration_time(model, w, p)
        jobs.append(Job(i, f"j{i}", model, w, p, iters, t, duration))
    return jobs


def random_run(
    topo: Topology,
    policy: str,
    n_jobs: int,
    seed: int,
    mean_gap: float,
    policy_seed: int | None = None,
) -> tuple[Simulator, object, list[Job]]:
    """The property tests' setup: ``n_jobs`` random jobs (at most 8 workers, and no
    more than the cluster's GPUs) on ``topo``, a fresh simulator, and ``policy`` reset
    with ``policy_seed`` (default ``seed``)."""
    perf = PerformanceModel(topo)
    jobs = random_jobs(perf, n_jobs, seed, max_workers=min(8, topo.n_gpus), mean_gap=mean_gap)
    pol = make_policy(policy)
    pol.reset(topo, seed if policy_seed is None else policy_seed)
    return Simulator(topo, jobs, perf=perf), pol, jobs


def partly_occupied(config: str, seed: int = 3, decisions: int = 12):
    """``(topology, perf, simulator)`` for ``config``'s cluster after first-fit has
    placed the first ``decisions`` of 40 random jobs (up to 4 workers each)."""
    topo, perf = build_cluster(load_config(config))
    sim = Simulator(topo, random_jobs(perf, 40, seed=seed, max_workers=4), perf=perf)
    ff = make_policy("first-fit")
    ff.reset(topo, 0)
    for _ in range(decisions):
        job = sim.next_decision()
        sim.apply(ff.place(job, sim.view()))
    return topo, perf, sim


def untrained_checkpoint(builder, model: dict) -> tuple[dict, dict]:
    """``(manifest, weights)`` of freshly initialised shared-parameter networks for
    ``builder``'s observations (what ``agents.policy.agents_from_weights`` takes)."""
    from agents.gnn import build_gnn
    from agents.policy import manifest_for
    from envs.observations import feature_dims

    net = build_gnn(feature_dims(builder.observation_space), model)
    weights = {"shared": {f"gnn.{k}": v for k, v in net.state_dict().items()}}
    return manifest_for(builder, model, ["shared"]), weights


def check_served_or_refused(builder, sim, option: str) -> None:
    """A checkpoint trained with the boolean env option ``option`` on (``builder`` has
    it on) is served with it on (a job is placed), and the same weights whose manifest
    claims it off are refused with an :class:`~marl_sched.errors.InputError`, not
    misread."""
    import pytest

    from agents.policy import MarlPolicy, agents_from_weights
    from marl_sched.errors import InputError

    model = {"hidden": 8, "layers": 1}
    assert getattr(builder, option) is True
    manifest, weights = untrained_checkpoint(builder, model)
    policy = MarlPolicy(agents=agents_from_weights(manifest, weights))
    policy.reset(builder.topology)
    job = sim.next_decision()
    assert policy.place(job, sim.view()) is not None
    assert getattr(policy.builder, option) is True  # served as trained
    env = manifest["env"]
    other = dict(manifest, env={**env, "options": {**env["options"], option: False}})
    bad = MarlPolicy(agents=agents_from_weights(other, weights))
    bad.reset(builder.topology)
    with pytest.raises(InputError):
        bad.place(job, sim.view())


#: the iteration-time functions no contender may call on a hypothetical placement
GUARDED_PERF = ("iteration_time", "alone_iteration_time", "isolated_iteration_time")
#: the one caller the environment's own rules need while a policy decides: wait-to-fit
#: compares the job's wait with its isolated run time, a bound that depends on no
#: placement (envs/masks.py, PlacementSession.waits)
ENV_RULE_CALLERS = {"isolated_iteration_time": {"waits"}}


@contextmanager
def performance_model_refused(monkeypatch, who: str):
    """While inside, each :data:`GUARDED_PERF` function of ``PerformanceModel`` raises
    ``AssertionError("<who> called PerformanceModel.<name>")`` unless its caller is one
    of the environment's own rules (:data:`ENV_RULE_CALLERS`)."""

    def refuse(name, real):
        allowed = ENV_RULE_CALLERS.get(name, set())

        def guard(*args, **kwargs):
            if sys._getframe(1).f_code.co_name not in allowed:
                raise AssertionError(f"{who} called PerformanceModel.{name}")
            return real(*args, **kwargs)

        return guard

    with monkeypatch.context() as m:
        for fn in GUARDED_PERF:
            m.setattr(PerformanceModel, fn, refuse(fn, getattr(PerformanceModel, fn)))
        yield
