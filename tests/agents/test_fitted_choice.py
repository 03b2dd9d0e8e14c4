"""One step of policy improvement on the lookahead teacher (agents/fitted_choice.py):
the proposal features, the branched costs, the fit and the policy."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from agents.fitted_choice import (
    FEATURES,
    MODEL_FORMAT,
    MaskedLookaheadFitted,
    branch_cost,
    choice_gain,
    choose,
    design,
    fit,
    horizon_end,
    load_model,
    option_features,
    ridge,
)
from agents.teachers import MaskedLookahead, fastest, plan_options, predicted_iteration_time
from envs.rules import placement_key
from marl_sched.errors import InputError
from marl_sched.jobs import Placement
from marl_sched.perf import PerformanceModel
from marl_sched.policies import make_policy, policy_entries
from marl_sched.simulator import Simulator
from tests.helpers import random_jobs, tiny_topology

IDX = {name: i for i, name in enumerate(FEATURES)}


def _window(n_jobs=60, seed=5, mean_gap=30.0):
    topo = tiny_topology(subclusters=3, racks=1, servers=2, gpus_per_group=2,
                         gpu_types=("k80", "v100", "p100"))  # fmt: skip
    perf = PerformanceModel(topo)
    return topo, perf, random_jobs(perf, n_jobs, seed, max_workers=4, mean_gap=mean_gap)


def _model_file(tmp_path, weights, **extra):
    path = tmp_path / "model.json"
    data = {"format": MODEL_FORMAT, "features": list(FEATURES), "weights": weights, **extra}
    path.write_text(json.dumps(data))
    return path


def test_option_features_count_what_the_placement_uses_by_hand():
    """On an empty cluster, two workers on one server's two groups: one server, rack
    and subcluster, one wholly free server opened, the rest of that server left free,
    the job's own predicted slowdown, no resident harmed; on two servers of two
    subclusters: two of each, at their GPUs' mean speed."""
    topo, perf, jobs = _window()
    sim = Simulator(topo, jobs, perf=perf)
    job = dataclasses.replace(jobs[0], num_workers=2, num_ps=0)
    view = sim.view()
    g0, g1 = topo.subcluster_groups(0)[:2]
    assert topo.group_server[g0] == topo.group_server[g1]
    together = Placement((int(g0), int(g1)), ())
    f = option_features(job, view, together)
    assert f[IDX["servers"]] == f[IDX["racks"]] == f[IDX["subclusters"]] == 1
    assert f[IDX["servers_opened"]] == 1
    server = topo.group_server[g0]
    left = (topo.server_gpus[server] - 2) / topo.server_gpus[server]
    assert f[IDX["left_free"]] == pytest.approx(left)
    iso = perf.isolated_iteration_time(job.model, 2, 0)
    assert f[IDX["slowdown"]] == pytest.approx(predicted_iteration_time(job, view, together) / iso)
    assert f[IDX["harm"]] == 0.0  # nothing runs yet
    assert f[IDX["subcluster_free"]] == 1.0
    assert f[IDX["gpu_speed"]] == pytest.approx(topo.group_speed[g0])
    log_len = math.log10(max(job.iterations * iso, 1.0))
    assert f[IDX["slowdown_x_length"]] == pytest.approx(f[IDX["slowdown"]] * log_len)
    h0, h1 = topo.subcluster_groups(1)[0], topo.subcluster_groups(2)[0]
    apart = Placement((int(h0), int(h1)), ())
    g = option_features(job, view, apart)
    assert g[IDX["servers"]] == g[IDX["racks"]] == g[IDX["subclusters"]] == 2
    assert g[IDX["servers_opened"]] == 2
    assert g[IDX["gpu_speed"]] == pytest.approx(topo.group_speed[[h0, h1]].mean())
    assert g[IDX["left_free"]] == pytest.approx(
        sum((topo.server_gpus[topo.group_server[h]] - 1) / topo.server_gpus[topo.group_server[h]]
            for h in (h0, h1))
    )  # fmt: skip


