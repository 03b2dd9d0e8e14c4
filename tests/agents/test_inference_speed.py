"""The policy's fast decision path: :class:`agents.policy.ScopeInput`
and :class:`agents.gnn.RegularClusterBatch` make the same decisions as the padded
forward pass, and a batched forward equals the batch-1 forward."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch

from agents.gnn import (
    ClusterBatch,
    HierarchicalGNN,
    RegularClusterBatch,
    inverse_counts,
    regular_children,
)
from agents.policy import (
    MarlPolicy,
    ScopeInput,
    TrainedAgents,
    greedy_action,
    load_agents,
    manifest_for,
    scope_logits,
)
from envs.config import EnvConfig, env_config
from envs.observations import ObservationBuilder, feature_dims
from envs.session import PlacementSession
from marl_sched.config import REPO_ROOT, load_config
from marl_sched.runner import build_cluster, load_workload, simulate
from marl_sched.simulator import Simulator

SHIPPED = REPO_ROOT / "checkpoints" / "marl-default"


class Recording(MarlPolicy):
    """``marl`` that records its placements and every observation it decided on."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.placements, self.observations = [], []

    def greedy(self, agent, obs):
        self.observations.append((agent, obs))
        return super().greedy(agent, obs)

    def place(self, job, view):
        placement = super().place(job, view)
        self.placements.append((job.job_id, placement))
        return placement


class Plain(Recording):
    """``marl`` deciding through the padded forward pass (``forward_padded``, batch 1)
    as it did before :class:`ScopeInput`."""

    def greedy(self, agent, obs):
        self.observations.append((agent, obs))
        return greedy_action(self.agents.net_for(agent), obs)


def _window(name: str, jobs: int, load: float | None = None):
    cfg = load_config(REPO_ROOT / "configs" / name)
    workload = dataclasses.replace(cfg.workload, max_jobs=jobs)
    if load is not None:
        workload = dataclasses.replace(workload, load=load)
    cfg = dataclasses.replace(cfg, workload=workload)
    topo, perf = build_cluster(cfg)
    return cfg, topo, perf, load_workload(cfg, perf)


def _run(policy_cls, agents, window):
    cfg, topo, perf, workload = window
    policy = policy_cls(agents=agents)
    simulate(cfg, "marl", workload, topo, perf, policy=policy)
    return policy


@pytest.fixture(scope="module")
def shipped():
    return load_agents(SHIPPED)


@pytest.mark.parametrize(("config", "jobs"), [("tiny.yaml", 40), ("default.yaml", 80)])
def test_the_fast_path_places_a_seeded_window_as_the_padded_forward(shipped, config, jobs):
    window = _window(config, jobs)
    fast, plain = _run(Recording, shipped, window), _run(Plain, shipped, window)
    assert fast.placements == plain.placements
    assert sum(p is not None for _, p in fast.placements) >= jobs // 2
    # the window exercised more than one decision per job (multi-task jobs, forwards)
    assert len(fast.observations) > len(fast.placements)
    assert len(fast.observations) == len(plain.observations)


def test_scope_input_gives_the_padded_logits_bit_for_bit(shipped):
    window = _window("default.yaml", 40)
    policy = _run(Recording, shipped, window)
    net = shipped.net_for(0)
    scopes = {}
    for agent, obs in policy.observations[:60]:
        scope = scopes.setdefault(agent, ScopeInput(policy.builder, agent))
        batch = {k: torch.from_numpy(v)[None] for k, v in obs.items()}
        with torch.inference_mode():
            padded, _ = net.forward_padded(batch)
        assert torch.equal(scope_logits(net, scope, obs), padded[0])


def _one_agent_mixed(window):
    """The tiny config as one subcluster: one scope whose servers have 4 or 2 GPU
    groups (irregular: ``ClusterBatch``'s scatter pooling, not the reshape)."""
    cfg = window[0]
    topo_cfg = dataclasses.replace(cfg.topology, subclusters=1, racks_per_subcluster=4)
    cfg = dataclasses.replace(cfg, topology=topo_cfg)
    topo, perf = build_cluster(cfg)
    return cfg, topo, perf, load_workload(cfg, perf)


