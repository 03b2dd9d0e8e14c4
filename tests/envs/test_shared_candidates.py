"""The hints of a job share the learned model's candidate features
(``PlacementSession._ask`` / ``InterferenceAwarePolicy.candidate_cache``): the same
observations and masks as when every hint computes its own, and fewer rows computed."""

from __future__ import annotations

import numpy as np

import marl_sched.interference.features as interference
from envs.rllib_env import ClusterPlacementEnv
from envs.session import PlacementSession
from marl_sched.config import REPO_ROOT

CONFIG = REPO_ROOT / "configs" / "default.yaml"


def _walk(steps: int, monkeypatch, share: bool) -> tuple[list[dict], int]:
    """Observations of a seeded walk over legal actions, and the feature rows computed."""
    if not share:
        monkeypatch.setattr(
            PlacementSession, "_ask", lambda self, hs, view: [h.place(self.job, view) for h in hs]
        )
    rows = [0]
    inner = interference.candidate_features

    def counted(view, job, wgs, pgs):
        rows[0] += len(wgs)
        return inner(view, job, wgs, pgs)

    monkeypatch.setattr(interference, "candidate_features", counted)
    env = ClusterPlacementEnv({"config": CONFIG, "env": {"window_jobs": 60}, "seed": 2})
    rng = np.random.default_rng(4)
    obs, _ = env.reset(seed=2)
    out = []
    for _ in range(steps):
        agent, o = next(iter(obs.items()))
        out.append(o)
        obs, _, terminated, _, _ = env.step(
            {agent: int(rng.choice(np.flatnonzero(o["action_mask"])))}
        )
        if terminated["__all__"]:
            break
    monkeypatch.undo()
    return out, rows[0]


def test_shared_candidate_features_change_no_observation(monkeypatch):
    shared, rows_shared = _walk(120, monkeypatch, share=True)
    own, rows_own = _walk(120, monkeypatch, share=False)
    assert len(shared) == len(own)
    for a, b in zip(shared, own, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert 0 < rows_shared < rows_own  # the hints did share (else this shows nothing)
