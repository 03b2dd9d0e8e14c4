"""One step of policy improvement on the lookahead teacher, with a fitted advantage.

The shipped agents are clones of the ``lookahead`` teacher and lose to it
(docs/agents.md, "Where the evidence stands"); the teacher itself is the best policy
measured, and counting the harm a placement does to the running jobs leaves it level
(``masked:lookahead-harm``). What one step cannot see is the future: which placement
leaves room for the jobs to come and costs the running ones least over their remaining
work. This learns that from the teacher's own rollouts, the way approximate policy
iteration does (Bertsekas & Tsitsiklis, *Neuro-Dynamic Programming*, 1996, ch. 6;
Lagoudakis & Parr, JMLR 2003), in the teacher's action space:

1. **Data** (:func:`collect_episode`): the teacher (:class:`agents.teachers.MaskedLookahead`)
   plays a training window of the suite's ``train`` split. At a random subset of the
   job decisions with two or more proposals (:func:`agents.teachers.plan_options`),
   the simulator is forked once per proposal; the proposal is followed inside the
   masks, then the teacher places every later job up to the ``horizon``-th arrival,
   and the fork's :meth:`~marl_sched.simulator.Simulator.estimated_total_jct` of the
   jobs submitted by then is the proposal's cost. The forks share every arrival and
   random draw (common random numbers), so a proposal's cost minus the teacher's own
   pick's is ``Q_teacher(s, a) - Q_teacher(s, teacher(s))`` on this window's future,
   with none of the noise the other decisions put in a return.
2. **Fit** (:func:`fit`): ridge regression of that difference, in jobs' worth of JCT
   (over the teacher's branch's mean JCT estimate, so windows of hour-long and
   day-long jobs pool), on
   the difference of the two placements' :data:`FEATURES` (what the agents can see:
   the job as the duration predictor shows it, the cluster view, the running jobs'
   pressure; no future arrival, no true length). No intercept: the teacher's pick has
   advantage 0 by construction. One future per sample; the regression averages over
   the many windows and decisions, which single labels cannot
   (:mod:`agents.label_futures`: a label won on its own future wins on 42 % of others).
   The ridge weight is chosen by leave-one-scenario-out cross-validation on the
   training windows only.
3. **Act** (:class:`MaskedLookaheadFitted`): per job, the proposal with the lowest
   fitted advantage (the teacher's pick on ties, and whenever no proposal is fitted
   lower), followed inside the masks. All weights 0 is the teacher exactly.

Why not RLlib: the decision here is one choice among a job's few proposals, scored by
branched rollouts of a forked simulator; RLlib's env runners sample straight episodes
and have no place for a fork (as :mod:`agents.improve` says). Why not a library
regressor: ordinary ridge on ten features is a few lines of numpy, and scikit-learn is
not a dependency of the project.

    python -m agents.fitted_choice collect --out DIR [--seeds 0-3] [--per-episode 50] \\
        [--horizon 40] [--workers 2]
    python -m agents.fitted_choice fit --data DIR --out checkpoints/lookahead-fitted/model.json
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agents.teachers import (
    MaskedLookahead,
    fastest,
    horizon_end,
    plan_options,
    predicted_iteration_time,
    residents_harm,
)
from marl_sched.config import REPO_ROOT
from marl_sched.errors import InputError
from marl_sched.jobs import Job, Placement
from marl_sched.simulator import ClusterView, Simulator

#: what a proposal is described by (all read from the job as the predictor shows it
#: and the cluster view before the placement)
FEATURES = (
    "slowdown",  # the job's predicted iteration time over its isolated one
    "harm",  # slowdown it adds to running jobs near it, GPU-equivalents per worker
    "servers",  # servers its tasks use
    "racks",
    "subclusters",
    "servers_opened",  # wholly free servers it starts using
    "left_free",  # free GPUs left on the servers it uses, in servers' worth
    "gpu_speed",  # mean relative speed of its workers' GPUs
    "subcluster_free",  # free GPU fraction of its workers' subclusters, before
    "slowdown_x_length",  # slowdown x log10 of its estimated isolated run time (s)
)
MODEL_FORMAT = "marl-sched/fitted-choice/1"
DEFAULT_MODEL = REPO_ROOT / "checkpoints" / "lookahead-fitted" / "model.json"


def isolated_run_s(job: Job, view: ClusterView) -> float:
    """The job's estimated isolated run time (s): its estimated iterations (as the
    predictor shows them) at its isolated iteration time; nan without an estimate."""
    iso = view.perf.isolated_iteration_time(job.model, job.num_workers, job.num_ps)
    return float(job.iterations) * iso


def option_features(job: Job, view: ClusterView, p: Placement, harms=None) -> np.ndarray:
    """:data:`FEATURES` of placing ``job`` as ``p`` on ``view`` (``harms``:
    :func:`agents.teachers.residents_harm` of the job, shared by its proposals)."""
    topo = view.topology
    iso = view.perf.isolated_iteration_time(job.model, job.num_workers, job.num_ps)
    slowdown = predicted_iteration_time(job, view, p) / iso
    worker_harm, ps_harm = residents_harm(job, view) if harms is None else harms
    wg, pg = list(p.worker_groups), list(p.ps_groups)
    harm = (worker_harm[wg].sum() + ps_harm[pg].sum()) / max(job.num_workers, 1)
    servers = np.unique(topo.group_server[wg + pg])
    w_servers, used = np.unique(topo.group_server[wg], return_counts=True)
    server_free = np.bincount(
        topo.group_server, weights=np.asarray(view.group_free, float), minlength=topo.n_servers
    )
    cap = topo.server_gpus[w_servers].astype(float)
    opened = float(np.sum(server_free[w_servers] >= cap))
    left = float(np.sum(np.maximum(server_free[w_servers] - used, 0.0) / cap))
    racks = np.unique(topo.server_rack[servers])
    subclusters = np.unique(topo.rack_subcluster[racks])
    w_sc = topo.group_subcluster[wg]
    sc_cap = np.bincount(topo.group_subcluster, weights=topo.group_capacity.astype(float))
    sc_free = np.bincount(
        topo.group_subcluster, weights=np.asarray(view.group_free, float),
        minlength=len(sc_cap),
    )  # fmt: skip
    run_s = isolated_run_s(job, view)
    log_len = math.log10(max(run_s, 1.0)) if math.isfinite(run_s) else 0.0
    return np.array([
        slowdown,
        harm,
        len(servers),
        len(racks),
        len(subclusters),
        opened,
        left,
        float(topo.group_speed[wg].mean()) if wg else 0.0,
        float(np.mean(sc_free[w_sc] / sc_cap[w_sc])) if wg else 0.0,
        slowdown * log_len,
    ])  # fmt: skip


def branch_cost(sim: Simulator, placement: Placement | None, policy, predictor,
                until: float) -> float:  # fmt: skip
    """Total JCT estimate (s) of the jobs submitted by ``until`` when ``sim``'s pending
    job is placed as ``placement`` and ``policy`` places the rest (on a fork)."""
    f = sim.fork()
    f.apply(placement)
    while (nxt := f.next_decision()) is not None and f.now <= until:
        f.apply(policy.place(predictor.visible_job(nxt), f.view()))
    return f.estimated_total_jct(until)


@dataclass
class Decision:
    """A decision of a teacher episode, before the teacher's pick is applied."""

    job: Job  # as the simulator holds it
    vis: Job  # as the duration predictor shows it
    view: ClusterView
    options: list[Placement]
    pick: Placement  # the teacher's, one of ``options``
    run_s: float  # :func:`isolated_run_s` of ``vis`` (finite)