@pytest.mark.parametrize("shape", ["two agents", "one irregular scope"])
def test_an_untrained_network_on_the_tiny_config_decides_alike(shape):
    """Random weights (no near-ties a training could have smoothed out); two scopes of
    different sizes padded to the larger one, or one scope of mixed servers."""
    window = _window("tiny.yaml", 40)
    if shape == "one irregular scope":
        window = _one_agent_mixed(window)
    cfg, topo, perf, _ = window
    builder = ObservationBuilder(topo, perf, env_config(cfg))
    regular = [ScopeInput(builder, a).children for a in range(builder.n_agents)]
    if shape == "two agents":
        assert builder.scopes[0].groups.size != builder.scopes[1].groups.size
        assert all("group_server" in c for c in regular)
    else:
        assert builder.n_agents == 1 and "group_server" not in regular[0]
    torch.manual_seed(3)
    net = HierarchicalGNN(**_gnn_dims(builder), hidden=16).eval()
    agents = TrainedAgents(manifest_for(builder, {"hidden": 16}, ["shared"]), {"shared": net})
    fast, plain = _run(Recording, agents, window), _run(Plain, agents, window)
    assert fast.placements == plain.placements
    assert len(fast.observations) > 40


def _gnn_dims(builder: ObservationBuilder) -> dict[str, int]:
    d = feature_dims(builder.observation_space)
    return {"group_dim": d["Fg"], "server_dim": d["Fs"], "rack_dim": d["Fr"],
            "job_dim": d["Fj"], "peer_dim": d["Fp"], "hints": d["H"]}  # fmt: skip


def test_a_batched_forward_equals_the_batch_one_forward(shipped):
    """Observations of different agents and jobs stacked into one
    batch give each one's batch-1 logits and value to 1e-6.

    In float64 (the network and observations cast), so that the comparison tests the
    function and not float32 rounding: in float32 a lone observation's poolings sum in
    another order (``ClusterBatch.mean``'s one-parent shortcut, other GEMM blockings),
    and the O(1) logits differ by up to ~4e-6 (1.3e-6 relative) here; float32 is held
    to torch's float32 tolerance and the same arg-max."""
    policy = _run(Recording, shipped, _window("default.yaml", 40))
    obs = [o for _, o in policy.observations[:32]]
    assert len({a for a, _ in policy.observations[:32]}) > 1
    net32 = shipped.net_for(0)
    net64 = copy.deepcopy(net32).double()
    for net, dtype, tol in ((net64, torch.float64, 1e-6), (net32, torch.float32, None)):

        def cast(a, dtype=dtype):
            t = torch.from_numpy(a)
            return t.to(dtype) if t.is_floating_point() else t

        stacked = {k: cast(np.stack([o[k] for o in obs])) for k in obs[0]}
        with torch.inference_mode():
            logits, values = net.forward_padded(stacked)
            for i, o in enumerate(obs):
                one, value = net.forward_padded({k: cast(v)[None] for k, v in o.items()})
                close = {"atol": tol, "rtol": tol} if tol else {}
                torch.testing.assert_close(logits[i], one[0], **close)
                torch.testing.assert_close(values[i], value[0], **close)
                assert int(logits[i].argmax()) == int(one[0].argmax())


def test_regular_pooling_is_the_scatter_pooling():
    torch.manual_seed(0)
    k, parents = 4, 7
    index = torch.arange(parents).repeat_interleave(k)
    x = torch.randn(parents * k, 8)
    fields = {f.name: None for f in dataclasses.fields(ClusterBatch) if f.init}
    fields.update(group_server=index, server_x=torch.zeros(parents, 3))
    plain = ClusterBatch(**fields)
    regular = RegularClusterBatch(**fields, children={"group_server": k})
    regular._inverse_counts["group_server"] = inverse_counts(index, parents)
    assert torch.equal(regular.mean(x, "group_server"), plain.mean(x, "group_server"))
    assert torch.equal(regular.max(x, "group_server"), plain.max(x, "group_server"))


@pytest.mark.parametrize(
    ("index", "parents", "expected"),
    [
        ([0, 0, 1, 1, 2, 2], 3, 2),
        ([0, 1, 2], 3, 1),
        ([0, 0, 1, 1, 1, 2], 3, None),  # uneven
        ([0, 1, 0, 1], 2, None),  # interleaved
        ([0, 0, 1, 1], 3, None),  # a parent without children
        ([], 2, None),
    ],
)
def test_regular_children(index, parents, expected):
    assert regular_children(torch.tensor(index, dtype=torch.long), parents) == expected


