"""The warm start of a training run: behaviour cloning of a heuristic teacher
(``train.bc_teacher``) through the environment, and DAgger rounds
(``train.dagger_rounds``) in which the teacher labels the states the network visits."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from agents.algorithm import env_setup
from agents.records import no_progress
from marl_sched.errors import InputError


def teacher_decisions(
    cfg, mc, tc, seed: int, student=None, first_episode: int = 0, progress=None
) -> tuple[list[dict], list[int], list[float], list[float]]:
    """Roll ``tc.bc_teacher`` out through the environment: (observations, actions,
    discounted returns of each acting agent's trajectory, the GPU work of each decision's
    job).

    ``student`` (a GNN): DAgger instead: the student acts greedily and the teacher labels
    each visited state with the action towards its plan (a matching hint's follow action,
    else the slot or forward; unlabelled when masked); moves are labelled by
    :func:`agents.teachers.teacher_move`. ``first_episode``: episode seeds
    ``seed * 1000 + first_episode + k``; ``progress(done)`` after each episode."""
    import numpy as np

    if student is not None:
        from agents.policy import greedy_action

    from agents.teachers import make_teacher, teacher_move, teacher_plan
    from envs.session import plan_action

    env_cls, env_config, _ = env_setup(cfg, mc, tc, seed)
    env = env_cls(env_config)
    builder = env.builder
    teacher = make_teacher(
        tc.bc_teacher, tc.bc_margin, tc.bc_protect, tc.bc_speed, tc.bc_base, config=cfg
    )
    teacher.reset(env.topology, seed)
    upgrade = None
    if tc.bc_move == "upgrade":  # moves labelled by the upgrade lever's rule
        from marl_sched.policies.levers import UpgradePolicy

        upgrade = UpgradePolicy(restart_scale=cfg.simulation.migration_cost_scale)
        upgrade.reset(env.topology, seed)
    observations, actions, returns, works = [], [], [], []
    done: dict[tuple, tuple[int, int]] = {}  # episode key → its samples (teacher only)
    for episode in range(first_episode, first_episode + tc.bc_episodes):
        if progress is not None:
            progress(episode - first_episode)
        obs, _ = env.reset(seed=seed * 1000 + episode)
        if student is None and env.episode_key in done:
            # the same episode again (a window shorter than an episode is drawn whole):
            # the deterministic teacher would make the same decisions; count them twice
            lo, hi = done[env.episode_key]
            observations += observations[lo:hi]
            actions += actions[lo:hi]
            returns += returns[lo:hi]
            works += works[lo:hi]
            continue
        first_sample = len(actions)
        planned, plan = None, None
        steps: dict[str, list[list]] = {}  # agent → [sample index or None, reward]
        while True:
            agent, o = next(iter(obs.items()))
            s = env.session
            if s is not planned:  # a new job: ask the teacher for its whole placement
                planned = s
                if s.moving is not None:  # a move (env.migration): train.bc_move's rule
                    p = teacher_move(teacher, s, env.sim.view(), upgrade)
                else:
                    p = teacher_plan(teacher, s, sim=env.sim)
                plan = None if p is None else [*p.worker_groups, *p.ps_groups]
            action = None
            if s.can_keep and plan is None:
                action = builder.pad[0] + s.agent  # keep: the agent's own forward slot
            elif plan is not None:
                # a hint that plans exactly the teacher's placement: follow it
                action = plan_action(s, p)
                if o["action_mask"][action] < 0.5:
                    action = None
                    if student is None:
                        plan = None
            index = None
            if action is not None:
                index = len(actions)
                observations.append(o)
                actions.append(action)
                returns.append(0.0)
                works.append(s.job.gpu_work_s)
            if student is not None:
                label, action = action, greedy_action(student, o)
                if label != action:  # off the teacher's plan: no more labels this job
                    plan = None
            elif action is None:  # the teacher would wait: take the first legal action
                action = int(np.flatnonzero(o["action_mask"])[0])
            obs, rewards, terminated, _, _ = env.step({agent: action})
            steps.setdefault(agent, []).append([index, 0.0])
            for a, r in rewards.items():
                if a in steps:
                    steps[a][-1][1] += r
            if terminated["__all__"]:
                break
        for trajectory in steps.values():
            ret = 0.0
            for index, r in reversed(trajectory):
                ret = r + tc.gamma * ret
                if index is not None:
                    returns[index] = ret
        done[env.episode_key] = (first_sample, len(actions))
    if progress is not None:
        progress(tc.bc_episodes)
    return observations, actions, returns, works


def imitation_weights(works, power: float):
    """Per-decision weights of the imitation loss: ``work ** power``, scaled to mean 1."""
    import numpy as np

    works = np.nan_to_num(np.asarray(works, dtype=np.float64), nan=1.0)  # no estimate: 1
    w = np.power(np.maximum(works, 1.0), power)
    return (w / w.mean()).astype(np.float32)


def imitation_tensors(observations, actions, returns, works, power: float):
    """The warm start's data as tensors: (observations per key, labels, returns,
    weights)."""
    import numpy as np
    import torch

    data = {k: torch.as_tensor(np.stack([o[k] for o in observations])) for k in observations[0]}
    act = torch.as_tensor(actions)
    ret = torch.as_tensor(returns, dtype=torch.float32)
    return data, act, ret, torch.as_tensor(imitation_weights(works, power))


def imitation_epoch(net, opt, data: dict, act, ret, weight, rng, batch: int = 256):
    """One pass of the weighted cross-entropy plus half the value MSE over the
    teacher's decisions in an order from ``rng``; returns (mean weighted loss, accuracy)."""
    import torch

    order = torch.as_tensor(rng.permutation(len(act)))
    hits, loss_sum = 0, 0.0
    for lo in range(0, len(order), batch):
        idx = order[lo : lo + batch]
        logits, values = net.forward_padded({k: v[idx] for k, v in data.items()})
        ce = torch.nn.functional.cross_entropy(logits, act[idx], reduction="none")
        loss = (ce * weight[idx]).mean()
        loss = loss + 0.5 * torch.nn.functional.mse_loss(values, ret[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        hits += int((logits.argmax(-1) == act[idx]).sum())
        loss_sum += float(loss.detach()) * len(idx)
    return loss_sum / len(act), hits / len(act)


def behaviour_cloning(
    cfg, mc, tc, seed: int, log: Callable[[str], None], progress=no_progress, on_epoch=None
) -> dict:
    """A GNN state dict (``gnn.``-prefixed) imitating the teacher. ``progress(total,
    label)``: a progress bar factory; ``on_epoch(epoch, loss, accuracy)``: after every
    epoch."""
    import numpy as np
    import torch

    from agents.gnn import build_gnn
    from envs.observations import feature_dims

    t0 = time.perf_counter()
    bar = progress(tc.bc_episodes, f"warm start: {tc.bc_teacher} teacher episodes")
    try:
        observations, actions, returns, works = teacher_decisions(cfg, mc, tc, seed, progress=bar)
    finally:
        bar.close()
    if not actions:  # e.g. a teacher whose placements the masks never allow
        raise InputError(
            f"{cfg.source}: train.bc_teacher: the {tc.bc_teacher} teacher's placements were "
            f"never a legal action in {tc.bc_episodes} episodes (nothing to imitate)"
        )
    _, _, builder = env_setup(cfg, mc, tc, seed)
    torch.manual_seed(seed)
    net = build_gnn(feature_dims(builder.observation_space), dataclasses.asdict(mc))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(seed)
    epochs_done = [0]

    def fit() -> float:
        data, act, ret, weight = imitation_tensors(
            observations, actions, returns, works, tc.bc_weight_power
        )
        accuracy = 0.0
        bar = progress(tc.bc_epochs, f"warm start: imitation epochs ({len(actions)} decisions)")
        try:
            for epoch in range(tc.bc_epochs):
                loss, accuracy = imitation_epoch(net, opt, data, act, ret, weight, rng)
                epochs_done[0] += 1
                if on_epoch is not None:
                    on_epoch(epochs_done[0], loss, accuracy)
                bar(epoch + 1)
        finally:
            bar.close()
        return accuracy

    accuracy = fit()
    log(
        f"warm start: imitated {tc.bc_teacher} on {len(actions)} decisions "
        f"({tc.bc_episodes} episodes), train accuracy {accuracy:.3f}, "
        f"{time.perf_counter() - t0:.0f} s"
    )
    for r in range(1, tc.dagger_rounds + 1):
        # DAgger: the teacher labels the states the current network visits (fresh
        # episodes of the training window); aggregate and train on.
        net.eval()
        bar = progress(tc.bc_episodes, f"warm start: DAgger round {r} relabelling")
        try:
            o2, a2, r2, w2 = teacher_decisions(
                cfg, mc, tc, seed, student=net, first_episode=r * tc.bc_episodes, progress=bar
            )
        finally:
            bar.close()
        net.train()
        observations += o2
        actions += a2
        returns += r2
        works += w2
        accuracy = fit()
        log(
            f"warm start: DAgger round {r}: {len(a2)} relabelled decisions, "
            f"{len(actions)} in all, train accuracy {accuracy:.3f}, "
            f"{time.perf_counter() - t0:.0f} s"
        )
    return {f"gnn.{k}": v.detach().clone() for k, v in net.state_dict().items()}
