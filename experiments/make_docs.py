"""Regenerate every generated table and figure of README.md and docs/ from the
committed results files.

    python -m experiments.make_docs           # rewrite the blocks and the figures
    python -m experiments.make_docs --check   # exit 1 if a block differs from its files,
                                              # or one of BLOCKS is used by no document

A block is the text between ``<!-- generated:NAME -->`` and ``<!-- /generated -->``;
:data:`BLOCKS` renders each NAME from ``results/`` and ``benchmarks/ledger.jsonl``."""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
from pathlib import Path

from marl_sched.benchmark.paired import family_table, policies_paired, read_rows
from marl_sched.config import REPO_ROOT

RESULTS = REPO_ROOT / "results"
DOCS = (
    REPO_ROOT / "README.md",
    REPO_ROOT / "docs" / "results.md",
    REPO_ROOT / "docs" / "agents.md",
    REPO_ROOT / "docs" / "baselines.md",
    REPO_ROOT / "docs" / "benchmark.md",
    REPO_ROOT / "docs" / "performance-model.md",
    REPO_ROOT / "docs" / "room.md",
    REPO_ROOT / "checkpoints" / "marl-upgrade" / "README.md",
)
FIGURES = REPO_ROOT / "docs" / "figures"
LEDGER = REPO_ROOT / "benchmarks" / "ledger.jsonl"
BLOCK = re.compile(r"(<!-- generated:([\w-]+) -->\n)(.*?)(<!-- /generated -->)", re.S)
SCORED = (("avg_jct_s", "avg JCT"), ("p50_jct_s", "median JCT"),
          ("p95_jct_s", "p95 JCT"), ("avg_slowdown", "avg slowdown"))  # fmt: skip


def _num(text: str, fmt: str) -> str:
    return format(float(text), fmt) if text not in ("", None) else "—"


def ledger_entries(path: Path = LEDGER) -> list[dict]:
    """The ledger's entries, one per line: every run on the test split."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def run_date(entry_id: int, path: Path = LEDGER) -> str:
    """The date and time (UTC, to the minute) of the ledger entry ``entry_id``."""
    entry = next(e for e in ledger_entries(path) if e["id"] == entry_id)
    return entry["date"][:16].replace("T", " ") + " UTC"


def ledger_reads(path: Path = LEDGER) -> str:
    """How many times the test split has been read, from the ledger."""
    entries = ledger_entries(path)
    last = entries[-1]["date"][:10]
    return (
        f"The test split has been read {len(entries)} times, each a line of "
        f"[`benchmarks/ledger.jsonl`](benchmarks/ledger.jsonl) (the last on {last}).\n"
    )


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


def _seeds(root: Path) -> list[int]:
    """The seeds of the default window's runs."""
    return sorted({int(r["seed"]) for r in read_rows(root / "default-window" / "runs.csv")})


def default_window(root: Path = RESULTS) -> str:
    """The default window's comparison: mean over seeds, 95 % half-width over seeds."""
    rows = read_rows(root / "default-window" / "results.csv")
    seeds = _seeds(root)
    if len(seeds) > 1:
        head = (f"Mean over seeds {seeds[0]}–{seeds[-1]}; ± is the 95 % Student-t "
                "half-width over them (0: the policy does not depend on the seed).")  # fmt: skip
    else:
        head = f"One run per policy (seed {seeds[0]}): 1 seed, no interval."
    lines = [
        head,
        "",
        "| policy | avg JCT (s) | ± | p50 (s) | p95 (s) | avg slowdown | / best baseline |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['policy']} | {_num(r['avg_jct_s'], ',.0f')} | "
            f"{_num(r['avg_jct_ci95_s'], ',.0f')} | {_num(r['p50_jct_s'], ',.0f')} | "
            f"{_num(r['p95_jct_s'], ',.0f')} | {_num(r['avg_slowdown'], '.2f')} | "
            f"{_num(r['ratio_to_best_baseline'], '.3f')} |"
        )
    ckpts = [f"{r['policy']} `{r['checkpoint']}` ({r['checkpoint_sha256']})" for r in rows
             if r["checkpoint"]]  # fmt: skip
    if ckpts:
        lines += ["", "Checkpoints (content digest): " + ", ".join(ckpts) + "."]
    return "\n".join(lines) + "\n"


