"""Harmony's reward-prediction network: co-location → training speed.

Fitted on historical samples: the heuristics' runs over the training windows, one
sample per job (and per running job whose neighbourhood changed) each time a job
starts, labelled ``ln(isolated iteration time / iteration time)`` ≤ 0. Features:
:func:`colocation_features` (``N_FEATURES`` values)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from marl_sched.catalogue import CATALOGUE, MODEL_NAMES
from marl_sched.jobs import Job
from marl_sched.perf import JobLayout
from marl_sched.policies.base import Policy
from marl_sched.simulator import Simulator
from marl_sched.topology import Topology

N_FEATURES = len(MODEL_NAMES) + 2 + 4 + 1 + 1 + 15 + 5


def colocation_features(
    job: Job,
    layout: JobLayout,
    ps_groups: Sequence[int],
    topo: Topology,
    group_pressure: np.ndarray,
    socket_pressure: np.ndarray,
    server_pressure: np.ndarray,
    link_jobs: np.ndarray,
) -> np.ndarray:
    """Features of ``job`` placed as ``layout``; the arrays include the job's own tasks."""
    spec = CATALOGUE[job.model]
    out = np.zeros(N_FEATURES, dtype=np.float32)
    out[spec.index] = 1.0
    i = len(MODEL_NAMES)
    racks = np.unique(topo.server_rack[layout.servers])
    ps_servers = (
        set(topo.group_server[np.asarray(ps_groups, dtype=np.int64)].tolist())
        if job.num_ps
        else set()
    )
    on_ps = (
        sum(
            int(c)
            for s, c in zip(layout.worker_servers, layout.group_workers, strict=True)
            if s in ps_servers
        )
        / job.num_workers
        if job.num_ps
        else 1.0
    )
    out[i : i + 8] = (
        np.log2(job.num_workers) / 5.0,
        job.num_ps / 4.0,
        np.log2(len(np.unique(layout.worker_servers))) / 4.0,
        np.log2(len(layout.servers)) / 4.0,
        (len(racks) - 1) / 3.0,
        (len(np.unique(topo.rack_subcluster[racks])) - 1) / 3.0,
        on_ps,
        layout.speed / topo.server_gpu_speed.max(),
    )
    i += 8
    others = (
        group_pressure[layout.groups] - layout.group_press,
        socket_pressure[layout.worker_sockets] - layout.own_socket_press,
        server_pressure[layout.worker_servers] - layout.own_server_press,
    )
    for p in others:
        out[i : i + 5] = np.log1p(np.maximum(p.max(axis=0), 0.0))
        i += 5
    if len(layout.link_ids):
        kinds = topo.link_kind[layout.link_ids]
        counts = link_jobs[layout.link_ids]
        for k in range(5):
            sel = counts[kinds == k]
            out[i + k] = np.log1p(sel.max()) if len(sel) else 0.0
    return out


def neighbours(sim: Simulator, layout: JobLayout, exclude: int | None = None) -> list[int]:
    """Running jobs that share a server or a link with ``layout``, in start order."""
    near = sim.jobs_near(layout) - {exclude}
    return [jid for jid in sim.running if jid in near]


def running_features(sim: Simulator, job_ids: Iterable[int]) -> np.ndarray:
    """Co-location features of running jobs in the simulator's current state."""
    rows = []
    for jid in job_ids:
        run = sim.running[jid]
        rows.append(
            colocation_features(
                run.job,
                run.layout,
                run.placement.ps_groups,
                sim.topology,
                sim.group_pressure,
                sim.socket_pressure,
                sim.server_pressure,
                sim.link_jobs,
            )
        )
    return np.stack(rows) if rows else np.zeros((0, N_FEATURES), dtype=np.float32)


def running_labels(sim: Simulator, job_ids: Iterable[int]) -> np.ndarray:
    """Measured ``ln(isolated / current iteration time)`` of running jobs."""
    return np.array(
        [np.log(sim.running[j].isolated_iter_time / sim.running[j].iter_time) for j in job_ids],
        dtype=np.float32,
    )


def collect_samples(
    topo: Topology,
    perf,
    windows: Sequence[Sequence[Job]],
    policies: Sequence[Policy],
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Historical (features, ln speed) samples from heuristic runs over ``windows``."""
    xs, ys = [], []
    for w, jobs in enumerate(windows):
        for p, policy in enumerate(policies):
            policy.reset(topo, seed + 31 * w + p)
            sim = Simulator(topo, jobs, perf=perf)
            while (job := sim.next_decision()) is not None:
                placement = policy.place(job, sim.view())
                if not sim.apply(placement):
                    continue
                layout = sim.running[job.job_id].layout
                ids = [job.job_id, *neighbours(sim, layout, exclude=job.job_id)]
                xs.append(running_features(sim, ids))
                ys.append(running_labels(sim, ids))
    return np.concatenate(xs), np.concatenate(ys)


class RewardNet(nn.Module):
    """``ln speed = MLP((x − mean) / std)``, clamped to ≤ 0 at use.

    Shapes: (n, N_FEATURES) → (n,).
    """

    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.hidden = hidden
        self.net = nn.Sequential(
            nn.Linear(N_FEATURES, hidden),
            nn.SiLU(),
            nn.Linear(hidden, hidden),
            nn.SiLU(),
            nn.Linear(hidden, 1),
        )
        self.register_buffer("x_mean", torch.zeros(N_FEATURES))
        self.register_buffer("x_std", torch.ones(N_FEATURES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.x_mean) / self.x_std)[:, 0]

    @torch.no_grad()
    def speed(self, x: np.ndarray) -> np.ndarray:
        """Predicted normalised speed in (0, 1] of each row of ``x``."""
        if len(x) == 0:
            return np.zeros(0)
        return np.exp(np.minimum(self(torch.from_numpy(x)).numpy(), 0.0)).astype(np.float64)


@dataclass
class RewardFit:
    net: RewardNet
    samples: int
    train_mre: float
    val_mre: float


def fit_reward_model(
    x: np.ndarray,
    y: np.ndarray,
    hidden: int = 64,
    epochs: int = 300,
    lr: float = 3e-3,
    seed: int = 0,
    val_fraction: float = 0.2,
) -> RewardFit:
    """Fit on a seeded split; MRE = mean |ŝ − s| / s on normalised speeds."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    order = rng.permutation(len(x))
    n_val = int(len(x) * val_fraction)
    val, train = order[:n_val], order[n_val:]
    net = RewardNet(hidden)
    std = x[train].std(axis=0)
    net.x_mean.copy_(torch.from_numpy(x[train].mean(axis=0)))
    net.x_std.copy_(torch.from_numpy(np.where(std > 1e-6, std, 1.0).astype(np.float32)))
    xt, yt = torch.from_numpy(x[train]), torch.from_numpy(y[train])
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    batch = 512
    for _ in range(epochs):
        perm = torch.from_numpy(rng.permutation(len(train)))
        for k in range(0, len(train), batch):
            idx = perm[k : k + batch]
            loss = ((net(xt[idx]) - yt[idx]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    def mre(rows: np.ndarray) -> float:
        if len(rows) == 0:
            return float("nan")
        s, s_hat = np.exp(y[rows]), net.speed(x[rows])
        return float(np.mean(np.abs(s_hat - s) / s))

    net.eval()
    return RewardFit(net=net, samples=len(x), train_mre=mre(train), val_mre=mre(val))
