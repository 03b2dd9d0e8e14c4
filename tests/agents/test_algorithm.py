"""The RLlib algorithm config (agents/algorithm.py): the algorithms train.algorithm
accepts, refuses or names as retired, checked against RLlib's own registry and Learner
requirements;
train.rllib passed through and validated by RLlib, with one-line errors. Imports
RLlib; starts no Ray."""

from __future__ import annotations

import pytest

from agents.config import (
    ALGORITHMS,
    REFUSED_ALGORITHMS,
    RETIRED_ALGORITHMS,
    model_config,
    train_config,
)
from marl_sched.cli import main
from marl_sched.config import REPO_ROOT, load_config

TINY = str(REPO_ROOT / "configs" / "train_tiny.yaml")


def _built(overrides):
    from agents.algorithm import algo_config, env_setup

    cfg = load_config(TINY, overrides)
    mc, tc = model_config(cfg), train_config(cfg)
    _, _, builder = env_setup(cfg, mc, tc, tc.seed)
    return algo_config(cfg, mc, tc, tc.seed, builder.agent_ids)


def test_the_algorithm_tables_match_rllibs_registry_and_learner_apis():
    """Every algorithm of RLlib's registry is accepted, retired or refused with a reason; an
    accepted one's Learner (ours, a subclass of RLlib's) needs only APIs our RLModule
    implements; a refused online one needs an API it lacks."""
    from ray.rllib.algorithms.registry import ALGORITHMS as REGISTRY

    from agents.learner import LEARNERS
    from agents.rl_module import HierarchicalGNNModule

    tables = (set(ALGORITHMS), set(REFUSED_ALGORITHMS), set(RETIRED_ALGORITHMS))
    assert set(REGISTRY) == set.union(*tables)
    assert sum(map(len, tables)) == len(REGISTRY)  # each in one table
    for name in ALGORITHMS:
        default = REGISTRY[name]()[1].get_default_learner_class()
        assert issubclass(LEARNERS[name], default), name
        for api in LEARNERS[name].rl_module_required_apis():
            assert issubclass(HierarchicalGNNModule, api), (name, api)
    for name in ("DQN", "SAC"):
        apis = REGISTRY[name]()[1].get_default_learner_class().rl_module_required_apis()
        assert not all(issubclass(HierarchicalGNNModule, api) for api in apis), name


