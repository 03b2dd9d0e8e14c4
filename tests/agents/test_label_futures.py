"""agents/label_futures.py: another future for the same state, and the labels' gains on
it, on the tiny config."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from agents.improve import Round, play_out
from agents.label_futures import label_futures, resample_future, summary
from marl_sched.simulator import ARRIVAL
from tests.agents.test_improve import _setup


def _pending(env):
    return sorted((e[4] for e in env.sim._events if e[3] == ARRIVAL), key=lambda j: j.job_id)


def _mid_episode(env, net, steps: int):
    obs, _ = env.reset(seed=3)
    from agents.improve import _logits

    for _ in range(steps):
        agent, o = next(iter(obs.items()))
        obs, _, term, _, _ = env.step({agent: int(np.argmax(_logits(net, o)))})
        assert not term["__all__"]
    return obs


def test_a_resampled_future_keeps_the_past_and_the_ids_and_changes_what_arrives():
    _, _, _, env, net = _setup()
    obs = _mid_episode(env, net, 5)
    before = _pending(env)
    assert before, "the episode has no pending arrivals after 5 decisions"
    past = {j.job_id: j for j in env.sim.jobs if j.job_id < before[0].job_id}
    twin = copy.deepcopy(env)
    n = resample_future(twin, np.random.default_rng(1))
    after = _pending(twin)
    assert n == len(before) == len(after)
    assert [j.job_id for j in after] == [j.job_id for j in before]
    assert after[0].submit_time == before[0].submit_time >= twin.sim.now
    times = [j.submit_time for j in after]
    assert times == sorted(times)
    assert [j.name for j in after] != [j.name for j in before]
    assert all(twin.sim.jobs[i] == j for i, j in past.items())  # the past is untouched
    assert all(twin.sim.jobs[j.job_id] is j for j in after)
    # the original is untouched, and both play to the end with every job done
    assert [j.name for j in _pending(env)] == [j.name for j in before]
    for e in (env, twin):
        jct = play_out(e, obs, net, Round())
        assert np.isfinite(jct) and len(e.sim.records) == len(e.sim.jobs)


def test_the_same_seed_gives_the_same_future_and_none_is_left_at_the_end():
    _, _, _, env, net = _setup()
    _mid_episode(env, net, 5)
    a, b = copy.deepcopy(env), copy.deepcopy(env)
    resample_future(a, np.random.default_rng(7))
    resample_future(b, np.random.default_rng(7))
    assert [j.name for j in _pending(a)] == [j.name for j in _pending(b)]
    obs, _ = env.reset(seed=3)
    play_out(env, obs, net, Round())
    assert resample_future(env, np.random.default_rng(0)) == 0


def test_each_moved_label_is_played_on_each_future_and_summarised():
    _, _, _, env, net = _setup()
    labels = label_futures(env, net, episodes=1, branches=12, margin=0.0, futures=2, seed=0)
    assert labels, "no label moved on this episode"
    assert all(lab["real"] > 0 and len(lab["futures"]) in (0, 2) for lab in labels)
    s = summary(labels, 0.0)
    full = [lab for lab in labels if lab["futures"]]
    assert full and s["labels"] == len(full) and s["pairs"] == 2 * len(full)
    assert s["labels_at_the_end"] == len(labels) - len(full)
    # another future is another outcome: not every future repeats the real gain
    assert any(x != lab["real"] for lab in full for x in lab["futures"])
    g = np.array([x for lab in full for x in lab["futures"]])
    assert s["share_futures_label_wins"] == pytest.approx((g > 0).mean())
    assert s["future_gain_mean"] == pytest.approx(g.mean())
