"""Training MLF-RL: behaviour cloning on MLF-H, then REINFORCE with a baseline.

Reads top to bottom: config → seed → MLF-H's decisions on training windows → cloning
(cross-entropy on MLF-H's server choice for every task) → policy-gradient iterations →
periodic greedy validation, keeping the best weights (the cloned policy included).

Each policy-gradient iteration draws one training window and rolls it out ``rollouts``
times with sampled actions. The reward of job ``j`` (given at its placement)::

    r_j = − w_jct · ln(JCT_j / isolated_runtime_j)              # JCT / progress term
          − w_bal · std_s(GPU used fraction of server s after j) # load-balance term
          − w_ovl · (tasks of j on overloaded servers) / (tasks of j)  # overload penalty

with ``w_jct = 1``, ``w_bal = w_ovl = 0.5`` (the authors' code weighs its reward parts
0.5 each). Returns are discounted over the jobs in the order they were placed
(γ = 0.9, the authors' ``gama``); the baseline of job ``j`` is the mean of its return
over the iteration's rollouts (the authors' per-step average over episodes — here the
same job across rollouts of the same window), so::

    L = − Σ_j (G_j − b_j)/σ · Σ_{tasks t of j} log π(a_t|s_t) / n_jobs − β · E[H(π)]
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from agents.baselines.checkpoint import topology_signature
from agents.baselines.draft import TaskDraft
from agents.baselines.episodes import average_jct, rebase, sample_window
from agents.baselines.harmony_train import TrainResult
from agents.baselines.mlf_h import mlf_h_scores, server_load
from agents.baselines.mlfs import FEATURES, LAYOUT_VERSION, MlfsNet, MlfsRlPolicy, mlfs_features
from marl_sched.jobs import Job
from marl_sched.perf import PerformanceModel
from marl_sched.simulator import Simulator
from marl_sched.topology import Topology


@dataclass(frozen=True)
class MlfsConfig:
    """MLF-RL's training settings (defaults: the shipped checkpoint's).

    Attributes:
        iterations: policy-gradient iterations (one window, ``rollouts`` rollouts each).
        episode_jobs: jobs per training window.
        rollouts: rollouts of each window (the baseline averages over them).
        bc_windows: training windows replayed by MLF-H for behaviour cloning.
        bc_epochs: passes over MLF-H's decisions.
        bc_lr: Adam learning rate of the cloning phase.
        hidden: hidden width of the node network.
        lr: Adam learning rate of the policy-gradient phase.
        gamma: discount over job decisions.
        entropy_coef: weight β of the entropy bonus.
        w_jct, w_balance, w_overload: weights of the reward's three parts.
        overload_threshold: load above which a server is overloaded (MLF-H's θ).
        eval_every: greedy validation every this many iterations (0 = only at the end).
        eval_jobs: jobs of the validation window (the last ones of the training part).
        seed: root seed.
    """

    iterations: int = 100
    episode_jobs: int = 150
    rollouts: int = 4
    bc_windows: int = 6
    bc_epochs: int = 40
    bc_lr: float = 3e-3
    hidden: int = 32
    lr: float = 3e-3
    gamma: float = 0.9
    entropy_coef: float = 0.001
    w_jct: float = 1.0
    w_balance: float = 0.5
    w_overload: float = 0.5
    overload_threshold: float = 0.8
    eval_every: int = 10
    eval_jobs: int = 300
    seed: int = 0


@dataclass
class Rollout:
    """Task steps of one rollout and, per placed job, what its reward needs."""

    x: list[np.ndarray]
    mask: list[np.ndarray]
    action: list[int]
    step_job: list[int]
    job_order: list[int]
    balance: dict[int, float]
    overload: dict[int, float]
    slowdown: dict[int, float]


def rollout(
    topo: Topology,
    perf: PerformanceModel,
    jobs: Sequence[Job],
    choose: Callable[[np.ndarray, np.ndarray, TaskDraft, np.ndarray], int],
    threshold: float,
) -> Rollout:
    """Run a window with ``choose(x, mask, draft, overloaded) -> server`` per task."""
    sim = Simulator(topo, jobs, perf=perf)
    out = Rollout([], [], [], [], [], {}, {}, {})
    while (job := sim.next_decision()) is not None:
        view = sim.view()
        load = server_load(view)
        overloaded = load > threshold
        draft = TaskDraft(job, view, ps_first=True)
        steps = []
        n_over = 0
        while not draft.done:
            mask = draft.mask()
            if not mask.any():
                break
            x = mlfs_features(draft, load, threshold)
            a = choose(x, mask, draft, overloaded)
            steps.append((x, mask, a))
            n_over += int(overloaded[a])
            draft.place_next(a)
        if not draft.done:
            sim.apply(None)
            continue
        sim.apply(draft.placement())
        for x, mask, a in steps:
            out.x.append(x)
            out.mask.append(mask)
            out.action.append(a)
            out.step_job.append(job.job_id)
        out.job_order.append(job.job_id)
        used = 1.0 - draft.server_free_gpus / np.maximum(topo.server_gpus, 1)
        out.balance[job.job_id] = float(used.std())
        out.overload[job.job_id] = n_over / job.num_tasks
    for r in sim.result():
        out.slowdown[r.job.job_id] = r.jct / r.isolated_runtime
    return out


def mlf_h_choice(x, mask, draft: TaskDraft, overloaded: np.ndarray) -> int:
    return int(np.argmin(np.where(mask, mlf_h_scores(draft, overloaded), np.inf)))


def _tensors(r: Rollout) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (
        torch.from_numpy(np.stack(r.x)),
        torch.from_numpy(np.stack(r.mask)),
        torch.as_tensor(r.action, dtype=torch.int64),
    )


def behaviour_cloning(
    net: MlfsNet, data: list[Rollout], cfg: MlfsConfig, rng: np.random.Generator
) -> float:
    """Fit ``net`` to MLF-H's choices; returns its agreement with MLF-H (share of tasks)."""
    x, mask, a = (torch.cat(t) for t in zip(*(_tensors(r) for r in data), strict=True))
    opt = torch.optim.Adam(net.parameters(), lr=cfg.bc_lr)
    for _ in range(cfg.bc_epochs):
        perm = torch.from_numpy(rng.permutation(len(a)))
        for k in range(0, len(a), 256):
            idx = perm[k : k + 256]
            loss = torch.nn.functional.cross_entropy(net(x[idx], mask[idx]), a[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        return float((net(x, mask).argmax(dim=1) == a).float().mean())


def job_rewards(r: Rollout, cfg: MlfsConfig) -> dict[int, float]:
    return {
        j: -cfg.w_jct * float(np.log(r.slowdown[j]))
        - cfg.w_balance * r.balance[j]
        - cfg.w_overload * r.overload[j]
        for j in r.job_order
    }


def policy_gradient_step(
    net: MlfsNet, opt: torch.optim.Optimizer, rollouts: list[Rollout], cfg: MlfsConfig
) -> dict[str, float]:
    """One REINFORCE-with-baseline step on the rollouts of one window."""
    returns = []
    for r in rollouts:
        rew = job_rewards(r, cfg)
        g, ret = 0.0, {}
        for j in reversed(r.job_order):
            g = rew[j] + cfg.gamma * g
            ret[j] = g
        returns.append(ret)
    jobs = set.intersection(*(set(ret) for ret in returns))
    baseline = {j: float(np.mean([ret[j] for ret in returns])) for j in jobs}
    adv = [{j: ret[j] - baseline[j] for j in jobs} for ret in returns]
    scale = float(np.std([a for d in adv for a in d.values()])) + 1e-8
    xs, masks, acts, step_adv = [], [], [], []
    for r, a_j in zip(rollouts, adv, strict=True):
        x, mask, a = _tensors(r)
        xs.append(x)
        masks.append(mask)
        acts.append(a)
        step_adv.append(torch.tensor([a_j.get(j, 0.0) / scale for j in r.step_job]))
    x, mask, a, sa = torch.cat(xs), torch.cat(masks), torch.cat(acts), torch.cat(step_adv)
    logp_all = torch.log_softmax(net(x, mask), dim=-1)
    logp = logp_all.gather(1, a[:, None]).squeeze(1)
    safe = logp_all.masked_fill(~mask, 0.0)
    entropy = -(safe.exp() * safe).masked_fill(~mask, 0.0).sum(-1).mean()
    n_jobs = sum(len(r.job_order) for r in rollouts)
    loss = -(sa * logp).sum() / n_jobs - cfg.entropy_coef * entropy
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    opt.step()
    mean_reward = float(np.mean([np.mean(list(job_rewards(r, cfg).values())) for r in rollouts]))
    return {
        "loss": float(loss.detach()),
        "entropy": float(entropy.detach()),
        "mean_job_reward": mean_reward,
    }


def train_mlfs_rl(
    topo: Topology,
    perf: PerformanceModel,
    train_jobs: Sequence[Job],
    cfg: MlfsConfig,
    progress: Callable[[int, dict[str, float]], None] | None = None,
) -> TrainResult:
    """Clone MLF-H, then improve with REINFORCE, on windows of ``train_jobs``."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(cfg.seed)
    torch.manual_seed(cfg.seed)
    val_jobs = rebase(list(train_jobs[-cfg.eval_jobs :]))
    net = MlfsNet(cfg.hidden)
    history: list[dict[str, float]] = []

    def validate(it: int, phase: str, extra: dict[str, float]) -> float:
        policy = MlfsRlPolicy(net=net, overload_threshold=cfg.overload_threshold)
        jct = average_jct(topo, perf, val_jobs, policy, seed=cfg.seed)
        row = {
            "iteration": it,
            "phase": phase,
            "val_avg_jct_s": jct,
            "wall_s": time.perf_counter() - t0,
            **extra,
        }
        history.append(row)
        if progress:
            progress(it, row)
        return jct

    validate(0, "init", {})
    data = [
        rollout(
            topo,
            perf,
            sample_window(train_jobs, cfg.episode_jobs, rng),
            mlf_h_choice,
            cfg.overload_threshold,
        )
        for _ in range(cfg.bc_windows)
    ]
    agreement = behaviour_cloning(net, data, cfg, rng)
    best_jct = validate(0, "bc", {"bc_agreement": agreement})
    best_state = copy.deepcopy(net.state_dict())
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)

    def sample(x, mask, draft, overloaded) -> int:
        with torch.no_grad():
            p = torch.softmax(net(torch.from_numpy(x)[None], torch.from_numpy(mask)[None])[0], 0)
        p = np.where(mask, p.numpy().astype(np.float64), 0.0)
        return int(rng.choice(len(p), p=p / p.sum()))

    for it in range(1, cfg.iterations + 1):
        jobs = sample_window(train_jobs, cfg.episode_jobs, rng)
        runs = [
            rollout(topo, perf, jobs, sample, cfg.overload_threshold) for _ in range(cfg.rollouts)
        ]
        stats = policy_gradient_step(net, opt, runs, cfg)
        if (cfg.eval_every and it % cfg.eval_every == 0) or it == cfg.iterations:
            jct = validate(it, "rl", stats)
            if jct < best_jct:
                best_jct, best_state = jct, copy.deepcopy(net.state_dict())
        elif progress:
            progress(it, stats)
    net.load_state_dict(best_state)
    net.eval()
    metadata = {
        "topology": topology_signature(topo),
        "layout_version": LAYOUT_VERSION,
        "features": list(FEATURES),
        "config": asdict(cfg),
        "overload_threshold": cfg.overload_threshold,
        "bc_agreement": agreement,
        "best_val_avg_jct_s": best_jct,
        "history": history,
        "wall_s": time.perf_counter() - t0,
    }
    return TrainResult(net=net, history=history, metadata=metadata)
