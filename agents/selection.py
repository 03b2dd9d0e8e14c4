"""Checkpoint selection: greedy validation runs of a network's weights
(:func:`evaluate_weights`) and the rule that makes a checkpoint the new ``best``
(:func:`is_new_best`, ``train.select_rule``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.config import ModelConfig, TrainConfig, eval_windows
from agents.records import no_progress
from marl_sched.config import ExperimentConfig
from marl_sched.metrics import write_json, write_run


def evaluate_weights(
    cfg: ExperimentConfig,
    mc: ModelConfig,
    tc: TrainConfig,
    manifest: dict,
    weights: dict,
    out: Path | None = None,
    progress=no_progress,
) -> dict[str, Any]:
    """Greedy rollout of ``weights`` on the validation windows; its metrics (and files).

    One run: its metrics in ``out/``. Several (``train.eval_extra_windows``,
    ``train.eval_loads``): ``out/``, ``out/extra_<k>/``, ``out/<main|extra_<k>>_load_<L>/``,
    and ``{"avg_jct_s", "jobs", "windows": [...]}`` over all runs, also in
    ``out/validation.json``. ``progress(total, label)``: a bar per run."""
    from agents.policy import MarlPolicy, SingleAgentPolicy, agents_from_weights
    from marl_sched.runner import TraceOptions, build_cluster, load_workload, simulate

    agents = agents_from_weights(manifest, weights)
    cls = SingleAgentPolicy if agents.central else MarlPolicy
    topo, perf = build_cluster(cfg)
    runs = []
    loads = tc.eval_loads or (None,)
    windows = eval_windows(cfg, tc)
    for k, base in enumerate(windows):
        for j, load in enumerate(loads):
            window = base if load is None else {**base, "load": load}
            workload = load_workload(cfg, perf, TraceOptions(**window))
            policy = cls(agents=agents)
            n = len(runs) + 1
            bar = progress(len(workload.jobs), f"validation {n}/{len(windows) * len(loads)}")
            try:
                metrics, records, _ = simulate(
                    cfg, cls.name, workload, topo, perf, policy=policy, progress=bar
                )
            finally:
                bar.close()
            if out is not None:
                write_run(out / _run_dir(k, load, first=j == 0), metrics, records)
            runs.append((window, metrics, len(records)))
    if len(runs) == 1:
        return runs[0][1]
    jobs = sum(n for _, _, n in runs)
    summary = {
        "avg_jct_s": sum(m["avg_jct_s"] * n for _, m, n in runs) / jobs,
        "jobs": jobs,
        "windows": [
            {
                "trace": w["trace"] or cfg.workload.trace,
                "start": w["start"],
                "load": w["load"] if w["load"] is not None else cfg.workload.load,
                "jobs": n,
                "avg_jct_s": m["avg_jct_s"],
            }  # fmt: skip
            for w, m, n in runs
        ],
    }
    if out is not None:
        write_json(out / "validation.json", summary)
    return summary


def _run_dir(k: int, load: float | None, first: bool) -> str:
    """Sub-folder of validation run (window ``k``, ``load``) under the eval folder."""
    if load is None:
        return "" if k == 0 else f"extra_{k - 1}"
    if k == 0 and first:
        return ""
    return f"{'main' if k == 0 else f'extra_{k - 1}'}_load_{load:g}"


def validation_runs(eval_m: dict[str, Any]) -> list[float]:
    """Average JCT of each validation run (window × load) in an evaluation result."""
    if "windows" in eval_m:
        return [w["avg_jct_s"] for w in eval_m["windows"]]
    return [eval_m["avg_jct_s"]]


def is_new_best(
    tc: TrainConfig, avg: float, runs: list[float], best: list | None, best_runs: list | None
) -> bool:
    """Does a checkpoint with validation ``avg`` (per run: ``runs``) replace ``best``
    under ``train.select_rule``? ``mean``: a lower average; ``dominate``: also at most
    ``1 + select_tolerance`` times the best on every run."""
    if best is None:
        return True
    if avg >= best[1]:
        return False
    if tc.select_rule == "dominate" and best_runs is not None:
        if len(best_runs) != len(runs):
            raise ValueError(f"{len(runs)} validation runs against the best's {len(best_runs)}")
        slack = 1.0 + tc.select_tolerance
        return all(r <= b * slack for r, b in zip(runs, best_runs, strict=True))
    return True
