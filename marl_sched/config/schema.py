"""The config sections the simulator reads: one frozen dataclass per concern, with
the limits each key is checked against (:func:`~marl_sched.config.parse.parse_section`
builds them; each ``validate`` checks the ranges)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from marl_sched.config.parse import check, check_bounds, check_physical

#: most jobs' workers one GPU may hold (``topology.gpu_sharing``): Gavel measures pairs,
#: and beyond a few jobs a GPU's memory holds nobody's working set
MAX_GPU_SHARING = 4

#: the largest datacenter a config may describe, checked before any array is built: a
#: few times the largest public traces' clusters (Philly ~2,500 GPUs, Alibaba openb
#: ~6,200), and what the simulator's per-GPU arrays hold in well under 2 GB
MAX_SERVERS = 100_000
MAX_GPUS = 1_000_000
#: the arrival-rate multipliers a workload may use: a smaller one stretches a trace's
#: submit times past the clock's resolution, a larger one squeezes them together
LOAD_RANGE = (1e-3, 1e6)
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
        check(self.n_servers <= MAX_SERVERS, where, key,
              f"subclusters x racks_per_subcluster x servers_per_rack = {self.n_servers:,} "
              f"servers, more than the {MAX_SERVERS:,} a topology may have")  # fmt: skip
        check(1 <= self.gpu_sharing <= MAX_GPU_SHARING, where, f"{key}.gpu_sharing",
              f"must be in [1, {MAX_GPU_SHARING}], got {self.gpu_sharing}")  # fmt: skip
        for name in ("pcie_gbps", "qpi_gbps", "rack_oversubscription", "subcluster_uplink_gbps"):
            check_physical(getattr(self, name), where, f"{key}.{name}")
        check(len(self.server_types) >= 1, where, f"{key}.server_types", "needs at least one")
        names = [s.name for s in self.server_types]
        check(len(set(names)) == len(names), where, f"{key}.server_types", "duplicate name")
        total = sum(s.count for s in self.server_types)
        check(total == self.n_servers, where, f"{key}.server_types",
              f"counts sum to {total} servers, but subclusters x racks_per_subcluster x "
              f"servers_per_rack = {self.n_servers}")  # fmt: skip
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
        arrival_jitter: each inter-arrival gap is multiplied by a draw from
            Uniform(1 - j, 1 + j) seeded by ``seed`` (mean 1: the load is kept);
            0 = the trace's own arrival times.
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

        check(0 <= self.arrival_jitter < 1, where, f"{key}.arrival_jitter",
              f"must be in [0, 1), got {self.arrival_jitter}")  # fmt: skip

        check(
            self.duration_estimate in DURATION_ESTIMATES,
            where,
            f"{key}.duration_estimate",
            f"must be one of {', '.join(DURATION_ESTIMATES)}, got {self.duration_estimate!r}",
        )
        check(self.duration_noise_sigma >= 0, where, f"{key}.duration_noise_sigma",
              f"must be >= 0, got {self.duration_noise_sigma}")  # fmt: skip
        check(self.warmup_jobs >= 0, where, f"{key}.warmup_jobs",
              f"must be >= 0, got {self.warmup_jobs}")  # fmt: skip
        formats = ("auto", "canonical", "philly", "alibaba", "pollux")
        check(self.trace_format in formats, where, f"{key}.trace_format",
              f"must be one of {', '.join(formats)}, got {self.trace_format!r}")  # fmt: skip
        check(self.start >= 0, where, f"{key}.start", f"must be >= 0, got {self.start}")
        check(self.seed >= 0, where, f"{key}.seed", f"must be >= 0, got {self.seed}")
        check(math.isfinite(self.load), where, f"{key}.load", f"must be finite, got {self.load}")
        if self.max_jobs is not None:
            check(
                self.max_jobs >= 1, where, f"{key}.max_jobs", f"must be >= 1, got {self.max_jobs}"
            )
        check_load(self.load, where, f"{key}.load")
        if self.max_job_gpus is not None:
            check(self.max_job_gpus >= 1, where, f"{key}.max_job_gpus", "must be >= 1")


def check_load(load: float, where: str, key: str) -> None:
    """An arrival-rate multiplier: > 0 and within :data:`LOAD_RANGE`."""
    check(load > 0, where, key, f"must be > 0, got {load}")
    lo, hi = LOAD_RANGE
    check(lo <= load <= hi, where, key, f"must be in [{lo:g}, {hi:g}], got {load}")


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
        migration_cost: what every restart (migration or ``las-2d`` resume) costs
            (:mod:`marl_sched.migration`): ``measured`` (the model's measured restart,
            plus the state's move for a migration) or flat seconds.
        migration_cost_scale: multiplies every restart delay (sensitivity runs).
        max_migrations_per_job: moves one job may make in a run; a proposal over the
            cap is declined and counted.
        min_migration_interval_s: seconds between two moves of one job.
        nic_efficiency_scale: factor on the calibrated efficiency of every network
            link (the cost of spreading a job over servers); 1 = the calibration.
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
        check(self.ordering in ORDERINGS or self.ordering == OWN, where, f"{key}.ordering",
              f"must be one of {', '.join([*ORDERINGS, OWN])}, got {self.ordering!r}")  # fmt: skip
        check(self.migration in MIGRATION_MODES, where, f"{key}.migration",
              f"must be off or on, got {self.migration!r}")  # fmt: skip
        cost = self.migration_cost
        ok = cost == "measured" or (isinstance(cost, float) and math.isfinite(cost) and cost >= 0)
        check(ok, where, f"{key}.migration_cost",
              f"must be measured or a finite number of seconds >= 0, got {cost!r}")  # fmt: skip
        scale, interval = self.migration_cost_scale, self.min_migration_interval_s
        check(math.isfinite(scale) and scale >= 0, where, f"{key}.migration_cost_scale",
              f"must be a finite number >= 0, got {scale!r}")  # fmt: skip
        check(self.max_migrations_per_job >= 0, where, f"{key}.max_migrations_per_job",
              f"must be >= 0, got {self.max_migrations_per_job}")  # fmt: skip
        check(math.isfinite(interval) and interval >= 0, where, f"{key}.min_migration_interval_s",
              f"must be a finite number >= 0, got {interval!r}")  # fmt: skip
        nic = self.nic_efficiency_scale
        check(math.isfinite(nic) and nic > 0, where, f"{key}.nic_efficiency_scale",
              f"must be a finite number > 0, got {nic!r}")  # fmt: skip
