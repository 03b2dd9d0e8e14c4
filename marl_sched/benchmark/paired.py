"""Paired comparisons of benchmark runs (each from a folder's ``runs.csv``): geometric-
mean ratios with hierarchical intervals and P(lower), per scenario group and training
slot."""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path


def read_rows(path: Path) -> list[dict[str, str]]:
    """A results CSV's rows."""
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _cells(rows: list[dict[str, str]], policy: str) -> dict[str, dict[tuple[str, str], float]]:
    """Per scenario: (training run, seed) → average JCT of ``policy``'s cells."""
    out: dict[str, dict[tuple[str, str], float]] = {}
    for r in rows:
        if r["policy"] == policy:
            out.setdefault(r["scenario"], {})[(r["run"], r["seed"])] = float(r["avg_jct_s"])
    return out


def _paired_logs(
    new: dict[str, dict[tuple[str, str], float]],
    old: dict[str, dict[tuple[str, str], float]],
    scenarios: set[str] | None = None,
    seeds: set[str] | None = None,
) -> tuple[list[str], list[list[list[float]]]]:
    """The scenarios, and the candidate's log average-JCT ratio over the reference's in
    ``Scores`` layout, on the cells both have."""
    names, logs = [], []
    for sc in sorted(set(new) & set(old)):
        if scenarios is not None and sc not in scenarios:
            continue
        keys = [k for k in new[sc] if k in old[sc] and (seeds is None or k[1] in seeds)]
        runs = sorted({k[0] for k in keys})
        kept = sorted({k[1] for k in keys})
        names.append(sc)
        logs.append([[math.log(new[sc][r, e] / old[sc][r, e]) for e in kept] for r in runs])
    return names, logs


def policies_paired(folder: str, new: str, old: str, root: Path) -> str:
    """One line comparing ``new`` with ``old`` in one run: the paired geometric-mean
    ratio with its interval, and P(``new`` lower)."""
    rows = read_rows(root / folder / "runs.csv")
    n, ratio, p = _paired(_cells(rows, new), _cells(rows, old), _cells(rows, "first-fit"))
    return (
        f"`{new}` over `{old}` in `{folder}`, paired by scenario and seed ({n} "
        f"scenarios): geometric-mean ratio of average JCT {ratio}; P(lower) {p}.\n"
    )


def _paired(new, old, ff) -> tuple[int, str, str]:
    """(scenarios, paired geometric-mean ratio [interval], P(new lower) [interval]) on
    the cells both have (first-fit-normalised for the probability)."""
    import numpy as np

    from marl_sched.benchmark.stats import geomean_ratio, probability_of_improvement

    names, logs = _paired_logs(new, old)
    x, y = [], []
    for sc in names:
        base = float(np.mean(list(ff[sc].values())))
        keys = [k for k in new[sc] if k in old[sc]]
        runs, seeds = sorted({k[0] for k in keys}), sorted({k[1] for k in keys})
        x.append([np.array([new[sc][r, s] / base for s in seeds]) for r in runs])
        y.append([np.array([old[sc][r, s] / base for s in seeds]) for r in runs])
    return len(names), geomean_ratio(logs).format(), probability_of_improvement(x, y).format(2)


def scenario_group(row: dict[str, str]) -> str:
    """A row's group for :func:`family_table`: its trace family on the default topology,
    else the topology variant's name."""
    if row["topology"] != "default":
        return row["topology"]
    return row["scenario"].split("-")[0]


def _one_checkpoint(rows: list[dict[str, str]], policy: str) -> dict[str, dict[str, float]]:
    """Per scenario: seed → average JCT of ``policy``, a policy run with one checkpoint
    (its cells keyed by seed alone, to pair with every training slot of another)."""
    return {sc: {e: v for (_, e), v in c.items()} for sc, c in _cells(rows, policy).items()}


def _under_slots(
    one: dict[str, dict[str, float]], new: dict[str, dict[tuple[str, str], float]]
) -> dict[str, dict[tuple[str, str], float]]:
    """:func:`_one_checkpoint`'s cells under ``new``'s (training slot, seed) keys, on
    the scenarios both have: the same cell for every slot."""
    return {sc: {k: one[sc][k[1]] for k in c} for sc, c in new.items() if sc in one}


def family_table(
    candidates: list[tuple[str, str]],
    probe: str,
    root: Path,
    policy: str = "masked:mlfs-rl",
) -> str:
    """Per scenario group, training slot and overall, each candidate's ``marl`` average
    JCT over ``policy``'s (``<probe>/runs.csv``), paired by scenario and seed, as a
    geometric mean with its interval. ``candidates``: (label, benchmark folder)."""
    from marl_sched.benchmark.stats import geomean_ratio

    rows = read_rows(root / probe / "runs.csv")
    teacher = _one_checkpoint(rows, policy)
    group = {r["scenario"]: scenario_group(r) for r in rows}
    pairs = []  # per candidate: its cells and the teacher's under the same keys
    for _, folder in candidates:
        new = _cells(read_rows(root / folder / "runs.csv"), "marl")
        old = _under_slots(teacher, new)
        pairs.append((new, old))
    slots = sorted({k[0] for new, _ in pairs for c in new.values() for k in c})
    labels = sorted(set(group.values())) + [f"training slot {r}" for r in slots] + ["all"]

    def cell(new, old, label: str) -> tuple[int, str]:
        if label.startswith("training slot "):
            slot = label.removeprefix("training slot ")
            new = {sc: {k: v for k, v in c.items() if k[0] == slot} for sc, c in new.items()}
            names, logs = _paired_logs(new, old)
        else:
            keep = None if label == "all" else {s for s, g in group.items() if g == label}
            names, logs = _paired_logs(new, old, scenarios=keep)
        if len(names) == 1:
            flat = [x for run in logs[0] for x in run]
            return 1, f"{math.exp(statistics.fmean(flat)):.3f}"
        return len(names), geomean_ratio(logs).format() if names else "—"

    heads = " | ".join(f"{label} over `{policy}`" for label, _ in candidates)
    out = [f"| scenarios | n | {heads} |", "|---|---|" + "---|" * len(candidates)]
    for label in labels:
        got = [cell(new, old, label) for new, old in pairs]
        out.append(f"| {label} | {got[0][0]} | " + " | ".join(c for _, c in got) + " |")
    return "\n".join(out) + "\n"
