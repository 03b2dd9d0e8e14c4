"""Tables of the learning results for the docs (``experiments/make_docs.py`` renders
them into docs/agents.md and docs/baselines.md): each reads committed files under
``results/`` and returns a Markdown table, so no figure in those docs is typed by hand.
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
    """A results CSV's rows (``experiments/make_docs.py`` reads its own tables with it)."""
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _per_scenario(runs: Path) -> dict[str, float]:
    """A one-checkpoint validation run's average JCT over first-fit's, per scenario."""
    rows = read_rows(runs)
    ff = {r["scenario"]: float(r["avg_jct_s"]) for r in rows if r["policy"] == "first-fit"}
    return {r["scenario"]: float(r["avg_jct_s"]) / ff[r["scenario"]]
            for r in rows if r["policy"] != "first-fit"}  # fmt: skip


def geomean_over_first_fit(runs: Path) -> float:
    """Geometric mean over a benchmark folder's scenarios of the one checkpoint's
    average JCT divided by first-fit's (one seed per scenario)."""
    ratios = _per_scenario(runs).values()
    return math.exp(sum(map(math.log, ratios)) / len(ratios))


def learning_warmup(root: Path = RESULTS) -> str:
    """docs/agents.md's table of the warm-up recipe (``results/learning/warmup/``)
    against the shipped recipe's warm starts (``results/learning/validation-medium/``)."""
    learn = root / "learning"
    lines = [
        "| training seed | six selection runs: warm start → selected (s) | selected | "
        "validation, shipped recipe's warm start | validation, warm start | "
        "validation, selected | selected over its warm start | validation, iteration 12 "
        "| iteration 12 over its warm start |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in (0, 1, 2):
        state = json.loads((learn / "warmup" / f"ppo-seed{s}" / "state.json").read_text())
        best, scores = state["best"][0], state["scores"]
        val = learn / "warmup" / "validation-medium"
        old = geomean_over_first_fit(learn / "validation-medium" / f"seed{s}-warm" / "runs.csv")
        warm = geomean_over_first_fit(val / f"wu-s{s}-warm" / "runs.csv")
        it = int(best.split("_")[1])
        chosen = warm if it == 0 else geomean_over_first_fit(val / f"wu-s{s}-iter{it}" / "runs.csv")
        last = geomean_over_first_fit(val / f"wu-s{s}-iter12" / "runs.csv")
        lines.append(
            f"| {s} | {scores['iter_000000']:,.0f} → {scores[best]:,.0f} | iteration {it} | "
            f"{old:.3f} | {warm:.3f} | {chosen:.3f} | {warm / chosen:.3f} | {last:.3f} | "
            f"{warm / last:.3f} |"
        )
    return "\n".join(lines) + "\n"


def rollout_rounds(folder: str, root: Path = RESULTS) -> str:
    """docs/agents.md's per-round table of a rollout-improvement run's seeds
    (``<folder>/train-seed*``: ``config.yaml``, ``state.json``, ``tb/``): per round the
    labels moved among the decisions played, the KL of the fit from the round's start
    (``improve/*``), and the six selection runs' mean at the first and last iteration."""
    from agents.records import read_tags

    lines = [
        "| training seed | labels moved / decisions, per round | KL from the round's start "
        "(nats per decision), per round | six selection runs: warm start → last round (s) |",
        "|---|---|---|---|",
    ]
    for run in sorted((root / folder).glob("train-seed*")):
        names = ("improved", "decisions", "kl_from_round_start", "unconfirmed")
        series = read_tags(run, [f"improve/{t}" for t in names])
        moved, played, kl, unconfirmed = (
            [v for _, v in sorted(series[f"improve/{t}"].items())] for t in names
        )
        # runs with train.improve_futures also log the labels their futures turned down
        unconfirmed = [f" (+{u:.0f} unconfirmed)" for u in unconfirmed] or [""] * len(moved)
        state = json.loads((run / "state.json").read_text())
        scores = state["scores"]
        first, last = scores["iter_000000"], scores[f"iter_{state['iteration']:06d}"]
        lines.append(
            f"| {run.name.removeprefix('train-seed')} | "
            + " · ".join(
                f"{m:.0f}{u} / {d:,.0f}" for m, u, d in zip(moved, unconfirmed, played, strict=True)
            )
            + " | " + " · ".join(f"{k:.2f}" for k in kl)
            + f" | {first:,.0f} → {last:,.0f} ({last / first - 1:+.1%}) |"
        )  # fmt: skip
    return "\n".join(lines) + "\n"


def selection_curve(folder: str, root: Path = RESULTS) -> str:
    """docs/agents.md's table of a PPO run's seeds (``<folder>/train-seed*/state.json``):
    the six selection runs' average JCT at every evaluated iteration, and the last
    iteration's over the warm start's (iteration 0)."""
    runs = sorted((root / folder).glob("train-seed*"))
    states = [json.loads((run / "state.json").read_text()) for run in runs]
    its = sorted({int(k.removeprefix("iter_")) for st in states for k in st["scores"]})
    lines = [
        "| training seed | "
        + " | ".join(f"iteration {i}" for i in its)
        + " | last over the warm start |",
        "|---|" + "---|" * (len(its) + 1),
    ]
    for run, st in zip(runs, states, strict=True):
        scores = {int(k.removeprefix("iter_")): v for k, v in st["scores"].items()}
        cells = [f"{scores[i]:,.0f}" if i in scores else "—" for i in its]
        last = scores[max(scores)] / scores[0] - 1
        lines.append(
            f"| {run.name.removeprefix('train-seed')} | " + " | ".join(cells) + f" | {last:+.1%} |"
        )
    return "\n".join(lines) + "\n"


def tb_scalars(run: Path, tag: str) -> list[float]:
    """A committed training run's TensorBoard values of ``tag`` (``run/tb``), in step
    order; [] when the run did not log it."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    if tag not in acc.Tags().get("scalars", []):
        return []
    return [e.value for e in sorted(acc.Scalars(tag), key=lambda e: e.step)]


def window_share_table(folders: list[str], root: Path = RESULTS) -> str:
    """docs/agents.md's table of how many training windows carry a PPO batch's signal:
    over every iteration of a run's seeds (``<folder>/train-seed*/tb``), the median
    share of the batch's squared advantages carried by its heaviest window, before and
    after ``train.advantage_scale``'s weighing (``losses/top_window_share_raw``,
    ``losses/top_window_share``), the share of iterations where it is ≥ 0.99, and the
    median episode length in decisions."""
    lines = [
        "| run | iterations | heaviest window's share, median (≥ 0.99) | after the weighing, "
        "median (≥ 0.99) | decisions per episode, median |",
        "|---|---|---|---|---|",
    ]
    for folder in folders:
        runs = sorted((root / folder).glob("train-seed*"))
        raw = [v for r in runs for v in tb_scalars(r, "losses/top_window_share_raw")]
        weighed = [v for r in runs for v in tb_scalars(r, "losses/top_window_share")]
        length = [v for r in runs for v in tb_scalars(r, "charts/episode_length")]

        def cell(xs: list[float]) -> str:
            top = sum(x >= 0.99 for x in xs) / len(xs)
            return f"{statistics.median(xs):.3f} ({top:.0%})"

        lines.append(
            f"| `{folder.split('/')[-1]}` | {len(raw)} | {cell(raw)} | {cell(weighed)} | "
            f"{statistics.median(length):.0f} |"
        )
    return "\n".join(lines) + "\n"


def label_futures_table(folder: Path) -> str:
    """docs/agents.md's table of ``python -m agents.label_futures`` outputs
    (``folder/seed*.json``): per warm start and pooled, how the moved labels did on
    their real future and on the resampled ones."""
    from agents.label_futures import summary

    lines = [
        "| warm start | labels (at the end) | gain on the real future, mean | "
        "futures | gain on the resampled futures, mean ± s.e. | label wins | label loses "
        "| labels winning on average |",
        "|---|---|---|---|---|---|---|---|",
    ]
    pooled: list[dict] = []
    for path in sorted(folder.glob("seed*.json")):
        data = json.loads(path.read_text())
        pooled += data["labels"]
        lines.append(_label_row(data["checkpoint"], summary(data["labels"], data["margin"])))
    lines.append(_label_row("pooled", summary(pooled, data["margin"])))
    return "\n".join(lines) + "\n"


def _label_row(name: str, s: dict) -> str:
    return (
        f"| {name} | {s['labels']} ({s['labels_at_the_end']}) | {s['real_gain_mean']:.2%} | "
        f"{s['pairs']} | {s['future_gain_mean']:+.2%} ± {s['future_gain_se']:.2%} | "
        f"{s['share_futures_label_wins']:.0%} | {s['share_futures_label_loses']:.0%} | "
        f"{s['share_labels_winning_on_average']:.0%} |"
    )


#: the hand rules whose removal did not lose in training seed 2 (docs/agents.md,
#: "Ablations at equal budget"): arm name → (folder of seed 2's run, override)
ABLATION_ARMS = {
    "nofloor": ("nofloor", "`env.speed_floor=0`"),
    "nops": ("nopsrule", "`env.ps_rule=false`"),
    "noexchange": ("noexchange", "`model.exchange=false`"),
}
#: the three removed together (session 5): its seeds' runs under ``ablations/norules/``
COMBINED_ARM = ("norules", "all three")


def ablation_seeds(root: Path = RESULTS) -> str:
    """docs/agents.md's three-seed table of those ablations: each seed's selected
    checkpoint over the full recipe's of the same seed (geomean over first-fit), and
    the paired geomean over the three with its hierarchical 95 % interval (scenarios,
    then training seeds; :func:`marl_sched.benchmark.stats.geomean_ratio`)."""
    from marl_sched.benchmark.stats import geomean_ratio

    learn = root / "learning"
    full = [_per_scenario(learn / "validation-medium" / f"seed{s}-warm" / "runs.csv")
            for s in (0, 1, 2)]  # fmt: skip
    lines = ["| ablation | override | seed 0 | seed 1 | seed 2 | geomean of the three "
             "[95 % interval] |", "|---|---|---|---|---|---|"]  # fmt: skip
    arms = {arm: ([learn / "ablations" / "seeds" / f"{arm}-s{s}" / "runs.csv" for s in (0, 1)]
                  + [learn / "ablations" / seed2 / "runs.csv"], override)
            for arm, (seed2, override) in ABLATION_ARMS.items()}  # fmt: skip
    name, override = COMBINED_ARM
    arms[name] = ([learn / "ablations" / name / f"s{s}" / "runs.csv" for s in (0, 1, 2)], override)
    for arm, (runs, override) in arms.items():
        alt = [_per_scenario(r) for r in runs]
        logs = [[[math.log(a[sc] / f[sc])] for a, f in zip(alt, full, strict=True)]
                for sc in sorted(full[0])]  # fmt: skip
        per_seed = [math.exp(sum(math.log(a[sc] / f[sc]) for sc in f) / len(f))
                    for a, f in zip(alt, full, strict=True)]  # fmt: skip
        lines.append(f"| {arm} | {override} | " + " | ".join(f"{r:.3f}" for r in per_seed)
                     + f" | {geomean_ratio(logs).format()} |")  # fmt: skip
    return "\n".join(lines) + "\n"


#: the learned baselines' third search round and final runs (session 5):
#: ``results/baselines/search-s5/<learner>/search_<learner>.json`` (experiments/
#: train_baselines.py --search) and ``results/baselines/final-s5/<learner>_s<seed>.json``
BASELINE_LEARNERS = ("mlfs-rl", "harmony")
#: the settings the checkpoints shipped before session 5 were trained with (the first
#: search's choice, every other field its config's default; docs/baselines.md, "Final
#: runs"), marked in the search tables: the control point of the new search
FIRST_CHOICE = {
    "harmony": {"lr": 3e-4, "entropy_coef": 0.01, "epsilon_start": 0.5, "gamma": 0.5},
    "mlfs-rl": {"lr": 1e-2, "entropy_coef": 1e-3, "rollouts": 4},
}


def _point(row: dict, grid: dict) -> str:
    return ", ".join(f"{k} {row[k]:g}" for k in grid)


def baseline_search(root: Path = RESULTS) -> str:
    """docs/baselines.md's tables of the session-5 search (every point, the chosen one
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


