"""MLF-RL, the learned half of MLFS (Wang, Liu, Shen, CoNEXT 2020): its networks and
policy (docs/baselines.md, "MLF-RL"). MLF-H is :mod:`agents.baselines.mlf_h`
(re-exported here); training is :mod:`agents.baselines.mlfs_train`.

The node network scores every server for the next task from :data:`FEATURES` (one
network shared by all servers; PS first, then workers). The order network
(:class:`MlfsOrderNet`, :meth:`MlfsRlPolicy.ordering`) scores each queued job from
:data:`ORDER_FEATURES`, highest served first. Load control is MLF-H's, with the node
network choosing the new servers."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from agents.baselines.checkpoint import (
    CheckpointPolicy,
    layout_signature,
    load_module_state,
    save_checkpoint,
)
from agents.baselines.draft import WORKER, TaskDraft
from agents.baselines.fast_mlp import FastMLP
from agents.baselines.load_control import Chooser
from agents.baselines.mlf_h import (
    OVERLOAD_THRESHOLD,
    MlfsPolicy,
    ideal_host_distance,
    server_load,
)
from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job
from marl_sched.ordering import OrderingContext, QueueOrdering, mlfs_priority_value
from marl_sched.simulator import ClusterView

KIND = "mlfs-rl"
LAYOUT_VERSION = 2
CHECKPOINT_FILE = "mlfs_rl.pt"
FEATURES = (
    "job_workers_here",
    "job_ps_here",
    "ideal_host_distance",
    "hops_to_first_task",
    "load",
    "overloaded",
    "free_gpu_frac",
    "free_cpu_frac",
    "free_mem_frac",
    "model_gpu_speed",
    "fits_remaining_workers",
    "task_is_worker",
    "pressure",
)


ORDER_FEATURES = ("mlfs_priority", "tasks", "waiting_h")


def order_features(job: Job, ctx: OrderingContext) -> np.ndarray:
    """(len(ORDER_FEATURES),) float32 of a queued job: MLF-H's priority (``nan``
    estimate = the most work), log2(tasks) / 10, log1p(waiting hours)."""
    work = ctx.est_iterations(job) * CATALOGUE[job.model].compute_s
    return np.array(
        [
            mlfs_priority_value(work, job.num_workers, job.num_ps),
            math.log2(job.num_tasks) / 10.0,
            math.log1p(max(0.0, ctx.now - job.submit_time) / 3600.0),
        ],
        dtype=np.float32,
    )


class LearnedOrdering(QueueOrdering):
    """The queue served by :class:`MlfsOrderNet`'s score, highest first, in numpy."""

    name = "mlfs-rl-order"
    dynamic = True

    def __init__(self, net: MlfsOrderNet) -> None:
        self._mlp = FastMLP(net.net)

    def score(self, x: np.ndarray) -> float:
        return float(self._mlp(x)[0])

    def key(self, job: Job, ctx: OrderingContext) -> tuple:
        return (-self.score(order_features(job, ctx)), job.submit_time, job.job_id)


def mlfs_features(draft: TaskDraft, load: np.ndarray, threshold: float) -> np.ndarray:
    """(n_servers, len(FEATURES)) float32 for the draft's next task."""
    topo, job = draft.topo, draft.job
    n = topo.n_servers
    cols = [
        draft.server_workers / max(job.num_workers, 1),
        draft.server_ps / max(job.num_ps, 1),
        ideal_host_distance(draft) / 3.0,
        draft.hops() / 3.0,
        load,
        (load > threshold).astype(np.float64),
        draft.server_free_gpus / np.maximum(topo.server_gpus, 1),
        draft.cpu_free / topo.server_cpu,
        draft.mem_free / topo.server_memory_gb,
        draft.speed,
        (draft.server_free_gpus >= draft.remaining_workers).astype(np.float64),
        np.full(n, float(draft.next_kind == WORKER)),
        np.log1p(np.maximum(draft.view.server_pressure, 0.0).sum(axis=1)) / 3.0,
    ]
    return np.stack(cols, axis=1).astype(np.float32)


