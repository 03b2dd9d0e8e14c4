"""The learned interference model's numpy side: features, forward pass, samples.

The RL reward cannot ask a real cluster how slow each tried placement would be, so
(as in Zhao & Wu's paper) a learned model predicts each job's **slowdown** from its
co-location features::

    slowdown = iteration_time / iteration_time_alone_on_the_same_placement   (>= 1)

where the alone time is the performance model's time with empty cluster pressures
and no other job on its links. This module holds what needs no torch:

- the feature layout (:data:`FEATURE_NAMES`, :func:`job_features`,
  :func:`candidate_features`), shared by training, the environment's reward and the
  interference-aware heuristic;
- :class:`InterferenceModel`, the MLP forward in numpy, read from one ``.npz`` file
  (no pickle) that the trainer in ``agents/interference`` writes;
- :func:`generate_samples`, random but realistic co-locations from the simulator;
- loaders turning the real measurements of ``../shared/data/profiles`` into samples
  of the same form (:func:`real_samples`).

**Feature layout** (schema version :data:`FEATURE_SCHEMA_VERSION`; ``r`` runs over
the resources cpu, pcie, membw, disk, net; ``L`` over the levels group, socket,
server; ``k`` over the link kinds pcie, qpi, nic, rack_uplink, sc_uplink):

=================================  ==========================================================
name                               meaning
=================================  ==========================================================
``own_pressure_r`` (5)             the job's per-task pressure vector (catalogue)
``own_sensitivity_r`` (5)          the job's sensitivity vector (catalogue)
``log_compute_s``                  ln of compute seconds per iteration on the reference GPU
``log_model_mb``                   ln of the model (gradient) size, MB
``gpu_speed``                      relative speed of the job's slowest worker GPU
``workers``, ``ps``                task counts
``groups``, ``servers``,           distinct GPU groups holding workers; distinct servers,
``racks``, ``subclusters``         racks, subclusters holding any task
``nbr_L_r_max``, ``nbr_L_r_mean``  other jobs' summed pressure on resource r at level L
  (30)                             around each of the job's worker groups: max and mean over
                                   those groups (what the job's own tasks add is excluded)
``nbr_L_workers_max/_mean`` (6)    other jobs' workers (busy GPUs) at level L around each
                                   worker group, max and mean over the groups
``link_k_jobs_max`` (5)            most other jobs on any of the job's own links of kind k
``link_k_load_max`` (5)            largest load other jobs put on one of those links: the
                                   sum of the shares of it they would use alone
``log_link_k_alone_s`` (5)         ln(1e-4 + t), t = the job's transfer time on its busiest
                                   link of kind k when alone (bytes / bandwidth)
``log_link_k_shared_s`` (5)        the same under the links' current total load ``U``:
                                   ln(1e-4 + max_l bytes / bandwidth · max(1, U_l))
=================================  ==========================================================

The "number of jobs per level" is counted in other jobs' *workers* (busy GPUs): the
read-only :class:`~marl_sched.simulator.ClusterView` exposes occupancy, not job
identities, and the pressures the simulator sums are per task anyway.
"""

from __future__ import annotations

import ast
import csv
import dataclasses
import hashlib
import json
import math
import warnings
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from marl_sched.calibration import DL2_SERVER, POLLUX_SERVER
from marl_sched.catalogue import (
    CALIBRATION,
    CALIBRATION_FILE,
    CATALOGUE,
    GPU_SPEED,
    MODEL_NAMES,
    RESOURCES,
)
from marl_sched.config import REPO_ROOT, ServerTypeConfig, TopologyConfig
from marl_sched.errors import InputError
from marl_sched.jobs import Job, Placement, default_num_ps
from marl_sched.perf import JobLayout, PerformanceModel
from marl_sched.simulator import ClusterView, Simulator
from marl_sched.topology import GBPS, LINK_KINDS, Topology

FEATURE_SCHEMA_VERSION = 1
LEVELS = ("group", "socket", "server")
#: co-location level of a sample: the closest level at which it meets another job
COLOCATION_LEVELS = ("none", "group", "socket", "server", "cross-server")
_TIME_FLOOR_S = 1e-4


def _names() -> tuple[str, ...]:
    names = [f"own_pressure_{r}" for r in RESOURCES]
    names += [f"own_sensitivity_{r}" for r in RESOURCES]
    names += ["log_compute_s", "log_model_mb", "gpu_speed"]
    names += ["workers", "ps", "groups", "servers", "racks", "subclusters"]
    for level in LEVELS:
        for r in RESOURCES:
            names += [f"nbr_{level}_{r}_max", f"nbr_{level}_{r}_mean"]
    for level in LEVELS:
        names += [f"nbr_{level}_workers_max", f"nbr_{level}_workers_mean"]
    names += [f"link_{k}_jobs_max" for k in LINK_KINDS]
    names += [f"link_{k}_load_max" for k in LINK_KINDS]
    names += [f"log_link_{k}_alone_s" for k in LINK_KINDS]
    names += [f"log_link_{k}_shared_s" for k in LINK_KINDS]
    return tuple(names)


#: the feature layout, in column order (see the module docstring)
FEATURE_NAMES: tuple[str, ...] = _names()
N_FEATURES = len(FEATURE_NAMES)


# --------------------------------------------------------------------------- features


def _busy_prefix(topo: Topology, group_free: np.ndarray) -> np.ndarray:
    """Prefix sums of busy GPUs over group ids (sockets and servers are contiguous)."""
    busy = topo.group_capacity - np.asarray(group_free)
    return np.concatenate([[0], np.cumsum(busy)])


