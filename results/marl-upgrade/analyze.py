"""The agents trained on the upgrade lever, on the validation split's full track, paired
on scenario and evaluation seed with the committed rule rows of
``results/room-upgrade/runs.csv``. Reads ``bench/runs.csv`` (the benchmark's row per
cell of ``marl``, one per training run); writes ``room.csv``, ``room.md`` and
``strata.md`` here. Comparisons as ``results/room-rules/analyze.py``'s (geomean ratio of
average JCT, hierarchical-bootstrap 95 % CI, MDE at 80 % power); ``marl`` pooled keeps
each training run's ratios (the bootstrap resamples scenarios, then runs, then seeds);
``marl (run k)`` is each training run alone; with ``bench-shipped/runs.csv``, the
shipped full-track agents pooled (per pair the geomean of their runs). The share of
the rule's gain taken, ``(1 - r_marl) / (1 - r_rule)`` against ``masked:lookahead``,
with a bootstrap over scenarios then pairs. With ``bench-warm/runs.csv``, each
selected PPO checkpoint over its own warm start (``ppo.md``, :data:`PPO_RUNS`;
``bench-warm-plan/runs.csv`` for the plan-hint run's); with
``bench-where/runs.csv``, the agents whose moves go to the rule's option
(``env.migration_where: rule``) against the same references and the agents of
``bench/`` pooled (``room-where.md``, ``strata-where.md``); with
``bench-alibaba/runs.csv``, the agents of ``learn_full.yaml`` (``room-alibaba.md``,
``strata-alibaba.md``); ``checkpoints/marl-upgrade`` as shipped, seed 1 its warm
start (``room-shipped.md``, ``strata-shipped.md``); with ``bench-plan/runs.csv``, the
agents of ``learn_plan.yaml`` (``room-plan.md``, ``strata-plan.md``); with
``bench-dagger/runs.csv``, the shipped recipe with two more DAgger rounds
(``room-dagger.md``, ``strata-dagger.md``).

    python results/marl-upgrade/analyze.py
"""

from __future__ import annotations

import csv
import math
import runpy
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
rules = runpy.run_path(str(HERE.parent / "room-rules" / "analyze.py"))
RULE = "masked:lookahead+upgrade"
#: the contender with the same lever (no performance-model call), run beside ``marl``
CONTENDER = "masked:lookahead-learned+upgrade"
#: the shipped full-track agents (checkpoints/marl-sw-migration), pooled over their runs
SHIPPED = "marl-sw-migration (pooled)"
REFS = ("masked:lookahead", RULE, "masked:lookahead+lc", CONTENDER, SHIPPED)
BASE = "masked:lookahead"
TIERS = ("light", "medium", "heavy", "contention", "all")


def read(path: Path) -> list[dict]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def by_run(rows: list[dict]) -> dict[int, dict[tuple[str, int], dict]]:
    """The ``marl`` rows by training run, then (scenario, evaluation seed)."""
    out: dict[int, dict] = defaultdict(dict)
    for r in rows:
        if r["policy"] == "marl":
            out[int(r["run"])][(r["scenario"], int(r["seed"]))] = r
    return dict(sorted(out.items()))


def pairs(runs: dict, refs: dict, ref: str, tier: str = "all"):
    """(scenario, seed, ``ref``'s row, each training run's row) of every pair in
    ``tier`` that every run and ``ref`` finished, in scenario then seed order."""
    for (sc, pol, seed), row in sorted(refs.items()):
        if pol != ref or (tier != "all" and row["tier"] != tier):
            continue
        mine = [cells.get((sc, seed)) for cells in runs.values()]
        if all(m is not None for m in mine):
            yield sc, seed, row, mine


def pooled(runs: dict, refs: dict, ref: str, tier: str) -> dict | None:
    """``marl`` over ``ref``: per scenario one array of log ratios per training run,
    over the evaluation seeds every run and the reference finished."""
    per_sc: dict[str, list[list[float]]] = defaultdict(lambda: [[] for _ in runs])
    flat, q_rule, q_ref, s_rule, s_ref = [], [], [], [], []
    for sc, _, row, mine in pairs(runs, refs, ref, tier):
        b = float(row["avg_jct_s"])
        logs = [math.log(float(m["avg_jct_s"]) / b) for m in mine]
        q_rule += [float(m["avg_queue_s"]) / float(m["avg_jct_s"]) for m in mine]
        s_rule += [float(m["avg_slowdown"]) for m in mine]
        q_ref.append(float(row["avg_queue_s"]) / b)
        s_ref.append(float(row["avg_slowdown"]))
        for k, v in enumerate(logs):
            per_sc[sc][k].append(v)
        flat.append(float(np.mean(logs)))
    if not per_sc:
        return None
    scores = [[np.asarray(v) for v in runs_] for runs_ in per_sc.values()]
    by_scenario = [np.mean(np.asarray(r), axis=0) for r in scores]
    sides = (q_rule, q_ref, s_rule, s_ref)
    return {
        "comparison": f"marl ({len(runs)} runs pooled) / {ref}",
        **rules["summary_row"](tier, scores, np.asarray(flat), by_scenario, sides),
    }


