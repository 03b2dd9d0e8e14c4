"""Pollux fits: link efficiencies, model sizes, compute times and the sync overhead."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from marl_sched.calibration.constants import (
    NCF_PARAMS,
    PARAM_COUNTS,
    POLLUX_INIT_BATCH,
    POLLUX_MODELS,
)
from marl_sched.calibration.data import PolluxProfile, PolluxRow
from marl_sched.calibration.numerics import _minimize_log_scalar
from marl_sched.calibration.spread import GavelSpread
from marl_sched.calibration.topologies import (
    kind_seconds,
    pollux_groups,
    pollux_topology,
    unit_spec,
)
from marl_sched.perf import PerformanceModel, overlap_time

# --------------------------------------------------------------------------- Pollux links


@dataclass(frozen=True)
class SyncPoint:
    """A measured (exposed) sync time, the compute it overlaps with, and its per-MB
    byte accounting under perf.py."""

    model: str
    placement: str
    measured: float
    kind_s: dict[str, float]  # seconds per MB of model at efficiency 1, by link kind
    compute: float = 0.0  # 1-GPU step_time - sync_time at the same local batch (s)
    local_bsz: int = 0

    @property
    def multi_node(self) -> bool:
        return len(self.placement) > 1


def sync_statistic(rows: Iterable[PolluxRow]) -> dict[str, PolluxRow]:
    """Per placement, the row at the smallest profiled local batch (the least
    backward compute to hide the all-reduce behind: the most exposed sync)."""
    best: dict[str, PolluxRow] = {}
    for r in rows:
        if r.placement not in best or r.local_bsz < best[r.placement].local_bsz:
            best[r.placement] = r
    return best


def _one_gpu_compute(prof: PolluxProfile):
    """``local_bsz → step_time - sync_time`` on one GPU, log-log interpolated."""
    single = sorted(
        (r.local_bsz, r.step_time - r.sync_time) for r in prof.placements if r.placement == "1"
    )
    bsz = np.log([b for b, _ in single])
    comp = np.log([c for _, c in single])
    return lambda b: math.exp(float(np.interp(math.log(b), bsz, comp)))


def pollux_sync_points(
    pollux: dict[str, PolluxProfile], every_batch: bool = False
) -> list[SyncPoint]:
    """Every (model, placement with ≥ 2 GPUs) with its perf.py byte accounting for an
    all-reduce job; one point per placement at its smallest local batch, or with
    ``every_batch`` one per (placement, local batch). ``compute``: the 1-GPU compute at that
    batch."""
    topology = pollux_topology()
    perf = PerformanceModel(topology)
    spec = unit_spec()
    cache: dict[str, dict[str, float]] = {}
    points = []
    for model in POLLUX_MODELS:
        prof = pollux[model]
        compute = _one_gpu_compute(prof)
        if every_batch:
            merged = {(r.placement, r.local_bsz): r for r in prof.scalability}
            merged.update({(r.placement, r.local_bsz): r for r in prof.placements})
            rows = [merged[k] for k in sorted(merged)]
        else:
            merged = sync_statistic(prof.scalability)
            merged.update(sync_statistic(prof.placements))
            rows = [merged[k] for k in sorted(merged)]
        for r in rows:
            if sum(int(c) for c in r.placement) < 2:
                continue
            if r.placement not in cache:
                groups = pollux_groups(topology, r.placement)
                layout = perf.layout(spec, groups, [])
                cache[r.placement] = kind_seconds(topology, layout)
            points.append(
                SyncPoint(
                    model,
                    r.placement,
                    r.sync_time,
                    cache[r.placement],
                    compute(r.local_bsz),
                    r.local_bsz,
                )
            )
    return points


class _Arrays:
    """The points as arrays, for fast vectorised losses."""

    def __init__(self, points: Sequence[SyncPoint]) -> None:
        self.models = sorted({p.model for p in points})
        self.model_idx = np.array([self.models.index(p.model) for p in points], dtype=np.int64)
        self.pcie = np.array([p.kind_s.get("pcie", 0.0) for p in points])
        self.nic = np.array([p.kind_s.get("nic", 0.0) for p in points])
        self.compute = np.array([p.compute for p in points])
        self.measured = np.array([p.measured for p in points])

    def predicted(
        self, mb: dict[str, float], eff: dict[str, float], overhead: float, gamma: float
    ) -> np.ndarray:
        """Exposed sync: ``overlap(compute, C) - compute + overhead``."""
        size = np.array([mb.get(m, np.nan) for m in self.models])[self.model_idx]
        comm = np.maximum(self.pcie / eff["pcie"], self.nic / eff["nic"]) * size
        return overlap_time(self.compute, comm, gamma) - self.compute + overhead


def predicted_sync(
    points: Sequence[SyncPoint],
    mb: dict[str, float],
    eff: dict[str, float],
    overhead: float,
    gamma: float,
) -> np.ndarray:
    """perf.py's exposed sync time at each point (see :class:`_Arrays`)."""
    return _Arrays(points).predicted(mb, eff, overhead, gamma)


def _log_loss(arr: _Arrays, mb, eff, overhead: float, gamma: float) -> float:
    return float(np.mean(np.log(arr.predicted(mb, eff, overhead, gamma) / arr.measured) ** 2))


#: the overlap exponents tried (Pollux fits γ per job in [1, 10]; at 8 the form is
#: max(compute, comm) to within 10 %)
GAMMA_GRID = tuple(float(g) for g in np.round(np.exp(np.linspace(0.0, math.log(8.0), 19)), 4))