def paired_test(
    candidate: str, reference: str, root: Path = RESULTS, slot: str | None = None
) -> str:
    """One line comparing two test runs' ``marl`` rows cell by cell (the same scenarios,
    seeds and training-run slots): the paired geometric-mean ratio with its hierarchical
    interval, and P(candidate lower) from the runs' normalised scores. ``slot``: only
    that training-run slot's cells (``runs.csv``'s ``run``)."""
    cand_rows = read_rows(root / candidate / "runs.csv")
    ref_rows = read_rows(root / reference / "runs.csv")
    if slot is not None:
        cand_rows = [r for r in cand_rows if r["policy"] != "marl" or r["run"] == slot]
        ref_rows = [r for r in ref_rows if r["run"] == slot]
    new, old = _cells(cand_rows, "marl"), _cells(ref_rows, "marl")
    n, ratio, p = _paired(new, old, _cells(cand_rows, "first-fit"))
    where = "" if slot is None else f", training-run slot {slot} only"
    return (f"`marl` of `{candidate}` over `marl` of `{reference}`, paired by scenario, "
            f"training-run slot and seed ({n} scenarios{where}): geometric-mean ratio of "
            f"average JCT {ratio}; P(lower) {p}.\n")  # fmt: skip


def policies_paired(folder: str, new: str, old: str, root: Path = RESULTS) -> str:
    """One line comparing two policies of one benchmark run (``folder``'s
    ``runs.csv``) cell by cell: the paired geometric-mean ratio of ``new``'s average
    JCT over ``old``'s with its hierarchical interval, and P(``new`` lower), as
    :func:`paired_test` does for two runs' ``marl`` rows."""
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


