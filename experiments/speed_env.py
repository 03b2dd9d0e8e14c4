"""Multi-agent environment benchmark: env steps/s.

    python experiments/speed_env.py [--quick]

A random policy that samples uniformly among the legal actions (``action_mask``)
steps the RLlib env ``ClusterPlacement-v1`` through 200-job episodes (resets
included) on three configs (``docs/results.md``): ``configs/default.yaml`` (48
servers, 4 agents) with every decision option off (``default-plain``: the plain
observation and masks) and with its recipe's options (``default``: hints with follow
actions, global hints, resident features, rule masks), and ``configs/large.yaml``
(4,000 servers, 16 agents, options off; when its trace
``../shared/data/traces/philly.csv`` is absent, the same topology on the shipped
sample sped up to match). ``--quick`` runs 600 steps instead of 5,000. Prints a table
and, as its last line, one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np

from envs.config import EnvConfig
from marl_sched.config import REPO_ROOT

ENV = {"window_jobs": 200}
#: every decision option off (their defaults; the agents per subcluster)
PLAIN = {
    k: v for k, v in EnvConfig().decision_options().items() if k not in ("central", "forward_rule")
}
COLUMNS = [("config", "config", ""), ("servers", "servers", "d"), ("agents", "agents", "d"),
           ("steps_per_s", "steps/s", ".0f")]  # fmt: skip


def large_config():
    """``configs/large.yaml``, or its topology on the shipped sample if its trace is absent."""
    from marl_sched.config import load_config

    cfg = load_config(REPO_ROOT / "configs" / "large.yaml")
    if not cfg.resolve_path(cfg.workload.trace).exists():
        default = load_config(REPO_ROOT / "configs" / "default.yaml")
        gpus = 32_000 / 384  # the large datacenter over the default one
        workload = dataclasses.replace(
            default.workload, max_jobs=None, load=default.workload.load * gpus
        )
        cfg = dataclasses.replace(cfg, workload=workload, source="large.yaml+sample")
    return cfg


def measure(name: str, cfg, steps: int, options: dict, seed: int = 0) -> dict:
    """Step a fresh env ``steps`` times with uniformly random legal actions."""
    from envs import make_env

    env = make_env(cfg, env={**ENV, **options})
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    t0 = time.perf_counter()
    for _ in range(steps):
        agent = env.acting_agent
        obs, _, term, trunc, _ = env.step(
            {agent: int(rng.choice(np.flatnonzero(obs[agent]["action_mask"])))}
        )
        if term["__all__"] or trunc["__all__"]:
            obs, _ = env.reset()
    return {"config": name, "servers": int(env.topology.n_servers),
            "agents": int(env.builder.n_agents),
            "steps_per_s": steps / (time.perf_counter() - t0)}  # fmt: skip


def main() -> None:
    from marl_sched.cli import format_table
    from marl_sched.config import load_config

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps")
    args = parser.parse_args()
    import envs.cluster_env  # noqa: F401  (Ray's import, ~3 s, is not part of an env's cost)

    steps = 600 if args.quick else 5000
    default = load_config(REPO_ROOT / "configs" / "default.yaml")
    rows = [
        measure("default-plain", default, steps, PLAIN),
        measure("default", default, steps, {}),
        measure("large-4000x16", large_config(), steps, PLAIN),
    ]
    print(format_table(rows, COLUMNS))
    print(json.dumps({"quick": args.quick, "steps": steps, "results": rows}))


if __name__ == "__main__":
    main()
