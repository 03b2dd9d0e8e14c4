"""Task-by-task placement of one job, with its own copy of free capacity (torch-free).

Each step picks a server for the next task; a worker takes a GPU of the server's group
with the most free GPUs (ties: lowest id); a PS sits on the group holding most of the
job's workers on that server, else its first group."""

from __future__ import annotations

import numpy as np

from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job, Placement
from marl_sched.simulator import ClusterView

WORKER, PS = 1, 0


class TaskDraft:
    """A job being placed task by task on a snapshot of the cluster.

    Args:
        job: the job to place.
        view: the simulator's read-only view at the decision.
        ps_first: every PS then every worker (MLFS), or workers first (Harmony).

    Attributes:
        group_free, cpu_free, mem_free: remaining capacity after the tasks so far.
        server_workers, server_ps: this job's tasks already on each server.
        tasks: the task kinds still to place, in order (``WORKER`` / ``PS``).
        speed: per server, the job's model's speed on its GPU type (V100 = 1).
    """

    def __init__(self, job: Job, view: ClusterView, ps_first: bool = False) -> None:
        topo = view.topology
        self.job = job
        self.view = view
        self.topo = topo
        spec = CATALOGUE[job.model]
        self.cpu_w, self.cpu_p, self.mem = spec.cpu_worker, spec.cpu_ps, spec.mem_gb
        self.speed = np.asarray(view.perf.type_speeds(spec), dtype=np.float64)[topo.server_type]
        self.set_group_free(view.group_free)
        self.cpu_free = np.array(view.server_cpu_free, dtype=np.float64)
        self.mem_free = np.array(view.server_mem_free, dtype=np.float64)
        self.server_workers = np.zeros(topo.n_servers, dtype=np.int64)
        self.server_ps = np.zeros(topo.n_servers, dtype=np.int64)
        self.workers: list[int] = []
        self.ps: list[int] = []
        self.anchor: int | None = None  # server of the job's first task
        self.allowed = np.ones(topo.n_servers, dtype=bool)  # servers a task may use
        order = [PS] * job.num_ps + [WORKER] * job.num_workers
        self.tasks = order if ps_first else order[::-1]

    # ------------------------------------------------------------------ state

    @property
    def done(self) -> bool:
        return not self.tasks

    @property
    def next_kind(self) -> int:
        return self.tasks[0]

    @property
    def remaining_workers(self) -> int:
        return self.job.num_workers - len(self.workers)

    @property
    def remaining_ps(self) -> int:
        return self.job.num_ps - len(self.ps)

    def mask(self, kind: int | None = None) -> np.ndarray:
        """Servers that can take one more task of ``kind`` (default: the next one)."""
        kind = self.next_kind if kind is None else kind
        eps = 1e-9
        ok = self.allowed & (
            (self.mem_free + eps >= self.mem) if self.mem > 0 else np.ones_like(self.cpu_free, bool)
        )
        if kind == WORKER:
            return ok & (self.cpu_free + eps >= self.cpu_w) & (self.server_free_gpus > 0)
        return ok & (self.cpu_free + eps >= self.cpu_p)

    def hops(self) -> np.ndarray:
        """Hierarchy distance of every server from the anchor (0 same server .. 3)."""
        topo = self.topo
        if self.anchor is None:
            return np.zeros(topo.n_servers)
        a = self.anchor
        return (
            (np.arange(topo.n_servers) != a).astype(np.float64)
            + (topo.server_rack != topo.server_rack[a])
            + (topo.server_subcluster != topo.server_subcluster[a])
        )

    def release(self, placement: Placement) -> None:
        """Give back the capacity ``placement`` (this job's, running) holds, as if it
        were not running (load control: where could the job go instead?)."""
        topo = self.topo
        for g in placement.worker_groups:
            s = int(topo.group_server[g])
            self.group_free[g] += 1
            self.server_free_gpus[s] += 1
            self.cpu_free[s] += self.cpu_w
            self.mem_free[s] += self.mem
        for g in placement.ps_groups:
            s = int(topo.group_server[g])
            self.cpu_free[s] += self.cpu_p
            self.mem_free[s] += self.mem

    def set_group_free(self, group_free: np.ndarray) -> None:
        """Set the free GPUs per group, and per server from them."""
        self.group_free = np.array(group_free, dtype=np.int64)
        self.server_free_gpus = np.bincount(
            self.topo.group_server, weights=self.group_free, minlength=self.topo.n_servers
        ).astype(np.int64)

    def forbid_groups(self, groups: np.ndarray) -> None:
        """Take the GPUs of the flagged groups (bool per group) out of the draft."""
        gone = np.where(groups, self.group_free, 0)
        self.group_free -= gone
        self.server_free_gpus -= np.bincount(
            self.topo.group_server, weights=gone, minlength=self.topo.n_servers
        ).astype(np.int64)

    # ------------------------------------------------------------------ actions

    def place_next(self, server: int) -> None:
        """Put the next task on ``server`` (which must be in :meth:`mask`)."""
        kind = self.tasks.pop(0)
        s = int(server)
        topo = self.topo
        a, n = int(topo.server_groups_start[s]), int(topo.server_n_groups[s])
        if kind == WORKER:
            room = self.group_free[a : a + n]
            g = a + int(np.argmax(room))
            if room.max() <= 0:
                raise ValueError(f"server {s} has no free GPU for a worker")
            self.group_free[g] -= 1
            self.server_free_gpus[s] -= 1
            self.cpu_free[s] -= self.cpu_w
            self.server_workers[s] += 1
            self.workers.append(g)
        else:
            mine = [g for g in self.workers if a <= g < a + n]
            g = max(set(mine), key=lambda x: (mine.count(x), -x)) if mine else a
            self.cpu_free[s] -= self.cpu_p
            self.server_ps[s] += 1
            self.ps.append(int(g))
        self.mem_free[s] -= self.mem
        if self.anchor is None:
            self.anchor = s

    def placement(self) -> Placement:
        if not self.done:
            raise ValueError(f"job {self.job.name}: {len(self.tasks)} tasks not placed")
        return Placement(tuple(self.workers), tuple(self.ps))


def place_greedy(draft: TaskDraft, choose) -> Placement | None:
    """Run ``choose(draft, mask) -> server`` for every task; ``None`` if one has no room."""
    while not draft.done:
        mask = draft.mask()
        if not mask.any():
            return None
        draft.place_next(choose(draft, mask))
    return draft.placement()