class ScoreNet(nn.Module):
    """One small MLP scoring every item (server or queued job) with shared weights.

    Args:
        n_features: features per item.
        hidden: hidden width.

    Shapes:
        x (B, N, F), mask (B, N) bool → logits (B, N) with ``-inf`` where masked.
    """

    def __init__(self, n_features: int, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.net = nn.Sequential(
            nn.Linear(n_features, hidden),
            nn.Tanh(),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1).masked_fill(~mask, float("-inf"))


class MlfsNet(ScoreNet):
    """MLF-RL's node network: scores every server on ``FEATURES``."""

    def __init__(self, hidden: int = 32) -> None:
        super().__init__(len(FEATURES), hidden)


class MlfsOrderNet(ScoreNet):
    """MLF-RL's queue-ordering network: scores every queued job on ``ORDER_FEATURES``."""

    def __init__(self, hidden: int = 16) -> None:
        super().__init__(len(ORDER_FEATURES), hidden)


def mlfs_layout() -> dict[str, Any]:
    """The feature layout an MLF-RL checkpoint records and is checked against."""
    return layout_signature(LAYOUT_VERSION, {"node": FEATURES, "order": ORDER_FEATURES})


def save_mlfs(
    path: str | Path, net: MlfsNet, metadata: dict[str, Any], order_net: MlfsOrderNet | None = None
) -> None:
    order_net = order_net if order_net is not None else MlfsOrderNet()
    meta = {**metadata, "layout": mlfs_layout(), "hidden": net.hidden,
            "order_hidden": order_net.hidden}  # fmt: skip
    state = {"policy": net.state_dict(), "order": order_net.state_dict()}
    save_checkpoint(path, KIND, LAYOUT_VERSION, state, meta)


class MlfsRlPolicy(CheckpointPolicy, MlfsPolicy):
    """MLF-RL: the node network places tasks greedily, the order network orders the
    queue, MLF-H's load control migrates jobs (:meth:`rebalance`).

    Args: those of :class:`~agents.baselines.checkpoint.CheckpointPolicy`, and
        overload_threshold: the ``overloaded`` feature's threshold (a checkpoint's wins).
        order_net: the order network to use with ``net`` (training, tests).
        load_control: migrate jobs off overloaded servers.
    """

    name = "mlfs-rl"
    description = "MLFS's RL scheduler: REINFORCE node network warm-started on MLF-H"
    checkpoint_file = CHECKPOINT_FILE
    kind = KIND
    layout_version = LAYOUT_VERSION
    net_class = MlfsNet
    state_key = "policy"

    def __init__(
        self,
        checkpoint: str | Path | None = None,
        overload_threshold: float = OVERLOAD_THRESHOLD,
        net: MlfsNet | None = None,
        order_net: MlfsOrderNet | None = None,
        load_control: bool = True,
    ) -> None:
        CheckpointPolicy.__init__(self, checkpoint, net)
        MlfsPolicy.__init__(self, load_control)
        self.overload_threshold = float(self.metadata.get("overload_threshold", overload_threshold))
        self.order_net = order_net
        if self.path is not None:
            hidden = self.metadata.get("order_hidden", 16)
            self.order_net = MlfsOrderNet(hidden if isinstance(hidden, int) else 16)
            load_module_state(self.path, self.order_net, self.state.get("order"), "order")
            self.order_net.eval()

    @classmethod
    def layout(cls) -> dict[str, Any]:
        return mlfs_layout()

    def ordering(self) -> QueueOrdering | None:
        """The order network's ordering (MLF-H's priority when there is none)."""
        if self.order_net is None:
            return super().ordering()
        return LearnedOrdering(self.order_net)

    def reset(self, topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        self._mlp = None

    def chooser(self, view: ClusterView) -> Chooser:
        load = server_load(view)
        if getattr(self, "_mlp", None) is None:  # the weights are fixed while acting
            self._mlp = FastMLP(self.net.net)
        mlp = self._mlp

        def choose(d: TaskDraft, mask: np.ndarray) -> int:
            score = mlp(mlfs_features(d, load, self.overload_threshold))[:, 0]
            return int(np.argmax(np.where(mask, score, -np.inf)))

        return choose
