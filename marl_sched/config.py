"""Typed experiment configs, one dataclass per concern, loaded from YAML.

An experiment config is a YAML mapping with these sections::

    topology:    TopologyConfig     the datacenter (see marl_sched.topology)
    workload:    WorkloadConfig     which trace, which window, how missing fields are filled
    simulation:  SimulationConfig   queue ordering, seed
    env:         mapping            the multi-agent environment (validated by envs)
    model:       mapping            the GNN (validated by agents)
    train:       mapping            the RL trainer (validated by agents)
    interference: mapping           the learned interference model (validated by agents)

A file may name parents (``defaults: [../base.yaml]``): :func:`compose_file` merges
them with OmegaConf, the file's own keys on top; :func:`load_config` then applies
command-line ``key=value`` overrides (:func:`apply_overrides`). OmegaConf only
composes a plain mapping; the typed checks below validate it.

Every key is checked: an unknown key, a missing required key, a key given twice or a
value of the wrong type or range raises :class:`~marl_sched.errors.InputError` with
one line naming the file (and line) or ``command line`` and the dotted key, e.g.
``configs/x.yaml: topology.racks_per_subcluster: must be >= 1, got 0``. Sections owned
by the heavier packages (env, model, train, interference) are kept as plain mappings
here and parsed with :func:`parse_section` by their owners, whose parsers
:func:`config_from_dict` runs by name (:data:`OWNED_SECTIONS`), so this module imports
nothing from them while every command checks every section.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from marl_sched.errors import InputError

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parent.parent

#: most jobs' workers one GPU may hold (``topology.gpu_sharing``): Gavel measures pairs,
#: and beyond a few jobs a GPU's memory holds nobody's working set
MAX_GPU_SHARING = 4

#: the largest datacenter a config may describe, checked before any array is built: a
#: few times the largest public traces' clusters (Philly ~2,500 GPUs, Alibaba openb
#: ~6,200), and what the simulator's per-GPU arrays hold in well under 2 GB
MAX_SERVERS = 100_000
MAX_GPUS = 1_000_000
#: bounds of one server's hardware (per server type)
SERVER_LIMITS = {
    "sockets": 16,
    "groups_per_socket": 64,
    "gpus_per_group": 64,
    "cpu_cores": 4096,
}


# --------------------------------------------------------------------------- sections


@dataclass(frozen=True)
class ServerTypeConfig:
    """One kind of server; a cluster may mix several.

    Attributes:
        name: label used in reports.
        count: how many servers of this type (summed over types = total servers).
        gpu_type: key into the GPU speed table (``v100``, ``p100``, ``k80``, ``t4``).
        sockets: CPU sockets per server (joined by QPI/UPI when > 1).
        groups_per_socket: GPU groups (GPUs behind one PCIe switch) per socket.
        gpus_per_group: GPUs per group.
        cpu_cores: CPU cores per server.
        memory_gb: host memory per server.
        nic_gbps: server NIC bandwidth, Gbit/s.
    """

    name: str
    count: int
    gpu_type: str = "v100"
    sockets: int = 2
    groups_per_socket: int = 2
    gpus_per_group: int = 2
    cpu_cores: int = 48
    memory_gb: float = 384.0
    nic_gbps: float = 25.0

    def validate(self, where: str, key: str) -> None:
        from marl_sched.catalogue import GPU_SPEED

        bounds = {"count": MAX_SERVERS, **SERVER_LIMITS}
        check_bounds(self, {name: (1, high) for name, high in bounds.items()}, where, key)
        for name in ("memory_gb", "nic_gbps"):
            check_physical(getattr(self, name), where, f"{key}.{name}")
        check(
            self.gpu_type in GPU_SPEED,
            where,
            f"{key}.gpu_type",
            f"unknown GPU type {self.gpu_type!r} (known: {', '.join(sorted(GPU_SPEED))})",
        )


@dataclass(frozen=True)
class TopologyConfig:
    """The datacenter hierarchy and its link bandwidths.

    Attributes:
        subclusters: number of subclusters (one scheduler agent each).
        racks_per_subcluster: racks (one ToR switch each) per subcluster.
        servers_per_rack: servers per rack.
        server_types: server kinds with counts; servers are dealt to racks in order.
        pcie_gbps: GPU-group ↔ CPU-socket PCIe link, Gbit/s (PCIe 3.0 x16 ≈ 128).
        qpi_gbps: socket ↔ socket link, Gbit/s.
        rack_oversubscription: rack uplink = servers_per_rack × NIC / this ratio.
        subcluster_uplink_gbps: each subcluster's uplink to the datacenter core, Gbit/s.
        gpu_sharing: at most this many jobs' workers per GPU (GPU space sharing, as
            Gavel, Gandiva and AntMan do); 1 (the default) = no sharing. Two workers
            of one job never share a GPU (see :mod:`marl_sched.simulator`).
    """

    subclusters: int = 4
    racks_per_subcluster: int = 3
    servers_per_rack: int = 4
    server_types: tuple[ServerTypeConfig, ...] = (ServerTypeConfig(name="v100x8", count=48),)
    pcie_gbps: float = 128.0
    qpi_gbps: float = 160.0
    rack_oversubscription: float = 2.0
    subcluster_uplink_gbps: float = 400.0
    gpu_sharing: int = 1

    @property
    def n_servers(self) -> int:
        return self.subclusters * self.racks_per_subcluster * self.servers_per_rack

    @property
    def n_gpus(self) -> int:
        """GPUs over every server type (a Python int: computed before any array)."""
        return sum(s.count * s.sockets * s.groups_per_socket * s.gpus_per_group
                   for s in self.server_types)  # fmt: skip

    def validate(self, where: str, key: str) -> None:
        names = ("subclusters", "racks_per_subcluster", "servers_per_rack")
        check_bounds(self, dict.fromkeys(names, (1, MAX_SERVERS)), where, key)
        check(
            self.n_servers <= MAX_SERVERS,
            where,
            key,
            f"subclusters x racks_per_subcluster x servers_per_rack = {self.n_servers:,} "
            f"servers, more than the {MAX_SERVERS:,} a topology may have",
        )
        check(
            1 <= self.gpu_sharing <= MAX_GPU_SHARING,
            where,
            f"{key}.gpu_sharing",
            f"must be in [1, {MAX_GPU_SHARING}], got {self.gpu_sharing}",
        )
        for name in ("pcie_gbps", "qpi_gbps", "rack_oversubscription", "subcluster_uplink_gbps"):
            check_physical(getattr(self, name), where, f"{key}.{name}")
        check(len(self.server_types) >= 1, where, f"{key}.server_types", "needs at least one")
        names = [s.name for s in self.server_types]
        check(len(set(names)) == len(names), where, f"{key}.server_types", "duplicate name")
        total = sum(s.count for s in self.server_types)
        check(
            total == self.n_servers,
            where,
            f"{key}.server_types",
            f"counts sum to {total} servers, but subclusters x racks_per_subcluster x "
            f"servers_per_rack = {self.n_servers}",
        )
        check(
            self.n_gpus <= MAX_GPUS,
            where,
            f"{key}.server_types",
            f"{self.n_gpus:,} GPUs in all, more than the {MAX_GPUS:,} a topology may have",
        )


@dataclass(frozen=True)
class WorkloadConfig:
    """Which trace drives the run and how fields a trace lacks are filled.

    Attributes:
        trace: path of the trace (a relative path resolves against the config file's
            folder: :meth:`ExperimentConfig.resolve_path`).
        trace_format: ``canonical``, ``philly``, ``alibaba``, ``pollux`` or ``auto``.
        start: index of the first job of the window (after sorting by submit time).
        max_jobs: window length in jobs (null = to the end).
        load: arrival-rate multiplier (2.0 = jobs arrive twice as fast).
        seed: seed of the fill rules (model draw) and of noisy duration estimates.
        max_job_gpus: jobs asking for more GPUs are clipped to this, counted in the
            run's metrics (null = no clipping: a job the cluster cannot hold is an
            input error, or left out with ``--drop-unplaceable``;
            :func:`marl_sched.runner.check_placeable`).
        warmup_jobs: jobs before ``start`` (as many as there are, up to this) that
            are simulated but not scored, so the window starts on a populated
            cluster; the scored jobs are still ``start`` .. ``start + max_jobs``.
        duration_estimate: what policies know of a job's length
            (:mod:`marl_sched.duration`): ``none``, ``oracle`` (upper-bound
            ablation), ``noisy`` or ``history``.
        duration_noise_sigma: ln-space error of the ``noisy`` estimate.
        arrival_jitter: each inter-arrival gap of the window (warm-up included) is
            multiplied by a draw from Uniform(1 - j, 1 + j) seeded by ``seed``
            (:func:`marl_sched.traces.jitter_arrivals`; mean 1, so the load is kept);
            0 = the trace's own arrival times. The benchmark suite sets it, so that
            every seed varies every scenario's arrivals (docs/benchmark.md).
    """

    trace: str = "configs/traces/philly_sample.csv"
    trace_format: str = "auto"
    start: int = 0
    max_jobs: int | None = None
    load: float = 1.0
    seed: int = 0
    max_job_gpus: int | None = None
    warmup_jobs: int = 0
    duration_estimate: str = "noisy"
    duration_noise_sigma: float = 1.0
    arrival_jitter: float = 0.0

    def validate(self, where: str, key: str) -> None:
        from marl_sched.duration import DURATION_ESTIMATES

        check(
            0 <= self.arrival_jitter < 1,
            where,
            f"{key}.arrival_jitter",
            f"must be in [0, 1), got {self.arrival_jitter}",
        )

        check(
            self.duration_estimate in DURATION_ESTIMATES,
            where,
            f"{key}.duration_estimate",
            f"must be one of {', '.join(DURATION_ESTIMATES)}, got {self.duration_estimate!r}",
        )
        check(
            self.duration_noise_sigma >= 0,
            where,
            f"{key}.duration_noise_sigma",
            f"must be >= 0, got {self.duration_noise_sigma}",
        )
        check(
            self.warmup_jobs >= 0,
            where,
            f"{key}.warmup_jobs",
            f"must be >= 0, got {self.warmup_jobs}",
        )
        formats = ("auto", "canonical", "philly", "alibaba", "pollux")
        check(
            self.trace_format in formats,
            where,
            f"{key}.trace_format",
            f"must be one of {', '.join(formats)}, got {self.trace_format!r}",
        )
        check(self.start >= 0, where, f"{key}.start", f"must be >= 0, got {self.start}")
        check(self.seed >= 0, where, f"{key}.seed", f"must be >= 0, got {self.seed}")
        check(math.isfinite(self.load), where, f"{key}.load", f"must be finite, got {self.load}")
        if self.max_jobs is not None:
            check(
                self.max_jobs >= 1, where, f"{key}.max_jobs", f"must be >= 1, got {self.max_jobs}"
            )
        check(self.load > 0, where, f"{key}.load", f"must be > 0, got {self.load}")
        lo, hi = LOAD_RANGE
        check(
            lo <= self.load <= hi,
            where,
            f"{key}.load",
            f"must be in [{lo:g}, {hi:g}], got {self.load}",
        )
        if self.max_job_gpus is not None:
            check(self.max_job_gpus >= 1, where, f"{key}.max_job_gpus", "must be >= 1")


#: ``simulation.migration``'s values (YAML 1.1 reads a bare on/off as true/false)
MIGRATION_MODES = ("off", "on")


@dataclass(frozen=True)
class SimulationConfig:
    """How the discrete-event simulator runs.

    Attributes:
        policy: default placement policy for ``marl-sched simulate``.
        ordering: queue ordering, a name of :data:`marl_sched.ordering.ORDERINGS`
            (``fifo``, ``smallest-first``, ``shortest-first``, ``las-2d``,
            ``mlfs-priority``) or ``own`` (each policy's own, FIFO if it has none).
        backfill: when the head job cannot be placed, try later jobs (otherwise
            the queue waits for the head job).
        seed: seed of the policy's randomness.
        migration: ``off`` (default: no policy migrates, the placement question
            alone) or ``on`` (every policy with a migration rule,
            :meth:`~marl_sched.policies.Policy.rebalance`, may move running jobs).
        migration_cost: what a restart costs (:mod:`marl_sched.migration`):
            ``measured`` (default; the model's measured restart delay, plus moving its
            state over the bottleneck link for a migration) or a number of seconds
            (flat, no state move). It prices every restart: a migrated job's and a
            preempted job's when it resumes (``las-2d``), whether ``migration`` is on
            or off. Replaces the flat ``migration_penalty_s`` (60 s) of before.
        migration_cost_scale: multiplies every restart delay (sensitivity runs).
        max_migrations_per_job: moves one job may make in a run; a proposal over the
            cap is declined and counted. Default 1 (MLFS's no-ping-pong rule, now the
            simulator's for every policy).
        min_migration_interval_s: seconds between two moves of one job.
        nic_efficiency_scale: factor on the calibrated efficiency of every network
            link (NIC, rack and subcluster uplinks), i.e. on the cost of spreading a job
            over servers; 1 = the calibration. The benchmark's spread-cost variant
            (``marl_sched.benchmark.sensitivity.GAVEL_NIC_SCALE``) sets the value at
            which Gavel's spread/packed ratio comes out at its measured 1.38.
    """

    policy: str = "load-balance"
    ordering: str = "fifo"
    backfill: bool = True
    seed: int = 0
    migration: Any = "off"
    migration_cost: Any = "measured"
    migration_cost_scale: float = 1.0
    max_migrations_per_job: int = 1
    min_migration_interval_s: float = 0.0
    nic_efficiency_scale: float = 1.0

    def __post_init__(self) -> None:
        # YAML 1.1 reads `on` / `off` as booleans, and a cost may be written as an integer
        if isinstance(self.migration, bool):
            object.__setattr__(self, "migration", "on" if self.migration else "off")
        cost = self.migration_cost
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            object.__setattr__(self, "migration_cost", float(cost))

    @property
    def migrates(self) -> bool:
        """Whether policies may migrate running jobs (``migration: on``)."""
        return self.migration == "on"

    def validate(self, where: str, key: str) -> None:
        from marl_sched.ordering import ORDERINGS, OWN

        check(self.seed >= 0, where, f"{key}.seed", f"must be >= 0, got {self.seed}")
        check(
            self.ordering in ORDERINGS or self.ordering == OWN,
            where,
            f"{key}.ordering",
            f"must be one of {', '.join([*ORDERINGS, OWN])}, got {self.ordering!r}",
        )
        check(
            self.migration in MIGRATION_MODES,
            where,
            f"{key}.migration",
            f"must be off or on, got {self.migration!r}",
        )
        cost = self.migration_cost
        check(
            cost == "measured" or (isinstance(cost, float) and math.isfinite(cost) and cost >= 0),
            where,
            f"{key}.migration_cost",
            f"must be measured or a finite number of seconds >= 0, got {cost!r}",
        )
        check(
            math.isfinite(self.migration_cost_scale) and self.migration_cost_scale >= 0,
            where,
            f"{key}.migration_cost_scale",
            f"must be a finite number >= 0, got {self.migration_cost_scale!r}",
        )
        check(
            self.max_migrations_per_job >= 0,
            where,
            f"{key}.max_migrations_per_job",
            f"must be >= 0, got {self.max_migrations_per_job}",
        )
        check(
            math.isfinite(self.min_migration_interval_s) and self.min_migration_interval_s >= 0,
            where,
            f"{key}.min_migration_interval_s",
            f"must be a finite number >= 0, got {self.min_migration_interval_s!r}",
        )
        check(
            math.isfinite(self.nic_efficiency_scale) and self.nic_efficiency_scale > 0,
            where,
            f"{key}.nic_efficiency_scale",
            f"must be a finite number > 0, got {self.nic_efficiency_scale!r}",
        )


@dataclass(frozen=True)
class ExperimentConfig:
    """A whole experiment: one section per concern, plus where it came from."""

    topology: TopologyConfig = field(default_factory=TopologyConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    simulation: SimulationConfig = field(default_factory=SimulationConfig)
    env: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    interference: dict[str, Any] = field(default_factory=dict)
    source: str = "<defaults>"

    def to_dict(self) -> dict[str, Any]:
        """Plain nested mapping (YAML-ready: lists, not tuples), without ``source``."""
        out = plain(dataclasses.asdict(self))
        out.pop("source")
        return out

    def to_yaml(self) -> str:
        """The config as YAML that :func:`load_config` reads back, from any folder, to an
        equal config with every path absolute (:func:`absolute_paths`; the
        ``config.yaml`` every run folder holds)."""
        return yaml.dump(absolute_paths(self.to_dict(), self), Dumper=_PlainDumper, sort_keys=False)

    def resolve_path(self, path: str) -> Path:
        """A path from the config. A relative one resolves against the folder of the
        config file it was loaded from (``source``); a config file inside the repo may
        also name a file relative to the repo root (the shipped configs, checkpoints and
        suites do), but a config from anywhere else never reads the checkout's files
        (issue 36: a copied config silently read the original checkout's trace). A
        config that is not a file (built in code, the defaults) resolves against the
        repo root. Run folders record the resolved, absolute paths."""
        p = Path(path)
        if p.is_absolute():
            return p
        source = Path(self.source)
        if not source.is_file():
            return REPO_ROOT / p
        here = source.resolve().parent / p
        if here.exists() or not source.resolve().is_relative_to(REPO_ROOT):
            return here
        return REPO_ROOT / p


#: keys whose string values in a config are file paths (``workload.trace``, the train
#: windows' ``trace``, ``train.eval_trace``, ``interference.real_data``)
PATH_KEYS = ("trace", "eval_trace", "real_data")


def absolute_paths(data: Any, cfg: ExperimentConfig) -> Any:
    """``data`` (a config mapping or any part of one, plain) with every relative path
    under a key of :data:`PATH_KEYS` resolved by ``cfg``
    (:meth:`ExperimentConfig.resolve_path`) to an absolute one: what a run folder's
    ``config.yaml`` records, so that it reads the same files from anywhere."""
    if isinstance(data, dict):
        return {
            k: str(cfg.resolve_path(v)) if k in PATH_KEYS and isinstance(v, str) and v
            else absolute_paths(v, cfg)
            for k, v in data.items()
        }  # fmt: skip
    if isinstance(data, list):
        return [absolute_paths(v, cfg) for v in data]
    return data


class _PlainDumper(yaml.SafeDumper):
    """``yaml.safe_dump`` that never writes an anchor or alias (a value shared by two
    keys is written twice), so ``config.yaml`` reads back through :func:`read_yaml`."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def plain(obj: Any) -> Any:
    """Nested dicts and lists only (tuples become lists)."""
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain(v) for v in obj]
    return obj


# --------------------------------------------------------------------------- parsing


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, where: str, key: str) -> Any:
    """Check ``value`` against the annotation ``tp``; return it converted."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], where, key)
    if dataclasses.is_dataclass(tp):
        return parse_section(tp, value, where, key)
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise InputError(f"{where}: {key}: expected a list, got {shown_value(value)}")
        if len(value) > MAX_CONFIG_LIST:
            raise InputError(f"{where}: {key}: at most {MAX_CONFIG_LIST} items, got {len(value):,}")
        return tuple(_coerce(v, args[0], where, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise InputError(f"{where}: {key}: expected a mapping, got {shown_value(value)}")
        return dict(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise InputError(f"{where}: {key}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{where}: {key}: expected an integer, got {shown_value(value)}")
        check_int_range(value, where, key)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(f"{where}: {key}: expected a number, got {shown_value(value)}")
        if isinstance(value, int):
            check_int_range(value, where, key)
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError(f"{where}: {key}: must be finite, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise InputError(f"{where}: {key}: expected a string, got {shown_value(value)}")
        check_text(value, where, key)
        return value
    if tp is Any:
        return value
    raise TypeError(f"unsupported config annotation {_type_name(tp)} for {key}")


#: the largest integer any config key may hold (a width, a count, a seed); every key
#: with a meaning has a tighter bound of its own, checked by its section
MAX_CONFIG_INT = 10**15
#: the most items a list in a config may hold
MAX_CONFIG_LIST = 10_000


def check_int_range(value: int, where: str, key: str, high: int = MAX_CONFIG_INT) -> None:
    """An integer within ``[-high, high]``, else ``InputError`` naming the limit (the
    value shown shortened: a 4,000-digit number is not echoed)."""
    if abs(value) > high:
        raise InputError(f"{where}: {key}: must be within +-{high:.0e}, got {shown_value(value)}")


def check_text(value: str, where: str, key: str) -> None:
    """A text value without control characters (NUL, escape sequences, newlines)."""
    bad = next((c for c in value if _is_control(c)), None)
    if bad is not None:
        raise InputError(
            f"{where}: {key}: contains the control character {bad!r}: {shown_value(value)}"
        )


def _is_control(c: str) -> bool:
    o = ord(c)
    return o < 32 or 127 <= o < 160


def shown_value(value: Any, limit: int = 60) -> str:
    """``repr(value)`` for a message, cut to ``limit`` characters (a huge integer is
    described by its digit count, never converted to text in full)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**60:
        if value.bit_length() > 13_000:  # str() refuses more than 4,300 digits
            return "an integer of more than 3,900 digits"
        return f"an integer of {len(str(abs(value))):,} digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_section(cls: type[T], data: Any, where: str, prefix: str) -> T:
    """Build dataclass ``cls`` from mapping ``data``, checking every key.

    Args:
        cls: a dataclass whose fields have simple annotations (int, float, str, bool,
            optionals, tuples of those or of dataclasses, nested dataclasses).
        data: the mapping read from YAML (``None`` means all defaults).
        where: the file name used in error messages.
        prefix: the dotted key of this section, e.g. ``"topology"``.

    Raises:
        InputError: unknown key, missing required key, wrong type; after building,
            the dataclass's ``validate(where, prefix)`` method runs if it has one.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(f"{where}: {prefix}: expected a mapping, got {shown_value(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for key in data:
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise InputError(f"{where}: {prefix}.{key}: unknown key (known: {known})")
    kwargs = {}
    for name, f in fields.items():
        dotted = f"{prefix}.{name}" if prefix else name
        if name in data:
            kwargs[name] = _coerce(data[name], hints[name], where, dotted)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise InputError(f"{where}: {dotted}: required key is missing")
    obj = cls(**kwargs)
    validate = getattr(obj, "validate", None)
    if callable(validate):
        validate(where, prefix)
    return obj


#: the arrival-rate multipliers a workload may use: a smaller one stretches a trace's
#: submit times past the clock's resolution, a larger one squeezes them together
LOAD_RANGE = (1e-3, 1e6)

#: the range every physical quantity of a config must lie in (bandwidths in Gbit/s,
#: memory in GB, ratios): values outside it make the simulator's clock overflow or stall
PHYSICAL_RANGE = (1e-3, 1e7)


def check_physical(value: float, where: str, key: str) -> None:
    """``value`` is a finite number within :data:`PHYSICAL_RANGE`, else ``InputError``."""
    lo, hi = PHYSICAL_RANGE
    check(
        math.isfinite(value) and lo <= value <= hi,
        where,
        key,
        f"must be a finite number in [{lo:g}, {hi:g}], got {value!r}",
    )


def check_bounds(obj: Any, bounds: dict[str, tuple[float, float]], where: str, key: str) -> None:
    """Each attribute ``name`` of ``obj`` (None skipped) lies in ``bounds[name]`` =
    (low, high), else ``InputError`` naming the key and both limits."""
    for name, (lo, hi) in bounds.items():
        value = getattr(obj, name)
        if value is None:
            continue
        check(value >= lo, where, f"{key}.{name}", f"must be >= {lo:,}, got {shown_value(value)}")
        check(value <= hi, where, f"{key}.{name}", f"must be <= {hi:,}, got {shown_value(value)}")


def check(cond: bool, where: str, key: str, problem: str) -> None:
    """Raise ``InputError(f"{where}: {key}: {problem}")`` unless ``cond``."""
    if not cond:
        raise InputError(f"{where}: {key}: {problem}")


_SECTIONS = ("topology", "workload", "simulation", "env", "model", "train", "interference")

#: the sections whose schema lives in a heavier package, and the parser that checks each
#: (``"module:function"`` taking the :class:`ExperimentConfig`). They are named by string
#: and imported only when a config has the section, the way the CLI names its lazy
#: commands, so this module imports nothing from envs/agents while every command
#: (``simulate`` included) still refuses an unknown or ill-typed key in any section.
OWNED_SECTIONS = {
    "env": "envs.config:env_config",
    "model": "agents.config:model_config",
    "train": "agents.config:train_config",
    "interference": "agents.config:interference_config",
}

#: the key a config file names its parents with (a list of files, relative to it)
DEFAULTS_KEY = "defaults"


def _check_owned_sections(cfg: ExperimentConfig) -> None:
    """Run the owners' parsers over every owned section the config has."""
    import importlib

    for section, target in OWNED_SECTIONS.items():
        if not getattr(cfg, section):
            continue
        module, _, func = target.partition(":")
        try:
            parser = getattr(importlib.import_module(module), func)
        except ModuleNotFoundError as exc:
            if exc.name != module.partition(".")[0]:
                raise
            continue  # an install without that layer: nothing there reads the section
        parser(cfg)


def _section(data: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    """An owned section as a mapping: absent or null is empty; anything else that is
    not a mapping (``env: []``, ``model: 0``) is refused, never read as empty."""
    value = data.get(name)
    return {} if value is None else _coerce(value, dict, where, name)


def config_from_dict(data: Any, where: str = "<config>") -> ExperimentConfig:
    """Validate a loaded mapping into an :class:`ExperimentConfig` (every section,
    the owned ones by their owners' parsers: :data:`OWNED_SECTIONS`)."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a mapping of sections, got {type(data).__name__}")
    for key in data:
        if key not in _SECTIONS:
            raise InputError(f"{where}: {key}: unknown section (known: {', '.join(_SECTIONS)})")
    cfg = ExperimentConfig(
        topology=parse_section(TopologyConfig, data.get("topology"), where, "topology"),
        workload=parse_section(WorkloadConfig, data.get("workload"), where, "workload"),
        simulation=parse_section(SimulationConfig, data.get("simulation"), where, "simulation"),
        env=_section(data, "env", where),
        model=_section(data, "model", where),
        train=_section(data, "train", where),
        interference=_section(data, "interference", where),
        source=where,
    )
    _check_owned_sections(cfg)
    return cfg


# --------------------------------------------------------------------------- files


#: the most YAML nodes (mappings, lists, scalars) one config or suite file may hold
MAX_YAML_NODES = 100_000
#: how deep ``defaults:`` may nest (a file, its parent, the parent's parent, ...)
MAX_DEFAULTS_DEPTH = 32
#: the most files one composed config may read
MAX_DEFAULTS_FILES = 64


class _YamlLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """PyYAML's safe loader (libyaml's parser when PyYAML has it) that refuses a key
    given twice in one mapping (PyYAML keeps the last one silently), and refuses
    aliases (``*name``, and so ``<<: *name`` merges): a few hundred bytes of nested
    aliases stand for billions of nodes (the "billion laughs"), which every later step
    (OmegaConf, the checks, ``config.yaml``) would expand. A config is plain values;
    the node tree is walked once, before anything is built, and its size capped
    (:data:`MAX_YAML_NODES`)."""

    def construct_document(self, node):
        _check_node_tree(node)
        return super().construct_document(node)

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class reports it
                break
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first on line {first})",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _check_node_tree(root: yaml.Node) -> None:
    """Refuse a node reached twice (an alias: the parser hands the anchored node itself
    to every ``*name``) and a tree of more than :data:`MAX_YAML_NODES` nodes."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            raise yaml.composer.ComposerError(
                None,
                None,
                "aliases (*name) and merges (<<: *name) are not allowed: write the values out",
                node.start_mark,
            )
        seen.add(id(node))
        if len(seen) > MAX_YAML_NODES:
            raise yaml.composer.ComposerError(
                None, None, f"more than {MAX_YAML_NODES:,} values", node.start_mark
            )
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack += (key, value)
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value


