"""Training Harmony: reward model first, then actor-critic with replay.

Reads top to bottom: config → seed → historical samples → reward model → episodes
(ε-heuristic exploration, predicted rewards) → replay updates → periodic greedy
validation, keeping the best weights.

Per job, the reward (given at the job's last task; the other task steps get 0) is
Harmony's "sum of the jobs' normalised speeds" restricted to what the placement
changes::

    r = ŝ(job) + λ_n · Σ_{k ∈ neighbours} (ŝ_k after − ŝ_k before)

with ŝ the reward model's normalised speed in (0, 1] and the neighbours the running
jobs sharing a server or a link with the new job. Returns are discounted over task
steps (γ). The actor-critic loss on a replayed batch is::

    L = −E[Â · log π(a|s)] + c_v · E[(G − V(s))²] − β · E[H(π(·|s))]

with ``Â = G − V(s)`` normalised per batch. Replayed steps, including the heuristic
actions of ε-exploration, enter without an importance correction: Harmony describes
none, and the heuristics' good actions are meant to be learned from (an importance
weight min(1, π/μ) would all but erase them early on; we tried it: the policy stayed
near uniform).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from agents.baselines.checkpoint import topology_signature
from agents.baselines.draft import WORKER, TaskDraft
from agents.baselines.episodes import average_jct, sample_window
from agents.baselines.harmony import (
    JOB_FEATURES,
    LAYOUT_VERSION,
    SERVER_FEATURES,
    HarmonyNet,
    HarmonyPolicy,
    job_features,
    server_features,
)
from agents.baselines.mlf_h import MlfHPolicy
from agents.baselines.reward_model import (
    RewardFit,
    collect_samples,
    fit_reward_model,
    neighbours,
    running_features,
)
from marl_sched.catalogue import CATALOGUE
from marl_sched.jobs import Job
from marl_sched.perf import PerformanceModel
from marl_sched.policies import make_policy
from marl_sched.simulator import Simulator
from marl_sched.topology import Topology


@dataclass(frozen=True)
class HarmonyConfig:
    """Harmony's training settings (defaults: the shipped checkpoint's).

    Attributes:
        iterations: training episodes.
        episode_jobs: jobs per episode window (consecutive jobs of the training part).
        eval_every: greedy validation every this many episodes (0 = only at the end).
        eval_jobs: jobs of the validation window (the last ones of the training part).
        hidden: width of the per-server encoder and the critic.
        lr: Adam learning rate of the actor-critic.
        gamma: discount per task step.
        entropy_coef: weight β of the entropy bonus.
        value_coef: weight c_v of the critic loss.
        epsilon_start, epsilon_end: probability of a heuristic action, decayed
            linearly over the first ``epsilon_decay`` share of the iterations.
        epsilon_decay: share of the iterations over which ε decays.
        replay_capacity: task steps kept in the replay buffer.
        batch_size: task steps per update.
        updates_per_episode: replayed batches after each episode.
        neighbour_weight: weight λ_n of the neighbours' predicted speed change.
        reward_windows: training windows replayed by each heuristic for the reward
            model's historical samples.
        reward_hidden, reward_epochs: the reward model's width and training epochs.
        seed: root seed (windows, exploration, initial weights).
    """

    iterations: int = 300
    episode_jobs: int = 150
    eval_every: int = 25
    eval_jobs: int = 300
    hidden: int = 64
    lr: float = 1e-3
    gamma: float = 0.5
    entropy_coef: float = 0.01
    value_coef: float = 0.5
    epsilon_start: float = 0.5
    epsilon_end: float = 0.05
    epsilon_decay: float = 0.7
    replay_capacity: int = 6000
    batch_size: int = 256
    updates_per_episode: int = 8
    neighbour_weight: float = 1.0
    reward_windows: int = 4
    reward_hidden: int = 64
    reward_epochs: int = 150
    seed: int = 0


@dataclass
class TrainResult:
    """A trained network, its history and the metadata saved beside it."""

    net: Any
    history: list[dict[str, float]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    reward_fit: RewardFit | None = None


class ReplayBuffer:
    """A ring buffer of task steps: server features, job features, mask, action, return."""

    def __init__(self, capacity: int, n_servers: int) -> None:
        self.servers = np.zeros((capacity, n_servers, len(SERVER_FEATURES)), np.float32)
        self.job = np.zeros((capacity, len(JOB_FEATURES)), np.float32)
        self.mask = np.zeros((capacity, n_servers), bool)
        self.action = np.zeros(capacity, np.int64)
        self.ret = np.zeros(capacity, np.float32)
        self.capacity, self.size, self.pos = capacity, 0, 0

    def add(self, steps: Sequence[tuple], returns: np.ndarray) -> None:
        for (sf, jf, mask, a), g in zip(steps, returns, strict=True):
            i = self.pos
            self.servers[i], self.job[i], self.mask[i] = sf, jf, mask
            self.action[i], self.ret[i] = a, g
            self.pos = (self.pos + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        idx = rng.integers(0, self.size, size=min(n, self.size))
        return {
            k: torch.from_numpy(getattr(self, k)[idx])
            for k in ("servers", "job", "mask", "action", "ret")
        }


def heuristic_actions(draft: TaskDraft, mask: np.ndarray) -> tuple[int, int]:
    """(bin-packing, load-balancing) choice of server for the draft's next task."""
    topo = draft.topo
    if draft.next_kind == WORKER:
        free = draft.server_free_gpus / np.maximum(topo.server_gpus, 1)
    else:
        free = draft.cpu_free / topo.server_cpu
    own = draft.server_workers + draft.server_ps
    pack = np.where(mask, free - 10.0 * (own > 0), np.inf)  # beside own tasks, else fullest
    spread = np.where(mask, free, -np.inf)
    return int(np.argmin(pack)), int(np.argmax(spread))