def fit_links(
    pollux: dict[str, PolluxProfile],
    overhead: float,
    spread: GavelSpread | None = None,
    keep: Callable[[str, str], bool] | None = None,
) -> tuple[dict[str, float], dict[str, float], dict[str, Any]]:
    """PCIe and NIC efficiencies, the overlap exponent γ, and the model sizes.

    The loss: Pollux's exposed sync (mean squared log error over every ≥ 2-GPU placement
    and local batch, single- and multi-node weighted half each) plus, with ``spread``,
    Gavel's consolidation ratios, with equal weight. Per γ of :data:`GAMMA_GRID`, the
    efficiencies by coordinate descent; γ the least-loss value; then ``model_mb`` refitted
    from the multi-node rows. ``keep(model, placement)`` restricts the Pollux rows (the
    holdout's FIT subset)."""
    points = pollux_sync_points(pollux, every_batch=True)
    if keep is not None:
        points = [p for p in points if keep(p.model, p.placement)]
    known = {m: n * 4 / 1e6 for m, (n, _) in PARAM_COUNTS.items()}
    single = _Arrays([p for p in points if p.model in known and not p.multi_node])
    multi = _Arrays([p for p in points if p.model in known and p.multi_node])

    def loss(eff: dict[str, float], gamma: float) -> float:
        total = 0.5 * (
            _log_loss(single, known, eff, overhead, gamma)
            + _log_loss(multi, known, eff, overhead, gamma)
        )
        if spread is not None:
            ratio = spread.ratios(eff, overhead, gamma)
            total += float(np.mean(np.log(ratio / spread.measured) ** 2))
        return total

    best: tuple[float, float, dict[str, float]] | None = None
    for gamma in GAMMA_GRID:
        eff = {"pcie": 1.0, "nic": 1.0}
        for _ in range(3):
            for kind in ("pcie", "nic"):
                eff[kind] = _minimize_log_scalar(
                    lambda e, k=kind, g=gamma, cur=dict(eff): loss({**cur, k: e}, g),
                    lo=1e-2,
                    hi=1e2,
                    grid=60,
                )
        value = loss(eff, gamma)
        if best is None or value < best[0]:
            best = (value, gamma, dict(eff))
    assert best is not None
    value, gamma, eff = best
    fitted_mb = {}
    for model in POLLUX_MODELS:
        rows = _Arrays([p for p in points if p.multi_node and p.model == model])
        fitted_mb[model] = _minimize_log_scalar(
            lambda m, rows=rows, model=model: _log_loss(rows, {model: m}, eff, overhead, gamma),
            lo=0.1,
            hi=1e4,
        )
    info = {
        "n_single": sum(not p.multi_node for p in points if p.model in known),
        "n_multi": sum(p.multi_node for p in points if p.model in known),
        "n_gavel": 0 if spread is None else len(spread.measured),
        "pollux_loss": (
            _log_loss(single, known, eff, overhead, gamma),
            _log_loss(multi, known, eff, overhead, gamma),
        ),
        "loss": value,
        "fitted_mb": fitted_mb,
        "param_mb": known,
        "gamma": gamma,
    }
    return eff, fitted_mb, info


def pollux_model_mb(fitted_mb: dict[str, float]) -> dict[str, tuple[float, str]]:
    """Shipped sizes: fitted to the multi-node sync times (what perf.py's NIC term
    needs), with the parameter-count size quoted beside it where known."""
    out = {}
    for model in POLLUX_MODELS:
        fit = f"fitted to Pollux multi-node sync times ({fitted_mb[model]:.1f} MB"
        if model in PARAM_COUNTS:
            n, what = PARAM_COUNTS[model]
            out[model] = (fitted_mb[model], f"{fit}; {what} x 4 B = {n * 4 / 1e6:.1f} MB)")
        elif model == "ncf":
            out[model] = (
                fitted_mb[model],
                f"{fit}; adaptdl's NeuMF on MovieLens-1M has {NCF_PARAMS / 1e6:.2f}M "
                f"parameters = {NCF_PARAMS * 4 / 1e6:.2f} MB)",
            )
        else:
            out[model] = (
                fitted_mb[model],
                f"{fit}; no parameter count recorded for the Pollux DeepSpeech2 run)",
            )
    return out


# --------------------------------------------------------------------------- Pollux compute


def pollux_compute(pollux: dict[str, PolluxProfile], t4: float) -> dict[str, tuple[float, int]]:
    """V100 seconds per iteration at the 1-GPU starting batch (see POLLUX_INIT_BATCH)."""
    out = {}
    for model in POLLUX_MODELS:
        single = [r for r in pollux[model].placements if r.placement == "1"]
        cap = min(POLLUX_INIT_BATCH[model], max(r.local_bsz for r in single))
        row = min(single, key=lambda r: (abs(math.log(r.local_bsz / cap)), r.local_bsz))
        out[model] = ((row.step_time - row.sync_time) * t4, row.local_bsz)
    return out


def sync_overhead(pollux: dict[str, PolluxProfile]) -> tuple[float, dict[str, float]]:
    """Median over models of the median single-GPU sync time (nothing to send)."""
    per_model = {
        m: statistics.median(r.sync_time for r in p.placements if r.placement == "1")
        for m, p in pollux.items()
    }
    return statistics.median(per_model.values()), per_model