class NoShortcut(Recording):
    """``marl`` whose sessions ask every hint even where the job cannot fit (no
    :meth:`PlacementSession.arrival_capacity` shortcut)."""

    def place(self, job, view):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(PlacementSession, "arrival_capacity", _unbounded)
            return super().place(job, view)


def _unbounded(session):
    return np.full(session.builder.n_agents, np.inf)


@pytest.mark.parametrize(
    ("config", "jobs", "load"), [("tiny.yaml", 40, 8.0), ("default.yaml", 80, 4.0)]
)
def test_skipping_the_hints_of_a_scope_too_full_changes_no_observation(shipped, config, jobs, load):
    skipped = []
    real = PlacementSession.arrival_capacity

    def counting(session):
        capacity = real(session)
        skipped.append(int((capacity < session.job.num_workers).sum()))
        return capacity

    window = _window(config, jobs, load)  # loaded: jobs come up on a cluster nearly full
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(PlacementSession, "arrival_capacity", counting)
        fast = _run(Recording, shipped, window)
    plain = _run(NoShortcut, shipped, window)
    assert sum(skipped) > 0  # the window has scopes too full for a job's workers
    assert fast.placements == plain.placements
    assert len(fast.observations) == len(plain.observations)
    for (a, x), (b, y) in zip(fast.observations, plain.observations, strict=True):
        assert a == b and all(np.array_equal(x[k], y[k]) for k in x)


@pytest.mark.parametrize("hints", [("random", "first-fit"), ("first-fit", "locality")])
def test_a_random_hint_is_asked_even_where_the_job_cannot_fit(hints):
    """A scope with 2 free GPUs and a job of more workers: deterministic hints are not
    asked (all None), but the random heuristic's generator advances even when it cannot
    place the job, so skipping it would change its later plans: it is asked."""
    cfg, topo, perf, workload = _window("tiny.yaml", 40)
    builder = ObservationBuilder(topo, perf, EnvConfig(hints=hints))
    job = next(j for j in workload.jobs if j.num_workers >= 3)
    sim = Simulator(topo, workload.jobs, perf=perf)
    free = np.zeros_like(np.asarray(sim.view().group_free))
    free[builder.scopes[0].groups[:2]] = 1  # two free GPUs in scope 0, none elsewhere
    view = dataclasses.replace(sim.view(), group_free=free, free_gpus=2)
    session = PlacementSession(builder, job, view, home=0)
    assert session.arrival_capacity()[0] == 2 < job.num_workers
    policies = [h for h in builder.hint_policies if hasattr(h, "rng")]
    before = [h.rng.bit_generator.state for h in policies]
    asked = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(PlacementSession, "_ask", lambda self, p, v: asked.append(1) or [None] * len(p))
        assert session.plans(0) == [None] * len(hints)
    assert bool(asked) == bool(policies)
    if policies:  # and asked for real, its generator advances
        session._plans = {}
        session.plans(0)
        assert [h.rng.bit_generator.state for h in policies] != before


class _UncachedCheck(PlacementSession):
    """A session that checks every mask it serves against one computed afresh, and
    that the array it returns is the caller's own."""

    checked = 0

    def action_mask(self, agent):
        mask = super().action_mask(agent)
        kept, self._masks = self._masks, {}
        fresh = super().action_mask(agent)
        self._masks = kept
        assert np.array_equal(mask, fresh)
        mask[:] = 0  # the caller may write into it: the next call is unaffected
        assert np.array_equal(super().action_mask(agent), fresh)
        _UncachedCheck.checked += 1
        return fresh


def test_a_cached_action_mask_is_the_mask_computed_afresh(shipped, monkeypatch):
    import agents.policy

    monkeypatch.setattr(agents.policy, "PlacementSession", _UncachedCheck)
    _UncachedCheck.checked = 0
    policy = _run(Recording, shipped, _window("default.yaml", 80, 4.0))
    assert _UncachedCheck.checked > len(policy.placements)