def _returns(rewards: Sequence[float], gamma: float) -> np.ndarray:
    out = np.zeros(len(rewards), np.float32)
    g = 0.0
    for i in range(len(rewards) - 1, -1, -1):
        g = rewards[i] + gamma * g
        out[i] = g
    return out


def run_episode(
    net: HarmonyNet,
    reward_net,
    topo: Topology,
    perf: PerformanceModel,
    jobs: Sequence[Job],
    epsilon: float,
    rng: np.random.Generator,
    neighbour_weight: float = 1.0,
) -> tuple[list[tuple], list[float]]:
    """One exploring episode: its task steps and their rewards."""
    sim = Simulator(topo, jobs, perf=perf)
    steps: list[tuple] = []
    rewards: list[float] = []
    while (job := sim.next_decision()) is not None:
        draft = TaskDraft(job, sim.view(), ps_first=False)
        job_steps = []
        while not draft.done:
            mask = draft.mask()
            if not mask.any():
                break
            sf, jf = server_features(draft), job_features(draft)
            with torch.no_grad():
                logits, _ = net(
                    torch.from_numpy(sf)[None],
                    torch.from_numpy(jf)[None],
                    torch.from_numpy(mask)[None],
                )
            pi = torch.softmax(logits[0], dim=0).numpy().astype(np.float64)
            pi = np.where(mask, pi, 0.0)
            pi /= pi.sum()
            pack, spread = heuristic_actions(draft, mask)
            if rng.random() < epsilon:
                a = pack if rng.random() < 0.5 else spread
            else:
                a = int(rng.choice(len(pi), p=pi))
            job_steps.append((sf, jf, mask, a))
            draft.place_next(a)
        if not draft.done:
            sim.apply(None)
            continue
        placement = draft.placement()
        layout = perf.layout(CATALOGUE[job.model], placement.worker_groups, placement.ps_groups)
        near = neighbours(sim, layout)
        before = reward_net.speed(running_features(sim, near))
        sim.apply(placement)
        after = reward_net.speed(running_features(sim, near))
        own = reward_net.speed(running_features(sim, [job.job_id]))
        r = float(own[0] + neighbour_weight * (after - before).sum())
        steps.extend(job_steps)
        rewards.extend([0.0] * (len(job_steps) - 1) + [r])
    return steps, rewards