def read_yaml(path: str | Path, where: str | None = None, what: str = "config") -> Any:
    """One YAML file (a regular file within the size of its kind, ``what``: ``config``
    or ``suite``; :mod:`marl_sched.files`), safely loaded, duplicate keys and aliases
    refused; every problem is an ``InputError`` naming ``where`` (default: the path)
    and the line."""
    from marl_sched.files import read_input_text

    where = str(path) if where is None else where
    text = read_input_text(path, what, where)
    try:
        return yaml.load(text, Loader=_YamlLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{where}:{mark.line + 1}" if mark is not None else where
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{at}: invalid YAML: {problem}") from None
    except ValueError as exc:  # an integer of more than 4,300 digits, say
        raise InputError(f"{where}: invalid YAML: {_first_line(exc)}") from None


def _find(path: str | Path) -> Path:
    """``path``, or, relative and absent, the same path under the repo root."""
    p = Path(path)
    if not p.exists() and not p.is_absolute() and (REPO_ROOT / p).exists():
        return REPO_ROOT / p
    return p


def compose_file(path: str | Path, where: str | None = None) -> dict[str, Any]:
    """The mapping a config file stands for: its parents (``defaults: [a.yaml, ...]``,
    paths relative to the file, each composed the same way) merged in order with
    OmegaConf, then the file's own keys on top. Mappings merge key by key; a list or
    a value replaces the parent's; an empty section (``env:``) adds nothing.

    Each file is read at most once (a file reached twice, by a cycle or a diamond, is
    refused), ``defaults:`` nest at most :data:`MAX_DEFAULTS_DEPTH` deep and a
    config reads at most :data:`MAX_DEFAULTS_FILES` files, so a few small files
    cannot ask for 2^30 compositions."""
    where = str(path) if where is None else where
    return _plain_dict(_compose(_find(path), where, (), set()), where)


#: a whole-value reference to another key, the one interpolation a config may hold
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*)\}")