class _DenseHintsCheck(PlacementSession):
    """A session that checks its hint features against their definition computed over
    every group (``envs.cluster_env``: remaining planned tasks of the current kind per
    group over the job's tasks of that kind; does the job so far agree with each plan)."""

    checked = 0

    def hints(self, agent):
        left, agrees = super().hints(agent)
        n = self.builder.topology.n_groups
        placed_w = np.bincount(np.asarray(self.workers, dtype=np.int64), minlength=n)
        placed_p = np.bincount(np.asarray(self.ps, dtype=np.int64), minlength=n)
        total = self.job.num_workers if self.is_worker else max(self.job.num_ps, 1)
        for i, plan in enumerate(self.plans(agent)):
            if plan is None:
                assert not left[i].any() and agrees[i] == 0
                continue
            w = np.bincount(np.asarray(plan.worker_groups, dtype=np.int64), minlength=n)
            q = np.bincount(np.asarray(plan.ps_groups, dtype=np.int64), minlength=n)
            expect = np.maximum((w - placed_w) if self.is_worker else (q - placed_p), 0) / total
            assert np.array_equal(left[i], expect)
            assert agrees[i] == float(np.all(placed_w <= w) and np.all(placed_p <= q))
            _DenseHintsCheck.checked += 1
        return left, agrees


def test_the_hint_features_are_their_definition(shipped, monkeypatch):
    import agents.policy

    monkeypatch.setattr(agents.policy, "PlacementSession", _DenseHintsCheck)
    _DenseHintsCheck.checked = 0
    _run(Recording, shipped, _window("default.yaml", 80, 4.0))
    assert _DenseHintsCheck.checked > 100


#: a checkpoint with the observation exchange (the shipped default has none: Inductor
#: miscompiled it without ``agents.policy.COMPILE_OPTIONS``)
EXCHANGING = REPO_ROOT / "checkpoints" / "marl-exchange"


class Compiled(Recording):
    def __init__(self, **kwargs) -> None:
        super().__init__(compile=True, **kwargs)


@pytest.mark.parametrize("checkpoint", [SHIPPED, EXCHANGING], ids=["default", "exchange"])
def test_the_compiled_networks_give_the_eager_logits_and_placements(checkpoint, recwarn):
    """``MarlPolicy(compile=True)``: the ``torch.compile``'d network's logits equal the
    eager ones to float32 rounding on every observation of a seeded window, the
    compiled module is built once per network (the agents share one), and the window is
    placed alike. The shipped default (no exchange) is the network Inductor miscompiled
    before ``COMPILE_OPTIONS`` (hint scores off by 8 on the first observation): it now
    compiles right, without the fallback."""
    agents = load_agents(checkpoint)
    window = _window("tiny.yaml", 30)
    fast = _run(Compiled, agents, window)
    eager = _run(Recording, agents, window)
    assert not [w for w in recwarn if "torch.compile gave" in str(w.message)]  # no fallback
    assert fast.placements == eager.placements
    assert len(fast._compiled) == 1 and fast.builder.n_agents > 1
    assert fast.network(0) is fast.network(1) is not agents.net_for(0)
    for agent, obs in fast.observations[:20]:
        scope = ScopeInput(fast.builder, agent)
        got = scope_logits(fast.network(agent), scope, obs)
        want = scope_logits(agents.net_for(agent), scope, obs)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        assert not torch.equal(got, torch.full_like(got, got[0]))  # not all masked


def test_a_compiled_network_that_disagrees_with_eager_is_not_used(shipped, monkeypatch):
    """The first decision of each agent checks the compiled logits against the eager
    ones; a compiled module that is off (here: one whose scores are shifted, as
    Inductor's miscompile of the exchange-less default shifted them) is dropped with a
    warning, and the window is placed exactly as eagerly."""

    class Shifted(torch.nn.Module):
        def __init__(self, net) -> None:
            super().__init__()
            self.net = net

        def forward(self, b):
            groups, others, values = self.net(b)
            return groups, others + 0.5 * torch.arange(others.size(-1)), values

    monkeypatch.setattr(torch, "compile", lambda net, **_: Shifted(net))
    window = _window("tiny.yaml", 30)
    with pytest.warns(RuntimeWarning, match=r"torch\.compile gave logits off by .*decides eagerly"):
        fast = _run(Compiled, shipped, window)
    eager = _run(Recording, shipped, window)
    assert fast.placements == eager.placements
    assert fast.network(0) is shipped.net_for(0)  # eager from the first check on
