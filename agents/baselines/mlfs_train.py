"""Training MLF-RL: behaviour cloning on MLF-H, then REINFORCE with a baseline
(docs/baselines.md, "MLF-RL", lists the choices).

Config → seed → MLF-H's decisions on training windows → cloning → policy-gradient
iterations → periodic greedy validation, keeping the best weights
(:class:`~agents.baselines.selection.Selection`). Each iteration rolls one training
window out ``rollouts`` times. The reward of job ``j``, at its placement::

    r_j = − w_jct · ln(JCT_j / isolated_runtime_j)
          − w_bal · std_s(GPU used fraction of server s after j)
          − w_ovl · (tasks of j on overloaded servers) / (tasks of j)

Returns are discounted over jobs (γ); the baseline of job ``j`` is its mean return over
the iteration's rollouts::

    L = − Σ_j (G_j − b_j)/σ · Σ_{tasks t of j} log π(a_t|s_t) / n_jobs − β · E[H(π)]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from agents.baselines.draft import TaskDraft
from agents.baselines.episodes import ScenarioRun, sample_episode
from agents.baselines.harmony_train import TrainResult
from agents.baselines.mlf_h import MlfHPolicy, MlfsPolicy, mlf_h_scores, server_load
from agents.baselines.mlfs import (
    FEATURES,
    ORDER_FEATURES,
    MlfsNet,
    MlfsOrderNet,
    MlfsRlPolicy,
    mlfs_features,
    order_features,
)
from agents.baselines.selection import Selection
from marl_sched.jobs import Job
from marl_sched.ordering import OrderingContext


@dataclass(frozen=True)
class MlfsConfig:
    """MLF-RL's training settings (defaults: the shipped checkpoint's).

    Attributes:
        iterations: policy-gradient iterations (at most: see ``wall_cap_s``, ``patience``).
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
        order_hidden: hidden width of the queue-ordering network.
        order_queue, order_samples: the largest queue, and queues per window, of the
            order network's cloning data.
        validate_init: score the untrained network too.
        eval_every: greedy validation every this many iterations (0 = only at the end).
        wall_cap_s: stop after this much wall time (0 = none).
        patience: stop after this many validations without improvement (0 = never).
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
    order_hidden: int = 16
    order_queue: int = 16
    order_samples: int = 300
    validate_init: bool = True
    eval_every: int = 10
    wall_cap_s: float = 2820.0
    patience: int = 4
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
    run: ScenarioRun,
    jobs: Sequence[Job],
    choose: Callable[[np.ndarray, np.ndarray, TaskDraft, np.ndarray], int],
    threshold: float,
    controller: MlfsPolicy | None = None,
) -> Rollout:
    """Run ``jobs`` of ``run`` with ``choose(x, mask, draft, overloaded) -> server`` per
    task, jobs seen through the scenario's predictor; ``controller`` migrates after
    completions when the scenario has ``simulation.migration: on``."""
    predictor = run.workload.predictor()
    if controller is not None:
        controller.reset(run.topology, 0)
    sim, topo = run.simulator(jobs, predictor, controller), run.topology
    out = Rollout([], [], [], [], [], {}, {}, {})
    while (job := sim.next_decision()) is not None:
        view = sim.view()
        load = server_load(view)
        overloaded = load > threshold
        predictor.sync(sim.records)
        draft = TaskDraft(predictor.visible_job(job), view, ps_first=True)
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


def clone_order(
    order_net: MlfsOrderNet,
    windows: Sequence[tuple[ScenarioRun, Sequence[Job]]],
    cfg: MlfsConfig,
    rng: np.random.Generator,
) -> float:
    """Fit the order network to MLF-H's choice of the next job (lowest priority,
    then FIFO) on queues drawn from the training windows; returns its agreement."""
    xs, masks, targets = [], [], []
    q = cfg.order_queue
    for run, jobs in windows:
        predictor = run.workload.predictor()
        seen = [predictor.visible_job(j) for j in jobs]
        for _ in range(cfg.order_samples):
            i = int(rng.integers(1, len(seen)))
            pool = seen[max(0, i - 4 * q) : i + 1]
            size = int(rng.integers(2, min(q, len(pool)) + 1)) if len(pool) > 1 else 1
            queue = [pool[k] for k in rng.choice(len(pool), size=size, replace=False)]
            ctx = OrderingContext(now=seen[i].submit_time, est_iterations=lambda j: j.iterations)
            x = np.zeros((q, len(ORDER_FEATURES)), np.float32)
            m = np.zeros(q, bool)
            for k, job in enumerate(queue):
                x[k], m[k] = order_features(job, ctx), True
            keys = [(x[k, 0], job.submit_time, job.job_id) for k, job in enumerate(queue)]
            xs.append(x)
            masks.append(m)
            targets.append(min(range(len(queue)), key=keys.__getitem__))
    x, mask = torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(masks))
    target = torch.as_tensor(targets, dtype=torch.int64)
    agreement = fit_choices(order_net, x, mask, target, cfg, rng)
    order_net.eval()
    return agreement


