"""Run benchmark cells as Ray tasks: on a local Ray started here, or on a cluster.

Ray is started the way training starts it (:func:`agents.commands.start_ray`): a fresh
local instance that never attaches to another cluster on this machine (nor to a stale
pointer file), without token authentication; or the cluster at ``--ray-address``,
refused in one line when nothing answers there.

A cell spec names its policy by string, a ``module:Class`` path too, and the worker
imports it (:func:`marl_sched.benchmark.cells.run_cell`): the workers get the driver's
``PYTHONPATH`` with the folders the driver imported those modules from first
(``import_roots``; on a cluster the module must be at the same path on every node)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import ray

from agents.commands import start_ray, stop_ray
from marl_sched.benchmark.cells import run_cell


def _run_cell_from(spec: dict[str, Any], import_roots: list[str]) -> dict:
    """:func:`run_cell` in a Ray worker whose ``sys.path`` starts with the folders the
    driver imported the suite's ``module:Class`` policies from."""
    import sys

    for root in reversed(import_roots):
        if root not in sys.path:
            sys.path.insert(0, root)
    return run_cell(spec)


def run_all(
    specs: list[dict[str, Any]],
    on_done: Callable[[dict, dict], None],
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    quiet: bool = True,
    import_roots: Sequence[str] = (),
) -> None:
    """Submit every cell, hand each result to ``on_done`` as it finishes (in the
    driver, so the cell store is written by one process)."""
    started = not ray.is_initialized()
    if started:
        parts = [*import_roots, *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
        pythonpath = {"PYTHONPATH": os.pathsep.join(dict.fromkeys(p for p in parts if p))}
        start_ray(address, quiet=quiet, num_cpus=num_cpus, env_vars=pythonpath)
    try:
        # the roots also go on each task's sys.path: a Ray started before this call
        # (another command's, a test session's) has workers without the PYTHONPATH above
        task = ray.remote(num_cpus=1)(_run_cell_from)
        roots = list(import_roots)
        pending = {task.remote(spec, roots): spec for spec in specs}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                on_done(pending.pop(ref), ray.get(ref))
    finally:
        if started:
            stop_ray()
