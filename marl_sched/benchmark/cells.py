"""Benchmark cells (one policy on one scenario with one seed) and their resumable store.

A cell's result is stored as ``DIR/cells/<scenario>__<policy>__s<seed>.json`` (written
atomically when the cell finishes): its metrics row and the scored jobs' JCTs. A cell
of a policy given an explicit checkpoint also names the checkpoint's content digest
(``<scenario>__<policy>__c<digest>__s<seed>.json``), so a changed or another
checkpoint (another training seed of the same policy) is a new cell, never a stale
one. A cell whose file exists is finished and never run again, so an interrupted
benchmark resumes where it stopped. ``DIR/benchmark.json`` records the suite (path and content
digest) and split; a folder holding cells of another suite is refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marl_sched.checkpoints import checkpoint_digest
from marl_sched.errors import InputError
from marl_sched.files import owned_path, read_input, read_input_text
from marl_sched.metrics import atomic_write_text

CELL_DIR = "cells"
MANIFEST = "benchmark.json"


@dataclass(frozen=True)
class Cell:
    """One run of the benchmark grid."""

    scenario: str
    policy: str
    seed: int
    #: the content digest of the policy's explicit checkpoint (:func:`checkpoint_id`)
    checkpoint: str | None = None
    #: the benchmark track (``marl_sched.benchmark.suite.TRACKS``); None: before tracks
    track: str | None = None

    @property
    def key(self) -> str:
        ckpt = f"__c{self.checkpoint}" if self.checkpoint else ""
        track = f"__t{self.track}" if self.track else ""
        return f"{self.scenario}__{self.policy}{ckpt}{track}__s{self.seed}"


def checkpoint_id(path: str | Path) -> str:
    """The checkpoint's 12-hex content digest (:func:`marl_sched.checkpoints.checkpoint_digest`:
    the weights and the manifest, nothing beside them); InputError when the path does
    not exist or is a link."""
    return checkpoint_digest(path)[:12]


def split_row(row: str) -> tuple[str, str | None]:
    """``"POLICY@ORDERING"`` -> (policy, ordering); a bare policy -> (policy, None)."""
    policy, sep, ordering = row.partition("@")
    return policy, (ordering if sep else None)


def run_cell(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one cell (in any process): ``spec`` = suite path, scenario, policy row
    (``POLICY`` or ``POLICY@ORDERING``), seed, checkpoint (or None), track (its name,
    for the row) and the track's overrides (applied before ``overrides``). Returns
    ``{"row": metrics + cell fields, "jct": [...]}``; the row's ``policy`` is the row
    name, ``ordering`` the queue ordering the run used, ``run`` the checkpoint's index
    among the policy's training runs (``spec["run"]``, 0 when it has one) and
    ``checkpoint`` its path ("" for none).

    The cell's seed is both the policy seed and the workload seed (model fill rule,
    noisy duration estimates).
    """
    from marl_sched.benchmark.suite import load_suite
    from marl_sched.policies import build_policy
    from marl_sched.runner import build_cluster, load_workload, simulate

    # the track's overrides as the driver resolved them (a worker never looks them up)
    overrides = [*spec.get("track_overrides", ()), *spec.get("overrides", ())]
    suite = load_suite(spec["suite"]).with_overrides(overrides)
    scenario = next(s for s in suite.split(spec["split"]) if s.name == spec["scenario"])
    cfg = suite.config_for(
        scenario, seed=spec["seed"], duration_estimate=spec.get("duration_estimate")
    )
    name, ordering = split_row(spec["policy"])
    if ordering is not None:
        cfg = dataclasses.replace(
            cfg, simulation=dataclasses.replace(cfg.simulation, ordering=ordering)
        )
    topo, perf = build_cluster(cfg)
    workload = load_workload(cfg, perf)
    policy = build_policy(name, spec.get("checkpoint"), config=cfg)
    metrics, records, sim = simulate(
        cfg, spec["policy"], workload, topo, perf, seed=spec["seed"], policy=policy
    )
    row = {
        "scenario": scenario.name,
        "split": spec["split"],
        "track": spec.get("track") or "",
        "policy": spec["policy"],
        "ordering": sim.ordering.name,
        "seed": spec["seed"],
        "run": spec.get("run", 0),
        "checkpoint": spec.get("checkpoint") or "",
        "tier": scenario.tier,
        "topology": scenario.topology,
        "load": scenario.load,
        **metrics,
    }
    jct = [r.jct for r in records if r.job.job_id >= workload.warmup]
    return {"row": row, "jct": jct}


