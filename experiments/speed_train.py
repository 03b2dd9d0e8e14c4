"""PPO training throughput: sampling decisions per second and seconds per phase.

::

    python experiments/speed_train.py [--config configs/default.yaml] [--iterations 2]
        [--batch 1000] [--envs N] [--runners 0] [--profile FILE]

Builds the run's RLlib algorithm as ``marl-sched train`` does (no warm start: the
weights do not change the work), runs one untimed iteration, then times
``--iterations`` calls of ``algo.train()``, split by wrapping the calls into
``sample_s`` (the env runner's ``sample()``), ``learn_s`` (the learner's update) and
``other_s``, each in wall and CPU seconds of this process. ``--batch`` overrides
``train.train_batch_size``, ``--envs`` ``train.num_envs_per_env_runner``, ``--runners``
``train.num_env_runners``. Prints one line per iteration and, last, one JSON object:
``sample_decisions_per_s`` (decisions / ``sample_s``),
``sample_decisions_per_cpu_s`` (with ``--runners 0``), ``decisions_per_s`` and the
medians per phase (``docs/agents.md``, "Throughput"). ``--profile FILE`` writes a
cProfile of the timed iterations. Recorded figures, old and new code in turn:
``results/speed-train/README.md``.
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

from marl_sched.config import REPO_ROOT


def build_algo(config: str, batch: int | None, envs: int | None, runners: int | None):
    """The training run's algorithm (``agents.algorithm.algo_config``), and its config."""
    from agents.algorithm import algo_config, env_setup
    from agents.config import model_config, train_config
    from marl_sched.config import load_config

    cfg = load_config(config)
    mc, tc = model_config(cfg), train_config(cfg)
    given = {"train_batch_size": batch, "num_envs_per_env_runner": envs, "num_env_runners": runners}
    changes = {k: v for k, v in given.items() if v is not None}
    if batch is not None:
        changes["minibatch_size"] = min(tc.minibatch_size, batch)
    tc = dataclasses.replace(tc, **changes)
    _, _, builder = env_setup(cfg, mc, tc, tc.seed)
    return algo_config(cfg, mc, tc, tc.seed, builder.agent_ids).build_algo(), tc


class PhaseClock:
    """Wall and CPU seconds spent in wrapped calls, per phase: the CPU split that
    RLlib's timers (``agents.records.phase_times``: wall only) do not give."""

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
                s[f"{phase}_s"] = s.get(f"{phase}_s", 0.0) + time.perf_counter() - t0
                s[f"{phase}_cpu_s"] = s.get(f"{phase}_cpu_s", 0.0) + time.process_time() - c0

        setattr(obj, method, timed)

    def take(self) -> dict[str, float]:
        out, self.seconds = self.seconds, {}
        return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(REPO_ROOT / "configs" / "default.yaml"))
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
        last = algo.train()["num_env_steps_sampled_lifetime"]  # warm-up, connectors built
        profiler = cProfile.Profile() if args.profile else None
        rows = []
        for it in range(args.iterations):
            clock.take()
            if profiler:
                profiler.enable()
            t0 = time.perf_counter()
            result = algo.train()
            wall = time.perf_counter() - t0
            if profiler:
                profiler.disable()
            steps = result["num_env_steps_sampled_lifetime"]
            done, last = steps - last, steps
            row = {"decisions": done, "wall_s": wall, "sample_cpu_s": 0.0, "learn_s": 0.0}
            row |= clock.take()
            # remote env runners sample in other processes: the driver waits for them
            # for the whole iteration but the update, and their CPU is not ours to count
            row.setdefault("sample_s", wall - row["learn_s"])
            row["other_s"] = max(wall - row["sample_s"] - row["learn_s"], 0.0)
            rows.append(row)
            # remote runners' CPU is not measured here: no per-CPU-second figure then
            cpu = row["sample_cpu_s"]
            per_cpu = f"{done / cpu:.0f} per CPU-second here" if cpu > 0 else "CPU in the runners"
            print(
                f"iteration {it + 1}: {done:.0f} decisions, wall {wall:.2f} s, sample "
                f"{row['sample_s']:.2f} s ({done / max(row['sample_s'], 1e-9):.0f} decisions/s; "
                f"{per_cpu}), learn {row['learn_s']:.2f} s",
                flush=True,
            )
        algo.stop()
    finally:
        ray.shutdown()
    if profiler:
        profiler.dump_stats(args.profile)

    med = {k: statistics.median(r.get(k, 0.0) for r in rows) for k in rows[0]}
    decisions = med.pop("decisions")
    figures = {
        "config": args.config,
        "train_batch_size": tc.train_batch_size,
        "num_envs_per_env_runner": tc.num_envs_per_env_runner,
        "num_env_runners": tc.num_env_runners,
        "iterations": args.iterations,
        "sample_decisions_per_s": decisions / med["sample_s"],
        "sample_decisions_per_cpu_s": decisions / med["sample_cpu_s"]
        if tc.num_env_runners == 0
        else None,
        "decisions_per_s": decisions / med["wall_s"],
    }
    print(json.dumps(figures | med))


if __name__ == "__main__":
    main(sys.argv[1:])
