"""Task-by-task placement over the simulator: observations, sessions and the env.

The same decision process serves training (:class:`agents.rl_module.SchedulingEnv`,
an RLlib ``MultiAgentEnv``) and inference (:class:`agents.policy.MarlPolicy`, which places
whole jobs through :class:`~marl_sched.policies.Policy`), so what a checkpoint saw
in training is exactly what it sees when it is evaluated. Two modes:

- **multi-agent** (``central=False``): agents ``"sc0".."sc{A-1}"``, one per
  subcluster. A job arrives at a home agent (``crc32(vc) mod A``, else
  ``job_id mod A``); the acting agent places the job's current task on one of its
  GPU groups (action ``0..G_max-1``) or forwards it to agent ``k`` (action
  ``G_max + k``); the next task goes to the agent that placed the previous one.
  A task is never forwarded back to an agent it has visited. The cooperative
  mechanism is **forward when you must**: a forward is legal only when the acting
  agent's subcluster cannot host the current task (then to any unvisited agent
  whose subcluster can), or can host it but not all of the job's remaining (not yet
  placed) tasks while some unvisited agent's subcluster can host them all (then to
  those), or — before any task of the job is placed — to an unvisited agent whose
  subcluster can host the whole job (a job moves whole, for load balancing);
  otherwise the agent places the task itself. So a job is spread over several
  subclusters only when no single one can hold the rest of it. The rule is
  :func:`envs.observations.forward_targets` (with the greedy capacity check
  :func:`envs.observations.scopes_can_host_rest`), the same one the env
  ``ClusterPlacement-v0`` applies. Optionally (``consolidate``, ``model.consolidate``)
  also **consolidate when you can**: when a job with several workers arrives at an
  agent none of whose servers can take all of its workers while some unvisited
  agent's scope has such a server, its first task can only be forwarded, to those
  agents — a job that fits on one server somewhere is not split over servers.
- **central** (``central=True``): one agent ``"central"`` sees the whole datacenter
  as a single scope (the single-agent variant for the convergence comparison);
  ``A = 1`` and its only forward action is always masked.

Tasks of a job: its workers first (one GPU each), then its parameter servers (CPU
and memory of the chosen group's server). When the job's last task is placed the
:class:`~marl_sched.jobs.Placement` goes to the simulator; when a task fits nowhere
the job stays queued.

Observation (a ``gymnasium.spaces.Dict``; every feature is a ratio or a small
count so a network trained on one topology reads another): ``group_x (G_max, Fg)``,
``group_mask``, ``group_server`` (local parent index), ``server_x (S_max, Fs)``,
``server_mask``, ``server_rack``, ``rack_x (R_max, Fr)``, ``rack_mask``, ``job_x
(Fj,)``, ``peers_x (A, Fp)`` (a summary of every scope), ``peers_mask``,
``action_mask (G_max + A + H,)`` (``H`` hints, below). Feature names: :data:`FEATURES`.

Heuristic hints (optional, ``model.hints``): for each named heuristic ``h``, where
``h`` would put the job if the acting agent's scope were the whole cluster (asked
once per job and scope, on the view the job arrived on, the scope's free capacity
only). ``group_x`` gains ``hint_<h>`` — the tasks of the current kind (worker or PS)
that plan still puts in the group and the job has not placed there yet, over the
job's tasks of that kind — and ``job_x`` gains ``hint_<h>_agrees``: 1 while every
task placed so far lies where that plan put one (0 once the job departs from it, and
when ``h`` cannot place the whole job in the scope). With hints the acting agent also
has one **follow** action per hint (``G_max + A + i``): place the current task where
plan ``i`` puts its next task of that kind not yet placed (the first such group in
the plan's task order) — legal while the job agrees with the plan and that group can
take the task. A policy can follow one plan for a whole job, switch between plans,
place tasks itself, or ignore the hints; what it learns to do is its own. Hints add
one ``peers_x`` column, ``rest_on_one_server``: can one server of that scope take all
of the job's remaining workers (the plans describe the acting agent's scope only).
Global hints (``model.global_hints``): for each named heuristic, a ``peers_x`` column
``global_<h>`` — the share of the job's tasks that ``h``, asked once per job on the
whole datacenter, puts in each scope (where that heuristic would send the job).

Resident features (optional, ``model.resident_features``): ``group_x`` gains
``harm_to_residents``, ``log1p`` of the slowdown the current task would add to the
jobs already running near the group, each weighted by its number of workers (a
synchronous job runs at its slowest worker's pace, so slowing one worker of a
48-GPU job stalls 48 GPUs). ``interference_caused`` counts the residents' pressure
alone and cannot tell a one-GPU job from one worker of a giant.

Job length (optional, ``model.job_length``): ``job_x`` gains ``log10_work_s/7``,
``log10(1 + iterations × compute_s) / 7`` — the job's requested training work in
reference-GPU seconds, the quantity MLF-H ranks jobs by (``agents.baselines.mlf_h``)
and the env ``ClusterPlacement-v0`` observes (``log10_total_compute_s``): a job
submitted with its iteration count, as MLFS assumes. It is what tells a giant that
must have fast GPUs from a short job that can take slow ones.

Keep together (optional, ``model.keep_together``): a constraint in the masks, not a
feature. While a server already holding the job's workers has a worker slot in the
acting scope, the next worker must go to one of them and cannot be forwarded (fill
before opening); when the job opens a server, it must be one that takes every
remaining worker if the scope has such a server. A job that fits on one server stays
on one, and one stray task cannot split a giant over more servers than it needs
(the imitated policies' costliest mistake on Pollux, docs/results.md).

Speed floor (optional, ``model.speed_floor`` = ``f`` in (0, 1]): also a constraint in
the masks. With ``v*`` the speed of the fastest GPU type whose servers, counted over
the whole datacenter, still have worker slots for all of the job's remaining workers
(lowered to the slowest GPU the job already holds: a synchronous job runs at its
slowest worker's pace, so that worker's type costs nothing more), a worker may only
go to a server whose GPUs run at ``>= f × v*``; an agent whose scope has none of
those with a worker slot forwards the task to any unvisited scope that has one (as if
its scope could not host the task); otherwise forwarding keeps its rule, narrowed to
such scopes. "Consolidate when you can" counts only
those servers. With ``f = 0.9`` on the Pollux topology (V100 1.0, P100 0.94, K80
0.30), a job never takes a K80 while V100s or P100s have room for it — a giant sent
to K80s was the learned policies' costliest mistake on Pollux-7 (docs/results.md). If
the floor leaves the acting agent no legal action, it is lifted for that task. With
``model.speed_floor_min_work = T`` the floor binds only jobs whose GPU work (workers ×
iterations × reference compute per iteration) is at least ``T`` GPU-seconds: a short
job loses little on a slow GPU and leaves the fast ones to the giants.

Wait to fit (optional, ``model.wait_to_fit = c``): a job that one server could hold
(2 to a server's GPUs workers) but that no server can take whole right now stays in
the queue instead of being split, until a server frees up or it has waited ``c ×`` its
isolated runtime (:meth:`PlacementSession.waits`); the simulator offers it again at
the next completion. Split over servers, an 8-worker job can run 3–5× slower than on
one; a short wait is cheaper.

PS rule (optional, ``model.ps_rule``): the agents place a job's workers only; once the
last worker is placed, its parameter servers go where every heuristic puts them
(:func:`marl_sched.policies.heuristics.ps_near_workers`: round-robin over the servers
holding most of its workers) — unless they do not fit there, when the agents place
them. A learned policy that stacks a 48-worker job's 12 PS on one server makes that
server's NIC the job's bottleneck (docs/results.md).

Reward (cooperative, to the acting agent): with ``C(t)`` the job-seconds spent in
the system up to ``t`` (Σ of ``min(finish, t) - submit`` over submitted jobs) and
``W`` the predicted remaining run time of the running jobs (Σ remaining iterations
× current iteration time)::

    r = -(ΔC + ΔW) / (time_scale_s × jobs in the episode)

``W`` is 0 at both ends of an episode, so the return is exactly ``-avg JCT /
time_scale_s``; ``ΔW`` (potential-based shaping) credits a placement at once with
the run time it adds, its own and the slowdown it causes its neighbours.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from agents.teachers import placement_key
from envs.observations import forward_targets, scopes_can_host_rest, server_worker_slots
from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job, Placement
from marl_sched.perf import PerformanceModel
from marl_sched.policies.heuristics import ps_near_workers
from marl_sched.simulator import ClusterView, harm_to_residents
from marl_sched.topology import Topology

OBS_VERSION = 1
FEATURES = {
    "group_x": (
        "free_frac", "free_gpus/8", "gpu_speed", "worker_fits", "ps_fits",
        "interference_suffered", "interference_caused", "log1p_pcie_jobs",
        "job_tasks_in_group", "job_tasks_in_socket",
    ),
    "server_x": (
        "free_gpu_frac", "cpu_free_frac", "mem_free_frac", "log1p_nic_jobs",
        "log1p_qpi_jobs", "job_tasks_on_server", "gpu_speed", "gpus/8", "pressure/5",
        "nic_gbps/100",
    ),
    "rack_x": (
        "free_gpu_frac", "log1p_uplink_jobs", "job_tasks_in_rack", "free/needed/4",
        "uplink_gbps/1000",
    ),
    "job_x": (
        "log2_workers/6", "ps/4", "is_worker", "tasks_done_frac", "workers_left_frac",
        "compute_s", "model_gb", "comm_ratio", "hops_frac", "in_scope_frac",
        *(f"sensitivity_{r}" for r in ("cpu", "pcie", "membw", "disk", "net")),
        *(f"pressure_{r}" for r in ("cpu", "pcie", "membw", "disk", "net")),
    ),
    "peers_x": (
        "free_gpu_frac", "log1p_free_gpus", "free_gpu_speed", "best_server_free/8",
        "log1p_uplink_jobs", "job_tasks_frac", "is_self", "can_host_task", "visited",
    ),
}  # fmt: skip


def feature_names(
    hints: tuple[str, ...] = (),
    global_hints: tuple[str, ...] = (),
    residents: bool = False,
    job_length: bool = False,
) -> dict[str, tuple[str, ...]]:
    """:data:`FEATURES` with the columns of heuristic hints ``hints`` and
    ``global_hints`` appended, with ``residents`` the ``harm_to_residents`` group
    column and with ``job_length`` the ``log10_work_s/7`` job column."""
    out = dict(FEATURES)
    out["group_x"] = FEATURES["group_x"] + ("harm_to_residents",) * residents
    out["group_x"] = out["group_x"] + tuple(f"hint_{h}" for h in hints)
    out["job_x"] = FEATURES["job_x"] + ("log10_work_s/7",) * job_length
    out["job_x"] = out["job_x"] + tuple(f"hint_{h}_agrees" for h in hints)
    if hints:
        # the hints' counterpart for moving the job: can one server of that scope
        # take all of the job's remaining workers (a plan elsewhere that does not split)
        out["peers_x"] = FEATURES["peers_x"] + ("rest_on_one_server",)
    out["peers_x"] = out["peers_x"] + tuple(f"global_{h}" for h in global_hints)
    return out


@dataclass(frozen=True)
class Scope:
    """The entities one agent sees: a subcluster, or the whole datacenter.

    Every level of a scope is a contiguous id range (topology ids are dealt in
    hierarchy order), so the arrays below are slices and local segment starts.
    """

    groups: np.ndarray  # global group ids (G,)
    servers: np.ndarray  # global server ids (S,)
    racks: np.ndarray  # global rack ids (R,)
    group_server: np.ndarray  # local server index per group (G,)
    server_rack: np.ndarray  # local rack index per server (S,)
    group_socket: np.ndarray  # local socket index per group (G,)
    server_starts: np.ndarray  # first local group of each server (S,)
    socket_starts: np.ndarray  # first local group of each local socket
    rack_starts: np.ndarray  # first local server of each rack (R,)

    @property
    def gslice(self) -> slice:
        return slice(int(self.groups[0]), int(self.groups[-1]) + 1)

    @property
    def sslice(self) -> slice:
        return slice(int(self.servers[0]), int(self.servers[-1]) + 1)

    @property
    def rslice(self) -> slice:
        return slice(int(self.racks[0]), int(self.racks[-1]) + 1)


def _scope(topo: Topology, groups: np.ndarray) -> Scope:
    servers = np.unique(topo.group_server[groups])
    racks = np.unique(topo.server_rack[servers])
    sockets = topo.group_socket[groups] - topo.group_socket[groups[0]]
    for ids in (groups, servers, racks):
        assert np.all(np.diff(ids) == 1), "scopes are contiguous id ranges"
    local_server = np.searchsorted(servers, topo.group_server[groups])
    local_rack = np.searchsorted(racks, topo.server_rack[servers])
    return Scope(
        groups=groups,
        servers=servers,
        racks=racks,
        group_server=local_server,
        server_rack=local_rack,
        group_socket=sockets,
        server_starts=np.searchsorted(local_server, np.arange(len(servers))),
        socket_starts=np.searchsorted(sockets, np.arange(sockets[-1] + 1)),
        rack_starts=np.searchsorted(local_rack, np.arange(len(racks))),
    )


class ObservationBuilder:
    """Observations and action masks of every agent of one topology.

    Args:
        topology: the datacenter.
        perf: its performance model (interference weights).
        central: one scope for the whole datacenter instead of one per subcluster.
        pad: ``(G_max, S_max, R_max)``; default = the largest scope's sizes.
        hints: heuristics whose placements inside the acting agent's scope become
            input features (module docstring); empty = none.
        consolidate: a job that fits on one server somewhere goes to one server's
            scope (module docstring, "consolidate when you can").
        global_hints: heuristics whose placement of the job in the whole datacenter
            becomes a ``peers_x`` column (module docstring); empty = none.
        resident_features: the ``harm_to_residents`` group column (module docstring).
        keep_together: the keep-together masks (module docstring).
        job_length: the ``log10_work_s/7`` job column (module docstring).
        speed_floor: the speed-floor masks, ``f`` in [0, 1] (0 = off; module
            docstring).
        ps_rule: PS placed by the heuristics' rule, not by the agents (module
            docstring).
        speed_floor_min_work: the floor binds only jobs with at least this much GPU
            work (GPU-seconds; module docstring).
        wait_to_fit: a job one server could hold waits rather than split, for up to
            this many times its isolated runtime (0 = off; module docstring).
    """

    def __init__(
        self,
        topology: Topology,
        perf: PerformanceModel,
        central: bool = False,
        pad: tuple[int, int, int] | None = None,
        hints: tuple[str, ...] = (),
        consolidate: bool = False,
        global_hints: tuple[str, ...] = (),
        resident_features: bool = False,
        keep_together: bool = False,
        job_length: bool = False,
        speed_floor: float = 0.0,
        ps_rule: bool = False,
        speed_floor_min_work: float = 0.0,
        wait_to_fit: float = 0.0,
    ) -> None:
        from marl_sched.policies.heuristics import hint_names, make_hint

        t = self.topology = topology
        self.perf = perf
        self.central = central
        for key, names in (("hints", hints), ("global_hints", global_hints)):
            unknown = [h for h in names if h not in hint_names()]
            if unknown:
                raise ValueError(f"{key}: {', '.join(unknown)} is not a heuristic or hint variant")
        self.hints = tuple(hints)
        self.global_hints = tuple(global_hints)
        self.consolidate = bool(consolidate)
        self.resident_features = bool(resident_features)
        self.keep_together = bool(keep_together)
        self.job_length = bool(job_length)
        if not 0.0 <= speed_floor <= 1.0:
            raise ValueError(f"speed_floor must be in [0, 1], got {speed_floor}")
        self.speed_floor = float(speed_floor)
        self.ps_rule = bool(ps_rule)
        self.speed_floor_min_work = float(speed_floor_min_work)
        if wait_to_fit < 0:
            raise ValueError(f"wait_to_fit must be >= 0, got {wait_to_fit}")
        self.wait_to_fit = float(wait_to_fit)
        self.hint_policies = [make_hint(h) for h in self.hints]
        self.global_policies = [make_hint(h) for h in self.global_hints]
        for h in (*self.hint_policies, *self.global_policies):
            h.reset(topology, 0)
        self.features = feature_names(
            self.hints, self.global_hints, self.resident_features, self.job_length
        )
        if central:
            self.scopes = [_scope(t, np.arange(t.n_groups))]
            self.group_scope = np.zeros(t.n_groups, dtype=np.int64)
        else:
            self.scopes = [_scope(t, t.subcluster_groups(k)) for k in range(t.n_subclusters)]
            self.group_scope = t.group_subcluster.astype(np.int64)
        self.agent_ids = ["central"] if central else [f"sc{k}" for k in range(len(self.scopes))]
        self.n_agents = len(self.scopes)
        sizes = np.array([(len(s.groups), len(s.servers), len(s.racks)) for s in self.scopes])
        need = tuple(int(x) for x in sizes.max(axis=0))
        self.pad = tuple(pad) if pad is not None else need
        if any(p < n for p, n in zip(self.pad, need, strict=True)):
            raise ValueError(f"padding {self.pad} is smaller than the largest scope {need}")
        self.scope_capacity = np.bincount(
            self.group_scope, weights=t.group_capacity, minlength=self.n_agents
        )
        self.server_scope = self.group_scope[t.server_groups_start]
        self.scope_server_start = np.searchsorted(self.server_scope, np.arange(self.n_agents))
        self.scope_group_start = np.searchsorted(self.group_scope, np.arange(self.n_agents))
        self.server_gpus = np.maximum(t.server_gpus, 1)
        self.rack_gpus = np.bincount(t.server_rack, weights=t.server_gpus, minlength=t.n_racks)
        self.observation_space = self._space()
        self.action_space = gym.spaces.Discrete(self.pad[0] + self.n_agents + len(self.hints))

    def _space(self) -> gym.spaces.Dict:
        g, s, r = self.pad
        a = self.n_agents

        def box(*shape, lo=-np.inf, hi=np.inf, dtype=np.float32):
            return gym.spaces.Box(lo, hi, shape, dtype)

        n = {k: len(v) for k, v in self.features.items()}
        return gym.spaces.Dict(
            {
                "group_x": box(g, n["group_x"]),
                "group_mask": box(g, lo=0.0, hi=1.0),
                "group_server": box(g, lo=0, hi=max(s - 1, 0), dtype=np.int64),
                "server_x": box(s, n["server_x"]),
                "server_mask": box(s, lo=0.0, hi=1.0),
                "server_rack": box(s, lo=0, hi=max(r - 1, 0), dtype=np.int64),
                "rack_x": box(r, n["rack_x"]),
                "rack_mask": box(r, lo=0.0, hi=1.0),
                "job_x": box(n["job_x"]),
                "peers_x": box(a, n["peers_x"]),
                "peers_mask": box(a, lo=0.0, hi=1.0),
                "action_mask": box(g + a + len(self.hints), lo=0.0, hi=1.0),
            }
        )

    def observe(self, session: PlacementSession, agent: int) -> dict[str, np.ndarray]:
        """The observation of ``agent`` (a scope index) while ``session`` is open."""
        t, sc, v = self.topology, self.scopes[agent], session.view
        g_max, s_max, r_max = self.pad
        gs, ss, rs = sc.gslice, sc.sslice, sc.rslice
        fits_w, fits_p = session.fits()
        server_free = np.add.reduceat(session.group_free, t.server_groups_start)
        free = session.group_free[gs]
        job_g = session.job_groups[gs]
        job_srv = np.add.reduceat(job_g, sc.server_starts)
        job_sock = np.add.reduceat(job_g, sc.socket_starts)[sc.group_socket]
        job_rack = np.add.reduceat(job_srv, sc.rack_starts)
        n_tasks = session.job.num_tasks
        off = t.link_offset
        links = v.link_jobs

        suffer, cause = session.cost_weights
        pg = v.group_pressure[gs]
        ps = v.socket_pressure[t.group_socket[gs]]
        pv = v.server_pressure[t.group_server[gs]]
        group_x = np.stack(
            [
                free / t.group_capacity[gs],
                free / 8.0,
                t.group_speed[gs],
                fits_w[gs],
                fits_p[gs],
                pg @ suffer[0] + ps @ suffer[1] + pv @ suffer[2],
                pg @ cause[0] + ps @ cause[1] + pv @ cause[2],
                np.log1p(links[gs]),
                job_g / n_tasks,
                job_sock / n_tasks,
            ],
            axis=1,
        )
        if self.resident_features:
            harm = session.harm_to_residents()[gs]
            group_x = np.concatenate([group_x, np.log1p(harm)[:, None]], axis=1)
        if self.hints:
            hint_g, agrees = session.hints(agent)
            group_x = np.concatenate([group_x, hint_g[:, gs].T], axis=1)
        sid = sc.servers
        srv_free = server_free[ss]
        server_x = np.stack(
            [
                srv_free / self.server_gpus[ss],
                session.cpu[ss] / t.server_cpu[ss],
                session.mem[ss] / t.server_memory_gb[ss],
                np.log1p(links[off[2] + sid]),
                np.log1p(links[off[1] + sid]),
                job_srv / n_tasks,
                t.server_gpu_speed[ss],
                t.server_gpus[ss] / 8.0,
                v.server_pressure[ss].sum(axis=1) / 5.0,
                t.server_nic_gbps[ss] / 100.0,
            ],
            axis=1,
        )
        rid = sc.racks
        rack_free = np.add.reduceat(srv_free, sc.rack_starts)
        need = max(session.workers_left, 1)
        rack_x = np.stack(
            [
                rack_free / np.maximum(self.rack_gpus[rs], 1),
                np.log1p(links[off[3] + rid]),
                job_rack / n_tasks,
                np.minimum(rack_free / need, 4.0) / 4.0,
                t.link_nominal_gbps[off[3] + rid] / 1000.0,
            ],
            axis=1,
        )
        g, s, r = len(sc.groups), len(sid), len(rid)
        return {
            "group_x": _pad2(group_x, g_max),
            "group_mask": _pad1(np.ones(g, np.float32), g_max),
            "group_server": _pad1(sc.group_server.astype(np.int64), g_max),
            "server_x": _pad2(server_x, s_max),
            "server_mask": _pad1(np.ones(s, np.float32), s_max),
            "server_rack": _pad1(sc.server_rack.astype(np.int64), s_max),
            "rack_x": _pad2(rack_x, r_max),
            "rack_mask": _pad1(np.ones(r, np.float32), r_max),
            "job_x": session.job_features(agent, agrees if self.hints else None),
            "peers_x": self._peers(session, agent, server_free),
            "peers_mask": np.ones(self.n_agents, np.float32),
            "action_mask": session.action_mask(agent),
        }

    def _peers(self, session, agent, server_free) -> np.ndarray:
        t, a = self.topology, self.n_agents
        free = session.group_free
        starts = self.scope_group_start
        scope_free = np.add.reduceat(free, starts)
        speed_free = np.add.reduceat(free * t.group_speed, starts)
        best = np.maximum.reduceat(server_free, self.scope_server_start)
        uplink = np.log1p(session.view.link_jobs[t.link_offset[4] :].astype(np.float64))
        if self.central:
            uplink = uplink.mean(keepdims=True)
        job = np.add.reduceat(session.job_groups, starts)
        is_self = np.zeros(a)
        is_self[agent] = 1.0
        visited = np.zeros(a)
        visited[list(session.visited)] = 1.0
        columns = [
            scope_free / self.scope_capacity,
            np.log1p(scope_free),
            speed_free / np.maximum(scope_free, 1),
            best / 8.0,
            uplink,
            job / session.job.num_tasks,
            is_self,
            session.scope_can_host(),
            visited,
        ]
        if self.hints:
            columns.append(session.one_server_scopes())
        columns.extend(session.global_shares())
        return np.stack(columns, axis=1).astype(np.float32)


OBS_KEYS = (
    "group_x",
    "group_mask",
    "group_server",
    "server_x",
    "server_mask",
    "server_rack",
    "rack_x",
    "rack_mask",
    "job_x",
    "peers_x",
    "peers_mask",
    "action_mask",
)


def feature_dims(space: gym.spaces.Dict) -> dict[str, int]:
    """``Fg, Fs, Fr, Fj, Fp``, the padded sizes ``G_max, S_max, R_max, A`` and the
    number of hints ``H`` (follow actions; the last ``H`` columns of ``group_x``)."""
    missing = [k for k in OBS_KEYS if k not in space.spaces]
    if missing:
        raise ValueError(f"observation space lacks {', '.join(missing)}")
    return {
        "Fg": int(space["group_x"].shape[-1]),
        "Fs": int(space["server_x"].shape[-1]),
        "Fr": int(space["rack_x"].shape[-1]),
        "Fj": int(space["job_x"].shape[-1]),
        "Fp": int(space["peers_x"].shape[-1]),
        "G_max": int(space["group_x"].shape[0]),
        "S_max": int(space["server_x"].shape[0]),
        "R_max": int(space["rack_x"].shape[0]),
        "A": int(space["peers_x"].shape[0]),
        "H": int(space["action_mask"].shape[0] - space["group_x"].shape[0])
        - int(space["peers_x"].shape[0]),
    }


def _pad1(a: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=a.dtype)
    out[: len(a)] = a
    return out


def _pad2(a: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, a.shape[1]), dtype=np.float32)
    out[: len(a)] = a
    return out


class PlacementSession:
    """The tentative placement of one job, task by task (a draft over a view).

    Args:
        builder: the observation builder of the topology.
        job: the job to place.
        view: the cluster when the job came up (not modified).
        home: the agent the job arrives at.
    """

    def __init__(self, builder: ObservationBuilder, job: Job, view: ClusterView, home: int):
        self.builder = builder
        self.job = job
        self.view = view
        spec = CATALOGUE[job.model]
        self.spec = spec
        w = view.perf.level_weights
        self.cost_weights = (w * spec.sensitivity, w * spec.pressure)
        self.group_free = np.asarray(view.group_free, dtype=np.float64).copy()
        self.cpu = np.array(view.server_cpu_free, dtype=np.float64)
        self.mem = np.array(view.server_mem_free, dtype=np.float64)
        self.job_groups = np.zeros(builder.topology.n_groups)
        self.workers: list[int] = []
        self.ps: list[int] = []
        self.agent = home
        self.visited = {home}
        self.hops = 0
        self._fits: tuple[np.ndarray, np.ndarray] | None = None
        self._hosts: np.ndarray | None = None
        self._rest: np.ndarray | None = None
        self._one: np.ndarray | None = None
        self._slots: np.ndarray | None = None
        self._fast: np.ndarray | None = None
        self._floor_lifted = False  # the speed floor left no legal action (this task)
        self._global: np.ndarray | None = None
        self._harm: dict[bool, np.ndarray] = {}  # task kind (is PS) -> per-group harm
        self._together: dict[int, tuple[np.ndarray, bool] | None] = {}  # per agent
        # per agent: the hints' plans and their per-group counts (fixed for the job);
        # the hint features and follow targets (until the next task is placed)
        self._plans: dict[int, list[Placement | None]] = {}
        self._plan_counts: dict[int, list[tuple[np.ndarray, np.ndarray] | None]] = {}
        self._hints: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._follow: dict[int, list[int | None]] = {}

    # ------------------------------------------------------------------ state

    @property
    def task(self) -> int:
        return len(self.workers) + len(self.ps)

    def harm_to_residents(self) -> np.ndarray:
        """Per GPU group (whole datacenter), the size-weighted slowdown the current
        task would add to the resident jobs near it
        (:func:`marl_sched.simulator.harm_to_residents`). The residents do not change
        while a job is placed, so one array per task kind."""
        ps = not self.is_worker
        if ps not in self._harm:
            self._harm[ps] = harm_to_residents(self.view, self.spec.pressure, ps=ps)
        return self._harm[ps]

    @property
    def is_worker(self) -> bool:
        return len(self.workers) < self.job.num_workers

    @property
    def workers_left(self) -> int:
        return self.job.num_workers - len(self.workers)

    @property
    def done(self) -> bool:
        return self.task >= self.job.num_tasks

    def fits(self) -> tuple[np.ndarray, np.ndarray]:
        """Per GPU group (global): can it take a worker / a PS now (0/1 floats)."""
        if self._fits is None:
            t, s = self.builder.topology, self.spec
            srv = t.group_server
            cpu_ok_w = self.cpu[srv] + 1e-9 >= s.cpu_worker
            cpu_ok_p = self.cpu[srv] + 1e-9 >= s.cpu_ps
            mem_ok = self.mem[srv] + 1e-9 >= s.mem_gb
            fw = (self.group_free > 0) & cpu_ok_w & mem_ok
            fp = cpu_ok_p & mem_ok
            self._fits = (fw.astype(np.float32), fp.astype(np.float32))
        return self._fits

    def _task_fits(self) -> np.ndarray:
        fw, fp = self.fits()
        return fw if self.is_worker else fp

    def scope_can_host(self) -> np.ndarray:
        """Per agent: does any of its groups have room for the current task (0/1)."""
        if self._hosts is None:
            b = self.builder
            hosts = np.maximum.reduceat(self._task_fits(), b.scope_group_start)
            self._hosts = (hosts > 0).astype(np.float32)
        return self._hosts

    def scope_can_host_rest(self) -> np.ndarray:
        """Per agent: can its scope alone host all of the job's remaining tasks (bool)."""
        if self._rest is None:
            b, s = self.builder, self.spec
            self._rest = scopes_can_host_rest(
                b.topology,
                b.scope_group_start,
                self.group_free,
                self.cpu,
                self.mem,
                (s.cpu_worker, s.cpu_ps, s.mem_gb),
                self.workers_left,
                self.job.num_ps - len(self.ps),
            )
        return self._rest

    def one_server_scopes(self) -> np.ndarray:
        """Per agent: can one server of its scope take all of the job's remaining workers
        (GPUs, cores and memory; bool)."""
        if self._one is None:
            self._one = self._scopes_with_one_server(self.worker_slots())
        return self._one

    def _scopes_with_one_server(self, slots: np.ndarray) -> np.ndarray:
        """Per agent: does one server of its scope have ``slots`` (per server, global)
        for all of the job's remaining workers (bool)."""
        best = np.maximum.reduceat(slots, self.builder.scope_server_start)
        return best >= max(self.workers_left, 1)

    def worker_slots(self) -> np.ndarray:
        """Per server (global): workers of this job it can take now (GPUs, cores and
        memory; :func:`envs.observations.server_worker_slots`), until the next task
        is placed."""
        if self._slots is None:
            s = self.spec
            self._slots = server_worker_slots(
                self.builder.topology, self.group_free, self.cpu, self.mem, s.cpu_worker, s.mem_gb
            )
        return self._slots

    def fast_servers(self) -> np.ndarray | None:
        """With ``builder.speed_floor``, for a worker: per server (global), do its GPUs
        clear the job's speed floor (module docstring); None when no floor applies."""
        b = self.builder
        if not b.speed_floor or not self.is_worker or self._floor_lifted:
            return None
        if self.job.gpu_work_s < b.speed_floor_min_work:
            return None
        if self._fast is None:
            t = b.topology
            speed, slots = t.server_gpu_speed, self.worker_slots()
            top = 0.0  # no type has room for the rest: no floor
            for v in np.unique(speed)[::-1]:  # fastest type first
                if slots[speed >= v].sum() >= self.workers_left:
                    top = float(v)
                    break
            if self.workers:
                top = min(top, float(speed[t.group_server[self.workers]].min()))
            self._fast = speed >= b.speed_floor * top - 1e-9
        return self._fast

    def must_consolidate(self, agent: int) -> np.ndarray | None:
        """With ``builder.consolidate``: the agents a multi-worker job's first task must
        be forwarded to — those whose scope has one server for all of its workers, when
        ``agent``'s has none — else None (no constraint). Under a speed floor only the
        servers that clear it count."""
        if not self.builder.consolidate or self.task > 0 or self.job.num_workers < 2:
            return None
        one = self.one_server_scopes()
        fast = self.fast_servers()
        if fast is not None:
            one = self._scopes_with_one_server(self.worker_slots() * fast)
        if one[agent]:
            return None
        targets = self.forward_targets(agent) & one
        return targets if targets.any() else None

    def together(self, agent: int) -> tuple[np.ndarray, bool] | None:
        """With ``builder.keep_together`` or ``builder.speed_floor``, for a worker:
        ``(servers, stay)`` — the servers (bool, global) ``agent`` may put it on, and
        whether it must stay in the scope (no forwarding); None when no rule applies
        (module docstring)."""
        b = self.builder
        fast = self.fast_servers()
        if not self.is_worker or (not b.keep_together and fast is None):
            return None
        if agent not in self._together:
            t, slots = b.topology, self.worker_slots()
            mine = (b.server_scope == agent) & (slots >= 1)
            rule = None
            if b.keep_together:
                fill = np.zeros(t.n_servers, dtype=bool)
                fill[t.group_server[self.workers]] = True
                fill &= mine  # these clear the floor: it is at most the job's slowest GPU
                whole = mine & (slots >= self.workers_left)
                if fast is not None:
                    whole &= fast
                rule = (fill, True) if fill.any() else (whole, False) if whole.any() else None
            if rule is None and fast is not None:
                rule = (mine & fast, False)  # may be empty: then forward
            self._together[agent] = rule
        return self._together[agent]

    def fast_scopes(self) -> np.ndarray | None:
        """Per agent: does its scope have a server with a worker slot that clears the
        speed floor; None when no floor applies."""
        fast = self.fast_servers()
        if fast is None:
            return None
        ok = (fast & (self.worker_slots() >= 1)).astype(np.float32)
        return np.maximum.reduceat(ok, self.builder.scope_server_start) > 0

    def forward_targets(self, agent: int) -> np.ndarray:
        """Per agent: may ``agent`` forward the current task there (forward when you
        must; :meth:`action_mask` narrows it with :meth:`must_consolidate`)."""
        allowed = np.ones(self.builder.n_agents, dtype=bool)
        allowed[list(self.visited)] = False
        return forward_targets(
            self.scope_can_host() > 0,
            self.scope_can_host_rest(),
            agent,
            allowed,
            whole=self.task == 0,
        )

    def plans(self, agent: int) -> list[Placement | None]:
        """Per hint heuristic: its placement of the job inside ``agent``'s scope (on the
        view the job arrived on), or None."""
        if agent not in self._plans:
            b = self.builder
            view = self.view if b.central else scope_view(b, self.view, agent)
            plans = [h.place(self.job, view) for h in b.hint_policies]
            n = b.topology.n_groups
            self._plans[agent] = plans
            self._plan_counts[agent] = [
                None
                if p is None
                else (
                    np.bincount(np.asarray(p.worker_groups, dtype=np.int64), minlength=n),
                    np.bincount(np.asarray(p.ps_groups, dtype=np.int64), minlength=n),
                )
                for p in plans
            ]
        return self._plans[agent]

    def global_shares(self) -> np.ndarray:
        """``(H_global, A)``: per global hint, the share of the job's tasks its
        placement in the whole datacenter puts in each agent's scope (0 if it cannot
        place the job); fixed for the job."""
        if self._global is None:
            b = self.builder
            out = np.zeros((len(b.global_policies), b.n_agents))
            for i, h in enumerate(b.global_policies):
                p = h.place(self.job, self.view)
                if p is not None:
                    groups = np.asarray([*p.worker_groups, *p.ps_groups], dtype=np.int64)
                    scopes = b.group_scope[groups]
                    out[i] = np.bincount(scopes, minlength=b.n_agents) / len(groups)
            self._global = out
        return self._global

    def follow_targets(self, agent: int) -> list[int | None]:
        """Per hint: the global group its follow action puts the current task on, or
        None when the action is not legal (module docstring)."""
        if not self.builder.hints:
            return []
        if agent not in self._follow:
            _, agrees = self.hints(agent)
            fits = self._task_fits()
            placed = self.workers if self.is_worker else self.ps
            out = []
            for plan, ok in zip(self.plans(agent), agrees, strict=True):
                target = None
                if plan is not None and ok:
                    todo = list(plan.worker_groups if self.is_worker else plan.ps_groups)
                    for g in placed:  # the plan's tasks already placed, in its order
                        todo.remove(g)
                    if todo and fits[todo[0]] > 0:
                        target = int(todo[0])
                out.append(target)
            self._follow[agent] = out
        return self._follow[agent]

    def hints(self, agent: int) -> tuple[np.ndarray, np.ndarray]:
        """``(H, n_groups)`` remaining planned tasks of the current kind per group (over
        the job's tasks of that kind) and ``(H,)`` does the job so far agree with each
        plan (module docstring)."""
        if agent in self._hints:
            return self._hints[agent]
        self.plans(agent)
        counts = self._plan_counts[agent]
        n = self.builder.topology.n_groups
        placed_w = np.bincount(np.asarray(self.workers, dtype=np.int64), minlength=n)
        placed_p = np.bincount(np.asarray(self.ps, dtype=np.int64), minlength=n)
        worker = self.is_worker
        total = self.job.num_workers if worker else max(self.job.num_ps, 1)
        left = np.zeros((len(counts), n))
        agrees = np.zeros(len(counts), dtype=np.float32)
        for i, plan in enumerate(counts):
            if plan is None:
                continue
            w, q = plan
            if np.all(placed_w <= w) and np.all(placed_p <= q):
                agrees[i] = 1.0
            left[i] = np.maximum((w - placed_w) if worker else (q - placed_p), 0) / total
        self._hints[agent] = (left, agrees)
        return left, agrees

    def feasible(self) -> bool:
        """Can the current task go anywhere?"""
        return bool(self._task_fits().any())

    def waits(self) -> bool:
        """With ``builder.wait_to_fit = c``, before the job's first task: does the job
        stay queued rather than split? Yes when it has 2 to a server's GPUs workers, no
        server can take all of them now, and it has waited less than ``c ×`` its
        isolated runtime (module docstring)."""
        b, job = self.builder, self.job
        if not b.wait_to_fit or self.task > 0 or job.num_workers < 2:
            return False
        if job.num_workers > b.topology.server_gpus.max():
            return False
        if self.worker_slots().max() >= job.num_workers:
            return False
        iso = b.perf.isolated_iteration_time(job.model, job.num_workers, job.num_ps)
        return self.view.now - job.submit_time < b.wait_to_fit * iso * job.iterations

    def action_mask(self, agent: int) -> np.ndarray:
        mask = self._action_mask(agent)
        if not mask.any() and self.fast_servers() is not None:
            self._floor_lifted = True  # the floor left nothing legal: lift it
            self._together = {}
            mask = self._action_mask(agent)
        return mask

    def _action_mask(self, agent: int) -> np.ndarray:
        b = self.builder
        g_max, a = b.pad[0], b.n_agents
        mask = np.zeros(g_max + a + len(b.hints), dtype=np.float32)
        must = self.must_consolidate(agent)
        if must is not None:  # forward only
            mask[g_max : g_max + a] = must
            return mask
        groups = b.scopes[agent].groups
        local = self._task_fits()[groups]
        servers, stay = self.together(agent) or (None, False)
        if servers is not None:
            local = local * servers[b.topology.group_server[groups]]
        mask[: len(local)] = local
        if not stay:
            forward = self.forward_targets(agent)
            fast = self.fast_scopes()
            if fast is not None:
                if fast[agent]:
                    forward = forward & fast
                else:  # no server here clears the floor: forward to any scope with one
                    forward = fast.copy()
                    forward[list(self.visited)] = False
            mask[g_max : g_max + a] = forward
        mask[g_max + a :] = [
            g is not None and (servers is None or servers[b.topology.group_server[g]])
            for g in self.follow_targets(agent)
        ]
        return mask

    def job_features(self, agent: int, agrees: np.ndarray | None = None) -> np.ndarray:
        job, s = self.job, self.spec
        n = job.num_tasks
        in_scope = self.job_groups[self.builder.scopes[agent].groups].sum() / n
        comm = min(2.0 * s.model_bytes / max(s.compute_s, 1e-6) / 1e10, 4.0)
        return np.concatenate(
            [
                [
                    math.log2(job.num_workers) / 6.0,
                    job.num_ps / 4.0,
                    float(self.is_worker),
                    self.task / n,
                    self.workers_left / job.num_workers,
                    min(s.compute_s, 4.0),
                    s.model_mb / 1000.0,
                    comm,
                    self.hops / max(self.builder.n_agents, 1),
                    in_scope,
                ],
                s.sensitivity,
                s.pressure,
                [math.log10(1.0 + job.work_s) / 7.0] * self.builder.job_length,
                agrees if agrees is not None else [],
            ]
        ).astype(np.float32)

    # ------------------------------------------------------------------ actions

    def act(self, action: int) -> None:
        """Apply the acting agent's action (local group slot or forward)."""
        b = self.builder
        g_max = b.pad[0]
        mask = self.action_mask(self.agent)
        if not (0 <= action < len(mask)) or mask[action] == 0:
            raise ValueError(f"agent {b.agent_ids[self.agent]}: action {action} is masked")
        if action >= g_max + b.n_agents:  # follow a hint's plan
            g = self.follow_targets(self.agent)[action - g_max - b.n_agents]
        elif action >= g_max:
            self.agent = action - g_max
            self.visited.add(self.agent)
            self.hops += 1
            return
        else:
            g = int(b.scopes[self.agent].groups[action])
        self._add(g)
        if b.ps_rule and self.job.num_ps and not self.ps and not self.is_worker:
            ps = ps_near_workers(self.job, self.view, self.workers)
            for p in ps or ():
                self._add(p)
        self.visited = {self.agent}
        self.hops = 0
        self._fits = None
        self._hosts = None
        self._rest = None
        self._one = None
        self._slots = None
        self._fast = None
        self._floor_lifted = False
        self._together = {}
        self._hints = {}
        self._follow = {}

    def _add(self, g: int) -> None:
        """Put the current task on global group ``g`` (the job's own accounting)."""
        t, s = self.builder.topology, self.spec
        srv = t.group_server[g]
        if self.is_worker:
            self.group_free[g] -= 1
            self.cpu[srv] -= s.cpu_worker
            self.workers.append(g)
        else:
            self.cpu[srv] -= s.cpu_ps
            self.ps.append(g)
        self.mem[srv] -= s.mem_gb
        self.job_groups[g] += 1

    def placement(self) -> Placement:
        return Placement(tuple(self.workers), tuple(self.ps))


