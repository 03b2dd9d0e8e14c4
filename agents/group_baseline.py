"""Group-baseline advantages (``train.advantage: group``): an input-dependent baseline.

In ``ClusterPlacement-v1`` the job arrivals, not the agents, cause most of the
return's variance: an episode with a burst of big jobs returns far less than a quiet
one whatever the agents do. A value function that does not see the future arrivals
cannot tell them apart, so its GAE advantages carry that variance. Mao et al.
("Variance reduction for reinforcement learning in input-driven environments",
ICLR 2019) and Decima (Mao et al., SIGCOMM 2019) instead roll out the same input
sequence several times and subtract, at each time, the mean return of the other
rollouts of that input: the baseline then depends on the arrivals, not only on the
state.

Here
- **a group** is every complete episode of one training batch with the same
  episode key ``(source, window_start, jobs)`` (the env's ``episode_key``): the
  same jobs, arrival times and duration estimates (the predictor is seeded by
  the workload), so the same input; the rollouts differ only by the sampled actions.
  :class:`envs.group_rollouts.GroupRolloutEnv` serves every window ``group_size`` times in a row
  (``train.group_size`` = K) so that groups form;
- **the return** of a decision is the team's discounted return-to-go over the
  episode's decisions in order (all agents; ``G_t = Σ_k γ^k r_{t+k}``, ``γ`` =
  ``train.gamma``), the cooperative return the team reward defines;
- **time-step alignment** is by *simulated* time, as Decima aligns by wall-clock
  time: rollouts of one input make different numbers of decisions (forwards, jobs
  that wait), so decision ``t`` of one rollout and decision ``t`` of another are not
  the same moment of the input. The baseline of a decision taken at simulated time
  ``τ`` is the mean, over the *other* rollouts of its group, of their return-to-go
  from their first decision at or after ``τ`` (0 if a rollout made none after ``τ``:
  it had nothing left to earn); the decisions at one simulated time (a job's tasks)
  are matched in their order, the j-th to the j-th. Leaving the rollout itself out
  keeps the baseline independent of its own actions (Mao et al.'s unbiased form);
  with the rollout in, every advantage would shrink by the same factor ``(K-1)/K``;
- **advantage** = return-to-go − baseline, standardised over the batch's grouped
  decisions (as RLlib standardises GAE's). With ``train.advantage_scale: window`` each
  group's advantages are first divided by its rollouts' mean absolute team return
  (:func:`window_weights`; below). A decision of an episode that is not in a
  group of at least two complete rollouts (cut at the end of the iteration, or
  alone) gets advantage 0: it trains the critic, not the policy. The critic keeps
  GAE's value targets (it is not used for the advantages, only trained, so that a
  checkpoint can switch back to GAE).

**The job-aligned form** (``train.advantage: job``; :class:`JobBaselineAdvantages`).
The same groups, another credit: MLF-RL's (``docs/baselines.md``: per job, its own
outcome plus the discounted outcomes of the jobs placed after it, against the same
job's mean over the other rollouts of the window), on our objective. The team return
is ``-Σ_k T_k / (time_scale_s · n)`` (``T_k`` job ``k``'s time in the system), so it
splits into one share per job (:meth:`envs.rewards.TeamReward.job_shares`). A
decision about job ``j`` — any of its tasks, a forward of it — is credited with
``G_j = Σ_{k ≥ j} γ_job^(k-j) s_k`` over the jobs in arrival order, less the mean of
``G_j`` in the other rollouts. A job is the same job in every rollout of its input,
so no alignment by time is needed, and a decision is no longer charged with the
noise of jobs that had finished before it, nor (through ``γ_job``) much of that of
jobs far after it. The measured reason: the same simulator's MLF-RL, trained with
this credit, improves on its imitation warm start (0.780 → 0.696 of first-fit on
its validation scenarios), while PPO on the time-aligned team return never has.

**Weighing the windows** (``train.advantage_scale``). The team return is ``-avg JCT /
time_scale_s``, so a group's advantages are in seconds of its window's average JCT, and
the training windows' average JCTs span two orders of magnitude (about 700 s to
53,000 s per episode in one run of the default recipe): after the batch's one
standardisation, the heaviest window of a batch carries nearly all of its gradient
(:func:`top_window_share`, logged as ``losses/top_window_share_raw``). The benchmark
scores the geometric mean of per-scenario ratios, which weighs every window alike.
``advantage_scale: window`` divides each group's advantages by its rollouts' mean
``|team return|`` before the standardisation: an advantage is then a relative change
of the window's average JCT, the first-order change of its log, the benchmark's own
measure. ``batch`` (the default) leaves them as
they are. ``losses/top_window_share`` is the share after the weighing.

:class:`GroupBaselineAdvantages` is the learner connector (a subclass of RLlib's
``GeneralAdvantageEstimation`` that replaces its advantages);
:class:`agents.learner.ClipFractionPPOLearner` puts it in place of GAE when the
learner config says ``advantage: group``.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from ray.rllib.connectors.learner.general_advantage_estimation import (
    GeneralAdvantageEstimation,
)
from ray.rllib.evaluation.postprocessing import Postprocessing

from agents.config import ADVANTAGE_SCALES
from envs.group_rollouts import ENV_T, EPISODE_KEY, JOB_ID, JOB_SHARES, SIM_TIME

#: the learner metrics of the weighing (``agents.records.LEARNER_TAGS``)
TOP_WINDOW_SHARE_RAW = "top_window_share_raw"
TOP_WINDOW_SHARE = "top_window_share"


def returns_to_go(rewards: np.ndarray, gamma: float) -> np.ndarray:
    """``G_t = r_t + γ G_{t+1}`` over a sequence of rewards (``G_T = 0``)."""
    out = np.zeros(len(rewards))
    acc = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        acc = float(rewards[t]) + gamma * acc
        out[t] = acc
    return out


def group_advantages(
    rollouts: Sequence[tuple[np.ndarray, np.ndarray]], gamma: float
) -> list[np.ndarray]:
    """Per rollout, the advantage of each decision against its group (module docstring).

    Args:
        rollouts: K ≥ 2 rollouts of one input, each ``(times, rewards)``: the simulated
            time (s, non-decreasing) of each decision and the team reward it earned.
        gamma: discount per decision.

    Returns:
        K arrays: ``G_t − mean_{other rollouts n} G_n(first decision at or after τ_t)``
        (at equal times, by rank: :func:`_time_keys`).
    """
    if len(rollouts) < 2:
        raise ValueError(f"a group needs at least 2 rollouts, got {len(rollouts)}")
    keys = [_time_keys(np.asarray(t, dtype=np.float64)) for t, _ in rollouts]
    rtg = [returns_to_go(np.asarray(r, dtype=np.float64), gamma) for _, r in rollouts]
    out = []
    for m, mine in enumerate(keys):
        others = []
        for n, (theirs, g_n) in enumerate(zip(keys, rtg, strict=True)):
            if n == m:
                continue
            padded = np.append(g_n, 0.0)  # past the last decision: nothing left
            others.append([padded[bisect.bisect_left(theirs, k)] for k in mine])
        out.append(rtg[m] - np.mean(others, axis=0))
    return out


def _time_keys(times: np.ndarray) -> list[tuple[float, int]]:
    """``(time, rank among the decisions at that time)`` per decision: the tasks of one
    job are placed at one simulated time, so the j-th decision at ``τ`` of one rollout
    meets the j-th decision at ``τ`` of another (identical rollouts: zero advantage)."""
    if np.any(np.diff(times) < 0):
        raise ValueError("decision times must not decrease")
    keys, rank = [], 0
    for i, t in enumerate(times):
        rank = rank + 1 if i and t == times[i - 1] else 0
        keys.append((float(t), rank))
    return keys


def _decisions(episode) -> tuple[dict[Any, list], list[tuple[Any, int]]]:
    """(each agent's infos, (agent, agent step) of every real decision in env order) of
    a multi-agent episode (the artificial last step RLlib's learner adds to every
    agent's episode is left out: an agent episode of length L has L-1)."""
    infos = {a: sa.get_infos() for a, sa in episode.agent_episodes.items()}
    index = [(a, i) for a, sa in episode.agent_episodes.items() for i in range(len(sa) - 1)]
    index.sort(key=lambda d: infos[d[0]][d[1]][ENV_T])
    return infos, index


def _team_rollout(episode) -> tuple[np.ndarray, np.ndarray, list[tuple[Any, int]]]:
    """(times, rewards, (agent, agent step) per decision) of a multi-agent episode's
    real decisions in env order (:func:`_decisions`)."""
    infos, index = _decisions(episode)
    rewards = {a: sa.get_rewards() for a, sa in episode.agent_episodes.items()}
    times = np.array([infos[a][i][SIM_TIME] for a, i in index], dtype=np.float64)
    return times, np.array([float(rewards[a][i]) for a, i in index]), index


def episode_group_advantages(episodes: Sequence, gamma: float) -> dict[tuple, np.ndarray]:
    """``{(episode id, agent id): advantages of that agent's real steps}`` for every
    complete episode in a group of ≥ 2 (module docstring); other episodes absent."""
    return _by_episode(episodes, _team_rollout, lambda rollouts: group_advantages(rollouts, gamma))


def job_returns(shares: Sequence[tuple[int, float]], gamma: float) -> dict[int, float]:
    """``{job id: G_j}``, ``G_j = Σ_{k ≥ j} γ^(k-j) s_k`` over the jobs in arrival
    order (``shares`` as :meth:`envs.rewards.TeamReward.job_shares` gives them): the
    job's own share of the team return and the discounted shares of the jobs that
    arrive after it (MLF-RL's per-job return, discounted over jobs)."""
    ids = [int(j) for j, _ in shares]
    g = returns_to_go(np.array([float(s) for _, s in shares]), gamma)
    return dict(zip(ids, g.tolist(), strict=True))


def job_advantages(
    rollouts: Sequence[tuple[Sequence[int], Sequence[tuple[int, float]]]], gamma: float
) -> list[np.ndarray]:
    """Per rollout, the advantage of each decision against the same job in the other
    rollouts of its group (``train.advantage: job``).

    Args:
        rollouts: K ≥ 2 rollouts of one input, each ``(job ids, shares)``: the job each
            decision was about, in decision order, and the episode's per-job shares
            of the team return in arrival order (the same jobs in every rollout).
        gamma: discount per job (``train.job_gamma``).

    Returns:
        K arrays: ``G_j − mean_{other rollouts n} G_j^n`` for each decision's job ``j``
        (:func:`job_returns`). The rollouts share their input, so a job is the same
        job in each of them: no alignment by time is needed.
    """
    if len(rollouts) < 2:
        raise ValueError(f"a group needs at least 2 rollouts, got {len(rollouts)}")
    returns = [job_returns(shares, gamma) for _, shares in rollouts]
    if any(r.keys() != returns[0].keys() for r in returns):
        raise ValueError("the rollouts of a group must have the same jobs")
    out = []
    for m, (jobs, _) in enumerate(rollouts):
        others = [r for n, r in enumerate(returns) if n != m]
        out.append(
            np.array([returns[m][j] - np.mean([r[j] for r in others]) for j in jobs], dtype=float)
        )
    return out


def _job_rollout(episode) -> tuple[list[int], list, list[tuple[Any, int]]]:
    """(job id per decision, the episode's job shares, (agent, agent step) per decision)
    of a multi-agent episode's real decisions in env order (:func:`_decisions`)."""
    infos, index = _decisions(episode)
    shares = next((f[-1][JOB_SHARES] for f in infos.values() if f and JOB_SHARES in f[-1]), None)
    if shares is None:
        raise ValueError(f"episode {episode.id_}: no {JOB_SHARES} in its terminal infos")
    return [infos[a][i][JOB_ID] for a, i in index], shares, index


def _groups(episodes: Sequence) -> list[list]:
    """The complete episodes of a batch grouped by episode key, groups of ≥ 2 only."""
    groups: dict[tuple, list] = defaultdict(list)
    for ep in episodes:
        if not ep.is_terminated:
            continue
        sa = next(iter(ep.agent_episodes.values()), None)
        if sa is None or len(sa.get_infos()) == 0 or EPISODE_KEY not in sa.get_infos()[0]:
            continue
        groups[tuple(sa.get_infos()[0][EPISODE_KEY])].append(ep)
    return [members for members in groups.values() if len(members) >= 2]


def _by_episode(episodes: Sequence, unpack, advantages) -> dict[tuple, np.ndarray]:
    """``{(episode id, agent id): advantages of its real steps}``: each group's
    episodes unpacked (``unpack(ep)`` = (a, b, (agent, agent step) per decision)), their
    ``(a, b)`` given to ``advantages``, and the per-decision results put back per agent."""
    out: dict[tuple, np.ndarray] = {}
    for members in _groups(episodes):
        rollouts = [unpack(ep) for ep in members]
        advs = advantages([(a, b) for a, b, _ in rollouts])
        for ep, (_, _, index), adv in zip(members, rollouts, advs, strict=True):
            per_agent = {a: np.zeros(len(sa) - 1) for a, sa in ep.agent_episodes.items()}
            for (agent, i), value in zip(index, adv, strict=True):
                per_agent[agent][i] = value
            for agent, values in per_agent.items():
                out[(ep.id_, agent)] = values
    return out


def episode_job_advantages(episodes: Sequence, gamma: float) -> dict[tuple, np.ndarray]:
    """``{(episode id, agent id): advantages of that agent's real steps}`` by
    :func:`job_advantages` for every complete episode in a group of ≥ 2."""
    return _by_episode(episodes, _job_rollout, lambda rollouts: job_advantages(rollouts, gamma))


def _check_scale(scale: str) -> None:
    """ValueError unless ``scale`` is one of ``train.advantage_scale``'s values."""
    if scale not in ADVANTAGE_SCALES:
        raise ValueError(f"advantage scale must be one of {ADVANTAGE_SCALES}, got {scale!r}")


def window_weights(totals: Sequence[Sequence[float]], scale: str) -> list[float]:
    """Per group, the factor its advantages are multiplied by before the batch's
    standardisation: 1 with ``batch``; with ``window``, 1 / the mean ``|team return|``
    of the group's rollouts (``totals``: each group's rollouts' team returns), so an
    advantage is a change relative to the window's average JCT (module docstring)."""
    _check_scale(scale)
    if scale == "batch":
        return [1.0 for _ in totals]
    return [1.0 / max(1e-12, float(np.mean(np.abs(np.asarray(t, dtype=float))))) for t in totals]


def top_window_share(groups: Sequence[Sequence[np.ndarray]], weights: Sequence[float]) -> float:
    """The largest group's share of the batch's sum of squared advantages (each group's
    advantage arrays, times its weight): how much of the policy gradient's signal one
    training window carries. 0 for a batch without advantages."""
    energy = [
        w * w * sum(float(np.square(a).sum()) for a in g)
        for g, w in zip(groups, weights, strict=True)
    ]
    total = sum(energy)
    return max(energy) / total if total > 0 else 0.0


def team_return(episode) -> float:
    """A multi-agent episode's team return: the sum of the rewards of its real decisions
    (the env pays each step's team reward to the agent that acted)."""
    return float(_team_rollout(episode)[1].sum())


class GroupBaselineAdvantages(GeneralAdvantageEstimation):
    """Learner connector: GAE's value targets, group-baseline advantages (module
    docstring). Must sit where RLlib's PPO learner puts GAE (after the episodes got
    their artificial last step). ``scale``: ``train.advantage_scale``."""

    def __init__(self, *args, scale: str = "batch", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _check_scale(scale)
        self.scale = scale

    def grouped(self, episodes) -> dict[tuple, np.ndarray]:
        return episode_group_advantages(episodes, self.gamma)

    def _weigh(self, episodes, grouped, metrics) -> dict[Any, float]:
        """``{episode id: its group's weight}`` (:func:`window_weights`), and the
        batch's top-window shares before and after the weighing logged per module."""
        groups = _groups(episodes)
        weights = window_weights([[team_return(ep) for ep in g] for g in groups], self.scale)
        advs = [
            [grouped[(ep.id_, a)] for ep in g for a in ep.agent_ids if (ep.id_, a) in grouped]
            for g in groups
        ]
        if metrics is not None and groups:
            raw = top_window_share(advs, [1.0] * len(groups))
            weighed = top_window_share(advs, weights)
            for module_id in {sa.module_id for ep in episodes for sa in ep.agent_episodes.values()}:
                metrics.log_value((module_id, TOP_WINDOW_SHARE_RAW), raw, window=1)
                metrics.log_value((module_id, TOP_WINDOW_SHARE), weighed, window=1)
        return {ep.id_: w for g, w in zip(groups, weights, strict=True) for ep in g}

    def __call__(self, *, rl_module, episodes, batch, metrics=None, **kwargs):
        batch = super().__call__(
            rl_module=rl_module, episodes=episodes, batch=batch, metrics=metrics, **kwargs
        )
        grouped = self.grouped(episodes)
        weight = self._weigh(episodes, grouped, metrics)
        rows: dict[Any, list[np.ndarray]] = defaultdict(list)  # module → per-row values
        used: dict[Any, list[np.ndarray]] = defaultdict(list)  # module → row is grouped
        for ep in episodes:
            for agent_id in ep.agent_ids:  # the order of GAE's single-agent iterator
                sa = ep.agent_episodes[agent_id]
                adv = grouped.get((ep.id_, agent_id))
                values = np.zeros(len(sa))
                mask = np.zeros(len(sa), dtype=bool)
                if adv is not None:
                    values[:-1], mask[:-1] = adv * weight[ep.id_], True
                rows[sa.module_id].append(values)
                used[sa.module_id].append(mask)
        all_used = np.concatenate([np.concatenate(v) for v in used.values()] or [np.zeros(0)])
        all_adv = np.concatenate([np.concatenate(v) for v in rows.values()] or [np.zeros(0)])
        picked = all_adv[all_used.astype(bool)]
        mean = picked.mean() if len(picked) else 0.0
        std = max(1e-4, picked.std()) if len(picked) else 1.0
        for module_id, parts in rows.items():
            if module_id not in batch:
                continue
            adv = np.concatenate(parts)
            mask = np.concatenate(used[module_id])
            standardised = np.where(mask, (adv - mean) / std, 0.0).astype(np.float32)
            old = batch[module_id][Postprocessing.ADVANTAGES]
            if len(standardised) != len(old):
                raise ValueError(
                    f"module {module_id}: {len(standardised)} advantages for {len(old)} rows"
                )
            batch[module_id][Postprocessing.ADVANTAGES] = torch.as_tensor(
                standardised, device=old.device
            )
        return batch


class JobBaselineAdvantages(GroupBaselineAdvantages):
    """Learner connector for ``train.advantage: job``: the group's rollouts, each
    decision credited with its job's discounted per-job return against the same job in
    the other rollouts (:func:`job_advantages`; the module docstring's last section)."""

    def __init__(self, *args, job_gamma: float, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.job_gamma = float(job_gamma)

    def grouped(self, episodes) -> dict[tuple, np.ndarray]:
        return episode_job_advantages(episodes, self.job_gamma)