def _check_interpolations(data: Any, where: str) -> None:
    """Allow only ``${a.b}`` as a whole value naming a plain value (a number, a
    string, ...) of the config: resolvers (``${oc.env:SECRET}`` would copy an
    environment variable into ``config.yaml`` and stdout, ``${oc.decode:...}`` parse
    text), text built from several pieces (``"${a}${a}"``: doubling per level) and
    references to whole sections or lists (copied at every use) are refused."""

    def lookup(dotted: str) -> Any:
        node: Any = data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return _MISSING
            node = node[part]
        return node

    def walk(node: Any, key: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{key}.{k}" if key else str(k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{key}[{i}]")
        elif isinstance(node, str) and "${" in node:
            match = _REFERENCE.fullmatch(node.strip())
            if match is None:
                raise InputError(
                    f"{where}: {key}: interpolation {shown_value(node)} is not allowed: "
                    "only a whole value ${section.key} naming another plain value "
                    "(no resolvers such as oc.env, no text around it)"
                )
            target, chain = match.group(1), {key}
            value = lookup(target)
            while isinstance(value, str) and _REFERENCE.fullmatch(value.strip()):
                if target in chain:
                    raise InputError(
                        f"{where}: {key}: interpolation ${{{target}}} refers to itself"
                    )
                chain.add(target)
                target = _REFERENCE.fullmatch(value.strip()).group(1)
                value = lookup(target)
            if isinstance(value, dict | list):
                raise InputError(
                    f"{where}: {key}: interpolation ${{{target}}} names a section or a "
                    "list; only a plain value may be referenced"
                )

    walk(data, "")


