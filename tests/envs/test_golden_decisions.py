"""Golden decisions: the placements of every heuristic, control and ``+lc`` policy and of
the shipped checkpoint on seeded windows, the learned interference model's feature rows
of candidate and running jobs, and the environment's observations and rewards on a
seeded random walk.

A change that speeds up the hint paths (``marl_sched/policies/heuristics.py``,
``marl_sched/interference/features.py``) or the simulator must change no decision, no
feature row and no observation beyond the walks' float tolerance. The data, in ``tests/envs/data/``:

- ``golden_placements.json``: per case (``window/policy``), every placement the policy
  made, in order, as ``[job id, [worker groups], [PS groups]]``; a failure names the
  first decision that differs. The shipped checkpoint's cases are keyed by its weights
  (``window/marl@<tag>``, :func:`checkpoint_tag`): a retrained checkpoint decides
  otherwise and needs its own.
- ``golden_walks.npz``: the walks' observations, each key stacked over the steps (the
  rewards from the second step on: the first observation has none). Integer arrays and
  masks must be equal; feature and reward arrays equal to a relative 1e-5 (on another
  machine type the tiny walk's bytes differed while every placement and feature row
  matched: floating-point kernels move last bits, a code change moves them further). A
  failure names the first step and key that differ.
- ``golden_decisions.json``: the walks' step and hint counts, and the feature rows as
  SHA-256 digests with their row counts (each case did something).

A change that moves a decision or an observation on purpose regenerates the three files on
purpose, with the code before the change for a new checkpoint's cases::

    python -m tests.envs.test_golden_decisions --update
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from unittest import mock

import numpy as np
import pytest

from marl_sched.config import REPO_ROOT, load_config
from marl_sched.policies import heuristic_names
from marl_sched.policies.base import control_names, load_control_names
from marl_sched.runner import build_cluster, load_workload, simulate

GOLDEN = REPO_ROOT / "tests" / "envs" / "data" / "golden_decisions.json"
GOLDEN_PLACEMENTS = REPO_ROOT / "tests" / "envs" / "data" / "golden_placements.json"
GOLDEN_WALKS = REPO_ROOT / "tests" / "envs" / "data" / "golden_walks.npz"
SHIPPED = REPO_ROOT / "checkpoints" / "marl-default"

#: seeded windows: (config, jobs, load override, GPU sharing override)
WINDOWS = {
    "tiny": ("tiny.yaml", 40, None, None),
    "default": ("default.yaml", 80, None, None),
    "default-heavy": ("default.yaml", 120, 2.5, None),
    "default-shared": ("default.yaml", 80, 2.5, 2),
}
#: harmony+lc needs a trained Harmony network: not a hint path
POLICIES = [
    *heuristic_names(),
    *control_names(),
    *(n for n in load_control_names() if "harmony" not in n),
]
FEATURE_WINDOWS = ("default-heavy", "default-shared")
CASES = [(w, p) for w in WINDOWS for p in POLICIES] + [(w, "marl") for w in ("tiny", "default")]


def checkpoint_tag() -> str:
    """The shipped checkpoint's weights, as the first 12 hex digits of their SHA-256:
    its placements are stored per checkpoint (a retrained one decides otherwise)."""
    weights = sorted((SHIPPED / "modules").glob("*.pt"))
    h = hashlib.sha256()
    for path in weights:
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def case_key(window: str, policy: str) -> str:
    return f"{window}/{policy}" + (f"@{checkpoint_tag()}" if policy == "marl" else "")


#: seeded walks: (config, window jobs, steps); the tiny config's env asks the default hints
WALKS = {"tiny": ("tiny.yaml", 40, 150), "default": ("default.yaml", 200, 300)}
HINTS = {
    "hints": ["interference-aware", "resident-aware", "locality", "first-fit", "speed-aware"],
    "global_hints": ["interference-aware", "speed-aware"],
}


def _window(name: str):
    config, jobs, load, sharing = WINDOWS[name]
    cfg = load_config(REPO_ROOT / "configs" / config)
    changes = {"max_jobs": jobs} | ({"load": load} if load is not None else {})
    cfg = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, **changes))
    if sharing is not None:
        cfg = dataclasses.replace(
            cfg, topology=dataclasses.replace(cfg.topology, gpu_sharing=sharing)
        )
    topo, perf = build_cluster(cfg)
    return cfg, topo, perf, load_workload(cfg, perf)


def placements(window: str, policy: str) -> list:
    """``[job id, worker groups, PS groups]`` of every placement ``policy`` made, in order."""
    cfg, topo, perf, workload = _window(window)
    made = []
    if policy == "marl":
        from agents.policy import MarlPolicy, load_agents

        pol = MarlPolicy(agents=load_agents(SHIPPED))
    else:
        from marl_sched.policies import make_policy

        pol = make_policy(policy)
    inner = pol.place

    def recording(job, view):
        p = inner(job, view)
        if p is not None:
            made.append([job.job_id, list(map(int, p.worker_groups)), list(map(int, p.ps_groups))])
        return p

    pol.place = recording
    simulate(cfg, policy, workload, topo, perf, seed=0, policy=pol)
    return made


def feature_rows(window: str) -> tuple[int, str]:
    """How many rows, and the SHA-256 of their bytes, of the learned interference
    model's features that ``interference-aware`` computes on ``window`` (every
    candidate it scores) and of every running job at each of its decisions
    (:func:`~marl_sched.interference.job_features`, as the ``learned`` reward uses)."""
    import marl_sched.interference.features as features
    from marl_sched.policies import make_policy

    cfg, topo, perf, workload = _window(window)
    h = hashlib.sha256()
    rows = [0]

    def keep(x: np.ndarray) -> None:
        x = np.atleast_2d(x)
        rows[0] += len(x)
        h.update(np.ascontiguousarray(x, dtype=np.float64).tobytes())

    inner = features.candidate_features

    def candidates(*args):
        out = inner(*args)
        keep(out)
        return out

    pol = make_policy("interference-aware")
    place = pol.place

    def placing(job, view):
        for r in view.running():
            keep(features.job_features(view, r, r.placement))  # reads model, workers, PS
        return place(job, view)

    pol.place = placing
    with mock.patch.object(features, "candidate_features", candidates):
        simulate(cfg, "interference-aware", workload, topo, perf, seed=0, policy=pol)
    return rows[0], h.hexdigest()


def observations(walk: str) -> tuple[list[dict], int]:
    """The observations of a seeded walk over legal actions of the RLlib env (each
    with the rewards of the step that led to it, under ``"rewards"``), and how many
    hint placements the sessions asked for."""
    from envs.rllib_env import ClusterPlacementEnv
    from envs.session import PlacementSession

    config, jobs, steps = WALKS[walk]
    env = ClusterPlacementEnv(
        {"config": REPO_ROOT / "configs" / config, "env": {"window_jobs": jobs, **HINTS}, "seed": 2}
    )
    asked = [0]
    inner = PlacementSession._ask

    def counting(self, policies, view):
        asked[0] += len(policies)
        return inner(self, policies, view)

    rng = np.random.default_rng(4)
    out = []
    with mock.patch.object(PlacementSession, "_ask", counting):
        obs, _ = env.reset(seed=2)
        rewards = np.zeros(0)
        for _ in range(steps):
            agent, o = next(iter(obs.items()))
            out.append({**o, "rewards": rewards})
            action = int(rng.choice(np.flatnonzero(o["action_mask"])))
            obs, reward, terminated, _, _ = env.step({agent: action})
            rewards = np.array([reward[a] for a in sorted(reward)], dtype=np.float64)
            if terminated["__all__"]:
                break
    return out, asked[0]


def record_walk(walk: str) -> tuple[dict, dict[str, np.ndarray]]:
    """A walk's counts and its observations, each key stacked over the steps."""
    obs, asked = observations(walk)
    assert obs[0]["rewards"].size == 0  # the first observation follows no step
    arrays = {
        key: np.stack([np.asarray(o[key]) for o in (obs[1:] if key == "rewards" else obs)])
        for key in sorted(obs[0])
    }
    return {"steps": len(obs), "hints_asked": asked}, arrays


