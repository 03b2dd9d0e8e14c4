"""``marl-sched``: the command line (reference: docs/guide.md).

::

    marl-sched simulate --config C [--trace F] [trace options] [--policy NAME] --out DIR
    marl-sched train    --config C --out DIR [--iterations N] [--ray-address A] [--resume]
                        [--seeds N] [--grid key=v1,v2]
    marl-sched evaluate --checkpoint P [--config C] [--trace F] [trace options] --out DIR
    marl-sched compare  --config C [--trace F] --policies a,b,... [--checkpoint P]
                        [--seeds N] [...] --out DIR
    marl-sched benchmark [--suite S] --split train|validation|test --policies a,b,...
                        [...] --out DIR
    marl-sched interference fit --config C --out DIR | interference report --model P
    marl-sched trace inspect F [--trace-format ...]
    marl-sched policies

Commands with ``--config`` take ``key=value`` overrides anywhere on the line, checked
like the file. With ``--trace F`` the window is all of F's jobs unless ``--start`` /
``--max-jobs`` say otherwise. Exit 0 on success, 2 on bad input with one line naming
the file, line or key; torch and Ray are imported only by the commands that need them."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from marl_sched.errors import InputError

# commands implemented in the heavier layers: "module:function", imported on use
LAZY_COMMANDS = {
    "train": "agents.commands:train_command",
    "evaluate": "agents.commands:evaluate_command",
    "compare": "marl_sched.compare:compare_command",
    "interference": "agents.interference_cli:interference_command",
    "benchmark": "marl_sched.benchmark.command:benchmark_command",
}


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # "marl-sched simulate" -> "simulate": main adds the "marl-sched: error:" prefix
        command = self.prog.partition(" ")[2]
        raise InputError(f"{command}: {message}" if command else message)


#: upper bounds of the numeric flags, checked before any work (``_check_bounds``)
MAX_SEED = 2**32 - 1
MAX_SEEDS = 1000
#: the most Ray Tune trials ``train --seeds N --grid ...`` may start (seeds x grid points)
MAX_TRIALS = 1000
MAX_ITERATIONS = 10**7
MAX_JOBS_FLAG = 10**9


def int_arg(text: str) -> int:
    """An integer flag: ASCII ``[+-]digits``, at most 18 digits (``int()`` would take
    ``"٣"`` as 3 and spend its time on a 100,000-digit number)."""
    import re

    if not re.fullmatch(r"[+-]?[0-9]{1,18}", text.strip()):
        raise argparse.ArgumentTypeError(
            f"not an integer (ASCII digits, at most 18 of them): {_short(text)}"
        )
    return int(text)


def float_arg(text: str) -> float:
    """A number flag: ASCII only, at most 64 characters, then ``float()``."""
    if not text.isascii() or len(text) > 64:
        raise argparse.ArgumentTypeError(
            f"not a number (ASCII, at most 64 characters): {_short(text)}"
        )
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {_short(text)}") from None


def _short(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _trace_options(p: argparse.ArgumentParser, trace_required: bool = False) -> None:
    p.add_argument(
        "--trace",
        required=trace_required,
        help="trace file (default: the config's); all its jobs unless --start / --max-jobs",
    )
    p.add_argument(
        "--trace-format",
        choices=["auto", "canonical", "philly", "alibaba", "pollux"],
        help="trace format (default: detect from the header)",
    )
    p.add_argument("--start", type=int_arg, help="index of the first job of the window")
    p.add_argument("--max-jobs", type=int_arg, help="number of jobs in the window")
    p.add_argument("--load", type=float_arg, help="arrival-rate multiplier (2 = twice as fast)")
    p.add_argument("--seed", type=int_arg, help="seed of fill rules and policies")
    p.add_argument(
        "--drop-unplaceable",
        action="store_true",
        help="leave out jobs the empty cluster cannot hold (counted in metrics.json) "
        "instead of refusing the trace",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")


#: the commands that read an experiment config, and so take ``key=value`` overrides
OVERRIDE_COMMANDS = ("simulate", "train", "evaluate", "compare", "benchmark", "interference fit")
OVERRIDE_HELP = (
    "Commands that take --config also take key=value overrides of its keys, anywhere on "
    "the line (train.lr=1e-4 env.hints=[first-fit] topology.subclusters=2)."
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="marl-sched",
        description=__doc__.split("\n")[0],
        epilog=OVERRIDE_HELP,
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser(
        "simulate", help="replay a trace under one placement policy", epilog=OVERRIDE_HELP
    )
    p.add_argument("--config", required=True)
    p.add_argument("--policy", help="placement policy (default: the config's)")
    p.add_argument("--out", required=True, help="output folder")
    _trace_options(p)

    p = sub.add_parser("train", help="train the MARL agents with RLlib", epilog=OVERRIDE_HELP)
    p.add_argument("--config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--iterations", type=int_arg)
    p.add_argument("--ray-address")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--seed", type=int_arg, help="seed (the first of --seeds)")
    p.add_argument("--seeds", type=int_arg, help="N Ray Tune trials, seeds S..S+N-1")
    p.add_argument("--grid", action="append", metavar="KEY=V1,V2",
                   help="a Ray Tune trial per value (repeatable: the product)")  # fmt: skip
    p.add_argument("--quiet", action="store_true")

    p = sub.add_parser(
        "evaluate", help="roll a checkpoint out on a trace window", epilog=OVERRIDE_HELP
    )
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--policy", help="the policy that loads it: a name or module:Class "
                   "(default: what the checkpoint is)")  # fmt: skip
    p.add_argument("--config")
    p.add_argument("--out", required=True)
    _trace_options(p)

    p = sub.add_parser(
        "compare", help="run several policies on the same trace window", epilog=OVERRIDE_HELP
    )
    p.add_argument("--config", required=True)
    p.add_argument("--policies", required=True)
    p.add_argument("--checkpoint")
    p.add_argument("--out", required=True)
    p.add_argument(
        "--seeds", type=int_arg, default=1, help="runs per policy, seeds S, S+1, ... (default 1)"
    )
    _trace_options(p)

    p = sub.add_parser(
        "benchmark",
        help="policies x scenarios x seeds of a suite split",
        epilog="key=value overrides change the suite's base config (not the keys every "
        "scenario sets: topology, the trace window, load, seed).",
    )
    p.add_argument("--suite", help="suite file (default: benchmarks/default.yaml)")
    p.add_argument(
        "--split",
        required=True,
        help="train, validation or test (no default: the test split must be asked for)",
    )
    p.add_argument("--policies", required=True)
    p.add_argument(
        "--track",
        default="placement",
        help="placement (migration off for every policy, the default) or full (on)",
    )
    p.add_argument(
        "--migration-cost-scale",
        help="sensitivity: rerun at these multiples of the migration cost (e.g. "
        "0.5,1,2,5; track full) and write sensitivity.md: Kendall tau vs x1, winner",
    )
    p.add_argument(
        "--gavel-spread",
        action="store_true",
        help="sensitivity: also run the spread-cost variant calibrated to Gavel's "
        "measured spread/packed ratio 1.38 (simulation.nic_efficiency_scale)",
    )
    p.add_argument("--checkpoint")
    p.add_argument("--seeds", type=int_arg, default=3)
    p.add_argument("--out", required=True)
    p.add_argument("--ray-address", help="an existing Ray cluster (default: start one)")
    p.add_argument("--local", action="store_true", help="run in this process, no Ray")
    p.add_argument(
        "--duration-estimate", help="none, oracle, noisy or history (default: the config's)"
    )
    p.add_argument("--quiet", action="store_true")

    p = sub.add_parser("interference", help="fit or report the learned interference model")
    isub = p.add_subparsers(dest="action", required=True, parser_class=_Parser)
    q = isub.add_parser("fit", epilog=OVERRIDE_HELP)
    q.add_argument("--config", required=True)
    q.add_argument("--out", required=True)
    q.add_argument("--samples", type=int_arg)
    q.add_argument("--seed", type=int_arg)
    q.add_argument("--quiet", action="store_true")
    q = isub.add_parser("report")
    q.add_argument("--model", required=True)

    p = sub.add_parser("trace", help="trace utilities")
    tsub = p.add_subparsers(dest="action", required=True, parser_class=_Parser)
    q = tsub.add_parser("inspect", help="summary of a trace")
    q.add_argument("file")
    q.add_argument("--trace-format", choices=["auto", "canonical", "philly", "alibaba", "pollux"])
    q.add_argument("--start", type=int_arg, default=0)
    q.add_argument("--max-jobs", type=int_arg)
    q.add_argument("--load", type=float_arg, default=1.0)
    q.add_argument("--gpus", type=int_arg, help="cluster GPUs, to report the offered load")

    sub.add_parser("policies", help="list the placement policies")
    return parser


# ---------------------------------------------------------------------------- helpers


#: the repository's folders of shipped files, which no command writes into
SHIPPED_FOLDERS = ("checkpoints", "benchmarks", "configs")


def refuse_shipped_folder(out: str | Path, flag: str = "--out") -> None:
    """Refuse (``InputError``) an output folder inside :data:`SHIPPED_FOLDERS` (links
    resolved)."""
    from marl_sched.config import REPO_ROOT

    try:
        real = Path(out).resolve()
    except (OSError, RuntimeError) as exc:
        raise InputError(f"{flag}: {out}: cannot resolve ({exc})") from None
    for name in SHIPPED_FOLDERS:
        shipped = (REPO_ROOT / name).resolve()
        if real == shipped or real.is_relative_to(shipped):
            raise InputError(
                f"{flag}: {out}: inside the repository's {name}/ (shipped files); "
                "write the outputs somewhere else"
            )


def prepare_out(out: str | Path) -> Path:
    """The output folder; refuses an existing file or a path under one, an unwritable
    nearest folder and a dangling link (a link to a folder resolves to it)."""

    refuse_shipped_folder(out)
    path = Path(out)
    if path.is_symlink():  # a link to a folder is that folder; anything else is refused
        if not path.exists():
            raise InputError(f"--out: {out}: a link to nothing ({os.readlink(path)})")
        path = path.resolve()
    if path.exists() and not path.is_dir():
        raise InputError(f"--out: {out}: exists and is not a folder")
    if len(path.name.encode("utf-8", "surrogatepass")) > 255:
        raise InputError(f"--out: {_short(out)}: the folder name is longer than 255 bytes")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"--out: {out}: {parent} is a file, not a folder")
            # the outputs are staged beside --out, so its folder must take new entries
            if not os.access(parent, os.W_OK | os.X_OK):
                raise InputError(f"--out: {out}: cannot write in {parent}")
            break
    return path


class Progress:
    """A rich progress bar over jobs completed (on stderr), or nothing with ``quiet``."""

    def __init__(self, total: int, label: str, quiet: bool) -> None:
        self.quiet = quiet
        self._bar = None
        if not quiet:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                transient=False,
                console=Console(stderr=True),
            )
            self._task = self._bar.add_task(label, total=total)
            self._bar.start()

    def __call__(self, done: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def format_table(rows: Sequence[dict], columns: Sequence[tuple[str, str, str]]) -> str:
    """A plain text table; ``columns`` = (key, header, format spec)."""
    head = [h for _, h, _ in columns]
    body = []
    for r in rows:
        line = []
        for key, _, spec in columns:
            v = r.get(key, "")
            line.append(format(v, spec) if isinstance(v, int | float) and spec else str(v))
        body.append(line)
    widths = [
        max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)
    ]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    sep = "  ".join("-" * w for w in widths)
    return "\n".join([fmt.format(*head), sep, *(fmt.format(*b) for b in body)])


RESULT_COLUMNS = (
    ("policy", "policy", ""),
    ("jobs_completed", "jobs", "d"),
    ("avg_jct_s", "avg JCT (s)", ".0f"),
    ("p50_jct_s", "p50 (s)", ".0f"),
    ("p95_jct_s", "p95 (s)", ".0f"),
    ("avg_queue_s", "queue (s)", ".0f"),
    ("avg_slowdown", "slowdown", ".3f"),
    ("gpu_utilization", "GPU util", ".3f"),
    ("gpu_utilization_steady", "util steady", ".3f"),
    ("jobs_queued_frac", "queued", ".3f"),
    ("decision_ms_p50", "dec p50 (ms)", ".3f"),
    ("wall_s", "wall (s)", ".1f"),
)


# ---------------------------------------------------------------------------- commands


def trace_options(args: argparse.Namespace):
    """The run's :class:`~marl_sched.runner.TraceOptions` from the trace flags."""
    from marl_sched.runner import TraceOptions

    return TraceOptions(
        args.trace,
        args.trace_format,
        args.start,
        args.max_jobs,
        args.load,
        args.seed,
        drop_unplaceable=getattr(args, "drop_unplaceable", False),
        own_window=args.command in ("simulate", "evaluate"),  # compare: marl_sched.compare
    )