_MISSING = object()


def _plain_dict(conf, where: str) -> dict[str, Any]:
    """An OmegaConf mapping as plain Python, ``${a.b}`` references resolved (the only
    interpolation allowed: :func:`_check_interpolations`)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        _check_interpolations(OmegaConf.to_container(conf, resolve=False), where)
        return OmegaConf.to_container(conf, resolve=True)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None)
        at = f"{where}: {key}" if key else where
        raise InputError(f"{at}: cannot resolve an interpolation: {_first_line(exc)}") from None


def _compose(p: Path, where: str, chain: tuple[Path, ...], read: set[Path]):
    """``p`` composed with its parents; ``chain``: the files that include it, ``read``:
    every file read so far."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    read.add(p.resolve())
    data = read_yaml(p, where, "config")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a mapping of sections, got {type(data).__name__}")
    parents = data.pop(DEFAULTS_KEY, None) or []
    if isinstance(parents, str):
        parents = [parents]
    if not isinstance(parents, list) or not all(isinstance(x, str) for x in parents):
        raise InputError(f"{where}: {DEFAULTS_KEY}: expected a list of config files")
    for section, value in list(data.items()):
        if value is None:  # an empty section adds nothing to its parents'
            del data[section]
        elif not isinstance(value, dict):
            raise InputError(
                f"{where}: {section}: expected a mapping of keys, got {shown_value(value)}"
            )
    if parents and len(chain) + 1 >= MAX_DEFAULTS_DEPTH:
        raise InputError(
            f"{where}: {DEFAULTS_KEY}: nested more than {MAX_DEFAULTS_DEPTH} files deep"
        )
    layers = []
    for name in parents:
        parent = (p.parent / name).resolve()
        if parent in chain or parent == p.resolve():
            raise InputError(f"{where}: {DEFAULTS_KEY}: {name}: includes itself")
        if parent in read:
            raise InputError(
                f"{where}: {DEFAULTS_KEY}: {name}: composed twice (a config reads each "
                "file once; a diamond of defaults is refused)"
            )
        if len(read) >= MAX_DEFAULTS_FILES:
            raise InputError(
                f"{where}: {DEFAULTS_KEY}: {name}: more than {MAX_DEFAULTS_FILES} files"
            )
        if not parent.is_file():
            raise InputError(f"{where}: {DEFAULTS_KEY}: {name}: no such config file")
        layers.append(_compose(parent, _shown(parent), (*chain, p.resolve()), read))
    try:
        return OmegaConf.merge(*layers, OmegaConf.create(data))
    except OmegaConfBaseException as exc:
        raise InputError(f"{where}: cannot merge with its defaults: {_first_line(exc)}") from None


