"""What a chooser that knows the state could take above the teacher
(agents/choice_ceiling.py): resampled futures, the cross-fitted gain, the summary."""

from __future__ import annotations

import numpy as np
import pytest

from agents.choice_ceiling import cross_fitted_gain, resampled, summary
from agents.teachers import MaskedLookahead
from marl_sched.perf import PerformanceModel
from marl_sched.simulator import Simulator
from tests.helpers import random_jobs, tiny_topology


def test_a_resampled_future_keeps_the_state_and_replaces_the_next_arrivals():
    """The fork holds the same pending job, clock and free GPUs; its next ``horizon``
    arrivals are consecutive jobs of the source with the pending arrivals' ids, from
    the first pending arrival's time with the slice's own gaps; the later ones are the
    old jobs, none before the slice's last; the simulator it came from is untouched."""
    topo = tiny_topology()
    perf = PerformanceModel(topo)
    jobs = random_jobs(perf, 60, seed=2, mean_gap=30.0)
    source = random_jobs(perf, 80, seed=9, mean_gap=50.0)
    policy = MaskedLookahead()
    policy.reset(topo, 0)
    sim = Simulator(topo, jobs, perf=perf)
    for _ in range(20):
        sim.apply(policy.place(sim.next_decision(), sim.view()))
    pending = sim.next_decision()
    before = [(j.job_id, j.model, j.submit_time) for j in sim.jobs]
    old = sim.pending_arrivals()
    f = resampled(sim, source, 10, np.random.default_rng(0))
    new = f.pending_arrivals()
    assert [j.job_id for j in new] == [j.job_id for j in old]
    assert f.pending is not None and f.pending.job_id == pending.job_id
    assert f.now == sim.now
    np.testing.assert_array_equal(f.group_free, sim.group_free)
    start = next(i for i, s in enumerate(source) if s.name == new[0].name)
    for k in range(10):
        assert new[k].name == source[start + k].name and new[k].model == source[start + k].model
        gap = source[start + k].submit_time - source[start].submit_time
        assert new[k].submit_time == pytest.approx(old[0].submit_time + gap)
    assert [j.name for j in new[10:]] == [j.name for j in old[10:]]
    assert all(j.submit_time >= new[9].submit_time for j in new[10:])
    assert [(j.job_id, j.model, j.submit_time) for j in sim.jobs] == before
    f.apply(None)  # the fork holds its own pending decision
    sim.apply(policy.place(pending, sim.view()))


def test_the_cross_fitted_gain_chooses_on_one_half_and_scores_on_the_other():
    adv = np.array([
        [0.0, -1.0, 0.5],
        [0.0, -1.0, 0.5],  # first half: column 1 looks best (-1)
        [0.0, 0.4, -2.0],
        [0.0, 0.2, -2.0],  # second half: column 2 looks best (-2)
    ])  # fmt: skip
    # chosen on rows 0-1 (column 1), scored on rows 2-3: 0.3; the other way: column 2
    # scored on rows 0-1: 0.5
    assert cross_fitted_gain(adv) == pytest.approx((0.3 + 0.5) / 2)
    teacher_best = np.array([[0.0, 1.0], [0.0, 2.0], [0.0, 0.5], [0.0, 0.1]])
    assert cross_fitted_gain(teacher_best) == 0.0  # no mean below 0: the teacher


def test_the_summary_reads_each_gain_and_bounds_it():
    steady = [[0.0, -0.5], [0.0, -0.5], [0.0, -0.5], [0.0, -0.5]]  # always better
    noise = [[0.0, -1.0], [0.0, 1.0], [0.0, -1.0], [0.0, 1.0]]  # better on half
    got = summary([{"decisions": [steady, noise]}], boot=500)
    assert got["decisions"] == 2 and got["futures"] == [4]
    # steady: -0.5 both ways; noise: the halves' means are 0, so the teacher's 0
    assert got["cross_fitted_gain"][0] == pytest.approx(-0.25)
    assert got["in_sample_gain"][0] == pytest.approx(-0.25)
    # per future: steady -0.5 on each, noise -1 on half of them
    assert got["per_future_best_gain"][0] == pytest.approx((-0.5 - 0.5) / 2)
    lo, hi = got["cross_fitted_gain"][1:]
    assert lo <= -0.25 <= hi


