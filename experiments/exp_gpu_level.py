"""The same-GPU interference level (GPU sharing) against Gavel's physical pairs.

::

    python experiments/exp_gpu_level.py [--shared ../shared/data]

Each of Gavel's 1,597 scale-1 physical co-location pairs of the job types that
:data:`marl_sched.interference.real_data.GAVEL_MODELS` maps (the pairs of
``gavel_colocation_mre``) runs through the simulator: both single-worker jobs on the
one GPU of a one-server cluster of that GPU type with ``gpu_sharing: 2``. It prints,
per GPU type and over all pairs, on the FIT and HELD-OUT pairs of
``marl_sched/calibration/holdout.py``'s split (by unordered job-type pair):

* ``shipped``: the shipped GPU level, ``λ_gpu,r = 1 − Σ_L λ_L M^L_r``;
* ``scaled``: the alternative docs/performance-model.md §3.7 weighs and does not ship,
  the GPU level times one scale per GPU type, the scale minimising the MRE on the FIT
  pairs (grid 0.10–3.00, step 0.01; the slowdown is linear in it);

and, for §6.5, where the error left comes from: the same pairs in Gavel's simulation
file against the physical one (the vectors are fitted on the simulation file), and
each job type's own fitted vectors (no catalogue mapping) on the physical pairs.

Then issue #25's open question, measured and **not shipped** (docs/performance-model.md
§6.5, "Refitting on the physical file"): the shipped vector fit (ANLS, family priors,
1/slowdown weights) run on the physical file's pairs of all three GPU types pooled,
and with one scale per GPU type (V100 1; :func:`gpu_scales`), on the FIT pairs only:

* the MRE through the simulator (the loader's placement above, the refit vectors and
  the λ_L recomputed from them) on the FIT and HELD-OUT pairs, per GPU type;
* the ridge: 0.5, 1 (shipped), 2, chosen by the MRE through the simulator under
  4-fold cross-validation inside the FIT pairs (by unordered job-type pair); held-out
  is reported for the chosen ridge and the shipped one only;
* where the error comes from: each pair's own job-type vectors, the types of the
  loader's five catalogue models, the simulator without the ``net`` column on the
  GPU level, the simulator;
* what a refit on every physical pair would change downstream: λ_L and its two
  candidates (§3.7), the one-neighbour / packed-server slowdowns, and the MRE of the
  refit vectors on the simulation file's V100 pairs.

The last line is one JSON object with every figure. Nothing here chooses a policy,
and nothing shipped (calibration.json, perf.py, simulator.py) changes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from unittest.mock import patch

import numpy as np

from marl_sched.calibration.constants import (
    ANLS_RIDGE,
    FAMILY_PRIOR,
    GAVEL_COLOCATION_GPUS,
    GAVEL_MAP,
)
from marl_sched.calibration.coupling import fit_level_coupling
from marl_sched.calibration.data import load_gavel
from marl_sched.calibration.gavel import (
    catalogue_vectors,
    fit_gavel_interference,
    fit_pair_factors,
    gavel_pairs,
)
from marl_sched.calibration.holdout import gavel_pair_held_out
from marl_sched.catalogue import CALIBRATION, CATALOGUE, RESOURCES, Calibration
from marl_sched.config import ServerTypeConfig, TopologyConfig
from marl_sched.interference.real_data import GAVEL_MODELS
from marl_sched.jobs import Job, Placement
from marl_sched.perf import PerformanceModel
from marl_sched.simulator import Simulator
from marl_sched.topology import Topology

REPO = Path(__file__).resolve().parents[1]
SCALES = np.round(np.arange(0.10, 3.0001, 0.01), 2)


def _family(job: str) -> str:
    return job.split(" (")[0]


def _pair_slowdown(perf: PerformanceModel, model_a: str, model_b: str) -> float:
    """Job a's slowdown beside job b on the cluster's one GPU (both single workers)."""
    a = Job(0, "a", model_a, 1, 0, 1e6, 0.0, 0.0)
    b = Job(1, "b", model_b, 1, 0, 1e6, 0.0, 0.0)
    sim = Simulator(perf.topology, [a, b], perf=perf)
    for _ in range(2):
        sim.next_decision()
        sim.apply(Placement((0,), ()))
    run = sim.running[0]
    return run.iter_time / perf.alone_iteration_time(
        perf.calibration.models[model_a], run.layout, 0
    )


def pair_rows(shared: Path) -> list[dict]:
    """Every physical pair: GPU, job types and the catalogue models the loader maps
    them to (``ma``, ``mb``), measured slowdown, held out or not, and the simulation
    file's measurement of the same pair (``sim_file``, nan if it has none)."""
    phys = load_gavel(shared, "gavel_physical_cluster_throughputs.json")
    simf = load_gavel(shared)
    rows = []
    for gpu in GAVEL_COLOCATION_GPUS:
        for (own, scale), row in sorted(phys[gpu].items()):
            iso = float(row.get(None, 0.0))
            if scale != 1 or _family(own) not in GAVEL_MODELS or iso <= 0:
                continue
            for other, value in sorted(row.items(), key=lambda kv: str(kv[0])):
                if other is None or other[1] != 1 or _family(other[0]) not in GAVEL_MODELS:
                    continue
                if float(value[0]) <= 0:
                    continue
                srow = simf[gpu].get((own, 1), {})
                sval = srow.get(other)
                sim_file = (
                    float(srow[None]) / float(sval[0])
                    if sval is not None and float(sval[0]) > 0 and float(srow.get(None, 0)) > 0
                    else float("nan")
                )
                rows.append(
                    {
                        "gpu": gpu, "a": own, "b": other[0],
                        "ma": GAVEL_MODELS[_family(own)], "mb": GAVEL_MODELS[_family(other[0])],
                        "measured": iso / float(value[0]),
                        "held": gavel_pair_held_out(own, other[0]),
                        "sim_file": sim_file,
                    }
                )  # fmt: skip
    return rows