def test_train_rllib_settings_reach_the_built_config():
    base = _built([])
    config = _built(
        ["train.rllib.training.kl_target=0.05",
         "train.rllib.training.lr=[[0, 0.001], [400, 0.0001]]",
         "train.rllib.env_runners.rollout_fragment_length=25"]
    )  # fmt: skip
    assert base.kl_target != 0.05 and config.kl_target == 0.05
    assert config.lr == [[0, 0.001], [400, 0.0001]]  # a schedule, over train.lr
    assert config.rollout_fragment_length == 25 != base.rollout_fragment_length
    assert config.learner_class.__name__ == base.learner_class.__name__ == "ClipFractionPPOLearner"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [(["train.rllib.training.no_such_key=1"],
      "train.rllib.training.no_such_key: not a setting of PPOConfig.training()"),
     (["train.rllib.training.minibatch_size=5000"],
      "train.rllib.training.minibatch_size: `minibatch_size` (5000) must be <="),
     (["train.rllib.env_runners.rollout_fragment_length=-3"],
      "train.rllib.env_runners.rollout_fragment_length: `rollout_fragment_length` must be"),
     (["train.rllib.env_runners.num_env_runners=2"],
      "train.rllib.env_runners.num_env_runners: set train.num_env_runners instead"),
     (["train.algorithm=APPO"], "train.algorithm: 'APPO' belongs to a study that no longer "
      "ships; its code is kept at git tag studies-archive"),
     (["train.algorithm=IMPALA"], "train.algorithm: 'IMPALA' belongs to a study that no "
      "longer ships; its code is kept at git tag studies-archive"),
     (["train.algorithm=DQN"], "train.algorithm: DQN cannot train this agent: its Learner "
      "needs Q-networks (RLlib's QNetAPI)"),
     (["train.algorithm=BC"], "train.algorithm: BC cannot train this agent: offline"),
     (["train.algorithm=A2C"], "train.algorithm: must be one of PPO, got 'A2C'")],
)  # fmt: skip
def test_a_bad_algorithm_setting_exits_2_naming_the_key(tmp_path, capsys, overrides, message):
    out = tmp_path / "o"
    assert main(["train", "--config", TINY, "--out", str(out), *overrides]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_an_iteration_without_a_learner_update_is_an_error():
    from agents.config import TrainConfig
    from agents.training import check_updated
    from marl_sched.errors import InputError

    tc = TrainConfig()
    figures = {"num_env_steps_trained": 200, "num_env_steps_trained_lifetime": 400}
    trained = {"learners": {"__all_modules__": figures}}
    assert check_updated(trained, 2, tc, 200.0) == 400.0
    for result, before in (({}, None), ({"learners": {}}, 100.0), (trained, 400.0)):
        with pytest.raises(InputError, match="iteration 3: PPO made no learner update"):
            check_updated(result, 3, tc, before)


def test_a_bad_passthrough_in_one_grid_trial_exits_2_before_ray(tmp_path, capsys):
    out = tmp_path / "exp"
    rc = main(["train", "--config", TINY, "--out", str(out), "--grid",
               "train.rllib.training.minibatch_size=100,5000"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "[trial minibatch_size=5000_seed0]: train.rllib.training.minibatch_size:" in err
    assert not out.exists()


def test_each_agents_entropy_and_kl_of_a_shared_module():
    """The agent-index column follows RLlib's per-episode keys, one item per step;
    the per-agent figures are each agent's own means over its unmasked steps."""
    import numpy as np
    import torch
    from ray.rllib.connectors.learner import AddObservationsFromEpisodesToBatch
    from ray.rllib.core.columns import Columns
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
    from ray.rllib.models.torch.torch_distributions import TorchCategorical

    from agents.learner import AGENT_INDEX, AddAgentIndex, per_agent_figures
    from agents.records import module_scalars

    episode = MultiAgentEpisode(
        observations=[{"sc0": 0, "sc1": 0}, {"sc0": 1}, {"sc0": 2, "sc1": 1}],
        actions=[{"sc0": 0, "sc1": 1}, {"sc0": 1}],
        rewards=[{"sc0": 0.0, "sc1": 0.0}, {"sc0": 0.0}],
        agent_module_ids={"sc0": "shared", "sc1": "shared"},
        len_lookback_buffer=0,
    )
    batch = AddAgentIndex(agent_ids=("sc0", "sc1"))(rl_module=None, batch={}, episodes=[episode])
    AddObservationsFromEpisodesToBatch(as_learner_connector=True)(
        rl_module=None, batch=batch, episodes=[episode]
    )

    def rows(column):
        return {k: np.concatenate([np.atleast_1d(x) for x in v]).tolist()
                for k, v in batch[column].items()}  # fmt: skip

    index, obs = rows(AGENT_INDEX), rows(Columns.OBS)
    assert list(index) == list(obs)  # the same (episode, agent, module) keys, same order
    assert {k[1]: v for k, v in index.items()} == {"sc0": [0, 0], "sc1": [1]}
    assert {k: len(v) for k, v in index.items()} == {k: len(v) for k, v in obs.items()}

    index = torch.tensor([0, 0, 1, 1, 1])
    old = torch.tensor([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [5.0, -5.0]])
    new = torch.tensor([[0.0, 0.0], [0.0, 0.0], [2.0, 0.0], [2.0, 0.0], [0.0, 0.0]])
    mask = torch.tensor([True, True, True, True, False])  # the last step: padding
    out = per_agent_figures(
        TorchCategorical,
        {AGENT_INDEX: index, Columns.ACTION_DIST_INPUTS: old, Columns.LOSS_MASK: mask},
        {Columns.ACTION_DIST_INPUTS: new},
    )
    p = torch.softmax(torch.tensor([2.0, 0.0]), 0)
    entropy1 = float(-(p * p.log()).sum())
    kl1 = float((0.5 * (np.log(0.5) - p.log())).sum())
    assert float(out[0][0]) == pytest.approx(np.log(2)) and float(out[0][1]) == pytest.approx(0)
    assert float(out[1][0]) == pytest.approx(entropy1) and float(out[1][1]) == pytest.approx(kl1)
    one = {AGENT_INDEX: torch.tensor([1, 1]), Columns.ACTION_DIST_INPUTS: old[:2]}
    assert per_agent_figures(TorchCategorical, one, {Columns.ACTION_DIST_INPUTS: new[:2]}) == {}
    learners = {"shared": {"entropy": 0.6, "agent/sc1/entropy": entropy1}}
    assert module_scalars(learners) == {"losses/agent/sc1/entropy": entropy1}
