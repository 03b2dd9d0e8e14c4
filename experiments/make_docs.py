"""Regenerate every generated table and figure of README.md and docs/results.md from
the committed results files, so that no figure in them is typed by hand.

    python -m experiments.make_docs           # rewrite the blocks and the figures
    python -m experiments.make_docs --check   # exit 1 if a block differs from its files,
                                              # or one of BLOCKS is used by no document

A block is the text between ``<!-- generated:NAME -->`` and ``<!-- /generated -->``;
:data:`BLOCKS` renders each NAME from its folder under ``results/``, written by:

- ``results/default-window/``: ``marl-sched compare --config configs/default.yaml
  --checkpoint checkpoints/marl-default [--seeds N] --policies ... --out DIR``, committed
  without its ``jobs.csv`` files (``results.csv``, ``runs.csv``, ``config.yaml``, each
  run's ``metrics.json``);
- ``results/benchmark-test-<track>/`` (track ``placement`` and ``full``): ``marl-sched
  benchmark --split test --track <track> ... --out DIR`` (``summary.csv``, ``summary.md``,
  ``improvement.csv``, ``runs.csv``), once per recipe; absent until that run, and the
  block then says so.

After a new run into one of these folders, run this script and commit both.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from agents.reports import (
    RESULTS,
    ablation_seeds,
    agreement_table,
    baseline_search,
    family_table,
    fit_table,
    hybrid_table,
    label_futures_table,
    learning_warmup,
    over_policy_table,
    paired_test,
    policies_paired,
    probe_table,
    rollout_rounds,
    selection_curve,
    selection_power,
    window_share_table,
)
from agents.reports import read_rows as _rows
from marl_sched.config import REPO_ROOT

DOCS = (
    REPO_ROOT / "README.md",
    REPO_ROOT / "docs" / "results.md",
    REPO_ROOT / "docs" / "agents.md",
    REPO_ROOT / "docs" / "baselines.md",
)
FIGURES = REPO_ROOT / "docs" / "figures"
BLOCK = re.compile(r"(<!-- generated:([\w-]+) -->\n)(.*?)(<!-- /generated -->)", re.S)
SCORED = (("avg_jct_s", "avg JCT"), ("p50_jct_s", "median JCT"),
          ("p95_jct_s", "p95 JCT"), ("avg_slowdown", "avg slowdown"))  # fmt: skip


def _num(text: str, fmt: str) -> str:
    return format(float(text), fmt) if text not in ("", None) else "—"


def default_window(root: Path = RESULTS) -> str:
    """The default window's comparison: mean over seeds, 95 % half-width over seeds."""
    rows = _rows(root / "default-window" / "results.csv")
    seeds = sorted({int(r["seed"]) for r in _rows(root / "default-window" / "runs.csv")})
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


#: the benchmark tracks the docs report, each from ``results/benchmark-test-<track>/``
TRACKS = ("placement", "full")
#: the test run each track's block shows when it is not ``benchmark-test-<track>``: the
#: run of the recipe the shipped checkpoints come from (placement: the recipe with the
#: job's model's speeds and the train windows, ledger #18, the default since session 12;
#: #16, the recipe without the three rules, the default of sessions 6-11, stays in
#: ``benchmark-test-placement-norules``, and #15, the rules recipe's, in
#: ``benchmark-test-placement``; full: that recipe's migration agents, ledger #19,
#: since session 12; #17, the rules recipe's, stays in ``benchmark-test-full``)
SHIPPED_RUN = {"placement": "benchmark-test-placement-sw", "full": "benchmark-test-full-sw"}


def shipped_test_run(track: str) -> str:
    """The folder under ``results/`` whose test run a track's block and figure show."""
    return SHIPPED_RUN.get(track, f"benchmark-test-{track}")


#: the row each track's P(improvement) line is about, and whom it is compared with
FOCUS = "marl"