def cmd_simulate(args: argparse.Namespace) -> int:
    from marl_sched.benchmark.suite import warn_if_test_workload
    from marl_sched.config import load_config
    from marl_sched.metrics import staged_folder, write_run
    from marl_sched.policies import get_policy_class
    from marl_sched.policies.planner import check_horizon
    from marl_sched.runner import build_cluster, load_workload, simulate

    cfg = load_config(args.config, args.overrides)
    policy = args.policy if args.policy is not None else cfg.simulation.policy
    try:
        get_policy_class(policy)  # unknown name → exit 2 before any work
    except InputError as exc:
        if args.policy is not None:
            raise
        # the config named it: say so, not --policy
        problem = str(exc).removeprefix("--policy: ")
        raise InputError(f"{cfg.source}: simulation.policy: {problem}") from None
    out = prepare_out(args.out)
    topo, perf = build_cluster(cfg)
    workload = load_workload(cfg, perf, trace_options(args))
    check_horizon(cfg, policy, workload.jobs)
    warn_if_test_workload(workload, "simulate")
    bar = Progress(len(workload.jobs), f"simulate {policy}", args.quiet)
    try:
        with staged_folder(out) as tmp:  # every output at once, or none
            metrics, records, _ = simulate(
                cfg, policy, workload, topo, perf, seed=args.seed, progress=bar
            )
            write_run(tmp, metrics, records, workload.resolved(cfg, policy))
    finally:
        bar.close()
    print(window_line(workload))
    print(f"cluster: {topo.describe()}")
    print(format_table([metrics], RESULT_COLUMNS))
    print(f"wrote {out / 'metrics.json'}, {out / 'jobs.csv'} and {out / 'config.yaml'}")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from marl_sched.traces import format_summary, load_trace, summarize

    fmt = None if args.trace_format in (None, "auto") else args.trace_format
    trace = load_trace(args.file, fmt, start=args.start, max_jobs=args.max_jobs, load=args.load)
    print(format_summary(summarize(trace, args.gpus)))
    return 0


