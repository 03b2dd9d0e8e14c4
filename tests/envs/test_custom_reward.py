"""``env.reward: module:function``: docs/extending.md's reward, written to a module, is
what the env pays; a module that does not import, a name that is not callable and a
function of the wrong signature exit 2 with one line naming the key, before any work."""

from __future__ import annotations

import re
import sys

import pytest

import envs
from envs.rewards import CustomReward
from marl_sched.cli import main
from marl_sched.config import REPO_ROOT
from tests.envs.helpers import TINY, rollout

DOC = REPO_ROOT / "docs" / "extending.md"


@pytest.fixture
def throughput(tmp_path, monkeypatch):
    """The doc's reward block as ``throughput.py`` on ``sys.path``, plus a module of bad
    rewards."""
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
                if b.startswith("# throughput.py")]  # fmt: skip
    (tmp_path / "throughput.py").write_text(block)
    (tmp_path / "bad_rewards.py").write_text(
        "not_callable = 3.0\n\n\ndef three(sim, since, extra):\n    return 0.0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "throughput:completions"
    for name in ("throughput", "bad_rewards"):
        sys.modules.pop(name, None)


@pytest.mark.parametrize("spelling", ["short", "key"])
def test_the_docs_reward_is_what_the_env_pays(throughput, spelling, monkeypatch):
    import throughput as module

    calls, completions = [], module.completions

    def spy(sim, since):
        calls.append(completions(sim, since))
        return calls[-1]

    given = throughput if spelling == "short" else {"function": throughput}
    env = envs.make_env(TINY, env={"window_jobs": None, "reward": given})
    assert env.env_config.reward.function == throughput
    monkeypatch.setattr(module, "completions", spy)  # looked up at every reset
    trail = rollout(env, seed=0, action_seed=1)
    assert isinstance(env.reward, CustomReward)
    paid = [step[3][step[0]] for step in trail[1:]]  # the acting agent's
    assert paid == calls and len(paid) == len(trail) - 1
    # one point per completed job: the episode's return counts them all
    assert sum(paid) == len(env.sim.records) == 40
    assert env.final_info()["team_return"] == 40


@pytest.mark.parametrize(
    ("value", "message"),
    [("no_such_reward_module:f", "no_such_reward_module:f: cannot import no_such_reward_module"),
     ("bad_rewards:not_callable", "bad_rewards:not_callable is not callable"),
     ("bad_rewards:three", "bad_rewards:three(sim, since, extra) cannot be called as "
                           "reward(sim, since) -> float"),
     ("throughput:nope", "throughput:nope: module throughput has no nope")],
)  # fmt: skip
def test_a_bad_reward_exits_2_with_one_line_naming_the_key(throughput, tmp_path, capsys, value,
                                                           message):  # fmt: skip
    out = tmp_path / "o"
    assert main(["simulate", "--config", TINY, f"env.reward={value}", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"env.reward.function: {message}" in err, err
    assert not out.exists()
    with pytest.raises(Exception, match="env.reward.function"):
        envs.make_env(TINY, env={"reward": {"function": value}})


@pytest.mark.parametrize("advantage", ["group"])
def test_a_custom_reward_with_per_job_credit_is_refused_before_ray(throughput, tmp_path,
                                                                   capsys, advantage):  # fmt: skip
    """The group credit's episodes carry the team reward split by job, which a custom
    reward does not give: refused in one line naming ``train.advantage`` before Ray
    starts (it used to fail only when an episode ended inside Ray)."""
    import agents.commands

    def no_ray(*_a, **_k):
        raise AssertionError("Ray started")

    out = tmp_path / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(agents.commands, "start_ray", no_ray)
        rc = main(["train", "--config", str(REPO_ROOT / "configs" / "train_tiny.yaml"),
                   "--out", str(out), "--quiet", f"env.reward={throughput}",
                   f"train.advantage={advantage}"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "train.advantage" in err, err
    assert not out.exists()