def simulated_slowdowns(
    rows: list[dict], cal: Calibration = CALIBRATION, same_gpu_net: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's simulated slowdown without and with the GPU level (``lo``, ``hi``)
    under calibration ``cal``: its level couplings, and its models' vectors in place of
    the shipped ones while the pairs run (the simulator reads the catalogue).
    ``same_gpu_net=False`` drops the ``net`` column from the GPU level (a diagnostic:
    the column is set by a rule, not fitted, and the pairs' jobs do not communicate)."""
    cache: dict[tuple[str, str, str], tuple[float, float]] = {}
    with patch.dict(CATALOGUE, cal.models):
        for gpu in sorted({r["gpu"] for r in rows}):
            server = ServerTypeConfig(
                name=gpu, count=1, gpu_type=gpu, sockets=1, groups_per_socket=1,
                gpus_per_group=1,
            )  # fmt: skip
            topo = Topology(
                TopologyConfig(
                    subclusters=1, racks_per_subcluster=1, servers_per_rack=1,
                    server_types=(server,), rack_oversubscription=1.0, gpu_sharing=2,
                )
            )  # fmt: skip
            perf = PerformanceModel(topo, cal)
            no_gpu_level = PerformanceModel(topo, cal)
            no_gpu_level.gpu_coupling = np.zeros_like(perf.gpu_coupling)
            if not same_gpu_net:
                perf.gpu_coupling = perf.gpu_coupling.copy()
                perf.gpu_coupling[RESOURCES.index("net")] = 0.0
            for key in sorted({(r["ma"], r["mb"]) for r in rows if r["gpu"] == gpu}):
                cache[(gpu, *key)] = (
                    _pair_slowdown(no_gpu_level, *key), _pair_slowdown(perf, *key)
                )  # fmt: skip
    lo = np.array([cache[(r["gpu"], r["ma"], r["mb"])][0] for r in rows])
    hi = np.array([cache[(r["gpu"], r["ma"], r["mb"])][1] for r in rows])
    return lo, hi


def _mre(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - meas) / meas)) if len(meas) else float("nan")