def share_of_gain(runs: dict, refs: dict, reps: int = 2000, seed: int = 0) -> tuple:
    """(point, low, high) of (1 - r_marl) / (1 - r_rule), both over ``masked:lookahead``
    on the same pairs (marl: the mean log ratio over its runs); scenarios resampled,
    then their pairs."""
    per_sc: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for sc, s, row, mine in pairs(runs, refs, BASE):
        rule = refs.get((sc, RULE, s))
        if rule is None:
            continue
        b = float(row["avg_jct_s"])
        m = float(np.mean([math.log(float(x["avg_jct_s"]) / b) for x in mine]))
        per_sc[sc].append((m, math.log(float(rule["avg_jct_s"]) / b)))
    groups = [np.asarray(v) for v in per_sc.values()]

    def share(gs) -> float:
        pairs = np.concatenate(gs)
        a, r = np.exp(pairs.mean(axis=0))
        return (1 - a) / (1 - r)

    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(reps):
        pick = rng.integers(len(groups), size=len(groups))
        draws.append(share([groups[i][rng.integers(len(groups[i]), size=len(groups[i]))]
                            for i in pick]))  # fmt: skip
    low, high = np.percentile(draws, [2.5, 97.5])
    return share(groups), float(low), float(high), sum(len(g) for g in groups)


def strata(runs: dict, refs: dict) -> list[str]:
    """Per stratum (tier x topology x trace source): pooled ``marl`` / masked:lookahead."""
    cells: dict[tuple, list[float]] = defaultdict(list)
    for sc, _, row, mine in pairs(runs, refs, BASE):
        b = float(row["avg_jct_s"])
        source = sc.split("-")[0]  # the suite's scenario names begin with their source
        key = (row["tier"], row["topology"], source)
        cells[key] += [math.log(float(m["avg_jct_s"]) / b) for m in mine]
    lines = ["| tier | topology | source | cells | geomean marl / masked:lookahead |",
             "|---|---|---|---|---|"]  # fmt: skip
    for key, v in sorted(cells.items()):
        flag = " (> 2 % worse)" if math.exp(np.mean(v)) > 1.02 else ""
        lines.append(f"| {' | '.join(key)} | {len(v)} | {math.exp(np.mean(v)):.3f}{flag} |")
    return lines


def pooled_refs(refs: dict, runs: dict, name: str) -> None:
    """Add ``runs`` (:func:`by_run`) to ``refs`` pooled as policy ``name``: per pair the
    geomean of the runs' average JCT, their means of queue time and slowdown."""
    for key in set.intersection(*(set(c) for c in runs.values())):
        cells = [c[key] for c in runs.values()]
        jct = math.exp(np.mean([math.log(float(r["avg_jct_s"])) for r in cells]))
        mean = {k: float(np.mean([float(r[k]) for r in cells]))
                for k in ("avg_queue_s", "avg_slowdown")}  # fmt: skip
        refs[(key[0], name, key[1])] = {**cells[0], **mean, "policy": name, "avg_jct_s": jct}


def report(
    runs: dict, refs: dict, others: tuple, stem: str, head: list[str], extra: tuple = ()
) -> list[str]:
    """``runs`` pooled over each of :data:`REFS` and ``extra`` found, each run alone,
    then ``others`` ((policy, reference) over ``refs``), the share of the rule's gain
    and the strata: written to ``{stem}.csv``, ``{stem}.md`` (after ``head``) and the strata to
    ``strata{stem.removeprefix('room')}.md``."""
    out = []
    for ref in (*REFS, *extra):
        for tier in TIERS:
            row = pooled(runs, refs, ref, tier)
            if row is not None:
                out.append(row)
    for k, cells in runs.items():
        one = {(sc, f"marl (run {k})", s): r for (sc, s), r in cells.items()}
        row = rules["compare"](one, f"marl (run {k})", refs, "all", BASE)
        if row is not None:
            out.append({"comparison": f"marl (run {k}) / {BASE}", **row})
    for pol, ref in others:
        for tier in TIERS:
            row = rules["compare"](refs, pol, refs, tier, ref)
            if row is not None:
                out.append({"comparison": f"{pol} / {ref}", **row})
    rules["write_csv"](out, HERE / f"{stem}.csv")
    lines = head + rules["markdown_table"](out)
    point, low, high, n = share_of_gain(runs, refs)
    lines += ["", f"Share of `{RULE}`'s gain over `{BASE}` taken by the pooled agents "
              f"({n} pairs): {point:.2f} [{low:.2f}, {high:.2f}]"]  # fmt: skip
    (HERE / f"{stem}.md").write_text("\n".join(lines) + "\n")
    strata_md = HERE / f"strata{stem.removeprefix('room')}.md"
    strata_md.write_text("\n".join(strata(runs, refs)) + "\n")
    return lines


