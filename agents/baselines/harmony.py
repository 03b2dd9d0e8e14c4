"""Harmony (Bao, Peng, Wu, INFOCOM 2019): deep-RL placement of PS/worker tasks
(docs/baselines.md, "Harmony", lists the choices).

An actor-critic places a job's tasks one at a time, workers first, then PS; its reward
comes from a reward-prediction network (:mod:`agents.baselines.reward_model`); training
is :mod:`agents.baselines.harmony_train`. The actor scores every server with one shared
per-server network on ``[SERVER_FEATURES ‖ JOB_FEATURES]`` (any server count); the task
goes to the best server with room, a worker to its group with the most free GPUs
(:class:`~agents.baselines.draft.TaskDraft`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from agents.baselines.checkpoint import CheckpointPolicy, layout_signature, save_checkpoint
from agents.baselines.draft import WORKER, TaskDraft, place_greedy
from agents.baselines.fast_mlp import FastMLP
from marl_sched.catalogue import CATALOGUE, MODEL_NAMES
from marl_sched.jobs import Job, Placement
from marl_sched.simulator import ClusterView

KIND = "harmony"
LAYOUT_VERSION = 2
CHECKPOINT_FILE = "harmony.pt"
SERVER_FEATURES = (
    "free_gpu_frac",
    "free_cpu_frac",
    "free_mem_frac",
    "model_gpu_speed",
    "pressure_cpu",
    "pressure_pcie",
    "pressure_membw",
    "pressure_disk",
    "pressure_net",
    "nic_jobs",
    "job_workers_here",
    "job_ps_here",
    "hops_to_first_task",
    "fits_remaining_workers",
)
JOB_FEATURES = tuple(f"model={m}" for m in MODEL_NAMES) + (
    "workers",
    "ps",
    "task_is_worker",
    "workers_left",
    "ps_left",
    "model_size",
    "compute_time",
)


def server_features(draft: TaskDraft) -> np.ndarray:
    """(n_servers, len(SERVER_FEATURES)) float32 for the draft's next task."""
    view, topo, job = draft.view, draft.topo, draft.job
    nic = view.link_jobs[topo.link_offset[2] : topo.link_offset[3]]
    cols = [
        draft.server_free_gpus / np.maximum(topo.server_gpus, 1),
        draft.cpu_free / topo.server_cpu,
        draft.mem_free / topo.server_memory_gb,
        draft.speed,
        *np.log1p(np.maximum(view.server_pressure, 0.0)).T,
        np.log1p(nic),
        draft.server_workers / max(job.num_workers, 1),
        draft.server_ps / max(job.num_ps, 1),
        draft.hops() / 3.0,
        (draft.server_free_gpus >= draft.remaining_workers).astype(np.float64),
    ]
    return np.stack(cols, axis=1).astype(np.float32)


def job_features(draft: TaskDraft) -> np.ndarray:
    """(len(JOB_FEATURES),) float32 for the draft's next task."""
    job = draft.job
    spec = CATALOGUE[job.model]
    onehot = np.zeros(len(MODEL_NAMES), dtype=np.float32)
    onehot[spec.index] = 1.0
    rest = [
        np.log2(1 + job.num_workers) / 5.0,
        job.num_ps / 4.0,
        float(draft.next_kind == WORKER),
        draft.remaining_workers / max(job.num_workers, 1),
        draft.remaining_ps / max(job.num_ps, 1),
        np.log1p(spec.model_mb) / 7.0,
        np.log1p(10.0 * spec.compute_s) / 3.0,
    ]
    return np.concatenate([onehot, np.asarray(rest, dtype=np.float32)])


class HarmonyNet(nn.Module):
    """Shared per-server actor and pooled critic.

    ``h_s = MLP([x_s ‖ j])``; ``logit_s = w·h_s``; ``V = MLP([mean_s h_s ‖ max_s h_s ‖ j])``.

    Args:
        hidden: width of the per-server encoder and the critic.

    Shapes:
        servers (B, S, F_s), job (B, F_j), mask (B, S) bool → logits (B, S) with
        ``-inf`` where masked, value (B,).
    """

    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        fs, fj = len(SERVER_FEATURES), len(JOB_FEATURES)
        self.hidden = hidden
        self.encoder = nn.Sequential(
            nn.Linear(fs + fj, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh()
        )
        self.actor = nn.Linear(hidden, 1)
        self.critic = nn.Sequential(
            nn.Linear(2 * hidden + fj, hidden), nn.Tanh(), nn.Linear(hidden, 1)
        )

    def forward(
        self, servers: torch.Tensor, job: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        b, s, _ = servers.shape
        x = torch.cat([servers, job[:, None, :].expand(b, s, job.shape[-1])], dim=-1)
        h = self.encoder(x)
        logits = self.actor(h).squeeze(-1).masked_fill(~mask, float("-inf"))
        pooled = torch.cat([h.mean(dim=1), h.amax(dim=1), job], dim=-1)
        return logits, self.critic(pooled).squeeze(-1)


def harmony_layout() -> dict[str, Any]:
    """The feature layout a Harmony checkpoint records and is checked against."""
    return layout_signature(LAYOUT_VERSION, {"server": SERVER_FEATURES, "job": JOB_FEATURES})


def save_harmony(
    path: str | Path, net: HarmonyNet, reward_net: nn.Module, metadata: dict[str, Any]
) -> None:
    meta = {
        **metadata,
        "layout": harmony_layout(),
        "hidden": net.hidden,
        "reward_hidden": reward_net.hidden,
    }
    save_checkpoint(
        path,
        KIND,
        LAYOUT_VERSION,
        {"actor_critic": net.state_dict(), "reward_model": reward_net.state_dict()},
        meta,
    )


class HarmonyPolicy(CheckpointPolicy):
    """Harmony's trained actor, acting greedily (highest-scoring server with room).
    Args: as :class:`~agents.baselines.checkpoint.CheckpointPolicy` (a ``harmony.pt`` file
    or a folder holding one)."""

    name = "harmony"
    description = "Harmony (INFOCOM'19): actor-critic over per-server resource vectors"
    checkpoint_file = CHECKPOINT_FILE
    kind = KIND
    layout_version = LAYOUT_VERSION
    net_class = HarmonyNet
    state_key = "actor_critic"

    @classmethod
    def layout(cls) -> dict[str, Any]:
        return harmony_layout()

    def reset(self, topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        self._actor = None

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        if getattr(self, "_actor", None) is None:  # the weights are fixed while acting
            self._actor = FastMLP([*self.net.encoder, self.net.actor])
        actor = self._actor
        draft = TaskDraft(job, view, ps_first=False)

        def choose(d: TaskDraft, mask: np.ndarray) -> int:
            sf = server_features(d)
            jf = np.broadcast_to(job_features(d), (len(sf), len(JOB_FEATURES)))
            x = np.concatenate([sf, jf], axis=1)
            return int(np.argmax(np.where(mask, actor(x)[:, 0], -np.inf)))

        return place_greedy(draft, choose)
