"""Advantage variance of the group baseline against GAE, on the same decisions.

::

    python experiments/exp_advantage_variance.py [--config configs/default.yaml]
        [--iterations 3] [--batch 2000] [--group-size 4] [--out FILE]

Trains PPO with ``train.advantage: group`` (:mod:`agents.group_baseline`) from the
shipped checkpoint's weights (``checkpoints/marl-default``: its value head was
trained on the teacher's returns, so GAE gets a fitted critic, not a random one) on
the config's training windows. At every iteration, on the decisions of the episodes
that form groups, it records in reward units (before standardisation):

- ``gae``: RLlib's GAE advantage, ``value target - V(s)`` (λ = ``train.gae_lambda``);
- ``group``: return-to-go minus the mean of the other rollouts of the same window at
  the same simulated time;
- ``return``: the team's return-to-go itself (no baseline), for scale.

The critic comes from the checkpoint's training setting (its episode length and
returns), so its GAE is what a run switching to these windows starts with.

Prints one line per iteration and one JSON object (per-iteration variances, their
ratio group / gae, and the pooled figures); ``--out`` also writes it. Training
windows only: no validation or test window is read.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "default.yaml"))
    parser.add_argument("--checkpoint", default=str(REPO / "checkpoints" / "marl-default"))
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--episode-jobs", type=int, default=None, help="train.episode_jobs")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    import ray
    import torch
    from ray.rllib.evaluation.postprocessing import Postprocessing

    import agents.group_baseline as gb
    from agents.config import model_config, train_config
    from agents.policy import load_checkpoint
    from agents.training import algo_config, env_setup, module_ids
    from marl_sched.config import load_config

    torch.set_num_threads(1)
    cfg = load_config(args.config)
    mc, tc = model_config(cfg), train_config(cfg)
    tc = dataclasses.replace(
        tc,
        advantage="group",
        group_size=args.group_size,
        episode_jobs=args.episode_jobs or tc.episode_jobs,
        train_batch_size=args.batch,
        minibatch_size=min(tc.minibatch_size, args.batch),
    )
    records: list[dict] = []
    connector_call = gb.GroupBaselineAdvantages.__call__

    def measured(self, *, rl_module, episodes, batch, **kwargs):
        grouped = gb.episode_group_advantages(episodes, self.gamma)
        team_rtg = _team_returns(episodes, grouped, self.gamma)
        out = connector_call(self, rl_module=rl_module, episodes=episodes, batch=batch, **kwargs)
        gae, group, rtg = [], [], []
        for module_id, module_batch in out.items():
            with torch.no_grad():
                values = rl_module[module_id].compute_values(module_batch).numpy()
            targets = module_batch[Postprocessing.VALUE_TARGETS].numpy()
            offset = 0
            for ep in episodes:
                for agent_id in ep.agent_ids:  # GAE's row order (agents.group_baseline)
                    sa = ep.agent_episodes[agent_id]
                    adv = grouped.get((ep.id_, agent_id))
                    if adv is not None and sa.module_id in (None, module_id):
                        rows = slice(offset, offset + len(sa) - 1)
                        gae.append(targets[rows] - values[rows])
                        group.append(adv)
                        rtg.append(team_rtg[(ep.id_, agent_id)])
                    offset += len(sa)
        gae, group = np.concatenate(gae or [[]]), np.concatenate(group or [[]])
        rtg = np.concatenate(rtg or [[]])
        records.append(
            {
                "decisions": int(len(gae)),
                "groups": len({tuple(k) for k in _keys(episodes, grouped)}),
                "gae_var": float(gae.var()) if len(gae) else None,
                "group_var": float(group.var()) if len(group) else None,
                "return_var": float(rtg.var()) if len(rtg) else None,
            }
        )
        return out

    gb.GroupBaselineAdvantages.__call__ = measured
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        _, _, builder = env_setup(cfg, mc, tc, tc.seed)
        ids = module_ids(builder.agent_ids, mc)
        algo = algo_config(cfg, mc, tc, tc.seed, builder.agent_ids).build_algo()
        agents = load_checkpoint(args.checkpoint)
        weights = {f"gnn.{k}": v for k, v in agents.net_for(0).state_dict().items()}
        algo.learner_group.set_weights({m: weights for m in ids})
        algo.env_runner_group.sync_weights(
            from_worker_or_learner_group=algo.learner_group, inference_only=True
        )
        for it in range(args.iterations):
            algo.train()
            r = records[-1]
            print(f"iteration {it + 1}: {json.dumps(r)}", flush=True)
        algo.stop()
    finally:
        ray.shutdown()
    valid = [r for r in records if r["gae_var"]]
    result = {
        "config": _shown(args.config),
        "checkpoint": _shown(args.checkpoint),
        "group_size": args.group_size,
        "train_batch_size": args.batch,
        "episode_jobs": tc.episode_jobs,
        "iterations": records,
        "median_ratio_group_over_return": float(
            np.median([r["group_var"] / r["return_var"] for r in valid])
        )
        if valid
        else None,
        "median_ratio_group_over_gae": float(
            np.median([r["group_var"] / r["gae_var"] for r in valid])
        )
        if valid
        else None,
    }
    print(json.dumps(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


def _shown(path: str) -> str:
    """``path`` relative to the repository when inside it (results files travel)."""
    p = Path(path).resolve()
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p)


def _team_returns(episodes, grouped, gamma: float) -> dict:
    """``{(episode id, agent): the team return-to-go at that agent's real steps}``."""
    from agents.group_baseline import _team_rollout, returns_to_go

    out = {}
    for ep in episodes:
        if not any((ep.id_, a) in grouped for a in ep.agent_ids):
            continue
        _, rewards, index = _team_rollout(ep)
        g = returns_to_go(rewards, gamma)
        per_agent = {a: np.zeros(len(sa) - 1) for a, sa in ep.agent_episodes.items()}
        for (agent, i), value in zip(index, g, strict=True):
            per_agent[agent][i] = value
        out.update({(ep.id_, a): v for a, v in per_agent.items()})
    return out


def _keys(episodes, grouped) -> list:
    """The episode keys of the grouped episodes."""
    from envs.group_rollouts import EPISODE_KEY

    out = []
    for ep in episodes:
        sa = next(iter(ep.agent_episodes.values()))
        if (ep.id_, sa.agent_id) in grouped:
            out.append(sa.get_infos()[0][EPISODE_KEY])
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
