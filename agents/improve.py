"""Rollout policy improvement with common random numbers (``train.algorithm: API``).

Approximate policy iteration by classification (Lagoudakis & Parr, ICML 2003;
Lazaric, Ghavamzadeh & Munos, "Analysis of a classification-based policy iteration
algorithm", ICML 2010), with the branch-and-compare estimate of TRPO's *vine*
procedure (Schulman et al., ICML 2015, section 5.2). One round, from the current
network ``pi``:

1. ``pi`` plays a training episode greedily (the episode seeds of the round).
2. At ``branches`` decisions of that episode drawn uniformly among those with two or
   more legal actions, the environment is copied (``copy.deepcopy``: the simulator,
   the arrivals still to come, every random generator) and each of the
   ``alternatives`` legal actions ``pi`` ranks next after its choice is taken there
   instead; ``pi`` then plays the copy to the end of the episode. The branches share
   everything but that one action (common random numbers), so the difference of their
   episodes' average JCT is the exact effect of the action on this window with ``pi``
   acting afterwards: a sample of ``Q_pi(s, a) - Q_pi(s, pi(s))`` without the noise of
   the episode's other decisions, which drowns the per-decision signal of PPO's
   returns here (docs/agents.md, "Why: the per-decision signal is below the noise").
3. The label of a branched decision is the alternative with the lowest average JCT
   when it beats ``pi``'s own action by more than ``margin`` (a fraction of the
   episode's average JCT), else ``pi``'s action; every other decision of the episode
   is labelled with ``pi``'s action (what the round keeps).
4. ``pi`` is fitted to the labels by cross-entropy (``improve_epochs`` passes, Adam at
   ``improve_lr``), the improved decisions weighted ``improve_weight``.
   ``improve_target: soft`` keeps the rest where ``pi`` had them instead: every other
   decision's target is ``pi``'s own distribution at the round's start (self-
   distillation, a KL to the round's policy, whose gradient is zero there), every
   minibatch holds every improved decision, and a round with none leaves ``pi``
   exactly as it was. With hard targets, refitting ``pi`` to its own arg-max labels
   alone moved the selection runs by 3.3 % (docs/agents.md, the rollout control):
   the change is then the labels', not the fit's.

What the labels read: the same returns every RL method here reads (the window's
arrivals and true lengths, through the simulator), never at decision time; the network
acts on its observation alone. One window per label: an alternative that wins on this
window's future may lose on average, which the margin and the many windows of a round
temper and the trainer's validation (the dominance rule) checks.

Why not inside RLlib: its env runners sample straight episodes; branching an episode
from a copied state has no place in them. The round runs in the driver on the weights
RLlib's learner holds and writes the result back (``agents.training.Trainer``), so
checkpoints, validation, selection and resume are the PPO runs'.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Round:
    """One round's labelled decisions and what the branches measured."""

    observations: list[dict] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    improved: list[bool] = field(default_factory=list)
    gains: list[float] = field(default_factory=list)  # per branched decision: best rel. gain
    episode_jct: list[float] = field(default_factory=list)
    branches: int = 0
    decisions: int = 0
    steps: int = 0  # env steps taken, the branches' included
    unconfirmed: int = 0  # labels that won on their own future but not on resampled ones


def _logits(net, obs: dict) -> np.ndarray:
    from agents.policy import masked_logits

    return masked_logits(net, obs).numpy()


def play_out(env, obs: dict, net, out: Round, record: list | None = None) -> float:
    """Play ``env`` greedily from ``obs`` to the end of its episode; its average JCT.
    ``record``: appended ``(observation, action)`` per decision; ``out.steps`` counts."""
    while True:
        agent, o = next(iter(obs.items()))
        a = int(np.argmax(_logits(net, o)))
        if record is not None:
            record.append((o, a))
        obs, _, term, _, _ = env.step({agent: a})
        out.steps += 1
        if term["__all__"]:
            return float(env.final_info()["avg_jct_s"])


def ranked_alternatives(logits: np.ndarray, mask: np.ndarray, k: int) -> list[int]:
    """The ``k`` legal actions after the arg-max, by logit (ties: lower index)."""
    legal = np.flatnonzero(mask > 0.5)
    order = legal[np.argsort(-logits[legal], kind="stable")]
    return [int(a) for a in order[1 : 1 + k]]


