"""Loaders of the measured profiles (Gavel, Pollux, DL2) into typed rows."""

from __future__ import annotations

import ast
import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marl_sched.calibration.constants import POLLUX_MODELS

# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class PolluxRow:
    """One measured configuration: placement digits, local batch, step and sync s."""

    placement: str
    local_bsz: int
    step_time: float
    sync_time: float

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(int(c) for c in self.placement)


@dataclass(frozen=True)
class PolluxProfile:
    model: str
    placements: tuple[PolluxRow, ...]
    #: scalability rows as placements (replicas dealt evenly over the nodes)
    scalability: tuple[PolluxRow, ...]


@dataclass(frozen=True)
class DL2Row:
    model: str
    total_batch: int
    num_ps: int
    num_workers: int
    speeds: tuple[float, ...]
    ps_cpu: tuple[float, ...]
    worker_cpu: tuple[float, ...]


def profiles_dir(shared: Path) -> Path:
    shared = Path(shared)
    return shared / "profiles" if (shared / "profiles").is_dir() else shared


def load_gavel(
    shared: Path, name: str = "gavel_simulation_throughputs.json"
) -> dict[str, dict[tuple[str, int], dict[Any, Any]]]:
    """``{gpu: {(job_type, scale): {None: isolated, (type, scale): [own, other]}}}`` of
    one of Gavel's throughput files (the simulation one by default)."""
    path = profiles_dir(shared) / name
    raw = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, dict[tuple[str, int], dict[Any, Any]]] = {}
    for gpu, table in raw.items():
        parsed: dict[tuple[str, int], dict[Any, Any]] = {}
        for key, entries in table.items():
            job = ast.literal_eval(key)
            row: dict[Any, Any] = {}
            for other, value in entries.items():
                row[None if other == "null" else ast.literal_eval(other)] = value
            parsed[(str(job[0]), int(job[1]))] = row
        out[gpu] = parsed
    return out


def _even_placement(nodes: int, replicas: int) -> str:
    base, extra = divmod(replicas, nodes)
    return "".join(str(base + (1 if i < extra else 0)) for i in range(nodes))


def load_pollux(shared: Path) -> dict[str, PolluxProfile]:
    """Placement and scalability profiles of the six Pollux models."""
    root = profiles_dir(shared) / "pollux"
    out = {}
    for model in POLLUX_MODELS:
        with open(root / model / "placements.csv", newline="", encoding="utf-8") as f:
            placements = tuple(
                PolluxRow(
                    r["placement"].strip(),
                    int(r["local_bsz"]),
                    float(r["step_time"]),
                    float(r["sync_time"]),
                )
                for r in csv.DictReader(f)
            )
        with open(root / model / "scalability.csv", newline="", encoding="utf-8") as f:
            scal = []
            for r in csv.DictReader(f):
                nodes, replicas = int(r["num_nodes"]), int(r["num_replicas"])
                if replicas > 9 * nodes:  # not expressible as digits; none in the data
                    continue
                scal.append(
                    PolluxRow(
                        _even_placement(nodes, replicas),
                        int(r["local_bsz"]),
                        float(r["step_time"]),
                        float(r["sync_time"]),
                    )
                )
        out[model] = PolluxProfile(model, placements, tuple(scal))
    return out


def load_dl2(shared: Path) -> tuple[list[DL2Row], int]:
    """DL2's PS/worker measurements; rows whose speeds are all zero (failed runs) or
    partly zero (a worker that never ran) are skipped. Returns (rows, skipped)."""
    path = profiles_dir(shared) / "dl2_ps_worker_config_speed.txt"
    rows, skipped = [], 0
    # the last line has no newline: split on lines, not on "\n"-terminated records
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        model, _mode, batch, n_ps, n_w, speeds, ps_cpu, w_cpu = ast.literal_eval(line.strip())
        if any(float(s) <= 0.0 for s in speeds):
            skipped += 1
            continue
        rows.append(
            DL2Row(
                str(model),
                int(batch),
                int(n_ps),
                int(n_w),
                tuple(map(float, speeds)),
                tuple(map(float, ps_cpu)),
                tuple(map(float, w_cpu)),
            )
        )
    return rows, skipped