def fit_choices(
    net: torch.nn.Module,
    x: torch.Tensor,
    mask: torch.Tensor,
    target: torch.Tensor,
    cfg: MlfsConfig,
    rng: np.random.Generator,
) -> float:
    """Cross-entropy of ``net``'s masked softmax against the demonstrated choices;
    returns the share the greedy network reproduces."""
    opt = torch.optim.Adam(net.parameters(), lr=cfg.bc_lr)
    for _ in range(cfg.bc_epochs):
        perm = torch.from_numpy(rng.permutation(len(target)))
        for k in range(0, len(target), 256):
            idx = perm[k : k + 256]
            loss = torch.nn.functional.cross_entropy(net(x[idx], mask[idx]), target[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        return float((net(x, mask).argmax(dim=1) == target).float().mean())


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
    return fit_choices(net, x, mask, a, cfg, rng)


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
    train_runs: Sequence[ScenarioRun],
    val_runs: Sequence[ScenarioRun],
    cfg: MlfsConfig,
    progress: Callable[[int, dict[str, float]], None] | None = None,
    writer: Any = None,
) -> TrainResult:
    """Clone MLF-H, then improve with REINFORCE, on windows of ``train_runs``; keep the
    best on ``val_runs``."""
    rng = np.random.default_rng(cfg.seed)
    torch.manual_seed(cfg.seed)
    net = MlfsNet(cfg.hidden)
    order_net = MlfsOrderNet(cfg.order_hidden)

    def greedy() -> MlfsRlPolicy:
        return MlfsRlPolicy(net=net, order_net=order_net,
                            overload_threshold=cfg.overload_threshold)  # fmt: skip

    sel = Selection(net, val_runs, greedy,
                    "mlfs-rl", wall_cap_s=cfg.wall_cap_s, patience=cfg.patience,
                    writer=writer, progress=progress, seed=cfg.seed)  # fmt: skip
    if cfg.validate_init:
        sel.validate(0, "init")
    data, windows = [], []
    for _ in range(cfg.bc_windows):
        run, jobs = sample_episode(train_runs, cfg.episode_jobs, rng)
        windows.append((run, jobs))
        data.append(rollout(run, jobs, mlf_h_choice, cfg.overload_threshold, MlfHPolicy()))
    agreement = behaviour_cloning(net, data, cfg, rng)
    order_agreement = clone_order(order_net, windows, cfg, rng)
    sel.validate(0, "bc", {"bc_agreement": agreement, "order_agreement": order_agreement})
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)

    def sample(x, mask, draft, overloaded) -> int:
        with torch.no_grad():
            p = torch.softmax(net(torch.from_numpy(x)[None], torch.from_numpy(mask)[None])[0], 0)
        p = np.where(mask, p.numpy().astype(np.float64), 0.0)
        return int(rng.choice(len(p), p=p / p.sum()))

    for it in range(1, cfg.iterations + 1):
        run, jobs = sample_episode(train_runs, cfg.episode_jobs, rng)
        runs = [rollout(run, jobs, sample, cfg.overload_threshold, greedy())
                for _ in range(cfg.rollouts)]  # fmt: skip
        stats = policy_gradient_step(net, opt, runs, cfg)
        sel.log(it, stats)
        if (cfg.eval_every and it % cfg.eval_every == 0) or it == cfg.iterations:
            sel.validate(it, "rl", stats)
        if sel.stop():
            if sel.history[-1]["iteration"] != it:
                sel.validate(it, "rl", stats)
            break
    chosen = sel.finish()
    metadata = {
        "features": list(FEATURES),
        "order_features": list(ORDER_FEATURES),
        "order_agreement": order_agreement,
        "config": asdict(cfg),
        "train_scenarios": [r.name for r in train_runs],
        "overload_threshold": cfg.overload_threshold,
        "bc_agreement": agreement,
        **chosen,
    }
    return TrainResult(net=net, history=chosen["history"], metadata=metadata, order_net=order_net)