class TeacherEpisode:
    """The teacher (:class:`agents.teachers.MaskedLookahead`) on a window of the
    suite (seed ``seed``: workload and policy), as the benchmark runs it."""

    def __init__(self, suite_path: str, scenario: str, seed: int, split: str = "train"):
        from marl_sched.benchmark.suite import load_suite
        from marl_sched.runner import build_cluster, load_workload, make_simulator

        suite = load_suite(suite_path)
        sc = next((s for s in suite.split(split) if s.name == scenario), None)
        if sc is None:
            raise InputError(f"{suite_path}: no scenario {scenario!r} in split {split!r}")
        cfg = suite.config_for(sc, seed=seed)
        topo, perf = build_cluster(cfg)
        self.workload = load_workload(cfg, perf)
        self.policy = MaskedLookahead()
        self.policy.reset(topo, seed)
        self.predictor = self.workload.predictor()
        if self.predictor.kind == "history":
            raise InputError(f"{suite_path}: {scenario}: forks need a stateless predictor")
        self.sim = make_simulator(cfg, topo, perf, self.workload.jobs, self.predictor,
                                  self.policy)  # fmt: skip

    def decisions(self, per_episode: int, rng) -> Iterator[Decision]:
        """Play the episode to its end; yield about ``per_episode`` of its decisions
        with two or more proposals and an estimated length, drawn by ``rng``, each
        before the teacher's pick is applied (the caller may fork the simulator)."""
        sim, policy, predictor = self.sim, self.policy, self.predictor
        rate = min(1.0, per_episode / max(len(self.workload.jobs), 1))
        while (job := sim.next_decision()) is not None:
            vis, view = predictor.visible_job(job), sim.view()
            session = policy.open_session(vis, view)
            if not session.feasible() or session.waits():
                sim.apply(None)
                continue
            options = plan_options(policy.planner, session)
            pick = fastest(vis, view, options)
            run_s = isolated_run_s(vis, view)
            if len(options) >= 2 and math.isfinite(run_s) and rng.random() < rate:
                yield Decision(job, vis, view, options, pick, run_s)
            sim.apply(policy.follow_plan(session, pick))

    def made(self, d: Decision, plan: Placement) -> Placement | None:
        """``plan`` followed inside the masks from a fresh session of ``d``'s job."""
        return self.policy.follow_plan(self.policy.open_session(d.vis, d.view), plan)


