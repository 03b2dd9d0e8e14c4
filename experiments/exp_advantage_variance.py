"""Advantage variance of plain GAE, privileged-critic GAE and the group baseline,
on the same decisions.

::

    python experiments/exp_advantage_variance.py [--config configs/default.yaml]
        [--iterations 6] [--batch 2000] [--group-size 4] [--episode-jobs 50]
        [--critic-jobs 8] [--critic-lr 1e-3] [--seed 0] [--out FILE]

Trains PPO with ``train.advantage: group`` (:mod:`agents.group_baseline`, the policy's
advantages) and ``train.critic: privileged`` (:mod:`agents.rl_module`: both the GNN's
own value head and the privileged critic are fitted, to the same value targets, the
value heads at ``--critic-lr``) from the shipped checkpoint's weights
(``checkpoints/marl-default``: its value head was trained on the teacher's returns, so
the plain critic starts fitted, not random; the privileged critic starts equal to it)
on the config's training windows. At every iteration, on the decisions of the episodes
that form groups, it records in reward units (before standardisation):

- ``plain``: RLlib's GAE (``compute_value_targets``, λ = ``train.gae_lambda``) on the
  GNN's value head ``v(z)``, which sees what the actor sees;
- ``privileged``: GAE on the privileged critic ``V(s, c)`` (the batch's own);
- ``group``: return-to-go minus the mean of the other rollouts of the same window at
  the same simulated time;
- ``return``: the team's return-to-go itself (no baseline), for scale.

Prints one line per iteration and one JSON object (per-iteration variances and the
median ratios); ``--out`` also writes it. Training windows only: no validation or test
window is read.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
KINDS = ("plain", "privileged", "group", "return")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "default.yaml"))
    parser.add_argument("--checkpoint", default=str(REPO / "checkpoints" / "marl-default"))
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--episode-jobs", type=int, default=50, help="train.episode_jobs")
    parser.add_argument("--critic-jobs", type=int, default=8, help="train.critic_jobs")
    parser.add_argument("--critic-lr", type=float, default=1e-3, help="train.critic_lr")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    import ray
    import torch

    import agents.group_baseline as gb
    from agents.config import model_config, train_config
    from agents.policy import load_checkpoint
    from agents.training import algo_config, env_setup, module_ids
    from marl_sched.config import load_config

    torch.set_num_threads(1)
    cfg = load_config(args.config)
    mc, tc = model_config(cfg), train_config(cfg)
    tc = dataclasses.replace(
        tc, advantage="group", group_size=args.group_size, critic="privileged",
        critic_jobs=args.critic_jobs, critic_lr=args.critic_lr, seed=args.seed,
        episode_jobs=args.episode_jobs, train_batch_size=args.batch,
        minibatch_size=min(tc.minibatch_size, args.batch),
    )  # fmt: skip
    records: list[dict] = []
    connector_call = gb.GroupBaselineAdvantages.__call__

    def measured(self, *, rl_module, episodes, batch, **kwargs):
        grouped = gb.episode_group_advantages(episodes, self.gamma)
        out = connector_call(self, rl_module=rl_module, episodes=episodes, batch=batch, **kwargs)
        parts = {k: [] for k in KINDS}
        for module_id, module_batch in out.items():
            plain, privileged = _gae_both(rl_module[module_id], module_batch, self)
            offset = 0
            for ep in episodes:
                team = _team_returns(ep, self.gamma) if _in(ep, grouped) else {}
                for agent_id in ep.agent_ids:  # GAE's row order (agents.group_baseline)
                    sa = ep.agent_episodes[agent_id]
                    adv = grouped.get((ep.id_, agent_id))
                    if adv is not None and sa.module_id in (None, module_id):
                        rows = slice(offset, offset + len(sa) - 1)
                        parts["plain"].append(plain[rows])
                        parts["privileged"].append(privileged[rows])
                        parts["group"].append(adv)
                        parts["return"].append(team[agent_id])
                    offset += len(sa)
        values = {k: np.concatenate(v or [[]]) for k, v in parts.items()}
        keys = {_key(ep) for ep in episodes if _in(ep, grouped)}
        record = {"decisions": int(len(values["group"])), "groups": len(keys)}
        record.update({f"{k}_var": float(v.var()) if len(v) else None for k, v in values.items()})
        records.append(record)
        return out

    gb.GroupBaselineAdvantages.__call__ = measured
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        _, _, builder = env_setup(cfg, mc, tc, tc.seed)
        ids = module_ids(builder.agent_ids, mc)
        algo = algo_config(cfg, mc, tc, tc.seed, builder.agent_ids).build_algo()
        agents = load_checkpoint(args.checkpoint)
        weights = {f"gnn.{k}": v for k, v in agents.net_for(0).state_dict().items()}
        algo.learner_group.set_weights({m: weights for m in ids})  # the critic's Δ stays 0
        algo.env_runner_group.sync_weights(
            from_worker_or_learner_group=algo.learner_group, inference_only=True
        )
        for it in range(args.iterations):
            result = algo.train()
            learned = result["learners"][ids[0]]
            records[-1]["vf_explained_var"] = {
                "plain": float(learned["plain_vf_explained_var"]),
                "privileged": float(learned["vf_explained_var"]),
            }
            print(f"iteration {it + 1}: {json.dumps(records[-1])}", flush=True)
        algo.stop()
    finally:
        ray.shutdown()
    valid = [r for r in records if r["decisions"]]

    def ratio(a: str, b: str) -> float | None:
        return float(np.median([r[f"{a}_var"] / r[f"{b}_var"] for r in valid])) if valid else None

    result = {
        "config": _shown(args.config),
        "checkpoint": _shown(args.checkpoint),
        **{k: getattr(tc, k) for k in ("seed", "group_size", "train_batch_size", "episode_jobs",
                                       "critic_jobs", "critic_lr", "gamma", "gae_lambda")},
        "iterations": records,
        "median_ratio": {f"{a}/{b}": ratio(a, b) for a, b in (
            ("privileged", "plain"), ("group", "plain"), ("group", "privileged"),
            ("plain", "return"), ("privileged", "return"), ("group", "return"))},
    }  # fmt: skip
    print(json.dumps(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


def _gae_both(module, module_batch, gae) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a module's batch: GAE advantages (unstandardised) on the GNN's own
    value head, and on the privileged critic (the batch's value targets)."""
    import torch
    from ray.rllib.core.columns import Columns
    from ray.rllib.evaluation.postprocessing import Postprocessing
    from ray.rllib.utils.numpy import convert_to_numpy
    from ray.rllib.utils.postprocessing.value_predictions import compute_value_targets

    with torch.no_grad():
        _, v_plain = module.gnn.forward_padded(module_batch[Columns.OBS])
        v_priv = module.compute_values(module_batch)
    v_plain = convert_to_numpy(v_plain)
    cols = [convert_to_numpy(module_batch[c]).astype(np.float32)
            for c in (Columns.REWARDS, Columns.TERMINATEDS, Columns.TRUNCATEDS)]  # fmt: skip
    targets = compute_value_targets(v_plain, *cols, gamma=gae.gamma, lambda_=gae.lambda_)
    privileged = convert_to_numpy(module_batch[Postprocessing.VALUE_TARGETS])
    privileged = privileged - convert_to_numpy(v_priv)
    return targets - v_plain, privileged


def _team_returns(ep, gamma: float) -> dict:
    """``{agent: the team return-to-go at that agent's real steps}`` of one episode."""
    from agents.group_baseline import _team_rollout, returns_to_go

    _, rewards, index = _team_rollout(ep)
    per_agent = {a: np.zeros(len(sa) - 1) for a, sa in ep.agent_episodes.items()}
    for (agent, i), value in zip(index, returns_to_go(rewards, gamma), strict=True):
        per_agent[agent][i] = value
    return per_agent


def _in(ep, grouped) -> bool:
    return any((ep.id_, a) in grouped for a in ep.agent_ids)


def _key(ep) -> tuple:
    from envs.group_rollouts import EPISODE_KEY

    return tuple(next(iter(ep.agent_episodes.values())).get_infos()[0][EPISODE_KEY])


def _shown(path: str) -> str:
    """``path`` relative to the repository when inside it (results files travel)."""
    p = Path(path).resolve()
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p)


if __name__ == "__main__":
    main(sys.argv[1:])