def main() -> None:
    rule_rows = read(HERE.parent / "room-upgrade" / "runs.csv")
    bench = read(HERE / "bench" / "runs.csv")
    refs = {(r["scenario"], r["policy"], int(r["seed"])): r
            for r in rule_rows + [b for b in bench if b["policy"] == CONTENDER]}  # fmt: skip
    shipped_csv = HERE / "bench-shipped" / "runs.csv"
    if shipped_csv.is_file():  # the shipped full-track agents pooled
        pooled_refs(refs, by_run(read(shipped_csv)), SHIPPED)
    others = ((RULE, BASE), (CONTENDER, BASE), (CONTENDER, RULE), (SHIPPED, BASE),
              (SHIPPED, "masked:lookahead+lc"))  # fmt: skip
    lines = report(by_run(bench), refs, others, "room", [])
    warm_csv = HERE / "bench-warm" / "runs.csv"
    if warm_csv.is_file():  # each PPO checkpoint over its own warm start (PPO_RUNS)
        rows = []
        for name, csv_name, run, warm_name, warm_run in PPO_RUNS:
            source, warm_source = HERE / csv_name / "runs.csv", HERE / warm_name / "runs.csv"
            if not source.is_file() or not warm_source.is_file():
                continue
            ppo = {(sc, name, s): r for (sc, s), r in by_run(read(source))[run].items()}
            warm_runs = by_run(read(warm_source))[warm_run]
            warm = {(sc, f"{name} warm start", s): r for (sc, s), r in warm_runs.items()}
            for tier in TIERS:
                row = rules["compare"](ppo, name, warm, tier, f"{name} warm start")
                if row is not None:
                    rows.append({"comparison": f"{name} / its warm start", **row})
        rules["write_csv"](rows, HERE / "ppo.csv")
        (HERE / "ppo.md").write_text("\n".join(rules["markdown_table"](rows)) + "\n")
        lines += ["", *rules["markdown_table"](rows)]
    pooled_refs(refs, by_run(bench), UPGRADE_AGENTS)
    if warm_csv.is_file():  # as shipped: seed 1 (bench/ run 1) replaced by its warm start
        swapped = {**by_run(bench), 1: by_run(read(warm_csv))[0]}
        head = [SWAP_CAPTION.format(ref=UPGRADE_AGENTS), ""]
        lines += ["", *report(swapped, refs, (), "room-shipped", head, (UPGRADE_AGENTS,))]
        pooled_refs(refs, swapped, SWAPPED)
    for folder, stem, caption, extra in LATER_RECIPES:  # each against earlier agents too
        path = HERE / folder / "runs.csv"
        if path.is_file():
            head = [caption.format(ref=UPGRADE_AGENTS, shipped=SWAPPED), ""]
            lines += ["", *report(by_run(read(path)), refs, (), stem, head, extra)]
    print("\n".join(lines))


#: the PPO checkpoints selected: (name, the folder of their rows, their run there, the
#: folder of their warm start's rows, its run there)
PPO_RUNS = (
    ("marl-upgrade seed 1 (PPO iteration 6)", "bench", 1, "bench-warm", 0),
    ("rule-option seed 2 (PPO iteration 9)", "bench-where", 2, "bench-warm", 1),
    ("plan-hint seed 0 (PPO iteration 3)", "bench-plan", 0, "bench-warm-plan", 0),
)
#: the agents of ``bench/`` pooled, a reference for the later recipes' agents
UPGRADE_AGENTS = "marl-upgrade (pooled)"
#: ``checkpoints/marl-upgrade`` as shipped: seed 1's PPO update does not beat its warm
#: start, so by the PPO rule the warm start ships (``bench-warm/`` run 0 in its place)
SWAPPED = "marl-upgrade as shipped (pooled)"
SWAP_CAPTION = ("`checkpoints/marl-upgrade` as shipped: the runs of `bench/` with seed 1's "
                "PPO update (run 1) replaced by its warm start (`bench-warm/` run 0); "
                "`{ref}` (the three runs of `bench/`) pooled as a reference.")  # fmt: skip
#: the later recipes: (the folder of their rows, the stem of their tables, its caption,
#: the earlier agents they are compared with)
LATER_RECIPES = (
    ("bench-where", "room-where", "Agents trained with `env.migration_where: rule` (pooled "
     "over their runs), and `{ref}` (the agents of `bench/`) pooled as a reference.",
     (UPGRADE_AGENTS,)),
    ("bench-alibaba", "room-alibaba", "Agents trained with `learn_full.yaml` (the Alibaba "
     "windows; pooled over their runs), and `{ref}` (the agents of `bench/`) as a reference.",
     (UPGRADE_AGENTS,)),
    ("bench-plan", "room-plan", "Agents trained with `learn_plan.yaml` (the contender's "
     "placement as a plan hint; pooled over their runs), with `{ref}` (the agents of "
     "`bench/`) and `{shipped}` as references.", (UPGRADE_AGENTS, SWAPPED)),
    ("bench-dagger", "room-dagger", "Agents trained with two more DAgger rounds of the "
     "shipped recipe and no PPO stage (their warm starts; pooled over their runs), with "
     "`{ref}` (the agents of `bench/`) and `{shipped}` as references.",
     (UPGRADE_AGENTS, SWAPPED)),
)  # fmt: skip


if __name__ == "__main__":
    main()