def collect_episode(suite_path: str, scenario: str, seed: int, per_episode: int,
                    horizon_jobs: int, split: str = "train") -> dict:  # fmt: skip
    """The teacher plays ``scenario`` (seed ``seed``: workload and policy); about
    ``per_episode`` of its decisions with two or more proposals are branched (module
    docstring). Returns the samples and the episode's own figures."""
    ep = TeacherEpisode(suite_path, scenario, seed, split)
    sim, policy, predictor = ep.sim, ep.policy, ep.predictor
    samples, t0 = [], time.perf_counter()
    for d in ep.decisions(per_episode, np.random.default_rng([seed, 7919])):
        harms = residents_harm(d.vis, d.view)
        until = horizon_end(sim, horizon_jobs)
        counted = bisect.bisect_right(sim.jobs, until, key=lambda j: j.submit_time)
        rows = []
        for p in d.options:
            made = ep.made(d, p)
            if made is None:
                continue
            rows.append({
                "features": option_features(d.vis, d.view, made, harms).tolist(),
                "cost": branch_cost(sim, made, policy, predictor, until),
                "teacher": p is d.pick,
                "as_planned": _same(made, p),
            })  # fmt: skip
        if sum(r["teacher"] for r in rows) == 1 and len(rows) >= 2:
            teacher_cost = next(r["cost"] for r in rows if r["teacher"])
            samples.append({
                "job": d.job.job_id,
                "run_s": d.run_s,
                "scale_s": teacher_cost / max(counted, 1),
                "options": rows,
            })  # fmt: skip
    records = [r for r in sim.result() if r.job.job_id >= ep.workload.warmup]
    return {
        "scenario": scenario,
        "seed": seed,
        "horizon_jobs": horizon_jobs,
        "per_episode": per_episode,
        "features": list(FEATURES),
        "avg_jct_s": float(np.mean([r.jct for r in records])) if records else math.nan,
        "decisions": sim.stats.decisions,
        "branched": len(samples),
        "wall_s": time.perf_counter() - t0,
        "samples": samples,
    }


def _same(a: Placement, b: Placement) -> bool:
    return sorted(a.worker_groups) == sorted(b.worker_groups) and sorted(a.ps_groups) == sorted(
        b.ps_groups
    )