def _level_spans(topo: Topology, groups: np.ndarray) -> tuple[np.ndarray, ...]:
    """[first, last) group ids of each group's socket and server."""
    sock = topo.group_socket[groups]
    s_lo = np.searchsorted(topo.group_socket, sock, side="left")
    s_hi = np.searchsorted(topo.group_socket, sock, side="right")
    srv = topo.group_server[groups]
    v_lo = topo.server_groups_start[srv]
    v_hi = v_lo + topo.server_n_groups[srv]
    return s_lo, s_hi, v_lo, v_hi


def _own_workers(layout: JobLayout, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The job's own workers within each [lo, hi) group range."""
    g = layout.groups
    return np.array(
        [layout.group_workers[(g >= a) & (g < b)].sum() for a, b in zip(lo, hi, strict=True)],
        dtype=np.float64,
    )


def _assemble(
    perf: PerformanceModel,
    job: Job,
    layout: JobLayout,
    nbr: tuple[np.ndarray, np.ndarray, np.ndarray],
    busy: tuple[np.ndarray, np.ndarray, np.ndarray],
    link_others: np.ndarray,
    link_total_load: np.ndarray,
) -> np.ndarray:
    """One feature row from the job's layout and its neighbours' state.

    ``link_others`` (other jobs) and ``link_total_load`` (``U_l``, this job
    included) are aligned with ``layout.link_ids``.
    """
    topo = perf.topology
    spec = CATALOGUE[job.model]
    x = np.empty(N_FEATURES)
    x[0:5] = spec.pressure
    x[5:10] = spec.sensitivity
    x[10] = math.log(spec.compute_s)
    x[11] = math.log(spec.model_mb)
    x[12] = layout.speed
    x[13] = job.num_workers
    x[14] = job.num_ps
    racks = np.unique(topo.server_rack[layout.servers])
    x[15] = len(layout.groups)
    x[16] = len(layout.servers)
    x[17] = len(racks)
    x[18] = len(np.unique(topo.rack_subcluster[racks]))
    i = 19
    for p in nbr:  # (k, 5) per level
        x[i : i + 10 : 2] = p.max(axis=0)
        x[i + 1 : i + 10 : 2] = p.mean(axis=0)
        i += 10
    for b in busy:
        x[i], x[i + 1] = b.max(), b.mean()
        i += 2
    n_kinds = len(LINK_KINDS)
    jobs_max, load_max = np.zeros(n_kinds), np.zeros(n_kinds)
    alone, shared = np.zeros(n_kinds), np.zeros(n_kinds)
    if len(layout.link_ids):
        kind = topo.link_kind[layout.link_ids]
        cost = layout.link_cost
        np.maximum.at(jobs_max, kind, link_others)
        np.maximum.at(load_max, kind, np.maximum(link_total_load - layout.link_util, 0.0))
        np.maximum.at(alone, kind, cost)
        np.maximum.at(shared, kind, cost * np.maximum(link_total_load, 1.0))
    x[i : i + 5] = jobs_max
    x[i + 5 : i + 10] = load_max
    x[i + 10 : i + 15] = np.log(_TIME_FLOOR_S + alone)
    x[i + 15 : i + 20] = np.log(_TIME_FLOOR_S + shared)
    return x


def job_features(
    view: ClusterView, job: Job, placement: Placement, layout: JobLayout | None = None
) -> np.ndarray:
    """Features (:data:`FEATURE_NAMES`) of a job already placed in ``view``'s state.

    Args:
        view: the cluster state *including* the job (its pressure and link use are
            subtracted here, as the performance model does).
        job: the placed job.
        placement: where its tasks run.
        layout: the job's :class:`~marl_sched.perf.JobLayout` if known (else built).

    Returns:
        (F,) float64.
    """
    perf, topo = view.perf, view.topology
    if layout is None:
        layout = perf.layout(CATALOGUE[job.model], placement.worker_groups, placement.ps_groups)
    g = layout.groups
    sock_idx = np.searchsorted(layout.sockets, layout.worker_sockets)
    srv_idx = np.searchsorted(layout.servers, layout.worker_servers)
    nbr = (
        np.asarray(view.group_pressure)[g] - layout.group_press,
        np.asarray(view.socket_pressure)[layout.worker_sockets] - layout.socket_press[sock_idx],
        np.asarray(view.server_pressure)[layout.worker_servers] - layout.server_press[srv_idx],
    )
    nbr = tuple(np.where(np.abs(p) < 1e-9, 0.0, p) for p in nbr)
    prefix = _busy_prefix(topo, view.group_free)
    s_lo, s_hi, v_lo, v_hi = _level_spans(topo, g)
    busy = (
        (prefix[g + 1] - prefix[g]) - layout.group_workers,
        (prefix[s_hi] - prefix[s_lo]) - _own_workers(layout, s_lo, s_hi),
        (prefix[v_hi] - prefix[v_lo]) - _own_workers(layout, v_lo, v_hi),
    )
    ids = layout.link_ids
    others = np.asarray(view.link_jobs)[ids] - 1
    return _assemble(perf, job, layout, nbr, busy, others, np.asarray(view.link_load)[ids])


def candidate_features(
    view: ClusterView,
    job: Job,
    worker_groups: Sequence[int] | Sequence[Sequence[int]],
    ps_groups: Sequence[int] | Sequence[Sequence[int]],
) -> np.ndarray:
    """Features of *hypothetical* placements of ``job``, before they are applied.

    Equal to what :func:`job_features` gives once the simulator has applied the
    placement (the job's own pressure and link use are exactly what the simulator
    would add, and are excluded from the neighbour features either way).

    Args:
        view: the current cluster state, without the job.
        job: the job to place.
        worker_groups: one placement's worker group ids, or a list of K of them.
        ps_groups: the matching PS group ids (one list, or K lists).

    Returns:
        (F,) for one placement, (K, F) for K candidates.
    """
    perf, topo = view.perf, view.topology
    spec = CATALOGUE[job.model]
    batch = len(worker_groups) > 0 and not np.isscalar(worker_groups[0])
    wgs = list(worker_groups) if batch else [worker_groups]
    pgs = list(ps_groups) if batch else [ps_groups]
    if len(wgs) != len(pgs):
        raise ValueError(f"{len(wgs)} worker-group lists but {len(pgs)} PS-group lists")
    prefix = _busy_prefix(topo, view.group_free)
    gp = np.asarray(view.group_pressure)
    sp = np.asarray(view.socket_pressure)
    vp = np.asarray(view.server_pressure)
    link_jobs, link_load = np.asarray(view.link_jobs), np.asarray(view.link_load)
    rows = []
    for wg, pg in zip(wgs, pgs, strict=True):
        layout = perf.layout(spec, wg, pg)
        g = layout.groups
        s_lo, s_hi, v_lo, v_hi = _level_spans(topo, g)
        nbr = (gp[g], sp[layout.worker_sockets], vp[layout.worker_servers])
        busy = (
            (prefix[g + 1] - prefix[g]).astype(np.float64),
            (prefix[s_hi] - prefix[s_lo]).astype(np.float64),
            (prefix[v_hi] - prefix[v_lo]).astype(np.float64),
        )
        ids = layout.link_ids
        total = link_load[ids] + layout.link_util  # what the simulator will add
        rows.append(_assemble(perf, job, layout, nbr, busy, link_jobs[ids], total))
    out = np.stack(rows)
    return out if batch else out[0]


def true_slowdown(view: ClusterView, job: Job, layout: JobLayout) -> float:
    """The simulator's slowdown of a placed job: its time now / its time alone."""
    perf = view.perf
    now = perf.iteration_time(
        CATALOGUE[job.model],
        layout,
        job.num_ps,
        view.link_load,
        view.group_pressure,
        view.socket_pressure,
        view.server_pressure,
    )
    return now / perf.alone_iteration_time(CATALOGUE[job.model], layout, job.num_ps)


def colocation_level(x: np.ndarray) -> np.ndarray:
    """Index into :data:`COLOCATION_LEVELS` of feature rows (n, F) or (F,).

    The closest level at which the job meets other jobs' tasks: their workers or
    pressure in one of its GPU groups (group), its sockets (socket), its servers
    (server); else sharing one of its links (cross-server); else none.
    """
    x = np.atleast_2d(x)
    idx = {n: i for i, n in enumerate(FEATURE_NAMES)}
    out = np.zeros(len(x), dtype=np.int8)
    link_cols = [idx[f"link_{k}_jobs_max"] for k in LINK_KINDS]
    out[x[:, link_cols].max(axis=1) > 0] = 4
    for code, level in ((3, "server"), (2, "socket"), (1, "group")):
        cols = [idx[f"nbr_{level}_{r}_max"] for r in RESOURCES] + [idx[f"nbr_{level}_workers_max"]]
        out[x[:, cols].max(axis=1) > 1e-9] = code
    return out


# --------------------------------------------------------------------------- the model


def calibration_sha256(path: str | Path = CALIBRATION_FILE) -> str:
    """sha256 of the calibration file the performance model was built from."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def default_model_path() -> Path:
    """``checkpoints/interference/model.npz`` in the repository."""
    return REPO_ROOT / "checkpoints" / "interference" / "model.npz"


_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda z: np.maximum(z, 0.0),
    "tanh": np.tanh,
    # z·sigmoid(z) with sigmoid = (1 + tanh(z/2)) / 2: no overflow for large |z|
    "silu": lambda z: z * (0.5 + 0.5 * np.tanh(0.5 * z)),
}


class InterferenceModel:
    """A small MLP mapping standardised features to log slowdown, in numpy.

    ``z = MLP((x - x_mean) / x_std) · y_std + y_mean`` is the predicted
    ``ln(slowdown)``; :meth:`predict` returns ``max(exp(z), 1)``.

    Args:
        weights, biases: per layer, ``W`` of shape (in, out) and ``b`` of shape (out,).
        x_mean, x_std: feature standardisation, (F,).
        y_mean, y_std: target (log slowdown) scale.
        activation: hidden activation, a key of ``relu``, ``tanh``, ``silu``.
        calibration_sha256: sha256 of the calibration file the samples came from.
        metadata: training metadata (JSON-able).
    """

    def __init__(
        self,
        weights: Sequence[np.ndarray],
        biases: Sequence[np.ndarray],
        x_mean: np.ndarray,
        x_std: np.ndarray,
        y_mean: float,
        y_std: float,
        activation: str = "silu",
        calibration_sha256: str = "",
        metadata: dict | None = None,
    ) -> None:
        self.weights = [np.asarray(w, dtype=np.float32) for w in weights]
        self.biases = [np.asarray(b, dtype=np.float32) for b in biases]
        self.x_mean = np.asarray(x_mean, dtype=np.float32)
        self.x_std = np.asarray(x_std, dtype=np.float32)
        # from the stored float32 std, so a saved and reloaded model is bit-identical
        self.x_scale = (1.0 / self.x_std.astype(np.float64)).astype(np.float32)
        self.y_mean = float(y_mean)
        self.y_std = float(y_std)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}")
        self.activation = activation
        self._act = _ACTIVATIONS[activation]
        self.calibration_sha256 = calibration_sha256
        self.metadata = dict(metadata or {})

    @property
    def n_features(self) -> int:
        return int(self.weights[0].shape[0])

    #: rows per matrix product: larger blocks make OpenBLAS start its threads, which
    #: on a busy machine ran 100x slower (10k vs 1.5M rows/s measured with 2 cores
    #: shared by training jobs); blocks of 128 stay single-threaded and fast
    block_rows = 128

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Predicted ln(slowdown), (n,), before clamping; ``x`` is (n, F) raw features."""
        x = np.asarray(x, dtype=np.float32)
        if len(x) <= self.block_rows:
            return self._forward_block(x)
        out = np.empty(len(x), dtype=np.float32)
        for start in range(0, len(x), self.block_rows):
            stop = start + self.block_rows
            out[start:stop] = self._forward_block(x[start:stop])
        return out

    def _forward_block(self, x: np.ndarray) -> np.ndarray:
        h = (x - self.x_mean) * self.x_scale
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ w + b
            if i < last:
                h = self._act(h)
        return h[:, 0] * np.float32(self.y_std) + np.float32(self.y_mean)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predicted slowdown (>= 1) of each row of ``x`` (n, F) → (n,) float64."""
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise ValueError(f"expected features of shape (n, {self.n_features}), got {x.shape}")
        return np.maximum(np.exp(self.forward(x).astype(np.float64)), 1.0)

    # ------------------------------------------------------------------ file format

    def save(self, path: str | Path) -> None:
        """Write the one-file ``.npz`` format (no pickled objects)."""
        arrays = {
            "schema_version": np.array(FEATURE_SCHEMA_VERSION, dtype=np.int64),
            "feature_names": np.array(FEATURE_NAMES),
            "n_layers": np.array(len(self.weights), dtype=np.int64),
            "activation": np.array(self.activation),
            "x_mean": self.x_mean,
            "x_std": self.x_std,
            "y_scale": np.array([self.y_mean, self.y_std], dtype=np.float64),
            "calibration_sha256": np.array(self.calibration_sha256),
            "metadata_json": np.array(json.dumps(self.metadata, sort_keys=True)),
        }
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            arrays[f"W{i}"], arrays[f"b{i}"] = w, b
        with open(path, "wb") as fh:
            np.savez_compressed(fh, **arrays)

    @classmethod
    def load(cls, path: str | Path) -> InterferenceModel:
        """Read a model file; :class:`InputError` ``"<path>: <problem>"`` if unusable."""
        where = str(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
        except FileNotFoundError:
            raise InputError(f"{where}: no such interference model file") from None
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            problem = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
            raise InputError(f"{where}: not a readable interference model: {problem}") from None
        return cls._from_arrays(data, where)

    @classmethod
    def _from_arrays(cls, data: dict[str, np.ndarray], where: str) -> InterferenceModel:
        def need(key: str) -> np.ndarray:
            if key not in data:
                raise InputError(f"{where}: not an interference model: missing array {key!r}")
            return data[key]

        version = int(need("schema_version"))
        if version != FEATURE_SCHEMA_VERSION:
            raise InputError(
                f"{where}: feature schema version {version}, this code reads "
                f"{FEATURE_SCHEMA_VERSION}: refit with `marl-sched interference fit`"
            )
        names = tuple(str(n) for n in need("feature_names"))
        if names != FEATURE_NAMES:
            pairs = enumerate(zip(names, FEATURE_NAMES, strict=False))
            diff = next(
                (f"#{i}: {a!r} != {b!r}" for i, (a, b) in pairs if a != b),
                f"{len(names)} features, expected {N_FEATURES}",
            )
            raise InputError(f"{where}: feature names differ from this code ({diff}): refit")
        n_layers = int(need("n_layers"))
        weights = [need(f"W{i}") for i in range(n_layers)]
        biases = [need(f"b{i}") for i in range(n_layers)]
        dim = N_FEATURES
        for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
            if w.ndim != 2 or w.shape[0] != dim or b.shape != (w.shape[1],):
                raise InputError(
                    f"{where}: layer {i}: weight shape {w.shape} / bias "
                    f"{b.shape} do not chain from {dim} inputs"
                )
            dim = w.shape[1]
        if dim != 1:
            raise InputError(f"{where}: last layer has {dim} outputs, expected 1")
        x_mean, x_std, y_scale = need("x_mean"), need("x_std"), need("y_scale")
        if x_mean.shape != (N_FEATURES,) or x_std.shape != (N_FEATURES,) or y_scale.shape != (2,):
            raise InputError(f"{where}: normalisation arrays have the wrong shape")
        for key, arr in [
            ("x_mean", x_mean),
            ("x_std", x_std),
            ("y_scale", y_scale),
            *((f"W{i}", w) for i, w in enumerate(weights)),
            *((f"b{i}", b) for i, b in enumerate(biases)),
        ]:
            if not np.all(np.isfinite(arr)):
                raise InputError(f"{where}: {key}: contains non-finite values")
        if np.any(x_std <= 0):
            raise InputError(f"{where}: x_std: must be > 0")
        activation = str(need("activation"))
        if activation not in _ACTIVATIONS:
            raise InputError(f"{where}: unknown activation {activation!r}")
        try:
            metadata = json.loads(str(need("metadata_json")))
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: metadata_json: invalid JSON: {exc.msg}") from None
        return cls(
            weights,
            biases,
            x_mean,
            x_std,
            float(y_scale[0]),
            float(y_scale[1]),
            activation=activation,
            calibration_sha256=str(need("calibration_sha256")),
            metadata=metadata,
        )


@lru_cache(maxsize=1)
def load_default() -> InterferenceModel:
    """The shipped model (:func:`default_model_path`), loaded once.

    Warns (``UserWarning``) when it was fitted on another calibration than the
    current ``calibration.json``: its predictions then describe an older simulator.
    """
    path = default_model_path()
    model = InterferenceModel.load(path)
    if model.calibration_sha256 != calibration_sha256():
        warnings.warn(
            f"{path}: fitted on another calibration.json than the current one; "
            "refit with `marl-sched interference fit`",
            stacklevel=2,
        )
    return model


# --------------------------------------------------------------------------- samples


@dataclass
class Samples:
    """Feature rows and their true slowdowns.

    Attributes:
        x: (n, F) features (:data:`FEATURE_NAMES`).
        y: (n,) slowdowns (>= 1 for simulated samples).
        model: (n,) catalogue index of the job's model (:data:`MODEL_NAMES`).
        level: (n,) index into :data:`COLOCATION_LEVELS`.
        group: (n,) id of the simulation (or measurement set) a row comes from, so
            that splits can keep correlated rows together.
        source: (n,) where the row comes from (``simulated``, ``gavel``, ...).
        reference: (n,) factor turning the model's prediction into the measured
            quantity (1 for co-location slowdowns; see :func:`real_samples`).
        simulated: (n,) the simulator's own value of the measured quantity.
    """

    x: np.ndarray
    y: np.ndarray
    model: np.ndarray
    level: np.ndarray
    group: np.ndarray
    source: np.ndarray
    reference: np.ndarray
    simulated: np.ndarray

    def __len__(self) -> int:
        return len(self.y)

    def subset(self, idx: np.ndarray) -> Samples:
        return Samples(*(getattr(self, f.name)[idx] for f in dataclasses.fields(self)))

    @staticmethod
    def concat(parts: Sequence[Samples]) -> Samples:
        fields = dataclasses.fields(Samples)
        return Samples(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields))


def _samples_from_rows(
    rows: list[np.ndarray], y, model, group, source: str, reference=None, simulated=None
) -> Samples:
    x = np.stack(rows) if rows else np.zeros((0, N_FEATURES))
    y = np.asarray(y, dtype=np.float64)
    return Samples(
        x=x,
        y=y,
        model=np.asarray(model, dtype=np.int64),
        level=colocation_level(x) if len(x) else np.zeros(0, dtype=np.int8),
        group=np.asarray(group, dtype=np.int64),
        source=np.full(len(y), source),
        reference=np.ones(len(y)) if reference is None else np.asarray(reference, float),
        simulated=y.copy() if simulated is None else np.asarray(simulated, float),
    )


def random_topology(rng: np.random.Generator) -> TopologyConfig:
    """A small random datacenter: sizes, GPU types, PCIe layout, NICs, oversubscription."""
    subclusters = int(rng.integers(1, 3))
    racks = int(rng.integers(1, 4))
    per_rack = int(rng.integers(2, 6))
    n_servers = subclusters * racks * per_rack
    n_types = int(rng.integers(1, min(3, n_servers) + 1))
    cuts = np.sort(rng.choice(np.arange(1, n_servers), size=n_types - 1, replace=False))
    counts = np.diff(np.concatenate([[0], cuts, [n_servers]]))
    gpu_types = sorted(GPU_SPEED)
    types = []
    for i, count in enumerate(counts):
        sockets = int(rng.choice([1, 2], p=[0.3, 0.7]))
        gps = int(rng.choice([1, 2, 4], p=[0.35, 0.5, 0.15]))
        gpg = int(rng.choice([1, 2, 4], p=[0.2, 0.5, 0.3]))
        types.append(
            ServerTypeConfig(
                name=f"type{i}",
                count=int(count),
                gpu_type=str(rng.choice(gpu_types)),
                sockets=sockets,
                groups_per_socket=gps,
                gpus_per_group=gpg,
                # >= 2 cores and 16 GB per GPU, as real GPU servers have (and so that
                # GPU-free servers are not mostly refused for lack of CPU)
                cpu_cores=max(16, sockets * gps * gpg * int(rng.choice([2, 3, 4, 6]))),
                memory_gb=float(max(64, sockets * gps * gpg * int(rng.choice([16, 32, 48])))),
                nic_gbps=float(rng.choice([10, 25, 40, 100])),
            )
        )
    return TopologyConfig(
        subclusters=subclusters,
        racks_per_subcluster=racks,
        servers_per_rack=per_rack,
        server_types=tuple(types),
        pcie_gbps=float(rng.choice([64.0, 128.0, 256.0])),
        qpi_gbps=float(rng.choice([80.0, 160.0, 200.0])),
        rack_oversubscription=float(rng.choice([1.0, 2.0, 3.0, 4.0])),
        subcluster_uplink_gbps=float(rng.choice([100.0, 200.0, 400.0])),
    )


def random_jobs(rng: np.random.Generator, perf: PerformanceModel, n_jobs: int, load: float):
    """Random jobs of every catalogue model arriving at ``load`` × the cluster's capacity."""
    topo = perf.topology
    cap = max(1, topo.n_gpus // 2)
    sizes = np.array([1, 2, 3, 4, 6, 8, 12, 16])
    probs = np.array([0.3, 0.2, 0.08, 0.16, 0.06, 0.1, 0.04, 0.06])
    keep = sizes <= cap
    sizes, probs = sizes[keep], probs[keep] / probs[keep].sum()
    workers = rng.choice(sizes, size=n_jobs, p=probs)
    duration = rng.lognormal(mean=math.log(1800.0), sigma=1.0, size=n_jobs)
    mean_work = float(np.mean(workers * duration))
    rate = load * topo.n_gpus / mean_work
    submit = np.cumsum(rng.exponential(1.0 / rate, size=n_jobs))
    jobs = []
    for i in range(n_jobs):
        w = int(workers[i])
        model = str(rng.choice(MODEL_NAMES))
        if w == 1:
            ps = int(rng.random() < 0.3)
        elif rng.random() < 0.6:
            ps = default_num_ps(w)
        else:
            ps = int(rng.integers(1, w + 1))
        iters = float(duration[i]) / perf.isolated_iteration_time(model, w, ps)
        jobs.append(Job(i, f"j{i}", model, w, ps, iters, float(submit[i]), float(duration[i])))
    return jobs


#: heuristics and their weight when a simulation draws its policy mix
POLICY_MIX = {
    "random": 3.0,
    "first-fit": 1.0,
    "load-balance": 1.0,
    "tetris": 1.0,
    "locality": 1.0,
    "congestion-aware": 1.0,
    "interference-aware": 1.0,
}


def _simulate_samples(
    rng: np.random.Generator,
    topo_cfg: TopologyConfig,
    budget: int,
    group_id: int,
    per_snapshot: int = 4,
) -> Samples:
    """Run one random simulation and snapshot running jobs at decision points."""
    from marl_sched.policies import make_policy

    topo = Topology.from_config(topo_cfg)
    perf = PerformanceModel(topo)
    load = float(rng.uniform(0.6, 3.0))
    n_jobs = int(rng.integers(60, 240))
    jobs = random_jobs(rng, perf, n_jobs, load)
    names = list(POLICY_MIX)
    weights = np.array([POLICY_MIX[n] for n in names])
    k = int(rng.integers(1, 4))
    chosen = rng.choice(names, size=k, replace=False, p=weights / weights.sum())
    policies = []
    for name in chosen:
        pol = make_policy(str(name))
        pol.reset(topo, int(rng.integers(2**31)))
        policies.append(pol)
    sim = Simulator(topo, jobs, perf=perf)
    rows, ys, models = [], [], []
    snapshot_p = float(rng.uniform(0.3, 1.0))
    max_decisions = 20 * n_jobs  # a run whose queue keeps refusing jobs stops early
    while (
        len(ys) < budget
        and sim.stats.decisions < max_decisions
        and (job := sim.next_decision()) is not None
    ):
        view = sim.view()
        placement = policies[int(rng.integers(len(policies)))].place(job, view)
        sim.apply(placement)
        if placement is None or rng.random() > snapshot_p:
            continue
        view = sim.view()
        running = sorted(sim.running)
        pick = rng.choice(len(running), size=min(per_snapshot, len(running)), replace=False)
        for k in np.sort(pick):
            run = sim.running[running[int(k)]]
            rows.append(job_features(view, run.job, run.placement, run.layout))
            ys.append(true_slowdown(view, run.job, run.layout))
            models.append(CATALOGUE[run.job.model].index)
    return _samples_from_rows(rows, ys, models, [group_id] * len(ys), "simulated")


def generate_samples(
    n: int,
    seed: int,
    topologies: Sequence[TopologyConfig] | None = None,
    *,
    topology_fraction: float = 1.0,
    progress: Callable[[int], None] | None = None,
) -> Samples:
    """``n`` simulated co-location samples (features, true slowdown), seeded.

    Each simulation draws a topology (from ``topologies`` for a fraction
    ``topology_fraction`` of simulations when given, else :func:`random_topology`),
    random jobs of every catalogue model at a random load (0.6–3× capacity), and a
    mix of 1–3 registered heuristics (``random``, which spreads, weighted up); at
    decision points it snapshots a few running jobs' features and true slowdowns.

    Args:
        n: number of samples.
        seed: root seed; every simulation gets a child generator.
        topologies: fixed topologies to mix in (e.g. the experiment config's).
        topology_fraction: share of simulations on ``topologies``.
        progress: called with the number of samples collected so far.
    """
    root = np.random.SeedSequence(seed)
    per_run = min(600, max(50, n // 20))
    parts: list[Samples] = []
    have = 0
    sim_id = 0
    while have < n:
        (child,) = root.spawn(1)
        rng = np.random.default_rng(child)
        if topologies and rng.random() < topology_fraction:
            cfg = topologies[int(rng.integers(len(topologies)))]
        else:
            cfg = random_topology(rng)
        # at most 1/20 of the samples from one run, so even small sets span many
        part = _simulate_samples(rng, cfg, min(n - have, per_run), sim_id)
        sim_id += 1
        parts.append(part)
        have += len(part)
        if progress is not None:
            progress(min(have, n))
    out = Samples.concat(parts)
    return out.subset(np.arange(n))


# --------------------------------------------------------------------------- real data

#: Gavel job types → the catalogue model they are mapped to (others are skipped)
GAVEL_MODELS = {
    "ResNet-18": "cifar10",
    "ResNet-50": "resnet-50",
    "Transformer": "seq2seq",
    "LM": "wlm",
    "Recommendation": "ncf",
}


def _one_rack(server: ServerTypeConfig, n_servers: int) -> TopologyConfig:
    return TopologyConfig(
        subclusters=1,
        racks_per_subcluster=1,
        servers_per_rack=n_servers,
        server_types=(dataclasses.replace(server, count=n_servers),),
        rack_oversubscription=1.0,
    )


def _place(sim: Simulator, job: Job, placement: Placement) -> None:
    """Start ``job`` now at ``placement`` (its arrival must be the next event)."""
    got = sim.next_decision()
    if got is None or got.job_id != job.job_id:
        raise AssertionError("measurement replay got out of step")
    sim.apply(placement)


def _features_alone(topo_cfg: TopologyConfig, job: Job, placement: Placement):
    """(features, alone iteration time) of a job alone on a fresh topology."""
    topo = Topology.from_config(topo_cfg)
    perf = PerformanceModel(topo)
    sim = Simulator(topo, [job], perf=perf)
    _place(sim, job, placement)
    run = sim.running[job.job_id]
    view = sim.view()
    alone = perf.alone_iteration_time(CATALOGUE[job.model], run.layout, job.num_ps)
    return job_features(view, job, placement, run.layout), alone


def load_gavel_colocations(path: str | Path) -> Samples:
    """Gavel's measured same-GPU co-location pairs as slowdown samples.

    Gavel measures two single-GPU jobs *sharing one GPU*; our simulator never
    shares a GPU, so each pair is mapped to the densest co-location the layout can
    express: both jobs' single workers in the same GPU group (same PCIe switch,
    socket and server) of a one-server cluster of that GPU type. Target: the job's
    isolated / co-located throughput. Only scale-factor-1 pairs of the job types in
    :data:`GAVEL_MODELS` are used; ``[0, 0]`` entries (cannot run together) are
    skipped. Expect the measured slowdowns to be far larger than the simulator's:
    GPU time-sharing costs much more than PCIe/CPU contention.
    """
    where = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{where}: cannot read Gavel throughputs: {exc}") from None
    rows, ys, models, groups, sims = [], [], [], [], []
    for gi, gpu in enumerate(("k80", "p100", "v100")):
        if gpu not in data or gpu not in GPU_SPEED:
            continue
        server = ServerTypeConfig(
            name=gpu, count=1, gpu_type=gpu, sockets=1, groups_per_socket=1, gpus_per_group=2
        )
        topo_cfg = _one_rack(server, 1)
        topo = Topology.from_config(topo_cfg)
        perf = PerformanceModel(topo)
        for key, entry in sorted(data[gpu].items()):
            own_type, own_scale = ast.literal_eval(key)
            own_model = GAVEL_MODELS.get(own_type.split(" (")[0])
            iso = float(entry.get("null", 0.0))
            if own_scale != 1 or own_model is None or iso <= 0:
                continue
            for other_key, pair in sorted(entry.items()):
                if other_key == "null":
                    continue
                other_type, other_scale = ast.literal_eval(other_key)
                other_model = GAVEL_MODELS.get(other_type.split(" (")[0])
                if other_scale != 1 or other_model is None or float(pair[0]) <= 0:
                    continue
                a = Job(0, "a", own_model, 1, 0, 1e6, 0.0, 0.0)
                b = Job(1, "b", other_model, 1, 0, 1e6, 0.0, 0.0)
                sim = Simulator(topo, [a, b], perf=perf)
                _place(sim, a, Placement((0,), ()))
                _place(sim, b, Placement((0,), ()))
                view = sim.view()
                layout = sim.running[0].layout
                rows.append(job_features(view, a, Placement((0,), ()), layout))
                sims.append(true_slowdown(view, a, layout))
                ys.append(iso / float(pair[0]))
                models.append(CATALOGUE[own_model].index)
                groups.append(1_000_000 + gi)
    return _samples_from_rows(rows, ys, models, groups, "gavel", simulated=sims)


def _pollux_placement(digits: str) -> tuple[Placement, int]:
    """Workers by node from Pollux's placement string (``"13"`` = 1 GPU on one node,
    3 on another); the all-reduce as ``w`` PS shards, one beside each worker (how
    :mod:`marl_sched.calibration` maps a ring all-reduce onto the PS model)."""
    per_node = [int(c) for c in digits]
    gps = POLLUX_SERVER.sockets * POLLUX_SERVER.groups_per_socket
    wg = [node * gps + i for node, k in enumerate(per_node) for i in range(k)]
    return Placement(tuple(wg), tuple(wg)), len(wg)


def load_pollux_placements(root: str | Path) -> Samples:
    """Pollux's step times by placement → the slowdown of spreading a job.

    For each model, local batch size and GPU count, the reference is the measured
    placement on the fewest nodes (fastest among those); every placement on more
    nodes gives ``step_time / reference step_time``. This is *not* a co-location
    slowdown (the job runs alone in both): the model's prediction for the spread
    placement (≈ 1, no neighbours) is multiplied by the simulator's alone-time
    ratio of the two placements (``reference`` column), so the comparison checks the
    performance model's communication term more than the learned model. Pollux's
    all-reduce is mapped to one PS shard beside each worker, on g4dn.12xlarge-like
    servers (:data:`POLLUX_SERVER`).
    """
    root = Path(root)
    rows, ys, models, groups, refs, sims = [], [], [], [], [], []
    for mi, model_dir in enumerate(sorted(p for p in root.iterdir() if p.is_dir())):
        model = model_dir.name
        if model not in CATALOGUE:
            continue
        path = model_dir / "placements.csv"
        table: dict[tuple[int, int], list[tuple[str, float]]] = {}
        with open(path, newline="", encoding="utf-8") as fh:
            for line, rec in enumerate(csv.DictReader(fh), start=2):
                try:
                    digits = rec["placement"].strip()
                    bsz, step = int(rec["local_bsz"]), float(rec["step_time"])
                except (KeyError, ValueError, AttributeError) as exc:
                    raise InputError(f"{path}:{line}: cannot parse row: {exc}") from None
                if not digits.isdigit() or step <= 0:
                    continue
                k = sum(int(c) for c in digits)
                table.setdefault((bsz, k), []).append((digits, step))
        cache: dict[str, tuple[np.ndarray, float]] = {}

        def alone(digits: str, model=model, cache=cache) -> tuple[np.ndarray, float]:
            if digits not in cache:
                n_nodes = len(digits)
                placement, ps = _pollux_placement(digits)
                job = Job(0, "p", model, len(placement.worker_groups), ps, 1e6, 0.0, 0.0)
                cache[digits] = _features_alone(_one_rack(POLLUX_SERVER, n_nodes), job, placement)
            return cache[digits]

        for (_, k), runs in sorted(table.items()):
            fewest = min(len(d) for d, _ in runs)
            ref_digits, ref_step = min((s, d) for d, s in runs if len(d) == fewest)[::-1]
            if k < 2:
                continue
            _, t_ref = alone(ref_digits)
            for digits, step in runs:
                if len(digits) == fewest:
                    continue
                x, t = alone(digits)
                rows.append(x)
                ys.append(step / ref_step)
                refs.append(t / t_ref)
                sims.append(t / t_ref)
                models.append(CATALOGUE[model].index)
                groups.append(2_000_000 + mi)
    return _samples_from_rows(rows, ys, models, groups, "pollux", refs, sims)


#: DL2's testbed: one task per server; its NIC's *effective* bandwidth is the 92 MB/s
#: that DL2's own simulator uses (trace.py inter_bws median) and that
#: marl_sched.calibration fits to this very table (91.9 MB/s)
DL2_EFFECTIVE_NIC_BYTES_S = 92e6
_DL2_SERVER = dataclasses.replace(
    DL2_SERVER,
    nic_gbps=DL2_EFFECTIVE_NIC_BYTES_S / (GBPS * CALIBRATION.link_efficiency["nic"]),
)


def _dl2_spread(model: str, workers: int, ps: int, servers: int) -> tuple[np.ndarray, float]:
    """A DL2 job spread one task per server: workers first, then the PS."""
    first_ps = servers - ps  # one group per server: group id = server id
    placement = Placement(tuple(range(workers)), tuple(range(first_ps, servers)))
    job = Job(0, "d", model, workers, ps, 1e6, 0.0, 0.0)
    return _features_alone(_one_rack(_DL2_SERVER, servers), job, placement)


def load_dl2_speeds(path: str | Path) -> Samples:
    """DL2's PS/worker speed table → the slowdown of adding workers to the PS.

    Each line ``(model, 'dist_sync', tot_batch, p, w, [worker speeds], [PS cpu],
    [worker cpu])`` measures a job alone; all-zero speed rows are failed runs and
    skipped. DL2 splits a fixed global batch over the workers and reports each
    worker's speed (the reading :mod:`marl_sched.calibration` uses), so the
    iteration time with ``w`` workers relative to one, at the same ``p``, is
    ``speed(1) / (w · speed(w))``: the sample's target. As with Pollux this is a
    placement effect, not a co-location one: the model's prediction (≈ 1, alone) is
    multiplied by the simulator's ratio (``reference``) of the same two iteration
    times, the job spread one task per server (as DL2 ran it) with its local
    compute shrunk to ``compute_s / w``.
    """
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{where}: cannot read DL2 speeds: {exc}") from None
    speed: dict[tuple[str, int, int], float] = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = ast.literal_eval(line.strip())
            model, _, _, p, w, speeds = rec[0], rec[1], rec[2], int(rec[3]), int(rec[4]), rec[5]
            speeds = [float(s) for s in speeds]
        except (ValueError, SyntaxError, IndexError, TypeError) as exc:
            raise InputError(f"{where}:{line_no}: cannot parse row: {exc}") from None
        if model not in CATALOGUE or not speeds or max(speeds) <= 0:
            continue
        speed[(model, p, w)] = float(np.mean(speeds))
    rows, ys, models, groups, refs = [], [], [], [], []
    for (model, p, w), s in sorted(speed.items()):
        base = speed.get((model, p, 1))
        if w < 2 or base is None:
            continue
        x, t = _dl2_spread(model, w, p, w + p)
        _, t1 = _dl2_spread(model, 1, p, w + p)
        compute = CATALOGUE[model].compute_s / GPU_SPEED[_DL2_SERVER.gpu_type]
        rows.append(x)
        ys.append(base / (w * s))
        refs.append((t - compute + compute / w) / t1)
        models.append(CATALOGUE[model].index)
        groups.append(3_000_000 + MODEL_NAMES.index(model))
    return _samples_from_rows(rows, ys, models, groups, "dl2", refs, list(refs))


def real_samples(data_root: str | Path) -> Samples:
    """All real evaluation samples from ``<data_root>/profiles`` (see the loaders)."""
    prof = Path(data_root) / "profiles"
    return Samples.concat(
        [
            load_gavel_colocations(prof / "gavel_physical_cluster_throughputs.json"),
            load_pollux_placements(prof / "pollux"),
            load_dl2_speeds(prof / "dl2_ps_worker_config_speed.txt"),
        ]
    )
