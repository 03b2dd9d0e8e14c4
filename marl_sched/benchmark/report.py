"""A finished benchmark grid as tables and figures (docs/benchmark.md). Outputs in
``DIR``, each written atomically:

- ``runs.csv``: one row per cell (its key fields and every metric);
- ``summary.csv`` / ``summary.md``: per policy the IQM over scenarios x seeds (x runs)
  of average, median and p95 JCT and average slowdown, each normalised per scenario by
  the reference policy (first-fit when it ran), with 95 % hierarchical-bootstrap CIs,
  the mean and worst-case normalised average JCT, zero-width strata, the probability
  of improvement and a per-scenario table (:mod:`marl_sched.benchmark.stats`);
- ``scenarios.md``: per scenario, each policy's mean over seeds;
- ``interval_estimates.png``, ``performance_profile.png``, ``ccdf/<scenario>.png``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from marl_sched.benchmark.stats import (
    Estimate,
    interval,
    iqm_interval,
    performance_profile,
    probability_of_improvement,
    worst_case,
    zero_width_strata,
)
from marl_sched.metrics import atomic_write_text, csv_text
from marl_sched.plots import _figure, _save, interval_panels, log_ticks

#: the metrics shown side by side (lower is better for each)
SCORED = (
    ("avg_jct_s", "avg JCT"),
    ("p50_jct_s", "median JCT"),
    ("p95_jct_s", "p95 JCT"),
    ("avg_slowdown", "avg slowdown"),
)
RUN_FIELDS = (
    "scenario", "split", "track", "policy", "ordering", "seed", "run", "checkpoint", "tier",
    "topology", "load",
)  # fmt: skip


def runs_per_policy(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """policy -> how many training runs (distinct checkpoints) its rows pool."""
    seen: dict[str, set] = defaultdict(set)
    for r in rows:
        seen[r["policy"]].add(r.get("checkpoint") or "")
    return {p: len(c) for p, c in seen.items()}


def reference_policy(policies: Sequence[str]) -> str:
    return "first-fit" if "first-fit" in policies else policies[0]


def normalised(
    rows: Sequence[dict[str, Any]], policies: Sequence[str], metric: str
) -> dict[str, list[list[np.ndarray]]]:
    """policy -> per scenario (sorted by name), one array over seeds per training run,
    of ``metric`` / the reference's mean over its runs and seeds in that scenario."""
    ref = reference_policy(policies)
    by: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by[(r["scenario"], r["policy"])][str(r.get("run", 0))].append(float(r[metric]))
    scenarios = scenario_names(rows)
    out: dict[str, list[list[np.ndarray]]] = {}
    for p in policies:
        out[p] = []
        for s in scenarios:
            scale = np.mean([v for seeds in by[(s, ref)].values() for v in seeds])
            out[p].append([np.asarray(v) / scale for _, v in sorted(by[(s, p)].items())])
    return out


def scenario_names(rows: Sequence[dict[str, Any]]) -> list[str]:
    return sorted({r["scenario"] for r in rows})


def seed_span(seeds) -> str:
    """``seeds 0-4``, ``seeds 0, 2``, ``seed 3``."""
    seeds = sorted({int(s) for s in seeds})
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}–{seeds[-1]}"
    return "seeds " + ", ".join(map(str, seeds))