class CellStore:
    """The finished cells of one benchmark folder."""

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)
        self.dir = self.out / CELL_DIR

    def path(self, cell: Cell) -> Path:
        """The cell's file, checked at each use (no step of it a link, FIFO or device)."""
        return owned_path(self.out, f"{CELL_DIR}/{cell.key}.json", "--out")

    def done(self, cell: Cell) -> bool:
        path = self.path(cell)
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise InputError(f"--out: {path}: not a cell file written by marl-sched")
        return path.is_file()

    def save(self, cell: Cell, result: dict[str, Any]) -> None:
        atomic_write_text(self.path(cell), json.dumps(result) + "\n")

    def load(self, cell: Cell) -> dict[str, Any]:
        """A finished cell, read back and checked (it is a file under ``--out`` that
        anyone could have edited): one line naming the file for a cell that is not
        a regular file, too large, not JSON, or not shaped like the cells
        :meth:`save` writes."""
        path = self.path(cell)
        try:
            result = json.loads(read_input_text(path, "cell", f"--out: {path}"))
            check_cell(result, cell)
        except (ValueError, TypeError, KeyError) as exc:
            raise InputError(
                f"--out: {path}: not a cell written by marl-sched ({_first_line(exc)}); "
                "delete it to run the cell again"
            ) from None
        # a cell written before rows named their training run: run 0, no checkpoint
        result["row"].setdefault("run", 0)
        result["row"].setdefault("checkpoint", "")
        result["row"].setdefault("track", "")  # a cell from before tracks
        return result

    def claim(
        self,
        suite_path: str,
        split: str,
        duration_estimate: str | None = None,
        overrides: Sequence[str] = (),
        *,
        write: bool = True,
        track: str | None = None,
    ) -> None:
        """Check which suite, split, track, duration estimate and base-config overrides
        this folder holds (InputError for others); with ``write``, record them in a new
        folder."""
        from marl_sched.benchmark.suite import resolve

        digest = hashlib.sha256(read_input(resolve(suite_path), "suite", suite_path)).hexdigest()
        manifest = {
            "suite": str(suite_path),
            "suite_sha256": digest,
            "split": split,
            "track": track,
            "duration_estimate": duration_estimate,
            "overrides": list(overrides),
        }
        path = self.out / MANIFEST
        if path.exists() or path.is_symlink():
            held = read_manifest(path)
            held.setdefault("overrides", [])  # a folder from before overrides existed
            held.setdefault("track", "placement")  # a folder from before tracks existed
            keys = ("suite_sha256", "split", "track", "duration_estimate", "overrides")
            if any(held.get(k) != manifest[k] for k in keys):
                raise InputError(
                    f"--out: {self.out} holds cells of {held.get('suite')} split "
                    f"{held.get('split')} track {held.get('track') or 'not recorded'} "
                    f"with duration estimate "
                    f"{held.get('duration_estimate') or 'of the config'} and overrides "
                    f"{' '.join(held['overrides']) or 'none'} (another suite file, split, "
                    f"track, estimate or overrides); use a new folder"
                )
            return
        if write:
            atomic_write_text(path, json.dumps(manifest, indent=1) + "\n")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [exc.__class__.__name__])[0][:200]


#: the row fields every stored cell has, with their types
_ROW_FIELDS = {"scenario": str, "policy": str, "seed": int}


def check_cell(result: Any, cell: Cell) -> None:
    """``result`` is shaped like a cell of ``cell``: ``{"row": {...}, "jct": [...]}``
    with the cell's own scenario, policy and seed and finite JCTs; ValueError or
    TypeError otherwise."""
    if not isinstance(result, dict) or set(result) != {"row", "jct"}:
        raise TypeError("expected an object with exactly 'row' and 'jct'")
    row, jct = result["row"], result["jct"]
    if not isinstance(row, dict) or not all(isinstance(k, str) for k in row):
        raise TypeError("'row' is not an object")
    for name, tp in _ROW_FIELDS.items():
        if not isinstance(row.get(name), tp) or isinstance(row.get(name), bool):
            raise TypeError(f"row.{name} missing or not {tp.__name__}")
    if (row["scenario"], row["policy"], row["seed"]) != (cell.scenario, cell.policy, cell.seed):
        raise ValueError(
            f"it holds {row['scenario']} / {row['policy']} / seed {row['seed']}, "
            f"not {cell.scenario} / {cell.policy} / seed {cell.seed}"
        )
    if not isinstance(jct, list) or not all(
        isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
        for x in jct
    ):
        raise TypeError("'jct' is not a list of finite numbers >= 0")


#: what ``benchmark.json`` holds, with the types of its fields
_MANIFEST_FIELDS = {
    "suite": (str,),
    "suite_sha256": (str,),
    "split": (str,),
    "duration_estimate": (str, type(None)),
}


def read_manifest(path: Path) -> dict[str, Any]:
    """``benchmark.json`` read back and checked: InputError naming it when it is not a
    regular file within the size cap, not JSON, or not shaped as :meth:`CellStore.claim`
    writes it (``overrides`` may be absent: a folder from before overrides existed)."""
    where = f"--out: {path}"
    if path.is_symlink():
        raise InputError(f"{where}: a link; {MANIFEST} must be the file marl-sched wrote")
    try:
        held = json.loads(read_input_text(path, "json", where))
        if not isinstance(held, dict):
            raise TypeError(f"expected an object, got {type(held).__name__}")
        for name, types in _MANIFEST_FIELDS.items():
            if not isinstance(held.get(name), types):
                raise TypeError(f"{name} missing or of the wrong type")
        held.setdefault("overrides", [])
        overrides = held["overrides"]
        if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
            raise TypeError("overrides is not a list of strings")
    except (ValueError, TypeError) as exc:
        raise InputError(
            f"{where}: not a {MANIFEST} written by marl-sched ({_first_line(exc)})"
        ) from None
    return held
