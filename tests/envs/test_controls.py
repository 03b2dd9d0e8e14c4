"""The "heuristic inside the agents' masks" controls (envs/controls.py): registered for
every command, every action they take is legal under the agents' masks, they respect
capacity, and they send a job where their heuristic would."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import envs.controls
from envs.controls import CONTROLS
from envs.session import PlacementSession
from marl_sched.jobs import Job, default_num_ps
from marl_sched.perf import PerformanceModel
from marl_sched.policies import control_names, get_policy_class, make_policy
from marl_sched.simulator import Simulator
from tests.helpers import random_jobs, tiny_topology
from tests.marl_sched.test_simulator import _check_state


class _CheckedSession(PlacementSession):
    """A session that checks each action against the mask before acting (the test's
    own check of the masks, independent of the control's choice)."""

    actions = 0

    def act(self, action: int) -> None:
        mask = self.action_mask(self.agent)
        assert 0 <= action < len(mask) and mask[action] == 1, (self.job.name, action)
        _CheckedSession.actions += 1
        super().act(action)


def test_controls_are_registered_lazily_as_controls() -> None:
    assert sorted(control_names()) == sorted(CONTROLS)
    assert {"masked:interference-aware", "masked:speed-aware"} <= set(control_names())
    for name, cls in CONTROLS.items():
        assert get_policy_class(name) is cls


# the monkeypatch is the same for every example (a fixed class swap)
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    subclusters=st.integers(2, 3),
    servers=st.integers(1, 2),
    gpus=st.integers(1, 4),
    types=st.sampled_from([("v100",), ("k80", "v100"), ("p100", "t4", "k80")]),
    seed=st.integers(0, 10_000),
    name=st.sampled_from([*sorted(CONTROLS), "masked:lookahead"]),
)
def test_controls_act_inside_the_masks_and_respect_capacity(
    monkeypatch, subclusters, servers, gpus, types, seed, name
) -> None:
    monkeypatch.setattr(envs.controls, "PlacementSession", _CheckedSession)
    topo = tiny_topology(subclusters=subclusters, racks=1, servers=servers, gpus_per_group=gpus,
                         gpu_types=types)  # fmt: skip
    perf = PerformanceModel(topo)
    jobs = random_jobs(perf, 20, seed, max_workers=min(8, topo.n_gpus), mean_gap=60.0)
    policy = make_policy(name)
    policy.reset(topo, seed)
    sim = Simulator(topo, jobs, perf=perf)
    before = _CheckedSession.actions
    while (job := sim.next_decision()) is not None:
        sim.apply(policy.place(job, sim.view()))
        _check_state(sim)
    assert _CheckedSession.actions > before
    room = {m: int(topo.group_capacity[perf.group_fits(m)].sum()) for m in {j.model for j in jobs}}
    fit = sorted(j.job_id for j in jobs if j.num_workers <= room[j.model])
    assert sorted(sim.records) == fit
    np.testing.assert_array_equal(sim.group_free, topo.group_capacity)


def test_masked_speed_aware_sends_the_job_where_speed_aware_puts_it() -> None:
    # subcluster 0 = K80 servers (the job's home), subcluster 1 = V100 servers
    topo = tiny_topology(subclusters=2, racks=1, servers=1, gpu_types=("k80", "v100"))
    perf = PerformanceModel(topo)
    w = 2
    iso = perf.isolated_iteration_time("resnet-50", w, default_num_ps(w))
    job = Job(0, "a", "resnet-50", w, default_num_ps(w), 600.0 / iso, 0.0, 600.0)
    view = Simulator(topo, [job], perf=perf).view()
    plan = make_policy("speed-aware")
    plan.reset(topo, 0)
    control = make_policy("masked:speed-aware")
    control.reset(topo, 0)
    want = plan.place(job, view)
    got = control.place(job, view)
    v100 = topo.group_speed == topo.group_speed.max()
    assert all(v100[g] for g in want.worker_groups)
    assert got == want


def test_the_controls_keep_the_pre_registered_rules_whatever_the_default_recipe_says(
    monkeypatch,
) -> None:
    """The controls act under the rules the benchmark was registered with (speed floor
    0.9 for jobs of >= 1e5 GPU-seconds, the PS rule, keep-together, wait-to-fit), pinned
    in ``envs.controls.CONTROL_RULES``, not read from ``configs/default.yaml``: a default
    recipe that drops a rule must not move the no-learning target."""
    for name in CONTROLS:
        opts = make_policy(name).options
        assert opts["speed_floor"] == 0.9 and opts["speed_floor_min_work"] == 1e5, name
        assert opts["ps_rule"] is True and opts["keep_together"] is True, name
        assert opts["wait_to_fit"] == 1.0 and opts["hints"] == [make_policy(name).heuristic]
    # the pin is the table: rules without the PS rule and the floor give neither
    rules = {**envs.controls.CONTROL_RULES, "ps_rule": False, "speed_floor": 0.0}
    monkeypatch.setattr(envs.controls, "CONTROL_RULES", rules)
    opts = make_policy("masked:first-fit").options
    assert opts["ps_rule"] is False and opts["speed_floor"] == 0.0


def test_the_mlfs_rl_probe_follows_mlfs_rl_inside_the_default_rules_masks():
    """``masked:mlfs-rl`` (a probe, not a control): the shipped agents' own rules
    (``configs/default.yaml``: no speed floor, no PS rule), no hint (MLF-RL is none),
    and its placement is MLF-RL's wherever the masks let the job go where MLF-RL puts
    it: every job whose MLF-RL placement lies in one subcluster (the forward rule
    moves a job whole) is placed exactly so."""
    from envs.config import env_config
    from marl_sched.config import REPO_ROOT, load_config

    probe = make_policy("masked:mlfs-rl")
    assert probe.name not in CONTROLS  # not among the no-learning controls
    default = env_config(load_config(REPO_ROOT / "configs" / "default.yaml")).decision_options()
    assert probe.options == {**default, "hints": [], "global_hints": []}
    assert type(probe.planner).__name__ == "MlfsRlPolicy"
    topo = tiny_topology(subclusters=3, racks=1, servers=2, gpus_per_group=2,
                         gpu_types=("k80", "v100", "p100"))  # fmt: skip
    perf = PerformanceModel(topo)
    jobs = random_jobs(perf, 30, 3, max_workers=4, mean_gap=60.0)
    mlfs = make_policy("mlfs-rl")
    for p in (mlfs, probe):
        p.reset(topo, 0)
    sim = Simulator(topo, jobs, perf=perf)
    compared = 0
    while (job := sim.next_decision()) is not None:
        view = sim.view()
        want, got = mlfs.place(job, view), probe.place(job, view)
        if want is not None:
            groups = [*want.worker_groups, *want.ps_groups]
            if len({int(topo.group_subcluster[g]) for g in groups}) == 1:
                assert got == want, job
                compared += 1
        sim.apply(got)
        _check_state(sim)
    assert compared >= 20
