"""MLFS (Wang, Liu, Shen, CoNEXT 2020): MLF-H and the MLF-RL policy-gradient scheduler.

MLFS runs its heuristic MLF-H first, trains a deep-RL model on the heuristic's
decisions, and switches to the RL model (MLF-RL) once it is trained. MLF-H lives in
the torch-free :mod:`agents.baselines.mlf_h` (re-exported here); this module is
MLF-RL's network and policy, and :mod:`agents.baselines.mlfs_train` its training
(behaviour cloning on MLF-H, then REINFORCE with a baseline on a multi-part reward).

MLF-RL's node network scores every server for the next task (the authors' state per
node is the job's tasks already on it and its distance to the ideal host; we add the
rest of what MLF-H looks at and the node's status):
``FEATURES`` = this job's workers and PSs already there, the ideal-host distance, the
hop distance to the job's first task, the load before the job and whether it is over
the threshold, free GPU / CPU / memory fractions, relative GPU speed, whether it can
still take all remaining workers, the kind of task, and the residents' summed pressure.
One network shared by all servers (so any server count works); tasks go PS first,
then workers, as in MLF-H. The job order is the simulator's (see
:func:`agents.baselines.mlf_h.mlfs_priority` for MLF-H's priority as an ordering);
MLFS's second, queue-ordering network has nothing to choose here, since the simulator
offers one job at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from agents.baselines.checkpoint import CheckpointPolicy, save_checkpoint
from agents.baselines.draft import WORKER, TaskDraft, place_greedy
from agents.baselines.mlf_h import (
    OVERLOAD_THRESHOLD,
    MlfHPolicy,
    ideal_host_distance,
    mlfs_priority,
    mlfs_priority_key,
    server_load,
)
from marl_sched.jobs import Job, Placement
from marl_sched.simulator import ClusterView

__all__ = [
    "FEATURES",
    "MlfHPolicy",
    "MlfsNet",
    "MlfsRlPolicy",
    "mlfs_features",
    "mlfs_priority",
    "mlfs_priority_key",
]

KIND = "mlfs-rl"
LAYOUT_VERSION = 1
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
    "gpu_speed",
    "fits_remaining_workers",
    "task_is_worker",
    "pressure",
)


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
        topo.server_gpu_speed / topo.server_gpu_speed.max(),
        (draft.server_free_gpus >= draft.remaining_workers).astype(np.float64),
        np.full(n, float(draft.next_kind == WORKER)),
        np.log1p(np.maximum(draft.view.server_pressure, 0.0).sum(axis=1)) / 3.0,
    ]
    return np.stack(cols, axis=1).astype(np.float32)


class MlfsNet(nn.Module):
    """MLF-RL's node network: one small MLP scores every server.

    Args:
        hidden: hidden width.

    Shapes:
        x (B, S, F), mask (B, S) bool → logits (B, S) with ``-inf`` where masked.
    """

    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.hidden = hidden
        self.net = nn.Sequential(
            nn.Linear(len(FEATURES), hidden),
            nn.Tanh(),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1).masked_fill(~mask, float("-inf"))


def save_mlfs(path: str | Path, net: MlfsNet, metadata: dict[str, Any]) -> None:
    save_checkpoint(
        path, KIND, LAYOUT_VERSION, {"policy": net.state_dict()}, {**metadata, "hidden": net.hidden}
    )


class MlfsRlPolicy(CheckpointPolicy):
    """MLF-RL's trained node network, acting greedily.

    Args: those of :class:`~agents.baselines.checkpoint.CheckpointPolicy`
    (``checkpoint``: an ``mlfs_rl.pt`` file or a folder holding one), and
        overload_threshold: the load-control threshold of the ``overloaded`` feature
            (a loaded checkpoint's own threshold takes precedence).
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
        strict_topology: bool = True,
        overload_threshold: float = OVERLOAD_THRESHOLD,
        net: MlfsNet | None = None,
    ) -> None:
        super().__init__(checkpoint, strict_topology, net)
        self.overload_threshold = float(self.metadata.get("overload_threshold", overload_threshold))
        if self.path is not None:
            self.net.eval()

    @torch.no_grad()
    def place(self, job: Job, view: ClusterView) -> Placement | None:
        load = server_load(view)
        draft = TaskDraft(job, view, ps_first=True)

        def choose(d: TaskDraft, mask: np.ndarray) -> int:
            x = torch.from_numpy(mlfs_features(d, load, self.overload_threshold))
            return int(torch.argmax(self.net(x[None], torch.from_numpy(mask)[None])[0]))

        return place_greedy(draft, choose)