def cmd_policies(args: argparse.Namespace) -> int:
    from marl_sched.policies import policy_entries

    entries = policy_entries()
    width = max(len(n) for n in entries)
    kind_width = max(len(e.kind) for e in entries.values())
    for name, e in entries.items():
        print(f"{name:<{width}}  {e.kind:<{kind_width}}  {e.description}")
    return 0


LOCAL_COMMANDS = {"simulate": cmd_simulate, "trace": cmd_trace, "policies": cmd_policies}


#: (flag, low, high) of every bounded numeric flag
FLAG_BOUNDS = (
    ("seed", 0, MAX_SEED),
    ("seeds", 0, MAX_SEEDS),
    ("iterations", -MAX_ITERATIONS, MAX_ITERATIONS),
    ("start", -MAX_JOBS_FLAG, MAX_JOBS_FLAG),
    ("max_jobs", -MAX_JOBS_FLAG, MAX_JOBS_FLAG),
    ("gpus", -MAX_JOBS_FLAG, MAX_JOBS_FLAG),
)


def _check_bounds(args: argparse.Namespace) -> None:
    """Numeric flags within their bounds, and a grid of at most :data:`MAX_TRIALS`
    trials, before any work (the commands check the low ends they care about)."""
    for name, low, high in FLAG_BOUNDS:
        value = getattr(args, name, None)
        flag = "--" + name.replace("_", "-")
        if isinstance(value, int) and value < 0 and low == 0:
            raise InputError(f"{flag}: must be >= 0, got {value}")
        if isinstance(value, int) and not low <= value <= high:
            raise InputError(f"{flag}: must be in [{low:,}, {high:,}], got {value:,}")
    grid = getattr(args, "grid", None) or []
    trials = max(1, getattr(args, "seeds", None) or 1)
    for spec in grid:
        trials *= max(1, len(spec.partition("=")[2].split(",")))
        if trials > MAX_TRIALS:
            raise InputError(
                f"--grid: {len(grid)} grid keys x --seeds make more than {MAX_TRIALS:,} "
                f"trials (at {spec!r})"
            )


