"""Observations and action masks of the placement environment.

The layout of every field (shapes, dtypes, units) is documented in
:mod:`envs.cluster_env`; the feature names below are the column order of the
``*_x`` arrays. Three pieces:

- :class:`ClusterLayout` — per-subcluster index ranges and static features, computed
  once per topology (a subcluster's groups, servers and racks are contiguous id
  ranges, because the topology numbers entities level by level in order);
- :class:`JobDraft` — the tentative placement of the pending job: the tasks placed
  so far and the GPUs, CPU cores and memory they hold, which the simulator does not
  know about until the whole job is applied; it answers "which GPU groups have room
  for the next task";
- :class:`ObservationBuilder` — the spaces, and vectorised numpy that turns the
  simulator state plus the draft into one agent's observation. Every array it
  returns is freshly allocated (no views into the simulator).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from marl_sched.catalogue import CATALOGUE, RESOURCES
from marl_sched.errors import InputError
from marl_sched.jobs import Job
from marl_sched.simulator import Simulator
from marl_sched.topology import Topology

_P = tuple(f"pressure_{r}" for r in RESOURCES)

GROUP_FEATURES = (
    "free_frac",
    "capacity",
    "gpu_speed",
    "job_workers_here",
    "job_ps_here",
    *(f"group_{p}" for p in _P),
    *(f"socket_{p}" for p in _P),
    *(f"server_{p}" for p in _P),
    "pcie_jobs",
    "server_cpu_free_frac",
    "server_mem_free_frac",
    "nic_jobs",
    "fits_task",
)
SERVER_FEATURES = (
    "free_frac",
    "gpus",
    "gpu_speed",
    "cpu_free_frac",
    "mem_free_frac",
    *_P,
    "nic_jobs",
    "qpi_jobs",
    "nic_gbps",
    "job_tasks_here",
)
RACK_FEATURES = (
    "free_frac",
    "gpus",
    "uplink_jobs",
    "uplink_gbps",
    "cpu_free_frac",
    "mem_free_frac",
    *(f"mean_{p}" for p in _P),
    "job_tasks_here",
)
JOB_FEATURES = (
    *_P,
    *(f"sensitivity_{r}" for r in RESOURCES),
    "log10_compute_s",
    "log10_model_mb",
    "log10_total_compute_s",
    "log1p_workers",
    "log1p_ps",
    "remaining_frac",
    "task_is_worker",
    "task_is_ps",
    "placed_here_frac",
    "placed_elsewhere_frac",
    "log1p_queue",
    "elapsed",
    "hops",
    "is_home",
)
PEER_FEATURES = (
    "is_self",
    "is_home",
    "free_frac",
    "log1p_free_gpus",
    "cpu_free_frac",
    "mem_free_frac",
    *(f"mean_{p}" for p in _P),
    "uplink_jobs",
    "mean_rack_uplink_jobs",
    "mean_nic_jobs",
    "job_tasks_here",
    "fits_task",
)

WORKER, PS = 0, 1
_EPS = 1e-9  # the simulator's capacity tolerance (Simulator._check)


class ClusterLayout:
    """Per-subcluster index ranges, padding sizes and static features of a topology.

    Args:
        topology: the datacenter.
        max_groups, max_servers, max_racks: padding overrides (``None`` = the
            largest subcluster's count); a value below that raises ``InputError``.
        where: config file name for error messages.
    """

    def __init__(
        self,
        topology: Topology,
        max_groups: int | None = None,
        max_servers: int | None = None,
        max_racks: int | None = None,
        where: str = "<config>",
    ) -> None:
        t = topology
        self.topology = t
        self.n_agents = a = t.n_subclusters
        ids = np.arange(a + 1)
        self.group_start = np.searchsorted(t.group_subcluster, ids)
        self.server_start = np.searchsorted(t.server_subcluster, ids)
        self.rack_start = np.searchsorted(t.rack_subcluster, ids)
        for name, parent in (
            ("group", t.group_subcluster),
            ("server", t.server_subcluster),
            ("rack", t.rack_subcluster),
        ):
            if np.any(np.diff(parent) < 0):  # the layout relies on contiguous ranges
                raise AssertionError(f"topology {name}s are not ordered by subcluster")
        self.sc_groups = np.diff(self.group_start)
        self.sc_servers = np.diff(self.server_start)
        self.sc_racks = np.diff(self.rack_start)
        self.max_groups = _pad(int(self.sc_groups.max()), max_groups, where, "max_groups")
        self.max_servers = _pad(int(self.sc_servers.max()), max_servers, where, "max_servers")
        self.max_racks = _pad(int(self.sc_racks.max()), max_racks, where, "max_racks")
        self.n_actions = self.max_groups + a

        # local parent indices (within the subcluster)
        self.group_server_local = t.group_server - self.server_start[t.group_subcluster]
        self.server_rack_local = t.server_rack - self.rack_start[t.server_subcluster]
        # static features
        self.group_capacity_norm = t.group_capacity / t.group_capacity.max()
        self.server_gpus_norm = t.server_gpus / t.server_gpus.max()
        self.rack_gpus = np.bincount(t.server_rack, weights=t.server_gpus, minlength=t.n_racks)
        self.rack_gpus_norm = self.rack_gpus / self.rack_gpus.max()
        self.sc_gpus = np.add.reduceat(t.group_capacity, self.group_start[:-1]).astype(float)
        self.sc_cpu = np.add.reduceat(t.server_cpu, self.server_start[:-1])
        self.sc_mem = np.add.reduceat(t.server_memory_gb, self.server_start[:-1])
        off = t.link_offset
        self.nic_gbps_norm = t.link_nominal_gbps[off[2] : off[3]] / 100.0
        self.rack_uplink_gbps_norm = t.link_nominal_gbps[off[3] : off[4]] / 1000.0
        self.server_racks_start = np.searchsorted(t.server_rack, np.arange(t.n_racks))


def _pad(actual: int, override: int | None, where: str, key: str) -> int:
    if override is None:
        return actual
    if override < actual:
        raise InputError(
            f"{where}: env.{key}: must be >= {actual} (the largest subcluster's), got {override}"
        )
    return override


class JobDraft:
    """The pending job's tentative placement (workers first, then parameter servers).

    Holds, per GPU group / server / subcluster, what the tasks placed so far use, so
    the room for the next task is ``simulator free - draft used``; :meth:`clear`
    undoes only the touched entries, so a job costs O(its tasks).
    """

    def __init__(self, layout: ClusterLayout) -> None:
        t = layout.topology
        self.layout = layout
        self.topology = t
        self.group_used = np.zeros(t.n_groups, dtype=np.int64)
        self.job_workers = np.zeros(t.n_groups, dtype=np.int64)
        self.job_ps = np.zeros(t.n_groups, dtype=np.int64)
        self.cpu_used = np.zeros(t.n_servers)
        self.mem_used = np.zeros(t.n_servers)
        self.server_tasks = np.zeros(t.n_servers, dtype=np.int64)
        self.sc_tasks = np.zeros(t.n_subclusters, dtype=np.int64)
        self.job: Job | None = None
        self.worker_groups: list[int] = []
        self.ps_groups: list[int] = []

    def start(self, job: Job) -> None:
        self.clear()
        self.job = job
        (self.cpu_w, self.cpu_p), self.mem = Simulator.task_demands(job)

    def clear(self) -> None:
        t = self.topology
        groups = self.worker_groups + self.ps_groups
        if groups:
            srv = t.group_server[groups]
            self.group_used[groups] = 0
            self.job_workers[groups] = 0
            self.job_ps[groups] = 0
            self.cpu_used[srv] = 0.0
            self.mem_used[srv] = 0.0
            self.server_tasks[srv] = 0
            self.sc_tasks[:] = 0
        self.job = None
        self.worker_groups = []
        self.ps_groups = []

    @property
    def placed(self) -> int:
        return len(self.worker_groups) + len(self.ps_groups)

    @property
    def complete(self) -> bool:
        return self.job is not None and self.placed == self.job.num_tasks

    @property
    def next_kind(self) -> int:
        assert self.job is not None
        return WORKER if len(self.worker_groups) < self.job.num_workers else PS

    def add(self, group: int) -> None:
        """Place the next task on ``group`` (the caller checked the room)."""
        t = self.topology
        s = int(t.group_server[group])
        if self.next_kind == WORKER:
            self.group_used[group] += 1
            self.job_workers[group] += 1
            self.cpu_used[s] += self.cpu_w
            self.worker_groups.append(int(group))
        else:
            self.job_ps[group] += 1
            self.cpu_used[s] += self.cpu_p
            self.ps_groups.append(int(group))
        # same summation order as Simulator._check: workers, then PS, in placement order
        self.mem_used[s] += self.mem
        self.server_tasks[s] += 1
        self.sc_tasks[t.group_subcluster[group]] += 1

    def room(self, sim: Simulator) -> np.ndarray:
        """(n_groups,) bool: groups that can take the next task now.

        A worker needs a free GPU in the group (counting this job's tentative
        workers) and a worker's CPU cores and memory on the group's server; a
        parameter server needs only the CPU cores and memory. Tolerance and
        summation order match ``Simulator._check``.
        """
        t = self.topology
        kind = self.next_kind
        cpu = self.cpu_w if kind == WORKER else self.cpu_p
        server_ok = (self.cpu_used + cpu <= sim.server_cpu_free + _EPS) & (
            self.mem_used + self.mem <= sim.server_mem_free + _EPS
        )
        room = server_ok[t.group_server]
        if kind == WORKER:
            room &= self.group_used + 1 <= sim.group_free
        return room


def _slots(x: np.ndarray, d: float) -> np.ndarray:
    """Tasks needing ``d`` each entry of ``x`` can take (inf when ``d`` is 0)."""
    if d <= 0:
        return np.full(x.shape, np.inf)
    return np.floor(np.maximum(x + _EPS, 0.0) / d)


def server_worker_slots(
    topology: Topology,
    group_free: np.ndarray,
    cpu_free: np.ndarray,
    mem_free: np.ndarray,
    cpu_worker: float,
    mem_gb: float,
) -> np.ndarray:
    """(n_servers,) workers each server can take: min(free GPUs, cores // cpu_worker,
    memory // mem_gb)."""
    gpus = np.add.reduceat(np.maximum(group_free, 0), topology.server_groups_start)
    return np.minimum(gpus, np.minimum(_slots(cpu_free, cpu_worker), _slots(mem_free, mem_gb)))


def scopes_can_host_rest(
    topology: Topology,
    group_start: np.ndarray,
    group_free: np.ndarray,
    cpu_free: np.ndarray,
    mem_free: np.ndarray,
    demands: tuple[float, float, float],
    workers_left: int,
    ps_left: int,
) -> np.ndarray:
    """(A,) bool: can scope ``a`` alone host all of a job's remaining tasks.

    Scopes are contiguous group ranges starting at ``group_start`` (length A, first
    0). ``group_free``/``cpu_free``/``mem_free`` are the tentative free GPUs per group
    and free cores / GB per server; ``demands`` = (cores per worker, cores per PS, GB
    per task). A greedy capacity check: per server, worker slots = min(free GPUs,
    cores // cpu_worker, memory // mem_gb); the workers fill the servers with the most
    slots first, and the parameter servers must fit in the cores and memory left. It
    may say "no" for a job that a cleverer packing would fit, never "yes" for one that
    cannot fit (GPU groups of a server share its cores and memory only).
    """
    t = topology
    cw, cp, m = demands
    n = len(group_start)
    w_slots = server_worker_slots(t, group_free, cpu_free, mem_free, cw, m)
    srv_bounds = np.searchsorted(t.server_groups_start, [*group_start, t.n_groups])
    scope = np.repeat(np.arange(n), np.diff(srv_bounds))  # of each server (sorted)
    # all scopes at once: per scope, servers with the most worker slots first (stable);
    # slot counts are whole numbers, so these float sums are exact in any order
    order = np.lexsort((-w_slots, scope))
    ws = w_slots[order]
    total = np.bincount(scope, weights=w_slots, minlength=n)
    scope_ahead = np.concatenate([[0.0], np.cumsum(total)[:-1]])
    ahead = np.cumsum(ws) - ws - scope_ahead[scope]  # slots of the servers filled before
    x = np.zeros(len(ws))
    x[order] = np.clip(workers_left - ahead, 0.0, ws)
    cpu = cpu_free - x * cw
    mem = mem_free - x * m
    ps_slots = np.bincount(scope, weights=np.minimum(_slots(cpu, cp), _slots(mem, m)), minlength=n)
    return (total >= workers_left) & (ps_slots >= ps_left)


def forward_targets(
    can_task: np.ndarray,
    can_rest: np.ndarray,
    agent: int,
    allowed: np.ndarray,
    whole: bool = False,
) -> np.ndarray:
    """(A,) bool: the agents ``agent`` may forward the current task to.

    The cooperative rule, **forward when you must** (split a job only when you must):

    - the acting agent's scope cannot host the current task: to any ``allowed``
      agent whose scope can;
    - it can, but cannot host all of the job's remaining tasks while some
      ``allowed`` agent's scope can host them all: to those;
    - ``whole`` (no task of the job is placed yet): to any ``allowed`` agent whose
      scope can host the whole job — a job moves whole (load balancing), it is not
      spread;
    - otherwise nowhere: the agent places the task itself.

    ``allowed`` excludes the agents the task may not go to (visited / forward budget
    used up); the acting agent itself is never a target.
    """
    allowed = np.asarray(allowed, dtype=bool).copy()
    allowed[agent] = False
    if not can_task[agent]:
        return allowed & np.asarray(can_task, dtype=bool)
    rest = allowed & np.asarray(can_rest, dtype=bool)
    if whole or not can_rest[agent]:
        return rest
    return np.zeros_like(allowed)


@dataclass(frozen=True)
class DecisionContext:
    """What the observation needs to know about the pending decision.

    Attributes:
        home: index of the job's home agent.
        hops: times the current task has been forwarded.
        elapsed: simulated time since the episode's first submit / the episode's
            arrival span (dimensionless).
    """

    home: int
    hops: int
    elapsed: float


class ClusterSummary:
    """The DC-wide quantities that depend on the simulator state only (not on the
    pending job's draft): valid until the next simulator event or placement."""

    def __init__(self, layout: ClusterLayout, sim: Simulator) -> None:
        t = layout.topology
        links = np.log1p(sim.link_jobs.astype(np.float64))
        off = t.link_offset
        self.pcie_jobs = links[: off[1]]
        self.qpi_jobs = links[off[1] : off[2]]
        self.nic_jobs = links[off[2] : off[3]]
        self.rack_jobs = links[off[3] : off[4]]
        self.sc_jobs = links[off[4] :]
        s0, r0 = layout.server_start[:-1], layout.rack_start[:-1]
        self.peer_pressure = (
            np.add.reduceat(sim.server_pressure, s0, axis=0) / layout.sc_servers[:, None]
        )
        self.peer_rack_jobs = np.add.reduceat(self.rack_jobs, r0) / layout.sc_racks
        self.peer_nic_jobs = np.add.reduceat(self.nic_jobs, s0) / layout.sc_servers


class StepState:
    """DC-wide quantities of one step, shared by every agent's observation.

    Args:
        layout: the topology's layout.
        sim: the simulator (read, never kept beyond the step).
        draft: the pending job's tentative placement.
        ctx: the pending decision, ``None`` when there is none (episode over).
        summary: :class:`ClusterSummary` of ``sim``'s current state.
    """

    def __init__(
        self,
        layout: ClusterLayout,
        sim: Simulator,
        draft: JobDraft,
        ctx: DecisionContext | None,
        summary: ClusterSummary,
    ) -> None:
        t = layout.topology
        self.layout = layout
        self.sim = sim
        self.draft = draft
        self.ctx = ctx
        self.summary = summary
        self.job = draft.job if ctx is not None else None
        gfree = (sim.group_free - draft.group_used).astype(np.float64)
        self.gfree = gfree
        self.server_free = np.add.reduceat(gfree, t.server_groups_start)
        cpu_free = sim.server_cpu_free - draft.cpu_used
        mem_free = sim.server_mem_free - draft.mem_used
        self.cpu_frac = cpu_free / t.server_cpu
        self.mem_frac = mem_free / t.server_memory_gb
        if self.job is not None:
            self.room = draft.room(sim)
            self.sc_room = np.logical_or.reduceat(self.room, layout.group_start[:-1])
            job = self.job
            self.sc_rest = scopes_can_host_rest(
                t,
                layout.group_start[:-1],
                gfree,
                cpu_free,
                mem_free,
                (draft.cpu_w, draft.cpu_p, draft.mem),
                job.num_workers - len(draft.worker_groups),
                job.num_ps - len(draft.ps_groups),
            )
        else:
            self.room = np.zeros(t.n_groups, dtype=bool)
            self.sc_room = np.zeros(t.n_subclusters, dtype=bool)
            self.sc_rest = np.zeros(t.n_subclusters, dtype=bool)

        # the exchanged summaries, one row per subcluster
        g0, s0 = layout.group_start[:-1], layout.server_start[:-1]
        peers = np.zeros((layout.n_agents, len(PEER_FEATURES)))
        sc_free = np.add.reduceat(gfree, g0)
        peers[:, 2] = sc_free / layout.sc_gpus
        peers[:, 3] = np.log1p(np.maximum(sc_free, 0.0))
        peers[:, 4] = np.add.reduceat(cpu_free, s0) / layout.sc_cpu
        peers[:, 5] = np.add.reduceat(mem_free, s0) / layout.sc_mem
        peers[:, 6:11] = summary.peer_pressure
        peers[:, 11] = summary.sc_jobs
        peers[:, 12] = summary.peer_rack_jobs
        peers[:, 13] = summary.peer_nic_jobs
        if self.job is not None:
            peers[:, 14] = draft.sc_tasks / self.job.num_tasks
            peers[:, 1] = np.arange(layout.n_agents) == ctx.home
        peers[:, 15] = self.sc_room
        self.peers = peers
        self._job_static = _job_static(self.job) if self.job is not None else None

    def with_context(self, ctx: DecisionContext) -> StepState:
        """The same state for a new context with the same home (after a forward)."""
        out = copy.copy(self)
        out.ctx = ctx
        return out


def _job_static(job: Job) -> np.ndarray:
    spec = CATALOGUE[job.model]
    return np.concatenate(
        [
            spec.pressure,
            spec.sensitivity,
            [
                math.log10(spec.compute_s),
                math.log10(spec.model_mb),
                math.log10(spec.compute_s * max(job.iterations, 1e-9)),
                math.log1p(job.num_workers),
                math.log1p(job.num_ps),
            ],
        ]
    )


class ObservationBuilder:
    """The observation space of one agent and the code that fills it.

    Args:
        layout: the topology's :class:`ClusterLayout`.
        exchange: include the other subclusters' rows in ``peers_x``.
        mask_dtype: dtype of ``action_mask`` (float32 for RLlib, int8 for PettingZoo).
        forward_rule: ``"must"`` (:func:`forward_targets`) or ``"free"`` (any other
            subcluster with room for the task).
    """

    def __init__(
        self,
        layout: ClusterLayout,
        exchange: bool = True,
        mask_dtype: type = np.float32,
        forward_rule: str = "must",
    ) -> None:
        if forward_rule not in ("must", "free"):
            raise ValueError(f"forward_rule must be 'must' or 'free', got {forward_rule!r}")
        self.layout = layout
        self.exchange = exchange
        self.forward_rule = forward_rule
        self.mask_dtype = np.dtype(mask_dtype)
        g, s, r, a = layout.max_groups, layout.max_servers, layout.max_racks, layout.n_agents

        def feats(*shape: int) -> gym.spaces.Box:
            return gym.spaces.Box(-np.inf, np.inf, shape=shape, dtype=np.float32)

        def mask(n: int, dtype=np.float32) -> gym.spaces.Box:
            return gym.spaces.Box(0, 1, shape=(n,), dtype=dtype)

        def index(n: int, high: int) -> gym.spaces.Box:
            return gym.spaces.Box(0, max(high - 1, 0), shape=(n,), dtype=np.int64)

        self.space = gym.spaces.Dict(
            {
                "group_x": feats(g, len(GROUP_FEATURES)),
                "group_mask": mask(g),
                "group_server": index(g, s),
                "server_x": feats(s, len(SERVER_FEATURES)),
                "server_mask": mask(s),
                "server_rack": index(s, r),
                "rack_x": feats(r, len(RACK_FEATURES)),
                "rack_mask": mask(r),
                "job_x": feats(len(JOB_FEATURES)),
                "peers_x": feats(a, len(PEER_FEATURES)),
                "peers_mask": mask(a),
                "action_mask": mask(layout.n_actions, self.mask_dtype),
            }
        )
        # the constant parts, per agent (copied into every observation)
        self._static = [self._static_arrays(k) for k in range(a)]

    def _static_arrays(self, k: int) -> dict[str, np.ndarray]:
        lay = self.layout
        g0, g1 = lay.group_start[k], lay.group_start[k + 1]
        s0, s1 = lay.server_start[k], lay.server_start[k + 1]
        r0, r1 = lay.rack_start[k], lay.rack_start[k + 1]
        out = {
            "group_mask": np.zeros(lay.max_groups, np.float32),
            "group_server": np.zeros(lay.max_groups, np.int64),
            "server_mask": np.zeros(lay.max_servers, np.float32),
            "server_rack": np.zeros(lay.max_servers, np.int64),
            "rack_mask": np.zeros(lay.max_racks, np.float32),
            "peers_mask": np.zeros(lay.n_agents, np.float32),
        }
        out["group_mask"][: g1 - g0] = 1.0
        out["group_server"][: g1 - g0] = lay.group_server_local[g0:g1]
        out["server_mask"][: s1 - s0] = 1.0
        out["server_rack"][: s1 - s0] = lay.server_rack_local[s0:s1]
        out["rack_mask"][: r1 - r0] = 1.0
        if self.exchange:
            out["peers_mask"][:] = 1.0
        else:
            out["peers_mask"][k] = 1.0
        return out

    # ------------------------------------------------------------------ observations

    def observe(self, state: StepState, k: int, acting: bool) -> dict[str, np.ndarray]:
        """Agent ``k``'s observation; ``acting`` = it must decide the pending task.

        A non-acting agent (an idle agent of the parallel API, or any agent at the
        end of an episode) gets the same features but an action mask that allows
        only its no-op slot ``max_groups + k`` (forward to itself).
        """
        lay = self.layout
        t = lay.topology
        sim = state.sim
        draft = state.draft
        job = state.job
        g0, g1 = lay.group_start[k], lay.group_start[k + 1]
        s0, s1 = lay.server_start[k], lay.server_start[k + 1]
        r0, r1 = lay.rack_start[k], lay.rack_start[k + 1]
        ng, ns, nr = g1 - g0, s1 - s0, r1 - r0
        gsrv = t.group_server[g0:g1]
        n_tasks = job.num_tasks if job is not None else 1

        group_x = np.zeros((lay.max_groups, len(GROUP_FEATURES)), np.float32)
        gx = group_x[:ng]
        gx[:, 0] = state.gfree[g0:g1] / t.group_capacity[g0:g1]
        gx[:, 1] = lay.group_capacity_norm[g0:g1]
        gx[:, 2] = t.group_speed[g0:g1]
        if job is not None:
            gx[:, 3] = draft.job_workers[g0:g1] / max(job.num_workers, 1)
            gx[:, 4] = draft.job_ps[g0:g1] / max(job.num_ps, 1)
        gx[:, 5:10] = sim.group_pressure[g0:g1]
        gx[:, 10:15] = sim.socket_pressure[t.group_socket[g0:g1]]
        gx[:, 15:20] = sim.server_pressure[gsrv]
        gx[:, 20] = state.summary.pcie_jobs[g0:g1]
        gx[:, 21] = state.cpu_frac[gsrv]
        gx[:, 22] = state.mem_frac[gsrv]
        gx[:, 23] = state.summary.nic_jobs[gsrv]
        gx[:, 24] = state.room[g0:g1]

        server_x = np.zeros((lay.max_servers, len(SERVER_FEATURES)), np.float32)
        sx = server_x[:ns]
        sx[:, 0] = state.server_free[s0:s1] / t.server_gpus[s0:s1]
        sx[:, 1] = lay.server_gpus_norm[s0:s1]
        sx[:, 2] = t.server_gpu_speed[s0:s1]
        sx[:, 3] = state.cpu_frac[s0:s1]
        sx[:, 4] = state.mem_frac[s0:s1]
        sx[:, 5:10] = sim.server_pressure[s0:s1]
        sx[:, 10] = state.summary.nic_jobs[s0:s1]
        sx[:, 11] = state.summary.qpi_jobs[s0:s1]
        sx[:, 12] = lay.nic_gbps_norm[s0:s1]
        sx[:, 13] = draft.server_tasks[s0:s1] / n_tasks

        rack_x = np.zeros((lay.max_racks, len(RACK_FEATURES)), np.float32)
        rx = rack_x[:nr]
        rs = lay.server_racks_start[r0:r1] - s0  # rack boundaries within the server slice
        per_rack = np.bincount(t.server_rack[s0:s1] - r0, minlength=nr)[:, None]
        rx[:, 0] = np.add.reduceat(state.server_free[s0:s1], rs) / lay.rack_gpus[r0:r1]
        rx[:, 1] = lay.rack_gpus_norm[r0:r1]
        rx[:, 2] = state.summary.rack_jobs[r0:r1]
        rx[:, 3] = lay.rack_uplink_gbps_norm[r0:r1]
        rx[:, 4] = np.add.reduceat(state.cpu_frac[s0:s1], rs) / per_rack[:, 0]
        rx[:, 5] = np.add.reduceat(state.mem_frac[s0:s1], rs) / per_rack[:, 0]
        rx[:, 6:11] = np.add.reduceat(sim.server_pressure[s0:s1], rs, axis=0) / per_rack
        rx[:, 11] = np.add.reduceat(draft.server_tasks[s0:s1], rs) / n_tasks

        job_x = np.zeros(len(JOB_FEATURES), np.float32)
        if job is not None:
            ctx = state.ctx
            placed = draft.placed
            here = draft.sc_tasks[k]
            kind = draft.next_kind
            job_x[:15] = state._job_static
            job_x[15:] = (
                (n_tasks - placed) / n_tasks,
                kind == WORKER,
                kind == PS,
                here / n_tasks,
                (placed - here) / n_tasks,
                math.log1p(len(sim.queue)),
                ctx.elapsed,
                ctx.hops / max(lay.n_agents - 1, 1),
                ctx.home == k,
            )

        peers_x = state.peers.astype(np.float32)
        peers_x[:, 0] = 0.0
        peers_x[k, 0] = 1.0
        if not self.exchange:
            own = peers_x[k].copy()
            peers_x[:] = 0.0
            peers_x[k] = own

        action_mask = np.zeros(lay.n_actions, self.mask_dtype)
        if acting:
            action_mask[:ng] = state.room[g0:g1]
            if state.ctx.hops < lay.n_agents - 1:
                allowed = np.ones(lay.n_agents, dtype=bool)
                if self.forward_rule == "must":
                    targets = forward_targets(
                        state.sc_room, state.sc_rest, k, allowed, whole=draft.placed == 0
                    )
                else:  # "free": any other subcluster with room for the task
                    targets = allowed & state.sc_room
                    targets[k] = False
                action_mask[lay.max_groups :] = targets
        else:
            action_mask[lay.max_groups + k] = 1

        static = self._static[k]
        return {
            "group_x": group_x,
            "group_mask": static["group_mask"].copy(),
            "group_server": static["group_server"].copy(),
            "server_x": server_x,
            "server_mask": static["server_mask"].copy(),
            "server_rack": static["server_rack"].copy(),
            "rack_x": rack_x,
            "rack_mask": static["rack_mask"].copy(),
            "job_x": job_x,
            "peers_x": peers_x,
            "peers_mask": static["peers_mask"].copy(),
            "action_mask": action_mask,
        }