def test_branch_cost_is_deterministic_and_leaves_the_simulator_as_it_was():
    """A branch forks: the same placement costs the same twice, and the simulator's
    clock, queue and records are untouched, so every proposal of a decision is scored
    on the same future (common random numbers)."""
    topo, perf, jobs = _window()
    policy = MaskedLookahead()
    policy.reset(topo, 0)
    sim = Simulator(topo, jobs, perf=perf)
    for _ in range(15):
        job = sim.next_decision()
        sim.apply(policy.place(job, sim.view()))
    job = sim.next_decision()
    view = sim.view()
    options = plan_options(policy.planner, policy.open_session(job, view))
    assert len(options) >= 2
    now, done, free = sim.now, len(sim.records), sim.group_free.copy()

    class Identity:  # the predictor's role: the policy sees the true job here
        def visible_job(self, j):
            return j

    until = horizon_end(sim, 10)
    first = next(i for i, j in enumerate(jobs) if j.submit_time > sim.now)
    assert until == jobs[min(len(jobs) - 1, first + 9)].submit_time
    assert horizon_end(sim, 0) == jobs[-1].submit_time
    costs = [branch_cost(sim, p, policy, Identity(), until) for p in options]
    again = [branch_cost(sim, p, policy, Identity(), until) for p in options]
    assert costs == again
    assert sim.now == now and len(sim.records) == done
    np.testing.assert_array_equal(sim.group_free, free)
    assert len(set(costs)) >= 2  # the proposals' futures differ
    sim.apply(options[0])  # the simulator still holds its pending decision


def _toy_episodes():
    """Two scenarios' decisions whose cost differences are exactly 2 x the harm
    difference (in jobs' worth), with the teacher's pick at features 0."""
    rng = np.random.default_rng(0)
    episodes = []
    for name in ("a", "b"):
        samples = []
        for _ in range(40):
            opts = [{"features": [0.0] * len(FEATURES), "cost": 100.0, "teacher": True}]
            for _ in range(3):
                f = rng.normal(size=len(FEATURES))
                opts.append({"features": f.tolist(), "cost": 100.0 + 2.0 * 10.0 * f[1],
                             "teacher": False})  # fmt: skip
            samples.append({"job": 0, "run_s": 1.0, "scale_s": 10.0, "options": opts})
        episodes.append({"scenario": name, "seed": 0, "horizon_jobs": 5, "samples": samples})
    return episodes


def test_design_and_fit_recover_a_known_advantage_and_score_the_choice_by_hand():
    episodes = _toy_episodes()
    x, y, groups, decisions = design(episodes)
    assert x.shape == (2 * 40 * 3, len(FEATURES)) and set(groups) == {0, 1}
    np.testing.assert_allclose(y, 2.0 * x[:, IDX["harm"]])  # cost diff / scale
    w = ridge(x, y, 1e-8, np.ones(len(FEATURES)))
    want = np.zeros(len(FEATURES))
    want[IDX["harm"]] = 2.0
    np.testing.assert_allclose(w, want, atol=1e-6)
    # choice_gain by hand: per decision the lowest-scored row if below 0, else 0
    hand = []
    for d in np.unique(decisions):
        rows = np.flatnonzero(decisions == d)
        s = x[rows] @ w
        hand.append(y[rows[np.argmin(s)]] if s.min() < 0 else 0.0)
    assert choice_gain(w, x, y, decisions) == pytest.approx(np.mean(hand))
    assert choice_gain(np.zeros(len(FEATURES)), x, y, decisions) == 0.0  # the teacher
    model = fit(episodes)
    assert model["weights"][IDX["harm"]] == pytest.approx(2.0, rel=0.05)
    assert model["train_choice_gain"] == pytest.approx(model["oracle_choice_gain"], rel=0.05)
    assert model["oracle_choice_gain"] < 0
    assert model["cv_r2"] > 0.99 and model["train_r2"] > 0.99  # the toy is exactly linear
    best = [y[decisions == d].min() >= 0 for d in np.unique(decisions)]
    assert model["teacher_best_share"] == pytest.approx(np.mean(best))
    assert 0 < model["teacher_best_share"] < 1
    moved = [
        (x[decisions == d] @ np.array(model["weights"])).min() < 0 for d in np.unique(decisions)
    ]
    assert model["train_moved_share"] == pytest.approx(np.mean(moved))


