"""Benchmark suites: pre-registered scenarios in train / validation / test splits.

A suite file (``benchmarks/default.yaml``; docs/benchmark.md is the reference) holds
``version``, ``base_config``, ``tiers`` (first-fit steady-utilisation targets), optional
``queue_tiers`` (first-fit queue-share targets: mean queue time / mean JCT) and
``arrival_jitter``, ``topologies``,
``regions`` (which split owns which jobs of which trace: ``jobs: [a, b]`` = jobs
``a .. b-1``, none = the whole file) and ``scenarios`` per split. Paths are relative to
the repo root; every scenario's window, warm-up included, lies inside one region of its
split.

The test split is recognised by path and row range, and by content
(:func:`in_test_split`: a window repeating :data:`SHINGLE` consecutive jobs of a test
region). Training and selection refuse such windows (:func:`check_not_test`);
``compare``, ``evaluate`` and ``simulate`` warn (:func:`warn_if_test`). Problems raise
:class:`~marl_sched.errors.InputError` naming the file and the dotted key."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import os
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from marl_sched.config import (
    REPO_ROOT,
    ExperimentConfig,
    check,
    check_bounds,
    check_load,
    load_config,
    parse_section,
    read_yaml,
)
from marl_sched.errors import InputError

SPLITS = ("train", "validation", "test")
DEFAULT_SUITE = REPO_ROOT / "benchmarks" / "default.yaml"

#: benchmark tracks: named config overrides every cell of the track gets.
#: ``placement``: no policy migrates; ``full``: every policy with a migration rule
#: migrates through the simulator's one mechanism, at its measured cost.
TRACKS: dict[str, tuple[str, ...]] = {
    "placement": ("simulation.migration=off",),
    "full": ("simulation.migration=on",),
}


def track_overrides(track: str | None) -> tuple[str, ...]:
    """The config overrides of ``track`` (none for ``None``: a call from before tracks);
    InputError for an unknown track."""
    if track is None:
        return ()
    if track not in TRACKS:
        raise InputError(f"--track: must be one of {', '.join(TRACKS)}, got {track!r}")
    return TRACKS[track]


@dataclass(frozen=True)
class Region:
    """Jobs ``first .. end-1`` (``end`` None = to the end) of a file, owned by a split."""

    trace: str
    split: str
    first: int = 0
    end: int | None = None

    def overlaps(self, first: int, end: int | None) -> bool:
        """Do jobs ``first .. end-1`` share a job with this region?"""
        lo = max(self.first, first)
        hi = min(math.inf if self.end is None else self.end, math.inf if end is None else end)
        return lo < hi

    def contains(self, first: int, end: int) -> bool:
        return self.first <= first and (self.end is None or end <= self.end)

    def describe(self) -> str:
        if self.first == 0 and self.end is None:
            return f"{self.trace} (whole file)"
        return f"{self.trace} jobs {self.first}..{'end' if self.end is None else self.end - 1}"


@dataclass(frozen=True)
class Scenario:
    """One pre-registered benchmark scenario: a trace window at a load on a topology."""

    name: str
    split: str
    trace: str
    start: int
    max_jobs: int
    load: float
    tier: str
    topology: str
    warmup_jobs: int = 0
    util: float | None = None
    #: first-fit's mean queue time / mean JCT at ``load`` (recorded for queue tiers)
    queue_share: float | None = None

    @property
    def first_job(self) -> int:
        """First job simulated (warm-up included)."""
        return max(0, self.start - self.warmup_jobs)

    def validate(self, where: str, key: str) -> None:
        """The checks :func:`~marl_sched.config.parse_section` runs after the types."""
        check(
            SCENARIO_NAME.fullmatch(self.name) is not None,
            where,
            f"{key}.name",
            f"{self.name!r} is not a scenario name (letters, digits, '.', '_', '-', "
            "starting with a letter or digit, at most 80: it names files under --out)",
        )
        check_load(self.load, where, f"{key}.load")
        check_bounds(
            self, dict.fromkeys(("start", "warmup_jobs"), (0, MAX_SCENARIO_JOBS)), where, key
        )
        check_bounds(self, {"max_jobs": (1, MAX_SCENARIO_JOBS)}, where, key)
        check_bounds(self, {"queue_share": (0.0, 1.0)}, where, key)


@dataclass(frozen=True)
class Suite:
    """A loaded suite file."""

    path: str
    base_config: str
    tiers: dict[str, float]
    topologies: dict[str, str]
    regions: tuple[Region, ...]
    scenarios: dict[str, tuple[Scenario, ...]]
    #: command-line ``key=value`` overrides of the base config (:meth:`with_overrides`)
    overrides: tuple[str, ...] = ()
    #: ``workload.arrival_jitter`` of every cell (the suite's ``arrival_jitter``)
    arrival_jitter: float = 0.0
    #: queue tiers: first-fit queue-share targets (``tiers``: utilisation targets)
    queue_tiers: dict[str, float] = dataclasses.field(default_factory=dict)

    def with_overrides(self, overrides: Sequence[str], track: str | None = None) -> Suite:
        """This suite with ``key=value`` overrides of its base config, applied after
        ``track``'s (:data:`TRACKS`) and checked now. Keys every scenario sets itself are
        refused."""
        overrides = (*track_overrides(track), *overrides)
        for item in overrides:
            key = item.partition("=")[0]
            section, _, name = key.partition(".")
            if section == "topology" or (section == "workload" and name in SCENARIO_KEYS):
                raise InputError(
                    f"{key}: benchmark: every scenario of {self.path} sets this key; "
                    "override another (simulation, env, workload.duration_noise_sigma, ...)"
                )
        load_config(resolve(self.base_config), overrides)  # InputError naming the key
        return dataclasses.replace(self, overrides=tuple(overrides))

    def split(self, name: str, tiers: Collection[str] | None = None) -> tuple[Scenario, ...]:
        """The scenarios of split ``name`` (``tiers``: only those of these tiers);
        InputError for an unknown split."""
        if name not in SPLITS:
            raise InputError(f"--split: must be one of {', '.join(SPLITS)}, got {name!r}")
        every = self.scenarios.get(name, ())
        return every if tiers is None else tuple(sc for sc in every if sc.tier in tiers)

    def config_for(
        self, scenario: Scenario, seed: int = 0, duration_estimate: str | None = None
    ) -> ExperimentConfig:
        """The experiment config of one cell: the base config with the scenario's
        topology and window, ``seed`` for every seeded draw, the suite's ``arrival_jitter``,
        and ``duration_estimate`` (None = the base config's)."""
        base = _load_config_cached(self.base_config, self.overrides)
        topology = _load_config_cached(self.topologies[scenario.topology]).topology
        workload = dataclasses.replace(
            base.workload,
            trace=str(resolve(scenario.trace)),
            trace_format="auto",
            start=scenario.start,
            max_jobs=scenario.max_jobs,
            warmup_jobs=scenario.warmup_jobs,
            load=scenario.load,
            seed=seed,
            duration_estimate=duration_estimate or base.workload.duration_estimate,
            arrival_jitter=self.arrival_jitter,
        )
        return dataclasses.replace(base, topology=topology, workload=workload)


#: the workload keys :meth:`Suite.config_for` sets from each scenario
SCENARIO_KEYS = (
    "trace",
    "trace_format",
    "start",
    "max_jobs",
    "warmup_jobs",
    "load",
    "seed",
    "duration_estimate",
    "arrival_jitter",
)


@functools.lru_cache(maxsize=8)
def _load_suite_cached(path: str, stamp: int | None) -> Suite:
    """:func:`load_suite` once per file version (``stamp``: its mtime): a config's
    every training and validation window is checked against the suite."""
    return load_suite(path)


@functools.cache
def _load_config_cached(path: str, overrides: tuple[str, ...] = ()) -> ExperimentConfig:
    return load_config(resolve(path), overrides)


def resolve(path: str | Path) -> Path:
    """A suite path: relative ones against the repo root."""
    p = Path(path)
    return p if p.is_absolute() else REPO_ROOT / p


def _stamp(path: str | Path) -> tuple[str, int, int] | None:
    """A file's version: (resolved path, size, mtime in ns); None when it cannot be
    stat'ed. The key under which a command reads and hashes each trace once."""
    try:
        info = os.stat(path)
        return str(Path(path).resolve()), info.st_size, info.st_mtime_ns
    except (OSError, RuntimeError):
        return None


def _digest(path: Path) -> str | None:
    """SHA-256 of a file's bytes, cached per file version; None when it is not a
    readable regular file within the trace size cap."""
    stamp = _stamp(path)
    return None if stamp is None else _digest_of(*stamp)


@functools.cache
def _digest_of(path: str, size: int, mtime_ns: int) -> str | None:
    """:func:`_digest` of one file version (``size`` and ``mtime_ns`` key the cache)."""
    from marl_sched.files import open_input

    h = hashlib.sha256()
    try:
        with open_input(path, "trace") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except (InputError, OSError):
        return None
    return h.hexdigest()


# ------------------------------------------------------------------------- loading


def _fail(where: str, key: str, problem: str) -> InputError:
    return InputError(f"{where}: {key}: {problem}")


def _mapping(value: Any, where: str, key: str) -> dict:
    if not isinstance(value, dict):
        raise _fail(where, key, f"expected a mapping, got {value!r}")
    return value


def _typed(value: Any, tp: type, where: str, key: str) -> Any:
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, tp) or isinstance(value, bool):
        raise _fail(where, key, f"expected {tp.__name__}, got {value!r}")
    return value