#: float arrays match to this relative tolerance (and ``ATOL`` near zero)
RTOL, ATOL = 1e-5, 1e-6


def first_observation_difference(got: dict, want: dict) -> str | None:
    """The first step and key where two stacked walks differ, as one line (None: equal
    within :data:`RTOL` for features and rewards, exactly for integers and masks)."""
    if sorted(got) != sorted(want):
        return f"keys {sorted(got)}, golden {sorted(want)}"
    first = None
    for key in sorted(got):
        g, w = got[key], want[key]
        if g.dtype != w.dtype or g.shape != w.shape:
            return f"{key}: {g.dtype}{g.shape}, golden {w.dtype}{w.shape}"
        exact = key.endswith("mask") or not np.issubdtype(g.dtype, np.floating)
        same = g == w if exact else np.isclose(g, w, rtol=RTOL, atol=ATOL)
        bad = np.flatnonzero(~same.reshape(len(g), -1).all(axis=1))
        if bad.size and (first is None or bad[0] < first[0]):
            step = int(bad[0])
            worst = float(np.max(np.abs(g[step].astype(np.float64) - w[step])))
            first = (step, f"step {step}, {key}: off by up to {worst:.3g}")
    return None if first is None else first[1]


def _stored_walks() -> dict[str, dict[str, np.ndarray]]:
    with np.load(GOLDEN_WALKS, allow_pickle=False) as data:
        out: dict[str, dict[str, np.ndarray]] = {}
        for name in data.files:
            walk, key = name.split("/", 1)
            out.setdefault(walk, {})[key] = data[name]
    return out


