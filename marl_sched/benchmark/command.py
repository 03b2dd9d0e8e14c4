"""``marl-sched benchmark``: every policy x scenario x seed of one split of a suite
(docs/benchmark.md is the reference).

::

    marl-sched benchmark [--suite S] --split train|validation|test --policies a,b,...
                         [--track placement|full] [--checkpoint P] [--seeds N] --out DIR
                         [--migration-cost-scale 0.5,1,2,5] [--gavel-spread]
                         [--ray-address A] [--local] [--quiet]
                         [--duration-estimate none|oracle|noisy|history]

A test-split run is recorded in ``benchmarks/ledger.jsonl``. ``--track`` applies
:data:`~marl_sched.benchmark.suite.TRACKS`' overrides; the sensitivity flags write one
folder per variant and ``sensitivity.md``. ``--checkpoint`` is a path or
``name=path,...``; ``A+B+C`` is one checkpoint per training run, pooled in the report.
Cells run as Ray tasks (``--local``: in this process); finished cells in ``DIR/cells``
are not run again. Bad input exits 2 before any cell runs."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from marl_sched.benchmark.cells import Cell, CellStore, checkpoint_id, run_cell, split_row
from marl_sched.benchmark.ledger import LEDGER
from marl_sched.benchmark.suite import DEFAULT_SUITE, load_suite, resolve, track_overrides
from marl_sched.errors import InputError
from marl_sched.files import check_owned_tree

# the Ray executor sits above marl_sched (which never imports ray): agents/
RAY_EXECUTOR = "agents.benchmark_executor:run_all"

Executor = Callable[[list[dict[str, Any]], Callable[[dict, dict], None]], None]


def run_local(specs: list[dict[str, Any]], on_done: Callable[[dict, dict], None]) -> None:
    """Run cells one after another in this process."""
    for spec in specs:
        on_done(spec, run_cell(spec))


def ray_executor(address: str | None, import_roots: Sequence[str] = ()) -> Executor:
    """Cells as Ray tasks; ``import_roots``: folders the workers put first on their
    ``PYTHONPATH`` (:func:`policy_import_roots`)."""
    module, _, func = RAY_EXECUTOR.partition(":")
    try:
        run_all = getattr(importlib.import_module(module), func)
    except ImportError as exc:
        raise InputError(f"benchmark: Ray executor not available ({exc}); use --local") from None
    roots = list(import_roots)
    return lambda specs, on_done: run_all(specs, on_done, address=address, import_roots=roots)


def policy_import_roots(rows: Sequence[str]) -> list[str]:
    """The folders (each ``module:Class`` policy's top package's parent) a worker
    needs on its path to import the policies of ``rows``."""
    from marl_sched.policies import policy_entries
    from marl_sched.policies.base import is_policy_path

    roots: list[str] = []
    for name in base_policies(list(rows)):
        if name in policy_entries() or not is_policy_path(name):
            continue
        module = name.partition(":")[0]
        found = sys.modules.get(module) or importlib.import_module(module)
        origin = getattr(found, "__file__", None)
        if origin is None:  # a namespace package: nothing to point at
            continue
        path = Path(origin).resolve()
        depth = module.count(".") + (2 if path.name == "__init__.py" else 1)
        root = str(path.parents[depth - 1])
        if root not in roots:
            roots.append(root)
    return roots


def parse_policies(text: str) -> list[str]:
    """``--policies``: comma-separated names, each optionally ``POLICY@ORDERING``;
    ``rules`` stands for every registered heuristic and control."""
    from marl_sched.ordering import ORDERINGS, OWN
    from marl_sched.policies import control_names, get_policy_class, heuristic_names

    names = []
    for item in (p.strip() for p in text.split(",")):
        if item == RULES:
            names.extend(n for n in [*heuristic_names(), *control_names()] if n not in names)
        elif item:
            names.append(item)
    if not names:
        raise InputError("--policies: expected a comma-separated list of policy names")
    if len(set(names)) != len(names):
        raise InputError(f"--policies: a policy is named twice in {text!r}")
    for name in names:
        policy, ordering = split_row(name)
        try:
            get_policy_class(policy)  # a registered name, or a module:Class that imports
        except InputError as exc:
            raise InputError(f"--policies: {str(exc).removeprefix('--policy: ')}") from None
        if ordering is not None and ordering not in (*ORDERINGS, OWN):
            known = ", ".join([*ORDERINGS, OWN])
            raise InputError(f"--policies: {name}: unknown ordering {ordering!r} (known: {known})")
    return names


#: the ``--policies`` item that stands for every registered heuristic and control
RULES = "rules"


def base_policies(rows: list[str]) -> list[str]:
    """The distinct policy names of ``POLICY[@ORDERING]`` rows, in order."""
    return list(dict.fromkeys(split_row(r)[0] for r in rows))


#: (content digest, path) of each checkpoint a policy row runs with, one per training run
Runs = list[tuple[str | None, str | None]]
#: the one run of a policy given no checkpoint (its default, or none)
NO_CHECKPOINT: Runs = [(None, None)]


def checkpoint_runs(by_policy: dict[str, str], policies: list[str]) -> dict[str, Runs]:
    """Per policy, its training runs: each path of its ``A+B+...`` spec with its
    content digest (the same content twice is refused), or :data:`NO_CHECKPOINT`."""
    out: dict[str, Runs] = dict.fromkeys(policies, NO_CHECKPOINT)
    for policy, spec in by_policy.items():
        paths = [p.strip() for p in spec.split("+")]
        if not all(paths):
            raise InputError(f"--checkpoint: {policy}: empty path in {spec!r}")
        runs = [(checkpoint_id(p), p) for p in paths]
        ids = [i for i, _ in runs]
        if len(set(ids)) != len(ids):
            raise InputError(f"--checkpoint: {policy}: the same checkpoint twice in {spec!r}")
        out[policy] = runs
    return out


def check_inputs(
    suite_path: str | Path,
    split: str,
    policies: list[str],
    seeds: int,
    out: str | Path,
    checkpoint: str | None,
    duration_estimate: str | None = None,
    overrides: Sequence[str] = (),
    track: str | None = None,
) -> tuple[tuple, dict[str, Runs]]:
    """Every input check, before any work: (the split's scenarios, each policy row's
    checkpoint runs, :func:`checkpoint_runs`). InputError names the file, key or flag."""
    from marl_sched.compare import checkpoints_by_policy
    from marl_sched.duration import DURATION_ESTIMATES

    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise InputError(f"--seeds: must be an integer >= 1, got {seeds!r}")
    if duration_estimate is not None and duration_estimate not in DURATION_ESTIMATES:
        known = ", ".join(DURATION_ESTIMATES)
        raise InputError(f"--duration-estimate: must be one of {known}, got {duration_estimate!r}")
    track_overrides(track)  # an unknown track, before the suite file
    suite = load_suite(suite_path).with_overrides(overrides, track)
    scenarios = suite.split(split)
    if not scenarios:
        raise InputError(f"{suite.path}: scenarios.{split}: no scenarios in this split")
    for sc in scenarios:
        if not resolve(sc.trace).is_file():
            raise InputError(f"{suite.path}: scenario {sc.name}: trace not found: {sc.trace}")
    base = base_policies(policies)
    by_policy = checkpoint_runs(checkpoints_by_policy(checkpoint, base), base)
    clusters = _check_policies_serve(suite, scenarios, base, by_policy)
    _check_scenarios_load(suite, scenarios, clusters, base, seeds)
    ckpts = {r: by_policy[split_row(r)[0]] for r in policies}
    if Path(out).exists() and not Path(out).is_dir():
        raise InputError(f"--out: {out}: exists and is not a folder")
    from marl_sched.cli import refuse_shipped_folder

    refuse_shipped_folder(out)
    check_owned_tree(out, "--out")  # cells/, ccdf/: no link, FIFO or device at any depth
    CellStore(out).claim(
        str(suite_path), split, duration_estimate, overrides, write=False, track=track
    )
    return scenarios, ckpts


def _check_policies_serve(suite, scenarios, policies: list[str], ckpts: dict[str, Runs]) -> None:
    """Every policy (with each of its checkpoints) is built on every topology the split
    uses, so a learned policy that cannot serve one is refused here, not mid-run."""
    from marl_sched.policies import build_policy
    from marl_sched.runner import build_cluster

    seen = {}
    for sc in scenarios:
        key = sc.topology
        if key in seen:
            continue
        cfg = suite.config_for(sc)
        seen[key] = build_cluster(cfg)
        topo, perf = seen[key]
        for name in policies:
            for _, path in ckpts[name]:
                try:
                    build_policy(name, path, topo, perf, config=cfg)
                except InputError as exc:
                    raise InputError(f"--policies: {name} on scenario {sc.name}: {exc}") from None
    return seen


def _check_scenarios_load(
    suite, scenarios, clusters: dict, policies: Sequence[str] = (), seeds: int = 1
) -> None:
    """Read every scenario's window at its load and check it against its topology (and,
    with a planner among ``policies``, each seed's window against ``planner.horizon_s``),
    so a bad window is refused before the first cell runs."""
    from marl_sched.policies import get_policy_class
    from marl_sched.policies.planner import PlannerPolicy, check_horizon
    from marl_sched.runner import load_workload

    planners = [p for p in policies if issubclass(get_policy_class(p), PlannerPolicy)]
    for sc in scenarios:
        try:
            for seed in range(seeds if planners else 1):
                cfg = suite.config_for(sc, seed=seed)
                workload = load_workload(cfg, clusters[sc.topology][1])
                for name in planners:
                    check_horizon(cfg, name, workload.jobs)
        except InputError as exc:
            raise InputError(f"{suite.path}: scenario {sc.name}: {exc}") from None


def run_benchmark(
    suite_path: str | Path,
    split: str,
    policies: list[str],
    seeds: int,
    out: str | Path,
    *,
    checkpoint: str | None = None,
    executor: Executor = run_local,
    progress: Callable[[int], None] | None = None,
    log: Callable[[str], None] = lambda _: None,
    figures: bool = True,
    duration_estimate: str | None = None,
    overrides: Sequence[str] = (),
    track: str | None = None,
    ledger: str | Path | None = LEDGER,
) -> tuple[list[dict], dict[str, Any]]:
    """Run the missing cells, then write the report; returns (summary rows, timing).
    A run touching the default suite's test split appends to ``ledger`` first (None: not
    recorded, tests only)."""
    from marl_sched.benchmark import ledger as ledger_check
    from marl_sched.benchmark.ledger import record_if_test
    from marl_sched.benchmark.report import write_report

    scenarios, ckpts = check_inputs(
        suite_path, split, policies, seeds, out, checkpoint, duration_estimate, overrides, track
    )
    ledger_check.check(ledger, scenarios)  # before the output folder is claimed
    out = Path(out)
    store = CellStore(out)
    store.claim(str(suite_path), split, duration_estimate, overrides, track=track)
    entry = record_if_test(
        ledger, suite_path, split, scenarios, policies, ckpts, seeds, out, track, overrides,
        duration_estimate,
    )  # fmt: skip
    # (cell, the checkpoint's index among the policy's runs, its path)
    plan = [
        (Cell(sc.name, p, s, cid, track), i, path)
        for sc in scenarios
        for p in policies
        for i, (cid, path) in enumerate(ckpts[p])
        for s in range(seeds)
    ]
    cells = [c for c, _, _ in plan]
    todo = [(c, i, path) for c, i, path in plan if not store.done(c)]
    for c in cells:  # a stored cell that is not one exits 2 now, not after the run
        if store.done(c):
            store.load(c)
    n_runs = sum(len(ckpts[p]) for p in policies)
    log(
        f"{len(cells)} cells ({len(scenarios)} scenarios x {len(policies)} policies"
        + (f" ({n_runs} policy runs)" if n_runs > len(policies) else "")
        + f" x {seeds} seeds); {len(cells) - len(todo)} already done, {len(todo)} to run"
    )
    specs = [
        {
            "suite": str(suite_path),
            "split": split,
            "scenario": c.scenario,
            "policy": c.policy,
            "seed": c.seed,
            "checkpoint": path,
            "checkpoint_id": c.checkpoint,
            "run": i,
            "duration_estimate": duration_estimate,
            "overrides": list(overrides),
            "track": track,
            "track_overrides": list(track_overrides(track)),
        }
        for c, i, path in todo
    ]
    done = len(cells) - len(todo)
    if progress:
        progress(done)

    def on_done(spec: dict, result: dict) -> None:
        nonlocal done
        cell = Cell(
            spec["scenario"], spec["policy"], spec["seed"], spec["checkpoint_id"], spec["track"]
        )
        store.save(cell, result)
        done += 1
        if progress:
            progress(done)

    t0 = time.perf_counter()
    if specs:
        executor(specs, on_done)
    run_s = time.perf_counter() - t0
    results = [store.load(c) for c in cells]
    t1 = time.perf_counter()
    summary = write_report(out, results, policies, seeds, figures=figures, ledger=entry)
    timing = {
        "cells": len(cells),
        "ran": len(todo),
        "run_s": run_s,
        "report_s": time.perf_counter() - t1,
    }
    return summary, timing


def benchmark_command(args: argparse.Namespace) -> int:
    from marl_sched.benchmark.sensitivity import check_sensitivity, run_sensitivity
    from marl_sched.cli import Progress

    policies = parse_policies(args.policies)
    suite_path = args.suite or str(DEFAULT_SUITE)
    # bad input exits 2 before Ray starts or the progress bar draws
    variants = check_sensitivity(
        args.migration_cost_scale, args.gavel_spread, args.track, args.overrides
    )
    scenarios, ckpts = check_inputs(
        suite_path,
        args.split,
        policies,
        args.seeds,
        args.out,
        args.checkpoint,
        args.duration_estimate,
        args.overrides,
        args.track,
    )
    from marl_sched.benchmark import ledger as ledger_check

    ledger_check.check(LEDGER, scenarios)  # before Ray starts or anything is written
    executor = (
        run_local if args.local else ray_executor(args.ray_address, policy_import_roots(policies))
    )
    if variants:
        for name, extra in variants:  # each variant's folder and overrides, checked now
            check_inputs(suite_path, args.split, policies, args.seeds, Path(args.out) / name,
                         args.checkpoint, args.duration_estimate, [*args.overrides, *extra],
                         args.track)  # fmt: skip
        path = run_sensitivity(
            variants,
            lambda out, overrides: run_benchmark(
                suite_path,
                args.split,
                policies,
                args.seeds,
                out,
                checkpoint=args.checkpoint,
                executor=executor,
                log=lambda m: None if args.quiet else print(m),
                duration_estimate=args.duration_estimate,
                overrides=overrides,
                track=args.track,
            )[0],  # fmt: skip
            args.out,
            args.overrides,
            f"{args.split} split, track {args.track}",
        )
        print(Path(path).read_text(encoding="utf-8"))
        print(f"wrote {path} (each variant's report in its folder under {args.out})")
        return 0
    n_runs = sum(len(ckpts[p]) for p in policies)
    bar = Progress(len(scenarios) * n_runs * args.seeds, "benchmark", args.quiet)
    try:
        summary, timing = run_benchmark(
            suite_path,
            args.split,
            policies,
            args.seeds,
            args.out,
            checkpoint=args.checkpoint,
            executor=executor,
            progress=bar,
            log=lambda m: None if args.quiet else print(m),
            duration_estimate=args.duration_estimate,
            overrides=args.overrides,
            track=args.track,
        )
    finally:
        bar.close()
    print((Path(args.out) / "summary.md").read_text(encoding="utf-8"))
    print(
        f"{timing['cells']} cells, {timing['ran']} run now in {timing['run_s']:.0f} s "
        f"(+ {timing['report_s']:.0f} s report); wrote {args.out}/runs.csv, summary.md, "
        f"scenarios.md and figures"
    )
    return 0