#: the benchmark tracks the docs report
TRACKS = ("placement", "full")
#: the folder under ``results/`` whose test run each track's block and figure show: the
#: run of the recipe the shipped checkpoints come from (``configs/learn.yaml``; full: its
#: migration agents)
SHIPPED_RUN = {"placement": "benchmark-test-placement-sw", "full": "benchmark-test-full-sw"}


#: the row each track's P(improvement) line is about, and whom it is compared with
FOCUS = "marl"


def _iqm(r: dict, m: str) -> str:
    """A summary row's IQM of metric ``m`` with its interval (or "no interval")."""
    lo, hi = r.get(f"ci_low_{m}", ""), r.get(f"ci_high_{m}", "")
    iqm = _num(r[f"iqm_{m}"], ".3f")
    return f"{iqm} [{float(lo):.3f}, {float(hi):.3f}]" if lo and hi else f"{iqm} (no interval)"


def benchmark_test(root: Path = RESULTS, track: str = "placement", run: str = "") -> str:
    """One track's test-split table from ``root / run``: per policy the IQM of each
    metric over first-fit's (with intervals), the mean and worst-case normalised average
    JCT, the run's ledger date and P(marl is better)."""
    folder = root / (run or f"benchmark-test-{track}")
    if not (folder / "summary.csv").is_file():
        return (
            f"No {track}-track test-split results are committed yet: run `marl-sched "
            f"benchmark --split test --track {track} ... --out results/benchmark-test-{track}` "
            "once, then `python -m experiments.make_docs`.\n"
        )

    runs = read_rows(folder / "runs.csv")
    seeds = len({r["seed"] for r in runs})
    ledger = ""
    summary_md = folder / "summary.md"
    if summary_md.is_file():
        text = summary_md.read_text(encoding="utf-8")
        found = re.search(r"ledger\.jsonl #(\d+)", text)
        when = run_date(int(found.group(1))) if found else ""
        found = re.search(r"the test-split run of ([\d-]+ [\d:]+ UTC)", text)
        when = found.group(1) if found else when
        ledger = f" The test-split run of {when} (`benchmarks/ledger.jsonl`)." if when else ""
    extra = ("mean_avg_jct_s", "worst_avg_jct_s")
    rows = read_rows(folder / "summary.csv")
    has_extra = rows and all(k in rows[0] for k in extra)
    lines = [
        f"Track `{track}`: {len({r['scenario'] for r in runs})} scenarios × {seeds} seeds "
        "(× training runs where a policy has several); IQM of each metric divided by "
        "first-fit's mean in the scenario (lower is better), 95 % hierarchical-bootstrap "
        f"intervals.{ledger}",
        "",
        "| policy | "
        + " | ".join(label for _, label in SCORED)
        + (" | mean avg JCT | worst-case avg JCT |" if has_extra else " |"),
        "|---|" + "---|" * (len(SCORED) + (2 if has_extra else 0)),
    ]
    for r in rows:
        tail = ""
        if has_extra:
            worst = f"{_num(r['worst_avg_jct_s'], '.3f')} ({r.get('worst_scenario', '')})"
            tail = f" | {_num(r['mean_avg_jct_s'], '.3f')} | {worst}"
        lines.append(
            f"| {r['policy']} | " + " | ".join(_iqm(r, m) for m, _ in SCORED) + tail + " |"
        )
    if (folder / "improvement.csv").is_file():
        probs = [
            f"{r['over']} {float(r['p']):.2f}"
            + (f" [{float(r['ci_low']):.2f}, {float(r['ci_high']):.2f}]" if r["ci_low"] else "")
            for r in read_rows(folder / "improvement.csv")
            if r["policy"] == FOCUS
        ]
        if probs:
            lines += ["", f"P({FOCUS} has a lower average JCT than): " + ", ".join(probs) + "."]
    return "\n".join(lines) + "\n"


