"""Run every fit and check (:func:`fit`) and turn the result into the content of
``calibration.json`` (:func:`fit_all`, with the derivation notes)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from marl_sched.calibration.checks import (
    dl2_noise_floor,
    gavel_consolidation_model,
    pollux_errors,
    pollux_noise_floor,
)
from marl_sched.calibration.constants import (
    ANLS_RIDGE,
    DL2_MODELS,
    FAMILY_PRIOR,
    GAVEL_MAP,
    GROUP_TO_SERVER,
    NCF_PARAMS,
    PACKED_CEILING,
    POLLUX_CPU_FROM,
    POLLUX_MODELS,
    PUBLISHED,
    SOCKET_TO_SERVER,
    TARGET_SERVER_NEIGHBOUR,
)
from marl_sched.calibration.coupling import fit_level_coupling
from marl_sched.calibration.data import load_dl2, load_gavel, load_pollux
from marl_sched.calibration.dl2 import dl2_cpu, fit_dl2_bandwidth
from marl_sched.calibration.gavel import catalogue_vectors, fit_gavel_interference
from marl_sched.calibration.pollux import (
    fit_links,
    pollux_compute,
    pollux_model_mb,
    sync_overhead,
)
from marl_sched.calibration.speed import (
    fit_gpu_speed,
    fit_model_gpu_speed,
    gavel_share_conflicts,
    gavel_unfit,
)
from marl_sched.calibration.spread import GavelSpread, gavel_consolidation

SIG_DIGITS = 6


def _round(x: float) -> float:
    return float(f"{x:.{SIG_DIGITS}g}")


# --------------------------------------------------------------------------- all


def mem_rule(model_mb: float) -> float:
    """Host memory per task: 4 GB (runtime, data-loader buffers) + 4 copies of the
    parameters (weights, gradients, two optimizer moments), rounded up to 0.5 GB."""
    return math.ceil((4.0 + 4.0 * model_mb / 1000.0) * 2.0) / 2.0


#: a PS task always uses some CPU; DL2 logs 0.0 cores for dssm's 6 MB model
MIN_PS_CPU = 0.05


@dataclass
class Fit:
    """Everything :func:`fit` derives; :func:`fit_all` turns it into the JSON."""

    speeds: dict[str, float]
    speed_info: dict[str, Any]
    model_speeds: dict[str, dict[str, float]]
    model_speed_source: dict[str, str]
    unfit: dict[str, list[str]]
    share_conflicts: dict[str, list[list[str]]]
    overhead: float
    overhead_per_model: dict[str, float]
    efficiency: dict[str, float]
    fitted_mb: dict[str, float]
    link_info: dict[str, Any]
    pollux_mb: dict[str, tuple[float, str]]
    pollux_compute: dict[str, tuple[float, int]]
    cpu: dict[str, tuple[float, float, int]]
    dl2_rows: int
    dl2_skipped: int
    sizes: dict[str, tuple[float, float]]
    gavel_types: list[str]
    s_mat: np.ndarray
    p_mat: np.ndarray
    gavel_info: dict[str, Any]
    vectors: dict[str, tuple[np.ndarray, np.ndarray]]
    coupling: dict[str, float]
    coupling_info: dict[str, Any]
    dl2_bandwidth: float
    dl2_errors: np.ndarray
    pollux_errors: dict[str, Any]
    pollux_floor: float
    dl2_floor: float
    consolidation: list[tuple[str, int, float, float]]


def fit(shared: str | os.PathLike[str]) -> Fit:
    """Run every fit and check on the data in ``shared``."""
    shared = Path(shared)
    gavel = load_gavel(shared)
    pollux = load_pollux(shared)
    dl2, skipped = load_dl2(shared)

    speeds, speed_info = fit_gpu_speed(gavel, pollux)
    model_speeds, model_speed_source = fit_model_gpu_speed(gavel, DL2_MODELS + POLLUX_MODELS)
    both = (gavel, load_gavel(shared, "gavel_physical_cluster_throughputs.json"))
    unfit, _ = gavel_unfit(both, DL2_MODELS + POLLUX_MODELS)
    share_conflicts = gavel_share_conflicts(both, DL2_MODELS + POLLUX_MODELS)
    overhead, overhead_per_model = sync_overhead(pollux)
    eff, fitted_mb, link_info = fit_links(pollux, overhead, GavelSpread(gavel))
    efficiency = {"pcie": eff["pcie"], "qpi": eff["pcie"], "nic": eff["nic"]}
    pollux_mb = pollux_model_mb(fitted_mb)
    pollux_c = pollux_compute(pollux, speeds["t4"])

    sizes = {m: PUBLISHED[m] for m in DL2_MODELS}
    for m in POLLUX_MODELS:
        sizes[m] = (pollux_mb[m][0], pollux_c[m][0])

    types, s_mat, p_mat, gavel_info = fit_gavel_interference(gavel)
    vectors = catalogue_vectors(types, s_mat, p_mat, sizes)
    coupling, coupling_info = fit_level_coupling(vectors)

    dl2_bw, dl2_err, _ = fit_dl2_bandwidth(
        dl2,
        {m: PUBLISHED[m][0] for m in DL2_MODELS},
        {m: PUBLISHED[m][1] for m in DL2_MODELS},
        overhead,
    )
    cons = [
        (job, scale, meas, model)
        for (job, scale, meas), (_, _, model) in zip(
            gavel_consolidation(gavel),
            gavel_consolidation_model(gavel, efficiency, overhead, link_info["gamma"]),
            strict=True,
        )
    ]
    return Fit(
        speeds=speeds,
        speed_info=speed_info,
        model_speeds=model_speeds,
        model_speed_source=model_speed_source,
        unfit=unfit,
        share_conflicts=share_conflicts,
        overhead=overhead,
        overhead_per_model=overhead_per_model,
        efficiency=efficiency,
        fitted_mb=fitted_mb,
        link_info=link_info,
        pollux_mb=pollux_mb,
        pollux_compute=pollux_c,
        cpu=dl2_cpu(dl2),
        dl2_rows=len(dl2),
        dl2_skipped=skipped,
        sizes=sizes,
        gavel_types=types,
        s_mat=s_mat,
        p_mat=p_mat,
        gavel_info=gavel_info,
        vectors=vectors,
        coupling=coupling,
        coupling_info=coupling_info,
        dl2_bandwidth=dl2_bw,
        dl2_errors=dl2_err,
        pollux_errors=pollux_errors(
            pollux, {m: sz[0] for m, sz in sizes.items()}, efficiency, overhead, link_info["gamma"]
        ),
        pollux_floor=pollux_noise_floor(pollux),
        dl2_floor=dl2_noise_floor(dl2),
        consolidation=cons,
    )


def fit_all(shared: str | os.PathLike[str]) -> dict[str, Any]:
    """Fit every constant; returns the calibration.json content."""
    f = fit(shared)
    models: dict[str, Any] = {}
    for m in DL2_MODELS + POLLUX_MODELS:
        mb, comp = f.sizes[m]
        press, sens = f.vectors[m]
        if m in DL2_MODELS:
            cw, cp, nrows = f.cpu[m]
            src = (
                "model_mb, compute_s: DL2/Harmony published catalogue (PROVENANCE.md); "
                f"cpu_worker, cpu_ps: median per-task cores over {nrows} DL2 rows "
                "(dl2_ps_worker_config_speed.txt)"
            )
        else:
            cw, cp, _ = f.cpu[POLLUX_CPU_FROM[m]]
            src = (
                f"compute_s: 1-GPU step_time - sync_time at local_bsz "
                f"{f.pollux_compute[m][1]} (pollux/{m}/placements.csv) x t4 speed; "
                f"model_mb: {f.pollux_mb[m][1]}; cpu_worker, cpu_ps: DL2 median of "
                f"{POLLUX_CPU_FROM[m]} (same family; not measured for {m})"
            )
        models[m] = {
            "compute_s": _round(comp),
            "model_mb": _round(mb),
            "cpu_worker": _round(cw),
            "cpu_ps": _round(max(cp, MIN_PS_CPU)),
            "mem_gb": mem_rule(mb),
            "gpu_unfit": f.unfit.get(m, []),
            "pressure": [_round(x) for x in press],
            "sensitivity": [_round(x) for x in sens],
            "source": (
                f"{src}; gpu speeds: {f.model_speed_source[m]}; "
                "mem_gb: rule 4 GB + 4 x model_mb (assumption); pressure, "
                f"sensitivity: Gavel V100 co-location ANLS fit of job type "
                f"'{GAVEL_MAP[m]}', net column from communication intensity "
                "(docs/performance-model.md)"
            ),
        }
    return {
        "version": 1,
        "gpu_speed": {k: _round(f.speeds[k]) for k in ("v100", "p100", "k80", "t4")},
        "gpu_speed_by_model": {
            m: {k: _round(v) for k, v in row.items()} for m, row in sorted(f.model_speeds.items())
        },
        "link_efficiency": {k: _round(v) for k, v in f.efficiency.items()},
        "sync_overhead_s": _round(f.overhead),
        "overlap_gamma": _round(f.link_info["gamma"]),
        "level_coupling": {k: _round(v) for k, v in f.coupling.items()},
        "gpu_share_conflicts": f.share_conflicts,
        "notes": _notes(f),
        "models": models,
    }


def _notes(f: Fit) -> dict[str, str]:
    """The derivation of every global constant and the fit errors, as text."""
    si, li, gi, ci = f.speed_info, f.link_info, f.gavel_info, f.coupling_info
    pe = f.pollux_errors
    t4 = ", ".join(f"{m} batch {b}: {r:.3f}" for m, b, r in si["t4"])
    cons_meas = np.array([c[2] for c in f.consolidation])
    cons_model = np.array([c[3] for c in f.consolidation])
    return {
        "generated_by": (
            "python -m marl_sched.calibration --shared ../shared/data --out "
            "marl_sched/data/calibration.json. Do not edit by hand: "
            "tests/marl_sched/test_calibration.py checks this file equals a refit. "
            "Derivation: docs/performance-model.md."
        ),
        "gpu_speed": (
            f"v100 = 1. p100, k80: geometric mean over the {si['p100']['n']} Gavel job "
            "types at scale 1 of isolated throughput / V100 isolated throughput "
            f"(gavel_simulation_throughputs.json); p100 ratios span "
            f"{si['p100']['min']:.2f}-{si['p100']['max']:.2f}, k80 "
            f"{si['k80']['min']:.2f}-{si['k80']['max']:.2f}. t4: geometric mean of Pollux "
            "T4 1-GPU samples/s (placement 1, local_bsz / step_time, interpolated "
            "log-log at Gavel's batch size) over Gavel V100 samples/s (steps/s x batch) "
            "for the same architecture (imagenet = ResNet-50, cifar10 = ResNet-18), at "
            f"every Gavel batch size inside Pollux's profiled range: {t4}."
        ),
        "gpu_speed_by_model": (
            "p100, k80 per model (V100 = 1; v100 and t4 use gpu_speed): the isolated "
            "scale-1 throughput ratio of the model's Gavel job type, or the geometric "
            "mean over its Gavel family's batch sizes (calibration/constants.py "
            "GAVEL_SPEED_MAP); a model without one uses gpu_speed. "
            + "; ".join(f"{m}: {how}" for m, how in sorted(f.model_speed_source.items()))
            + "."
        ),
        "link_efficiency": (
            "Pollux's jobs are all-reduce jobs: perf.py's ring over the workers (each "
            "ring edge carries 2M(n-1)/n; a worker's PCIe link carries its edges in "
            "and out, a node holding some of the GPUs one edge in and one out on its "
            "NIC). Bytes per link come from PerformanceModel.layout on a g4dn.12xlarge "
            "topology (one GPU group per T4, pcie 128, nic 50 Gbit/s nominal). "
            "Measured = Pollux exposed sync_time at every profiled local_bsz; model = "
            "(c^g + C^g)^(1/g) - c + sync_overhead_s, c = the 1-GPU step_time - "
            "sync_time at that local_bsz, with parameter-count sizes of bert, cifar10, "
            f"imagenet, yolov3 ({li['n_single']} single-node, {li['n_multi']} multi-node "
            "points). Jointly with Gavel's V100 consolidated/unconsolidated ratios "
            f"({li['n_gavel']} pairs, default topology): loss = mean squared log error per "
            "source, summed with equal weight (Pollux's single- and multi-node halves "
            "half each); pcie and nic by coordinate descent for each overlap exponent "
            "g on a log grid 1-8, g the best. The sources disagree: Pollux alone fits "
            "a spread/packed ratio of ~2.8 on Gavel's pairs (measured 1.38). qpi: no "
            "public measurement crosses a socket (a g4dn.12xlarge has one); set equal "
            "to pcie (assumption)."
        ),
        "gpu_unfit": (
            "GPU types a model's worker does not fit on (GPU memory): its Gavel job type "
            "(exact mapping of GAVEL_SPEED_MAP only: memory depends on architecture and "
            "batch) has a zero isolated throughput there in gavel_simulation_throughputs"
            ".json or gavel_physical_cluster_throughputs.json, at any scale factor: "
            + "; ".join(f"{m}: {', '.join(g)}" for m, g in sorted(f.unfit.items()))
            + ". Every other model is assumed to fit every GPU type (no measurement)."
        ),
        "gpu_share_conflicts": (
            "Pairs of models that cannot share one GPU (topology.gpu_sharing > 1), per GPU "
            "type: Gavel records [0, 0] for the scale-1 pair of their job types (exact "
            "mapping of GAVEL_SPEED_MAP only, as for gpu_unfit) in either throughput "
            "file: "
            + "; ".join(
                f"{gpu}: " + ", ".join(f"{a}+{b}" for a, b in pairs)
                for gpu, pairs in sorted(f.share_conflicts.items())
            )
            + ". Every other pair is assumed to fit together (no measurement)."
        ),
        "overlap_gamma": (
            "Pollux's form of overlapping compute c and communication C: iteration = "
            f"(c^g + C^g)^(1/g) + sync_overhead_s, g = {li['gamma']:.3f} (1 = no overlap, "
            "large = max(c, C)); fitted with link_efficiency."
        ),
        "sync_overhead_s": (
            "median over the 6 Pollux models of the median 1-GPU sync_time (nothing to "
            "send): "
            + ", ".join(f"{m} {v * 1e3:.2f} ms" for m, v in sorted(f.overhead_per_model.items()))
            + "."
        ),
        "model_mb": (
            "DL2 models: published. Pollux models: fitted to their multi-node sync "
            "times at the fitted nic efficiency (parameter count x 4 B in brackets): "
            + ", ".join(
                f"{m} {f.fitted_mb[m]:.1f}"
                + (f" ({li['param_mb'][m]:.1f})" if m in li["param_mb"] else "")
                for m in POLLUX_MODELS
            )
            + f" MB; ncf's NeuMF on MovieLens-1M would be {NCF_PARAMS * 4 / 1e6:.1f} MB."
        ),
        "compute_s": (
            "DL2 models: published. Pollux models: (step_time - sync_time) on 1 T4 at "
            "the batch a 1-GPU Pollux job starts with (smallest validated batch of "
            "adaptdl's simulator, capped at the largest profiled local_bsz), times the "
            "t4 speed (V100 seconds): "
            + ", ".join(f"{m} local_bsz {b}" for m, (_, b) in f.pollux_compute.items())
            + "."
        ),
        "cpu_mem": (
            "cpu_worker / cpu_ps: median over all tasks of DL2's measured per-task CPU "
            f"cores ({f.dl2_rows} rows kept, {f.dl2_skipped} skipped: all-zero or "
            f"partly-zero speeds = failed runs); PS floor {MIN_PS_CPU} core. Pollux "
            "models borrow the nearest DL2 family's figures. mem_gb: rule 4 GB + 4 x "
            "model_mb, rounded up to 0.5 GB (not measured)."
        ),
        "interference": (
            f"Gavel V100 scale-1 same-GPU pairs ({gi['n_pairs']} pairs, [0,0] excluded): "
            f"slowdown = isolated / co-located throughput, median "
            f"{gi['measured_median']:.2f}. Fit slowdown_ij - 1 = s_i . p_j over the 5 "
            f"resources by alternating NNLS, rows weighted 1/slowdown, ridge "
            f"{ANLS_RIDGE} towards family priors (cpu, pcie, membw, disk, net): "
            + "; ".join(f"{k} {v}" for k, v in FAMILY_PRIOR.items())
            + f". MRE {gi['mre']:.3f} (median {gi['median_re']:.3f}; priors alone "
            f"{gi['prior_mre']:.3f}). Catalogue model -> Gavel job type: "
            + "; ".join(f"{m} -> {j}" for m, j in GAVEL_MAP.items())
            + ". The net column (no signal in same-GPU pairs) is the median fitted "
            "entry x sqrt(model_mb/compute_s over its catalogue median), clipped to "
            "[0.25, 3]."
        ),
        "level_coupling": (
            "lambda_L scale the same-GPU (Gavel) level 1 down to what our placements "
            "allow (same PCIe switch / socket / server, never the same GPU). Ratios "
            f"group:socket:server = {GROUP_TO_SERVER}:{SOCKET_TO_SERVER}:1; lambda = the "
            f"smaller of a median one-neighbour server-level slowdown of "
            f"{TARGET_SERVER_NEIGHBOUR} (Harmony: tens of percent) and 7 workers of the "
            f"heaviest model ({ci['heaviest']}) on a full 8-GPU server slowing the "
            f"median victim {PACKED_CEILING}x; binding: {ci['binding']}. Result over "
            f"all catalogue pairs: one neighbour median server "
            f"{ci['median_server_neighbour']:.3f}, socket "
            f"{ci['median_socket_neighbour']:.3f}, group {ci['median_group_neighbour']:.3f}, "
            f"worst server {ci['max_server_neighbour']:.3f}; packed 8-GPU server median "
            f"{ci['median_packed_server']:.3f}, worst {ci['max_packed_server']:.3f}, "
            f"worst with every neighbour's PS on the server too "
            f"{ci['max_packed_server_with_ps']:.3f}."
        ),
        "fit_errors": (
            "Pollux exposed sync time at each placement's smallest local_bsz, median "
            f"relative error: multi-node {np.median(pe['multi']):.3f} over "
            f"{len(pe['multi'])} points "
            f"(noise floor of any placement-multiset model {f.pollux_floor:.3f}), "
            f"single-node {np.median(pe['single']):.3f} over {len(pe['single'])}; per "
            "model "
            + ", ".join(f"{m} {np.median(v):.3f}" for m, v in pe["per_model"].items())
            + f"; at every local_bsz {np.median(pe['every_batch']):.3f} over "
            f"{len(pe['every_batch'])} points. Gavel same-GPU co-location fit MRE "
            f"{gi['mre']:.3f}. DL2 per-worker speed relative "
            f"to 1 worker: median relative error {np.median(f.dl2_errors):.3f} over "
            f"{len(f.dl2_errors)} points (1-worker speed jitter across PS counts "
            f"{f.dl2_floor:.3f}) at a fitted effective testbed bandwidth of "
            f"{f.dl2_bandwidth / 1e6:.1f} MB/s (DL2's own trace.py inter_bws: 10-233 "
            "MB/s, median 92 MB/s). Gavel V100 consolidated/unconsolidated throughput "
            "ratio, ResNet-18/50 x2/x4/x8: measured median "
            f"{np.median(cons_meas):.2f}, model median {np.median(cons_model):.2f} "
            f"(default topology), median |log(model/measured)| "
            f"{np.median(np.abs(np.log(cons_model / cons_meas))):.2f}."
        ),
    }