def benchmark_test(root: Path = RESULTS, track: str = "placement", run: str = "") -> str:
    """One track's test-split table from ``root / run`` (default
    ``benchmark-test-<track>``): per policy the IQM of each metric normalised by
    first-fit (95 % hierarchical-bootstrap intervals, or "no interval"), the mean and
    the worst-case scenario of normalised average JCT, the ledger entry the run wrote,
    and P(marl has a lower average JCT than each other policy)."""
    folder = root / (run or f"benchmark-test-{track}")
    if not (folder / "summary.csv").is_file():
        return (
            f"No {track}-track test-split results are committed yet: run `marl-sched "
            f"benchmark --split test --track {track} ... --out results/benchmark-test-{track}` "
            "once, then `python -m experiments.make_docs`.\n"
        )

    def cell(r: dict, m: str) -> str:
        lo, hi = r.get(f"ci_low_{m}", ""), r.get(f"ci_high_{m}", "")
        iqm = _num(r[f"iqm_{m}"], ".3f")
        return f"{iqm} [{float(lo):.3f}, {float(hi):.3f}]" if lo and hi else f"{iqm} (no interval)"

    runs = _rows(folder / "runs.csv")
    seeds = len({r["seed"] for r in runs})
    ledger = ""
    summary_md = folder / "summary.md"
    if summary_md.is_file():
        found = re.search(r"ledger\.jsonl #(\d+)", summary_md.read_text(encoding="utf-8"))
        ledger = f" Ledger entry: `benchmarks/ledger.jsonl` #{found.group(1)}." if found else ""
    extra = ("mean_avg_jct_s", "worst_avg_jct_s")
    rows = _rows(folder / "summary.csv")
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
            f"| {r['policy']} | " + " | ".join(cell(r, m) for m, _ in SCORED) + tail + " |"
        )
    if (folder / "improvement.csv").is_file():
        probs = [
            f"{r['over']} {float(r['p']):.2f}"
            + (f" [{float(r['ci_low']):.2f}, {float(r['ci_high']):.2f}]" if r["ci_low"] else "")
            for r in _rows(folder / "improvement.csv")
            if r["policy"] == FOCUS
        ]
        if probs:
            lines += ["", f"P({FOCUS} has a lower average JCT than): " + ", ".join(probs) + "."]
    return "\n".join(lines) + "\n"


def _choice_ceiling(names=("ceiling",), pool_with=(), agreed=False) -> str:
    """The choice ceiling's result files of ``names`` pooled (and, as a second
    paragraph, pooled with those of ``pool_with`` too); with ``agreed``, the gain of
    the chooser that acts only where its futures agree instead."""
    import json

    from agents.choice_ceiling import describe, describe_agreed, describe_stakes, pooled

    folder = RESULTS / "learning" / "selection" / "choice-ceiling"

    def read(n):
        return json.loads((folder / f"{n}.json").read_text())

    if agreed:
        both = pooled([read(n) for n in names])
        return describe_stakes(both) + "\n\n" + describe_agreed(both) + "\n"
    out = describe(pooled([read(n) for n in names])) + "\n"
    if pool_with:
        every = pooled([read(n) for n in (*names, *pool_with)])
        out += "\nAll seeds pooled: " + describe(every) + "\n"
    return out


FRESH = ("ceiling-s6", "ceiling-s7", "ceiling-s8", "ceiling-s9")  # session 16's sample