# --------------------------------------------------------------- refit on the physical file

#: GPU types of the physical refit, the reference of the per-GPU scales (1) first
REFIT_GPUS = ("v100", "k80", "p100")
#: ridge weights tried around the shipped one (chosen by inner cross-validation)
RIDGES = (0.5, ANLS_RIDGE, 2.0)
#: inner folds of the FIT pairs (by unordered job-type pair) that choose the ridge
INNER_FOLDS = 4


@dataclass(frozen=True)
class Refit:
    """Vectors of Gavel's job types fitted on physical pairs, and the per-GPU scales
    (all 1 for the pooled fit)."""

    types: list[str]
    s_mat: np.ndarray
    p_mat: np.ndarray
    scales: dict[str, float]
    pairs: list[tuple[str, str, str]]  # (gpu, type a, type b) of every fitted pair
    info: dict


def physical_pairs(
    phys: dict, keep: Callable[[str, str], bool] | None = None
) -> tuple[list[str], list[tuple[int, int, float]], np.ndarray]:
    """Job types, the scale-1 same-GPU pairs ``(i, j, slowdown)`` of every GPU type in
    :data:`REFIT_GPUS` pooled (only those ``keep(type_i, type_j)`` accepts), and each
    pair's index in :data:`REFIT_GPUS`."""
    types: list[str] = []
    pairs: list[tuple[int, int, float]] = []
    group: list[int] = []
    for g, gpu in enumerate(REFIT_GPUS):
        t, p = gavel_pairs(phys, gpu)
        if types and t != types:
            raise ValueError(f"{gpu}: job types differ from {REFIT_GPUS[0]}'s")
        types = t
        kept = [(i, j, v) for i, j, v in p if keep is None or keep(t[i], t[j])]
        pairs += kept
        group += [g] * len(kept)
    return types, pairs, np.array(group, dtype=np.int64)


def gpu_scales(pairs: list[tuple[int, int, float]], group: np.ndarray) -> np.ndarray:
    """One scale per GPU type of :data:`REFIT_GPUS` (V100 1): over the ordered pairs
    measured on both it and the V100, the median of ``slowdown - 1`` over V100's.
    (A ratio of medians: the median of per-pair ratios swings on pairs the V100 barely
    slows, and fitted jointly with the vectors the scales drift off: the prior ridge
    is cheaper to satisfy at smaller products, and the scales make up for them.)"""
    by_gpu = [{(i, j): v for (i, j, v), g in zip(pairs, group, strict=True) if g == k}
              for k in range(len(REFIT_GPUS))]  # fmt: skip
    out = np.ones(len(REFIT_GPUS))
    for k in range(1, len(REFIT_GPUS)):
        both = [key for key in by_gpu[k] if key in by_gpu[0]]
        out[k] = float(np.median([by_gpu[k][key] - 1.0 for key in both])) / float(
            np.median([by_gpu[0][key] - 1.0 for key in both])
        )
    return out


def refit(
    phys: dict, keep: Callable[[str, str], bool] | None, ridge: float, per_gpu: bool
) -> Refit:
    """The shipped ANLS procedure (priors, 1/slowdown weights) at ``ridge`` on the
    physical pairs ``keep`` accepts; ``per_gpu`` first sets one scale per GPU type
    (:func:`gpu_scales`) and fits the vectors at the V100 level under it."""
    types, pairs, group = physical_pairs(phys, keep)
    c = gpu_scales(pairs, group) if per_gpu else np.ones(len(REFIT_GPUS))
    s_mat, p_mat, info = fit_pair_factors(types, pairs, ridge, c[group] if per_gpu else None)
    scales = {gpu: float(c[g]) for g, gpu in enumerate(REFIT_GPUS)}
    fitted = [
        (REFIT_GPUS[g], types[i], types[j]) for (i, j, _), g in zip(pairs, group, strict=True)
    ]
    return Refit(types, s_mat, p_mat, scales, fitted, info)