def _region(item: Any, where: str, key: str) -> Region:
    item = _mapping(item, where, key)
    unknown = set(item) - {"trace", "jobs", "split"}
    if unknown:
        raise _fail(where, f"{key}.{sorted(unknown)[0]}", "unknown key (known: jobs, split, trace)")
    trace = _typed(item.get("trace"), str, where, f"{key}.trace")
    split = item.get("split")
    if split not in SPLITS:
        raise _fail(where, f"{key}.split", f"must be one of {', '.join(SPLITS)}, got {split!r}")
    jobs = item.get("jobs")
    if jobs is None:
        return Region(trace, split)
    ok = isinstance(jobs, list) and len(jobs) == 2 and isinstance(jobs[0], int)
    ok = ok and (jobs[1] is None or (isinstance(jobs[1], int) and jobs[1] > jobs[0] >= 0))
    if not ok:
        raise _fail(
            where, f"{key}.jobs", f"expected [first, end] with 0 <= first < end, got {jobs!r}"
        )
    return Region(trace, split, jobs[0], jobs[1])


def _scenario(item: Any, split: str, where: str, key: str) -> Scenario:
    return parse_section(Scenario, item, where, key, given={"split": split})


#: a scenario name: it becomes part of a file name under ``--out/cells``, so no
#: separator, no leading dot, no ``..``, and short enough for a 255-byte file name
#: the largest job index or count a scenario may name
MAX_SCENARIO_JOBS = 10**9
SCENARIO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")