def update(
    net: HarmonyNet, opt: torch.optim.Optimizer, batch: dict[str, torch.Tensor], cfg: HarmonyConfig
) -> dict[str, float]:
    """One actor-critic step on a replayed batch (see the module docstring)."""
    logits, value = net(batch["servers"], batch["job"], batch["mask"])
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(1, batch["action"][:, None]).squeeze(1)
    safe = logp_all.masked_fill(~batch["mask"], 0.0)  # 0·(−inf) would poison the gradient
    entropy = -(safe.exp() * safe).masked_fill(~batch["mask"], 0.0).sum(-1)
    adv = (batch["ret"] - value).detach()
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = -(adv * logp).mean()
    vf = ((batch["ret"] - value) ** 2).mean()
    loss = pg + cfg.value_coef * vf - cfg.entropy_coef * entropy.mean()
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    opt.step()
    return {
        "policy_loss": float(pg.detach()),
        "value_loss": float(vf.detach()),
        "entropy": float(entropy.mean().detach()),
    }


def train_harmony(
    topo: Topology,
    perf: PerformanceModel,
    train_jobs: Sequence[Job],
    cfg: HarmonyConfig,
    progress: Callable[[int, dict[str, float]], None] | None = None,
) -> TrainResult:
    """Train Harmony on windows of ``train_jobs`` (already the training part)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(cfg.seed)
    torch.manual_seed(cfg.seed)
    val_jobs = list(train_jobs[-cfg.eval_jobs :])
    from agents.baselines.episodes import rebase

    val_jobs = rebase(val_jobs)

    # historical samples → reward model
    windows = [sample_window(train_jobs, cfg.episode_jobs, rng) for _ in range(cfg.reward_windows)]
    history_policies = [
        make_policy(n) for n in ("random", "first-fit", "load-balance", "tetris", "locality")
    ]
    history_policies.append(MlfHPolicy())
    x, y = collect_samples(topo, perf, windows, history_policies, seed=cfg.seed)
    reward_fit = fit_reward_model(
        x, y, hidden=cfg.reward_hidden, epochs=cfg.reward_epochs, seed=cfg.seed
    )
    reward_net = reward_fit.net

    net = HarmonyNet(cfg.hidden)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    buffer = ReplayBuffer(cfg.replay_capacity, topo.n_servers)
    history: list[dict[str, float]] = []

    def validate(it: int, extra: dict[str, float]) -> float:
        jct = average_jct(topo, perf, val_jobs, HarmonyPolicy(net=net), seed=cfg.seed)
        row = {"iteration": it, "val_avg_jct_s": jct, "wall_s": time.perf_counter() - t0, **extra}
        history.append(row)
        if progress:
            progress(it, row)
        return jct

    best_jct = validate(0, {})
    best_state = copy.deepcopy(net.state_dict())
    decay = max(1, int(cfg.iterations * cfg.epsilon_decay))
    for it in range(1, cfg.iterations + 1):
        eps = cfg.epsilon_start + (cfg.epsilon_end - cfg.epsilon_start) * min(1.0, (it - 1) / decay)
        jobs = sample_window(train_jobs, cfg.episode_jobs, rng)
        steps, rewards = run_episode(
            net, reward_net, topo, perf, jobs, eps, rng, cfg.neighbour_weight
        )
        if steps:
            buffer.add(steps, _returns(rewards, cfg.gamma))
        stats: dict[str, float] = {}
        for _ in range(cfg.updates_per_episode):
            stats = update(net, opt, buffer.sample(cfg.batch_size, rng), cfg)
        stats = {**stats, "epsilon": eps, "episode_reward": float(np.sum(rewards))}
        if (cfg.eval_every and it % cfg.eval_every == 0) or it == cfg.iterations:
            jct = validate(it, stats)
            if jct < best_jct:
                best_jct, best_state = jct, copy.deepcopy(net.state_dict())
        elif progress:
            progress(it, stats)
    net.load_state_dict(best_state)
    net.eval()
    metadata = {
        "topology": topology_signature(topo),
        "layout_version": LAYOUT_VERSION,
        "server_features": list(SERVER_FEATURES),
        "job_features": list(JOB_FEATURES),
        "config": asdict(cfg),
        "reward_model": {
            "samples": reward_fit.samples,
            "train_mre": reward_fit.train_mre,
            "val_mre": reward_fit.val_mre,
        },
        "best_val_avg_jct_s": best_jct,
        "history": history,
        "wall_s": time.perf_counter() - t0,
    }
    return TrainResult(net=net, history=history, metadata=metadata, reward_fit=reward_fit)