def refit_calibration(fit: Refit) -> tuple[Calibration, dict]:
    """The shipped calibration with the catalogue vectors derived from ``fit`` (net
    column rule and mapping of §3.6, the shipped model sizes) and λ_L recomputed from
    them (§3.7); also the coupling statistics. Nothing is written."""
    sizes = {m: (spec.model_mb, spec.compute_s) for m, spec in CALIBRATION.models.items()}
    vectors = catalogue_vectors(fit.types, fit.s_mat, fit.p_mat, sizes)
    coupling, stats = fit_level_coupling(vectors)
    models = {
        m: dataclasses.replace(spec, pressure=vectors[m][0], sensitivity=vectors[m][1])
        for m, spec in CALIBRATION.models.items()
    }
    return dataclasses.replace(CALIBRATION, level_coupling=coupling, models=models), stats


def predicted(
    rows: list[dict], cal: Calibration, scales: dict[str, float], same_gpu_net: bool = True
) -> np.ndarray:
    """Simulated slowdown of each row under ``cal``, its GPU level times the row's GPU
    scale (linear in it: ``lo + c·(hi − lo)``)."""
    lo, hi = simulated_slowdowns(rows, cal, same_gpu_net)
    c = np.array([scales[r["gpu"]] for r in rows])
    return lo + c * (hi - lo)


def vector_level(fit: Refit, rows: list[dict], mapped: bool) -> np.ndarray:
    """``1 + c_g · s_a · p_b`` of each row from the fitted job-type vectors: the row's
    own job types, or (``mapped``) the types :data:`GAVEL_MAP` gives the catalogue
    models the loader maps them to. No simulator, no net-column rule."""
    idx = {t: k for k, t in enumerate(fit.types)}

    def row_type(r: dict, side: str) -> int:
        return idx[GAVEL_MAP[r["m" + side]] if mapped else r[side]]

    return np.array(
        [1.0 + fit.scales[r["gpu"]]
         * float(fit.s_mat[row_type(r, "a")] @ fit.p_mat[row_type(r, "b")]) for r in rows]
    )  # fmt: skip


def error_sources(fit: Refit, rows: list[dict]) -> dict[str, dict]:
    """Where the error through the simulator comes from, step by step: each pair's own
    job-type vectors, the loader's five catalogue models' types, the simulator without
    the net column on the GPU level, the simulator."""
    cal = refit_calibration(fit)[0]
    return {
        "own_type_vectors": split_mre(rows, vector_level(fit, rows, mapped=False)),
        "mapped_type_vectors": split_mre(rows, vector_level(fit, rows, mapped=True)),
        "simulator_no_same_gpu_net": split_mre(rows, predicted(rows, cal, fit.scales, False)),
        "simulator": split_mre(rows, predicted(rows, cal, fit.scales)),
    }


def inner_fold(a: str, b: str) -> int:
    """The inner fold (of :data:`INNER_FOLDS`) of the unordered job-type pair."""
    return zlib.crc32(("inner|" + "|".join(sorted((a, b)))).encode("utf-8")) % INNER_FOLDS


def cross_validated_mre(phys: dict, rows: list[dict], ridge: float, per_gpu: bool) -> float:
    """MRE through the simulator on the FIT rows, each predicted by a refit on the FIT
    pairs of the other inner folds (the held-out pairs are never fitted nor scored)."""
    fit_rows = [r for r in rows if not r["held"]]
    pred = np.empty(len(fit_rows))
    fold = np.array([inner_fold(r["a"], r["b"]) for r in fit_rows])
    for k in range(INNER_FOLDS):
        fit = refit(
            phys,
            lambda a, b, k=k: not gavel_pair_held_out(a, b) and inner_fold(a, b) != k,
            ridge,
            per_gpu,
        )
        pred[fold == k] = predicted(fit_rows, refit_calibration(fit)[0], fit.scales)[fold == k]
    return _mre(pred, np.array([r["measured"] for r in fit_rows]))