def load_suite(path: str | Path = DEFAULT_SUITE) -> Suite:
    """Load and check a suite file (see the module docstring)."""
    where = str(path)
    data = _mapping(read_yaml(resolve(path), where, "suite"), where, "suite")  # no duplicate keys
    known = {
        "version", "base_config", "tiers", "queue_tiers", "topologies", "regions", "scenarios",
        "arrival_jitter",
    }  # fmt: skip
    for key in data:
        if key not in known:
            raise _fail(where, key, f"unknown key (known: {', '.join(sorted(known))})")
    if data.get("version") != 1:
        raise _fail(where, "version", f"must be 1, got {data.get('version')!r}")
    base = _typed(data.get("base_config"), str, where, "base_config")
    jitter = _typed(data.get("arrival_jitter", 0.0), float, where, "arrival_jitter")
    if not 0 <= jitter < 1:
        raise _fail(where, "arrival_jitter", f"must be in [0, 1), got {jitter}")
    tiers = {
        str(k): _typed(v, float, where, f"tiers.{k}")
        for k, v in _mapping(data.get("tiers"), where, "tiers").items()
    }
    queue_tiers = {
        str(k): _typed(v, float, where, f"queue_tiers.{k}")
        for k, v in _mapping(data.get("queue_tiers", {}), where, "queue_tiers").items()
    }
    for k, v in queue_tiers.items():
        if k in tiers:
            raise _fail(where, f"queue_tiers.{k}", "already a tier of tiers (name it once)")
        if not 0 < v < 1:
            raise _fail(where, f"queue_tiers.{k}", f"must be in (0, 1), got {v}")
    topologies = {
        str(k): _typed(v, str, where, f"topologies.{k}")
        for k, v in _mapping(data.get("topologies"), where, "topologies").items()
    }
    for key, file in [
        ("base_config", base),
        *((f"topologies.{k}", v) for k, v in topologies.items()),
    ]:
        if not resolve(file).is_file():
            raise _fail(where, key, f"no such config file: {file}")
    raw_regions = data.get("regions")
    if not isinstance(raw_regions, list) or not raw_regions:
        raise _fail(where, "regions", "expected a non-empty list")
    regions = tuple(_region(r, where, f"regions[{i}]") for i, r in enumerate(raw_regions))
    raw = _mapping(data.get("scenarios"), where, "scenarios")
    scenarios: dict[str, tuple[Scenario, ...]] = {}
    names: set[str] = set()
    for split, items in raw.items():
        if split not in SPLITS:
            raise _fail(where, f"scenarios.{split}", f"unknown split (known: {', '.join(SPLITS)})")
        if not isinstance(items, list):
            raise _fail(where, f"scenarios.{split}", "expected a list")
        parsed = []
        for i, item in enumerate(items):
            key = f"scenarios.{split}[{i}]"
            sc = _scenario(item, split, where, key)
            if sc.name in names:
                raise _fail(where, f"{key}.name", f"duplicate scenario name {sc.name!r}")
            names.add(sc.name)
            if sc.tier not in tiers and sc.tier not in queue_tiers:
                known_tiers = ", ".join([*tiers, *queue_tiers])
                problem = f"unknown tier {sc.tier!r} (known: {known_tiers})"
                raise _fail(where, f"{key}.tier", problem)
            if sc.topology not in topologies:
                raise _fail(
                    where,
                    f"{key}.topology",
                    f"unknown topology {sc.topology!r} (known: {', '.join(topologies)})",
                )
            home = [
                r
                for r in regions
                if r.trace == sc.trace and r.contains(sc.first_job, sc.start + sc.max_jobs)
            ]
            if not home or home[0].split != split:
                found = f"{home[0].split} region {home[0].describe()}" if home else "no region"
                jobs = f"{sc.first_job}..{sc.start + sc.max_jobs - 1}"
                problem = f"window of {sc.trace} jobs {jobs} lies in {found}, not in {split}"
                raise _fail(where, key, problem)
            parsed.append(sc)
        scenarios[split] = tuple(parsed)
    return Suite(where, base, tiers, topologies, regions, scenarios, arrival_jitter=jitter,
                 queue_tiers=queue_tiers)  # fmt: skip