def _shown(path: Path) -> str:
    """A path for messages: relative to the repo when inside it."""
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]


# --------------------------------------------------------------------------- overrides

#: a dotted key of an override: names separated by dots (no list indices: give the
#: whole list, ``env.hints=[a,b]``)
_OVERRIDE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*")


def parse_overrides(items: Sequence[str]) -> list[tuple[str, Any]]:
    """``key=value`` command-line overrides as (dotted key, value): the value is read
    the way OmegaConf reads a dotlist (YAML, so ``1e-4`` is a float, ``[a,b]`` a list,
    ``null`` unsets). A malformed item raises ``InputError`` naming it."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    out = []
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise InputError(f"override {item!r}: expected key=value")
        if not _OVERRIDE_KEY.fullmatch(key):
            raise InputError(f"override {item!r}: {key!r} is not a dotted key like train.lr")
        if not value.strip():
            raise InputError(f"{key}: override {item!r} has no value (write {key}=null to unset)")
        try:
            node = OmegaConf.from_dotlist([f"value={value}"])
            parsed = OmegaConf.to_container(node)["value"]
        except (OmegaConfBaseException, yaml.YAMLError) as exc:
            raise InputError(
                f"{key}: override {item!r}: cannot read the value: {_first_line(exc)}"
            ) from None
        out.append((key, parsed))
    return out


def apply_overrides(data: dict[str, Any], items: Sequence[str]) -> dict[str, Any]:
    """``data`` with the overrides merged in (OmegaConf), a new mapping."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    merged = OmegaConf.create(data)
    for key, value in parse_overrides(items):
        parts = key.split(".")
        node: Any = data
        for depth, part in enumerate(parts[:-1]):  # a value where the key needs a mapping
            node = node.get(part) if isinstance(node, dict) else None
            if node is not None and not isinstance(node, dict):
                where = ".".join(parts[: depth + 1])
                raise InputError(f"{key}: override: {where} is a value, not a section")
        try:
            OmegaConf.update(merged, key, value, merge=False, force_add=True)
        except OmegaConfBaseException as exc:
            raise InputError(f"{key}: override: {_first_line(exc)}") from None
    return _plain_dict(merged, OVERRIDES_WHERE)


#: where the command line's overrides are named in messages
OVERRIDES_WHERE = "command line"


def load_config(
    path: str | Path | ExperimentConfig, overrides: Sequence[str] = ()
) -> ExperimentConfig:
    """Load and validate an experiment config from a YAML file (composed with its
    ``defaults``: :func:`compose_file`), then apply ``key=value`` overrides.

    ``path`` may also be an already-loaded :class:`ExperimentConfig`, returned as is
    without overrides. Relative paths that do not exist are also tried against the
    repo root, so ``configs/default.yaml`` works from any directory. The file is
    validated alone first, so a problem of the file names the file; then with the
    overrides, whose problems name the ``command line`` and the key.
    """
    if isinstance(path, ExperimentConfig):
        if not overrides:
            return path
        data, where = path.to_dict(), path.source
    else:
        where = str(path)
        data = compose_file(path, where)
        if not overrides:
            return config_from_dict(data, where)
        config_from_dict(data, where)
    merged = apply_overrides(data, overrides)
    cfg = config_from_dict(merged, OVERRIDES_WHERE)
    return dataclasses.replace(cfg, source=where)
