"""How much of the room above the teacher could any state-based choice take? A
diagnostic for :mod:`agents.fitted_choice` (docs/agents.md, "One step of policy
improvement on the teacher").

On each future, some proposal beats the teacher's pick by 0.82 jobs' worth of JCT per
decision on average; a fit on ten placement features finds none of it held out. That
is either the features' fault or the future's. This tells them apart with the most a
scheduler can know, the exact state: at a decision of a teacher episode, each proposal
is played out (as :func:`agents.fitted_choice.branch_cost`) on ``futures`` resampled
futures of the same state. Each future replaces the next ``horizon`` arrivals by as
many consecutive jobs of the window from a random start (their own gaps, from the
first pending arrival on); every proposal sees the same futures (common random
numbers). A chooser that knows the state but not the future picks the proposal with
the lowest mean advantage over some futures; its gain is measured on the others
(cross-fitting: choose on one half, score on the other, both ways), so the choice's
own noise does not count as gain.

    python -m agents.choice_ceiling --out F.json [--seed 3] [--per-episode 10] \\
        [--futures 4] [--horizon 40] [--workers 2]
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

from agents.fitted_choice import TeacherEpisode, branch_cost
from agents.teachers import horizon_end
from marl_sched.errors import InputError
from marl_sched.jobs import Job
from marl_sched.simulator import Simulator


def resampled(sim: Simulator, source: list[Job], horizon: int, rng) -> Simulator | None:
    """A fork of ``sim`` (its pending decision kept) whose next ``horizon`` arrivals are
    ``horizon`` consecutive jobs of ``source`` from a random start, keeping the pending
    arrivals' ids and the first one's time, with the slice's own gaps; later arrivals
    keep their jobs, moved no earlier than the slice's last. None when nothing is left
    to arrive."""
    f = sim.fork()
    f.jobs = list(f.jobs)  # replace_arrivals writes the job list, which forks share
    old = f.pending_arrivals()
    if not old:
        return None
    m = min(horizon, len(old), len(source))
    start = int(rng.integers(0, len(source) - m + 1))
    other = source[start : start + m]
    t0, s0 = old[0].submit_time, other[0].submit_time
    new = [dataclasses.replace(o, job_id=j.job_id, submit_time=t0 + (o.submit_time - s0))
           for o, j in zip(other, old[:m], strict=True)]  # fmt: skip
    last = new[-1].submit_time
    new += [dataclasses.replace(j, submit_time=max(j.submit_time, last)) for j in old[m:]]
    f.replace_arrivals(new)
    return f


def decision_advantages(sim, made, pick_index, policy, predictor, source, horizon,
                        futures, rng) -> np.ndarray:  # fmt: skip
    """``(futures, options)``: each made placement's cost minus the teacher's pick's,
    on each resampled future, in jobs' worth of JCT (over that future's teacher mean
    JCT estimate). Fewer rows when nothing is left to arrive."""
    rows = []
    for _ in range(futures):
        f = resampled(sim, source, horizon, rng)
        if f is None:
            break
        until = horizon_end(f, horizon)
        counted = bisect.bisect_right(f.jobs, until, key=lambda j: j.submit_time)
        costs = np.array([branch_cost(f, p, policy, predictor, until) for p in made])
        scale = costs[pick_index] / max(counted, 1)
        rows.append((costs - costs[pick_index]) / scale)
    return np.array(rows).reshape(-1, len(made))


def cross_fitted_gain(adv: np.ndarray, agreed: bool = False, stakes: float = 0.0) -> float:
    """The gain of choosing, by mean advantage below ``-stakes``, on one half of the
    futures, scored on the other half; the mean of both ways (0: the teacher's pick).
    With ``agreed``, the choice leaves the teacher only where the chosen proposal is
    better on every future of its half, not just on their mean."""
    k = adv.shape[0] // 2
    out = []
    for choose_on, score_on in ((adv[:k], adv[k:]), (adv[k:], adv[:k])):
        mean = choose_on.mean(axis=0)
        a = int(np.argmin(mean))
        leave = choose_on[:, a].max() < 0 if agreed else mean[a] < -stakes
        out.append(float(score_on[:, a].mean()) if leave else 0.0)
    return float(np.mean(out))


def ceiling_episode(suite_path: str, scenario: str, seed: int, per_episode: int,
                    futures: int, horizon: int) -> dict:  # fmt: skip
    """Per branched decision of the teacher's episode: the advantages on each future."""
    ep = TeacherEpisode(suite_path, scenario, seed)
    decisions, t0 = [], time.perf_counter()
    rng = np.random.default_rng([seed, 104729])  # draws the decisions, then their futures
    for d in ep.decisions(per_episode, rng):
        made = [ep.made(d, p) for p in d.options]
        keep = [i for i, m in enumerate(made) if m is not None]
        pick_index = next(k for k, i in enumerate(keep) if d.options[i] is d.pick)
        adv = decision_advantages(
            ep.sim, [made[i] for i in keep], pick_index, ep.policy, ep.predictor,
            ep.workload.jobs, horizon, futures, rng,
        )  # fmt: skip
        if adv.shape[0] >= 2:
            decisions.append(adv.tolist())
    return {"scenario": scenario, "seed": seed, "decisions": decisions,
            "wall_s": time.perf_counter() - t0}  # fmt: skip


def _advantages(episodes: list[dict]) -> list[np.ndarray]:
    """Every decision's ``(futures, options)`` advantages, episode by episode."""
    return [np.array(d) for e in episodes for d in e["decisions"]]


def _interval(x: np.ndarray, idx: np.ndarray) -> list[float]:
    """``[mean, low, high]``: ``x``'s mean per decision with its 95 % percentile interval
    over the bootstrap resamples ``idx`` (``(boot, n)`` decision indices)."""
    m = x[idx].mean(axis=1)
    return [float(x.mean()), float(np.percentile(m, 2.5)), float(np.percentile(m, 97.5))]


def _resamples(n: int, boot: int, seed: int) -> np.ndarray:
    """``(boot, n)`` decision indices drawn with replacement."""
    return np.random.default_rng(seed).integers(0, n, size=(boot, n))


def summary(episodes: list[dict], boot: int = 2000, seed: int = 0) -> dict:
    """Mean per decision, with a 95 % bootstrap interval over decisions: the
    cross-fitted gain of a chooser that knows the state, the in-sample best mean (the
    same futures chosen and scored on: optimistic), and the best on each single future
    (the room one future shows, as the fit's ``oracle_choice_gain``); and the
    cross-fitted gain of a chooser that leaves the teacher only where its half's
    futures agree (``agreed_gain``)."""
    adv = _advantages(episodes)
    if not adv:
        raise InputError("no decision with two or more futures")
    cross = np.array([cross_fitted_gain(a) for a in adv])
    agreed = np.array([cross_fitted_gain(a, agreed=True) for a in adv])
    in_sample = np.array([min(0.0, float(a.mean(axis=0).min())) for a in adv])
    per_future = np.array([float(np.minimum(a.min(axis=1), 0.0).mean()) for a in adv])
    idx = _resamples(len(adv), boot, seed)
    return {
        "decisions": len(adv),
        "futures": sorted({a.shape[0] for a in adv}),
        "cross_fitted_gain": _interval(cross, idx),
        "agreed_gain": _interval(agreed, idx),
        "in_sample_gain": _interval(in_sample, idx),
        "per_future_best_gain": _interval(per_future, idx),
    }


def pooled(results: list[dict]) -> dict:
    """Several results :func:`main` wrote as one: their episodes, summarised anew."""
    episodes = [e for r in results for e in r["episodes"]]
    return {"summary": summary(episodes), "episodes": episodes}


def describe(result: dict) -> str:
    """One paragraph of a result :func:`main` wrote: the three gains with their
    intervals, and how the cross-fitted choice fares decision by decision."""
    s = result["summary"]
    cross = np.array([cross_fitted_gain(a) for a in _advantages(result["episodes"])])

    def g(key):
        m, lo, hi = s[key]
        return f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]"

    return (
        f"{s['decisions']} decisions, {s['futures'][0]} futures each, mean per decision "
        f"in jobs' worth of JCT (95 % bootstrap interval over decisions): a chooser that "
        f"knows the state, cross-fitted, {g('cross_fitted_gain')} "
        f"({_window_interval(result['episodes'])}); the same chosen and scored on the "
        f"same futures {g('in_sample_gain')}; the best on each single future "
        f"{g('per_future_best_gain')}. Decision by decision the cross-fitted "
        f"choice beats the teacher's pick in {np.mean(cross < 0):.0%}, loses in "
        f"{np.mean(cross > 0):.0%} and is the teacher's in {np.mean(cross == 0):.0%}; "
        f"its largest gains {', '.join(f'{v:.2f}' for v in np.sort(cross)[:4])}."
    )


