"""Does the benchmark's ranking survive the costs the data leave uncertain?

``--migration-cost-scale 0.5,1,2,5 [--gavel-spread]`` runs the benchmark once per
variant (own folder and report) and writes ``sensitivity.md`` / ``.csv``: per variant
each policy's IQM and rank, Kendall's τ against the nominal ranking, and whether the
winner changes. ``cost-xK``: ``simulation.migration_cost_scale=K`` (``full`` track
only; ``cost-x1`` is the nominal). ``spread-gavel``: network efficiency times
:data:`GAVEL_NIC_SCALE`, which matches Gavel's measured spread/packed ratio
(docs/performance-model.md §6.1)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from marl_sched.errors import InputError
from marl_sched.metrics import atomic_write_text, csv_text

#: the config key the cost scales set (a factor on the measured or fixed migration cost)
COST_SCALE_KEY = "simulation.migration_cost_scale"
#: ``simulation.nic_efficiency_scale`` at which the model's median Gavel spread/packed
#: ratio is 1.380 (measured 1.380; 2.288 at 1), found by root-finding over
#: ``marl_sched.calibration.report.gavel_spread_rows`` (pinned by a test)
GAVEL_NIC_SCALE = 2.085
#: Gavel's measured median spread/packed ratio over its 27 V100 pairs
GAVEL_SPREAD_RATIO = 1.38

Variant = tuple[str, list[str]]


def _scale_name(k: float) -> str:
    return f"cost-x{k:g}"


def check_sensitivity(
    scales: str | None, gavel: bool, track: str | None, overrides: Sequence[str] = ()
) -> list[Variant]:
    """The variants (folder name, extra overrides), nominal first, or [] for a plain
    run; InputError naming the flag before any work."""
    if not scales and not gavel:
        return []
    variants: list[Variant] = []
    if scales:
        if track != "full":
            raise InputError(
                f"--migration-cost-scale: needs --track full (track {track} migrates nothing)"
            )
        values = []
        for item in scales.split(","):
            try:
                k = float(item)
            except ValueError:
                k = math.nan
            if not math.isfinite(k) or k <= 0:
                raise InputError(
                    f"--migration-cost-scale: expected positive numbers like 0.5,1,2,5, "
                    f"got {item.strip()!r}"
                )
            values.append(k)
        if len(set(values)) != len(values):
            raise InputError(f"--migration-cost-scale: a scale is named twice in {scales!r}")
        values = [1.0] + [k for k in values if k != 1.0]
        variants += [(_scale_name(k), [f"{COST_SCALE_KEY}={k:g}"]) for k in values]
    else:
        variants.append(("nominal", []))
    if gavel:
        variants.append(("spread-gavel", [f"simulation.nic_efficiency_scale={GAVEL_NIC_SCALE}"]))
    for key in (COST_SCALE_KEY, "simulation.nic_efficiency_scale"):
        if any(o.partition("=")[0] == key for o in overrides):
            raise InputError(f"{key}: the sensitivity variants set this key; do not override it")
    return variants


def compare_rankings(scores: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    """Per variant (the first is the nominal): Kendall's τ of its IQMs against the
    nominal's, and its winner. ``scores``: variant -> policy -> IQM."""
    from scipy.stats import kendalltau

    names = list(scores)
    nominal = scores[names[0]]
    policies = list(nominal)
    winner0 = min(policies, key=nominal.__getitem__)
    out = []
    for name in names:
        s = scores[name]
        tau = kendalltau([nominal[p] for p in policies], [s[p] for p in policies]).statistic
        winner = min(policies, key=s.__getitem__)
        ranks = {p: 1 + sorted(policies, key=s.__getitem__).index(p) for p in policies}
        out.append(
            {
                "variant": name,
                "kendall_tau": None if tau is None or math.isnan(tau) else float(tau),
                "winner": winner,
                "winner_changes": winner != winner0,
                **{f"iqm {p}": s[p] for p in policies},
                **{f"rank {p}": ranks[p] for p in policies},
            }
        )
    return out


def sensitivity_markdown(rows: list[dict[str, Any]], policies: list[str], title: str) -> str:
    nominal = rows[0]["variant"]
    lines = [
        f"# Ranking sensitivity: {title}",
        "",
        "IQM of average JCT normalised by first-fit (lower is better; rank in brackets) "
        f"per variant, Kendall's τ of each ranking against `{nominal}`, and whether the "
        "winner changes (marl_sched/benchmark/sensitivity.py). Each variant's intervals "
        "are in its folder's summary.md.",
        "",
        "| policy | " + " | ".join(r["variant"] for r in rows) + " |",
        "|---|" + "---|" * len(rows),
    ]
    order = sorted(policies, key=lambda p: rows[0][f"iqm {p}"])
    for p in order:
        cells = [f"{r[f'iqm {p}']:.3f} ({r[f'rank {p}']})" for r in rows]
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    taus = ["n/a" if r["kendall_tau"] is None else f"{r['kendall_tau']:.2f}" for r in rows]
    lines.append("| **Kendall τ vs " + nominal + "** | " + " | ".join(taus) + " |")
    lines.append("| **winner** | " + " | ".join(
        r["winner"] + (" (changes)" if r["winner_changes"] else "") for r in rows
    ) + " |")  # fmt: skip
    return "\n".join(lines) + "\n"


def run_sensitivity(
    variants: list[Variant],
    run: Callable[[Path, list[str]], list[dict]],
    out: str | Path,
    overrides: Sequence[str],
    title: str,
) -> Path:
    """Run every variant (``run(folder, overrides)`` returns the benchmark's summary
    rows), then write ``sensitivity.md`` / ``.csv`` into ``out``; returns the .md path."""
    out = Path(out)
    scores: dict[str, dict[str, float]] = {}
    for name, extra in variants:
        summary = run(out / name, [*overrides, *extra])
        scores[name] = {r["policy"]: r["iqm_avg_jct_s"] for r in summary}
    rows = compare_rankings(scores)
    policies = list(scores[variants[0][0]])
    atomic_write_text(out / "sensitivity.csv", csv_text(rows, list(rows[0])))
    path = out / "sensitivity.md"
    atomic_write_text(path, sensitivity_markdown(rows, policies, title))
    return path
