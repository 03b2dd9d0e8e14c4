"""``marl-sched train`` and ``marl-sched evaluate`` (dispatched lazily by the CLI).
Every bad input raises :class:`~marl_sched.errors.InputError` before any output is
written (exit 2, one line)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import time
from pathlib import Path

from marl_sched.errors import InputError


def _load_train_config(path, overrides=()):
    from agents.config import model_config, train_config
    from marl_sched.config import load_config

    cfg = load_config(path, overrides)
    return cfg, model_config(cfg), train_config(cfg)


def train_command(args: argparse.Namespace) -> int:
    """One run in this process (no ``--seeds``/``--grid``), or an experiment of
    several Ray Tune trials (:mod:`agents.tune`); every input checked before Ray starts."""
    from agents.integrity import check_key
    from agents.run_folder import RunPaths, Stopped, resume_point
    from agents.training import Trainer
    from agents.tune import EXPERIMENT
    from marl_sched.cli import refuse_shipped_folder

    refuse_shipped_folder(args.out)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out: {out}: exists and is not a folder")
    seeds = getattr(args, "seeds", None)
    grid_specs = getattr(args, "grid", None) or []
    if seeds is not None and seeds < 1:
        raise InputError(f"--seeds: must be >= 1, got {seeds}")
    many = bool(grid_specs or (seeds or 1) > 1)
    experiment = (out / EXPERIMENT).is_file() if args.resume else many
    if experiment:
        return _train_experiment(args, out, seeds, grid_specs)
    paths = RunPaths(out)
    if args.resume:
        _refuse_overrides_on_resume(args.overrides, out)
        # latest, the checkpoint's signature (whole tree and state.json) and the run's
        # config equal to its signed copy: all checked before Ray starts
        _, state = resume_point(paths)
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
        check_key(create=True)  # the first checkpoint signs with it: a bad path fails now
    iterations = _iterations(args, tc)
    if args.resume:
        _check_more(state["iteration"], iterations, out)

    check_algorithm(cfg, mc, tc)
    log = _printer(args.quiet)
    t0 = time.perf_counter()
    existed = out.exists()
    try:
        summary = _stoppable(
            args,
            lambda: Trainer(cfg, mc, tc, out, resume=args.resume, log=log,
                            progress=_progress_factory(args.quiet)).run(iterations),
        )  # fmt: skip
    except Stopped as stop:
        print(f"marl-sched: train: stopped by {stop}; {_after_stop(out, existed, args.resume)}",
              file=sys.stderr)  # fmt: skip
        return 128 + stop.signum
    except OSError as exc:
        if exc.filename is not None:
            raise
        # a writer that names no file (TensorBoard's event writer on a full disk): the
        # run folder it writes in; the last complete checkpoint resumes with --resume
        raise OSError(exc.errno, exc.strerror, str(out)) from exc
    if not args.quiet:
        print(
            f"trained iterations {summary['start_iteration'] + 1}..{iterations} "
            f"in {time.perf_counter() - t0:.0f} s; run folder {out}"
        )
    return 0


def _stoppable(args, run):
    """``run()`` with Ray started and stopped; SIGTERM, SIGHUP and SIGINT raise
    :class:`agents.run_folder.Stopped`."""
    import signal

    from agents.run_folder import Stopped, stop_on_signals

    try:
        with stop_on_signals():
            try:
                start_ray(args.ray_address, args.quiet)
            except SystemExit as exc:  # ray.init's own SIGTERM handler: sys.exit(15)
                if exc.code != signal.SIGTERM:
                    raise
                raise Stopped(signal.SIGTERM) from None
            with stop_on_signals():  # again: ray.init replaced the SIGTERM handler
                return run()
    finally:
        stop_ray()


def _after_stop(out: Path, existed: bool, resumed: bool) -> str:
    """What a stopped run leaves: its last checkpoint, or, stopped before the first,
    nothing (the fresh run's folder is removed)."""
    import shutil

    from agents.run_folder import RunPaths

    try:
        latest = RunPaths(out).latest()
    except InputError:
        latest = None
    if latest is not None:
        return f"resume the run in {out} from {latest.name} with --resume"
    if resumed:  # never delete a run that had checkpoints
        return f"the run in {out} is as it was; --resume continues it"
    if existed:  # empty when the run started: everything in it is the run's
        for entry in list(out.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    else:
        shutil.rmtree(out, ignore_errors=True)
    return f"no checkpoint yet, nothing kept in {out}"


def check_algorithm(cfg, mc, tc) -> None:
    """Build (not run) the run's RLlib ``AlgorithmConfig`` when it may be invalid
    (:func:`agents.algorithm.needs_check`), so a bad key exits 2 before Ray starts."""
    from agents.algorithm import needs_check
    from envs.config import env_config

    if tc.advantage == "group" and env_config(cfg).reward.function:
        raise InputError(
            f"{cfg.source}: train.advantage: {tc.advantage} credits each job's share of the "
            "team reward, which a custom env.reward.function does not give; use gae"
        )
    if needs_check(tc):
        import logging

        from agents.algorithm import algo_config, env_setup

        _, _, builder = env_setup(cfg, mc, tc, tc.seed)
        rllib = logging.getLogger("ray.rllib")
        level = rllib.level
        rllib.setLevel(logging.ERROR)  # its "new API stack" notice: once, when training
        try:
            algo_config(cfg, mc, tc, tc.seed, builder.agent_ids)
        finally:
            rllib.setLevel(level)


def _refuse_overrides_on_resume(overrides, out: Path) -> None:
    if overrides:
        raise InputError(
            f"{overrides[0].partition('=')[0]}: --resume continues the run in {out} "
            "with its own config; key=value overrides start a new run"
        )


def _iterations(args, tc) -> int:
    iterations = args.iterations if args.iterations is not None else tc.iterations
    if iterations < 1:
        raise InputError(f"--iterations: must be >= 1, got {iterations}")
    return iterations


def _check_more(done: int, iterations: int, out: Path) -> None:
    if iterations <= done:
        raise InputError(
            f"--iterations: the run in {out} already has {done} iterations; "
            f"ask for more than {done}"
        )


def _train_experiment(args, out: Path, seeds: int | None, grid_specs: list[str]) -> int:
    """``--seeds N`` / ``--grid key=v1,v2``: one Tune trial per grid point × seed,
    each into ``DIR/<trial>/`` (:mod:`agents.tune`); ``--resume`` continues them."""
    from agents.integrity import check_key
    from agents.records import resolved_config
    from agents.run_folder import RunPaths, check_config_data, resume_point
    from agents.tune import (
        RESULTS,
        TrialError,
        make_trials,
        parse_grid,
        read_experiment,
        results_table,
        run_experiment,
        trial_config,
        write_experiment,
    )

    if args.resume:
        if seeds is not None or grid_specs or args.seed is not None:
            raise InputError(
                f"--resume: the experiment in {out} keeps its trials; drop --seeds/--grid/--seed"
            )
        _refuse_overrides_on_resume(args.overrides, out)
        base, source, trials = read_experiment(out)
    else:
        if out.exists() and any(out.iterdir()):
            raise InputError(f"--out: {out}: not empty (use --resume to continue the run there)")
        # the command line's overrides apply first; each trial's grid point on top
        cfg, mc, tc = _load_train_config(args.config, args.overrides)
        first = args.seed if args.seed is not None else tc.seed
        base, source = resolved_config(cfg, mc, tc), str(args.config)
        trials = make_trials(list(range(first, first + (seeds or 1))), parse_grid(grid_specs))
    configs = [trial_config(base, t, source) for t in trials]  # every trial checked now
    iterations = _iterations(args, configs[0][2])
    if args.resume:
        done = []
        for t, (cfg, mc, tc) in zip(trials, configs, strict=True):
            paths = RunPaths(out / t["name"])
            if paths.latest() is None:
                done.append(None)
                continue
            # signed by this tool, its config unedited, before any trial unpickles it
            ckpt, state = resume_point(paths)
            check_config_data(ckpt, resolved_config(cfg, mc, tc))
            done.append(state["iteration"])
        if all(d is not None for d in done):
            _check_more(min(done), iterations, out)
    else:
        check_key(create=True)
        base["train"]["iterations"] = iterations  # experiment.json records what runs
    for config in configs:  # each trial's algorithm and train.rllib, before Ray starts
        check_algorithm(*config)
    tc0 = configs[0][2]
    runners = max(c[2].num_env_runners for c in configs)
    start_ray(args.ray_address, args.quiet)
    t0 = time.perf_counter()
    try:
        if not args.resume:
            write_experiment(out, base, source, trials)
        rows = run_experiment(out, base, source, trials, iterations, quiet=args.quiet,
                              env_runners=runners, keep=tc0.keep_checkpoints)  # fmt: skip
    except TrialError as exc:
        print(f"marl-sched: {exc}", file=sys.stderr)
        return 1
    finally:
        stop_ray()
    # the experiment's result, printed with --quiet too (it is what the command is for)
    print(results_table(rows))
    if not args.quiet:
        print(f"{len(rows)} trials in {time.perf_counter() - t0:.0f} s; experiment folder "
              f"{out}; table in {out / RESULTS}")  # fmt: skip
    return 0


def _printer(quiet: bool):
    if quiet:
        return lambda line: None
    from rich.console import Console

    console = Console(highlight=False)
    return console.print


def _progress_factory(quiet: bool):
    """``(total, label) → bar`` for the Trainer: the CLI's rich bar with ETA on stderr."""
    from marl_sched.cli import Progress

    return lambda total, label: Progress(total, label, quiet)


_RAY_STARTED = False
#: seconds to wait for a TCP answer from --ray-address before giving up
CONNECT_TIMEOUT_S = 5.0


def _check_reachable(address: str) -> None:
    """``InputError`` at once when nothing listens at ``host:port`` (``ray.init`` would
    retry for minutes); ``auto`` and ``ray://`` addresses are left to Ray."""
    import socket

    if address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise InputError(f"--ray-address: {address}: expected host:port (or auto, ray://...)")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        raise InputError(
            f"--ray-address: {address}: no Ray cluster answers there ({reason})"
        ) from None


@contextlib.contextmanager
def _captured_stderr():
    """Everything written to file descriptor 2 (Ray's C++ core logs there) goes to a
    temporary file while the block runs; yields a function returning it."""
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as buf:
        os.dup2(buf.fileno(), 2)
        text: list[str] = []
        try:
            yield lambda: "".join(text)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            buf.seek(0)
            text.append(buf.read().decode("utf-8", "replace"))


def start_ray(
    address: str | None,
    quiet: bool = False,
    num_cpus: int | None = None,
    env_vars: dict[str, str] | None = None,
) -> None:
    """Connect to ``address``, or start a fresh small local Ray (no dashboard, no
    token auth unless ``RAY_AUTH_MODE`` is set) that never attaches to another cluster.
    ``--quiet`` drops Ray's log lines below errors; ``num_cpus`` sizes it (default every
    core); ``env_vars`` reach every worker."""
    global _RAY_STARTED
    import logging

    level = logging.ERROR if quiet else logging.WARNING
    # Ray's C++ core would otherwise install absl's failure handler for SIGTERM in this
    # process: a stop while Ray starts would abort (exit 134) with a stack dump
    # instead of reaching the Python handler (agents.run_folder.stop_on_signals)
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    if not address:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from ray.exceptions import RayError

    for name in ("ray", "ray.rllib", "ray.tune", "ray.train"):
        logging.getLogger(name).setLevel(level)
    # Tune's system monitor asks for GPUtil on every run of this GPU-less tool
    logging.getLogger("ray.tune.utils.util").setLevel(logging.ERROR)
    if address:
        _check_reachable(address)
    if ray.is_initialized():
        return
    # same-seed runs need the same string hashing in every Ray worker too
    runtime_env = {
        "env_vars": {"PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0"), **(env_vars or {})}
    }
    if address:
        # a cluster started with `ray start` uses token authentication when a token
        # exists (~/.ray/auth_token); Ray's driver only picks it up for address="auto",
        # so do the same for an explicit address (RAY_AUTH_MODE set by you wins)
        try:
            from ray._private.authentication.authentication_token_setup import (
                maybe_enable_token_auth_if_token_available,
            )

            maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
        except ImportError:  # another Ray version: RAY_AUTH_MODE as you set it
            pass
        with _captured_stderr() as captured:
            try:
                ray.init(address=address, log_to_driver=False, logging_level=level,
                         runtime_env=runtime_env)  # fmt: skip
                failure = None
            except (ConnectionError, ValueError, RuntimeError, TimeoutError, RayError) as exc:
                failure = str(exc).splitlines()[0]
        if failure is not None:
            # e.g. the cluster wants a token this driver lacks: Ray's core retried for
            # ~20 s, printing a warning per try; the error is this one line
            hint = (" (with token authentication the driver needs the cluster's token: "
                    "~/.ray/auth_token or RAY_AUTH_TOKEN; docs/agents.md)")  # fmt: skip
            raise InputError(f"--ray-address: {address}: {failure}{hint}")
        if not quiet:
            sys.stderr.write(captured())
    else:
        ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False,
                 log_to_driver=False, logging_level=level, runtime_env=runtime_env)  # fmt: skip
    _RAY_STARTED = True


