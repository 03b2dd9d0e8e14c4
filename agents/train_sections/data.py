"""The data part of ``train:``: the trace windows the training episodes are cut from and
those that validate the checkpoints, and helpers that read only these keys and the
config's ``workload:``.
"""

from __future__ import annotations

from dataclasses import dataclass

from marl_sched.config import ExperimentConfig, check, check_bounds

#: the range of each count of this section, checked before Ray starts
DATA_BOUNDS = {
    "episode_jobs": (1, 10**7),
    "episode_warmup_jobs": (0, 10**7),
    "eval_max_jobs": (1, 10**7),
    "eval_start": (0, 10**9),
}


@dataclass(frozen=True)
class TrainWindow:
    """A trace window mixed into the training episodes (``train.extra_windows``).

    Attributes:
        trace: trace file (relative paths: to the repository root, like
            ``workload.trace``).
        start: first job of the window.
        max_jobs: jobs in the window (null = to the end of the trace).
        load: arrival-rate multiplier (null = the config's ``workload.load``).
        share: relative weight of the window when an episode picks its source (the
            config's own workload weighs ``train.workload_share``).
    """

    trace: str
    start: int = 0
    max_jobs: int | None = None
    load: float | None = None
    share: float = 1.0

    def validate(self, where: str, key: str) -> None:
        check(self.start >= 0, where, f"{key}.start", f"must be >= 0, got {self.start}")
        if self.max_jobs is not None:
            check(self.max_jobs >= 1, where, f"{key}.max_jobs", "must be >= 1 or null")
        if self.load is not None:
            check(self.load > 0, where, f"{key}.load", "must be > 0 or null")
        check(self.share > 0, where, f"{key}.share", f"must be > 0, got {self.share}")


@dataclass(frozen=True)
class DataSection:
    """The training and validation windows.

    Attributes:
        episode_jobs: jobs per training episode (a random slice of a source window;
            a shorter window is one whole episode).
        episode_warmup_jobs: up to this many jobs before each slice are placed by the
            agents, unscored (0: slices start from an empty cluster).
        extra_windows: more trace windows to train on (:class:`TrainWindow`); each
            episode picks its source with probability proportional to its share.
        workload_share: the share of the config's own workload among the sources.
        split_share: the share of the default suite's train-split scenarios on the
            ``default`` topology, split evenly (:func:`split_windows`); 0 = none.
        eval_trace: trace of the evaluation window (null = the config's trace).
        eval_start: first job of the evaluation window (null = right after the
            training window); must not overlap the training window on the same trace.
        eval_max_jobs: jobs in the evaluation window.
        eval_extra_windows: more validation windows (:class:`TrainWindow`; ``share``
            unused); the validation figure is the average JCT over all their jobs.
        eval_loads: arrival-rate multipliers at which every validation window is
            rolled out (empty = once, at its own load).
    """

    episode_jobs: int = 200
    episode_warmup_jobs: int = 0
    extra_windows: tuple[TrainWindow, ...] = ()
    workload_share: float = 1.0
    split_share: float = 0.0
    eval_trace: str | None = None
    eval_start: int | None = None
    eval_max_jobs: int = 200
    eval_extra_windows: tuple[TrainWindow, ...] = ()
    eval_loads: tuple[float, ...] = ()

    def validate(self, where: str, key: str) -> None:
        check_bounds(self, DATA_BOUNDS, where, key)
        for name in ("episode_jobs", "eval_max_jobs"):
            value = getattr(self, name)
            check(value >= 1, where, f"{key}.{name}", f"must be >= 1, got {value}")
        check(self.workload_share > 0, where, f"{key}.workload_share",
              f"must be > 0, got {self.workload_share}")  # fmt: skip
        check(0 <= self.split_share <= 1e6, where, f"{key}.split_share",
              f"must be in [0, 1e6], got {self.split_share}")  # fmt: skip
        if self.eval_start is not None:
            check(self.eval_start >= 0, where, f"{key}.eval_start", "must be >= 0")
        for i, load in enumerate(self.eval_loads):
            check(load > 0, where, f"{key}.eval_loads[{i}]", f"must be > 0, got {load}")


def _end(start: int, n: int | None) -> int | str:
    return "end" if n is None else start + n