def shipped_vs_rule(root: Path = RESULTS) -> str:
    """The README's sentence on the shipped agents vs the rule they imitate, from the
    test run that has both."""
    run = "benchmark-test-placement-lookahead"
    iqm = {r["policy"]: _iqm(r, "avg_jct_s") for r in read_rows(root / run / "summary.csv")}
    table = family_table([("", run)], run, root, policy=RULE)
    paired = table.splitlines()[-1].split(" | ")[-1].rstrip(" |")
    return (
        f"On the test split `masked:lookahead` scores {iqm[RULE]} of first-fit (IQM of "
        f"average JCT), the shipped agents `marl` {iqm['marl']}; paired by scenario and "
        f"seed, `marl` is {paired} of the rule (`results/{run}/`).\n"
    )


def room_table(study: str, root: Path = RESULTS, stem: str = "room") -> str:
    """A room study's table (``results/<study>/analyze.py`` writes ``<stem>.md``)."""
    path = root / study / f"{stem}.md"
    if not path.is_file():
        return f"No room measurement committed yet (`python results/{study}/analyze.py`).\n"
    return path.read_text(encoding="utf-8")


def room_overall(study: str, prefix: str, root: Path = RESULTS, stem: str = "room") -> str:
    """A room study's table head and its ``all``-tier rows whose comparison starts
    with ``prefix``, then its notes below the table (``results/<study>/<stem>.md``)."""
    path = root / study / f"{stem}.md"
    if not path.is_file():
        return f"No room measurement committed yet (`python results/{study}/analyze.py`).\n"
    lines = path.read_text(encoding="utf-8").splitlines()
    table = [ln for ln in lines if ln.startswith("|")]
    rows = [ln for ln in table[2:] if ln.startswith(f"| {prefix}") and "| all |" in ln]
    notes = [ln for ln in lines if ln and not ln.startswith("|")]
    return "\n".join([*table[:2], *rows, "", *notes]) + "\n"


def lookahead_learned(root: Path = RESULTS) -> str:
    """The first table of ``results/lookahead-learned/summary.md`` (``marl-sched
    benchmark``: the learned-predictor lookahead against the exact one), with its title."""
    lines = (root / "lookahead-learned" / "summary.md").read_text(encoding="utf-8").splitlines()
    head = lines[0].lstrip("# ")
    start = next(i for i, line in enumerate(lines) if line.startswith("| policy"))
    table = list(itertools.takewhile(lambda x: x.startswith("|"), lines[start:]))
    return f"{head}.\n\n" + "\n".join(table) + "\n"


def decision_latency(root: Path = RESULTS) -> str:
    """The decision latency by cluster size (``results/speed/policy.json``, written by
    ``experiments/speed_policy.py``), with the machine's load it was measured under."""
    path = root / "speed" / "policy.json"
    if not path.is_file():
        return ("`results/speed/policy.json` not written yet: run "
                "`python experiments/speed_policy.py`.\n")  # fmt: skip
    r = json.loads(path.read_text(encoding="utf-8"))
    marl = [row for row in r["rows"] if row["policy"] == "marl"]
    sizes = " / ".join(f"{row['servers']:,}" for row in marl)

    def ms(key: str) -> str:
        return " / ".join(f"{row[key]:.1f}" for row in marl)

    load = r["load_average_1min"]
    split = next(row for row in marl if row["servers"] == 4000)["cpu_split_ms"]
    met = "met" if r["meets_target"] else "not met"
    return (
        f"`{r['command']}` ({r['date']}; {r['torch_threads']} torch thread, "
        f"{marl[0]['groups_per_agent']:,} GPU groups per agent, `{r['network']}`; "
        f"{r['cores']} cores, load average {load['before']:.1f} before and "
        f"{load['after']:.1f} after: on a shared machine wall times inflate): p50 "
        f"{ms('p50_ms')} ms, p99 {ms('p99_ms')} ms at {sizes} servers; process CPU time "
        f"p50 {ms('cpu_p50_ms')} ms, p99 {ms('cpu_p99_ms')} ms.\n"
        f"At 4,000 servers the mean CPU ms of a decision: the hints' plans "
        f"{split['hints']:.2f} (each hint heuristic asked on the acting agent's scope "
        f"reads only that scope's groups and servers, `envs.rules.scope_view`), the rest "
        f"of the observation {split['observe']:.2f}, the "
        f"GNN forward {split['forward']:.2f}, acting {split['act']:.2f}; the target there "
        f"(p50 <= {r['target_p50_ms']:g} ms, p99 <= {r['target_p99_ms']:g} ms) is {met}.\n"
    )