def stop_ray() -> None:
    global _RAY_STARTED
    if _RAY_STARTED:
        import ray

        ray.shutdown()
        _RAY_STARTED = False


def _baseline_kind(path: str) -> str | None:
    """``harmony`` / ``mlfs-rl`` for a baseline checkpoint file, else None."""
    import torch

    from marl_sched.files import check_input

    p = Path(path)
    if not (p.is_file() and p.suffix == ".pt"):
        return None
    check_input(p, "weights", f"--checkpoint: {p}")  # a regular file of bounded size
    try:
        payload = torch.load(p, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001  (not a baseline file: the MARL loader reports it)
        return None
    if isinstance(payload, dict) and payload.get("format") == "marl_sched.baseline":
        return str(payload.get("kind"))
    return None


def _evaluate_baseline(args: argparse.Namespace, kind: str) -> int:
    """Roll a Harmony or MLF-RL checkpoint, or ``--policy`` given ``--checkpoint``, out
    like ``simulate``."""
    from marl_sched.benchmark.suite import warn_if_test_workload
    from marl_sched.cli import (
        RESULT_COLUMNS,
        format_table,
        prepare_out,
        trace_options,
        window_line,
    )
    from marl_sched.config import REPO_ROOT, load_config
    from marl_sched.policies import build_policy, get_policy_class
    from marl_sched.runner import build_cluster, load_workload

    if ":" in kind:  # a module:Class path: its own one-line error if it is no policy
        cls = get_policy_class(kind)
    else:
        try:
            cls = get_policy_class(kind)
        except InputError:
            cls = None
    code = getattr(cls.__init__, "__code__", None) if cls is not None else None
    if code is None or cls.name in ("marl", "single-agent") or (
        "checkpoint" not in code.co_varnames
    ):  # fmt: skip
        raise InputError(
            f"--checkpoint: {args.checkpoint}: kind {kind!r} is not a baseline that loads a "
            "checkpoint file (harmony, mlfs-rl)"
        )
    cfg = load_config(args.config or REPO_ROOT / "configs" / "default.yaml", args.overrides)
    policy = build_policy(kind, args.checkpoint)
    topo, perf = build_cluster(cfg)
    workload = load_workload(cfg, perf, trace_options(args))
    warn_if_test_workload(workload, "evaluate")
    out = prepare_out(args.out)
    metrics = _evaluate_run(args, cfg, kind, workload, topo, perf, policy, out)
    if not args.quiet:
        print(window_line(workload))
        print(format_table([metrics], RESULT_COLUMNS))
        print(f"wrote {out / 'metrics.json'} and {out / 'jobs.csv'}")
    return 0


def evaluate_command(args: argparse.Namespace) -> int:
    """``marl-sched evaluate``: a MARL/single-agent run folder or checkpoint, or a
    Harmony / MLF-RL checkpoint file (``checkpoints/baselines/*.pt``)."""
    kind = getattr(args, "policy", None) or _baseline_kind(args.checkpoint)
    if kind is not None:  # a baseline's file, or --policy (docs/extending.md)
        return _evaluate_baseline(args, kind)
    from agents.policy import MarlPolicy, SingleAgentPolicy, load_checkpoint
    from envs.config import env_config
    from marl_sched.benchmark.suite import warn_if_test_workload
    from marl_sched.cli import (
        RESULT_COLUMNS,
        format_table,
        prepare_out,
        trace_options,
        window_line,
    )
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
    if args.config:  # its model: section must parse (a retired field is refused)
        from agents.config import model_config

        model_config(cfg)
    cls = SingleAgentPolicy if agents.central else MarlPolicy
    topo, perf = build_cluster(cfg)
    policy = cls(agents=agents)
    policy.check_cluster(topo, perf)
    workload = load_workload(cfg, perf, trace_options(args))
    warn_if_test_workload(workload, "evaluate")
    out = prepare_out(args.out)
    metrics = _evaluate_run(args, cfg, cls.name, workload, topo, perf, policy, out)
    if not args.quiet:
        print(window_line(workload))
        print(f"cluster: {topo.describe()}")
        print(format_table([metrics], RESULT_COLUMNS))
        print(f"wrote {out / 'metrics.json'}, {out / 'jobs.csv'} and {out / 'config.yaml'}")
    return 0


def _evaluate_run(args, cfg, name, workload, topo, perf, policy, out) -> dict:
    """Roll ``policy`` out on the workload; its outputs appear in ``out`` all at once
    (or none, interrupted or failed); returns the metrics."""
    from marl_sched.cli import Progress
    from marl_sched.compare import checkpoint_record
    from marl_sched.metrics import staged_folder, write_run
    from marl_sched.runner import simulate

    bar = Progress(len(workload.jobs), f"evaluate {name}", args.quiet)
    try:
        with staged_folder(out) as tmp:
            metrics, records, _ = simulate(
                cfg, name, workload, topo, perf, seed=args.seed, progress=bar, policy=policy
            )
            # the checkpoint acted with (a run folder's best, say) and its content digest
            metrics.update(checkpoint_record(policy) or {"checkpoint": str(args.checkpoint)})
            if not metrics.get("checkpoint"):
                metrics["checkpoint"] = str(args.checkpoint)
            write_run(tmp, metrics, records, workload.resolved(cfg, name))
    finally:
        bar.close()
    return metrics