# ---------------------------------------------------------------- fit


def design(episodes: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per (decision, non-teacher proposal): the feature difference to the teacher's
    pick, the cost difference in jobs' worth of JCT (over the teacher's branch's mean
    JCT estimate of the jobs it counts), the episode's scenario index and the
    decision's index (rows of one decision share it)."""
    xs, ys, groups, decisions = [], [], [], []
    names = sorted({e["scenario"] for e in episodes})
    d = 0
    for e in episodes:
        for s in e["samples"]:
            base = next(o for o in s["options"] if o["teacher"])
            for o in s["options"]:
                if o["teacher"]:
                    continue
                xs.append(np.subtract(o["features"], base["features"]))
                ys.append((o["cost"] - base["cost"]) / s["scale_s"])
                groups.append(names.index(e["scenario"]))
                decisions.append(d)
            d += 1
    n = len(FEATURES)
    x = np.array(xs, float).reshape(-1, n)
    return x, np.array(ys, float), np.array(groups, int), np.array(decisions, int)


def ridge(x: np.ndarray, y: np.ndarray, lam: float, scale: np.ndarray) -> np.ndarray:
    """Ridge weights without intercept on features divided by ``scale``, returned in
    the features' own units."""
    z = x / scale
    w = np.linalg.solve(z.T @ z + lam * len(y) * np.eye(z.shape[1]), z.T @ y)
    return w / scale


def choice_gain(w: np.ndarray, x: np.ndarray, y: np.ndarray, decisions: np.ndarray) -> float:
    """Mean over decisions of the measured advantage (negative: better than the
    teacher) of the proposal ``w`` picks: the teacher's (0) unless one is fitted
    below 0."""
    score = x @ w
    total, n = 0.0, 0
    for d in np.unique(decisions):
        rows = np.flatnonzero(decisions == d)
        best = rows[np.argmin(score[rows])]
        total += y[best] if score[best] < 0 else 0.0
        n += 1
    return total / max(n, 1)


LAMBDAS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)


def fit(episodes: list[dict], lambdas=LAMBDAS) -> dict:
    """The ridge weights over every sample, the ridge weight chosen by the best mean
    held-out :func:`choice_gain` over scenarios (leave one scenario out), and the
    cross-validation figures (with the chosen ridge weight: the held-out R² of the
    clipped targets; the share of decisions where the teacher's pick is the best).
    Targets beyond the 1st/99th percentile are clipped there (a few decisions whose
    fork queued a whole burst of jobs dominate a square loss)."""
    x, y, groups, decisions = design(episodes)
    if len(y) < 2 * len(FEATURES):
        raise InputError(f"fit: {len(y)} samples, need at least {2 * len(FEATURES)}")
    lo, hi = np.percentile(y, [1, 99])
    yc = np.clip(y, lo, hi)
    scale = np.maximum(x.std(axis=0), 1e-9)
    cv, cv_pred = {}, {}  # per ridge weight: held-out choice gains, held-out predictions
    for lam in lambdas:
        gains, pred = [], np.zeros_like(yc)
        for g in np.unique(groups):
            train, held = groups != g, groups == g
            w = ridge(x[train], yc[train], lam, scale)
            gains.append(choice_gain(w, x[held], y[held], decisions[held]))
            pred[held] = x[held] @ w
        cv[lam], cv_pred[lam] = gains, pred
    best = min(lambdas, key=lambda lam: float(np.mean(cv[lam])))
    w = ridge(x, yc, best, scale)
    return {
        "format": MODEL_FORMAT,
        "features": list(FEATURES),
        "weights": [float(v) for v in w],
        "ridge": best,
        "samples": len(y),
        "decisions": int(len(np.unique(decisions))),
        "scenarios": sorted({e["scenario"] for e in episodes}),
        "seeds": sorted({e["seed"] for e in episodes}),
        "horizon_jobs": sorted({e["horizon_jobs"] for e in episodes}),
        "clip": [float(lo), float(hi)],
        "cv_choice_gain": {str(k): [float(v) for v in g] for k, g in cv.items()},
        "cv_r2": _r2(yc, cv_pred[best]),
        "train_r2": _r2(yc, x @ w),
        "teacher_best_share": float(
            np.mean([y[decisions == d].min() >= 0 for d in np.unique(decisions)])
        ),
        "train_choice_gain": choice_gain(w, x, y, decisions),
        "train_moved_share": float(
            np.mean([(x[decisions == d] @ w).min() < 0 for d in np.unique(decisions)])
        ),
        "teacher_choice_gain": 0.0,
        "oracle_choice_gain": _oracle(y, decisions),
    }


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    """Share of the (clipped) targets' variance around their mean that ``pred`` explains."""
    return float(1.0 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2))