def action_towards(builder: ObservationBuilder, agent: int, g: int) -> int:
    """``agent``'s action that brings a task closer to GPU group ``g``: the local slot
    of ``g`` when ``agent`` owns it, else forwarding straight to its owner."""
    owner = int(builder.group_scope[g])
    if owner != agent:
        return builder.pad[0] + owner
    return int(np.searchsorted(builder.scopes[owner].groups, g))


def follow_action(session: PlacementSession, plan: Placement) -> int | None:
    """The acting agent's follow action whose hint plans exactly ``plan`` (the first
    such hint), when it is legal; else None."""
    b = session.builder
    if not b.hints:
        return None
    key = placement_key(plan)
    targets = session.follow_targets(session.agent)
    for i, p in enumerate(session.plans(session.agent)):
        if p is not None and targets[i] is not None and placement_key(p) == key:
            return b.pad[0] + b.n_agents + i
    return None


def placement_steps(builder: ObservationBuilder, start: int, placement: Placement) -> list[int]:
    """The actions that place ``placement`` task by task, starting at agent ``start``:
    a task whose group lies in another scope is first forwarded straight to its owner."""
    steps, k = [], start
    for g in (*placement.worker_groups, *placement.ps_groups):
        owner = int(builder.group_scope[g])
        if owner != k:
            steps.append(action_towards(builder, k, g))
            k = owner
        steps.append(action_towards(builder, k, g))
    return steps


