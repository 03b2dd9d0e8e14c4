"""Fit every constant of ``marl_sched/data/calibration.json`` from measured data
(docs/performance-model.md; ``python -m marl_sched.calibration --help``).

Submodules (public names re-exported here), in the order the data flows:
``constants``, ``data`` (Gavel, Pollux, DL2 loaders), ``numerics``, ``topologies``
(the testbeds, byte accounting), ``speed`` (GPU speeds, memory limits), ``spread``
(Gavel's consolidation pairs), ``pollux`` (link efficiencies, overlap, sync, model
sizes), ``dl2`` (CPU use, testbed bandwidth), ``gavel`` (interference vectors),
``coupling`` (λ_L), ``checks``, ``assemble`` (:func:`fit`, :func:`fit_all`), ``cli``
and ``report`` (imported on demand)."""

from marl_sched.calibration.assemble import MIN_PS_CPU, SIG_DIGITS, Fit, fit, fit_all, mem_rule
from marl_sched.calibration.checks import (
    dl2_noise_floor,
    gavel_consolidation_model,
    pollux_errors,
    pollux_noise_floor,
)
from marl_sched.calibration.cli import main, write_json_atomic
from marl_sched.calibration.constants import (
    ANLS_ITERS,
    ANLS_RIDGE,
    DL2_MODELS,
    FAMILY_PRIOR,
    GAVEL_MAP,
    GAVEL_SPEED_MAP,
    GROUP_TO_SERVER,
    NCF_PARAMS,
    PACKED_CEILING,
    PARAM_COUNTS,
    POLLUX_CPU_FROM,
    POLLUX_GAVEL_ARCH,
    POLLUX_INIT_BATCH,
    POLLUX_MAX_NODES,
    POLLUX_MODELS,
    POLLUX_NIC_GBPS,
    POLLUX_PCIE_GBPS,
    PUBLISHED,
    SOCKET_TO_SERVER,
    TARGET_SERVER_NEIGHBOUR,
)
from marl_sched.calibration.coupling import (
    coupling_stats,
    fit_level_coupling,
    neighbour_slowdown,
    packed_server_slowdown,
)
from marl_sched.calibration.data import (
    DL2Row,
    PolluxProfile,
    PolluxRow,
    load_dl2,
    load_gavel,
    load_pollux,
    profiles_dir,
)
from marl_sched.calibration.dl2 import (
    DL2Point,
    dl2_cpu,
    dl2_layout,
    dl2_points,
    dl2_relative_speed,
    fit_dl2_bandwidth,
)
from marl_sched.calibration.gavel import (
    catalogue_vectors,
    fit_gavel_interference,
    fit_pair_factors,
    gavel_pairs,
    gavel_prediction,
    net_intensity,
)
from marl_sched.calibration.numerics import geomean, relative_errors
from marl_sched.calibration.pollux import (
    SyncPoint,
    fit_links,
    pollux_compute,
    pollux_model_mb,
    pollux_sync_points,
    sync_overhead,
    sync_statistic,
)
from marl_sched.calibration.speed import fit_gpu_speed, fit_model_gpu_speed, gavel_unfit
from marl_sched.calibration.spread import GavelSpread, gavel_consolidation
from marl_sched.calibration.topologies import (
    DL2_SERVER,
    POLLUX_SERVER,
    comm_time_at,
    dl2_topology,
    kind_seconds,
    pollux_groups,
    pollux_topology,
    unit_spec,
)

__all__ = [
    "ANLS_ITERS",
    "ANLS_RIDGE",
    "DL2_MODELS",
    "DL2_SERVER",
    "FAMILY_PRIOR",
    "GAVEL_MAP",
    "GAVEL_SPEED_MAP",
    "GROUP_TO_SERVER",
    "MIN_PS_CPU",
    "NCF_PARAMS",
    "PACKED_CEILING",
    "PARAM_COUNTS",
    "POLLUX_CPU_FROM",
    "POLLUX_GAVEL_ARCH",
    "POLLUX_INIT_BATCH",
    "POLLUX_MAX_NODES",
    "POLLUX_MODELS",
    "POLLUX_NIC_GBPS",
    "POLLUX_PCIE_GBPS",
    "POLLUX_SERVER",
    "PUBLISHED",
    "SIG_DIGITS",
    "SOCKET_TO_SERVER",
    "TARGET_SERVER_NEIGHBOUR",
    "DL2Point",
    "DL2Row",
    "Fit",
    "GavelSpread",
    "PolluxProfile",
    "PolluxRow",
    "SyncPoint",
    "catalogue_vectors",
    "comm_time_at",
    "coupling_stats",
    "dl2_cpu",
    "dl2_layout",
    "dl2_noise_floor",
    "dl2_points",
    "dl2_relative_speed",
    "dl2_topology",
    "fit",
    "fit_all",
    "fit_dl2_bandwidth",
    "fit_gavel_interference",
    "fit_pair_factors",
    "fit_gpu_speed",
    "fit_level_coupling",
    "fit_model_gpu_speed",
    "gavel_unfit",
    "fit_links",
    "gavel_consolidation",
    "gavel_consolidation_model",
    "gavel_pairs",
    "gavel_prediction",
    "geomean",
    "kind_seconds",
    "load_dl2",
    "load_gavel",
    "load_pollux",
    "main",
    "mem_rule",
    "neighbour_slowdown",
    "net_intensity",
    "packed_server_slowdown",
    "pollux_compute",
    "pollux_errors",
    "pollux_groups",
    "pollux_model_mb",
    "pollux_noise_floor",
    "pollux_sync_points",
    "pollux_topology",
    "profiles_dir",
    "relative_errors",
    "sync_overhead",
    "sync_statistic",
    "unit_spec",
    "write_json_atomic",
]
