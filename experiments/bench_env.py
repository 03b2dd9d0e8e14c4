"""Multi-agent environment benchmark: env steps/s and memory per env.

    python experiments/bench_env.py [--quick]

For ``configs/default.yaml`` (48 servers, 4 agents) with its recipe's options (five
hints with follow actions, global hints, resident features, the rule masks) and with
every decision option off (``PLAIN``), and a 4,000-server, 16-agent datacenter
(``configs/large.yaml``, options off; when its trace ``../shared/data/traces/philly.csv``
is absent, the same topology driven by the shipped sample sped up to match), a random
policy that samples uniformly among the legal actions (``action_mask``) steps the
RLlib env ``ClusterPlacement-v1`` through 200-job episodes (resets included):

- ``steps_per_s``: env steps per second, and ``obs_us``: microseconds per
  observation built;
- ``parallel_steps_per_s``: the PettingZoo adapter (every agent gets an
  observation every cycle; the idle ones a zero one);
- ``build_s``: constructing the env (config, topology, trace window) + first reset;
- ``memory_mb``: Python heap held by one env after construction, reset and the
  steps (``tracemalloc``), and the process RSS growth while building it.

``--quick`` runs fewer steps. Prints a table and, as its last line, one JSON object
with every figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import time
import tracemalloc
from pathlib import Path

import numpy as np

from envs.config import EnvConfig

REPO = Path(__file__).resolve().parents[1]
ENV = {"window_jobs": 200}
#: every decision option off (their defaults; the agents per subcluster): the plain
#: observation and masks, what v0 observed
PLAIN = {
    k: v for k, v in EnvConfig().decision_options().items() if k not in ("central", "forward_rule")
}


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def large_config():
    """``configs/large.yaml``, or its topology on the shipped sample if its trace is absent."""
    from marl_sched.config import load_config

    cfg = load_config(REPO / "configs" / "large.yaml")
    if not cfg.resolve_path(cfg.workload.trace).exists():
        default = load_config(REPO / "configs" / "default.yaml")
        gpus = 32_000 / 384  # the large datacenter over the default one
        workload = dataclasses.replace(
            default.workload, max_jobs=None, load=default.workload.load * gpus
        )
        cfg = dataclasses.replace(cfg, workload=workload, source="large.yaml+sample")
    return cfg


def random_steps(env, steps: int, seed: int = 0) -> dict:
    """Step the RLlib env with uniformly random legal actions."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    episodes = 0
    t0 = time.perf_counter()
    for _ in range(steps):
        agent = env.acting_agent
        action = int(rng.choice(np.flatnonzero(obs[agent]["action_mask"])))
        obs, _, term, trunc, _ = env.step({agent: action})
        if term["__all__"] or trunc["__all__"]:
            episodes += 1
            obs, _ = env.reset()
    elapsed = time.perf_counter() - t0
    # observation cost alone, on the current state
    n_obs = 200
    t1 = time.perf_counter()
    for _ in range(n_obs):
        env.builder.observe(env.session, env.session.agent)
    obs_us = (time.perf_counter() - t1) / n_obs * 1e6
    return {"steps_per_s": steps / elapsed, "episodes_ended": episodes, "obs_us": obs_us}


def parallel_steps(cfg, cycles: int, overrides: dict, seed: int = 0) -> float:
    from envs import make_parallel_env

    env = make_parallel_env(cfg, env=overrides)
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    t0 = time.perf_counter()
    for _ in range(cycles):
        acting = env.acting_agent
        action = int(rng.choice(np.flatnonzero(obs[acting]["action_mask"])))
        obs, *_ = env.step({acting: action})
        if not env.agents:
            obs, _ = env.reset()
    return cycles / (time.perf_counter() - t0)


def measure(name: str, cfg, steps: int, plain: bool) -> dict:
    from envs import make_env

    overrides = {**ENV, **PLAIN} if plain else ENV
    gc.collect()
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    env = make_env(cfg, env=overrides)
    env.reset(seed=0)
    build_s = time.perf_counter() - t0
    rss_mb = _rss_mb() - rss0
    out = {"config": name, "build_s": build_s, "rss_growth_mb": rss_mb}
    out.update(random_steps(env, steps))
    out.update(
        servers=int(env.topology.n_servers),
        agents=int(env.builder.n_agents),
        max_groups=int(env.builder.pad[0]),
        obs_floats=int(
            sum(np.prod(s.shape) for s in env.builder.observation_space.spaces.values())
        ),
    )
    del env
    gc.collect()
    # the Python heap one env holds (a fresh one, after build, reset and some steps)
    tracemalloc.start()
    env = make_env(cfg, env=overrides)
    random_steps(env, min(steps, 300))
    out["memory_mb"] = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    del env
    out["parallel_steps_per_s"] = parallel_steps(cfg, max(steps // 5, 50), overrides)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps")
    args = parser.parse_args()
    import envs.cluster_env  # noqa: F401  (Ray's import, ~3 s, is not part of an env's cost)
    from marl_sched.config import load_config

    steps = 600 if args.quick else 5000
    default = load_config(REPO / "configs" / "default.yaml")
    rows = [
        measure("default", default, steps, plain=False),
        measure("default-plain", default, steps, plain=True),
        measure("large-4000x16", large_config(), steps, plain=True),
    ]
    cols = [
        ("config", "{}"),
        ("servers", "{}"),
        ("agents", "{}"),
        ("max_groups", "{}"),
        ("obs_floats", "{}"),
        ("steps_per_s", "{:.0f}"),
        ("parallel_steps_per_s", "{:.0f}"),
        ("obs_us", "{:.0f}"),
        ("build_s", "{:.2f}"),
        ("memory_mb", "{:.1f}"),
        ("rss_growth_mb", "{:.1f}"),
    ]
    widths = [max(len(c), *(len(f.format(r[c])) for r in rows)) for c, f in cols]
    print("  ".join(c.rjust(w) for (c, _), w in zip(cols, widths, strict=True)))
    for r in rows:
        cells = (f.format(r[c]).rjust(w) for (c, f), w in zip(cols, widths, strict=True))
        print("  ".join(cells))
    ratio = rows[2]["steps_per_s"] / rows[1]["steps_per_s"]
    print(f"large/default-plain steps/s ratio: {ratio:.2f}")
    print(json.dumps({"quick": args.quick, "steps": steps, "results": rows, "large_ratio": ratio}))


if __name__ == "__main__":
    main()
