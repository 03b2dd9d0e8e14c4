"""Run benchmark cells as Ray tasks: on a local Ray started here, or on a cluster.

Ray is started the way training starts it (:func:`agents.commands.start_ray`): a fresh
local instance that never attaches to another cluster on this machine (nor to a stale
pointer file), without token authentication; or the cluster at ``--ray-address``,
refused in one line when nothing answers there."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import ray

from agents.commands import start_ray, stop_ray
from marl_sched.benchmark.cells import run_cell


def run_all(
    specs: list[dict[str, Any]],
    on_done: Callable[[dict, dict], None],
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    quiet: bool = True,
) -> None:
    """Submit every cell, hand each result to ``on_done`` as it finishes (in the
    driver, so the cell store is written by one process)."""
    started = not ray.is_initialized()
    if started:
        pythonpath = {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        start_ray(address, quiet=quiet, num_cpus=num_cpus, env_vars=pythonpath)
    try:
        task = ray.remote(num_cpus=1)(run_cell)
        pending = {task.remote(spec): spec for spec in specs}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                on_done(pending.pop(ref), ray.get(ref))
    finally:
        if started:
            stop_ray()