def _oracle(y: np.ndarray, decisions: np.ndarray) -> float:
    """Mean over decisions of the best measured advantage (0 when the teacher's is)."""
    return float(np.mean([min(0.0, y[decisions == d].min()) for d in np.unique(decisions)]))


def load_model(path: str | Path) -> np.ndarray:
    """The weights of a model file :func:`fit` wrote (JSON; one line naming the file
    and key otherwise)."""
    from marl_sched.files import read_input_text

    text = read_input_text(path, "fitted-choice model", str(path))
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != MODEL_FORMAT:
        raise InputError(f"{path}: format: expected {MODEL_FORMAT!r}")
    if data.get("features") != list(FEATURES):
        raise InputError(f"{path}: features: expected {list(FEATURES)}")
    w = data.get("weights")
    if (
        not isinstance(w, list)
        or len(w) != len(FEATURES)
        or not all(isinstance(v, int | float) and math.isfinite(v) for v in w)
    ):
        raise InputError(f"{path}: weights: expected {len(FEATURES)} finite numbers")
    return np.array(w, float)


class MaskedLookaheadFitted(MaskedLookahead):
    """:class:`MaskedLookahead` choosing among the same proposals by a fitted
    advantage over the teacher's pick (module docstring): the proposal with the lowest
    ``w · (features(p) - features(teacher's pick))`` when it is below 0, else the
    teacher's. ``checkpoint``: a model file :func:`fit` wrote (default: the shipped
    ``checkpoints/lookahead-fitted/model.json``)."""

    name = "masked:lookahead-fitted"
    description = (
        "masked:lookahead choosing among its proposals by an advantage fitted on the "
        "teacher's branched rollouts (checkpoint: a fitted-choice model)"
    )

    def __init__(self, checkpoint: str | None = None) -> None:
        super().__init__()
        self.weights = load_model(checkpoint or DEFAULT_MODEL)

    def _plan(self, job, view, session):
        options = plan_options(self.planner, session)
        pick = fastest(job, view, options)
        if len(options) < 2 or not np.any(self.weights):
            return pick
        return choose(job, view, options, pick, self.weights)


def choose(job: Job, view: ClusterView, options, pick: Placement, w: np.ndarray) -> Placement:
    """The option with the lowest fitted advantage over ``pick`` (``pick`` unless one
    is below 0; ties: proposal order)."""
    harms = residents_harm(job, view)
    base = option_features(job, view, pick, harms)
    best, best_score = pick, 0.0
    for p in options:
        if p is pick:
            continue
        score = float(w @ (option_features(job, view, p, harms) - base))
        if score < best_score - 1e-12:
            best, best_score = p, score
    return best


# ---------------------------------------------------------------- command line


def _collect_one(args: tuple) -> tuple[str, dict]:
    import torch

    torch.set_num_threads(1)
    suite, scenario, seed, per_episode, horizon, out = args
    path = Path(out) / f"{scenario}-s{seed}.json"
    if path.is_file():  # checked by _held before the pool started
        return str(path), json.loads(path.read_text())
    result = collect_episode(suite, scenario, seed, per_episode, horizon)
    from marl_sched.files import atomic_write_text

    atomic_write_text(path, json.dumps(result) + "\n")
    return str(path), result


