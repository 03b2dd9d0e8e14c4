"""Group-baseline advantages (agents.group_baseline) against a hand computation."""

from __future__ import annotations

import numpy as np
import pytest

from agents.group_baseline import group_advantages, returns_to_go


def test_returns_to_go_discounts_each_later_reward():
    np.testing.assert_allclose(returns_to_go(np.array([1.0, 2.0, 4.0]), 0.5), [3.0, 4.0, 4.0])


def test_three_rollouts_against_a_hand_computation():
    # one input, three rollouts; gamma 0.5. (times in s, team reward per decision)
    a = (np.array([0.0, 10.0, 20.0]), np.array([-1.0, -2.0, -4.0]))
    b = (np.array([0.0, 5.0, 10.0, 30.0]), np.array([-2.0, 0.0, -4.0, -8.0]))
    c = (np.array([0.0, 25.0]), np.array([-3.0, -6.0]))
    # returns-to-go:  a: [-1-1-1, -2-2, -4] = [-3, -4, -4]
    #                 b: [-2+0-1-1, 0-2-2, -4-4, -8] = [-4, -4, -8, -8]
    #                 c: [-3-3, -6] = [-6, -6]
    # baseline at time t = mean over the OTHER rollouts of their return-to-go at their
    # first decision at or after t (0 when they have none left)
    # a at t=0:  b(0)=-4, c(0)=-6     -> -5;   A = -3 - -5 = 2
    # a at t=10: b(10)=-8, c(25)=-6   -> -7;   A = -4 - -7 = 3
    # a at t=20: b(30)=-8, c(25)=-6   -> -7;   A = -4 - -7 = 3
    # b at t=0:  a(0)=-3, c(0)=-6     -> -4.5; A = -4 + 4.5 = 0.5
    # b at t=5:  a(10)=-4, c(25)=-6   -> -5;   A = -4 + 5 = 1
    # b at t=10: a(10)=-4, c(25)=-6   -> -5;   A = -8 + 5 = -3
    # b at t=30: a(none)=0, c(none)=0 -> 0;    A = -8
    # c at t=0:  a(0)=-3, b(0)=-4     -> -3.5; A = -6 + 3.5 = -2.5
    # c at t=25: a(none)=0, b(30)=-8  -> -4;   A = -6 + 4 = -2
    adv = group_advantages([a, b, c], gamma=0.5)
    np.testing.assert_allclose(adv[0], [2.0, 3.0, 3.0])
    np.testing.assert_allclose(adv[1], [0.5, 1.0, -3.0, -8.0])
    np.testing.assert_allclose(adv[2], [-2.5, -2.0])


def test_identical_rollouts_have_zero_advantage():
    r = (np.array([0.0, 1.0, 1.0, 7.0]), np.array([-1.0, -0.5, -3.0, -0.25]))
    for adv in group_advantages([r, r, r], gamma=0.9):
        np.testing.assert_allclose(adv, 0.0, atol=1e-12)


def test_a_group_of_one_is_refused():
    with pytest.raises(ValueError, match="at least 2"):
        group_advantages([(np.zeros(2), np.zeros(2))], gamma=0.9)


def test_group_env_replays_each_window_and_tags_every_step():
    from agents.config import model_config, train_config
    from agents.training import env_setup
    from envs.group_rollouts import ENV_T, EPISODE_KEY, SIM_TIME, GroupRolloutEnv
    from marl_sched.config import REPO_ROOT, load_config

    cfg = load_config(REPO_ROOT / "configs" / "train_tiny.yaml")
    _, env_config, _ = env_setup(cfg, model_config(cfg), train_config(cfg), seed=0)
    env = GroupRolloutEnv({**env_config, "group_size": 2})
    keys, firsts = [], []
    for episode in range(6):
        obs, infos = env.reset(seed=40 if episode == 0 else None)
        keys.append(env.episode_key)
        firsts.append(next(iter(obs.values()))["job_x"])
        agent = next(iter(obs))
        assert infos[agent][ENV_T] == 0 and infos[agent][EPISODE_KEY] == env.episode_key
        last_t = infos[agent][SIM_TIME]
        for t in range(1, 15):
            o = obs[agent]
            obs, _, terminated, _, infos = env.step(
                {agent: int(np.flatnonzero(o["action_mask"])[0])}
            )
            if terminated["__all__"]:
                break
            agent = next(iter(obs))
            assert infos[agent][ENV_T] == t and infos[agent][SIM_TIME] >= last_t
            last_t = infos[agent][SIM_TIME]
    # windows come in pairs: the same window twice, then a fresh draw
    assert keys[0] == keys[1] and keys[2] == keys[3] and keys[4] == keys[5]
    assert len({keys[0], keys[2], keys[4]}) > 1
    np.testing.assert_array_equal(firsts[0], firsts[1])


def test_ppo_with_group_advantages_trains_inside_rllib(ray_session, monkeypatch):
    """``train.advantage: group``: the learner pipeline holds the group connector in
    GAE's place, and an iteration's grouped decisions get non-zero advantages."""
    import dataclasses

    from ray.rllib.connectors.learner.general_advantage_estimation import (
        GeneralAdvantageEstimation,
    )
    from ray.rllib.evaluation.postprocessing import Postprocessing

    import agents.group_baseline as gb
    from agents.config import model_config, train_config
    from agents.training import algo_config, env_setup
    from marl_sched.config import REPO_ROOT, load_config

    cfg = load_config(REPO_ROOT / "configs" / "train_tiny.yaml")
    mc, tc = model_config(cfg), train_config(cfg)
    tc = dataclasses.replace(tc, advantage="group", group_size=3, train_batch_size=300)
    _, _, builder = env_setup(cfg, mc, tc, 0)
    algo = algo_config(cfg, mc, tc, 0, builder.agent_ids).build_algo()
    try:
        kinds = [type(c) for c in algo.learner_group._learner._learner_connector.connectors]
        assert gb.GroupBaselineAdvantages in kinds and GeneralAdvantageEstimation not in kinds
        seen = []
        inner = gb.GroupBaselineAdvantages.__call__

        def spy(self, **kwargs):
            out = inner(self, **kwargs)
            seen.append(
                (
                    len(gb.episode_group_advantages(kwargs["episodes"], self.gamma)),
                    float(out["shared"][Postprocessing.ADVANTAGES].abs().sum()),
                )
            )
            return out

        monkeypatch.setattr(gb.GroupBaselineAdvantages, "__call__", spy)
        result = algo.train()
    finally:
        algo.stop()
    grouped, total = seen[0]
    assert grouped > 0 and total > 0
    assert np.isfinite(result["learners"]["shared"]["policy_loss"])