def prior_cosine(fit: Refit) -> float:
    """Median cosine between each type's fitted factor (S and P rows) and its family
    prior: whether the five columns keep their resource meaning."""
    prior = np.array([FAMILY_PRIOR[_family(t)] for t in fit.types])
    rows = np.vstack([fit.s_mat, fit.p_mat])
    ref = np.vstack([prior, prior])
    cos = np.sum(rows * ref, 1) / np.maximum(
        np.linalg.norm(rows, axis=1) * np.linalg.norm(ref, axis=1), 1e-300
    )
    return float(np.median(cos))


def simulation_file_mre(fit: Refit, simf: dict) -> float:
    """The refit vectors' MRE on Gavel's simulation-file V100 pairs (all 636: what the
    shipped vectors are fitted on)."""
    types, pairs = gavel_pairs(simf)
    idx = {t: k for k, t in enumerate(fit.types)}
    pred = np.array(
        [1.0 + fit.scales["v100"] * float(fit.s_mat[idx[types[i]]] @ fit.p_mat[idx[types[j]]])
         for i, j, _ in pairs]
    )  # fmt: skip
    return _mre(pred, np.array([v for _, _, v in pairs]))


def downstream(fit: Refit, simf: dict) -> dict:
    """What shipping ``fit`` would change (not applied): λ and its two candidates, the
    §3.7 slowdown table, and the simulation file's V100 MRE."""
    _, stats = refit_calibration(fit)
    keys = ("median_server_neighbour", "median_socket_neighbour", "median_group_neighbour",
            "max_server_neighbour", "median_packed_server", "max_packed_server",
            "max_packed_server_with_ps")  # fmt: skip
    out = {k: float(stats[k]) for k in keys}
    out.update(
        {"lambda": float(min(stats["lambda_target"], stats["lambda_cap"])),
         "lambda_target": stats["lambda_target"], "lambda_cap": stats["lambda_cap"],
         "binding": stats["binding"], "heaviest": stats["heaviest"],
         "simulation_file_v100_mre": simulation_file_mre(fit, simf)}
    )  # fmt: skip
    return out


def split_mre(rows: list[dict], pred: np.ndarray) -> dict[str, dict[str, float]]:
    """MRE on the FIT and HELD-OUT rows, per GPU type and over all."""
    gpu = np.array([r["gpu"] for r in rows])
    meas = np.array([r["measured"] for r in rows])
    held = np.array([r["held"] for r in rows])
    out = {}
    for g in (*GAVEL_COLOCATION_GPUS, "all"):
        m = gpu == g if g != "all" else np.ones(len(rows), dtype=bool)
        out[g] = {"fit": _mre(pred[m & ~held], meas[m & ~held]),
                  "heldout": _mre(pred[m & held], meas[m & held])}  # fmt: skip
    return out


def physical_refit_figures(shared: Path, rows: list[dict], ridges=RIDGES) -> dict:
    """Issue #25's question, measured and not shipped: the vectors refitted on the
    physical file's FIT pairs (pooled; one scale per GPU type), their MRE through the
    simulator, the ridge chosen by inner cross-validation on the FIT pairs, and what
    the refit on every physical pair would do downstream."""
    phys = load_gavel(shared, "gavel_physical_cluster_throughputs.json")
    simf = load_gavel(shared)
    shipped = Refit(*fit_gavel_interference(simf)[:3], {g: 1.0 for g in REFIT_GPUS}, [], {})
    out: dict = {"shipped": downstream(shipped, simf),
                 "shipped_error_sources": error_sources(shipped, rows)}  # fmt: skip
    for name, per_gpu in (("pooled", False), ("per_gpu_scale", True)):
        cv = {r: cross_validated_mre(phys, rows, r, per_gpu) for r in ridges}
        chosen = min(cv, key=cv.get)
        variant: dict = {"cv_mre": {str(r): v for r, v in cv.items()}, "ridge": chosen}
        for ridge in ridges:
            fit = refit(phys, lambda a, b: not gavel_pair_held_out(a, b), ridge, per_gpu)
            errors = split_mre(rows, predicted(rows, refit_calibration(fit)[0], fit.scales))
            # held-out: the shipped procedure's ridge (fixed in advance) and the chosen one
            if ridge not in (ANLS_RIDGE, chosen):
                errors = {g: {"fit": e["fit"]} for g, e in errors.items()}
            if ridge == chosen:
                variant["error_sources"] = error_sources(fit, rows)
            variant[str(ridge)] = {
                "mre": errors, "scales": fit.scales, "vector_fit_mre": fit.info["mre"],
                "prior_cosine": prior_cosine(fit),
            }  # fmt: skip
        for ridge in sorted({ANLS_RIDGE, chosen}):
            variant[f"downstream_{ridge}"] = downstream(refit(phys, None, ridge, per_gpu), simf)
        out[name] = variant
    return out


