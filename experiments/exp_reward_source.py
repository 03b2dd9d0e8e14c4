"""Which interference source should the reward's potential use? A measured comparison.

    python experiments/exp_reward_source.py [--jobs N] [--checkpoint P]

``ClusterPlacement-v1`` pays ``r = -(ΔC + ΔW) / (time_scale_s · n)`` (:mod:`envs.rewards`);
``W``'s seconds per iteration come from ``env.reward.interference``: ``simulator`` (the
performance model's own iteration times) or ``learned`` (the shipped interference
model's predicted slowdowns × the same-placement-alone time). Both give the same
episode return; they differ in which step is paid. This script steps the shipped
checkpoint's greedy agents through the first ``--jobs`` jobs of ``configs/default.yaml``
(the training workload's window: a development window) once per source — the same
actions, since the reward does not change what the agents see — and reports:

- the return identity (both sources: ``Σ r = -avg JCT / time_scale_s``);
- ``iter_time_mre``: over every running job at every placement step, the mean relative
  error of ``W``'s seconds per iteration against the simulator's actual ones (0 for
  ``simulator`` by construction: it is the env's own dynamics);
- ``placement_credit_share``: the share of the return paid on the steps that apply a
  placement (the rest arrives as time passes);
- ``reward_std``: the standard deviation of the per-step rewards (lower = less noisy
  credit for the value function);
- ``steps_per_s``.

The last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np

from marl_sched.config import REPO_ROOT, load_config


def run(source: str, jobs: int, checkpoint: str) -> dict:
    from agents import load_agents
    from envs import make_env

    cfg = load_config(REPO_ROOT / "configs" / "default.yaml")
    cfg = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, max_jobs=jobs))
    env = make_env(cfg, env={"reward": {"interference": source}})
    agents = load_agents(checkpoint)
    obs, _ = env.reset(seed=0)
    rewards, placing, errors = [], [], []
    t0 = time.perf_counter()
    while True:
        placed_before = env.sim.stats.placed
        obs, rew, term, _, info = env.step(agents.act(obs))
        rewards.append(float(sum(rew.values())))
        placing.append(env.sim.stats.placed > placed_before)
        if placing[-1] and env.sim.running:
            pred = env.reward.w.predicted_iteration_times(env.sim)
            for jid, run_ in env.sim.running.items():
                if np.isfinite(run_.iter_time) and run_.iter_time > 0:
                    errors.append(abs(pred[jid] - run_.iter_time) / run_.iter_time)
        if term["__all__"]:
            break
    wall = time.perf_counter() - t0
    final = next(iter(info.values()))
    total = float(np.sum(rewards))
    placing_sum = float(np.sum(np.asarray(rewards)[np.asarray(placing)]))
    return {
        "source": source,
        "steps": len(rewards),
        "avg_jct_s": final["avg_jct_s"],
        "return": total,
        "return_identity_rel_err": abs(total + final["avg_jct_s"] / 3600.0)
        / (final["avg_jct_s"] / 3600.0),
        "iter_time_mre": float(np.mean(errors)) if errors else 0.0,
        "iter_time_samples": len(errors),
        "placement_credit_share": placing_sum / total if total else 0.0,
        "reward_std": float(np.std(rewards)),
        "steps_per_s": len(rewards) / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--checkpoint", default=str(REPO_ROOT / "checkpoints" / "marl-default"))
    args = parser.parse_args()
    rows = [run(s, args.jobs, args.checkpoint) for s in ("simulator", "learned")]
    keys = ["source", "steps", "avg_jct_s", "return_identity_rel_err", "iter_time_mre",
            "placement_credit_share", "reward_std", "steps_per_s"]  # fmt: skip
    print("  ".join(f"{k:>24}" for k in keys))
    for r in rows:
        print("  ".join(f"{r[k]:>24.6g}" if not isinstance(r[k], str) else f"{r[k]:>24}"
                        for k in keys))  # fmt: skip
    print(json.dumps({"jobs": args.jobs, "results": rows}))


if __name__ == "__main__":
    main()
