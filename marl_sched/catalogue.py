"""The workload catalogue: models, their resource profiles, and GPU speeds, all read
from ``marl_sched/data/calibration.json`` (docs/performance-model.md).

Resources, in this order in every vector (``RESOURCES``): ``cpu`` (cores and caches),
``pcie`` (the group's PCIe switch), ``membw`` (the socket's memory bandwidth and QPI),
``disk`` (the server's disk I/O), ``net`` (the server's NIC)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

CALIBRATION_FILE = Path(__file__).resolve().parent / "data" / "calibration.json"
RESOURCES = ("cpu", "pcie", "membw", "disk", "net")
N_RESOURCES = len(RESOURCES)


def calibration_text(data: dict) -> str:
    """The text of ``calibration.json`` holding ``data`` (indented JSON), as the
    calibration fit writes it and as its digest is taken."""
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class ModelSpec:
    """One model of the catalogue: what the performance model needs to know.

    Attributes:
        name: catalogue key (lower case, as in traces).
        index: position in :data:`MODEL_NAMES` (a stable feature id).
        compute_s: seconds per iteration of forward + backward on the reference GPU
            (V100, speed 1.0) at the model's profiled batch size.
        model_mb: size of the parameters (= gradients) moved each iteration, MB.
        cpu_worker: CPU cores a worker task uses.
        cpu_ps: CPU cores a parameter-server task uses.
        mem_gb: host memory per task, GB.
        pressure: how hard the job presses on each resource (per task), shape (5,).
        sensitivity: how much the job slows per unit of neighbours' pressure, (5,).
        source: where the numbers come from.
        gpu_speed: this model's speed per GPU type relative to the V100, where
            measured (Gavel); other types use the per-type figure (:meth:`speed_on`).
        gpu_unfit: GPU types whose memory cannot hold one of its workers (measured
            by Gavel); a placement constraint (:meth:`fits_on`).
    """

    name: str
    index: int
    compute_s: float
    model_mb: float
    cpu_worker: float
    cpu_ps: float
    mem_gb: float
    pressure: np.ndarray
    sensitivity: np.ndarray
    source: str
    gpu_speed: dict[str, float] = field(default_factory=dict)
    gpu_unfit: frozenset[str] = frozenset()

    @property
    def model_bytes(self) -> float:
        return self.model_mb * 1e6

    def fits_on(self, gpu_type: str) -> bool:
        """Whether one worker of this model fits in a ``gpu_type`` GPU's memory."""
        return gpu_type not in self.gpu_unfit

    def speed_on(self, gpu_type: str, per_type: dict[str, float] | None = None) -> float:
        """Relative speed (V100 = 1) of this model on ``gpu_type``: its own measured
        figure, else the per-type one (``per_type``, default :data:`GPU_SPEED`)."""
        if gpu_type in self.gpu_speed:
            return self.gpu_speed[gpu_type]
        return (GPU_SPEED if per_type is None else per_type)[gpu_type]


@dataclass(frozen=True)
class Calibration:
    """All fitted constants of the performance model (see calibration.json)."""

    gpu_speed: dict[str, float]
    link_efficiency: dict[str, float]
    sync_overhead_s: float
    level_coupling: dict[str, float]
    models: dict[str, ModelSpec]
    notes: dict[str, str]
    #: Pollux's overlap exponent γ (1 = compute and communication add up)
    overlap_gamma: float = 1.0
    #: per GPU type, the model pairs (sorted) that cannot share one GPU (Gavel's
    #: ``[0, 0]`` pairs); read only with ``topology.gpu_sharing`` > 1
    gpu_share_conflicts: dict[str, frozenset[tuple[str, str]]] = field(default_factory=dict)

    def can_share(self, gpu_type: str, a: str, b: str) -> bool:
        """Whether workers of models ``a`` and ``b`` may share one ``gpu_type`` GPU."""
        pair = (a, b) if a <= b else (b, a)
        return pair not in self.gpu_share_conflicts.get(gpu_type, frozenset())


@lru_cache(maxsize=4)
def load_calibration(path: str | None = None) -> Calibration:
    """Read the calibration file (the shipped one by default)."""
    data = json.loads(Path(path or CALIBRATION_FILE).read_text(encoding="utf-8"))
    models = {}
    by_model = data.get("gpu_speed_by_model", {})
    for i, name in enumerate(sorted(data["models"])):
        m = data["models"][name]
        models[name] = ModelSpec(
            name=name,
            index=i,
            compute_s=float(m["compute_s"]),
            model_mb=float(m["model_mb"]),
            cpu_worker=float(m["cpu_worker"]),
            cpu_ps=float(m["cpu_ps"]),
            mem_gb=float(m["mem_gb"]),
            pressure=np.asarray(m["pressure"], dtype=np.float64),
            sensitivity=np.asarray(m["sensitivity"], dtype=np.float64),
            source=str(m["source"]),
            gpu_speed={k: float(v) for k, v in by_model.get(name, {}).items()},
            gpu_unfit=frozenset(m.get("gpu_unfit", ())),
        )
    return Calibration(
        gpu_speed={k: float(v) for k, v in data["gpu_speed"].items()},
        link_efficiency={k: float(v) for k, v in data["link_efficiency"].items()},
        sync_overhead_s=float(data["sync_overhead_s"]),
        level_coupling={k: float(v) for k, v in data["level_coupling"].items()},
        models=models,
        notes=dict(data.get("notes", {})),
        overlap_gamma=float(data.get("overlap_gamma", 1.0)),
        gpu_share_conflicts={
            gpu: frozenset((str(a), str(b)) for a, b in pairs)
            for gpu, pairs in data.get("gpu_share_conflicts", {}).items()
        },
    )


CALIBRATION = load_calibration()
GPU_SPEED: dict[str, float] = CALIBRATION.gpu_speed
CATALOGUE: dict[str, ModelSpec] = CALIBRATION.models
MODEL_NAMES: tuple[str, ...] = tuple(sorted(CATALOGUE))