def plan_cost(root: Path = RESULTS) -> str:
    """Where a plan hint's plan spends its CPU time, per job and part
    (``results/plan-cost/parts.json``, written by ``results/plan-cost/parts.py``), and
    what the 4,000-server p99 target leaves for it beside the shipped agents' decision
    (``results/speed/policy.json``)."""
    r = json.loads((root / "plan-cost" / "parts.json").read_text(encoding="utf-8"))
    names = {"scoped": "heuristics on each subcluster that can hold the job",
             "whole": "heuristics on the whole view",
             "legality": "the masks' check of every proposal",
             "predictor": "the learned predictor on the legal proposals",
             "rest": "the rest (views, following the plan in the masks)",
             "total": "**the plan**",
             "whole+predictor": "the whole view's heuristics + the predictor"}  # fmt: skip
    head = " | ".join(f"{row['servers']:,} servers ({row['subclusters']} subclusters) mean / p99"
                      for row in r["rows"])  # fmt: skip
    lines = [f"| part of the plan, CPU ms per job | {head} |",
             "|---|" + "---|" * len(r["rows"])]  # fmt: skip
    for key, name in names.items():
        cells = " | ".join(f"{row[key]['mean_ms']:.2f} / {row[key]['p99_ms']:.2f}"
                           for row in r["rows"])  # fmt: skip
        lines.append(f"| {name} | {cells} |")
    speed = json.loads((root / "speed" / "policy.json").read_text(encoding="utf-8"))
    left = speed["target_p99_ms"] - speed["marl_p99_ms_at_4000"]
    load = r["load_average"][0]
    return (
        f"`{r['command']}` ({r['date']}, `{r['policy']}`, {r['rows'][0]['jobs']} jobs per "
        f"size, one torch thread, {r['cores']} cores at load average {load:.1f}):\n\n"
        + "\n".join(lines)
        + f"\n\nThe shipped agents' decision p99 at 4,000 servers is "
        f"{speed['marl_p99_ms_at_4000']:.2f} ms without a plan (`results/speed/policy.json`),"
        f" which leaves {left:.2f} ms of the {speed['target_p99_ms']:g} ms p99 target for it.\n"
    )


def _planner_memory(p: dict) -> str:
    """The planner decision's memory, when the playout child measured it."""
    if "planner_alloc_peak_mb" not in p:
        return ""
    return (f"; at its peak it allocates {p['planner_alloc_peak_mb']:.1f} MB, and the whole "
            f"process peaks at {p['peak_mb']:.0f} MB (target <= 1 GiB)")  # fmt: skip