def improve_episode(
    env,
    seed: int,
    net,
    branches: int,
    alternatives: int,
    margin: float,
    rng,
    out: Round,
    confirm=None,
) -> None:
    """Steps 1-3 of the round on the episode ``env.reset(seed=seed)``; appends to ``out``.
    ``confirm(env, agent, action, label, gain)``, if given, is asked at each label that
    beats the action on this future by the margin, with the environment in the
    decision's state (not to be stepped: copy it); the label moves only if it answers
    True (:func:`futures_confirm`)."""
    obs, _ = env.reset(seed=seed)
    start = copy.deepcopy(env), copy.deepcopy(obs)
    base: list = []
    base_jct = play_out(env, obs, net, out, base)
    choosable = [i for i, (o, _) in enumerate(base) if (o["action_mask"] > 0.5).sum() > 1]
    picked = (
        set(rng.choice(choosable, size=min(branches, len(choosable)), replace=False).tolist())
        if choosable
        else set()
    )
    labels = [a for _, a in base]
    improved = [False] * len(base)
    # replay the (deterministic) episode from its start, copying it at each branch point
    env, obs = start
    for i, (o, a) in enumerate(base):
        agent = next(iter(obs))
        if i in picked:
            best, best_jct = a, base_jct
            for alt in ranked_alternatives(_logits(net, o), o["action_mask"], alternatives):
                jct = _play(copy.deepcopy(env), agent, alt, net, out)
                out.branches += 1
                if jct < best_jct:
                    best, best_jct = alt, jct
            gain = (base_jct - best_jct) / base_jct
            out.gains.append(gain)
            if best != a and gain > margin:
                if confirm is None or confirm(env, agent, a, best, gain):
                    labels[i], improved[i] = best, True
                else:
                    out.unconfirmed += 1
        obs, _, term, _, _ = env.step({agent: a})
    out.observations += [o for o, _ in base]
    out.labels += labels
    out.improved += improved
    out.episode_jct.append(base_jct)
    out.decisions += len(base)


def resample_future(env, rng) -> int:
    """Replace the jobs still to arrive in ``env``'s simulator by as many consecutive
    jobs of its episode's source from a random start (``rng``), keeping their job ids
    and the first pending arrival time, and that slice's own gaps after it: the same
    state, another future. Returns how many were replaced (0 when none is pending)."""
    import dataclasses

    sim = env.sim
    old = sim.pending_arrivals()
    if not old:
        return 0
    source = env.sources[env.source][0]
    m = len(old)
    if m > len(source):
        raise ValueError(f"{m} pending arrivals but the source has {len(source)} jobs")
    start = int(rng.integers(0, len(source) - m + 1))
    other = source[start : start + m]
    t0, s0 = old[0].submit_time, other[0].submit_time
    sim.replace_arrivals([
        dataclasses.replace(o, job_id=j.job_id, submit_time=t0 + (o.submit_time - s0))
        for o, j in zip(other, old, strict=True)
    ])  # fmt: skip
    return m


def future_gains(state, agent, action: int, label: int, net, futures: int, seed) -> list[float]:
    """``label``'s gain over ``action`` (a fraction of ``action``'s average JCT) on each
    of ``futures`` resampled futures of ``state`` (``seed``: the futures' generator
    seed); both played out by ``net`` on one future (common random numbers). Empty
    when nothing is left to arrive: the only future is the real one."""
    gains = []
    for k in range(futures):
        future = copy.deepcopy(state)
        if not resample_future(future, np.random.default_rng([*seed, k])):
            break
        twin = copy.deepcopy(future)
        own, moved = _play(future, agent, action, net), _play(twin, agent, label, net)
        gains.append((own - moved) / own)
    return gains


def _play(env, agent, action: int, net, out: Round | None = None) -> float:
    """``agent`` takes ``action`` in ``env``, then ``net`` plays it out greedily: the
    episode's average JCT. ``out.steps`` counts the steps, when given."""
    out = Round() if out is None else out
    nxt, _, term, _, _ = env.step({agent: action})
    out.steps += 1
    if term["__all__"]:
        return float(env.final_info()["avg_jct_s"])
    return play_out(env, nxt, net, out)


def futures_confirm(net, futures: int, margin: float, seed: int):
    """The ``confirm`` of :func:`improve_episode` for ``train.improve_futures``: a
    label moves if its mean gain over ``futures`` resampled futures exceeds
    ``margin`` (a label with no future left to resample keeps its own)."""
    calls = [0]

    def confirm(state, agent, action, label, gain) -> bool:
        calls[0] += 1
        gains = future_gains(state, agent, action, label, net, futures, (seed, calls[0]))
        return float(np.mean(gains)) > margin if gains else True

    return confirm


def _masked_logits(net, data: dict, n: int):
    """``net``'s masked logits on every observation (masked actions ``MASKED_LOGIT``)."""
    import torch

    with torch.inference_mode():
        batches = [{k: v[lo : lo + 256] for k, v in data.items()} for lo in range(0, n, 256)]
        return torch.cat([net.forward_padded(b)[0] for b in batches])