def probe_table(folder: str, warm_starts: str, root: Path = RESULTS) -> str:
    """docs/agents.md's table of the action-space probe: ``masked:mlfs-rl`` against
    ``mlfs-rl`` (``<folder>/runs.csv``, one checkpoint), and each against the warm
    starts (``marl`` of ``<warm_starts>/runs.csv``, the geometric mean over its
    training slots per scenario and seed), paired by scenario and seed."""
    rows = read_rows(root / folder / "runs.csv")
    ff = _cells(rows, "first-fit")
    mlfs, probe = _cells(rows, "mlfs-rl"), _cells(rows, "masked:mlfs-rl")
    warm: dict[str, dict[tuple[str, str], float]] = {}
    for sc, cells in _cells(read_rows(root / warm_starts / "runs.csv"), "marl").items():
        for seed in sorted({k[1] for k in cells}):
            vals = [v for (_, s), v in cells.items() if s == seed]
            warm.setdefault(sc, {})[("0", seed)] = statistics.geometric_mean(vals)
    lines = [
        "| comparison | scenarios | paired ratio of average JCT [95 % interval] | P(lower) |",
        "|---|---|---|---|",
    ]
    for name, new, old in (
        ("`masked:mlfs-rl` over `mlfs-rl` (what the masks cost)", probe, mlfs),
        ("`mlfs-rl` over the warm starts", mlfs, warm),
        ("`masked:mlfs-rl` over the warm starts", probe, warm),
    ):
        n, ratio, p = _paired(new, old, ff)
        lines.append(f"| {name} | {n} | {ratio} | {p} |")
    return "\n".join(lines) + "\n"


