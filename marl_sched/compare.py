"""``marl-sched compare``: several policies on the same trace window, side by side.

Each policy runs in its own worker process on the same jobs, topology and seed; with
``--seeds N`` run ``k`` uses seed ``S + k`` and workload seed ``+ k``, as a benchmark
cell does. Outputs, each written atomically:

- ``DIR/<policy>/{metrics.json,jobs.csv,config.yaml}`` (as ``simulate``; one
  ``seed<S>/`` folder per seed with ``--seeds`` > 1) and ``DIR/config.yaml``;
- ``DIR/runs.csv``: one row per policy and seed (metrics, seed, checkpoint and digest);
- ``DIR/results.csv`` and ``DIR/results.md``: one row per policy, each metric the mean
  over seeds, the ratio of the average JCT to the best baseline (every policy but
  ``marl``) and the 95 % Student-t half-width over seeds (none for one seed);
- ``DIR/jct_cdf.png`` (first seed) and ``DIR/avg_jct.png`` (mean, error bars).

``--checkpoint P`` goes to ``marl`` and ``single-agent``; ``--checkpoint
marl=P1,harmony=P2`` names one per policy; otherwise a learned policy loads its shipped
checkpoint."""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from marl_sched.errors import InputError

if TYPE_CHECKING:
    from marl_sched.config import ExperimentConfig

RESULT_FIELDS = (
    "policy",
    "jobs_completed",
    "avg_jct_s",
    "p50_jct_s",
    "p95_jct_s",
    "p99_jct_s",
    "avg_queue_s",
    "avg_slowdown",
    "gpu_utilization",
    "migrations",
    "migration_delay_s",
    "decision_ms_p50",
    "decision_ms_p99",
    "wall_s",
    "ratio_to_best_baseline",
    "seeds",
    "avg_jct_ci95_s",
    "checkpoint",
    "checkpoint_sha256",
)
RUN_FIELDS = (*RESULT_FIELDS[:12], "seed", "checkpoint", "checkpoint_sha256")
OURS = ("marl",)


def checkpoint_record(policy) -> dict[str, str]:
    """The checkpoint a built policy acts with (repo-relative when inside it) and its
    12-hex digest (:func:`marl_sched.benchmark.cells.checkpoint_id`); empty for a
    heuristic. Duck-typed (``path`` or ``agents.path``): marl_sched imports no agents."""
    from marl_sched.benchmark.cells import checkpoint_id

    path = getattr(policy, "path", None) or getattr(getattr(policy, "agents", None), "path", None)
    if not path or not Path(str(path)).exists():
        return {"checkpoint": "", "checkpoint_sha256": ""}
    from marl_sched.config import REPO_ROOT

    path = Path(str(path)).resolve()
    shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
    return {"checkpoint": str(shown), "checkpoint_sha256": checkpoint_id(path)}


def _run_one(task: dict[str, Any]) -> tuple[dict[str, Any], list[float]]:
    """Worker: one policy on the window; writes its own folder, returns metrics + JCTs."""
    from marl_sched.config import load_config
    from marl_sched.metrics import write_run
    from marl_sched.policies import build_policy
    from marl_sched.runner import TraceOptions, build_cluster, load_workload, simulate

    cfg = load_config(task["config"])
    topo, perf = build_cluster(cfg)
    workload = load_workload(cfg, perf, TraceOptions(**task["trace_options"]))
    policy = build_policy(task["policy"], task["checkpoint"], topo, perf, config=cfg)
    metrics, records, _ = simulate(
        cfg, task["policy"], workload, topo, perf, seed=task["seed"], policy=policy
    )
    metrics.update(checkpoint_record(policy), seed=task["seed"])
    write_run(Path(task["out"]), metrics, records, workload.resolved(cfg, task["policy"]))
    return metrics, [r.jct for r in records]


def _quiet_worker(parent: int) -> None:
    """A worker's start: SIGTERM and SIGHUP end it silently, SIGINT is ignored, and
    on Linux it dies with ``parent``."""
    import signal

    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            pr_set_pdeathsig = 1
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def _run_pool(tasks: list[dict], n_workers: int, results: dict, progress) -> None:
    """The tasks on ``n_workers`` worker processes, their results into ``results``.
    Stopped, the workers are terminated and unstarted tasks dropped; a worker killed from
    outside is an ``InputError``."""
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(
        max_workers=n_workers, initializer=_quiet_worker, initargs=(os.getpid(),)
    )
    try:
        futures = {pool.submit(_run_one, t): (t["policy"], t["seed"]) for t in tasks}
        for fut in futures:
            results[futures[fut]] = fut.result()
            if progress:
                progress(len(results))
    except BrokenProcessPool:
        _stop_workers(pool)
        raise InputError("compare: a worker process was killed; nothing written") from None
    except BaseException:
        _stop_workers(pool)
        raise
    pool.shutdown()


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        if proc.is_alive():
            proc.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


