"""The paired comparisons and the learned baselines' search tables that
``experiments/make_docs.py`` renders into the docs: each reads committed files under
``results/`` and returns Markdown, so no figure in the docs is typed by hand.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from pathlib import Path

from marl_sched.config import REPO_ROOT

RESULTS = REPO_ROOT / "results"


def read_rows(path: Path) -> list[dict[str, str]]:
    """A results CSV's rows."""
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


#: the learned baselines' last search round and final runs:
#: ``results/baselines/search-s5/<learner>/search_<learner>.json`` (experiments/
#: train_baselines.py --search) and ``results/baselines/final-s5/<learner>_s<seed>.json``
BASELINE_LEARNERS = ("mlfs-rl", "harmony")
#: the settings of the first search's choice (every other field its config's default;
#: docs/baselines.md, "Final runs"), marked in the search tables: the control point
FIRST_CHOICE = {
    "harmony": {"lr": 3e-4, "entropy_coef": 0.01, "epsilon_start": 0.5, "gamma": 0.5},
    "mlfs-rl": {"lr": 1e-2, "entropy_coef": 1e-3, "rollouts": 4},
}


def _point(row: dict, grid: dict) -> str:
    return ", ".join(f"{k} {row[k]:g}" for k in grid)


def baseline_search(root: Path = RESULTS) -> str:
    """docs/baselines.md's tables of the last search (every point, the chosen one
    in bold, the first search's choice marked) and of the final runs at the
    chosen point (seeds 1-3), validation split, geomean of avg JCT over first-fit's."""
    base = root / "baselines"
    out = []
    for learner in BASELINE_LEARNERS:
        path = base / "search-s5" / learner / f"search_{learner}.json"
        if not path.exists():
            out.append(f"No search results for {learner} (`{path.relative_to(root.parent)}`).")
            continue
        d = json.loads(path.read_text())
        grid, chosen = d["grid"], d["chosen"]
        fixed = d["fixed"]
        out += [f"**{learner}** (seed {d['seed']}; fixed: " + ", ".join(
                    f"{k} {fixed[k]:g}" for k in ("lr", "entropy_coef", "rollouts",
                    "epsilon_start", "gamma", "bc_epochs") if k in fixed and k not in grid)
                + f"; {len(d['rows'])} points in {d['total_wall_s']:,.0f} s):", "",
                "| point | best validation score | at iteration | iterations run | "
                "stopped by | wall s |", "|---|---|---|---|---|---|"]  # fmt: skip
        first = FIRST_CHOICE[learner]
        for r in sorted(d["rows"], key=lambda r: r["best_val_score"]):
            name = _point(r, grid)
            if all(r[k] == chosen[k] for k in grid):
                name = f"**{name}** (chosen)"
            if all(r[k] == first[k] for k in grid):
                name += " (the first search's choice)"
            out.append(
                f"| {name} | {r['best_val_score']:.3f} | {r['best_iteration']} | "
                f"{r['iterations_run']} | {r['stop_reason']} | {r['wall_s']:.0f} |"
            )
        out.append("")
        finals = sorted((base / "final-s5").glob(f"{learner}_s*.json"))
        if finals:
            out += [f"{learner}, final runs at the chosen point:", "",
                    "| seed | warm start | best (kept) | at iteration | iterations run | "
                    "stopped by | wall s |", "|---|---|---|---|---|---|---|"]  # fmt: skip
            for f in finals:
                m = json.loads(f.read_text())
                h = m["history"]
                warm = next(x["val_score"] for x in h if x.get("phase") == "bc")
                out.append(f"| {m['config']['seed']} | {warm:.3f} | {m['best_val_score']:.3f} "
                           f"| {m['best_iteration']} | {h[-1]['iteration']} | "
                           f"{m['stop_reason']} | {m['wall_s']:.0f} |")  # fmt: skip
            out.append("")
    return "\n".join(out)


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
    """The scenarios, and per scenario, training-run slot and seed the log of the
    candidate's average JCT over the reference's (``Scores`` layout), from their
    :func:`_cells`, on the cells both have; ``scenarios`` / ``seeds`` keep only those."""
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


def policies_paired(folder: str, new: str, old: str, root: Path = RESULTS) -> str:
    """One line comparing two policies of one benchmark run (``folder``'s
    ``runs.csv``) cell by cell: the paired geometric-mean ratio of ``new``'s average
    JCT over ``old``'s with its hierarchical interval, and P(``new`` lower)."""
    rows = read_rows(root / folder / "runs.csv")
    n, ratio, p = _paired(_cells(rows, new), _cells(rows, old), _cells(rows, "first-fit"))
    return (
        f"`{new}` over `{old}` in `{folder}`, paired by scenario and seed ({n} "
        f"scenarios): geometric-mean ratio of average JCT {ratio}; P(lower) {p}.\n"
    )


def _paired(new, old, ff) -> tuple[int, str, str]:
    """(scenarios, the paired geometric-mean ratio [interval], P(new lower) [interval])
    of two policies' :func:`_cells` on the cells both have, normalised by first-fit's
    mean per scenario for the probability."""
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
    """A benchmark row's group for :func:`family_table`: its trace family (the scenario
    name's first word: philly, pollux, sia, alibaba) on the default topology, else the
    topology variant's name."""
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
    root: Path = RESULTS,
    policy: str = "masked:mlfs-rl",
) -> str:
    """docs/agents.md's table of where candidates lose to the policy they imitate: per
    group of scenarios (:func:`scenario_group`), per training slot and over all, each
    candidate's ``marl`` average JCT over ``policy``'s (one checkpoint,
    ``<probe>/runs.csv``), paired by scenario and seed: the geometric mean with its
    hierarchical interval (a lone scenario: its point, no interval). ``candidates``:
    (label, folder of a benchmark run with ``marl`` rows)."""
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