# ------------------------------------------------------------------------- refusal


def _suite(suite: Suite | str | Path) -> Suite:
    if isinstance(suite, Suite):
        return suite
    path = resolve(suite)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = None  # load_suite names the problem
    return _load_suite_cached(str(suite), stamp)


def _regions_of(trace: str | Path, suite: Suite | str | Path) -> list[Region]:
    """The suite's regions of ``trace``'s file, matched by content (a renamed copy
    too); none when the suite does not name the file."""
    suite = _suite(suite)
    digest = _digest(resolve(trace))
    if digest is None:
        return []
    return [r for r in suite.regions if _digest(resolve(r.trace)) == digest]


def _window_rows(start: int, max_jobs: int | None, warmup_jobs: int) -> tuple[int, int | None]:
    """The rows ``[first, end)`` a window reads, its warm-up included (``end`` None: to
    the end of the file)."""
    return max(0, start - warmup_jobs), None if max_jobs is None else start + max_jobs


def split_of(
    trace: str | Path,
    start: int = 0,
    max_jobs: int | None = None,
    *,
    warmup_jobs: int = 0,
    suite: Suite | str | Path = DEFAULT_SUITE,
) -> str | None:
    """The split of the suite region holding the whole window, or None (not named,
    or spanning splits)."""
    first, end = _window_rows(start, max_jobs, warmup_jobs)
    splits = {r.split for r in _regions_of(trace, suite) if r.overlaps(first, end)}
    return splits.pop() if len(splits) == 1 else None