#: the difference a selection set should resolve (a ratio of 1.05 or 1 / 1.05)
RESOLVE = 1.05


def scenarios_to_resolve(sd: float, z: float = 1.96) -> int:
    """How many scenarios a paired comparison needs for its interval's half-width (in
    log) to be ``log(RESOLVE)``, when the mean log ratios of scenarios spread with
    standard deviation ``sd`` (the scenario term dominates the hierarchical interval:
    seeds and training runs are averaged inside a scenario)."""
    return max(1, math.ceil((z * sd / math.log(RESOLVE)) ** 2))


def selection_power(candidate: str, reference: str, root: Path = RESULTS) -> str:
    """docs/agents.md's table of what two validation runs of the same two recipes say
    on the old selection set (the medium tier, evaluation seed 0) and on the whole
    validation split (every tier, every seed): the paired ratio with its interval, the
    spread of the per-scenario mean logs, and how many scenarios would resolve
    :data:`RESOLVE` at that spread (:func:`scenarios_to_resolve`)."""
    from marl_sched.benchmark.stats import geomean_ratio

    cand_rows = read_rows(root / candidate / "runs.csv")
    new, old = _cells(cand_rows, "marl"), _cells(read_rows(root / reference / "runs.csv"), "marl")
    tiers = {r["scenario"]: r["tier"] for r in cand_rows}
    seeds = sorted({r["seed"] for r in cand_rows})
    medium = {sc for sc, t in tiers.items() if t == "medium"}
    sets = [
        ("medium tier, seed 0 (the selection set until session 6)", medium, {seeds[0]}),
        ("medium tier, every seed", medium, None),
        *(
            (f"{t} tier, every seed", {sc for sc, u in tiers.items() if u == t}, None)
            for t in ("light", "heavy")
        ),  # fmt: skip
        ("whole validation split, every seed", None, None),
    ]
    lines = [
        "| cells | scenarios × seeds × training slots | paired ratio [95 % interval] "
        "| s.d. of per-scenario log ratio | scenarios to resolve 5 % |",
        "|---|---|---|---|---|",
    ]
    for label, scenarios, kept in sets:
        names, logs = _paired_logs(new, old, scenarios, kept)
        # the sample s.d. (n - 1) of the per-scenario mean log ratios
        sd = statistics.stdev(sum(sum(r) for r in sc) / sum(len(r) for r in sc) for sc in logs)
        shape = f"{len(names)} × {len(logs[0][0])} × {len(logs[0])}"
        lines.append(
            f"| {label} | {shape} | {geomean_ratio(logs).format()} | {sd:.3f} | "
            f"{scenarios_to_resolve(sd)} |"
        )
    return "\n".join(lines) + "\n"