def _window_interval(episodes: list[dict], agreed: bool = False) -> str:
    """ "with the N windows resampled too, [lo, hi]": the mean gain's interval under
    the benchmark's hierarchical bootstrap (:func:`by_window`), none for one sample."""
    from marl_sched.benchmark.stats import interval

    windows = by_window(episodes, agreed=agreed)
    h = interval(windows, "mean")
    if h.low is None:
        return f"{len(windows)} window of one decision: no interval"
    return f"with the {len(windows)} windows resampled too, [{h.low:+.3f}, {h.high:+.3f}]"


def by_window(episodes: list[dict], agreed: bool = False) -> list[list[np.ndarray]]:
    """The cross-fitted gains in :mod:`marl_sched.benchmark.stats`' ``Scores`` layout:
    per window (scenario), per episode (seed), its decisions' gains."""
    out: dict[str, list[np.ndarray]] = {}
    for e in episodes:
        gains = [cross_fitted_gain(a, agreed=agreed) for a in _advantages([e])]
        if gains:
            out.setdefault(e["scenario"], []).append(np.array(gains))
    return [out[k] for k in sorted(out)]


def describe_agreed(result: dict) -> str:
    """The gain of the chooser that acts only where its futures agree, with how often
    it acts and how it fares where it does; beside the interval over decisions, the
    benchmark's hierarchical one (windows, then episodes, then decisions resampled),
    since one window's decisions share its jobs."""
    s = result["summary"]
    got = np.array([cross_fitted_gain(a, agreed=True) for a in _advantages(result["episodes"])])
    m, lo, hi = s["agreed_gain"]
    return (
        f"{s['decisions']} decisions: a chooser that knows the state and leaves the "
        f"teacher only where its proposal is better on every future it chooses on, "
        f"cross-fitted, {m:+.3f} [{lo:+.3f}, {hi:+.3f}] jobs' worth of JCT per decision "
        f"(95 % bootstrap interval over decisions; "
        f"{_window_interval(result['episodes'], agreed=True)}). It beats the teacher's pick in "
        f"{np.mean(got < 0):.0%} of decisions, loses in {np.mean(got > 0):.0%} and keeps "
        f"it in {np.mean(got == 0):.0%}; the median decision {float(np.median(got)):+.3f}."
    )


