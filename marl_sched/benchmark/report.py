"""A finished benchmark grid as tables and figures.

Outputs in ``DIR`` (each written atomically):

- ``runs.csv``: one row per cell (scenario, policy, queue ordering, seed, tier, topology, load and
  every metric of ``metrics.json``);
- ``summary.csv`` / ``summary.md``: per policy, the IQM over scenarios x seeds (x its
  training runs, for a learned policy given several checkpoints) of
  average JCT, median JCT, p95 JCT and average slowdown, each normalised per
  scenario by the reference policy's mean over seeds (first-fit when it ran, else
  the first policy; < 1 = better than the reference), with 95 % stratified-bootstrap
  CIs; and the probability of improvement of each policy over each other on
  normalised average JCT (:mod:`marl_sched.benchmark.stats`);
- ``scenarios.md``: per scenario, each policy's mean over seeds of the same metrics
  plus steady utilisation and queued share;
- ``interval_estimates.png``, ``performance_profile.png`` and
  ``ccdf/<scenario>.png`` (JCT CCDF per policy, log-log, pooled over seeds).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from marl_sched.benchmark.stats import (
    iqm_interval,
    performance_profile,
    probability_of_improvement,
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
    "scenario", "split", "policy", "ordering", "seed", "run", "checkpoint", "tier", "topology",
    "load",
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
) -> dict[str, list[np.ndarray]]:
    """policy -> per-scenario arrays (over seeds) of ``metric`` / the reference's mean."""
    ref = reference_policy(policies)
    by: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        by[(r["scenario"], r["policy"])].append(float(r[metric]))
    scenarios = sorted({r["scenario"] for r in rows})
    out: dict[str, list[np.ndarray]] = {}
    for p in policies:
        out[p] = [np.asarray(by[(s, p)]) / np.mean(by[(s, ref)]) for s in scenarios]
    return out


def summarize(rows: Sequence[dict[str, Any]], policies: Sequence[str], reps: int = 2000):
    """(summary rows, improvement rows) of the grid."""
    summary = []
    scores = {m: normalised(rows, policies, m) for m, _ in SCORED}
    for p in policies:
        row: dict[str, Any] = {"policy": p}
        for m, _ in SCORED:
            point, low, high = iqm_interval(scores[m][p], reps=reps)
            row |= {f"iqm_{m}": point, f"ci_low_{m}": low, f"ci_high_{m}": high}
        summary.append(row)
    summary.sort(key=lambda r: r["iqm_avg_jct_s"])
    improvement = []
    avg = scores["avg_jct_s"]
    for x in policies:
        for y in policies:
            if x != y:
                point, low, high = probability_of_improvement(avg[x], avg[y], reps=reps // 2)
                improvement.append(
                    {"policy": x, "over": y, "p": point, "ci_low": low, "ci_high": high}
                )
    return summary, improvement


def _interval(row: dict, m: str) -> str:
    return f"{row[f'iqm_{m}']:.3f} [{row[f'ci_low_{m}']:.3f}, {row[f'ci_high_{m}']:.3f}]"


def summary_markdown(
    summary, improvement, policies, n_scenarios: int, seeds: int, runs: dict[str, int] | None = None
) -> str:
    ref = reference_policy(policies)
    pooled = {p: n for p, n in (runs or {}).items() if n > 1}
    lines = [
        f"# Benchmark summary: {n_scenarios} scenarios x {seeds} seeds",
        "",
        f"IQM over scenarios x seeds of each metric divided by {ref}'s mean in the same "
        "scenario (< 1 = better than it), with 95 % stratified-bootstrap confidence "
        "intervals.",
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
        "| policy | " + " | ".join(label for _, label in SCORED) + " |",
        "|---|" + "---|" * len(SCORED),
    ]
    for row in summary:
        lines.append(
            f"| {row['policy']} | " + " | ".join(_interval(row, m) for m, _ in SCORED) + " |"
        )
    lines += [
        "",
        "## Probability of improvement (normalised average JCT)",
        "",
        "P(row has a lower normalised average JCT than column), averaged over scenarios, "
        "with 95 % CIs.",
        "",
        "| policy | " + " | ".join(policies) + " |",
        "|---|" + "---|" * len(policies),
    ]
    table = {(r["policy"], r["over"]): r for r in improvement}
    for x in policies:
        cells = []
        for y in policies:
            r = table.get((x, y))
            cells.append(
                "—" if r is None else f"{r['p']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
            )
        lines.append(f"| {x} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def scenarios_markdown(rows, policies) -> str:
    cols = [*SCORED, ("gpu_utilization_steady", "util steady"), ("jobs_queued_frac", "queued")]
    by: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by[r["scenario"]][r["policy"]].append(r)
    lines = ["# Per-scenario results (mean over seeds)", ""]
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
        f"{split_name(rows)}: {n_scenarios} scenarios x {seeds} seeds"
        + (" (x training runs where pooled)" if max(runs.values()) > 1 else "")
        + " — normalised by "
        f"{reference_policy(policies)} (lower is better), 95 % CIs, log scale",
    )

    scores = normalised(rows, policies, "avg_jct_s")
    pooled = np.concatenate([np.concatenate(v) for v in scores.values()])
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
    ax.set_title(f"{split_name(rows)}: performance profile (higher-left is better)", fontsize=9)
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
        ax.set_title(f"{scenario}: JCT CCDF (all seeds)", fontsize=9)
        _save(fig, out / "ccdf" / f"{scenario}.png")
        plt.close(fig)


def write_report(
    out: str | Path,
    results: Sequence[dict[str, Any]],
    policies: Sequence[str],
    seeds: int,
    *,
    figures: bool = True,
) -> list[dict]:
    """Write every output of the module docstring from the cells' results; returns the
    summary rows (best first)."""
    out = Path(out)
    rows = [r["row"] for r in results]
    extra = sorted({k for r in rows for k in r} - set(RUN_FIELDS))
    atomic_write_text(out / "runs.csv", csv_text(rows, [*RUN_FIELDS, *extra]))
    summary, improvement = summarize(rows, policies)
    runs = runs_per_policy(rows)
    n_scenarios = len({r["scenario"] for r in rows})
    fields = ["policy", *(f"{k}_{m}" for m, _ in SCORED for k in ("iqm", "ci_low", "ci_high"))]
    atomic_write_text(out / "summary.csv", csv_text(summary, fields))
    atomic_write_text(
        out / "improvement.csv", csv_text(improvement, ["policy", "over", "p", "ci_low", "ci_high"])
    )
    atomic_write_text(
        out / "summary.md",
        summary_markdown(summary, improvement, policies, n_scenarios, seeds, runs),
    )
    atomic_write_text(out / "scenarios.md", scenarios_markdown(rows, policies))
    jcts: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        jcts[r["row"]["scenario"]][r["row"]["policy"]].extend(r["jct"])
    if figures:
        write_figures(out, summary, rows, jcts, policies, n_scenarios, seeds, runs)
    return summary
