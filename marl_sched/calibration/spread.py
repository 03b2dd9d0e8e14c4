"""Gavel's consolidated vs unconsolidated pairs: the measured cost of spreading a job
over servers, and perf.py's prediction of it (:class:`GavelSpread`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from marl_sched.calibration.topologies import kind_seconds, unit_spec
from marl_sched.config import TopologyConfig
from marl_sched.perf import PerformanceModel, overlap_time
from marl_sched.topology import Topology


def gavel_consolidation(
    gavel: dict[str, dict[tuple[str, int], dict[Any, Any]]],
) -> list[tuple[str, int, float]]:
    """Measured consolidated/unconsolidated throughput ratios on V100 for ResNet-18/50
    (the job types with a known parameter count), scale factors 2, 4, 8."""
    out = []
    for (job, scale), row in sorted(gavel["v100"].items()):
        if scale == 1 or not job.startswith(("ResNet-18 ", "ResNet-50 ")):
            continue
        un = gavel["v100_unconsolidated"].get((job, scale), {}).get(None, 0.0)
        if row[None] > 0 and un > 0:
            out.append((job, scale, row[None] / un))
    return out


class GavelSpread:
    """Gavel's consolidated/unconsolidated pairs under perf.py, precomputed.

    The job is an all-reduce job (ring, no PS) on the default topology (8 V100 per
    server, PCIe 128, NIC 25 Gbit/s), its compute from the scale-1 throughput;
    consolidated = the first ``k`` GPUs of one server, unconsolidated = one GPU per
    server. :meth:`ratios` gives the model's ratio at given link efficiencies and γ.
    ``keep(job_type)``, when given, keeps only the pairs of the job types it accepts.
    """

    def __init__(self, gavel, keep: Callable[[str], bool] | None = None) -> None:
        topology = Topology.from_config(TopologyConfig())
        perf = PerformanceModel(topology)
        iso = {job: row[None] for (job, scale), row in gavel["v100"].items() if scale == 1}
        self.points = [p for p in gavel_consolidation(gavel) if keep is None or keep(p[0])]
        self.measured = np.array([m for _, _, m in self.points])
        self.compute = np.array([1.0 / iso[job] for job, _, _ in self.points])
        kinds = ("pcie", "qpi", "nic")
        self.cons = np.zeros((len(self.points), 3))
        self.spread = np.zeros((len(self.points), 3))
        for i, (job, scale, _) in enumerate(self.points):
            spec = unit_spec((11.7e6 if job.startswith("ResNet-18") else 25.6e6) * 4 / 1e6)
            packed = [int(g) for g in topology.gpu_group[:scale]]
            spread = [int(topology.server_groups_start[s]) for s in range(scale)]
            for row, groups in ((self.cons, packed), (self.spread, spread)):
                ks = kind_seconds(topology, perf.layout(spec, groups, []))
                row[i] = [ks.get(k, 0.0) for k in kinds]

    def ratios(self, efficiency: dict[str, float], overhead: float, gamma: float) -> np.ndarray:
        eff = np.array(
            [efficiency["pcie"], efficiency.get("qpi", efficiency["pcie"]), efficiency["nic"]]
        )
        t_cons = overlap_time(self.compute, (self.cons / eff).max(axis=1), gamma) + overhead
        t_un = overlap_time(self.compute, (self.spread / eff).max(axis=1), gamma) + overhead
        return t_un / t_cons