OWN_CHECKPOINT_POLICIES = ("marl", "single-agent")


def checkpoints_by_policy(spec: str | None, policies: list[str]) -> dict[str, str]:
    """``--checkpoint``: a path for our agents, or ``name=path,...`` per policy."""
    if not spec:
        return {}
    if "=" not in spec:
        return {p: spec for p in policies if p in OWN_CHECKPOINT_POLICIES}
    out = {}
    for item in spec.split(","):
        name, sep, path = item.partition("=")
        name = name.strip()
        if not sep or not path.strip():
            raise InputError(f"--checkpoint: expected name=path, got {item!r}")
        if name not in policies:
            raise InputError(f"--checkpoint: {name!r} is not one of --policies")
        if name in out:
            raise InputError(f"--checkpoint: {name!r} is named twice")
        out[name] = path.strip()
    return out


def check_compare(
    config: str | ExperimentConfig,
    policies: list[str],
    trace_options: dict[str, Any],
    checkpoint: str | None,
):
    """Check every input of a comparison before any work (``InputError``). Returns
    ``(config, checkpoints by policy)``, the config with the trace options applied."""
    from marl_sched.benchmark.suite import warn_if_test_workload
    from marl_sched.config import load_config
    from marl_sched.policies import build_policy, get_policy_class
    from marl_sched.policies.planner import check_horizon
    from marl_sched.runner import TraceOptions, build_cluster, load_workload

    cfg = load_config(config)
    for name in policies:
        get_policy_class(name)
    topo, perf = build_cluster(cfg)
    workload = load_workload(cfg, perf, TraceOptions(**trace_options))
    for name in policies:
        check_horizon(cfg, name, workload.jobs)
    warn_if_test_workload(workload, "compare")
    ckpts = checkpoints_by_policy(checkpoint, policies)
    for name in policies:
        policy = build_policy(name, ckpts.get(name), topo, perf, config=cfg)
        # a learned policy refuses env options it was not trained with, as evaluate
        # does (duck-typed: marl_sched imports no agents)
        check_config = getattr(policy, "check_config", None)
        if check_config is not None:
            check_config(cfg)
    return workload.resolved(cfg), ckpts


def run_compare(
    config: str | ExperimentConfig,
    policies: list[str],
    out: Path,
    trace_options: dict[str, Any],
    checkpoint: str | None = None,
    seed: int | None = None,
    workers: int | None = None,
    progress=None,
    checked: tuple | None = None,
    seeds: int = 1,
) -> list[dict[str, Any]]:
    """Run every policy under ``seeds`` seeds from ``seed`` (default the config's),
    write results and return the rows, best first. ``checked``: :func:`check_compare`'s
    result for these inputs."""
    from marl_sched.benchmark.suite import split_of
    from marl_sched.metrics import atomic_write_text, csv_text
    from marl_sched.plots import bars, jct_cdf, window_title

    cfg, ckpts = checked or check_compare(config, policies, trace_options, checkpoint)
    if seeds < 1:
        raise InputError(f"--seeds: expected a count >= 1, got {seeds}")
    config = cfg  # the loaded config travels to the workers (with any overrides)
    first = cfg.simulation.seed if seed is None else seed
    seed_list = [first + k for k in range(seeds)]
    tasks = [
        {
            "config": config,
            "policy": p,
            # run k also draws the workload with seed + k, as a benchmark cell does:
            # arrival jitter, noisy duration estimates, the model fill rule
            "trace_options": {**trace_options, "seed": cfg.workload.seed + k},
            "checkpoint": ckpts.get(p),
            "seed": s,
            "out": str(out / p / (f"seed{s}" if seeds > 1 else "")),
        }
        for p in policies
        for k, s in enumerate(seed_list)
    ]
    n_workers = max(1, min(len(tasks), workers or os.cpu_count() or 1))
    results: dict[tuple[str, int], tuple[dict, list[float]]] = {}
    if n_workers == 1:
        for t in tasks:
            results[t["policy"], t["seed"]] = _run_one(t)
            if progress:
                progress(len(results))
    else:
        _run_pool(tasks, n_workers, results, progress)
    runs = [results[p, s][0] for p in policies for s in seed_list]
    rows = policy_rows(runs, policies)
    atomic_write_text(out / "runs.csv", csv_text(runs, RUN_FIELDS))
    atomic_write_text(out / "results.csv", csv_text(rows, RESULT_FIELDS))
    workload = cfg.workload  # the trace options applied, the trace's absolute path
    atomic_write_text(out / "config.yaml", cfg.to_yaml())
    wl = workload
    split = split_of(wl.trace, wl.start, wl.max_jobs, warmup_jobs=wl.warmup_jobs)
    where = (wl.trace, wl.start, wl.max_jobs, wl.load, split)
    note = seeds_note(seed_list, rows)
    md = results_markdown(rows, window_title("Comparison", *where), cfg.source, note)
    atomic_write_text(out / "results.md", md)
    first_seed = f" (seed {first} of {seeds})" if seeds > 1 else ""
    jct_cdf(
        {p: results[p, first][1] for p in policies},
        out / "jct_cdf.png",
        title=window_title("JCT CDF", *where) + first_seed,
    )
    bars(
        {r["policy"]: r["avg_jct_s"] for r in rows},
        out / "avg_jct.png",
        ylabel="average JCT (s)",
        title=window_title("Average JCT", *where) + f"\n{note}",
        highlight="marl",
        errors={r["policy"]: r["avg_jct_ci95_s"] for r in rows} if has_interval(rows) else None,
        outlier_ratio=2.0,
    )
    return rows


