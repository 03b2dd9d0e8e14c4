"""Learned interference model benchmark: accuracy and serving speed.

    python experiments/bench_interference.py [--quick] [--model P]

1. ``accuracy``: the shipped model (``checkpoints/interference/model.npz``) on fresh
   simulated co-locations (a seed the fit never used, random topologies and the
   default config's), MRE and p90 relative error overall and per co-location level;
   and on the real measurements of ``../shared/data/profiles`` per source, next to
   the simulator's own error on them.
2. ``throughput``: ``InterferenceModel.predict`` predictions/s at batch sizes 1, 64
   and 4096, and ``candidate_features`` rows/s (what the environment's reward pays
   per tried placement).

``--quick`` uses 3,000 fresh samples instead of 20,000. Prints a table and, as its
last line, one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
FRESH_SEED = 20_260_001  # never used by a fit


def _errors(pred: np.ndarray, actual: np.ndarray) -> dict:
    if len(actual) == 0:
        return {"n": 0, "mre": None, "p90": None}
    err = np.abs(pred - actual) / np.abs(actual)
    return {"n": int(len(err)), "mre": float(err.mean()), "p90": float(np.percentile(err, 90))}


def _rate(fn, items: int, seconds: float = 0.5) -> float:
    fn()
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        done += items
    return done / (time.perf_counter() - t0)


def accuracy(model, n: int) -> dict:
    from marl_sched import interference as itf
    from marl_sched.config import load_config

    topo = load_config(REPO / "configs" / "default.yaml").topology
    t0 = time.perf_counter()
    fresh = itf.generate_samples(n, FRESH_SEED, [topo], topology_fraction=0.25)
    gen_s = time.perf_counter() - t0
    pred = model.predict(fresh.x)
    out = {"simulated": _errors(pred, fresh.y), "samples_per_s": n / gen_s}
    out["per_level"] = {
        name: _errors(pred[fresh.level == i], fresh.y[fresh.level == i])
        for i, name in enumerate(itf.COLOCATION_LEVELS)
    }
    trivial = np.full(len(fresh.y), fresh.y.mean())
    out["trivial_mean_mre"] = _errors(trivial, fresh.y)["mre"]
    if (SHARED / "profiles").is_dir():
        real = itf.real_samples(SHARED)
        rp = model.predict(real.x) * real.reference
        out["real"] = _errors(rp, real.y)
        out["real_simulator"] = _errors(real.simulated, real.y)
        out["real_per_source"] = {}
        for src in sorted(set(real.source.tolist())):
            m = real.source == src
            out["real_per_source"][src] = {
                "model": _errors(rp[m], real.y[m]),
                "simulator": _errors(real.simulated[m], real.y[m]),
            }
    return out


def throughput(model) -> dict:
    from marl_sched import interference as itf
    from marl_sched.jobs import Job
    from marl_sched.simulator import Simulator
    from marl_sched.topology import Topology

    rng = np.random.default_rng(0)
    out = {}
    for batch in (1, 64, 4096):
        x = rng.standard_normal((batch, model.n_features)) * model.x_std + model.x_mean
        out[f"predict_per_s_batch_{batch}"] = _rate(lambda x=x: model.predict(x), batch)
    # features of hypothetical placements on a half-busy default-config cluster
    from marl_sched.config import load_config
    from marl_sched.policies import make_policy

    cfg = load_config(REPO / "configs" / "default.yaml")
    topo = Topology.from_config(cfg.topology)
    jobs = [Job(i, f"j{i}", "resnet-50", 4, 1, 1e9, 0.0, 1.0) for i in range(40)]
    sim = Simulator(topo, jobs)
    pol = make_policy("random")
    pol.reset(topo, 0)
    for _ in range(40):
        job = sim.next_decision()
        sim.apply(pol.place(job, sim.view()))
    view = sim.view()
    new = Job(999, "new", "vgg-16", 4, 1, 1e6, 0.0, 1.0)
    free = np.flatnonzero(np.asarray(view.group_free) > 0)
    cands_w = [tuple(int(g) for g in rng.choice(free, 4)) for _ in range(64)]
    cands_p = [(w[0],) for w in cands_w]
    out["candidate_features_per_s"] = _rate(
        lambda: itf.candidate_features(view, new, cands_w, cands_p), len(cands_w)
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3,000 fresh samples")
    parser.add_argument("--model", help="model file (default: the shipped one)")
    args = parser.parse_args(argv)

    from marl_sched import interference as itf
    from marl_sched.errors import InputError

    path = Path(args.model) if args.model else itf.default_model_path()
    try:
        model = itf.InterferenceModel.load(path)
    except InputError as exc:
        print(f"bench_interference: {exc}", file=sys.stderr)
        return 2
    stale = model.calibration_sha256 != itf.calibration_sha256()
    n = 3000 if args.quick else 20000
    acc = accuracy(model, n)
    thr = throughput(model)

    def f(v, spec=".3f"):
        return "-" if v is None else format(v, spec)

    print(f"model: {path}{'  (WARNING: fitted on another calibration)' if stale else ''}")
    print(f"\naccuracy on {n} fresh simulated samples (seed {FRESH_SEED})")
    print(f"{'set':<22}{'n':>8}{'MRE':>9}{'p90':>9}")
    rows = [("simulated, all", acc["simulated"])]
    rows += [(f"  level {k}", v) for k, v in acc["per_level"].items()]
    if "real" in acc:
        rows.append(("real, all (model)", acc["real"]))
        rows.append(("real, all (simulator)", acc["real_simulator"]))
        for src, v in acc["real_per_source"].items():
            rows.append((f"  {src} (model)", v["model"]))
            rows.append((f"  {src} (simulator)", v["simulator"]))
    for name, e in rows:
        print(f"{name:<22}{e['n']:>8}{f(e['mre']):>9}{f(e['p90']):>9}")
    print(f"trivial mean predictor MRE (simulated): {f(acc['trivial_mean_mre'])}")
    print("\nthroughput")
    for k, v in thr.items():
        print(f"  {k:<32}{v:>14,.0f}")
    figures = {
        "model": str(path),
        "calibration_matches": not stale,
        "quick": bool(args.quick),
        "n_fresh": n,
        "simulated_mre": acc["simulated"]["mre"],
        "simulated_p90": acc["simulated"]["p90"],
        "per_level_mre": {k: v["mre"] for k, v in acc["per_level"].items()},
        "trivial_mean_mre": acc["trivial_mean_mre"],
        "real_mre": acc.get("real", {}).get("mre"),
        "real_p90": acc.get("real", {}).get("p90"),
        "real_simulator_mre": acc.get("real_simulator", {}).get("mre"),
        "real_per_source_mre": {
            k: {"model": v["model"]["mre"], "simulator": v["simulator"]["mre"]}
            for k, v in acc.get("real_per_source", {}).items()
        },
        "samples_generated_per_s": acc["samples_per_s"],
        **thr,
    }
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
