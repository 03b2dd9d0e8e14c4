"""PPO training throughput: sampling decisions per second and seconds per phase.

::

    python experiments/bench_train.py [--config configs/default.yaml] [--iterations 2]
        [--batch 1000] [--envs N] [--runners 0] [--profile FILE]

Builds the run's RLlib algorithm exactly as ``marl-sched train`` does
(:func:`agents.training.algo_config` on the config's ``model:`` and ``train:``
sections; no warm start: the weights do not change the work), then times
``--iterations`` calls of ``algo.train()`` after one untimed warm-up iteration
(building the env runner's connectors, the first episode resets). ``--batch``
overrides ``train.train_batch_size`` (decisions per iteration) and ``--envs``
``train.num_envs_per_env_runner``. One CPU thread for torch, as training sets.

Per iteration the wall time splits into (the calls timed by wrapping them)

- ``sample_s``: the env runner's ``sample()`` (env steps + the module's
  exploration forward + the env-to-module / module-to-env connectors);
- ``learn_s``: the learner's update (its connector pipeline incl. GAE, and the SGD
  epochs);
- ``other_s``: the rest (weight sync, metrics).

Prints one line per iteration and, last, one JSON object:
``sample_decisions_per_s`` = decisions sampled / ``sample_s`` (the issue's figure),
``sample_decisions_per_cpu_s`` = the same per CPU-second of this process (steadier
than wall time on a shared machine; with ``--runners 0`` sampling runs here),
``decisions_per_s`` = decisions / whole iteration wall time, and the medians of
the per-phase seconds. ``--profile FILE`` writes a cProfile of the timed iterations.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build_algo(config: str, batch: int | None, envs: int | None, runners: int | None):
    """The training run's algorithm (``agents.training.algo_config``), and its config."""
    from agents.config import model_config, train_config
    from agents.training import algo_config, env_setup
    from marl_sched.config import load_config

    cfg = load_config(config)
    mc, tc = model_config(cfg), train_config(cfg)
    changes = {}
    if batch is not None:
        changes.update(train_batch_size=batch, minibatch_size=min(tc.minibatch_size, batch))
    if envs is not None:
        changes["num_envs_per_env_runner"] = envs
    if runners is not None:
        changes["num_env_runners"] = runners
    tc = dataclasses.replace(tc, **changes)
    _, _, builder = env_setup(cfg, mc, tc, tc.seed)
    algo = algo_config(cfg, mc, tc, tc.seed, builder.agent_ids).build_algo()
    return algo, tc


class PhaseClock:
    """Seconds spent in wrapped calls, per phase (RLlib's own ``result["timers"]``
    are smoothed across iterations, so they cannot give one iteration's split)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def wrap(self, obj, method: str, phase: str) -> None:
        inner = getattr(obj, method)

        def timed(*args, **kwargs):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                s = self.seconds
                s[phase] = s.get(phase, 0.0) + time.perf_counter() - t0
                s[f"{phase}_cpu"] = s.get(f"{phase}_cpu", 0.0) + time.process_time() - c0

        setattr(obj, method, timed)

    def take(self) -> dict[str, float]:
        out, self.seconds = self.seconds, {}
        return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "default.yaml"))
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--batch", type=int, default=None, help="train_batch_size")
    parser.add_argument("--envs", type=int, default=None, help="num_envs_per_env_runner")
    parser.add_argument("--runners", type=int, default=None, help="num_env_runners")
    parser.add_argument("--profile", default=None, help="write a cProfile here")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    import ray
    import torch

    torch.set_num_threads(1)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        algo, tc = build_algo(args.config, args.batch, args.envs, args.runners)
        clock = PhaseClock()
        if tc.num_env_runners == 0:
            clock.wrap(algo.env_runner_group.local_env_runner, "sample", "sample")
        clock.wrap(algo.learner_group, "update", "learn")
        algo.train()  # warm-up: connectors built, first resets, first update
        profiler = cProfile.Profile() if args.profile else None
        rows = []
        last = None
        for it in range(args.iterations):
            clock.take()
            if profiler:
                profiler.enable()
            t0 = time.perf_counter()
            result = algo.train()
            wall = time.perf_counter() - t0
            if profiler:
                profiler.disable()
            steps = float(result["num_env_steps_sampled_lifetime"])
            done = steps - (last if last is not None else steps - tc.train_batch_size)
            last = steps
            phases = clock.take()
            learn = phases.get("learn", 0.0)
            # remote env runners sample in other processes: the driver waits for them
            # for the whole iteration but the update, and their CPU is not ours to count
            sample = phases.get("sample", wall - learn)
            row = {"iteration": it + 1, "decisions": done, "wall_s": wall,
                   "sample_s": sample, "learn_s": learn,
                   "sample_cpu_s": phases.get("sample_cpu", 0.0),
                   "learn_cpu_s": phases.get("learn_cpu", 0.0),
                   "other_s": max(wall - sample - learn, 0.0)}  # fmt: skip
            rows.append(row)
            print(
                f"iteration {it + 1}: {done:.0f} decisions, wall {wall:.2f} s, sample "
                f"{sample:.2f} s ({done / max(sample, 1e-9):.0f} decisions/s; "
                f"{done / max(row['sample_cpu_s'], 1e-9):.0f} per CPU-second here), "
                f"learn {learn:.2f} s",
                flush=True,
            )
        algo.stop()
    finally:
        ray.shutdown()
    if profiler:
        profiler.dump_stats(args.profile)

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    decisions = med("decisions")
    print(
        json.dumps(
            {
                "config": args.config,
                "train_batch_size": tc.train_batch_size,
                "num_envs_per_env_runner": tc.num_envs_per_env_runner,
                "num_env_runners": tc.num_env_runners,
                "iterations": args.iterations,
                "sample_decisions_per_s": decisions / med("sample_s"),
                "sample_decisions_per_cpu_s": decisions / med("sample_cpu_s")
                if tc.num_env_runners == 0
                else None,
                "decisions_per_s": decisions / med("wall_s"),
                "sample_s": med("sample_s"),
                "learn_s": med("learn_s"),
                "sample_cpu_s": med("sample_cpu_s"),
                "learn_cpu_s": med("learn_cpu_s"),
                "other_s": med("other_s"),
                "wall_s": med("wall_s"),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
