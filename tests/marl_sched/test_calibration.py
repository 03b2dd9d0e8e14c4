"""Calibration points: the shipped performance model against the measured data.

Every test builds a :class:`~marl_sched.topology.Topology`, runs the real
:class:`~marl_sched.perf.PerformanceModel` with the shipped ``calibration.json`` and
compares it with one measured figure from ``../shared/data/profiles``; the tolerance
is in each assert message and justified in the comment above it. The table of
calibration points, tolerances and measured errors is in ``docs/performance-model.md``.

Tests that need the measured data take the ``shared_data`` fixture (skipped when
``../shared/data`` is absent); the others check the shipped file alone.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from marl_sched import calibration as cal
from marl_sched.calibration import report
from marl_sched.catalogue import (
    CALIBRATION,
    CALIBRATION_FILE,
    CATALOGUE,
    N_RESOURCES,
    RESOURCES,
)
from marl_sched.config import TopologyConfig
from marl_sched.perf import PerformanceModel
from marl_sched.topology import GBPS, Topology

_CACHE: dict[tuple[str, str], Any] = {}


def _cached(kind: str, shared: Path, make):
    key = (kind, str(shared))
    if key not in _CACHE:
        _CACHE[key] = make()
    return _CACHE[key]


def _pollux(shared: Path) -> dict[str, cal.PolluxProfile]:
    return _cached("pollux", shared, lambda: cal.load_pollux(shared))


def _dl2(shared: Path) -> list[cal.DL2Row]:
    return _cached("dl2", shared, lambda: cal.load_dl2(shared)[0])


def _gavel(shared: Path):
    return _cached("gavel", shared, lambda: cal.load_gavel(shared))


_comm_plus_overhead = report.alone_comm_and_overhead


def _pollux_model_vs_measured(shared: Path) -> list[tuple[str, str, float, float]]:
    """(model, placement, model exposed sync, measured sync): the report's
    ``pollux_sync`` points (see :mod:`marl_sched.calibration.report`)."""

    def make():
        return [
            (*label.split(), pred, meas) for _, label, pred, meas in report.pollux_sync_rows(shared)
        ]

    return _cached("pollux_pred", shared, make)


# --------------------------------------------------------------------------- (a) Pollux


# Multi-node, pooled over models: tolerance 0.25 (the calibration target; measured 0.174,
# 0.234 before the ring and the overlap). Per model: tolerance 0.5 (measured
# 0.06-0.45, imagenet worst: its 4-GPU-per-node placements sync faster than the ring
# over one NIC edge per node predicts). The floor of any model that, like perf.py,
# sees only the GPUs-per-node multiset is 0.04 (1122 vs 1212 agree within 4 %).
# A factor-2 slip in bytes or bandwidth pushes the pooled error past 0.5.
TOL_POLLUX_MULTI = 0.25
TOL_POLLUX_MULTI_PER_MODEL = 0.5
# Single-node (2/3/4 GPUs on one host), pooled over models: tolerance 0.5 (measured
# 0.40; 0.62 before). The exposed in-host sync is a few ms, mostly hidden behind the
# backward pass; the PCIe efficiency is a compromise with Gavel's V100 servers, where
# consolidated jobs pay much more for in-server communication (calibration notes).
TOL_POLLUX_SINGLE = 0.5


@pytest.mark.shared_data
def test_pollux_multi_node_sync_time_pooled(shared_data: Path) -> None:
    rows = _pollux_model_vs_measured(shared_data)
    errs = [abs(p - m) / m for _, pl, p, m in rows if len(pl) > 1]
    err = statistics.median(errs)
    assert err < TOL_POLLUX_MULTI, (
        f"multi-node sync median relative error {err:.3f} over {len(errs)} placements "
        f">= tolerance {TOL_POLLUX_MULTI}"
    )


@pytest.mark.shared_data
def test_pollux_multi_node_sync_time_per_model(shared_data: Path) -> None:
    rows = _pollux_model_vs_measured(shared_data)
    for model in cal.POLLUX_MODELS:
        errs = [abs(p - m) / m for mdl, pl, p, m in rows if mdl == model and len(pl) > 1]
        err = statistics.median(errs)
        assert err < TOL_POLLUX_MULTI_PER_MODEL, (
            f"{model}: median relative error of multi-node sync {err:.3f} "
            f"over {len(errs)} placements >= tolerance {TOL_POLLUX_MULTI_PER_MODEL}"
        )


@pytest.mark.shared_data
def test_pollux_single_node_sync_time(shared_data: Path) -> None:
    rows = _pollux_model_vs_measured(shared_data)
    errs = [abs(p - m) / m for _, pl, p, m in rows if len(pl) == 1]
    err = statistics.median(errs)
    assert len(errs) == 18
    assert err < TOL_POLLUX_SINGLE, (
        f"single-node sync median relative error {err:.3f} >= tolerance {TOL_POLLUX_SINGLE}"
    )


@pytest.mark.shared_data
def test_pollux_spreading_over_nodes_is_slower(shared_data: Path) -> None:
    # Ordering (exact, no tolerance): for every model and n = 2, 3, 4 GPUs, the
    # single-node placement syncs faster than every placement spreading the n GPUs
    # over several nodes, in the data and in the model.
    rows = _pollux_model_vs_measured(shared_data)
    for model in cal.POLLUX_MODELS:
        mine = [(pl, p, m) for mdl, pl, p, m in rows if mdl == model]
        for n in (2, 3, 4):
            single = [(p, m) for pl, p, m in mine if pl == str(n)]
            spread = [(pl, p, m) for pl, p, m in mine if len(pl) > 1 and sum(map(int, pl)) == n]
            assert single and spread
            (p1, m1) = single[0]
            for pl, p, m in spread:
                assert m > m1, f"{model}: measured {pl} ({m:.4f}) not slower than {n} ({m1:.4f})"
                assert p > p1, f"{model}: model {pl} ({p:.4f}) not slower than {n} ({p1:.4f})"


# Gavel's V100 consolidated/unconsolidated throughput ratio of ResNet-18/50 at 2, 4, 8
# GPUs (27 pairs), against perf.py's alone iteration times of an all-reduce job
# packed on one default server vs one GPU per server. Measured median 1.38; model
# 2.29 (2.16 before the ring and the overlap). Tolerance: model median within
# [1.0, 1.75] x measured. The calibration target (within 20 %) is not reached: the links
# are fitted to Pollux and Gavel together with equal weight, and Pollux alone asks
# for a ratio of ~2.8 (calibration notes, docs/performance-model.md).
TOL_GAVEL_SPREAD = (1.0, 1.75)


@pytest.mark.shared_data
def test_gavel_spread_over_packed_ratio(shared_data: Path) -> None:
    rows = report.gavel_spread_rows(shared_data)
    model = statistics.median(m for _, _, m, _ in rows)
    measured = statistics.median(y for _, _, _, y in rows)
    assert len(rows) == 27
    assert TOL_GAVEL_SPREAD[0] <= model / measured <= TOL_GAVEL_SPREAD[1], (
        f"model median spread/packed {model:.2f} vs measured {measured:.2f}: ratio "
        f"{model / measured:.2f} outside {TOL_GAVEL_SPREAD}"
    )


# --------------------------------------------------------------------------- (b) DL2


# Tolerance 0.45 on the median relative error of the per-worker speed at w workers
# relative to w = 1 (same PS count), pooled over 676 (model, PS, workers) points
# (measured: 0.37). DL2's testbed placement and NIC are unrecorded, so one effective
# bandwidth is fitted (≈ 92 MB/s, the median of DL2's own per-model inter_bws) and
# the published model sizes are used; DL2's own simulator needs per-model bandwidths
# spanning 22× (10-233 MB/s) to explain the same data, i.e. its PS bottleneck is not
# proportional to bytes (resnext-110, 6.9 MB, is as PS-bound as resnet-50, 102 MB).
# The data's own jitter is small (1-worker speeds vary 5 % across PS counts).
TOL_DL2 = 0.45


def _dl2_model_relative_speeds(shared: Path) -> tuple[np.ndarray, np.ndarray, list]:
    def make():
        rows = _dl2(shared)
        bw, _, points = cal.fit_dl2_bandwidth(
            rows,
            {m: CATALOGUE[m].model_mb for m in cal.DL2_MODELS},
            {m: CATALOGUE[m].compute_s for m in cal.DL2_MODELS},
            CALIBRATION.sync_overhead_s,
        )
        nodes = max(p.num_workers + p.num_ps for p in points)
        # nominal NIC such that nominal × shipped efficiency = the fitted bandwidth
        topo = cal.dl2_topology(nodes, bw / (GBPS * CALIBRATION.link_efficiency["nic"]))
        perf = PerformanceModel(topo)
        cache: dict[tuple[str, int, int], float] = {}

        def t(model: str, w: int, p: int) -> float:
            if (model, w, p) not in cache:
                # DL2 splits a fixed global batch over w workers: local compute / w
                spec = dataclasses.replace(
                    CATALOGUE[model], compute_s=CATALOGUE[model].compute_s / w
                )
                # workers on servers 0..w-1, PS shards on the next p servers
                workers, shards = list(range(w)), list(range(w, w + p))
                cache[(model, w, p)] = spec.compute_s + _comm_plus_overhead(
                    perf, spec, workers, shards
                )
            return cache[(model, w, p)]

        pred = np.array(
            [
                t(pt.model, 1, pt.num_ps)
                / (pt.num_workers * t(pt.model, pt.num_workers, pt.num_ps))
                for pt in points
            ]
        )
        meas = np.array([pt.measured for pt in points])
        return pred, meas, points

    return _cached("dl2_pred", shared, make)


@pytest.mark.shared_data
def test_dl2_per_worker_speed_scaling(shared_data: Path) -> None:
    pred, meas, points = _dl2_model_relative_speeds(shared_data)
    err = float(np.median(np.abs(pred - meas) / meas))
    assert len(points) == 676
    assert err < TOL_DL2, (
        f"DL2 relative per-worker speed: median relative error {err:.3f} over "
        f"{len(points)} points >= tolerance {TOL_DL2}"
    )


@pytest.mark.shared_data
def test_dl2_one_ps_speed_falls_with_workers(shared_data: Path) -> None:
    # Ordering (exact): with one PS, per-worker speed falls as workers are added, in
    # the data and in the model, for every model.
    pred, meas, points = _dl2_model_relative_speeds(shared_data)
    for model in cal.DL2_MODELS:
        idx = sorted(
            (p.num_workers, k) for k, p in enumerate(points) if p.model == model and p.num_ps == 1
        )
        ks = [k for _, k in idx]
        assert all(np.diff(pred[ks]) < 0), f"{model}: model speed does not fall with workers"
        assert all(np.diff(meas[ks]) < 0), f"{model}: measured speed does not fall with workers"


@pytest.mark.shared_data
def test_dl2_loader_skips_failed_runs(shared_data: Path) -> None:
    rows, skipped = cal.load_dl2(shared_data)
    assert len(rows) + skipped == 804  # the last line, without a newline, is read too
    assert skipped == 10
    assert rows[-1].model == "wlm" and rows[-1].num_ps == 23 and rows[-1].num_workers == 1


# --------------------------------------------------------------------------- (c) Gavel


# Tolerance 0.20 on the mean relative error of the rank-5 fit of Gavel's 636 same-GPU
# slowdowns (measured: 0.156). The family priors alone give 0.29; an unregularised fit
# reaches 0.07 but loses the resource meaning of the columns (see calibration/constants.py,
# ANLS_RIDGE), so 0.20 requires the fit to beat its priors clearly.
TOL_GAVEL_MRE = 0.20


@pytest.mark.shared_data
def test_gavel_colocation_fit_mre(shared_data: Path) -> None:
    types, s_mat, p_mat, info = _cached(
        "gavel_fit", shared_data, lambda: cal.fit_gavel_interference(_gavel(shared_data))
    )
    pred, meas = cal.gavel_prediction(types, s_mat, p_mat, _gavel(shared_data))
    mre = float(np.mean(np.abs(pred - meas) / meas))
    assert info["n_pairs"] == len(meas) == 636
    assert mre == pytest.approx(info["mre"])
    assert mre < TOL_GAVEL_MRE, f"Gavel co-location MRE {mre:.3f} >= tolerance {TOL_GAVEL_MRE}"
    # the shipped vectors are the fitted rows of each model's Gavel type (net aside)
    keep = [k for k, r in enumerate(RESOURCES) if r != "net"]
    for model, job in cal.GAVEL_MAP.items():
        k = types.index(job)
        spec = CATALOGUE[model]
        np.testing.assert_allclose(spec.pressure[keep], p_mat[k, keep], rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(spec.sensitivity[keep], s_mat[k, keep], rtol=1e-5, atol=1e-9)


def _packed_slowdowns(victim: str, aggressor: str, neighbours: int) -> float:
    """Interference factor of ``victim``'s worker on GPU 0 of a default 8-GPU server
    with ``neighbours`` single-worker jobs of ``aggressor`` on GPUs 1.. (no PS)."""
    topo = Topology.from_config(TopologyConfig())
    perf = PerformanceModel(topo)
    gp = np.zeros((topo.n_groups, N_RESOURCES))
    sp = np.zeros((topo.n_sockets, N_RESOURCES))
    vp = np.zeros((topo.n_servers, N_RESOURCES))
    layouts = []
    for gpu in range(neighbours + 1):
        spec = CATALOGUE[victim if gpu == 0 else aggressor]
        layout = perf.layout(spec, [int(topo.gpu_group[gpu])], [])
        gp[layout.groups] += layout.group_press
        sp[layout.sockets] += layout.socket_press
        vp[layout.servers] += layout.server_press
        layouts.append((spec, layout))
    spec, layout = layouts[0]
    return perf.interference(spec, layout, gp, sp, vp)


def test_interference_levels_of_shipped_coupling() -> None:
    # Calibration targets of the level couplings (shipped file alone): the median
    # one-neighbour slowdown over all ordered catalogue pairs sits in [1.03, 1.30]
    # (Harmony: tens of percent; 1.04 shipped — the packed-server ceiling binds), and
    # a default 8-GPU server packed with 7 workers of the heaviest model slows the
    # median victim by at most 2.0x (+1e-6).
    names = sorted(CATALOGUE)
    # GPU 1 is in the same PCIe group as GPU 0; GPU 4 is on the other socket
    topo = Topology.from_config(TopologyConfig())
    assert topo.gpu_group[1] == topo.gpu_group[0]
    assert topo.group_socket[topo.gpu_group[4]] != topo.group_socket[topo.gpu_group[0]]
    one = statistics.median(_packed_slowdowns(a, b, 1) for a in names for b in names if a != b)
    assert one > 1.0
    coupling = np.array([CALIBRATION.level_coupling[k] for k in ("group", "socket", "server")])
    vectors = {m: (CATALOGUE[m].pressure, CATALOGUE[m].sensitivity) for m in names}
    stats = cal.coupling_stats(coupling, vectors)
    assert 1.03 <= stats["median_server_neighbour"] <= 1.30, (
        f"median one-neighbour server-level slowdown {stats['median_server_neighbour']:.3f} "
        "outside [1.03, 1.30]"
    )
    heavy = stats["heaviest"]
    packed = statistics.median(_packed_slowdowns(a, heavy, 7) for a in names)
    assert packed == pytest.approx(stats["heaviest_packed_server"], rel=1e-9)
    assert packed <= cal.PACKED_CEILING + 1e-6, (
        f"8-GPU server packed with {heavy}: median victim slowdown {packed:.3f} > "
        f"{cal.PACKED_CEILING}"
    )


# --------------------------------------------------------------------------- (d) GPU speed


def test_gpu_speed_ordering() -> None:
    # Ordering (exact): V100 is the reference, then P100, T4, K80.
    s = CALIBRATION.gpu_speed
    assert s["v100"] == 1.0
    assert 1.0 > s["p100"] > s["t4"] > s["k80"] > 0.0, f"GPU speeds out of order: {s}"


@pytest.mark.shared_data
def test_gpu_speed_equals_refit(shared_data: Path) -> None:
    # Tolerance 1e-5 relative: the file keeps 6 significant digits.
    speeds, info = cal.fit_gpu_speed(_gavel(shared_data), _pollux(shared_data))
    for gpu, value in speeds.items():
        assert CALIBRATION.gpu_speed[gpu] == pytest.approx(value, rel=1e-5), (
            f"{gpu}: shipped {CALIBRATION.gpu_speed[gpu]} != refit {value} (rel 1e-5)"
        )
    assert len(info["t4"]) == 7  # 3 ResNet-50 + 4 ResNet-18 comparable batch sizes


@pytest.mark.shared_data
def test_per_model_gpu_speed_is_gavels_ratio(shared_data: Path) -> None:
    # Exact (rel 1e-5, 6 shipped digits): a model mapped to a Gavel job type runs on
    # a P100 / K80 at that type's measured isolated-throughput ratio to the V100.
    gavel = _gavel(shared_data)
    for model, (kind, job) in cal.GAVEL_SPEED_MAP.items():
        if kind != "type":
            continue
        for gpu in ("p100", "k80"):
            want = gavel[gpu][(job, 1)][None] / gavel["v100"][(job, 1)][None]
            got = CATALOGUE[model].speed_on(gpu)
            assert got == pytest.approx(want, rel=1e-5), f"{model} on {gpu}: {got} != {want}"
    # the spread the per-type figure flattens: ResNet-50 on a K80 is ~0.16 of a V100,
    # the recommendation model ~1.4 (K80 faster than V100 in Gavel's measurement)
    assert CATALOGUE["resnet-50"].speed_on("k80") < 0.2 < 1.3 < CATALOGUE["ncf"].speed_on("k80")
    # no Gavel type for a text CNN: the per-type figure
    assert CATALOGUE["cnn-text-classification"].speed_on("k80") == CALIBRATION.gpu_speed["k80"]


# --------------------------------------------------------------------------- (e) refit


def _assert_close(a: Any, b: Any, path: str = "") -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), f"{path}: keys differ"
        for k in a:
            _assert_close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{path}: lengths differ"
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_close(x, y, f"{path}[{k}]")
    elif isinstance(a, float | int) and not isinstance(a, bool):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), f"{path}: {a} != {b}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


@pytest.mark.shared_data
def test_shipped_calibration_equals_refit(shared_data: Path) -> None:
    # Tolerance 1e-9: nobody hand-edits calibration.json; regenerate it with
    # python -m marl_sched.calibration --shared ../shared/data --out <file>.
    shipped = json.loads(CALIBRATION_FILE.read_text(encoding="utf-8"))
    _assert_close(cal.fit_all(shared_data), shipped, "calibration")


# --------------------------------------------------------------------------- shipped file


def test_shipped_calibration_is_complete() -> None:
    data = json.loads(CALIBRATION_FILE.read_text(encoding="utf-8"))
    assert set(data["models"]) == set(cal.DL2_MODELS) | set(cal.POLLUX_MODELS)
    assert set(data["link_efficiency"]) == {"pcie", "qpi", "nic"}
    assert set(data["level_coupling"]) == {"group", "socket", "server"}
    for key in ("gpu_speed", "link_efficiency", "sync_overhead_s", "level_coupling"):
        assert key in data and key in data["notes"], f"{key}: value or derivation missing"
    assert "fit_errors" in data["notes"] and "interference" in data["notes"]
    for name, m in data["models"].items():
        assert m["compute_s"] > 0 and m["model_mb"] > 0 and m["mem_gb"] > 0, name
        assert m["cpu_worker"] > 0 and m["cpu_ps"] > 0, name
        assert len(m["pressure"]) == len(m["sensitivity"]) == N_RESOURCES, name
        assert min(m["pressure"]) >= 0 and min(m["sensitivity"]) >= 0, name
        assert "Gavel" in m["source"] and "mem_gb" in m["source"], name


def test_calibration_byte_accounting_matches_perf() -> None:
    # The fits price links with calibration.comm_time_at(kind_seconds(layout)); it
    # must equal PerformanceModel.comm_time (one job on its links) exactly.
    topo = cal.pollux_topology(4)
    perf = PerformanceModel(topo)
    eff = CALIBRATION.link_efficiency
    for placement in ("2", "4", "11", "13", "22", "1234", "4444"):
        groups = cal.pollux_groups(topo, placement)
        layout = perf.layout(CATALOGUE["bert"], groups, groups)
        expected = perf.comm_time(layout, np.zeros(topo.n_links, dtype=np.int64))
        got = cal.comm_time_at(cal.kind_seconds(topo, layout), eff)
        assert got == pytest.approx(expected, rel=1e-12), placement


# --------------------------------------------------------------------------- (f) report


# The simulator's slowdown of two single-worker jobs sharing one GPU (gpu_sharing 2,
# the GPU level of perf.py) against Gavel's same-GPU pairs (physical cluster, 1,597
# pairs): measured MRE 0.340 (K80 0.221, P100 0.352, V100 0.437; before GPU sharing
# 0.456), tolerance 0.36 (a regression guard 0.02 above it). Not the 0.20 target: the
# GPU level reproduces the fitted vectors exactly (1 + s_i . p_j), which are fitted on
# Gavel's *simulation* file (V100 MRE 0.156), while the same V100 pairs differ between
# Gavel's simulation and physical files by MRE 0.22, and the loader maps 25 job types
# (5 families x batch sizes) onto 5 catalogue models (docs/performance-model.md §6.5).
TOL_GAVEL_COLOCATION_SIM = 0.36


@pytest.mark.shared_data
def test_calibration_report_last_line_is_the_summary(shared_data: Path, capsys) -> None:
    assert cal.main(["report", "--shared", str(shared_data)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    got = json.loads(lines[-1])
    for key in (
        "gavel_colocation_mre",
        "pollux_sync_median_rel_err",
        "gavel_spread_ratio_median_model",
        "gavel_spread_ratio_median_measured",
        "dl2_speed_median_rel_err",
    ):
        assert isinstance(got[key], float), key
        if key != "gavel_colocation_mre":  # the simulator's check: nothing is fitted to it
            assert isinstance(got[f"{key}_fit"], float), key
            assert isinstance(got[f"{key}_heldout"], float), key
    assert got["gavel_colocation_mre"] < TOL_GAVEL_COLOCATION_SIM, got
    # per GPU type (measured K80 0.221, P100 0.352, V100 0.437): each within 0.02
    for gpu, measured in (("k80", 0.221), ("p100", 0.352), ("v100", 0.437)):
        assert got[f"gavel_colocation_mre_{gpu}"] < measured + 0.02, (gpu, got)
    assert got["pollux_sync_median_rel_err"] < TOL_POLLUX_MULTI, got
    assert got["dl2_speed_median_rel_err"] < TOL_DL2, got
    assert got["gavel_spread_ratio_median_measured"] == pytest.approx(1.38, abs=0.005)
    # per-model GPU speeds follow Gavel's per-job-type ratios far more closely than the
    # per-type figure: tolerance 0.15 (measured 0.064; per-type 0.458)
    assert (
        got["gpu_speed_per_model_median_rel_err"] < 0.15 < got["gpu_speed_per_type_median_rel_err"]
    )
    # every source has its table rows
    sources = {line.split()[0] for line in lines[1:-1] if line.strip()}
    assert {"pollux_sync", "gavel_spread", "dl2_speed", "gavel_colocation", "gpu_speed"} <= sources
    assert got["gavel_colocation_vector_mre"] < 0.20, got  # in-sample vector fit: 0.156


# --------------------------------------------------------------------------- (g) held out


def _holdout(shared: Path):
    from marl_sched.calibration.holdout import holdout_errors

    return _cached("holdout", shared, lambda: holdout_errors(shared))


# Refitted on the FIT three quarters of each source, measured on the held-out quarter
# no constant saw. Tolerances are the in-sample ones of each source (the held-out
# error must not be worse than what the shipped fit is held to):
# Pollux multi-node 0.25 (the calibration target; measured held-out 0.180, fit 0.152),
# single-node 0.5 (held-out 0.365 over 4 placements, fit 0.401), DL2 0.45 (held-out
# 0.328, fit 0.432), the Gavel same-GPU vector fit 0.20 (the co-location
# target at the level the vectors are fitted at; held-out 0.179, fit 0.172) and the
# spread ratio's model ÷ measured median in [1.0, 1.75] (held-out 2.09 ÷ 1.75 = 1.19,
# fit 2.39 ÷ 1.38 = 1.73).
@pytest.mark.shared_data
def test_heldout_pollux_sync(shared_data: Path) -> None:
    got = _holdout(shared_data)
    fit_m, held_m, n_fit, n_held = got["pollux_sync_multi_node_median_rel_err"]
    assert held_m < TOL_POLLUX_MULTI and fit_m < TOL_POLLUX_MULTI, (fit_m, held_m)
    assert n_held > 100 and n_fit > 3 * n_held // 2
    fit_s, held_s, _, n_held_s = got["pollux_sync_single_node_median_rel_err"]
    assert n_held_s >= 2
    assert held_s < 0.5 and fit_s < 0.5, (fit_s, held_s)


@pytest.mark.shared_data
def test_heldout_dl2_speed(shared_data: Path) -> None:
    fit, held, n_fit, n_held = _holdout(shared_data)["dl2_speed_median_rel_err"]
    assert n_held > 50 and n_fit > n_held
    assert held < TOL_DL2 and fit < TOL_DL2, (fit, held)


@pytest.mark.shared_data
def test_heldout_gavel_colocation_vectors(shared_data: Path) -> None:
    fit, held, n_fit, n_held = _holdout(shared_data)["gavel_colocation_vector_mre"]
    assert n_held > 100 and n_fit > n_held
    assert held < 0.20 and fit < 0.20, (fit, held)


@pytest.mark.shared_data
def test_heldout_gavel_spread_ratio(shared_data: Path) -> None:
    got = _holdout(shared_data)
    for k in (0, 1):  # fit subset, held-out subset
        ratio = got["gavel_spread_ratio_median_model"][k]
        ratio /= got["gavel_spread_ratio_median_measured"][k]
        assert 1.0 <= ratio <= 1.75, (k, ratio)
    assert got["gavel_spread_ratio_median_model"][3] == 6  # ResNet-18/50 at batch 64


@pytest.mark.shared_data
def test_holdout_split_keeps_groups_together(shared_data: Path) -> None:
    from marl_sched.calibration import holdout

    # a placement class is one group: 1122 and 1212 fall on the same side
    assert holdout.pollux_held_out("bert", "1122") == holdout.pollux_held_out("bert", "1212")
    # a co-location pair is one group, whichever job is the victim
    assert holdout.gavel_pair_held_out("A3C", "LM (batch size 5)") == holdout.gavel_pair_held_out(
        "LM (batch size 5)", "A3C"
    )
    # every source holds out between 15 % and 35 % of its points
    for key, (_, _, n_fit, n_held) in _holdout(shared_data).items():
        if "single_node" not in key:
            assert 0.15 <= n_held / (n_fit + n_held) <= 0.35, key