BLOCKS = {
    "default-window": default_window,
    "ablation-seeds": ablation_seeds,
    "learning-warmup": learning_warmup,
    "baseline-search": baseline_search,
    "norules-test": lambda: paired_test(
        "benchmark-test-placement-norules", "benchmark-test-placement"
    ),
    "selection-power": lambda: selection_power(
        "learning/selection/norules", "learning/selection/rules"
    ),
    "selection-ppo": lambda: selection_power(
        "learning/selection/ppo-iter12", "learning/selection/norules"
    ),
    "selection-kl": lambda: selection_power(
        "learning/selection/kl-iter12", "learning/selection/norules"
    ),
    "selection-soft": lambda: selection_power(
        "learning/selection/soft-iter4", "learning/selection/norules"
    ),
    "selection-soft-rounds": lambda: rollout_rounds("learning/selection/soft-iter4"),
    "selection-futures": lambda: selection_power(
        "learning/selection/fut-iter4", "learning/selection/norules"
    ),
    "selection-futures-rounds": lambda: rollout_rounds("learning/selection/fut-iter4"),
    "selection-futures-vs-soft": lambda: paired_test(
        "learning/selection/fut-iter4", "learning/selection/soft-iter4"
    ),
    "label-futures": lambda: label_futures_table(
        REPO_ROOT / "docs" / "measurements" / "label_futures"
    ),
    "selection-kl-vs-ppo": lambda: paired_test(
        "learning/selection/kl-iter12", "learning/selection/ppo-iter12"
    ),
    "selection-job": lambda: selection_power(
        "learning/selection/job-iter12", "learning/selection/norules"
    ),
    "selection-job-curve": lambda: selection_curve("learning/selection/job-iter12"),
    "selection-job-vs-ppo": lambda: paired_test(
        "learning/selection/job-iter12", "learning/selection/ppo-iter12"
    ),
    "selection-job48": lambda: selection_power(
        "learning/selection/job-iter48", "learning/selection/norules"
    ),
    "selection-job48-curve": lambda: selection_curve("learning/selection/job-iter48"),
    "selection-job48-vs-12": lambda: paired_test(
        "learning/selection/job-iter48", "learning/selection/job-iter12"
    ),
    "probe-mlfs-rl": lambda: probe_table(
        "learning/selection/probe-mlfs-rl", "learning/selection/norules"
    ),
    "selection-clone": lambda: selection_power(
        "learning/selection/clone-mlfs-rl", "learning/selection/norules"
    ),
    "probe-vs-clone": lambda: probe_table(
        "learning/selection/probe-mlfs-rl", "learning/selection/clone-mlfs-rl"
    ),
    "selection-clone64": lambda: selection_power(
        "learning/selection/clone64-mlfs-rl", "learning/selection/norules"
    ),
    "probe-vs-clone64": lambda: probe_table(
        "learning/selection/probe-mlfs-rl", "learning/selection/clone64-mlfs-rl"
    ),
    "agreement-clone64": lambda: agreement_table("learning/diagnostics/agreement-clone64"),
    "hybrid-clone64": lambda: hybrid_table("learning/diagnostics/hybrid-clone64"),
    "selection-ms-warm": lambda: selection_power(
        "learning/selection/ms-warm", "learning/selection/norules"
    ),
    "probe-vs-ms-warm": lambda: probe_table(
        "learning/selection/probe-mlfs-rl", "learning/selection/ms-warm"
    ),
    "ms-iter12-vs-warm": lambda: paired_test(
        "learning/selection/ms-iter12", "learning/selection/ms-warm"
    ),
    "selection-ms-iter12-curve": lambda: selection_curve("learning/selection/ms-iter12"),
    "selection-clone64-ms": lambda: selection_power(
        "learning/selection/clone64-ms", "learning/selection/norules"
    ),
    "clone64-ms-vs-clone64": lambda: paired_test(
        "learning/selection/clone64-ms", "learning/selection/clone64-mlfs-rl"
    ),
    "probe-vs-clone64-ms": lambda: probe_table(
        "learning/selection/probe-mlfs-rl", "learning/selection/clone64-ms"
    ),
    "clone-loaded-vs-clone64-ms": lambda: paired_test(
        "learning/selection/clone-loaded", "learning/selection/clone64-ms"
    ),
    "probe-vs-clone-loaded": lambda: probe_table(
        "learning/selection/probe-mlfs-rl", "learning/selection/clone-loaded"
    ),
    "fit-clones": lambda: fit_table("learning/diagnostics/fit-clones"),
    "family-clones": lambda: family_table(
        [
            ("`clone64-mlfs-rl`", "learning/selection/clone64-mlfs-rl"),
            ("`clone64-ms`", "learning/selection/clone64-ms"),
            ("`clone64-rh`", "learning/selection/clone64-rh"),
            ("`clone64-sw`", "learning/selection/clone64-sw"),
        ],
        "learning/selection/probe-mlfs-rl",
    ),
    "clone64-rh-vs-clone64-ms": lambda: paired_test(
        "learning/selection/clone64-rh", "learning/selection/clone64-ms"
    ),
    "probe-vs-clone64-rh": lambda: probe_table(
        "learning/selection/probe-mlfs-rl", "learning/selection/clone64-rh"
    ),
    "clone64-sw-vs-clone64-ms": lambda: paired_test(
        "learning/selection/clone64-sw", "learning/selection/clone64-ms"
    ),
    "probe-vs-clone64-sw": lambda: probe_table(
        "learning/selection/probe-mlfs-rl", "learning/selection/clone64-sw"
    ),
    "ms-sw-warm-vs-ms-warm": lambda: paired_test(
        "learning/selection/ms-sw-warm", "learning/selection/ms-warm"
    ),
    "ms-sw-warm-vs-norules": lambda: paired_test(
        "learning/selection/ms-sw-warm", "learning/selection/norules"
    ),
    "probe-vs-ms-sw-warm": lambda: probe_table(
        "learning/selection/probe-mlfs-rl", "learning/selection/ms-sw-warm"
    ),
    "family-warm-starts": lambda: family_table(
        [
            ("`ms-warm`", "learning/selection/ms-warm"),
            ("`ms-sw-warm`", "learning/selection/ms-sw-warm"),
        ],
        "learning/selection/probe-mlfs-rl",
    ),
    "ms-sw-iter12-vs-warm": lambda: paired_test(
        "learning/selection/ms-sw-iter12", "learning/selection/ms-sw-warm"
    ),
    "selection-ms-sw-iter12-curve": lambda: selection_curve("learning/selection/ms-sw-iter12"),
    "marl-sw-vs-norules-test": lambda: paired_test(
        "benchmark-test-placement-sw", "benchmark-test-placement-norules"
    ),
    "ms-sw-fix-iter12-vs-warm": lambda: paired_test(
        "learning/selection/ms-sw-fix-iter12", "learning/selection/ms-sw-warm"
    ),
    "ms-sw-fix-iter12-vs-ms-sw-iter12": lambda: paired_test(
        "learning/selection/ms-sw-fix-iter12", "learning/selection/ms-sw-iter12"
    ),
    "selection-ms-sw-fix-iter12-curve": lambda: selection_curve(
        "learning/selection/ms-sw-fix-iter12"
    ),
    "selection-ms-sw-fixwin-iter12-curve": lambda: selection_curve(
        "learning/selection/ms-sw-fixwin-iter12"
    ),
    "window-shares": lambda: window_share_table(
        ["learning/selection/ms-sw-fix-iter12", "learning/selection/ms-sw-fixwin-iter12"]
    ),
    "selection-ms-sw-big-iter12-curve": lambda: selection_curve(
        "learning/selection/ms-sw-big-iter12"
    ),
    "marl-sw-vs-migration-full-test": lambda: paired_test(
        "benchmark-test-full-sw", "benchmark-test-full"
    ),
    "ms-sw-big-iter12-vs-warm": lambda: paired_test(
        "learning/selection/ms-sw-big-iter12", "learning/selection/ms-sw-warm"
    ),
    "ms-sw-big-iter12-vs-fix": lambda: paired_test(
        "learning/selection/ms-sw-big-iter12", "learning/selection/ms-sw-fix-iter12"
    ),
    "window-shares-big": lambda: window_share_table(
        [
            "learning/selection/ms-sw-fix-iter12",
            "learning/selection/ms-sw-fixwin-iter12",
            "learning/selection/ms-sw-big-iter12",
        ]
    ),
    "selection-ms-sw-load-iter12-curve": lambda: selection_curve(
        "learning/selection/ms-sw-load-iter12"
    ),
    "window-shares-load": lambda: window_share_table(
        ["learning/selection/ms-sw-big-iter12", "learning/selection/ms-sw-load-iter12"]
    ),
    "selection-ms-sw-load": lambda: selection_power(
        "learning/selection/ms-sw-load-iter12", "learning/selection/ms-sw-load-warm"
    ),
    "ms-sw-load-iter12-vs-big": lambda: paired_test(
        "learning/selection/ms-sw-load-iter12", "learning/selection/ms-sw-big-iter12"
    ),
    "ms-sw-load-warm-vs-warm": lambda: paired_test(
        "learning/selection/ms-sw-load-warm", "learning/selection/ms-sw-warm"
    ),
    "ms-sw-big-picks-vs-warm": lambda: paired_test(
        "learning/selection/ms-sw-big-picks", "learning/selection/ms-sw-warm"
    ),
    "ms-sw-big-picks-vs-warm-slot2": lambda: paired_test(
        "learning/selection/ms-sw-big-picks", "learning/selection/ms-sw-warm", slot="2"
    ),
    "benchmark-test-placement-sw-load": lambda: benchmark_test(
        RESULTS, "placement", "benchmark-test-placement-sw-load"
    ),
    "marl-sw-load-vs-sw-test": lambda: paired_test(
        "benchmark-test-placement-sw-load", "benchmark-test-placement-sw"
    ),
    "teacher-vs-clones": lambda: family_table(
        [
            ("`ms-sw-warm`", "learning/selection/ms-sw-warm"),
            ("`ms-sw-load-warm`", "learning/selection/ms-sw-load-warm"),
        ],
        "learning/selection/probe-lookahead",
        policy="masked:lookahead",
    ),
    "teacher-vs-every-network": lambda: over_policy_table(
        [
            (f"{what}: `{d}`", f"learning/selection/{d}")
            for what, d in (
                ("lookahead clone, session-6 recipe", "norules"),
                ("lookahead clone, rules recipe", "rules"),
                ("lookahead clone, model speeds", "ms-warm"),
                ("lookahead clone, train-split windows (shipped)", "ms-sw-warm"),
                ("lookahead clone, loaded slices", "ms-sw-load-warm"),
                ("`masked:mlfs-rl` clone", "clone-mlfs-rl"),
                ("`masked:mlfs-rl` clone, 64 episodes", "clone64-mlfs-rl"),
                ("`masked:mlfs-rl` clone, model speeds", "clone64-ms"),
                ("`masked:mlfs-rl` clone, raw head", "clone64-rh"),
                ("`masked:mlfs-rl` clone, train-split windows", "clone64-sw"),
                ("`masked:mlfs-rl` clone, loaded episodes", "clone-loaded"),
                ("PPO, 12 iterations", "ppo-iter12"),
                ("PPO + KL to the warm start", "kl-iter12"),
                ("rollout improvement, soft targets", "soft-iter4"),
                ("rollout improvement, confirmed on futures", "fut-iter4"),
                ("PPO, job credit", "job-iter12"),
                ("PPO, job credit, 48 iterations", "job-iter48"),
                ("PPO, model speeds", "ms-iter12"),
                ("PPO, train-split windows", "ms-sw-iter12"),
                ("PPO, fixed sampler", "ms-sw-fix-iter12"),
                ("PPO, 10,000-decision batches", "ms-sw-big-iter12"),
                ("the dominance rule's picks of the line above", "ms-sw-big-picks"),
                ("PPO, loaded slices", "ms-sw-load-iter12"),
            )
        ],
        "learning/selection/probe-lookahead",
        "masked:lookahead",
    ),
    "teacher-harm-vs-teacher": lambda: policies_paired(
        "learning/selection/probe-lookahead-harm", "masked:lookahead-harm", "masked:lookahead"
    ),
    "choice-ceiling": lambda: _choice_ceiling(),
    "choice-ceiling-replication": lambda: _choice_ceiling(
        ("ceiling-s4", "ceiling-s5"), pool_with=("ceiling",)
    ),
    "choice-ceiling-agreed-dev": lambda: _choice_ceiling(
        ("ceiling", "ceiling-s4", "ceiling-s5"), agreed=True
    ),
    "choice-ceiling-agreed-fresh": lambda: "\n".join(
        (
            _choice_ceiling(FRESH, agreed=True),
            _choice_ceiling(FRESH, pool_with=("ceiling", "ceiling-s4", "ceiling-s5")),
        )
    ),
    "fitted-vs-teacher": lambda: "\n".join(
        policies_paired("learning/selection/probe-fitted", "masked:lookahead-fitted", old)
        for old in ("masked:lookahead", "first-fit")
    ),
    "teacher-vs-controls": lambda: "\n".join(
        policies_paired("learning/selection/probe-lookahead", new, old)
        for new, old in (
            ("masked:lookahead", "masked:interference-aware"),
            ("masked:lookahead", "first-fit"),
            ("masked:interference-aware", "first-fit"),
        )
    ),
    "benchmark-test-placement-lookahead": lambda: benchmark_test(
        RESULTS, "placement", "benchmark-test-placement-lookahead"
    ),
    "teacher-vs-marl-test": lambda: family_table(
        [
            ("#18 `marl` (`marl-sw`)", "benchmark-test-placement-lookahead"),
            ("#20 `marl` (`marl-sw-load`)", "benchmark-test-placement-sw-load"),
        ],
        "benchmark-test-placement-lookahead",
        policy="masked:lookahead",
    ),
    "benchmark-test-full-lookahead": lambda: benchmark_test(
        RESULTS, "full", "benchmark-test-full-lookahead"
    ),
    "teacher-vs-marl-full-test": lambda: family_table(
        [("#19 `marl` (`marl-sw-migration`)", "benchmark-test-full-lookahead")],
        "benchmark-test-full-lookahead",
        policy="masked:lookahead+lc",
    ),
    "teacher-lc-vs-control-full-test": lambda: policies_paired(
        "benchmark-test-full-lookahead", "masked:lookahead+lc", "masked:interference-aware+lc"
    ),
    "teacher-vs-control-test": lambda: policies_paired(
        "benchmark-test-placement-lookahead", "masked:lookahead", "masked:interference-aware"
    ),
    "clone64-vs-clone": lambda: paired_test(
        "learning/selection/clone64-mlfs-rl", "learning/selection/clone-mlfs-rl"
    ),
    **{
        f"benchmark-test-{t}": (lambda t=t: benchmark_test(RESULTS, t, shipped_test_run(t)))  # type: ignore[misc]
        for t in TRACKS
    },
}


def figures(root: Path = RESULTS, out: Path = FIGURES) -> list[Path]:
    """The figures the docs show, drawn from the same files; returns those written."""
    from marl_sched import plots

    written = []
    rows = _rows(root / "default-window" / "results.csv")
    seeds = sorted({int(r["seed"]) for r in _rows(root / "default-window" / "runs.csv")})
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
        summary_csv = root / shipped_test_run(track) / "summary.csv"
        if not summary_csv.is_file():
            continue
        # the figure reads the IQM and interval columns (numbers); text columns stay text
        summary = [
            {k: (float(v) if v and k.startswith(("iqm_", "ci_")) else (v or None))
             for k, v in r.items()}
            for r in _rows(summary_csv)
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