#: consecutive rows that make one fingerprint of a trace's content (:func:`copied_test_rows`)
SHINGLE = 6


def _row_keys(jobs) -> np.ndarray:
    """One 64-bit key per job, from what a copy of the row keeps: the gap since the
    previous job's submission, duration, GPUs, model, iterations (ms precision)."""
    keys = np.empty(len(jobs), dtype=np.uint64)
    prev = jobs[0].submit_time if jobs else 0.0
    for i, j in enumerate(jobs):
        text = (
            f"{round(j.submit_time - prev, 3)}|{round(j.duration, 3)}|{j.num_gpus}|"
            f"{j.model or ''}|{'' if j.iterations is None else round(j.iterations, 3)}"
        )
        prev = j.submit_time
        keys[i] = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    return keys


def _shingles(jobs) -> set[int]:
    """Fingerprints of every run of :data:`SHINGLE` consecutive jobs (runs of one
    repeated row skipped: identical job bursts recur in any long trace)."""
    keys = _row_keys(jobs)
    out = set()
    for i in range(len(keys) - SHINGLE + 1):
        run = keys[i : i + SHINGLE]
        if np.all(run == run[0]):
            continue
        out.add(int.from_bytes(hashlib.blake2b(run.tobytes(), digest_size=8).digest(), "little"))
    return out


def _load_rows(trace: str | Path, first: int, end: int | None):
    """Jobs ``first .. end-1`` of ``trace``, its rows read once per file version."""
    from marl_sched.traces import load_trace, window_of

    n = None if end is None else end - first
    stamp = _stamp(trace)
    if stamp is None:  # load_trace names the problem
        return load_trace(trace, start=first, max_jobs=n).jobs
    rows = dataclasses.replace(_trace_rows(trace, stamp), path=os.fspath(trace))
    return window_of(rows, start=first, max_jobs=n).jobs


_ROWS_CACHE: dict[tuple[str, int, int], Any] = {}
#: file versions whose rows :func:`_trace_rows` keeps (each holds the whole file's jobs)
ROWS_CACHE_FILES = 2


def _trace_rows(trace: str | Path, stamp: tuple[str, int, int]):
    """``marl_sched.traces.read_rows(trace)``, kept for the :data:`ROWS_CACHE_FILES`
    file versions (``stamp``) read last; errors are not kept."""
    from marl_sched.traces import read_rows

    rows = _ROWS_CACHE.pop(stamp, None)
    if rows is None:
        rows = read_rows(trace)
    _ROWS_CACHE[stamp] = rows  # most recent last
    while len(_ROWS_CACHE) > ROWS_CACHE_FILES:
        del _ROWS_CACHE[next(iter(_ROWS_CACHE))]
    return rows


def _cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "marl_sched" / "test_rows"


def _cache_check(digest: str, first: int, end: int | None, values: np.ndarray) -> np.uint64:
    """The check word a cached fingerprint set is stored with (SHA-256 of the file's
    digest, the region and the values): a cache file not matching it is recomputed."""
    h = hashlib.sha256(f"{digest}:{first}:{end}:{SHINGLE}:".encode())
    h.update(np.ascontiguousarray(values, dtype=np.uint64).tobytes())
    return np.uint64(int.from_bytes(h.digest()[:8], "little"))


@functools.cache
def _region_shingles(trace: str, first: int, end: int | None, digest: str) -> frozenset:
    """The fingerprints of one region, cached per file content in memory and on disk
    (``$XDG_CACHE_HOME/marl_sched/test_rows``, ``.npy``, ``allow_pickle=False``; checked by
    :func:`_cache_check`); an empty region is never cached."""
    path = _cache_dir() / f"{digest[:32]}_{first}_{end}_k{SHINGLE}.npy"
    try:
        stored = np.load(path, allow_pickle=False)
        if (
            stored.dtype == np.uint64 and stored.ndim == 1 and len(stored) > 1
            and stored[0] == _cache_check(digest, first, end, stored[1:])
        ):  # fmt: skip
            return frozenset(int(x) for x in stored[1:])
    except (OSError, ValueError):
        pass
    out = frozenset(_shingles(_load_rows(trace, first, end)))
    if not out:
        return out
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
        values = np.array(sorted(out), dtype=np.uint64)
        stored = np.concatenate([[_cache_check(digest, first, end, values)], values])
        np.save(tmp, stored.astype(np.uint64), allow_pickle=False)
        os.replace(tmp, path)
    except OSError:  # a read-only home: compute again next time
        pass
    return out


