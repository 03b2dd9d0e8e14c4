"""Do rollout improvement's labels hold on other futures? A diagnostic for
:mod:`agents.improve` (issue 34, docs/agents.md "Exact counterfactuals with a fit that
keeps the rest").

A moved label says: at this decision, on *this* window's future (its arrivals after
the decision), with the network acting afterwards, the alternative beats the network's
own action by more than the margin. The network then follows it on every window. This
measures whether that was a property of the state or of the one future: at each moved
label, the state is copied ``futures`` times, and in each copy the jobs still to arrive
are replaced (:func:`agents.improve.resample_future`) by as many consecutive jobs from
a random other place of the same trace window source, with that slice's own gaps from
the first pending arrival on; the network's action and the label are then played out on that
future (both branches of one future share it: common random numbers). Per label the
gain on the real future and on each resampled one, as a fraction of the network's
action's average JCT. A label moved after the episode's last arrival has no other
future and is counted apart.

    python -m agents.label_futures --config configs/learn.yaml \\
        --checkpoint checkpoints/marl-default --out F.json [--episodes 8] [--branches 16] \\
        [--futures 4] [--margin 0.001] [--seed 0] [key=value ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from agents.improve import resample_future

__all__ = ["label_futures", "resample_future", "summary"]


def label_futures(env, net, episodes: int, branches: int, margin: float, futures: int,
                  seed: int) -> list[dict]:  # fmt: skip
    """Per moved label of ``episodes`` rounds' episodes (``agents.improve`` with 2
    alternatives): its gain on the real future and on ``futures`` resampled ones."""
    from agents.improve import Round, future_gains, improve_episode

    rng = np.random.default_rng(seed)
    labels: list[dict] = []

    def on_improved(state, agent, action, label, gain) -> bool:
        gains = future_gains(state, agent, action, label, net, futures, (seed, len(labels)))
        labels.append({"real": float(gain), "futures": gains})
        return True

    for e in range(episodes):
        improve_episode(
            env, seed * 1000 + 500_000 + e, net, branches, 2, margin, rng, Round(), on_improved
        )
    return labels


def summary(labels: list[dict], margin: float) -> dict:
    """Over the labels with a future to resample (``labels_at_the_end``: those without,
    moved after the last arrival, whose only future is the real one)."""
    at_end = sum(not lab["futures"] for lab in labels)
    labels = [lab for lab in labels if lab["futures"]]
    g = np.array([x for lab in labels for x in lab["futures"]])
    per_label = np.array([np.mean(lab["futures"]) for lab in labels]) if labels else np.zeros(0)
    return {
        "labels": len(labels),
        "labels_at_the_end": at_end,
        "pairs": int(g.size),
        "real_gain_mean": float(np.mean([lab["real"] for lab in labels])) if labels else None,
        "future_gain_mean": float(g.mean()) if g.size else None,
        "future_gain_se": float(g.std(ddof=1) / np.sqrt(g.size)) if g.size > 1 else None,
        "share_futures_label_wins": float((g > 0).mean()) if g.size else None,
        "share_futures_label_wins_by_margin": float((g > margin).mean()) if g.size else None,
        "share_futures_label_loses": float((g < 0).mean()) if g.size else None,
        "share_labels_winning_on_average": float((per_label > 0).mean()) if labels else None,
    }


def main(argv: list[str] | None = None) -> int:
    import torch

    from agents.algorithm import env_setup
    from agents.config import model_config, train_config
    from agents.policy import load_agents
    from envs.config import env_config as parse_env
    from marl_sched.config import load_config
    from marl_sched.errors import InputError

    p = argparse.ArgumentParser(prog="python -m agents.label_futures")
    p.add_argument("--config", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--episodes", type=int, default=8)
    p.add_argument("--branches", type=int, default=16)
    p.add_argument("--futures", type=int, default=4)
    p.add_argument("--margin", type=float, default=0.001)
    p.add_argument("--seed", type=int, default=0)
    args, overrides = p.parse_known_args(argv)
    try:
        if not (1 <= args.episodes <= 1000 and 1 <= args.branches <= 1000):
            raise InputError("--episodes and --branches must be in [1, 1000]")
        if not (1 <= args.futures <= 64 and 0 <= args.margin < 1):
            raise InputError("--futures must be in [1, 64] and --margin in [0, 1)")
        cfg = load_config(args.config, overrides)
        mc, tc = model_config(cfg), train_config(cfg)
        agents = load_agents(args.checkpoint)
        agents.check_env(parse_env(cfg))
        env_cls, env_config, _ = env_setup(cfg, mc, tc, args.seed)
        env = env_cls(env_config)
        net = agents.net_for(0)
    except InputError as exc:
        print(f"label_futures: error: {exc}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    net.eval()
    labels = label_futures(env, net, args.episodes, args.branches, args.margin, args.futures,
                           args.seed)  # fmt: skip
    result = {"config": args.config, "checkpoint": args.checkpoint, "overrides": overrides,
              "episodes": args.episodes, "branches": args.branches, "futures": args.futures,
              "margin": args.margin, "seed": args.seed,
              "summary": summary(labels, args.margin), "labels": labels}  # fmt: skip
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