def has_interval(rows: list[dict[str, Any]]) -> bool:
    """Do the seeds give an interval: several of them, and some policy's average JCT
    differs between two (else every half-width is 0, which says nothing)?"""
    return any(r.get("avg_jct_ci95_s") for r in rows)


def seeds_note(seed_list: list[int], rows: list[dict[str, Any]]) -> str:
    """What the ± covers: ``3 seeds (1–3): mean ± 95 % CI``, ``1 seed (5): no
    interval`` or ``3 seeds, identical: no interval``."""
    n = len(seed_list)
    if n == 1:
        return f"1 seed ({seed_list[0]}): no interval"
    if not has_interval(rows):
        return f"{n} seeds, identical: no interval"
    return f"{n} seeds ({seed_list[0]}–{seed_list[-1]}): mean ± 95 % CI over seeds"


def with_interval(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with ``avg_jct`` a printable ``mean ± half-width`` (or the mean alone
    when the seeds give no interval), for the screen table."""
    show = has_interval(rows)
    return [
        {**r, "avg_jct": f"{r['avg_jct_s']:.0f} ± {r['avg_jct_ci95_s'] or 0:.0f}"
         if show else f"{r['avg_jct_s']:.0f}"}
        for r in rows
    ]  # fmt: skip


def policy_rows(runs: list[dict[str, Any]], policies: list[str]) -> list[dict[str, Any]]:
    """One row per policy from its runs: each metric the mean over seeds, ``seeds``,
    ``avg_jct_ci95_s`` (None for one seed), the checkpoint and ``ratio_to_best_baseline``;
    best first."""
    from marl_sched.plots import mean_ci

    rows = []
    for p in policies:
        mine = [r for r in runs if r["policy"] == p]
        row: dict[str, Any] = {"policy": p, "seeds": len(mine)}
        for key, value in mine[0].items():  # every metric the table prints, as a mean
            numeric = all(isinstance(r.get(key), int | float) for r in mine)
            if numeric and not isinstance(value, bool) and key != "seed":
                row[key] = sum(float(r[key]) for r in mine) / len(mine)
        row["jobs_completed"] = int(round(row["jobs_completed"]))
        _, half = mean_ci(np.array([[float(r["avg_jct_s"])] for r in mine]))
        row["avg_jct_ci95_s"] = float(half[0]) if len(mine) > 1 else None
        row["checkpoint"] = mine[0]["checkpoint"]
        row["checkpoint_sha256"] = mine[0]["checkpoint_sha256"]
        rows.append(row)
    baselines = [r["avg_jct_s"] for r in rows if r["policy"] not in OURS]
    best = min(baselines) if baselines else min(r["avg_jct_s"] for r in rows)
    for r in rows:
        r["ratio_to_best_baseline"] = r["avg_jct_s"] / best
    rows.sort(key=lambda r: r["avg_jct_s"])
    return rows


def _compare_columns() -> tuple[tuple[str, str, str], ...]:
    """``simulate``'s columns with mean ± interval beside the JCT and decision
    percentiles, no wall time, and the ratio to the best baseline last."""
    from marl_sched.cli import RESULT_COLUMNS

    beside = {"p95_jct_s": ("p99_jct_s", "p99 (s)", ".0f"),
              "decision_ms_p50": ("decision_ms_p99", "dec p99 (ms)", ".3f")}  # fmt: skip
    out = []
    for key, head, spec in RESULT_COLUMNS:
        if key != "wall_s":
            out.append(("avg_jct", head, "") if key == "avg_jct_s" else (key, head, spec))
        if key in beside:
            out.append(beside[key])
    return (*out, ("ratio_to_best_baseline", "/ best baseline", ".3f"))


#: the columns of ``compare``'s screen table and of ``results.md``, the same in both:
#: (row key, header, format); ``avg_jct`` is :func:`with_interval`'s ``mean ± half-width``
COMPARE_COLUMNS = _compare_columns()
#: what the two utilisation columns measure (:func:`marl_sched.metrics.compute_metrics`)
UTILISATION_NOTE = (
    "GPU util: busy GPU-seconds over the makespan (the window's first submit to its last "
    "finish, the drain at the end included); util steady: the same over the arrival period "
    "only (first to last submit), the steady state a load tier is named after. queued: the "
    "share of jobs that waited before they started; / best baseline: avg JCT over the best "
    "baseline's."
)


def table_cells(rows: list[dict[str, Any]]) -> list[list[str]]:
    """Each row's :data:`COMPARE_COLUMNS` as printed (screen table and results.md)."""
    out = []
    for r in with_interval(rows):
        line = []
        for key, _, spec in COMPARE_COLUMNS:
            v = r.get(key, "")
            line.append(format(v, spec) if isinstance(v, int | float) and spec else str(v))
        out.append(line)
    return out


def results_markdown(rows: list[dict[str, Any]], title: str, config: str, note: str) -> str:
    """``results.md``: ``title``, the config, ``note`` (seeds, what ± covers), one row
    per policy and the columns' footnote."""
    lines = [
        f"# {title}",
        "",
        f"Config `{Path(config).name}`; {note}.",
        "",
        "| " + " | ".join(h for _, h, _ in COMPARE_COLUMNS) + " |",
        "|" + "---|" * len(COMPARE_COLUMNS),
        *("| " + " | ".join(cells) + " |" for cells in table_cells(rows)),
        "",
        UTILISATION_NOTE,
    ]
    return "\n".join(lines) + "\n"


def compare_command(args: argparse.Namespace) -> int:
    from marl_sched.cli import Progress, format_table, prepare_out
    from marl_sched.config import load_config
    from marl_sched.metrics import staged_folder

    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not policies:
        raise InputError("--policies: empty list")
    if len(set(policies)) != len(policies):
        raise InputError(f"--policies: duplicate name in {args.policies!r}")
    from marl_sched.policies import get_policy_class

    for name in policies:  # a registered name or a module:Class path (docs/extending.md)
        try:
            get_policy_class(name)
        except InputError as exc:
            raise InputError(f"--policies: {str(exc).removeprefix('--policy: ')}") from None
    out = prepare_out(args.out)
    opts = {
        "trace": args.trace,
        "trace_format": args.trace_format,
        "start": args.start,
        "max_jobs": args.max_jobs,
        "load": args.load,
        "seed": args.seed,
        "drop_unplaceable": args.drop_unplaceable,
        "own_window": True,  # --trace F: F's own jobs unless --start / --max-jobs
    }
    config = load_config(args.config, args.overrides)
    checked = check_compare(config, policies, opts, args.checkpoint)  # before the bar
    if args.seeds < 1:
        raise InputError(f"--seeds: expected a count >= 1, got {args.seeds}")
    bar = Progress(len(policies) * args.seeds, "compare (runs done)", args.quiet)
    try:
        # every output appears at once, or none (interrupted, failed)
        with staged_folder(out) as tmp:
            rows = run_compare(
                config, policies, tmp, opts, args.checkpoint, args.seed, progress=bar,
                checked=checked, seeds=args.seeds,
            )  # fmt: skip
    finally:
        bar.close()
    from marl_sched.plots import window_title

    cfg = checked[0]
    wl, first = cfg.workload, cfg.simulation.seed if args.seed is None else args.seed
    seed_list = [first + k for k in range(args.seeds)]
    print(f"{window_title('compare', wl.trace, wl.start, wl.max_jobs, wl.load)}; "
          f"{seeds_note(seed_list, rows)}")  # fmt: skip
    shown = [{h: c for (_, h, _), c in zip(COMPARE_COLUMNS, cells, strict=True)}
             for cells in table_cells(rows)]  # fmt: skip
    print(format_table(shown, [(h, h, "") for _, h, _ in COMPARE_COLUMNS]))
    print(
        f"wrote {out / 'results.md'}, {out / 'results.csv'}, {out / 'jct_cdf.png'}, "
        f"{out / 'avg_jct.png'}"
    )
    return 0
