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


def test_window_weights_make_each_windows_advantages_relative():
    """``advantage_scale: window``: a group's weight is 1 / its rollouts' mean
    |team return|; ``batch`` leaves every group at 1; anything else is refused."""
    from agents.group_baseline import window_weights

    totals = [[-2.0, -4.0], [-0.1, -0.3, -0.2]]
    assert window_weights(totals, "batch") == [1.0, 1.0]
    assert window_weights(totals, "window") == pytest.approx([1 / 3.0, 1 / 0.2])
    with pytest.raises(ValueError, match="advantage scale"):
        window_weights(totals, "episode")


def test_top_window_share_against_a_hand_computation():
    """The heaviest group's share of the batch's squared advantages, before and after
    the weighing: a window with 10x the JCT scale carries 100/101 of the raw signal
    and, weighed by 1/10, as much as the other."""
    from agents.group_baseline import top_window_share

    heavy = [np.array([10.0, -10.0]), np.array([0.0])]  # energy 200
    light = [np.array([1.0]), np.array([-1.0])]  # energy 2
    assert top_window_share([heavy, light], [1.0, 1.0]) == pytest.approx(200 / 202)
    assert top_window_share([heavy, light], [0.1, 1.0]) == pytest.approx(0.5)
    assert top_window_share([[np.zeros(3)]], [1.0]) == 0.0


def test_group_env_replays_each_window_and_tags_every_step():
    from agents.algorithm import env_setup
    from agents.config import model_config, train_config
    from envs.group_rollouts import (
        ENV_T,
        EPISODE_KEY,
        JOB_ID,
        JOB_SHARES,
        SIM_TIME,
        GroupRolloutEnv,
    )
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
        assert infos[agent][JOB_ID] == env.session.job.job_id
        last_t = infos[agent][SIM_TIME]
        for t in range(1, 400 if episode == 0 else 15):
            o = obs[agent]
            obs, _, terminated, _, infos = env.step(
                {agent: int(np.flatnonzero(o["action_mask"])[0])}
            )
            if terminated["__all__"]:
                final = next(iter(infos.values()))
                assert final[JOB_ID] == -1
                assert sum(s for _, s in final[JOB_SHARES]) == pytest.approx(
                    final["team_return"], rel=1e-9
                )
                break
            agent = next(iter(obs))
            assert infos[agent][ENV_T] == t and infos[agent][SIM_TIME] >= last_t
            assert infos[agent][JOB_ID] == env.session.job.job_id
            assert JOB_SHARES not in infos[agent]
            last_t = infos[agent][SIM_TIME]
        if episode == 0:
            assert terminated["__all__"], "the first episode is played to its end"
    # windows come in pairs: the same window twice, then a fresh draw
    assert keys[0] == keys[1] and keys[2] == keys[3] and keys[4] == keys[5]
    assert len({keys[0], keys[2], keys[4]}) > 1
    np.testing.assert_array_equal(firsts[0], firsts[1])


@pytest.mark.parametrize("scale", ["batch", "window"])
def test_ppo_with_group_advantages_trains_inside_rllib(ray_session, monkeypatch, scale):
    """``train.advantage: group``: the learner pipeline holds its connector in GAE's
    place, and an iteration's grouped decisions get non-zero advantages (the windows
    weighed alike or not, ``train.advantage_scale``)."""
    import dataclasses

    from ray.rllib.connectors.learner.general_advantage_estimation import (
        GeneralAdvantageEstimation,
    )
    from ray.rllib.evaluation.postprocessing import Postprocessing

    import agents.group_baseline as gb
    from agents.algorithm import algo_config, env_setup
    from agents.config import model_config, train_config
    from marl_sched.config import REPO_ROOT, load_config

    cfg = load_config(REPO_ROOT / "configs" / "train_tiny.yaml")
    mc, tc = model_config(cfg), train_config(cfg)
    tc = dataclasses.replace(
        tc, advantage="group", group_size=3, train_batch_size=300, advantage_scale=scale
    )
    connector = gb.GroupBaselineAdvantages
    _, _, builder = env_setup(cfg, mc, tc, 0)
    algo = algo_config(cfg, mc, tc, 0, builder.agent_ids).build_algo()
    try:
        kinds = [type(c) for c in algo.learner_group._learner._learner_connector.connectors]
        assert connector in kinds and GeneralAdvantageEstimation not in kinds
        seen = []
        inner = connector.__call__

        def spy(self, **kwargs):
            out = inner(self, **kwargs)
            assert self.scale == scale
            seen.append(
                (
                    len(self.grouped(kwargs["episodes"])),
                    float(out["shared"][Postprocessing.ADVANTAGES].abs().sum()),
                )
            )
            return out

        monkeypatch.setattr(connector, "__call__", spy)
        result = algo.train()
    finally:
        algo.stop()
    grouped, total = seen[0]
    assert grouped > 0 and total > 0
    stats = result["learners"]["shared"]
    assert np.isfinite(stats["policy_loss"])
    raw, weighed = stats[gb.TOP_WINDOW_SHARE_RAW], stats[gb.TOP_WINDOW_SHARE]
    assert 0 < raw <= 1 and 0 < weighed <= 1
    if scale == "batch":
        assert weighed == pytest.approx(raw)


def test_an_iteration_samples_several_windows_group_size_times_each(ray_session):
    """With whole-episode batches RLlib's env runner resets with its seed before every
    episode; the trainer's per-iteration reseed seeds the envs once instead, so an
    iteration's batch holds several windows, ``group_size`` rollouts of each (the last
    one possibly cut short), and the same iteration seed gives the same windows
    (without the reseed every episode of an iteration was one window)."""
    import dataclasses

    import envs.group_rollouts as gr
    from agents.algorithm import algo_config, env_setup
    from agents.config import RLlibConfig, model_config, train_config
    from agents.training import _reseed_env_runner
    from marl_sched.config import REPO_ROOT, load_config

    cfg = load_config(REPO_ROOT / "configs" / "train_tiny.yaml")
    mc, tc = model_config(cfg), train_config(cfg)
    rllib = RLlibConfig(env_runners={"batch_mode": "complete_episodes"})
    tc = dataclasses.replace(
        tc, advantage="group", group_size=2, train_batch_size=400, rllib=rllib, episode_jobs=8
    )
    _, _, builder = env_setup(cfg, mc, tc, 0)
    algo = algo_config(cfg, mc, tc, 0, builder.agent_ids).build_algo()
    keys: list = []
    reset = gr.GroupRolloutEnv.reset

    def spy(self, **kwargs):
        out = reset(self, **kwargs)
        keys[-1].append(self.episode_key)
        return out

    gr.GroupRolloutEnv.reset = spy
    try:
        for it in (1, 2, 1):
            keys.append([])
            algo.env_runner_group.foreach_env_runner(
                lambda er, it=it: _reseed_env_runner(er, 0, it), local_env_runner=True
            )
            algo.train()
    finally:
        gr.GroupRolloutEnv.reset = reset
        algo.stop()
    first, second, again = keys
    # the sampler may have reset once more after its batch was full: that episode is unplayed
    k = tc.group_size
    for windows in (first, second):
        chunks = [windows[i : i + k] for i in range(0, len(windows), k)]
        assert all(len(set(c)) == 1 for c in chunks), windows  # k rollouts of a window
        assert len(set(windows)) >= 3, windows  # several windows in one iteration
    assert again[: len(first)] == first[: len(again)]
    assert first != second
