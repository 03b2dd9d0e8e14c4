"""Group-baseline advantages (``train.advantage: group``): an input-dependent
baseline (Mao et al., ICLR 2019; docs/agents.md, "Advantages", is the reference).

- **a group** is every complete episode of one batch with the same ``episode_key``
  ``(source, window_start, jobs)``: the same input, differing only by the sampled
  actions (:class:`envs.group_rollouts.GroupRolloutEnv` serves each window
  ``train.group_size`` times);
- ``group``: a decision's team return-to-go ``G_t`` (discount ``train.gamma``) less the
  mean, over the *other* rollouts of its group, of their return-to-go from their first
  decision at or after its simulated time (decisions at one time matched by rank; 0 if
  a rollout made none after it);
- advantages are standardised over the batch; ``train.advantage_scale: window`` first
  divides each group's by its rollouts' mean ``|team return|`` (:func:`window_weights`).
  A decision outside a group of >= 2 complete rollouts gets advantage 0. The critic
  keeps GAE's value targets."""

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
from envs.group_rollouts import ENV_T, EPISODE_KEY, SIM_TIME

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
    """Per rollout, the advantage of each decision against its group.

    Args:
        rollouts: K ≥ 2 rollouts of one input, each ``(times, rewards)``: the simulated
            time (s, non-decreasing) of each decision and the team reward it earned.
        gamma: discount per decision.

    Returns:
        K arrays: ``G_t − mean_{other rollouts n} G_n(first decision at or after τ_t)``.
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
    """``(time, rank among the decisions at that time)`` per decision."""
    if np.any(np.diff(times) < 0):
        raise ValueError("decision times must not decrease")
    keys, rank = [], 0
    for i, t in enumerate(times):
        rank = rank + 1 if i and t == times[i - 1] else 0
        keys.append((float(t), rank))
    return keys


def _decisions(episode) -> tuple[dict[Any, list], list[tuple[Any, int]]]:
    """(each agent's infos, (agent, agent step) of every real decision in env order) of
    a multi-agent episode, without RLlib's artificial last step."""
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
    """``{(episode id, agent id): advantages of its real steps}`` from each group's
    episodes (``unpack(ep)`` = (a, b, (agent, agent step) per decision))."""
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


def _check_scale(scale: str) -> None:
    """ValueError unless ``scale`` is one of ``train.advantage_scale``'s values."""
    if scale not in ADVANTAGE_SCALES:
        raise ValueError(f"advantage scale must be one of {ADVANTAGE_SCALES}, got {scale!r}")


def window_weights(totals: Sequence[Sequence[float]], scale: str) -> list[float]:
    """Per group, the factor on its advantages before standardisation: 1 with
    ``batch``; with ``window``, 1 / the mean ``|team return|`` of its rollouts."""
    _check_scale(scale)
    if scale == "batch":
        return [1.0 for _ in totals]
    return [1.0 / max(1e-12, float(np.mean(np.abs(np.asarray(t, dtype=float))))) for t in totals]


def top_window_share(groups: Sequence[Sequence[np.ndarray]], weights: Sequence[float]) -> float:
    """The largest group's share of the batch's sum of squared (weighted) advantages;
    0 for a batch without advantages."""
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
    """Learner connector: GAE's value targets, group-baseline advantages. Sits where
    RLlib's PPO learner puts GAE. ``scale``: ``train.advantage_scale``."""

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