def copied_test_rows(
    trace: str | Path,
    first: int = 0,
    end: int | None = None,
    *,
    suite: Suite | str | Path = DEFAULT_SUITE,
) -> tuple[Region, int] | None:
    """(the test region, how many runs match) when jobs ``first .. end-1`` (None = to
    the end) of ``trace`` repeat runs of :data:`SHINGLE` consecutive jobs (gap, duration,
    GPUs, model, iterations) of a test region; else None."""
    suite = _suite(suite)
    rows = _shingles(_load_rows(trace, first, end))
    if not rows:
        return None
    for region in suite.regions:
        if region.split != "test":
            continue
        path = resolve(region.trace)
        digest = _digest(path)
        if digest is None:  # the test file is not on this machine: nothing to compare
            continue
        test = _region_shingles(str(path), region.first, region.end, digest)
        hits = len(rows & test)
        if hits:
            return region, hits
    return None


def in_test_split(
    trace: str | Path,
    start: int = 0,
    max_jobs: int | None = None,
    *,
    warmup_jobs: int = 0,
    suite: Suite | str | Path = DEFAULT_SUITE,
) -> str | None:
    """Why the window of ``trace`` belongs to the suite's test split (overlapping
    rows of a file the suite names, or repeated rows of any other), or None."""
    suite = _suite(suite)
    first, end = _window_rows(start, max_jobs, warmup_jobs)
    shown = "end" if end is None else end - 1
    regions = _regions_of(trace, suite)
    for region in regions:
        if region.split == "test" and region.overlaps(first, end):
            return (
                f"jobs {first}..{shown} overlap the test split of {suite.path} "
                f"({region.describe()})"
            )
    if regions:
        return None
    copied = copied_test_rows(trace, first, end, suite=suite)
    if copied is None:
        return None
    region, hits = copied
    return (
        f"jobs {first}..{shown} repeat rows of the test split of {suite.path} "
        f"({region.describe()}; {hits} runs of {SHINGLE} consecutive jobs match)"
    )


def check_not_test(
    trace: str | Path,
    start: int = 0,
    max_jobs: int | None = None,
    *,
    warmup_jobs: int = 0,
    suite: Suite | str | Path = DEFAULT_SUITE,
    where: str | None = None,
) -> None:
    """Refuse a window (jobs ``start - warmup_jobs`` .. ``start + max_jobs - 1``) that
    touches the suite's test split (training, selection).

    Raises:
        InputError: ``<where or trace>: jobs a..b overlap (or repeat rows of) the test
            split of <suite> (<region>); ...``.
    """
    problem = in_test_split(trace, start, max_jobs, warmup_jobs=warmup_jobs, suite=suite)
    if problem:
        raise InputError(
            f"{where or trace}: {problem}; training and checkpoint selection may not use it"
        )


def warn_if_test_workload(workload, command: str) -> str | None:
    """:func:`warn_if_test` for a loaded ``marl_sched.runner.Workload``."""
    wl = workload.config
    return warn_if_test(
        workload.trace_path, wl.start, wl.max_jobs, warmup_jobs=wl.warmup_jobs, command=command
    )


def warn_if_test(
    trace: str | Path,
    start: int = 0,
    max_jobs: int | None = None,
    *,
    warmup_jobs: int = 0,
    suite: Suite | str | Path = DEFAULT_SUITE,
    command: str = "",
) -> str | None:
    """One warning line on stderr (and returned) when the window is or copies test
    rows; None otherwise (``compare``, ``evaluate``, ``simulate``)."""
    import sys

    problem = in_test_split(trace, start, max_jobs, warmup_jobs=warmup_jobs, suite=suite)
    if not problem:
        return None
    line = (
        f"warning: {command + ': ' if command else ''}{trace}: {problem}; a test-split "
        "figure is reported once, via benchmark --split test and benchmarks/ledger.jsonl"
    )
    print(line, file=sys.stderr)
    return line
