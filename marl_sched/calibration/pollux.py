"""Pollux fits: link efficiencies, model sizes, compute times and the sync overhead."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
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
from marl_sched.calibration.topologies import (
    comm_time_at,
    kind_seconds,
    pollux_groups,
    pollux_topology,
    unit_spec,
)
from marl_sched.perf import PerformanceModel

# --------------------------------------------------------------------------- Pollux links


@dataclass(frozen=True)
class SyncPoint:
    """A measured communication time and its per-MB byte accounting under perf.py."""

    model: str
    placement: str
    measured: float
    kind_s: dict[str, float]  # seconds per MB of model at efficiency 1, by link kind

    @property
    def multi_node(self) -> bool:
        return len(self.placement) > 1


def sync_statistic(rows: Iterable[PolluxRow]) -> dict[str, float]:
    """Per placement, the sync time at the smallest profiled local batch.

    The smallest batch leaves the least backward compute to hide all-reduce behind;
    Pollux's exposed sync shrinks with batch (cifar10 on ``11``: 0.06 s at batch 32,
    0.003 s at 1024) and perf.py has no overlap term, so this is the figure closest
    to the raw transfer time.
    """
    best: dict[str, tuple[int, float]] = {}
    for r in rows:
        if r.placement not in best or r.local_bsz < best[r.placement][0]:
            best[r.placement] = (r.local_bsz, r.sync_time)
    return {p: s for p, (_, s) in best.items()}


def pollux_sync_points(pollux: dict[str, PolluxProfile]) -> list[SyncPoint]:
    """Every (model, placement with ≥ 2 GPUs) with its perf.py byte accounting.

    Equivalence: a ring all-reduce over ``n`` GPUs is modelled as ``p = n`` PS
    shards co-located one per worker. Under perf.py each (shard, worker) pair moves
    ``2M/n``; a worker's PCIe link carries its ``n`` pairs = ``2M``; a server with
    ``k`` of the ``n`` GPUs has ``2k(n-k)`` remote pairs on its NIC = ``4M·k(n-k)/n``.
    """
    topology = pollux_topology()
    perf = PerformanceModel(topology)
    spec = unit_spec()
    cache: dict[str, dict[str, float]] = {}
    points = []
    for model in POLLUX_MODELS:
        prof = pollux[model]
        stats = sync_statistic(prof.placements)
        scal = sync_statistic(prof.scalability)
        merged = dict(stats)
        merged.update({k: v for k, v in scal.items() if k not in stats})
        for placement, measured in merged.items():
            if sum(int(c) for c in placement) < 2:
                continue
            if placement not in cache:
                groups = pollux_groups(topology, placement)
                layout = perf.layout(spec, groups, groups)
                cache[placement] = kind_seconds(topology, layout)
            points.append(SyncPoint(model, placement, measured, cache[placement]))
    return points


def _log_loss(
    points: Sequence[SyncPoint], mb: dict[str, float], eff: dict[str, float], overhead: float
) -> float:
    err = [
        math.log((comm_time_at(p.kind_s, eff) * mb[p.model] + overhead) / p.measured) ** 2
        for p in points
    ]
    return float(np.mean(err))


def fit_links(
    pollux: dict[str, PolluxProfile], overhead: float
) -> tuple[dict[str, float], dict[str, float], dict[str, Any]]:
    """PCIe and NIC efficiencies (and model sizes of the uncounted models).

    PCIe from single-node placements ``2``/``3``/``4``, NIC from all multi-node
    placements and scalability rows, both on the four models with a known parameter
    count; then ``model_mb`` of every model refitted from its multi-node rows at the
    fitted efficiencies (the only size estimate for deepspeech2 and ncf).
    """
    points = pollux_sync_points(pollux)
    known = {m: n * 4 / 1e6 for m, (n, _) in PARAM_COUNTS.items()}
    single = [p for p in points if not p.multi_node and p.model in known]
    multi = [p for p in points if p.multi_node and p.model in known]
    pcie = _minimize_log_scalar(
        lambda e: _log_loss(single, known, {"pcie": e, "nic": 1e9}, overhead)
    )
    nic = _minimize_log_scalar(
        lambda e: _log_loss(multi, known, {"pcie": pcie, "nic": e}, overhead)
    )
    eff = {"pcie": pcie, "nic": nic}
    fitted_mb = {}
    for model in POLLUX_MODELS:
        rows = [p for p in points if p.multi_node and p.model == model]
        fitted_mb[model] = _minimize_log_scalar(
            lambda m, rows=rows, model=model: _log_loss(rows, {model: m}, eff, overhead),
            lo=0.1,
            hi=1e4,
        )
    info = {
        "n_single": len(single),
        "n_multi": len(multi),
        "fitted_mb": fitted_mb,
        "param_mb": known,
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
