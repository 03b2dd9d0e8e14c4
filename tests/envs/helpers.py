"""Helpers of the environment tests: the tiny config and random masked rollouts."""

from __future__ import annotations

import numpy as np

from marl_sched.config import REPO_ROOT

TINY = str(REPO_ROOT / "configs" / "tiny.yaml")


def masked_random_action(obs: dict[str, np.ndarray], rng: np.random.Generator) -> int:
    """A uniformly random legal action."""
    return int(rng.choice(np.flatnonzero(obs["action_mask"])))


def rollout(env, seed: int | None, action_seed: int = 0, max_steps: int = 20_000) -> list[tuple]:
    """One episode of the RLlib env under random masked actions: every step's
    ``(acting agent, action, obs, rewards, terminateds, truncateds, infos)``."""
    rng = np.random.default_rng(action_seed)
    obs, _ = env.reset(seed=seed)
    trail = [(None, None, obs, {}, {}, {}, {})]
    for _ in range(max_steps):
        agent = env.acting_agent
        action = masked_random_action(obs[agent], rng)
        obs, rew, term, trunc, info = env.step({agent: action})
        trail.append((agent, action, obs, rew, term, trunc, info))
        if term["__all__"] or trunc["__all__"]:
            return trail
    raise AssertionError(f"episode did not end within {max_steps} steps")