def _run(args: argparse.Namespace) -> int:
    _check_bounds(args)
    if isinstance(getattr(args, "out", None), str) and not args.out.strip():
        raise InputError("--out: empty path (name an output folder)")
    if getattr(args, "policy", None) is not None and not args.policy.strip():
        raise InputError("--policy: empty name (leave the flag out to use the config's)")
    command = _command_name(args)
    if args.overrides and command not in OVERRIDE_COMMANDS:
        raise InputError(f"{command}: unrecognized arguments: {' '.join(args.overrides)}")
    if args.command in LOCAL_COMMANDS:
        return LOCAL_COMMANDS[args.command](args)
    module, _, func = LAZY_COMMANDS[args.command].partition(":")
    try:
        handler = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"{args.command}: not available in this install: {exc}") from None
    return int(handler(args) or 0)


def _fixed_hash_seed() -> None:
    """Re-execute ``marl-sched train`` once with ``PYTHONHASHSEED=0`` unless the caller
    fixed one: RLlib's batch order follows the string hash seed."""

    if sys.argv[1:2] == ["train"] and os.environ.get("PYTHONHASHSEED", "random") == "random":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", "marl_sched.cli", *sys.argv[1:]])


def _command_name(args: argparse.Namespace) -> str:
    """``simulate``, ``interference fit``: the command and its action, if any."""
    return " ".join(filter(None, (args.command, getattr(args, "action", None))))


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Options as argparse reads them, plus ``args.overrides``: the ``key=value``
    words, anywhere on the line (checked against the config when it is loaded)."""
    args, extra = parser.parse_known_args(argv)
    bad = [a for a in extra if a.startswith("-") or "=" not in a]
    if bad:
        command = _command_name(args)
        raise InputError(f"{command}: unrecognized arguments: {' '.join(bad)}")
    args.overrides = extra
    return args


def window_line(workload) -> str:
    """The first line a run prints: the jobs it scores (after any warm-up) and of which trace."""
    wl, n = workload.config, len(workload.jobs) - workload.warmup
    warm = f", after {workload.warmup} warm-up jobs" if workload.warmup else ""
    return f"scored:  {workload.trace_path} jobs {wl.start}–{wl.start + n - 1} ({n} jobs{warm})"


class Terminated(BaseException):  # noqa: N818 (a signal, like KeyboardInterrupt)
    """SIGTERM or SIGHUP, raised in the main thread so that every ``finally`` runs
    (staging folders are removed, nothing is left half-written)."""

    def __init__(self, signum: int) -> None:
        import signal

        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, frame) -> None:
    raise Terminated(signum)


def _install_signal_handlers() -> dict:
    """SIGTERM and SIGHUP raise :class:`Terminated` (so staging folders are cleaned up);
    returns the previous handlers."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            previous[sig] = signal.signal(sig, _raise_terminated)
    return previous


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``marl-sched`` console script."""
    import signal

    # Ray's C++ failure-signal handler catches SIGTERM too: it dumps a stack and aborts
    # (exit 134) after our handler ran. Without it SIGTERM is one line, exit 143, a run
    # resumable. Read when ray is first imported (train, benchmark, evaluate of a run
    # folder may import it), so set before any command runs; set
    # RAY_DISABLE_FAILURE_SIGNAL_HANDLER=0 to keep Ray's crash dumps.
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    if argv is None:
        _fixed_hash_seed()
    parser = build_parser()
    previous = _install_signal_handlers()
    try:
        return _main(parser, argv)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _quiet_thread_write_errors() -> None:
    """A background writer thread's (TensorBoard's) disk error is reported once, by
    the thread that owns it, without its own traceback."""
    import threading

    from marl_sched.files import WRITE_ERRNOS

    default = threading.excepthook

    def hook(args) -> None:
        if isinstance(args.exc_value, OSError) and args.exc_value.errno in WRITE_ERRNOS:
            return
        default(args)

    threading.excepthook = hook


def _main(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    _quiet_thread_write_errors()
    try:
        with warnings.catch_warnings(record=True) as caught:
            try:
                args = parse_args(parser, argv)
                status = _run(args)
            except BaseException:
                caught.clear()  # a library's warning never precedes the error line
                raise
        for w in caught:  # shown after a run that worked
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        return status
    except InputError as exc:
        print(f"marl-sched: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        from marl_sched.files import write_failure

        # a full disk, a quota, a read-only or forbidden folder: one line naming the
        # path (the atomic writers and staging folders removed what they staged)
        failure = write_failure(exc)
        if failure is None:
            raise
        print(f"marl-sched: error: {failure}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("marl-sched: interrupted", file=sys.stderr)
        return 130
    except Terminated as exc:
        print(f"marl-sched: terminated by {exc}", file=sys.stderr)
        return 128 + exc.signum
    except SystemExit as exc:
        import signal

        # ray.init replaces the SIGTERM handler with sys.exit(signum): the same signal
        if exc.code == signal.SIGTERM:
            print("marl-sched: terminated by SIGTERM", file=sys.stderr)
            return 128 + signal.SIGTERM
        raise


if __name__ == "__main__":
    sys.exit(main())