def test_describe_reports_the_summary_and_the_per_decision_split():
    from agents.choice_ceiling import describe

    steady = [[0.0, -0.5], [0.0, -0.5], [0.0, -0.5], [0.0, -0.5]]
    worse = [[0.0, -1.0], [0.0, -1.0], [0.0, 2.0], [0.0, 2.0]]  # chosen on one half, lost
    same = [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]
    episodes = [
        {"scenario": "a", "decisions": [steady, worse]},
        {"scenario": "b", "decisions": [same]},
    ]
    text = describe({"summary": summary(episodes, boot=200), "episodes": episodes})
    assert text.startswith("3 decisions, 4 futures each")
    assert "with the 2 windows resampled too, [" in text
    assert "beats the teacher's pick in 33%, loses in 33% and is the teacher's in 33%" in text
    assert f"cross-fitted, {cross_fitted_gain(np.array(steady)) / 3 + 2.0 / 2 / 3:+.3f}" in text


def test_pooled_results_are_summarised_over_every_episode():
    from agents.choice_ceiling import pooled

    a = {"episodes": [{"decisions": [[[0.0, -1.0], [0.0, -1.0], [0.0, -1.0], [0.0, -1.0]]]}]}
    b = {"episodes": [{"decisions": [[[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]]}]}
    got = pooled([a, b])
    assert got["summary"]["decisions"] == 2 and len(got["episodes"]) == 2
    assert got["summary"]["cross_fitted_gain"][0] == pytest.approx(-0.5)


def test_the_agreed_choice_acts_only_where_every_future_of_its_half_agrees():
    adv = np.array([
        [0.0, -3.0, 0.2],
        [0.0, 0.5, -0.1],  # first half: column 1 best on mean (-1.25), not on row 1
        [0.0, -1.0, -0.4],
        [0.0, 0.3, -0.6],  # second half: column 2 best on mean (-0.5), better on both
    ])  # fmt: skip
    # plain: column 1 scored on rows 2-3 (-0.35); column 2 on rows 0-1 (+0.05)
    assert cross_fitted_gain(adv) == pytest.approx((-0.35 + 0.05) / 2)
    # agreed: the first half's column 1 is worse on row 1, so the teacher (0); the
    # second half's column 2 is better on both rows, scored on rows 0-1 (+0.05)
    assert cross_fitted_gain(adv, agreed=True) == pytest.approx((0.0 + 0.05) / 2)
    # stakes: the first half's mean -1.25 clears 1 but not 2; the second's -0.5 neither
    assert cross_fitted_gain(adv, stakes=1.0) == pytest.approx((-0.35 + 0.0) / 2)
    assert cross_fitted_gain(adv, stakes=2.0) == 0.0
    got = summary([{"decisions": [adv.tolist()]}], boot=50)
    assert got["agreed_gain"][0] == pytest.approx(0.025)


def test_by_window_groups_each_windows_episodes_and_their_decisions_gains():
    win = [[0.0, -1.0], [0.0, -1.0], [0.0, -0.5], [0.0, -0.5]]  # -0.5 / -1 both ways
    keep = [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]  # never leaves: 0
    episodes = [
        {"scenario": "b", "decisions": [win]},
        {"scenario": "a", "decisions": [keep, win]},
        {"scenario": "a", "decisions": []},  # no decision: no run
        {"scenario": "b", "decisions": [keep]},
    ]
    from agents.choice_ceiling import by_window

    got = by_window(episodes, agreed=True)
    assert [len(runs) for runs in got] == [1, 2]  # a: one episode with decisions; b: two
    from agents.choice_ceiling import _window_interval

    assert _window_interval(episodes[:1]).endswith("no interval")  # one decision alone
    assert _window_interval(episodes).startswith("with the 2 windows resampled too, [")
    np.testing.assert_allclose(got[0][0], [0.0, -0.75])
    np.testing.assert_allclose(got[1][0], [-0.75])
    np.testing.assert_allclose(got[1][1], [0.0])


def test_the_command_line_refuses_bad_input_in_one_line(tmp_path, capsys):
    """Exit 2 and one line naming the option, before any episode runs: sizes out of
    range, an --out that is a folder or a link, a suite file that does not exist."""
    from agents.choice_ceiling import main

    def refused(argv, needle):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err

    out = str(tmp_path / "c.json")
    refused(["--out", out, "--futures", "1"], "--futures")
    refused(["--out", out, "--per-episode", "0"], "--per-episode")
    refused(["--out", str(tmp_path)], "not a file path")
    (tmp_path / "link.json").symlink_to(tmp_path / "elsewhere.json")
    refused(["--out", str(tmp_path / "link.json")], "not a file path")
    refused(["--out", out, "--suite", str(tmp_path / "none.yaml")], "none.yaml")
    assert not (tmp_path / "c.json").exists()