def agreement_table(folder: str, root: Path = RESULTS) -> str:
    """``experiments/diag_agreement.py``'s summary (``summary.csv`` in ``folder``) as a
    markdown table: per driver and group of jobs, the share of the GPU work, whole-
    placement and per-decision agreement, and the student's predicted iteration time
    over the teacher's."""
    rows = read_rows(root / folder / "summary.csv")
    driver = {"teacher": "teacher places", "student": "network places"}

    def pct(x: str) -> str:
        return "—" if x in ("", "nan") else f"{float(x):.2f}"

    out = [
        "| driver | jobs | placed | share of GPU work | same placement | per-decision agreement "
        "(slot / forward / follow) | predicted iteration time, network over teacher | "
        "network > 1 % slower |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        kinds = " / ".join(pct(r[f"{k}_agreement"]) for k in ("slot", "forward", "follow"))
        out.append(
            f"| {driver.get(r['mode'], r['mode'])} | {r['group']} | {int(r['jobs']):,} | "
            f"{pct(r['work_share'])} | {pct(r['same_groups'])} | {pct(r['agreement'])} "
            f"({kinds}) | {pct(r['time_ratio'])} | {pct(r['slower_share'])} |"
        )
    return "\n".join(out) + "\n"


def hybrid_table(folder: str, root: Path = RESULTS) -> str:
    """``experiments/diag_agreement.py``'s hybrid runs (``runs.csv`` in ``folder``:
    scenario, seed, mode, avg_jct_s, with the ``teacher`` and ``student`` runs beside
    the hybrids) as a markdown table: each driver's average JCT over the teacher's,
    paired by scenario and seed (geometric mean; with one seed the interval resamples
    scenarios only: a percentile bootstrap, seeded), and the share of the student's gap
    to its teacher that it closes (on the mean log ratio)."""
    import numpy as np

    from marl_sched.benchmark.stats import geomean_ratio, single_sample

    rows = read_rows(root / folder / "runs.csv")
    jct = {(r["mode"], r["scenario"], r["seed"]): float(r["avg_jct_s"]) for r in rows}
    cells = sorted({(s, e) for m, s, e in jct if m == "teacher"})
    modes = [m for m in dict.fromkeys(r["mode"] for r in rows) if m != "teacher"]

    def logs(mode: str) -> list[list[list[float]]]:
        by: dict[str, list[float]] = {}
        for s, e in cells:
            if (mode, s, e) in jct:
                by.setdefault(s, []).append(math.log(jct[mode, s, e] / jct["teacher", s, e]))
        return [[v] for _, v in sorted(by.items())]

    gap = statistics.fmean(x for sc in logs("student") for x in sc[0])
    out = [
        "| driver | scenarios | average JCT over the teacher's [95 % interval] | "
        "share of the student's gap closed |",
        "|---|---|---|---|",
    ]
    for m in modes:
        got = logs(m)
        mean = statistics.fmean(x for sc in got for x in sc[0])
        closed = "—" if m == "student" else f"{1 - mean / gap:.2f}"
        if single_sample(got):  # one seed: resample the scenarios
            x = np.array([sc[0][0] for sc in got])
            boot = np.random.default_rng(0).choice(x, size=(2000, len(x))).mean(axis=1)
            low, high = np.exp(np.percentile(boot, [2.5, 97.5]))
            ratio = f"{math.exp(mean):.3f} [{low:.3f}, {high:.3f}]"
        else:
            ratio = geomean_ratio(got).format()
        out.append(f"| {m} | {len(got)} | {ratio} | {closed} |")
    return "\n".join(out) + "\n"


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


def over_policy_table(
    folders: list[tuple[str, str]], probe: str, policy: str, root: Path = RESULTS
) -> str:
    """docs/agents.md's table of every network set against one policy: per
    (label, folder of a benchmark run with ``marl`` rows), the pooled paired ratio of
    its ``marl`` average JCT over ``policy``'s cells in ``probe`` (one checkpoint, the
    same scenario and seed for every training slot), with its hierarchical interval,
    and P(``marl`` lower), as :func:`family_table`'s "all" row and :func:`paired_test`'s
    probability."""
    rows = read_rows(root / probe / "runs.csv")
    teacher = _one_checkpoint(rows, policy)
    ff = _cells(rows, "first-fit")
    out = [f"| networks | scenarios | over `{policy}` [95 % interval] | P(lower) |",
           "|---|---|---|---|"]  # fmt: skip
    for label, folder in folders:
        new = _cells(read_rows(root / folder / "runs.csv"), "marl")
        old = _under_slots(teacher, new)
        n, ratio, p = _paired({sc: new[sc] for sc in old}, old, ff)
        out.append(f"| {label} | {n} | {ratio} | {p} |")
    return "\n".join(out) + "\n"


def fit_table(folder: str, root: Path = RESULTS) -> str:
    """``experiments/diag_fit.py``'s rows (``fit.csv`` in ``folder``) as a markdown table:
    per network and set of episodes, the share of the teacher's labels its greedy action
    equals, over all and per kind and job size (the number of labels in the heading:
    the same episodes for every network)."""
    rows = read_rows(root / folder / "fit.csv")
    cols = [(k, s) for k in ("slot", "forward", "follow") for s in ("1 worker", "2+ workers")]
    by = {(r["network"], r["episodes"], r["kind"], r["size"]): r for r in rows}
    nets = list(dict.fromkeys(r["network"] for r in rows))
    sets = list(dict.fromkeys(r["episodes"] for r in rows))

    def acc(r: dict) -> str:
        return "—" if r["labels"] == "0" else f"{float(r['accuracy']):.3f}"

    out = []
    for episodes in sets:
        n = {c: by[(nets[0], episodes, *c)]["labels"] for c in cols}
        total = by[nets[0], episodes, "all", "all"]["labels"]
        head = " | ".join(f"{k}, {s} ({int(n[k, s]):,})" for k, s in cols)
        out += [f"| network ({episodes} episodes) | all ({int(total):,}) | {head} |",
                "|---|---|" + "---|" * len(cols)]  # fmt: skip
        for net in nets:
            cells = " | ".join(acc(by[(net, episodes, *c)]) for c in cols)
            out.append(f"| `{net}` | {acc(by[net, episodes, 'all', 'all'])} | {cells} |")
        out.append("")
    return "\n".join(out[:-1]) + "\n"