def _overlap(a: int, n: int | None, b: int, m: int | None) -> bool:
    """Do job ranges ``[a, a+n)`` and ``[b, b+m)`` share a job (None = to the end)?"""
    return (m is None or a < b + m) and (n is None or b < a + n)


def check_windows_apart(cfg: ExperimentConfig, tc: DataSection) -> None:
    """InputError when a training or validation window touches the benchmark's test split
    or a validation window shares a job with a training window (blaming the extra
    training window's key, else the validation window's)."""
    wl = cfg.workload
    trains = [("workload", wl.trace, wl.start, wl.max_jobs)]
    trains += [
        (f"train.extra_windows[{i}]", w.trace, w.start, w.max_jobs)
        for i, w in enumerate(tc.extra_windows)
    ]
    trains += [("train.split_share", w.trace, w.start, w.max_jobs) for w in split_windows(tc)]
    evals = [("train.eval_start", tc.eval_trace or wl.trace, eval_window(cfg, tc)["start"],
              tc.eval_max_jobs)]  # fmt: skip
    evals += [
        (f"train.eval_extra_windows[{i}]", w.trace, w.start, w.max_jobs)
        for i, w in enumerate(tc.eval_extra_windows)
    ]
    from marl_sched.benchmark import check_not_test

    for i, (key, trace, start, n) in enumerate(trains + evals):
        warm = wl.warmup_jobs if i == 0 else 0
        check_not_test(cfg.resolve_path(trace), start, n, warmup_jobs=warm,
                       where=f"{cfg.source}: {key}")  # fmt: skip
    for t_key, t_trace, t_start, t_n in trains:
        for e_key, e_trace, e_start, e_n in evals:
            same = cfg.resolve_path(t_trace) == cfg.resolve_path(e_trace)
            check(
                not (same and _overlap(t_start, t_n, e_start, e_n)),
                cfg.source,
                e_key if t_key == "workload" else t_key,
                f"training window [{t_start}, {_end(t_start, t_n)}) of {t_trace} overlaps "
                f"the evaluation window [{e_start}, {_end(e_start, e_n)}) of {e_trace}",
            )


def split_windows(tc: DataSection) -> tuple[TrainWindow, ...]:
    """``train.split_share``'s training windows: every train-split scenario of the
    default suite's utilisation tiers (not its queue tiers) on the ``default`` topology,
    warm-up jobs included, at its own load, the share split evenly. Empty when the share
    is 0."""
    if not tc.split_share:
        return ()
    from marl_sched.benchmark import DEFAULT_SUITE, load_suite
    from marl_sched.benchmark.suite import resolve

    suite = load_suite(DEFAULT_SUITE)
    scenarios = [sc for sc in suite.split("train", suite.tiers) if sc.topology == "default"]
    return tuple(
        TrainWindow(
            trace=str(resolve(sc.trace)),
            start=sc.first_job,
            max_jobs=sc.start - sc.first_job + sc.max_jobs,
            load=sc.load,
            share=tc.split_share / len(scenarios),
        )
        for sc in scenarios
    )


def eval_windows(cfg: ExperimentConfig, tc: DataSection) -> list[dict]:
    """Trace options of every validation window: the main one, then the extra ones."""
    extra = [_trace_options(str(cfg.resolve_path(w.trace)), w.start, w.max_jobs, w.load)
             for w in tc.eval_extra_windows]  # fmt: skip
    return [eval_window(cfg, tc), *extra]


def _trace_options(trace: str | None, start: int, max_jobs: int | None, load) -> dict:
    return {"trace": trace, "trace_format": None, "start": start, "max_jobs": max_jobs,
            "load": load, "seed": None}  # fmt: skip


def eval_window(cfg: ExperimentConfig, tc: DataSection) -> dict:
    """Trace options (``marl_sched.runner.TraceOptions`` fields) of the eval window."""
    wl = cfg.workload
    start = tc.eval_start
    if start is None:
        start = wl.start + (wl.max_jobs or 0) if tc.eval_trace is None else 0
    trace = str(cfg.resolve_path(tc.eval_trace)) if tc.eval_trace else None
    return _trace_options(trace, start, tc.eval_max_jobs, None)
