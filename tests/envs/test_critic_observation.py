"""``critic_x``: the privileged critic's training-only input (``critic_jobs``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from envs import make_env
from envs.observations import CRITIC_FEATURES, CRITIC_JOB_FEATURES, CRITIC_KEY
from marl_sched.errors import InputError
from tests.envs.helpers import TINY

WINDOW = {"window_jobs": 20}


def _env(critic_jobs: int | None):
    config = {"config": TINY, "env": WINDOW}
    if critic_jobs is not None:
        config["critic_jobs"] = critic_jobs
    return make_env(config)


def _episode(env, seed: int = 3):
    """(observation, simulator time, queue length) of every step, first legal action."""
    obs, _ = env.reset(seed=seed)
    out = []
    while True:
        agent, o = next(iter(obs.items()))
        out.append((agent, o, env.sim.now, len(env.sim.queue)))
        obs, _, terminated, _, _ = env.step({agent: int(np.flatnonzero(o["action_mask"])[0])})
        if terminated["__all__"]:
            return out


@pytest.mark.parametrize("off", [None, 0])
def test_the_key_is_absent_when_the_option_is_off(off):
    env = _env(off)
    assert all(CRITIC_KEY not in s.spaces for s in env.observation_spaces.values())
    obs, _ = env.reset(seed=3)
    assert CRITIC_KEY not in next(iter(obs.values()))


def test_the_agents_observation_is_unchanged_and_critic_x_in_its_space():
    plain, privileged = _episode(_env(None)), _episode(_env(4))
    assert len(plain) == len(privileged)
    env = _env(4)
    for (a, p, _, _), (b, q, _, _) in zip(plain, privileged, strict=True):
        assert a == b and set(q) == set(p) | {CRITIC_KEY}
        for key in p:
            np.testing.assert_array_equal(p[key], q[key])
        assert env.observation_spaces[b].contains(q)


def test_critic_x_describes_the_queue_and_the_next_arrivals():
    n = 3
    env = _env(n)
    steps = _episode(env)
    submits = sorted(j.submit_time for j in env.sim.jobs)
    jobs = len(submits)
    s = len(CRITIC_FEATURES)
    left_seen = []
    for _, o, now, queued in steps:
        x = o[CRITIC_KEY]
        assert x.shape == (s + len(CRITIC_JOB_FEATURES) * n,)
        left = sum(t > now for t in submits)
        assert x[0] == pytest.approx(left / jobs)
        assert x[1] == pytest.approx(queued / jobs)
        rows = x[s:].reshape(n, -1)
        np.testing.assert_array_equal(rows[:, 0], [1.0] * min(left, n) + [0.0] * (n - min(left, n)))
        if left:
            wait = min(t for t in submits if t > now) - now
            assert rows[0, 1] == pytest.approx(math.log10(1 + wait) / 7, abs=1e-6)
        left_seen.append(left)
    assert left_seen[0] > left_seen[-1]  # arrivals run out over the episode
    assert np.all(np.diff(left_seen) <= 0)


def test_an_unbounded_critic_jobs_is_refused():
    with pytest.raises(InputError, match="critic_jobs"):
        _env(100_000)
