"""What a migration costs (docs/performance-model.md §9 is the reference).

A migrated job makes no progress for ``scale · (restart_s(model) + move_s)`` while it
holds its new GPUs; a resumed job pays ``scale · restart_s(model)``.
``simulation.migration_cost``: ``measured`` (default: ``restart_s`` from Sia/Pollux's
measured restart delays, :data:`RESTART_FILE`, via :data:`MODEL_APPLICATION`, which marks
the assumed mappings; ``move_s`` from :func:`state_move_s`) or a flat number of seconds
(no state move).

:func:`state_move_s`: each worker that leaves its GPU group carries
:data:`STATE_COPIES` × the model's bytes from an old group to a new one (leftovers paired
in ascending order) over :mod:`marl_sched.perf`'s links; link ``l`` gives
``bw_l / (1 + n_l)`` with ``n_l`` the jobs already crossing it, so the move takes
``max_l B_l (1 + n_l) / bw_l``. PS move nothing."""

from __future__ import annotations

import argparse
import csv
import functools
import json
import math
import os
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from marl_sched.catalogue import CATALOGUE
from marl_sched.errors import InputError
from marl_sched.perf import PerformanceModel

RESTART_FILE = Path(__file__).resolve().parent / "data" / "restart_times.json"

#: the measured table beside the repo (``../shared/data``), relative to the profiles
RESTART_CSV = "restart_times.csv"

#: copies of the model's bytes a job's state holds: weights + Adam's two moments
STATE_COPIES = 3

#: Sia's default restart for an application it did not profile
OTHER = "other"