def print_refit(figures: dict) -> None:
    """The refit's tables: MRE through the simulator per ridge, then downstream."""
    gpus = (*GAVEL_COLOCATION_GPUS, "all")
    print("\nvectors refitted on the PHYSICAL file's FIT pairs (measured, not shipped); "
          "MRE through the simulator, gpu_sharing 2")  # fmt: skip
    print(f"{'variant':<14} {'ridge':>5} {'inner-CV':>8} {'k80 x':>6} {'p100 x':>6} "
          + " ".join(f"{'fit ' + g:>8}" for g in gpus)
          + " " + " ".join(f"{'held ' + g:>9}" for g in gpus))  # fmt: skip
    for name in ("pooled", "per_gpu_scale"):
        v = figures[name]
        for ridge, cv in v["cv_mre"].items():
            r = v[ridge]
            mark = "*" if float(ridge) == v["ridge"] else " "
            held = " ".join(
                f"{r['mre'][g]['heldout']:>9.3f}" if "heldout" in r["mre"][g] else f"{'':>9}"
                for g in gpus
            )
            print(f"{name:<14} {ridge:>4}{mark} {cv:>8.3f} {r['scales']['k80']:>6.2f} "
                  f"{r['scales']['p100']:>6.2f} "
                  + " ".join(f"{r['mre'][g]['fit']:>8.3f}" for g in gpus) + " " + held)  # fmt: skip
    print(
        "* = the ridge with the least inner-cross-validated MRE on the FIT pairs; "
        "held-out reported for it and the shipped ridge only"
    )
    print("\nwhere the error comes from (chosen ridge; MRE fit all / held-out k80 p100 v100 all)")
    sources = [("shipped", figures["shipped_error_sources"])] + [
        (name, figures[name]["error_sources"]) for name in ("pooled", "per_gpu_scale")
    ]
    for name, steps in sources:
        for step, e in steps.items():
            print(f"{name:<14} {step:<26} {e['all']['fit']:>7.3f} / "
                  + " ".join(f"{e[g]['heldout']:>6.3f}" for g in gpus))  # fmt: skip
    print("\nwhat the refit on ALL physical pairs would do downstream (not applied)")
    print(f"{'vectors':<24} {'λ':>7} {'λ (a)':>7} {'λ (b)':>7} {'nbr srv':>7} {'sock':>6} "
          f"{'group':>6} {'max srv':>7} {'packed':>6} {'max':>6} {'max+PS':>6} "
          f"{'simfile V100':>12}")  # fmt: skip
    rows = [("shipped (sim. file)", figures["shipped"])] + [
        (f"{name} ridge {key.split('_')[1]}", figures[name][key])
        for name in ("pooled", "per_gpu_scale")
        for key in figures[name] if key.startswith("downstream_")
    ]  # fmt: skip
    for label, d in rows:
        print(f"{label:<24} {d['lambda']:>7.4f} {d['lambda_target']:>7.4f} "
              f"{d['lambda_cap']:>7.4f} {d['median_server_neighbour']:>7.3f} "
              f"{d['median_socket_neighbour']:>6.3f} {d['median_group_neighbour']:>6.3f} "
              f"{d['max_server_neighbour']:>7.3f} {d['median_packed_server']:>6.2f} "
              f"{d['max_packed_server']:>6.2f} {d['max_packed_server_with_ps']:>6.2f} "
              f"{d['simulation_file_v100_mre']:>12.3f}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    args = ap.parse_args(argv)
    shared = Path(args.shared)
    rows = pair_rows(shared)
    gpu = np.array([r["gpu"] for r in rows])
    lo, hi = simulated_slowdowns(rows)
    meas = np.array([r["measured"] for r in rows])
    held = np.array([r["held"] for r in rows])
    sim_file = np.array([r["sim_file"] for r in rows])
    scaled = np.empty_like(hi)
    figures: dict = {"n_pairs": len(rows), "n_fit": int((~held).sum()), "n_held": int(held.sum())}
    print(f"{'GPU':<6} {'n':>5} {'shipped fit':>12} {'held-out':>9} {'scale':>6} "
          f"{'scaled fit':>11} {'held-out':>9} {'sim file vs phys':>17}")  # fmt: skip
    for g in GAVEL_COLOCATION_GPUS:
        m = gpu == g
        fit_m, held_m = m & ~held, m & held

        def err(c: float, mask: np.ndarray) -> float:
            return _mre(lo[mask] + c * (hi[mask] - lo[mask]), meas[mask])

        c = float(SCALES[int(np.argmin([err(c, fit_m) for c in SCALES]))])
        scaled[m] = lo[m] + c * (hi[m] - lo[m])
        both = m & np.isfinite(sim_file)
        figures[g] = {
            "n": int(m.sum()),
            "shipped_fit": err(1.0, fit_m), "shipped_heldout": err(1.0, held_m),
            "scale": c, "scaled_fit": err(c, fit_m), "scaled_heldout": err(c, held_m),
            "simulation_vs_physical_mre": _mre(sim_file[both], meas[both]),
            "measured_median": float(np.median(meas[m])),
            "simulated_median": float(np.median(hi[m])),
        }  # fmt: skip
        f = figures[g]
        print(f"{g:<6} {f['n']:>5} {f['shipped_fit']:>12.3f} {f['shipped_heldout']:>9.3f} "
              f"{c:>6.2f} {f['scaled_fit']:>11.3f} {f['scaled_heldout']:>9.3f} "
              f"{f['simulation_vs_physical_mre']:>17.3f}")  # fmt: skip
    figures["all"] = {
        "shipped": _mre(hi, meas),
        "shipped_fit": _mre(hi[~held], meas[~held]),
        "shipped_heldout": _mre(hi[held], meas[held]),
        "scaled_fit": _mre(scaled[~held], meas[~held]),
        "scaled_heldout": _mre(scaled[held], meas[held]),
    }
    a = figures["all"]
    print(f"{'all':<6} {len(rows):>5} {a['shipped_fit']:>12.3f} {a['shipped_heldout']:>9.3f} "
          f"{'':>6} {a['scaled_fit']:>11.3f} {a['scaled_heldout']:>9.3f}")  # fmt: skip
    # each job type's own vectors (fitted on the simulation file), no catalogue mapping
    types, s_mat, p_mat, _ = fit_gavel_interference(load_gavel(shared))
    idx = {t: i for i, t in enumerate(types)}
    own = {}
    phys = load_gavel(shared, "gavel_physical_cluster_throughputs.json")
    for g in GAVEL_COLOCATION_GPUS:
        pred, got = [], []
        for (job, scale), row in phys[g].items():
            if scale != 1 or float(row.get(None, 0.0)) <= 0:
                continue
            for other, value in row.items():
                if other is None or other[1] != 1 or float(value[0]) <= 0:
                    continue
                pred.append(1.0 + float(s_mat[idx[job]] @ p_mat[idx[other[0]]]))
                got.append(float(row[None]) / float(value[0]))
        own[g] = _mre(np.array(pred), np.array(got))
    figures["own_type_vectors_on_physical_mre"] = own
    print("each Gavel job type's own vectors on the physical pairs, MRE: "
          + ", ".join(f"{g} {v:.3f}" for g, v in own.items()))  # fmt: skip
    figures["physical_refit"] = refit_figures = physical_refit_figures(shared, rows)
    print_refit(refit_figures)
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
