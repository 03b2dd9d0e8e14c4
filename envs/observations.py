"""Observations of ``ClusterPlacement-v1``: scopes, feature layout, spaces.

:class:`ObservationBuilder` holds the topology's scopes (one per agent), the
environment's options (:class:`envs.config.EnvConfig`) and the spaces; its
:meth:`~ObservationBuilder.observe` turns a :class:`envs.session.PlacementSession`
into one agent's observation. Every array it returns is freshly allocated (what is
the same in every observation of an agent is computed once per topology and copied). The layout
(every key, shape and unit) is documented in :mod:`envs.cluster_env`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import gymnasium as gym
import numpy as np

from envs.config import MIGRATION_OFFERS, MIGRATION_WHERE, EnvConfig
from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job
from marl_sched.perf import PerformanceModel
from marl_sched.simulator import ClusterView
from marl_sched.topology import Topology


class SessionState(Protocol):
    """What an observation reads of an open placement session (an
    :class:`envs.session.PlacementSession` is one); a protocol, so that this module
    imports nothing of the session built on it."""

    job: Job
    view: ClusterView
    group_free: np.ndarray
    job_groups: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    visited: set[int]
    cost_weights: tuple[np.ndarray, np.ndarray]

    @property
    def workers_left(self) -> int: ...
    def fits(self) -> tuple[np.ndarray, np.ndarray]: ...
    def harm_to_residents(self) -> np.ndarray: ...
    def hints(self, agent: int) -> tuple[np.ndarray, np.ndarray]: ...
    def global_shares(self) -> np.ndarray: ...
    def scope_can_host(self) -> np.ndarray: ...
    def one_server_scopes(self) -> np.ndarray: ...
    def job_features(self, agent: int, agrees: np.ndarray | None = None) -> np.ndarray: ...
    def action_mask(self, agent: int) -> np.ndarray: ...


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


#: the columns ``env.migration: on`` adds (:mod:`envs.cluster_env`, "Migration")
MIGRATION_FEATURES = {
    "group_x": ("log_resident_slowdown", "resident_attained", "mover_workers_here"),
    "server_x": ("log_server_slowdown",),
    "job_x": ("is_move", "log_slowdown", "attained", "moves"),
}
#: the job columns ``migration_offer: remaining`` adds (after the migration ones): the
#: offer's estimated net saving over its remaining run (clipped to [-1, 1]) and
#: ``log10(1 + estimated remaining work s) / 7`` (0 for an arriving job)
UPGRADE_FEATURES = ("upgrade_gain", "log10_remaining_s/7")


def feature_names(
    hints: tuple[str, ...] = (),
    global_hints: tuple[str, ...] = (),
    residents: bool = False,
    job_length: bool = False,
    migration: bool = False,
    model_speed: bool = False,
    upgrade: bool = False,
) -> dict[str, tuple[str, ...]]:
    """:data:`FEATURES` with the columns of heuristic hints ``hints`` and
    ``global_hints`` appended, with ``residents`` the ``harm_to_residents`` group
    column, with ``job_length`` the ``log10_work_s/7`` job column and with
    ``migration`` the :data:`MIGRATION_FEATURES` (before the hints' columns, which
    stay last); with ``model_speed`` the speed columns renamed for the job's model's
    speed; with ``upgrade`` (``migration_offer: remaining``) the
    :data:`UPGRADE_FEATURES` after the migration job columns."""
    out = dict(FEATURES)
    if model_speed:
        rename = {"gpu_speed": "model_speed", "free_gpu_speed": "free_model_speed"}
        out = {k: tuple(rename.get(c, c) for c in v) for k, v in out.items()}
    mig = {k: v if migration else () for k, v in MIGRATION_FEATURES.items()}
    out["group_x"] = out["group_x"] + ("harm_to_residents",) * residents + mig["group_x"]
    out["group_x"] = out["group_x"] + tuple(f"hint_{h}" for h in hints)
    out["server_x"] = out["server_x"] + mig["server_x"]
    out["job_x"] = out["job_x"] + ("log10_work_s/7",) * job_length + mig["job_x"]
    out["job_x"] = out["job_x"] + (UPGRADE_FEATURES if migration and upgrade else ())
    out["job_x"] = out["job_x"] + tuple(f"hint_{h}_agrees" for h in hints)
    if hints:
        # the hints' counterpart for moving the job: can one server of that scope
        # take all of the job's remaining workers (a plan elsewhere that does not split)
        out["peers_x"] = out["peers_x"] + ("rest_on_one_server",)
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
        env: the environment's options (:class:`envs.config.EnvConfig`; None = its
            defaults): its decision options (:data:`envs.config.DECISION_OPTIONS`, each
            documented there) and ``pad``, ``(G_max, S_max, R_max)`` (empty = the
            largest scope's sizes). Its episode options and reward are not read.
    """

    def __init__(
        self, topology: Topology, perf: PerformanceModel, env: EnvConfig | None = None
    ) -> None:
        from marl_sched.policies.heuristics import PLAN_HINTS, hint_names, make_hint

        env = EnvConfig() if env is None else env
        t = self.topology = topology
        self.perf = perf
        self.central = central = bool(env.central)
        for key in ("hints", "global_hints"):
            unknown = [h for h in getattr(env, key) if h not in hint_names()]
            if unknown:
                raise ValueError(f"{key}: {', '.join(unknown)} is not a heuristic or hint variant")
        self.hints = tuple(env.hints)
        self.global_hints = tuple(env.global_hints)
        self.consolidate = bool(env.consolidate)
        self.resident_features = bool(env.resident_features)
        self.keep_together = bool(env.keep_together)
        self.job_length = bool(env.job_length)
        self.model_speed = bool(env.model_speed)
        self._model_speeds: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # model -> speeds
        if not 0.0 <= env.speed_floor <= 1.0:
            raise ValueError(f"speed_floor must be in [0, 1], got {env.speed_floor}")
        self.speed_floor = float(env.speed_floor)
        self.ps_rule = bool(env.ps_rule)
        self.speed_floor_min_work = float(env.speed_floor_min_work)
        if env.wait_to_fit < 0:
            raise ValueError(f"wait_to_fit must be >= 0, got {env.wait_to_fit}")
        self.wait_to_fit = float(env.wait_to_fit)
        if env.forward_rule not in ("must", "free"):
            raise ValueError(f"forward_rule must be 'must' or 'free', got {env.forward_rule!r}")
        self.forward_rule = env.forward_rule
        self.migration = bool(env.migration)
        cadence = (env.migration_tick_s, env.migration_max_moves, env.migration_min_interval_s)
        if min(cadence) < 0:
            raise ValueError(
                "migration_tick_s, migration_max_moves, migration_min_interval_s: >= 0"
            )
        self.migration_tick_s = float(env.migration_tick_s)
        self.migration_max_moves = int(env.migration_max_moves)
        self.migration_min_interval_s = float(env.migration_min_interval_s)
        if env.migration_offer not in MIGRATION_OFFERS:
            raise ValueError(f"migration_offer must be one of {', '.join(MIGRATION_OFFERS)}, "
                             f"got {env.migration_offer!r}")  # fmt: skip
        self.migration_offer = env.migration_offer
        if env.migration_where not in MIGRATION_WHERE or (
            env.migration_where == "rule" and env.migration_offer != "remaining"
        ):
            raise ValueError(f"migration_where must be one of {', '.join(MIGRATION_WHERE)} "
                             f"('rule' with migration_offer 'remaining'), "
                             f"got {env.migration_where!r}")  # fmt: skip
        self.migration_where = env.migration_where
        self.upgrade_features = self.migration and env.migration_offer == "remaining"
        self.hint_policies = [make_hint(h) for h in self.hints]
        # per hint: is it a plan hint (one datacenter-wide plan for every agent)? Then
        # the policies asked per scope, and the plan hints' (asked once per job)
        self.plan_hints = tuple(h in PLAN_HINTS for h in self.hints)
        pairs = list(zip(self.hint_policies, self.plan_hints, strict=True))
        self.scoped_hint_policies = [h for h, whole in pairs if not whole]
        self.plan_hint_policies = [h for h, whole in pairs if whole]
        self.global_policies = [make_hint(h) for h in self.global_hints]
        for h in (*self.hint_policies, *self.global_policies):
            h.reset(topology, 0)
        self.features = feature_names(
            self.hints, self.global_hints, self.resident_features, self.job_length,
            self.migration, self.model_speed, self.upgrade_features,
        )  # fmt: skip
        if central:
            self.scopes = [_scope(t, np.arange(t.n_groups))]
            self.group_scope = np.zeros(t.n_groups, dtype=np.int64)
        else:
            self.scopes = [_scope(t, t.subcluster_groups(i)) for i in range(t.n_subclusters)]
            self.group_scope = t.group_subcluster.astype(np.int64)
        self.agent_ids = ["central"] if central else [f"sc{k}" for k in range(len(self.scopes))]
        self.n_agents = len(self.scopes)
        sizes = np.array([(len(s.groups), len(s.servers), len(s.racks)) for s in self.scopes])
        need = tuple(int(x) for x in sizes.max(axis=0))
        self.pad = tuple(env.pad) or need
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
        self._static: dict[int, dict[str, np.ndarray]] = {}  # per agent (_scope_static)
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

    def noop_mask(self, agent: int) -> np.ndarray:
        """The action mask of ``agent`` when it decides nothing: only its no-op slot
        (forward to itself, ``G_max + agent``)."""
        mask = np.zeros(self.action_space.n, dtype=np.float32)
        mask[self.pad[0] + agent] = 1.0
        return mask

    def observe(self, session: SessionState, agent: int) -> dict[str, np.ndarray]:
        """The observation of ``agent`` (a scope index) while ``session`` is open."""
        t, sc, v = self.topology, self.scopes[agent], session.view
        st = self._scope_static(agent)
        gs, ss = sc.gslice, sc.sslice
        g, s, r = len(sc.groups), len(sc.servers), len(sc.racks)
        fits_w, fits_p = session.fits()
        server_free = np.add.reduceat(session.group_free, t.server_groups_start)
        free = session.group_free[gs]
        job_g = session.job_groups[gs]
        job_srv = np.add.reduceat(job_g, sc.server_starts)
        job_sock = np.add.reduceat(job_g, sc.socket_starts)[sc.group_socket]
        job_rack = np.add.reduceat(job_srv, sc.rack_starts)
        n_tasks = session.job.num_tasks
        links = v.link_jobs

        speed, server_speed = self.speeds(session.job)
        suffer, cause = session.cost_weights
        pg = v.group_pressure[gs]
        ps = v.socket_pressure[st["group_socket"]]
        pv = v.server_pressure[st["group_server"]]
        # every column is computed in float64 as before and rounded once, into the
        # padded float32 array the observation returns
        group_x = np.zeros((self.pad[0], len(self.features["group_x"])), np.float32)
        gx = group_x[:g]
        gx[:, 0] = free / t.group_capacity[gs]
        gx[:, 1] = free / 8.0
        gx[:, 2] = speed[gs]
        gx[:, 3] = fits_w[gs]
        gx[:, 4] = fits_p[gs]
        gx[:, 5] = pg @ suffer[0] + ps @ suffer[1] + pv @ suffer[2]
        gx[:, 6] = pg @ cause[0] + ps @ cause[1] + pv @ cause[2]
        gx[:, 7] = np.log1p(links[gs])
        gx[:, 8] = job_g / n_tasks
        gx[:, 9] = job_sock / n_tasks
        col = 10
        if self.resident_features:
            gx[:, col] = np.log1p(session.harm_to_residents()[gs])
            col += 1
        if self.migration:
            slow, attained, srv_slow = session.resident_state()
            gx[:, col] = slow[gs]
            gx[:, col + 1] = attained[gs]
            gx[:, col + 2] = session.mover_groups()[gs]
            col += 3
        if self.hints:
            hint_g, agrees = session.hints(agent)
            gx[:, col:] = hint_g[:, gs].T
        srv_free = server_free[ss]
        server_x = np.zeros((self.pad[1], len(self.features["server_x"])), np.float32)
        sx = server_x[:s]
        sx[:, 0] = srv_free / self.server_gpus[ss]
        sx[:, 1] = session.cpu[ss] / t.server_cpu[ss]
        sx[:, 2] = session.mem[ss] / t.server_memory_gb[ss]
        sx[:, 3] = np.log1p(links[st["nic_links"]])
        sx[:, 4] = np.log1p(links[st["qpi_links"]])
        sx[:, 5] = job_srv / n_tasks
        sx[:, 6] = server_speed[ss]
        sx[:, 7:8] = st["server_gpus/8"]
        sx[:, 8] = v.server_pressure[ss].sum(axis=1) / 5.0
        sx[:, 9:10] = st["nic_gbps/100"]
        if self.migration:
            sx[:, 10] = srv_slow[ss]
        rack_free = np.add.reduceat(srv_free, sc.rack_starts)
        need = max(session.workers_left, 1)
        rack_x = np.zeros((self.pad[2], len(self.features["rack_x"])), np.float32)
        rx = rack_x[:r]
        rx[:, 0] = rack_free / st["rack_gpus"]
        rx[:, 1] = np.log1p(links[st["uplink_links"]])
        rx[:, 2] = job_rack / n_tasks
        rx[:, 3] = np.minimum(rack_free / need, 4.0) / 4.0
        rx[:, 4:5] = st["uplink_gbps/1000"]
        return {
            "group_x": group_x,
            "group_mask": st["group_mask"].copy(),
            "group_server": st["group_server_local"].copy(),
            "server_x": server_x,
            "server_mask": st["server_mask"].copy(),
            "server_rack": st["server_rack_local"].copy(),
            "rack_x": rack_x,
            "rack_mask": st["rack_mask"].copy(),
            "job_x": session.job_features(agent, agrees if self.hints else None),
            "peers_x": self._peers(session, agent, server_free),
            "peers_mask": np.ones(self.n_agents, np.float32),
            "action_mask": session.action_mask(agent),
        }

    def _scope_static(self, agent: int) -> dict[str, np.ndarray]:
        """What ``agent``'s observations share on this topology (computed once): its
        padded hierarchy indices and masks (copied into each observation), its global
        entity ids and link ids, and its constant columns."""
        got = self._static.get(agent)
        if got is None:
            t, sc = self.topology, self.scopes[agent]
            g_max, s_max, r_max = self.pad
            g, s, r = len(sc.groups), len(sc.servers), len(sc.racks)
            off, sid, rid = t.link_offset, sc.servers, sc.racks
            got = {
                "group_mask": _pad1(np.ones(g, np.float32), g_max),
                "group_server_local": _pad1(sc.group_server.astype(np.int64), g_max),
                "server_mask": _pad1(np.ones(s, np.float32), s_max),
                "server_rack_local": _pad1(sc.server_rack.astype(np.int64), s_max),
                "rack_mask": _pad1(np.ones(r, np.float32), r_max),
                "group_socket": t.group_socket[sc.gslice],
                "group_server": t.group_server[sc.gslice],
                "nic_links": off[2] + sid,
                "qpi_links": off[1] + sid,
                "uplink_links": off[3] + rid,
                "server_gpus/8": (t.server_gpus[sc.sslice] / 8.0)[:, None],
                "nic_gbps/100": (t.server_nic_gbps[sc.sslice] / 100.0)[:, None],
                "rack_gpus": np.maximum(self.rack_gpus[sc.rslice], 1),
                "uplink_gbps/1000": (t.link_nominal_gbps[off[3] + rid] / 1000.0)[:, None],
            }
            for a in got.values():
                a.setflags(write=False)
            self._static[agent] = got
        return got

    def speeds(self, job) -> tuple[np.ndarray, np.ndarray]:
        """Per GPU group and per server, the speed the observation shows: ``job``'s
        model's there with ``model_speed``, else the GPU type's catalogue-wide figure."""
        t = self.topology
        if not self.model_speed:
            return t.group_speed, t.server_gpu_speed
        got = self._model_speeds.get(job.model)
        if got is None:
            spec = CATALOGUE[job.model]
            got = self.perf.group_speed_for(spec), self.perf.type_speeds(spec)[t.server_type]
            self._model_speeds[job.model] = got
        return got

    def _peers(self, session, agent, server_free) -> np.ndarray:
        t, a = self.topology, self.n_agents
        free = session.group_free
        starts = self.scope_group_start
        scope_free = np.add.reduceat(free, starts)
        speed_free = np.add.reduceat(free * self.speeds(session.job)[0], starts)
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