def fit(
    net, rnd: Round, epochs: int, lr: float, weight: float, seed: int, target: str = "hard"
) -> dict[str, float]:
    """Step 4: cross-entropy of ``net``'s masked logits against the round's labels,
    improved decisions weighted ``weight`` (minibatches of 256, Adam, seeded order).
    ``target="soft"``: the other decisions' targets are ``net``'s own distribution
    before the fit, each minibatch also holds every improved decision, and no
    improved decision means no fit. Returns the last epoch's accuracy on all labels
    and on the improved ones, and the mean KL from the distribution before the fit."""
    import torch

    from agents.gnn import categorical_kl

    n = len(rnd.labels)
    data = {
        k: torch.as_tensor(np.stack([o[k] for o in rnd.observations])) for k in rnd.observations[0]
    }
    labels = torch.as_tensor(rnd.labels)
    imp = torch.as_tensor(rnd.improved, dtype=torch.bool)
    w = torch.where(imp, float(weight), 1.0)
    net.eval()
    start = _masked_logits(net, data, n)
    before = torch.softmax(start, dim=-1)
    soft = target == "soft"
    targets = torch.where(
        imp[:, None], torch.nn.functional.one_hot(labels, before.size(1)).to(before.dtype), before
    ) if soft else labels  # fmt: skip
    improved_idx = torch.nonzero(imp).flatten()
    rest = torch.nonzero(~imp).flatten() if soft else torch.arange(n)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    net.train()
    for _ in range(epochs if not soft or len(improved_idx) else 0):
        order = rest[torch.as_tensor(rng.permutation(len(rest)))]
        for lo in range(0, max(len(order), 1), 256):
            idx = order[lo : lo + 256]
            if soft:
                idx = torch.cat([improved_idx, idx])
            logits, _ = net.forward_padded({k: v[idx] for k, v in data.items()})
            ce = torch.nn.functional.cross_entropy(logits, targets[idx], reduction="none")
            loss = (ce * w[idx]).sum() / w[idx].sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    end = _masked_logits(net, data, n)
    hits = end.argmax(-1) == labels
    kl = categorical_kl(start, end)  # KL(round start ‖ after the fit)
    return {
        "accuracy": float(hits.float().mean()),
        "improved_accuracy": float(hits[imp].float().mean()) if bool(imp.any()) else float("nan"),
        "kl_from_round_start": float(kl.clamp_min(0.0).mean()),
    }


def improvement_round(
    cfg, mc, tc, seed: int, it: int, weights: dict, progress=None
) -> tuple[dict, dict]:
    """One round from the ``gnn.``-prefixed ``weights`` (one shared module): the
    improved weights (same keys) and the round's figures for TensorBoard."""
    import dataclasses

    import torch

    from agents.algorithm import env_setup
    from agents.gnn import build_gnn
    from envs.observations import feature_dims

    env_cls, env_config, builder = env_setup(cfg, mc, tc, seed)
    net = build_gnn(feature_dims(builder.observation_space), dataclasses.asdict(mc))
    net.load_state_dict({k[len("gnn.") :]: torch.as_tensor(v) for k, v in weights.items()})
    net.eval()
    env = env_cls(env_config)
    rng = np.random.default_rng([seed, it])
    rnd = Round()
    confirm = (
        futures_confirm(net, tc.improve_futures, tc.improve_margin, seed * 1000 + it)
        if tc.improve_futures
        else None
    )
    for k in range(tc.improve_episodes):
        improve_episode(
            env, seed * 1000 + 500_000 + it * tc.improve_episodes + k, net,
            tc.improve_branches, tc.improve_alternatives, tc.improve_margin, rng, rnd,
            confirm,
        )  # fmt: skip
        if progress is not None:
            progress(k + 1)
    torch.manual_seed(seed * 7919 + it)
    figures = fit(
        net, rnd, tc.improve_epochs, tc.improve_lr, tc.improve_weight, seed + it,
        tc.improve_target,
    )  # fmt: skip
    gains = np.asarray(rnd.gains) if rnd.gains else np.zeros(1)
    figures.update(
        decisions=float(rnd.decisions),
        env_steps=float(rnd.steps),
        branches=float(rnd.branches),
        improved=float(sum(rnd.improved)),
        unconfirmed=float(rnd.unconfirmed),
        mean_gain=float(gains.mean()),
        positive_gain=float((gains > 0).mean()),
        max_gain=float(gains.max()),
        episode_avg_jct_s=float(np.mean(rnd.episode_jct)),
    )
    return {f"gnn.{k}": v.detach().clone() for k, v in net.state_dict().items()}, figures