def simulator_playout(root: Path = RESULTS) -> str:
    """A fork, a playout and a planner decision on the Philly cluster, and the whole
    export (``results/speed/simulator.json``, written by ``experiments/speed_simulator.py``)."""
    path = root / "speed" / "simulator.json"
    if not path.is_file():
        return ("`results/speed/simulator.json` not written yet: run "
                "`python experiments/speed_simulator.py`.\n")  # fmt: skip
    r = json.loads(path.read_text(encoding="utf-8"))
    p, load = r["playout"], r["load_average_1min"]
    whole = "its first 10,000 jobs" if r["quick"] else "the whole export"
    return (
        f"`{r['command']}` ({r['date']}; {r['cores']} cores, load average "
        f"{load['before']:.1f} before and {load['after']:.1f} after: on a shared machine "
        f"wall times inflate). On `configs/philly.yaml` ({r['servers']:,} servers) forked at "
        f"its {p['at_decision']:,}th decision ({p['running']:,} jobs running, {p['queued']:,} "
        f"queued): a fork **{p['fork_ms']:.2f} ms** ({p['forks_per_s']:,.0f} forks/s), a "
        f"playout of {p['playout_decisions']} decisions **{p['playout_ms']:.1f} ms** "
        f"({p['playout_jobs_per_s']:,.0f} decisions/s); the fork is {p['fork_share']:.1%} of "
        f"the two. One planner decision from that state (`{'`, `'.join(p['planner'])}`: "
        f"every option played out to the horizon on each future) takes "
        f"**{p['planner_ms']:,.0f} ms**, of which one fork plus that playout is "
        f"{p['playout_share']:.1%}{_planner_memory(p)}. Under `load-balance`, {whole} "
        f"({r['jobs']:,} jobs): "
        f"{r['cpu_s']:.1f} CPU s, {r['jobs_per_s']:,.0f} jobs/s, peak {r['peak_mb']:.0f} MB.\n"
        + _simulator_against(r.get("against"))
    )


def _simulator_against(a: dict | None) -> str:
    """The sentence on a ``--against`` comparison of ``results/speed/simulator.json``."""
    if a is None:
        return ""
    pairs = ", ".join(f"{x:.2f}" for x in a["speedup_per_pair"])
    this = ", ".join(f"{x:.1f}" for x in a["this_cpu_s"])
    other = ", ".join(f"{x:.1f}" for x in a["other_cpu_s"])
    same = "the same in every run" if a["this_deterministic"] else "NOT the same in every run"
    return (
        f"Against the code of commit {a['other_commit'][:7]} (with its own "
        f"`configs/philly.yaml`), {a['pairs']} alternating pairs of whole-export runs, "
        f"whole-process CPU seconds {this} (this code) and {other} (that code): "
        f"**{a['speedup_median']:.2f}x faster** (median of the pairs {pairs}). This code's "
        f"average JCT {a['this_avg_jct_s']:,.6f} s, {same}.\n"
    )


#: the rule the shipped agents are cloned from, run as a policy
RULE = "masked:lookahead"
LOOKAHEAD = {"placement": "benchmark-test-placement-lookahead",
             "full": "benchmark-test-full-lookahead"}  # fmt: skip

BLOCKS = {
    "default-window": default_window,
    "baseline-search": baseline_search,
    "test-split-reads": ledger_reads,
    "shipped-vs-rule": shipped_vs_rule,
    "decision-latency": decision_latency,
    "plan-cost": plan_cost,
    "simulator-playout": simulator_playout,
    "room-planner": lambda: room_table("room-planner"),
    "room-oracle": lambda: room_table("room-oracle"),
    "room-upgrade": lambda: room_table("room-upgrade"),
    "marl-upgrade": lambda: room_table("marl-upgrade"),
    "marl-upgrade-checkpoint": lambda: room_overall("marl-upgrade", "marl", stem="room-shipped"),
    "marl-upgrade-where": lambda: room_overall("marl-upgrade", "marl", stem="room-where"),
    "marl-upgrade-ppo": lambda: room_table("marl-upgrade", stem="ppo"),
    "marl-upgrade-alibaba": lambda: room_overall("marl-upgrade", "marl", stem="room-alibaba"),
    "marl-upgrade-plan": lambda: room_overall("marl-upgrade", "marl", stem="room-plan"),
    "marl-upgrade-dagger": lambda: room_overall("marl-upgrade", "marl", stem="room-dagger"),
    "lookahead-learned": lookahead_learned,
    **{
        f"benchmark-test-{t}": (lambda t=t: benchmark_test(RESULTS, t, SHIPPED_RUN[t]))  # type: ignore[misc]
        for t in TRACKS
    },
    **{
        f"benchmark-test-{t}-lookahead": (lambda t=t: benchmark_test(RESULTS, t, LOOKAHEAD[t]))  # type: ignore[misc]
        for t in TRACKS
    },
    "marl-vs-rule-test": lambda: family_table(
        [("`marl` (`checkpoints/marl-sw`)", LOOKAHEAD["placement"])],
        LOOKAHEAD["placement"],
        RESULTS,
        policy=RULE,
    ),
    "marl-vs-rule-full-test": lambda: family_table(
        [("`marl` (`checkpoints/marl-sw-migration`)", LOOKAHEAD["full"])],
        LOOKAHEAD["full"],
        RESULTS,
        policy=f"{RULE}+lc",
    ),
    "rule-vs-control-test": lambda: policies_paired(
        LOOKAHEAD["placement"], RULE, "masked:interference-aware", RESULTS
    ),
    "rule-lc-vs-control-full-test": lambda: policies_paired(
        LOOKAHEAD["full"], f"{RULE}+lc", "masked:interference-aware+lc", RESULTS
    ),
}