def describe_stakes(result: dict, stakes=(0.1, 0.25, 0.5, 1.0, 2.0, 3.0), boot: int = 2000,
                    seed: int = 0) -> str:  # fmt: skip
    """The cross-fitted gain of a chooser that leaves the teacher only where the
    choosing half's best mean advantage is below ``-s``, for each ``s`` of ``stakes``."""
    adv = _advantages(result["episodes"])
    idx = _resamples(len(adv), boot, seed)
    parts = []
    for s in stakes:
        m, lo, hi = _interval(np.array([cross_fitted_gain(a, stakes=s) for a in adv]), idx)
        parts.append(f"{s:g}: {m:+.3f} [{lo:+.3f}, {hi:+.3f}]")
    return (
        f"{len(adv)} decisions: a chooser that leaves the teacher only where the best mean "
        f"advantage of the futures it chooses on is below minus the stakes (in jobs' worth), "
        f"cross-fitted, per stakes: " + "; ".join(parts) + "."
    )


def _one(args: tuple) -> dict:
    import torch

    torch.set_num_threads(1)
    return ceiling_episode(*args)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agents.choice_ceiling", description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--suite", default="benchmarks/default.yaml")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--per-episode", type=int, default=10)
    ap.add_argument("--futures", type=int, default=4)
    ap.add_argument("--horizon", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)
    from multiprocessing import get_context

    from marl_sched.benchmark.suite import load_suite
    from marl_sched.files import atomic_write_text

    try:
        if not (1 <= a.per_episode <= 1000 and 2 <= a.futures <= 64 and 1 <= a.horizon
                <= 10_000 and a.workers >= 1):  # fmt: skip
            raise InputError("--per-episode 1..1000, --futures 2..64, --horizon 1..10000")
        out = Path(a.out)
        if out.is_symlink() or out.is_dir():
            raise InputError(f"--out: {out}: not a file path")
        scenarios = [s.name for s in load_suite(a.suite).split("train")]
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tasks = [(a.suite, s, a.seed, a.per_episode, a.futures, a.horizon) for s in scenarios]
    episodes, t0 = [], time.perf_counter()
    with get_context("spawn").Pool(a.workers) as pool:
        for i, e in enumerate(pool.imap_unordered(_one, tasks), 1):
            episodes.append(e)
            el = time.perf_counter() - t0
            eta = el / i * (len(tasks) - i)
            print(f"[{i}/{len(tasks)}] {e['scenario']}: {len(e['decisions'])} decisions, "
                  f"{e['wall_s']:.0f} s; ETA {eta:.0f} s", flush=True)  # fmt: skip
    episodes.sort(key=lambda e: e["scenario"])
    result = {"summary": summary(episodes), "options": vars(a), "episodes": episodes}
    atomic_write_text(out, json.dumps(result) + "\n")
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
