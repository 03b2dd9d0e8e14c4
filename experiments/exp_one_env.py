"""The shipped checkpoint acts in the one environment exactly as ``evaluate`` runs it.

    python experiments/exp_one_env.py [--checkpoint P] [--config C]

Steps ``envs.make_parallel_env(C)`` (the config's whole workload window) with
``agents.load_agents(P).act`` until the episode ends, then runs ``marl-sched evaluate
--checkpoint P --config C`` on the same window, and prints both average JCTs, their
relative difference (target ≤ 1e-9) and the wall time of each. Last line: one JSON
object with every figure.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from marl_sched.config import REPO_ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default=str(REPO_ROOT / "checkpoints" / "marl-default"))
    parser.add_argument("--config", default=str(REPO_ROOT / "configs" / "default.yaml"))
    args = parser.parse_args()

    import envs
    from agents import load_agents
    from envs.config import env_config
    from marl_sched.cli import main as cli

    t0 = time.perf_counter()
    env = envs.make_parallel_env(args.config)
    agents = load_agents(args.checkpoint)
    agents.check_env(env_config(env.env.cfg))
    obs, infos = env.reset(seed=0)
    steps = 0
    while env.agents:
        obs, _, _, _, infos = env.step(agents.act(obs))
        steps += 1
    env_s = time.perf_counter() - t0
    info = next(iter(infos.values()))

    with tempfile.TemporaryDirectory() as tmp:
        t1 = time.perf_counter()
        out = Path(tmp) / "eval"
        cli(["evaluate", "--checkpoint", args.checkpoint, "--config", args.config,
             "--quiet", "--out", str(out)])  # fmt: skip
        eval_s = time.perf_counter() - t1
        evaluated = json.loads((out / "metrics.json").read_text())["avg_jct_s"]
    rel = abs(info["avg_jct_s"] - evaluated) / evaluated
    print(f"env rollout: {info['avg_jct_s']:.6f} s avg JCT ({steps} steps, {env_s:.1f} s)")
    print(f"evaluate:    {evaluated:.6f} s avg JCT ({eval_s:.1f} s)")
    print(f"relative difference: {rel:.3g} (target <= 1e-9)")
    print(json.dumps({"env_avg_jct_s": info["avg_jct_s"], "evaluate_avg_jct_s": evaluated,
                      "rel_diff": rel, "steps": steps, "team_return": info["team_return"],
                      "env_wall_s": env_s, "evaluate_wall_s": eval_s}))  # fmt: skip


if __name__ == "__main__":
    main()