def figures(root: Path = RESULTS, out: Path = FIGURES) -> list[Path]:
    """The figures the docs show, drawn from the same files; returns those written."""
    from marl_sched import plots

    written = []
    rows = read_rows(root / "default-window" / "results.csv")
    seeds = _seeds(root)
    many = len(seeds) > 1
    note = f"seeds {seeds[0]}–{seeds[-1]}: mean, 95 % CI" if many else "1 seed: no interval"
    plots.bars(
        {r["policy"]: float(r["avg_jct_s"]) for r in rows},
        out / "default_window_avg_jct.png",
        ylabel="average JCT (s)",
        title=f"Average JCT, default window (train split; development figure) — {note}",
        highlight="marl",
        errors={r["policy"]: float(r["avg_jct_ci95_s"] or 0) for r in rows} if many else None,
        outlier_ratio=2.0,
    )
    written.append(out / "default_window_avg_jct.png")
    for track in TRACKS:
        summary_csv = root / SHIPPED_RUN[track] / "summary.csv"
        if not summary_csv.is_file():
            continue
        # the figure reads the IQM and interval columns (numbers); text columns stay text
        summary = [
            {k: (float(v) if v and k.startswith(("iqm_", "ci_")) else (v or None))
             for k, v in r.items()}
            for r in read_rows(summary_csv)
        ]  # fmt: skip
        name = f"benchmark_test_{track}_intervals.png"
        plots.interval_panels(
            summary, SCORED, out / name,
            f"test split, {track} track: IQM normalised by first-fit (lower is better), "
            "95 % CIs, log scale",
        )  # fmt: skip
        written.append(out / name)
    return written


def rewrite(text: str, rendered: dict[str, str]) -> str:
    """``text`` with every generated block replaced by its rendering (``KeyError`` for
    a block name :data:`BLOCKS` does not know)."""
    return BLOCK.sub(lambda m: m.group(1) + rendered[m.group(2)] + m.group(4), text)


def unused_blocks(texts: list[str]) -> list[str]:
    """The names in :data:`BLOCKS` that no text among ``texts`` has a block of (a
    rendering kept after the paragraph that showed it was cut)."""
    used = {m.group(2) for text in texts for m in BLOCK.finditer(text)}
    return sorted(set(BLOCKS) - used)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.make_docs")
    parser.add_argument("--check", action="store_true", help="only compare, write nothing")
    args = parser.parse_args(argv)
    rendered = {name: render() for name, render in BLOCKS.items()}
    stale, texts = [], []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        texts.append(text)
        new = rewrite(text, rendered)
        if new != text:
            stale.append(doc.relative_to(REPO_ROOT))
            if not args.check:
                doc.write_text(new, encoding="utf-8")
    unused = unused_blocks(texts)
    if unused:
        print(f"defined in BLOCKS but used by no document: {', '.join(unused)}")
    if args.check:
        print(f"stale: {', '.join(map(str, stale))}" if stale else "every block is current")
        return 1 if stale or unused else 0
    for path in figures():
        print(f"wrote {path.relative_to(REPO_ROOT)}")
    print(f"rewrote {', '.join(map(str, stale))}" if stale else "every block was current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