def follows_forward_rule(
    builder: ObservationBuilder, job: Job, view: ClusterView, home: int, placement: Placement
) -> bool:
    """Can ``placement`` be made through the masks (forward when you must) from ``home``?"""
    session = PlacementSession(builder, job, view, home)
    for action in placement_steps(builder, home, placement):
        if session.action_mask(session.agent)[action] == 0:
            return False
        session.act(action)
    return session.done


def scope_view(builder: ObservationBuilder, view: ClusterView, agent: int) -> ClusterView:
    """``view`` with every GPU, core and GB outside ``agent``'s scope marked in use, so
    a heuristic asked to place a job on it keeps the job inside that scope."""
    import dataclasses

    t = builder.topology
    gfree = np.where(builder.group_scope == agent, view.group_free, 0)
    inside = builder.server_scope == agent
    return dataclasses.replace(
        view,
        group_free=gfree.astype(np.asarray(view.group_free).dtype),
        server_cpu_free=np.where(inside, view.server_cpu_free, 0.0),
        server_mem_free=np.where(inside, view.server_mem_free, 0.0),
        free_gpus=int(gfree[: t.n_groups].sum()),
    )


def home_agent(job: Job, n_agents: int) -> int:
    """The agent a job arrives at: ``crc32(vc) mod A``, else ``job_id mod A``."""
    if n_agents == 1:
        return 0
    if job.vc:
        return zlib.crc32(job.vc.encode()) % n_agents
    return job.job_id % n_agents