def summarize(rows: Sequence[dict[str, Any]], policies: Sequence[str], reps: int = 2000):
    """(summary rows, improvement rows) of the grid: per policy the IQM of every scored
    metric, mean and worst-case normalised average JCT, seeds and zero-width strata."""
    summary = []
    scores = {m: normalised(rows, policies, m) for m, _ in SCORED}
    names = scenario_names(rows)
    for p in policies:
        row: dict[str, Any] = {"policy": p}
        for m, _ in SCORED:
            est = iqm_interval(scores[m][p], reps=reps)
            row |= {f"iqm_{m}": est.point, f"ci_low_{m}": est.low, f"ci_high_{m}": est.high}
        avg = scores["avg_jct_s"][p]
        mean = interval(avg, "mean", reps=reps)
        worst, where = worst_case(avg)
        row |= {
            "mean_avg_jct_s": mean.point,
            "mean_ci_low": mean.low,
            "mean_ci_high": mean.high,
            "worst_avg_jct_s": worst,
            "worst_scenario": names[where],
            "seeds": seed_span(r["seed"] for r in rows if r["policy"] == p),
            "zero_width": " ".join(names[i] for i in zero_width_strata(avg)),
        }
        summary.append(row)
    summary.sort(key=lambda r: r["iqm_avg_jct_s"])
    improvement = []
    avg = scores["avg_jct_s"]
    for x in policies:
        for y in policies:
            if x != y:
                est = probability_of_improvement(avg[x], avg[y], reps=reps // 2)
                improvement.append(
                    {
                        "policy": x,
                        "over": y,
                        "p": est.point,
                        "ci_low": est.low,
                        "ci_high": est.high,
                    }  # fmt: skip
                )
    return summary, improvement


NO_INTERVAL = "1 seed: no interval"


def _estimate(row: dict, point: str, low: str, high: str, digits: int = 3) -> str:
    return Estimate(row[point], row[low], row[high]).format(digits, NO_INTERVAL)


def _interval(row: dict, m: str) -> str:
    return _estimate(row, f"iqm_{m}", f"ci_low_{m}", f"ci_high_{m}")


def track_name(rows: Sequence[dict[str, Any]]) -> str:
    """``track placement`` (or ``tracks full + placement``; ``track not recorded`` for
    cells run before tracks existed) of the runs, for titles."""
    tracks = sorted({str(r.get("track") or "") for r in rows})
    if tracks == [""]:
        return "track not recorded"
    tracks = [t or "not recorded" for t in tracks]
    return ("track " if len(tracks) == 1 else "tracks ") + " + ".join(tracks)


def summary_markdown(
    summary,
    improvement,
    policies,
    n_scenarios: int,
    seeds: int,
    runs: dict[str, int] | None = None,
    rows: Sequence[dict[str, Any]] = (),
    scores: dict[str, list] | None = None,
    ledger: str | None = None,
) -> str:
    """``summary.md`` from ``rows``, ``scores`` (:func:`normalised`) and the ``ledger``
    entry."""
    ref = reference_policy(policies)
    pooled = {p: n for p, n in (runs or {}).items() if n > 1}
    where = f"{split_name(rows)}, {track_name(rows)}: " if rows else ""
    lines = [
        f"# Benchmark summary: {where}{n_scenarios} scenarios x {seeds} seeds",
        "",
    ]
    if ledger:
        lines += [f"Ledger entry: {ledger}", ""]
    lines += [
        f"IQM over scenarios x seeds of each metric divided by {ref}'s mean in the same "
        "scenario (< 1 = better than it), with 95 % hierarchical-bootstrap confidence "
        "intervals: scenarios resampled, then training runs and seeds within each "
        f"(marl_sched/benchmark/stats.py). A policy with one seed of one run per scenario "
        f'has no interval ("{NO_INTERVAL}"). Mean: the plain mean of the same scores; '
        "worst case: the largest per-scenario mean (its scenario named).",
        "",
    ]
    if pooled:
        named = ", ".join(f"{p} ({n} training runs)" for p, n in pooled.items())
        lines += [
            f"Pooled over training runs: {named}: each run's checkpoint ran every "
            "scenario x seed, and the IQM and its interval are over runs x seeds within "
            "each scenario.",
            "",
        ]
    lines += [
        "| policy | seeds | "
        + " | ".join(f"IQM {label}" for _, label in SCORED)
        + " | mean avg JCT | worst-case avg JCT |",
        "|---|---|" + "---|" * (len(SCORED) + 2),
    ]
    for row in summary:
        lines.append(
            f"| {row['policy']} | {row['seeds']} | "
            + " | ".join(_interval(row, m) for m, _ in SCORED)
            + f" | {_estimate(row, 'mean_avg_jct_s', 'mean_ci_low', 'mean_ci_high')}"
            + f" | {row['worst_avg_jct_s']:.3f} ({row['worst_scenario']}) |"
        )
    flagged = [(r["policy"], r["zero_width"]) for r in summary if r.get("zero_width")]
    if flagged:
        lines += [
            "",
            "**Zero-width strata** (every seed and run gave the same average JCT, so "
            "the seed level adds no spread there; these scenarios count through the "
            "scenario level only — read the interval with that in mind):",
            "",
            *(f"- {p}: {s.replace(' ', ', ')}" for p, s in flagged),
        ]
    lines += [
        "",
        "## Probability of improvement (normalised average JCT)",
        "",
        "P(row has a lower normalised average JCT than column), averaged over scenarios, "
        "with 95 % hierarchical-bootstrap CIs.",
        "",
        "| policy | " + " | ".join(policies) + " |",
        "|---|" + "---|" * len(policies),
    ]
    table = {(r["policy"], r["over"]): r for r in improvement}
    for x in policies:
        cells = []
        for y in policies:
            r = table.get((x, y))
            cells.append("—" if r is None else _estimate(r, "p", "ci_low", "ci_high", 2))
        lines.append(f"| {x} | " + " | ".join(cells) + " |")
    if scores:
        lines += ["", *per_scenario_markdown(scenario_names(rows), policies, scores, ref)]
    return "\n".join(lines) + "\n"


def per_scenario_markdown(names, policies, scores, ref: str) -> list[str]:
    """Per scenario, each policy's mean normalised average JCT over its runs and seeds;
    ``=`` marks a zero-width stratum (every seed equal)."""
    lines = [
        "## Per scenario (normalised average JCT, mean over runs and seeds)",
        "",
        f"Each scenario's average JCT divided by {ref}'s there; `=`: every seed and run "
        "gave the same value (a zero-width stratum).",
        "",
        "| scenario | " + " | ".join(policies) + " |",
        "|---|" + "---|" * len(policies),
    ]
    for i, name in enumerate(names):
        cells = []
        for p in policies:
            v = np.concatenate(scores[p][i])
            mark = " =" if v.size > 1 and np.all(v == v[0]) else ""
            cells.append(f"{v.mean():.3f}{mark}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def scenarios_markdown(rows, policies) -> str:
    cols = [*SCORED, ("gpu_utilization_steady", "util steady"), ("jobs_queued_frac", "queued")]
    by: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by[r["scenario"]][r["policy"]].append(r)
    lines = [
        f"# Per-scenario results: {split_name(rows)}, {track_name(rows)} (mean over seeds)",
        "",
    ]
    for s in sorted(by):
        any_row = next(iter(by[s].values()))[0]
        lines += [
            f"## {s}",
            "",
            f"tier {any_row['tier']}, topology {any_row['topology']}, load {any_row['load']}",
            "",
            "| policy | " + " | ".join(label for _, label in cols) + " |",
            "|---|" + "---|" * len(cols),
        ]
        for p in policies:
            runs = by[s].get(p, [])
            if runs:
                vals = [np.mean([float(r[m]) for r in runs]) for m, _ in cols]
                lines.append(
                    f"| {p} | "
                    + " | ".join(f"{v:,.3f}" if v < 100 else f"{v:,.0f}" for v in vals)
                    + " |"
                )
        lines.append("")
    return "\n".join(lines)


def split_name(rows: Sequence[dict[str, Any]]) -> str:
    """``test split`` (or ``train + validation splits``) of the runs, for titles."""
    splits = sorted({str(r.get("split", "?")) for r in rows})
    return " + ".join(splits) + (" split" if len(splits) == 1 else " splits")


def _policy_label(summary, policy: str) -> str:
    row = next(x for x in summary if x["policy"] == policy)
    return policy if row["ci_low_avg_jct_s"] is not None else f"{policy} (1 seed, no interval)"


def write_figures(
    out: Path,
    summary,
    rows,
    jcts: dict[str, dict[str, list[float]]],
    policies,
    n_scenarios: int,
    seeds: int,
    runs: dict[str, int],
) -> None:
    """The interval, profile and CCDF figures; ``runs``: :func:`runs_per_policy`."""
    plt = _figure()
    interval_panels(
        summary,
        SCORED,
        out / "interval_estimates.png",
        f"{split_name(rows)}, {track_name(rows)}: {n_scenarios} scenarios x {seeds} seeds"
        + (" (x training runs where pooled)" if max(runs.values()) > 1 else "")
        + " — normalised by "
        f"{reference_policy(policies)} (lower is better), 95 % CIs, log scale",
        labels={p: _policy_label(summary, p) for p in policies},
    )

    scores = normalised(rows, policies, "avg_jct_s")
    pooled = np.concatenate([np.concatenate(runs) for v in scores.values() for runs in v])
    # log scale: the region near 1 is where the leading policies differ
    taus = np.geomspace(max(pooled.min() * 0.95, 1e-3), pooled.max() * 1.05, 300)
    fig, ax = plt.subplots(figsize=(6, 4))
    for p in policies:
        ax.plot(taus, performance_profile(scores[p], taus), label=p, lw=1.5)
    ax.set_xscale("log")
    log_ticks(ax.xaxis)
    ax.set_xlabel("normalised average JCT  τ (log scale)")
    ax.set_ylabel("fraction of runs with score ≤ τ")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(
        f"{split_name(rows)}, {track_name(rows)}: performance profile (higher-left is better)",
        fontsize=9,
    )
    _save(fig, out / "performance_profile.png")
    plt.close(fig)

    for scenario, per_policy in jcts.items():
        fig, ax = plt.subplots(figsize=(6, 4))
        for p in policies:
            v = np.sort(np.asarray(per_policy.get(p, []), dtype=float))
            if len(v):
                ccdf = 1.0 - np.arange(len(v)) / len(v)
                ax.step(np.maximum(v, 1e-3), ccdf, where="post", label=p, lw=1.3)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("JCT (s)")
        ax.set_ylabel("fraction of jobs with JCT > x")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
        ax.set_title(f"{scenario}, {track_name(rows)}: JCT CCDF (all seeds)", fontsize=9)
        _save(fig, out / "ccdf" / f"{scenario}.png")
        plt.close(fig)


def write_report(
    out: str | Path,
    results: Sequence[dict[str, Any]],
    policies: Sequence[str],
    seeds: int,
    *,
    figures: bool = True,
    ledger: str | None = None,
) -> list[dict]:
    """Write every output of the module docstring from the cells' results; returns the
    summary rows (best first). ``ledger``: the test-split ledger entry to cite."""
    from marl_sched.files import check_owned_tree

    out = Path(out)
    check_owned_tree(out, "--out")  # again when writing: ccdf/ not a link, say
    rows = [r["row"] for r in results]
    extra = sorted({k for r in rows for k in r} - set(RUN_FIELDS))
    atomic_write_text(out / "runs.csv", csv_text(rows, [*RUN_FIELDS, *extra]))
    summary, improvement = summarize(rows, policies)
    runs = runs_per_policy(rows)
    n_scenarios = len({r["scenario"] for r in rows})
    fields = [
        "policy",
        *(f"{k}_{m}" for m, _ in SCORED for k in ("iqm", "ci_low", "ci_high")),
        *("mean_avg_jct_s", "mean_ci_low", "mean_ci_high", "worst_avg_jct_s"),
        *("worst_scenario", "seeds", "zero_width"),
    ]
    atomic_write_text(out / "summary.csv", csv_text(summary, fields))
    atomic_write_text(
        out / "improvement.csv", csv_text(improvement, ["policy", "over", "p", "ci_low", "ci_high"])
    )
    atomic_write_text(
        out / "summary.md",
        summary_markdown(
            summary,
            improvement,
            policies,
            n_scenarios,
            seeds,
            runs,
            rows,
            normalised(rows, policies, "avg_jct_s"),
            ledger,
        ),
    )
    atomic_write_text(out / "scenarios.md", scenarios_markdown(rows, policies))
    jcts: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        jcts[r["row"]["scenario"]][r["row"]["policy"]].extend(r["jct"])
    if figures:
        write_figures(out, summary, rows, jcts, policies, n_scenarios, seeds, runs)
    return summary