def test_zero_weights_are_the_teacher_and_other_weights_change_choices(tmp_path):
    """With every weight 0 the fitted policy places each job exactly as
    ``masked:lookahead``; with a negative weight on the free share of the subclusters
    a job's workers land in, ``choose`` takes the proposal in the emptiest ones, which
    is not always the teacher's."""
    topo, perf, jobs = _window(n_jobs=50)
    zero = MaskedLookaheadFitted(str(_model_file(tmp_path, [0.0] * len(FEATURES))))
    teacher = MaskedLookahead()
    for p in (zero, teacher):
        p.reset(topo, 0)
    sim = Simulator(topo, jobs, perf=perf)
    compared = 0
    while (job := sim.next_decision()) is not None:
        a, b = zero.place(job, sim.view()), teacher.place(job, sim.view())
        assert (a is None) == (b is None)
        if a is not None:
            assert placement_key(a) == placement_key(b)
            compared += 1
        sim.apply(a)
    assert compared >= 40
    w = np.zeros(len(FEATURES))
    w[IDX["subcluster_free"]] = -1.0
    sim = Simulator(topo, jobs, perf=perf)
    moved = 0
    while (job := sim.next_decision()) is not None:
        view = sim.view()
        options = plan_options(teacher.planner, teacher.open_session(job, view))
        if len(options) >= 2:
            pick = fastest(job, view, options)
            got = choose(job, view, options, pick, w)
            free = [option_features(job, view, p)[IDX["subcluster_free"]] for p in options]
            own = option_features(job, view, got)[IDX["subcluster_free"]]
            assert own == max(free)
            moved += got is not pick
        sim.apply(teacher.place(job, view))
    assert moved >= 1


def test_the_fitted_policy_is_registered_as_learned_and_loads_the_shipped_model():
    assert policy_entries()["masked:lookahead-fitted"].kind == "learned"
    policy = make_policy("masked:lookahead-fitted")
    assert isinstance(policy, MaskedLookaheadFitted)
    assert policy.weights.shape == (len(FEATURES),) and np.any(policy.weights)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"format": "other"}, "format"),
        ({"features": ["slowdown"]}, "features"),
        ({"weights": [1.0]}, "weights"),
        ({"weights": [float("nan")] + [0.0] * (len(FEATURES) - 1)}, "weights"),
    ],
)
def test_a_bad_model_file_is_one_line_naming_the_key(tmp_path, change, key):
    path = tmp_path / "model.json"
    data = {"format": MODEL_FORMAT, "features": list(FEATURES), "weights": [0.0] * len(FEATURES)}
    data.update(change)
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=f"{path}: {key}"):
        load_model(path)
    path.write_text("{not json")
    with pytest.raises(InputError, match="not JSON"):
        load_model(path)


def test_collecting_plays_the_teacher_and_branches_its_decisions(shared_data):
    """On a real training window the collector's own episode is ``masked:lookahead``'s
    (the same average JCT as the benchmark's run of it), and every branched decision
    has the teacher's pick once among two or more proposals, each followed as planned."""
    from agents.fitted_choice import collect_episode
    from marl_sched.benchmark.suite import load_suite
    from marl_sched.policies import build_policy
    from marl_sched.runner import build_cluster, load_workload, simulate

    suite_path, scenario = "benchmarks/default.yaml", "pollux-2-medium"
    got = collect_episode(suite_path, scenario, seed=1, per_episode=4, horizon_jobs=5)
    suite = load_suite(suite_path)
    cfg = suite.config_for(next(s for s in suite.split("train") if s.name == scenario), seed=1)
    topo, perf = build_cluster(cfg)
    metrics, _, _ = simulate(cfg, "masked:lookahead", load_workload(cfg, perf), topo, perf,
                             seed=1, policy=build_policy("masked:lookahead"))  # fmt: skip
    assert got["avg_jct_s"] == pytest.approx(metrics["avg_jct_s"], rel=1e-12)
    assert got["branched"] == len(got["samples"]) >= 1
    for s in got["samples"]:
        assert len(s["options"]) >= 2 and sum(o["teacher"] for o in s["options"]) == 1
        assert all(o["as_planned"] for o in s["options"]) and s["scale_s"] > 0


def test_the_command_line_refuses_bad_input_in_one_line(tmp_path, capsys):
    """Exit 2 and one line naming the option or file, before any work: bad seeds, a
    folder holding an episode collected with another horizon, a link in place of an
    episode, and a data folder with no episodes."""
    from agents.fitted_choice import main

    def refused(argv, needle):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err

    refused(["collect", "--out", str(tmp_path / "a"), "--seeds", "x"], "--seeds")
    held = tmp_path / "b"
    held.mkdir()
    (held / "pollux-2-medium-s0.json").write_text(
        json.dumps({"per_episode": 40, "horizon_jobs": 10})
    )
    refused(["collect", "--out", str(held), "--seeds", "0"], "--horizon 10")
    (held / "pollux-2-medium-s0.json").unlink()
    (held / "pollux-2-medium-s0.json").symlink_to(tmp_path / "elsewhere.json")
    refused(["collect", "--out", str(held), "--seeds", "0"], "not an episode file")
    empty = tmp_path / "c"
    empty.mkdir()
    refused(["fit", "--data", str(empty), "--out", str(tmp_path / "m.json")], "no episode")
    assert not (tmp_path / "m.json").exists()
