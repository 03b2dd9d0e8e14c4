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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marl_sched.errors import InputError
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
    """A 12-hex content digest of a checkpoint file, or of every file under a
    checkpoint folder (relative paths and bytes, in sorted order); InputError when the
    path does not exist."""
    root = Path(path)
    if root.is_file():
        files = [root]
    elif root.is_dir():
        files = sorted(p for p in root.rglob("*") if p.is_file())
    else:
        raise InputError(f"--checkpoint: {path}: no such file or folder")
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(root) if f != root else f.name).encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:12]


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
    policy = build_policy(name, spec.get("checkpoint"))
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
        return self.dir / f"{cell.key}.json"

    def done(self, cell: Cell) -> bool:
        return self.path(cell).is_file()

    def save(self, cell: Cell, result: dict[str, Any]) -> None:
        atomic_write_text(self.path(cell), json.dumps(result) + "\n")

    def load(self, cell: Cell) -> dict[str, Any]:
        result = json.loads(self.path(cell).read_text(encoding="utf-8"))
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

        digest = hashlib.sha256(resolve(suite_path).read_bytes()).hexdigest()
        manifest = {
            "suite": str(suite_path),
            "suite_sha256": digest,
            "split": split,
            "track": track,
            "duration_estimate": duration_estimate,
            "overrides": list(overrides),
        }
        path = self.out / MANIFEST
        if path.is_file():
            held = json.loads(path.read_text(encoding="utf-8"))
            held.setdefault("overrides", [])  # a folder from before overrides existed
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
