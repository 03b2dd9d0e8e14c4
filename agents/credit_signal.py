"""Is there a per-decision learning signal? A diagnostic for the environment's credit
assignment (issue 34, docs/agents.md "Why PPO does not improve yet").

K rollouts of one training window under uniformly random legal actions (the policy of a
freshly initialised network) give, per decision, the group-baseline advantage of
:func:`agents.group_baseline.group_advantages` (the return-to-go against the other
rollouts of the same arrivals at the same simulated time). Pooled over windows and in
units of the advantages' standard deviation, the mean advantage of each kind of action
(a GPU-group slot, a forward, following each hint), over the decisions where following
``interference-aware`` was legal, says whether the return tells the kinds apart: a
policy gradient can only push toward an action whose mean advantage stands out of its
standard error.

    python -m agents.credit_signal --config configs/learn_smoke.yaml --out F.json \
        [--rollouts 8] [--windows 3] [--gamma 0.99] [key=value ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np


def kind_of(action: int, builder) -> str:
    g, n = builder.pad[0], builder.n_agents
    if action < g:
        return "group"
    return "forward" if action < g + n else f"follow:{builder.hints[action - g - n]}"


def label_kind(action: int, builder) -> str:
    """:func:`kind_of` without the hint's name: ``slot``, ``forward`` or ``follow`` (the
    kinds of teacher label the diagnostics count)."""
    kind = kind_of(action, builder)
    return "slot" if kind == "group" else kind.split(":")[0]


def signal(cfg, rollouts: int, windows: int, gamma: float, episode_jobs: int) -> dict:
    import envs
    from agents.group_baseline import group_advantages

    by_kind: dict[str, list[float]] = defaultdict(list)
    jcts = []
    for w in range(windows):
        group, kinds, window_jcts = [], [], []
        for k in range(rollouts):
            env = envs.make_env(cfg, env={"window_jobs": episode_jobs})
            obs, _ = env.reset(seed=w)
            b = env.builder
            ia = b.pad[0] + b.n_agents + b.hints.index("interference-aware")
            rng = np.random.default_rng(1000 * w + k)
            times, rewards, labels = [], [], []
            while True:
                agent = env.acting_agent
                mask = obs[agent]["action_mask"]
                action = int(rng.choice(np.flatnonzero(mask)))
                times.append(env.sim.now)
                labels.append(kind_of(action, b) if mask[ia] > 0 else None)
                obs, r, term, _, _ = env.step({agent: action})
                rewards.append(sum(r.values()))
                if term["__all__"]:
                    break
            group.append((np.array(times), np.array(rewards)))
            kinds.append(labels)
            window_jcts.append(env.final_info()["avg_jct_s"])
        jcts.append(window_jcts)
        for adv, labels in zip(group_advantages(group, gamma), kinds, strict=True):
            for a, label in zip(adv, labels, strict=True):
                if label is not None:
                    by_kind[label].append(float(a))
    sd = float(np.std(np.concatenate([np.array(v) for v in by_kind.values()])))
    return {
        "rollout_avg_jct_s": jcts,
        "kinds": {
            k: {
                "n": len(v),
                "mean_sd_units": float(np.mean(v)) / sd,
                "se_sd_units": float(np.std(v)) / sd / np.sqrt(len(v)),
            }  # fmt: skip
            for k, v in sorted(by_kind.items())
        },
    }


def main(argv: list[str] | None = None) -> int:
    from marl_sched.config import load_config
    from marl_sched.errors import InputError

    p = argparse.ArgumentParser(prog="python -m agents.credit_signal")
    p.add_argument("--config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--rollouts", type=int, default=8)
    p.add_argument("--windows", type=int, default=3)
    p.add_argument("--episode-jobs", type=int, default=60)
    p.add_argument("--gamma", type=float, default=0.99)
    args, overrides = p.parse_known_args(argv)
    try:
        if not (2 <= args.rollouts <= 64 and 1 <= args.windows <= 64):
            raise InputError("--rollouts must be in [2, 64] and --windows in [1, 64]")
        cfg = load_config(args.config, overrides)
        result = signal(cfg, args.rollouts, args.windows, args.gamma, args.episode_jobs)
    except InputError as exc:
        print(f"credit_signal: error: {exc}", file=sys.stderr)
        return 2
    result = {"config": args.config, "overrides": overrides, "gamma": args.gamma,
              "rollouts": args.rollouts, "windows": args.windows,
              "episode_jobs": args.episode_jobs, **result}  # fmt: skip
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for k, v in result["kinds"].items():
        mean, se = v["mean_sd_units"], v["se_sd_units"]
        print(f"{k:28s} n={v['n']:5d}  mean advantage {mean:+.3f} ± {se:.3f} sd")
    return 0


if __name__ == "__main__":
    sys.exit(main())