def _stored() -> dict:
    return json.loads(GOLDEN.read_text())


def first_difference(got: list, want: list) -> str | None:
    """The first decision where ``got`` and ``want`` differ, as one line (None: equal)."""
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            return f"decision {i}: got {g}, golden {w}"
    if len(got) != len(want):
        same = min(len(got), len(want))
        return f"{len(got)} decisions, golden {len(want)} (the first {same} equal)"
    return None


def test_a_failure_names_the_first_differing_decision():
    want = [[0, [1], []], [1, [2, 3], [4]]]
    assert first_difference(want, want) is None
    moved = [[0, [1], []], [1, [2, 5], [4]]]
    named = "decision 1: got [1, [2, 5], [4]], golden [1, [2, 3], [4]]"
    assert first_difference(moved, want) == named
    assert first_difference(want[:1], want) == "1 decisions, golden 2 (the first 1 equal)"


@pytest.mark.parametrize(("window", "policy"), CASES)
def test_placements_are_the_golden_ones(window, policy):
    stored = json.loads(GOLDEN_PLACEMENTS.read_text())
    key = case_key(window, policy)
    # a checkpoint without stored placements: record them with the code before the
    # change under test (see the module docstring), never with the code it tests
    assert key in stored, f"no golden placements for {key}"
    got = placements(window, policy)
    assert len(got) >= 10  # the case placed jobs (else it pins nothing)
    difference = first_difference(got, stored[key])
    assert difference is None, f"{key}: {difference}"


@pytest.mark.parametrize("window", FEATURE_WINDOWS)
def test_interference_features_are_the_golden_ones(window):
    rows, digest = feature_rows(window)
    assert rows >= 100  # candidates were scored and jobs ran (else it pins nothing)
    assert {"rows": rows, "sha256": digest} == _stored()["features"][window]


def test_an_observation_failure_names_the_first_differing_step():
    want = {"group_x": np.zeros((3, 2), np.float32), "action_mask": np.ones((3, 4), np.float32)}
    got = {k: v.copy() for k, v in want.items()}
    assert first_observation_difference(got, want) is None
    got["group_x"][2, 1] = 1e-7  # a last-bit difference near zero is within tolerance
    assert first_observation_difference(got, want) is None
    got["group_x"][2, 1] = 0.01
    assert first_observation_difference(got, want) == "step 2, group_x: off by up to 0.01"
    got["action_mask"][1, 0] = 0.0  # a mask must be equal, and the earlier step is named
    assert first_observation_difference(got, want) == "step 1, action_mask: off by up to 1"


@pytest.mark.parametrize("walk", sorted(WALKS))
def test_observations_of_a_seeded_walk_are_the_golden_ones(walk):
    counts, got = record_walk(walk)
    assert counts["hints_asked"] >= 50  # the walk asked hints (else it pins nothing)
    assert counts == _stored()["observations"][walk]
    difference = first_observation_difference(got, _stored_walks()[walk])
    assert difference is None, f"walk {walk}: {difference}"


if __name__ == "__main__" and "--update" in sys.argv:
    GOLDEN.parent.mkdir(exist_ok=True)
    cases = {case_key(w, p): placements(w, p) for w, p in CASES}
    lines = [f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in cases.items()]
    GOLDEN_PLACEMENTS.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    walks = {w: record_walk(w) for w in sorted(WALKS)}
    arrays = {f"{w}/{k}": a for w, (_, got) in walks.items() for k, a in got.items()}
    np.savez_compressed(GOLDEN_WALKS, **arrays)
    out = {
        "observations": {w: counts for w, (counts, _) in walks.items()},
        "features": {
            w: dict(zip(("rows", "sha256"), feature_rows(w), strict=True)) for w in FEATURE_WINDOWS
        },
    }
    GOLDEN.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {GOLDEN_PLACEMENTS}, {GOLDEN_WALKS} and {GOLDEN}")
