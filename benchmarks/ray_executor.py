"""Run benchmark cells as Ray tasks: on a local Ray started here, or on a cluster."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import ray

from marl_sched.benchmark.cells import run_cell


def run_all(
    specs: list[dict[str, Any]],
    on_done: Callable[[dict, dict], None],
    *,
    address: str | None = None,
    num_cpus: int | None = None,
) -> None:
    """Submit every cell, hand each result to ``on_done`` as it finishes (in the
    driver, so the cell store is written by one process)."""
    started = False
    if not ray.is_initialized():
        if address is None:
            # a cluster this command starts and stops: no token auth (Ray >= 2.60 turns
            # it on by default), every core of this machine
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            ray.init(
                num_cpus=num_cpus or os.cpu_count() or 1,
                include_dashboard=False,
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}},
            )
        else:
            ray.init(address=address, log_to_driver=False)
        started = True
    try:
        task = ray.remote(num_cpus=1)(run_cell)
        pending = {task.remote(spec): spec for spec in specs}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                on_done(pending.pop(ref), ray.get(ref))
    finally:
        if started:
            ray.shutdown()
