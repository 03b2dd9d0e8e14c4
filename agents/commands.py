"""``marl-sched train`` and ``marl-sched evaluate`` (dispatched lazily by the CLI).

::

    marl-sched train    --config C --out DIR [--iterations N] [--ray-address A] [--resume]
                        [--seed S] [--quiet]
    marl-sched evaluate --checkpoint P --trace F --out DIR [--config C] [trace options]

Every bad input (config key, non-empty DIR without ``--resume``, missing or corrupt
or incompatible checkpoint) raises :class:`~marl_sched.errors.InputError` before any
output is written: exit status 2 with one line on stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from marl_sched.errors import InputError


def _load_train_config(path, overrides=()):
    from agents.config import model_config, train_config
    from marl_sched.config import load_config

    cfg = load_config(path, overrides)
    return cfg, model_config(cfg), train_config(cfg)


def train_command(args: argparse.Namespace) -> int:
    from agents.training import RunPaths, Trainer, read_state

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out: {out}: exists and is not a folder")
    paths = RunPaths(out)
    if args.resume:
        if args.overrides:
            raise InputError(
                f"{args.overrides[0].partition('=')[0]}: --resume continues the run in {out} "
                "with its own config; key=value overrides start a new run"
            )
        if paths.latest() is None:
            raise InputError(f"--resume: {out}: no checkpoint to resume from")
        # the run's own resolved config, so the resumed run trains what it started
        cfg, mc, tc = _load_train_config(paths.config)
        if args.seed is not None and args.seed != tc.seed:
            raise InputError(f"--seed: the run in {out} was started with seed {tc.seed}")
    else:
        if out.exists() and any(out.iterdir()):
            raise InputError(f"--out: {out}: not empty (use --resume to continue the run there)")
        cfg, mc, tc = _load_train_config(args.config, args.overrides)
        if args.seed is not None:
            tc = dataclasses.replace(tc, seed=args.seed)
    iterations = args.iterations if args.iterations is not None else tc.iterations
    if iterations < 1:
        raise InputError(f"--iterations: must be >= 1, got {iterations}")
    if args.resume:
        done = read_state(paths.latest())["iteration"]
        if iterations <= done:
            raise InputError(
                f"--iterations: the run in {out} already has {done} iterations; "
                f"ask for more than {done}"
            )

    log = _printer(args.quiet)
    _start_ray(args.ray_address)
    try:
        t0 = time.perf_counter()
        summary = Trainer(cfg, mc, tc, out, resume=args.resume, log=log).run(iterations)
    finally:
        _stop_ray()
    if not args.quiet:
        print(
            f"trained iterations {summary['start_iteration'] + 1}..{iterations} "
            f"in {time.perf_counter() - t0:.0f} s; run folder {out}"
        )
    return 0


def _printer(quiet: bool):
    if quiet:
        return lambda line: None
    from rich.console import Console

    console = Console(highlight=False)
    return console.print


_RAY_STARTED = False


def _start_ray(address: str | None) -> None:
    """Connect to ``address`` or start a small local Ray (no dashboard)."""
    global _RAY_STARTED
    import os

    import ray

    if ray.is_initialized():
        return
    if address:
        try:
            ray.init(address=address, log_to_driver=False)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise InputError(f"--ray-address: {address}: {str(exc).splitlines()[0]}") from None
    else:
        ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
    _RAY_STARTED = True


def _stop_ray() -> None:
    global _RAY_STARTED
    if _RAY_STARTED:
        import ray

        ray.shutdown()
        _RAY_STARTED = False


def _baseline_kind(path: str) -> str | None:
    """``harmony`` / ``mlfs-rl`` for a baseline checkpoint file, else None."""
    import torch

    p = Path(path)
    if not (p.is_file() and p.suffix == ".pt"):
        return None
    try:
        payload = torch.load(p, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001  (not a baseline file: the MARL loader reports it)
        return None
    if isinstance(payload, dict) and payload.get("format") == "marl_sched.baseline":
        return str(payload.get("kind"))
    return None


def _evaluate_baseline(args: argparse.Namespace, kind: str) -> int:
    """Roll a Harmony or MLF-RL checkpoint out like ``simulate`` (same outputs)."""
    from marl_sched.cli import RESULT_COLUMNS, format_table, prepare_out, trace_options
    from marl_sched.config import REPO_ROOT, load_config
    from marl_sched.policies import get_policy_class
    from marl_sched.runner import build_cluster, load_workload

    cfg = load_config(args.config or REPO_ROOT / "configs" / "default.yaml", args.overrides)
    policy = get_policy_class(kind)(checkpoint=args.checkpoint)
    topo, perf = build_cluster(cfg)
    workload = load_workload(cfg, perf, trace_options(args))
    out = prepare_out(args.out)
    metrics = _evaluate_run(args, cfg, kind, workload, topo, perf, policy, out)
    if not args.quiet:
        print(format_table([metrics], RESULT_COLUMNS))
        print(f"wrote {out / 'metrics.json'} and {out / 'jobs.csv'}")
    return 0


def evaluate_command(args: argparse.Namespace) -> int:
    """``marl-sched evaluate``: a MARL/single-agent run folder or checkpoint, or a
    Harmony / MLF-RL checkpoint file (``checkpoints/baselines/*.pt``)."""
    kind = _baseline_kind(args.checkpoint)
    if kind is not None:
        return _evaluate_baseline(args, kind)
    from agents.policy import MarlPolicy, SingleAgentPolicy, load_checkpoint
    from envs.config import env_config
    from marl_sched.cli import RESULT_COLUMNS, format_table, prepare_out, trace_options
    from marl_sched.config import config_from_dict, load_config
    from marl_sched.runner import build_cluster, load_workload

    agents = load_checkpoint(args.checkpoint)
    if args.config:
        cfg = load_config(args.config, args.overrides)
    elif "config" in agents.manifest:
        cfg = config_from_dict(agents.manifest["config"], f"{args.checkpoint}: manifest config")
        cfg = load_config(cfg, args.overrides)
    else:
        raise InputError(f"{args.checkpoint}: checkpoint holds no config; pass --config")
    agents.check_env(env_config(cfg), f"{cfg.source}: env")  # mismatched option → exit 2
    cls = SingleAgentPolicy if agents.central else MarlPolicy
    topo, perf = build_cluster(cfg)
    policy = cls(agents=agents)
    policy.check_cluster(topo, perf)
    workload = load_workload(cfg, perf, trace_options(args))
    out = prepare_out(args.out)
    metrics = _evaluate_run(args, cfg, cls.name, workload, topo, perf, policy, out)
    if not args.quiet:
        print(f"cluster: {topo.describe()}")
        print(f"trace:   {workload.trace_path} ({len(workload.jobs)} jobs)")
        print(format_table([metrics], RESULT_COLUMNS))
        print(f"wrote {out / 'metrics.json'}, {out / 'jobs.csv'} and {out / 'config.yaml'}")
    return 0


def _evaluate_run(args, cfg, name, workload, topo, perf, policy, out) -> dict:
    """Roll ``policy`` out on the workload; its outputs appear in ``out`` all at once
    (or none, interrupted or failed); returns the metrics."""
    from marl_sched.cli import Progress
    from marl_sched.metrics import staged_folder, write_run
    from marl_sched.runner import simulate

    bar = Progress(len(workload.jobs), f"evaluate {name}", args.quiet)
    try:
        with staged_folder(out) as tmp:
            metrics, records, _ = simulate(
                cfg, name, workload, topo, perf, seed=args.seed, progress=bar, policy=policy
            )
            metrics["checkpoint"] = str(args.checkpoint)
            write_run(tmp, metrics, records, workload.resolved(cfg))
    finally:
        bar.close()
    return metrics
