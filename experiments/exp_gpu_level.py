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
The last line is one JSON object with every figure. Nothing here chooses a policy.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from marl_sched.calibration.constants import GAVEL_COLOCATION_GPUS
from marl_sched.calibration.data import load_gavel
from marl_sched.calibration.gavel import fit_gavel_interference
from marl_sched.calibration.holdout import gavel_pair_held_out
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
    """Every physical pair: GPU, job types, simulated slowdown without and with the GPU
    level (``lo``, ``hi``), measured slowdown, held out or not, and the simulation
    file's measurement of the same pair (``sim_file``, nan if it has none)."""
    phys = load_gavel(shared, "gavel_physical_cluster_throughputs.json")
    simf = load_gavel(shared)
    rows = []
    for gpu in GAVEL_COLOCATION_GPUS:
        server = ServerTypeConfig(
            name=gpu, count=1, gpu_type=gpu, sockets=1, groups_per_socket=1, gpus_per_group=1
        )
        topo = Topology(
            TopologyConfig(
                subclusters=1, racks_per_subcluster=1, servers_per_rack=1,
                server_types=(server,), rack_oversubscription=1.0, gpu_sharing=2,
            )
        )  # fmt: skip
        perf = PerformanceModel(topo)
        no_gpu_level = PerformanceModel(topo)
        no_gpu_level.gpu_coupling = np.zeros_like(perf.gpu_coupling)
        cache: dict[tuple[str, str], tuple[float, float]] = {}
        for (own, scale), row in sorted(phys[gpu].items()):
            iso = float(row.get(None, 0.0))
            if scale != 1 or _family(own) not in GAVEL_MODELS or iso <= 0:
                continue
            for other, value in sorted(row.items(), key=lambda kv: str(kv[0])):
                if other is None or other[1] != 1 or _family(other[0]) not in GAVEL_MODELS:
                    continue
                if float(value[0]) <= 0:
                    continue
                key = (GAVEL_MODELS[_family(own)], GAVEL_MODELS[_family(other[0])])
                if key not in cache:
                    cache[key] = (_pair_slowdown(no_gpu_level, *key), _pair_slowdown(perf, *key))
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
                        "lo": cache[key][0], "hi": cache[key][1],
                        "measured": iso / float(value[0]),
                        "held": gavel_pair_held_out(own, other[0]),
                        "sim_file": sim_file,
                    }
                )  # fmt: skip
    return rows


def _mre(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - meas) / meas)) if len(meas) else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    args = ap.parse_args(argv)
    shared = Path(args.shared)
    rows = pair_rows(shared)
    gpu = np.array([r["gpu"] for r in rows])
    lo = np.array([r["lo"] for r in rows])
    hi = np.array([r["hi"] for r in rows])
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
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