#: catalogue model -> (Sia application, why); see the module docstring
_MEASURED = "measured: the application itself"
_FAMILY = "assumption: Gavel family {} -> {}"
MODEL_APPLICATION: dict[str, tuple[str, str]] = {
    **{m: (m, _MEASURED) for m in ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")},
    "resnet-50": ("imagenet", "assumption: the same network (ResNet-50, ImageNet), in MXNet"),
    "vgg-16": ("imagenet", _FAMILY.format("ResNet-50 (ImageNet CNN)", "imagenet")),
    "inception-bn": ("imagenet", _FAMILY.format("ResNet-50 (ImageNet CNN)", "imagenet")),
    "resnext-110": ("cifar10", _FAMILY.format("ResNet-18 (CIFAR-10 CNN)", "cifar10")),
    "seq2seq": ("bert", _FAMILY.format("Transformer", "bert")),
    "dssm": ("ncf", _FAMILY.format("Recommendation", "ncf")),
    "wlm": ("deepspeech2", _FAMILY.format("LM", "deepspeech2")),
    "cnn-text-classification": (
        OTHER,
        "assumption: Gavel's A3C has no Sia application; Sia's default for an unprofiled one",
    ),
}

DERIVATION = (
    "restart_s: the application,restart_s rows of ../shared/data/profiles/restart_times.csv "
    "unchanged (Sia SOSP'23 artifact, sia-simulator/applications.py rescale_time); "
    "models: each catalogue model's application by marl_sched.migration.MODEL_APPLICATION "
    "and its restart_s. Regenerate: python -m marl_sched.migration --shared ../shared/data "
    "--out marl_sched/data/restart_times.json"
)


def read_restart_csv(path: str | os.PathLike) -> dict[str, float]:
    """``{application: restart seconds}`` of a ``restart_times.csv``."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    table = {r["application"].strip(): float(r["restart_s"]) for r in rows}
    if OTHER not in table:
        raise ValueError(f"{path}: no {OTHER!r} row (Sia's default restart)")
    return table


def derive_restart_table(shared: str | os.PathLike) -> dict:
    """The content of :data:`RESTART_FILE` from ``<shared>/profiles/restart_times.csv``."""
    apps = read_restart_csv(Path(shared) / "profiles" / RESTART_CSV)
    models = {}
    for model in sorted(MODEL_APPLICATION):
        app, why = MODEL_APPLICATION[model]
        models[model] = {
            "application": app,
            "restart_s": apps[app],
            "measured": why.startswith("measured"),
            "basis": why,
        }
    return {"derivation": DERIVATION, "restart_s": apps, "models": models}


@functools.cache
def model_restart_table() -> dict[str, dict]:
    """Per catalogue model: its application, restart seconds, whether measured."""
    return json.loads(RESTART_FILE.read_text(encoding="utf-8"))["models"]


def restart_s(model: str) -> float:
    """The measured restart delay (s) of ``model``'s application."""
    return float(model_restart_table()[model]["restart_s"])


def state_bytes(model: str) -> float:
    """Bytes of one replica of a job's state: :data:`STATE_COPIES` × model bytes."""
    return STATE_COPIES * CATALOGUE[model].model_bytes


def moved_pairs(old: Sequence[int], new: Sequence[int]) -> list[tuple[int, int]]:
    """(old group, new group) of every worker whose state moves: the workers that stay
    in a group cancel out, the rest pair in ascending order."""
    before, after = Counter(old), Counter(new)
    rest_old = sorted((before - after).elements())
    rest_new = sorted((after - before).elements())
    return list(zip(rest_old, rest_new, strict=True))


def state_move_s(
    perf: PerformanceModel,
    link_jobs: np.ndarray,
    model: str,
    old_groups: Sequence[int],
    new_groups: Sequence[int],
) -> float:
    """Seconds to move the state of a job's workers from ``old_groups`` to
    ``new_groups``: ``max_l B_l (1 + n_l) / bw_l``."""
    pairs = moved_pairs(old_groups, new_groups)
    if not pairs:
        return 0.0
    src, dst = (np.array(side, dtype=np.int64) for side in zip(*pairs, strict=True))
    load = perf.charge(src, dst, np.full(len(pairs), state_bytes(model)), pcie_both=True)
    bw = perf.topology.link_bw
    return max(B * (1 + int(link_jobs[k])) / float(bw[k]) for k, B in load.items())


@dataclass(frozen=True)
class MigrationCost:
    """The rule pricing restarts (module docstring).

    Attributes:
        flat_s: a flat restart delay for every model and no state move; None =
            measured (per-model restart + state move).
        scale: multiplies every delay (a sensitivity knob; 1 = as measured).
    """

    flat_s: float | None = None
    scale: float = 1.0

    def __post_init__(self) -> None:
        for name, value in (("flat_s", self.flat_s), ("scale", self.scale)):
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise InputError(f"migration cost: {name} must be finite and >= 0, got {value!r}")

    @classmethod
    def parse(cls, cost: float | str, scale: float = 1.0) -> MigrationCost:
        """``"measured"`` or a number of seconds (config: ``simulation.migration_cost``)."""
        if cost == "measured":
            return cls(None, scale)
        return cls(float(cost), scale)

    @property
    def measured(self) -> bool:
        return self.flat_s is None

    def restart_s(self, model: str) -> float:
        """Seconds a resumed (or migrated) job of ``model`` restarts, before any move."""
        return self.scale * (restart_s(model) if self.flat_s is None else self.flat_s)

    def migration_s(
        self,
        perf: PerformanceModel,
        link_jobs: np.ndarray,
        model: str,
        old_groups: Sequence[int],
        new_groups: Sequence[int],
    ) -> float:
        """Seconds a job of ``model`` moved from ``old_groups`` to ``new_groups`` (its
        workers' GPU groups) makes no progress: restart plus state move."""
        if self.flat_s is not None:
            return self.scale * self.flat_s
        move = state_move_s(perf, link_jobs, model, old_groups, new_groups)
        return self.scale * (restart_s(model) + move)


#: a restart may cost at most this many times the longest job of the window (its
#: isolated run time): a cost past it would stall every moved job for longer than
#: the whole window runs (and a huge one overflows the event clock)
MAX_COST_JOB_MULTIPLE = 10


def check_cost_bound(cost: float | str, scale: float, longest_s: float, where: str) -> None:
    """Refuse (``InputError`` naming ``simulation.migration_cost``) a restart rule
    whose dearest restart (``scale`` x the flat cost, or x the dearest measured
    restart) is more than :data:`MAX_COST_JOB_MULTIPLE` times ``longest_s``."""
    rule = MigrationCost.parse(cost, scale)
    dearest = (
        rule.flat_s
        if rule.flat_s is not None
        else max(float(m["restart_s"]) for m in model_restart_table().values())
    )
    worst = rule.scale * dearest
    limit = MAX_COST_JOB_MULTIPLE * longest_s
    if worst > limit:
        raise InputError(
            f"{where}: simulation.migration_cost: a restart of {worst:.6g} s (x "
            f"migration_cost_scale) is more than {MAX_COST_JOB_MULTIPLE} times the longest "
            f"job of the window ({longest_s:.6g} s alone)"
        )


def main(argv: list[str] | None = None) -> int:
    """``python -m marl_sched.migration --shared ../shared/data --out FILE``."""
    from marl_sched.files import atomic_write_text

    ap = argparse.ArgumentParser(description="Derive marl_sched/data/restart_times.json.")
    ap.add_argument("--shared", required=True, help="the shared data folder (../shared/data)")
    ap.add_argument("--out", default=str(RESTART_FILE))
    args = ap.parse_args(argv)
    table = derive_restart_table(args.shared)
    atomic_write_text(args.out, json.dumps(table, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
