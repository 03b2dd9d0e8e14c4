"""Training Harmony: reward model first, then actor-critic with replay
(docs/baselines.md, "Harmony", lists the choices).

Config → seed → historical samples → reward model → episodes (ε-heuristic exploration,
predicted rewards) → replay updates → periodic greedy validation, keeping the best
weights (:class:`~agents.baselines.selection.Selection`). Episodes are windows of the
train-split scenarios, jobs seen through the scenario's duration predictor. Per job
(at its last task; other steps get 0)::

    r = ŝ(job) + λ_n · Σ_{k ∈ neighbours} (ŝ_k after − ŝ_k before)

ŝ the reward model's normalised speed, neighbours the running jobs sharing a server or
link. Loss on a replayed batch, ``Â = G − V(s)`` normalised per batch, no importance
correction::

    L = −E[Â · log π(a|s)] + c_v · E[(G − V(s))²] − β · E[H(π(·|s))]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from agents.baselines.draft import WORKER, TaskDraft
from agents.baselines.episodes import ScenarioRun, sample_episode
from agents.baselines.harmony import (
    JOB_FEATURES,
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
from agents.baselines.selection import Selection
from marl_sched.catalogue import CATALOGUE
from marl_sched.errors import InputError
from marl_sched.jobs import Job
from marl_sched.policies import make_policy


@dataclass(frozen=True)
class HarmonyConfig:
    """Harmony's training settings (defaults: the shipped checkpoint's).

    Attributes:
        iterations: training episodes (at most; see ``wall_cap_s`` and ``patience``).
        episode_jobs: jobs per episode window.
        validate_init: score the untrained network too.
        eval_every: greedy validation every this many episodes (0 = only at the end).
        wall_cap_s: stop after this much wall time (0 = none).
        patience: stop after this many validations without improvement (0 = never).
        hidden: width of the per-server encoder and the critic.
        lr: Adam learning rate of the actor-critic.
        gamma: discount per task step.
        entropy_coef: weight β of the entropy bonus.
        value_coef: weight c_v of the critic loss.
        epsilon_start, epsilon_end: probability of a heuristic action, decayed linearly
            over the first ``epsilon_decay`` share of the iterations.
        replay_capacity: task steps kept in the replay buffer.
        batch_size: task steps per update.
        updates_per_episode: replayed batches after each episode.
        neighbour_weight: λ_n (``reward="placement"``).
        reward: ``"cluster-speed"`` (summed predicted speed of the running jobs times the
            time to the next placement, hours) or ``"placement"`` (the formula above).
        bc_windows, bc_epochs, bc_lr: the warm start (0 windows = none): cross-entropy on
            the bin-packing heuristic's choices.
        reward_windows: windows replayed by each heuristic for the reward model's samples.
        reward_hidden, reward_epochs: the reward model's width and training epochs.
        seed: root seed (windows, exploration, initial weights).
    """

    iterations: int = 300
    episode_jobs: int = 150
    validate_init: bool = True
    eval_every: int = 25
    wall_cap_s: float = 2820.0
    patience: int = 4
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
    reward: str = "cluster-speed"
    bc_windows: int = 4
    bc_epochs: int = 40
    bc_lr: float = 3e-3
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
    order_net: Any = None


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
    """(bin-packing, load-balancing) choice of server for the draft's next task.
    Bin-packing: beside the job's own tasks, else the fullest server that takes all
    remaining workers on the model's fastest GPU type, else the most free GPUs.
    Load-balancing: the server with the most free capacity."""
    topo = draft.topo
    if draft.next_kind == WORKER:
        free = draft.server_free_gpus / np.maximum(topo.server_gpus, 1)
        fits = draft.server_free_gpus >= draft.remaining_workers
    else:
        free = draft.cpu_free / topo.server_cpu
        fits = np.ones(topo.n_servers, dtype=bool)
    own = draft.server_workers + draft.server_ps
    slow = 2.0 * (1.0 - draft.speed / max(float(draft.speed.max()), 1e-12))
    if (fits & mask).any():
        pack_score = free + slow + 10.0 * ~fits
    else:
        pack_score = slow - free
    pack = np.where(mask, pack_score - 100.0 * (own > 0), np.inf)
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
    run: ScenarioRun,
    jobs: Sequence[Job],
    epsilon: float,
    rng: np.random.Generator,
    neighbour_weight: float = 1.0,
    reward: str = "cluster-speed",
    pack_only: bool = False,
) -> tuple[list[tuple], list[float]]:
    """One exploring episode over ``jobs`` of ``run``: its task steps and rewards
    (``pack_only``: every task by the bin-packing heuristic, for the warm start)."""
    predictor = run.workload.predictor()
    sim, perf = run.simulator(jobs, predictor), run.perf
    steps: list[tuple] = []
    rewards: list[float] = []
    times: list[float] = []  # sim time after each job's placement
    ends: list[int] = []  # index of each placed job's last task step
    while (job := sim.next_decision()) is not None:
        predictor.sync(sim.records)
        draft = TaskDraft(predictor.visible_job(job), sim.view(), ps_first=False)
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
            if pack_only:
                a = pack
            elif rng.random() < epsilon:
                a = pack if rng.random() < 0.5 else spread
            else:
                a = int(rng.choice(len(pi), p=pi))
            job_steps.append((sf, jf, mask, a))
            draft.place_next(a)
        if not draft.done:
            sim.apply(None)
            continue
        placement = draft.placement()
        if reward == "placement":
            layout = perf.layout(CATALOGUE[job.model], placement.worker_groups, placement.ps_groups)
            near = neighbours(sim, layout)
            before = reward_net.speed(running_features(sim, near))
            sim.apply(placement)
            after = reward_net.speed(running_features(sim, near))
            own = reward_net.speed(running_features(sim, [job.job_id]))
            r = float(own[0] + neighbour_weight * (after - before).sum())
        else:
            sim.apply(placement)
            r = float(reward_net.speed(running_features(sim, list(sim.running))).sum())
            times.append(sim.now)
        steps.extend(job_steps)
        rewards.extend([0.0] * (len(job_steps) - 1) + [r])
        ends.append(len(rewards) - 1)
    if reward != "placement" and ends:
        # the cluster's summed predicted speed holds until the next decision
        times.append(sim.now)
        for k, i in enumerate(ends):
            rewards[i] *= (times[k + 1] - times[k]) / 3600.0
    return steps, rewards


def clone_actor(
    net: HarmonyNet, steps: Sequence[tuple], cfg: HarmonyConfig, rng: np.random.Generator
) -> float:
    """Warm start: fit the actor to the bin-packing heuristic's task steps
    (cross-entropy); returns the greedy actor's agreement with them."""
    sf = torch.from_numpy(np.stack([s[0] for s in steps]))
    jf = torch.from_numpy(np.stack([s[1] for s in steps]))
    mask = torch.from_numpy(np.stack([s[2] for s in steps]))
    a = torch.as_tensor([s[3] for s in steps], dtype=torch.int64)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.bc_lr)
    for _ in range(cfg.bc_epochs):
        perm = torch.from_numpy(rng.permutation(len(a)))
        for k in range(0, len(a), cfg.batch_size):
            idx = perm[k : k + cfg.batch_size]
            logits, _ = net(sf[idx], jf[idx], mask[idx])
            loss = torch.nn.functional.cross_entropy(logits, a[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        return float((net(sf, jf, mask)[0].argmax(dim=1) == a).float().mean())


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
    train_runs: Sequence[ScenarioRun],
    val_runs: Sequence[ScenarioRun],
    cfg: HarmonyConfig,
    progress: Callable[[int, dict[str, float]], None] | None = None,
    writer: Any = None,
    reward_fit: RewardFit | None = None,
) -> TrainResult:
    """Train Harmony on episodes of ``train_runs``; keep the best on ``val_runs``.
    ``reward_fit``: a reward model fitted before with the same seed and reward settings."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(cfg.seed)
    torch.manual_seed(cfg.seed)
    sizes = {r.topology.n_servers for r in train_runs}
    if len(sizes) != 1:  # the replay buffer holds one server count
        raise InputError(f"harmony: train scenarios span {len(sizes)} server counts; use one")
    home = train_runs[0]

    # historical samples → reward model
    windows = [
        sample_episode(train_runs, cfg.episode_jobs, rng)[1] for _ in range(cfg.reward_windows)
    ]
    if reward_fit is None:
        history_policies = [
            make_policy(n) for n in ("random", "first-fit", "load-balance", "tetris", "locality")
        ]
        history_policies.append(MlfHPolicy(load_control=False))
        x, y = collect_samples(home.topology, home.perf, windows, history_policies, seed=cfg.seed)
        reward_fit = fit_reward_model(
            x, y, hidden=cfg.reward_hidden, epochs=cfg.reward_epochs, seed=cfg.seed
        )
    reward_net = reward_fit.net

    torch.manual_seed(cfg.seed)  # the same initial weights whether or not the fit ran here
    net = HarmonyNet(cfg.hidden)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    buffer = ReplayBuffer(cfg.replay_capacity, home.topology.n_servers)
    sel = Selection(net, val_runs, lambda: HarmonyPolicy(net=net), "harmony",
                    wall_cap_s=cfg.wall_cap_s, patience=cfg.patience, writer=writer,
                    progress=progress, seed=cfg.seed, t0=t0)  # fmt: skip
    if cfg.validate_init:
        sel.validate(0, "init")
    agreement = float("nan")
    if cfg.bc_windows:
        demo: list[tuple] = []
        for _ in range(cfg.bc_windows):
            run, jobs = sample_episode(train_runs, cfg.episode_jobs, rng)
            demo += run_episode(net, reward_net, run, jobs, 1.0, rng, pack_only=True)[0]
        agreement = clone_actor(net, demo, cfg, rng)
        sel.validate(0, "bc", {"bc_agreement": agreement})
    decay = max(1, int(cfg.iterations * cfg.epsilon_decay))
    for it in range(1, cfg.iterations + 1):
        eps = cfg.epsilon_start + (cfg.epsilon_end - cfg.epsilon_start) * min(1.0, (it - 1) / decay)
        run, jobs = sample_episode(train_runs, cfg.episode_jobs, rng)
        steps, rewards = run_episode(
            net, reward_net, run, jobs, eps, rng, cfg.neighbour_weight, cfg.reward
        )
        if steps:
            buffer.add(steps, _returns(rewards, cfg.gamma))
        stats: dict[str, float] = {}
        for _ in range(cfg.updates_per_episode):
            stats = update(net, opt, buffer.sample(cfg.batch_size, rng), cfg)
        stats = {**stats, "epsilon": eps, "episode_reward": float(np.sum(rewards))}
        sel.log(it, stats)
        if (cfg.eval_every and it % cfg.eval_every == 0) or it == cfg.iterations:
            sel.validate(it, "rl", stats)
        if sel.stop():
            if not sel.history or sel.history[-1]["iteration"] != it:
                sel.validate(it, "rl", stats)
            break
    chosen = sel.finish()
    metadata = {
        "server_features": list(SERVER_FEATURES),
        "job_features": list(JOB_FEATURES),
        "config": asdict(cfg),
        "train_scenarios": [r.name for r in train_runs],
        "bc_agreement": agreement,
        "reward_model": {
            "samples": reward_fit.samples,
            "train_mre": reward_fit.train_mre,
            "val_mre": reward_fit.val_mre,
        },
        **chosen,
    }
    return TrainResult(net=net, history=chosen["history"], metadata=metadata, reward_fit=reward_fit)