def _seeds(text: str) -> list[int]:
    if "-" in text:
        a, b = text.split("-", 1)
        return list(range(int(a), int(b) + 1))
    return [int(v) for v in text.split(",")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agents.fitted_choice", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="branch the teacher's decisions on train windows")
    c.add_argument("--out", required=True)
    c.add_argument("--suite", default="benchmarks/default.yaml")
    c.add_argument("--seeds", default="0-3")
    c.add_argument("--per-episode", type=int, default=50)
    c.add_argument("--horizon", type=int, default=40)
    c.add_argument("--workers", type=int, default=2)
    f = sub.add_parser("fit", help="fit the advantage model on collected episodes")
    f.add_argument("--data", required=True)
    f.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "collect":
            return _main_collect(a)
        return _main_fit(a)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _main_collect(a) -> int:
    from multiprocessing import get_context

    from marl_sched.benchmark.suite import load_suite

    try:
        seeds = _seeds(a.seeds)
    except ValueError:
        raise InputError(f"--seeds: {a.seeds!r}: expected A-B or A,B,...") from None
    if not (1 <= a.per_episode <= 10_000 and 0 <= a.horizon <= 100_000 and a.workers >= 1):
        raise InputError("--per-episode 1..10000, --horizon 0..100000, --workers >= 1")
    scenarios = [s.name for s in load_suite(a.suite).split("train")]
    out = Path(a.out)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise InputError(f"--out: {out}: not a folder")
    out.mkdir(parents=True, exist_ok=True)
    tasks = [(a.suite, s, seed, a.per_episode, a.horizon, str(out)) for seed in seeds
             for s in scenarios]  # fmt: skip
    for t in tasks:
        _held(out / f"{t[1]}-s{t[2]}.json", a.per_episode, a.horizon)
    t0 = time.perf_counter()
    with get_context("spawn").Pool(a.workers) as pool:
        for i, (path, r) in enumerate(pool.imap_unordered(_collect_one, tasks), 1):
            el = time.perf_counter() - t0
            print(f"[{i}/{len(tasks)}] {path}: {r['branched']} decisions branched, "
                  f"{r['wall_s']:.0f} s; elapsed {el:.0f} s, ETA "
                  f"{el / i * (len(tasks) - i):.0f} s", flush=True)  # fmt: skip
    return 0


def _held(path: Path, per_episode: int, horizon: int) -> None:
    """An episode file already in ``--out`` is reused only when collect wrote it with
    the same ``--per-episode`` and ``--horizon`` (one line naming it otherwise)."""
    from marl_sched.files import read_input_text

    if not path.exists() and not path.is_symlink():
        return
    if path.is_symlink() or not path.is_file():
        raise InputError(f"--out: {path}: not an episode file collect wrote")
    try:
        held = json.loads(read_input_text(path, "json", f"--out: {path}"))
        same = held["per_episode"] == per_episode and held["horizon_jobs"] == horizon
    except (ValueError, KeyError, TypeError):
        raise InputError(f"--out: {path}: not an episode file collect wrote") from None
    if not same:
        raise InputError(
            f"--out: {path}: collected with --per-episode {held['per_episode']} "
            f"--horizon {held['horizon_jobs']}; use another --out or delete it"
        )


def _main_fit(a) -> int:
    from marl_sched.files import atomic_write_text, read_input_text

    data = Path(a.data)
    if not data.is_dir() or data.is_symlink():
        raise InputError(f"--data: {data}: not a folder")
    episodes = []
    for p in sorted(data.glob("*.json")):
        if p.is_symlink():
            raise InputError(f"--data: {p}: a link, not a file collect wrote")
        try:
            e = json.loads(read_input_text(p, "json", f"--data: {p}"))
            if e.get("features") != list(FEATURES):
                raise ValueError("features differ")
        except (ValueError, AttributeError) as exc:
            raise InputError(f"--data: {p}: not an episode collect wrote ({exc})") from None
        episodes.append(e)
    if not episodes:
        raise InputError(f"--data: {data}: no episode files")
    model = fit(episodes)
    atomic_write_text(a.out, json.dumps(model, indent=1) + "\n")
    print(json.dumps({k: v for k, v in model.items() if k != "cv_choice_gain"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
