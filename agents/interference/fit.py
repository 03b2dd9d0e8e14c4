"""Fit the interference MLP on simulated co-locations and measure it: samples →
split by simulation → training with early stopping → numpy export → accuracy on
held-out and real samples → report."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.config import InterferenceConfig
from agents.interference.model import InterferenceMLP, export_model
from marl_sched.catalogue import MODEL_NAMES
from marl_sched.config import TopologyConfig
from marl_sched.interference import (
    COLOCATION_LEVELS,
    FEATURE_NAMES,
    FEATURE_SCHEMA_VERSION,
    InterferenceModel,
    Samples,
    calibration_sha256,
    generate_samples,
    real_samples,
)

#: called with (phase, done, total); phases: "samples", "train", "evaluate"
ProgressFn = Callable[[str, int, int], None]


@dataclass
class FitResult:
    """A fitted model and everything measured about it."""

    model: InterferenceModel
    report: dict[str, Any]
    test: Samples
    test_pred: np.ndarray
    real: Samples | None
    real_pred: np.ndarray | None
    history: list[dict[str, float]] = field(default_factory=list)


# --------------------------------------------------------------------------- split


def split_by_group(
    groups: np.ndarray, val_fraction: float, test_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Train / validation / test row indices, whole groups (simulations) at a time."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))
    uniq = rng.permutation(np.unique(groups))
    n_test = max(1, round(len(uniq) * test_fraction))
    n_val = max(1, round(len(uniq) * val_fraction))
    if len(uniq) < 3:  # too few simulations to hold whole ones out: split rows
        rows = rng.permutation(len(groups))
        a = max(1, round(len(rows) * test_fraction))
        b = a + max(1, round(len(rows) * val_fraction))
        return np.sort(rows[b:]), np.sort(rows[a:b]), np.sort(rows[:a])
    test_g, val_g = uniq[:n_test], uniq[n_test : n_test + n_val]
    test = np.isin(groups, test_g)
    val = np.isin(groups, val_g)
    train = ~(test | val)
    return np.flatnonzero(train), np.flatnonzero(val), np.flatnonzero(test)


# --------------------------------------------------------------------------- training


def train_mlp(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_val: np.ndarray,
    y_val: np.ndarray,
    cfg: InterferenceConfig,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[InterferenceMLP, list[dict[str, float]]]:
    """Fit ln(slowdown) by MSE with Adam; keep the best validation epoch's weights.
    ``progress(epoch, max epochs)``."""
    threads = torch.get_num_threads()
    # a 2×64 MLP gains nothing from intra-op threads, and on a shared machine they
    # thrash (a 10× slowdown was measured with other jobs running); one is also
    # bit-reproducible
    torch.set_num_threads(1)
    try:
        return _train(x_train, y_train, x_val, y_val, cfg, progress)
    finally:
        torch.set_num_threads(threads)


def _train(x_train, y_train, x_val, y_val, cfg, progress):
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    model = InterferenceMLP(cfg.hidden, cfg.activation)
    ly_train, ly_val = np.log(y_train), np.log(y_val)
    model.set_normalisation(x_train, ly_train)
    xt = torch.as_tensor(x_train, dtype=torch.float32)
    yt = torch.as_tensor(ly_train, dtype=torch.float32)
    xv = torch.as_tensor(x_val, dtype=torch.float32)
    yv = torch.as_tensor(ly_val, dtype=torch.float32)
    mu, sd = model.y_scale[0], model.y_scale[1]
    yt_n, yv_n = (yt - mu) / sd, (yv - mu) / sd
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
        opt, factor=0.5, patience=max(cfg.patience // 4, 2)
    )
    best = (float("inf"), None, 0)
    history: list[dict[str, float]] = []
    n = len(xt)
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        order = torch.randperm(n, generator=gen)
        total = 0.0
        for start in range(0, n, cfg.batch_size):
            idx = order[start : start + cfg.batch_size]
            loss = torch.mean((model.normalised(xt[idx]) - yt_n[idx]) ** 2)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        model.eval()
        with torch.no_grad():
            val = float(torch.mean((model.normalised(xv) - yv_n) ** 2))
        sched.step(val)
        history.append({"epoch": epoch, "train_loss": total / n, "val_loss": val})
        if progress is not None:
            progress(epoch, cfg.epochs)
        if val < best[0] - 1e-7:
            best = (val, {k: v.clone() for k, v in model.state_dict().items()}, epoch)
        elif epoch - best[2] >= cfg.patience:
            break
    if best[1] is not None:
        model.load_state_dict(best[1])
    model.eval()
    return model, history


# --------------------------------------------------------------------------- measuring


def relative_errors(pred: np.ndarray, actual: np.ndarray) -> np.ndarray:
    return np.abs(pred - actual) / np.abs(actual)


def error_summary(pred: np.ndarray, actual: np.ndarray) -> dict[str, float]:
    """``{"n", "mre", "p90", "median"}`` of the relative errors."""
    if len(actual) == 0:
        return {"n": 0, "mre": float("nan"), "p90": float("nan"), "median": float("nan")}
    err = relative_errors(pred, actual)
    return {
        "n": int(len(err)),
        "mre": float(err.mean()),
        "p90": float(np.percentile(err, 90)),
        "median": float(np.median(err)),
    }


def simulated_report(pred: np.ndarray, test: Samples) -> dict[str, Any]:
    """Accuracy on held-out simulated samples, overall, per model, per level."""
    out: dict[str, Any] = error_summary(pred, test.y)
    out["per_model"] = {
        name: error_summary(pred[test.model == i], test.y[test.model == i])
        for i, name in enumerate(MODEL_NAMES)
        if np.any(test.model == i)
    }
    out["per_level"] = {
        level: error_summary(pred[test.level == i], test.y[test.level == i])
        for i, level in enumerate(COLOCATION_LEVELS)
    }
    trivial = np.full(len(test.y), test.y.mean())
    out["trivial_mean_mre"] = float(relative_errors(trivial, test.y).mean())
    return out


#: what each real source measures and how it was mapped (see the loaders)
REAL_NOTES = {
    "gavel": "two single-GPU jobs sharing one GPU (Gavel, physical cluster); simulated "
    "the same way: both workers on the one GPU of a cluster with gpu_sharing 2 (same "
    "GPU, PCIe switch, socket, server). Target: isolated / co-located throughput. A "
    "co-location slowdown: compared with the model directly. The learned model's "
    "features have no GPU level (it is trained without GPU sharing), so it sees a "
    "same-group neighbour.",
    "pollux": "one job alone, spread over more nodes vs on the fewest nodes, same local "
    "batch (Pollux, 4x T4 nodes; all-reduce jobs: ring all-reduce, no PS). "
    "Not a co-location slowdown: the model's prediction (~1, no neighbours) is "
    "multiplied by the simulator's alone-time ratio, so this checks the performance "
    "model's communication term.",
    "dl2": "one PS job alone: iteration time with w workers over 1 worker at the same PS "
    "count, = speed(1) / (w speed(w)) as DL2 splits a fixed global batch (DL2, MXNet, "
    "one task per server, 92 MB/s effective NIC). Not a co-location slowdown: checked "
    "like Pollux, through the simulator's ratio with local compute / w.",
}


def real_report(pred: np.ndarray, real: Samples) -> dict[str, Any]:
    """Accuracy on real measurements per source, learned model and simulator (``pred``
    already times each row's ``reference``)."""
    out: dict[str, Any] = error_summary(pred, real.y)
    out["simulator"] = error_summary(real.simulated, real.y)
    out["notes"] = {k: v for k, v in REAL_NOTES.items() if np.any(real.source == k)}
    out["per_source"] = {}
    for src in sorted(set(real.source.tolist())):
        m = real.source == src
        out["per_source"][src] = {
            **error_summary(pred[m], real.y[m]),
            "simulator": error_summary(real.simulated[m], real.y[m]),
            "measured_median": float(np.median(real.y[m])),
            "simulated_median": float(np.median(real.simulated[m])),
            "predicted_median": float(np.median(pred[m])),
        }
    return out


def throughput(model: InterferenceModel, batch: int = 4096, seconds: float = 1.0) -> float:
    """Predictions per second of :meth:`InterferenceModel.predict` on batches of ``batch``."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((batch, model.n_features)) * model.x_std + model.x_mean).astype(
        np.float64
    )
    model.predict(x)  # warm up
    done, t0 = 0, time.perf_counter()
    while True:
        model.predict(x)
        done += batch
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return done / elapsed


def scatter_png(path: Path, result: FitResult, max_points: int = 6000) -> None:
    """Predicted vs actual slowdown, log-log, simulated test and real samples."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 5.5), dpi=100)
    rng = np.random.default_rng(0)
    t = result.test
    keep = rng.permutation(len(t.y))[:max_points]
    ax.scatter(
        t.y[keep],
        result.test_pred[keep],
        s=3,
        alpha=0.35,
        label="simulated (held out)",
        rasterized=True,
        color="tab:blue",
    )
    if result.real is not None and result.real_pred is not None:
        colours = {"gavel": "tab:red", "pollux": "tab:green", "dl2": "tab:orange"}
        for src in sorted(set(result.real.source.tolist())):
            m = result.real.source == src
            ax.scatter(
                result.real.y[m],
                result.real_pred[m],
                s=5,
                alpha=0.5,
                marker="x",
                label=f"real: {src}",
                rasterized=True,
                color=colours.get(src),
            )
    values = [t.y, result.test_pred]
    if result.real is not None and result.real_pred is not None:
        values += [result.real.y, result.real_pred]
    lo = min(0.5, *(float(np.min(v)) for v in values if len(v)))
    hi = max(2.0, *(float(np.max(v)) for v in values if len(v)))
    ax.plot([lo, hi], [lo, hi], color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("actual slowdown (simulator / measured)")
    ax.set_ylabel("predicted slowdown")
    sim = result.report["simulated"]
    ax.set_title(f"interference model: simulated MRE {sim['mre']:.3f}, n={sim['n']}")
    ax.legend(loc="upper left", fontsize=8, markerscale=3)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


# --------------------------------------------------------------------------- the fit


def fit_interference(
    cfg: InterferenceConfig,
    topologies: Sequence[TopologyConfig] = (),
    *,
    real_root: Path | None = None,
    progress: ProgressFn | None = None,
    source: dict[str, Any] | None = None,
) -> FitResult:
    """Generate samples, fit, export and measure the interference model.

    Args:
        cfg: the interference config.
        topologies: fixed topologies mixed into sample generation (the experiment's).
        real_root: folder holding ``profiles/`` (None or missing = no real evaluation).
        progress: called with (phase, done, total).
        source: provenance recorded in the model's metadata (command, config path).
    """
    t0 = time.perf_counter()
    sha = calibration_sha256()
    report_progress = progress or (lambda phase, done, total: None)
    samples = generate_samples(
        cfg.samples,
        cfg.seed,
        topologies=list(topologies) or None,
        topology_fraction=cfg.config_topology_fraction,
        progress=lambda k: report_progress("samples", k, cfg.samples),
    )
    t_samples = time.perf_counter() - t0
    train_idx, val_idx, test_idx = split_by_group(
        samples.group, cfg.val_fraction, cfg.test_fraction, cfg.seed
    )
    tr, va, te = samples.subset(train_idx), samples.subset(val_idx), samples.subset(test_idx)
    t1 = time.perf_counter()
    module, history = train_mlp(
        tr.x, tr.y, va.x, va.y, cfg, lambda e, n: report_progress("train", e, n)
    )
    t_train = time.perf_counter() - t1
    metadata = {
        "config": {**asdict(cfg), "hidden": list(cfg.hidden)},
        "n_train": len(tr),
        "n_val": len(va),
        "n_test": len(te),
        "epochs_run": len(history),
        "best_epoch": int(np.argmin([h["val_loss"] for h in history]) + 1) if history else 0,
        "feature_schema_version": FEATURE_SCHEMA_VERSION,
        "torch_version": torch.__version__,
        **(source or {}),
    }
    model = export_model(module, sha, metadata)
    report_progress("evaluate", 0, 2)
    test_pred = model.predict(te.x)
    real = None
    real_pred = None
    report: dict[str, Any] = {
        "feature_schema_version": FEATURE_SCHEMA_VERSION,
        "n_features": len(FEATURE_NAMES),
        "calibration_sha256": sha,
        "n_train": len(tr),
        "n_val": len(va),
        "n_test": len(te),
        "simulated": simulated_report(test_pred, te),
    }
    if real_root is not None and (real_root / "profiles").is_dir():
        real = real_samples(real_root)
        real_pred = model.predict(real.x) * real.reference
        report["real"] = real_report(real_pred, real)
    else:
        report["real"] = {"n": 0, "mre": None, "p90": None, "note": "no real data found"}
    report_progress("evaluate", 1, 2)
    report["throughput_predictions_per_s"] = throughput(model)
    report["throughput_batch"] = 4096
    report["epochs_run"] = metadata["epochs_run"]
    report["best_epoch"] = metadata["best_epoch"]
    report["config"] = metadata["config"]
    report["wall_s"] = {
        "samples": t_samples,
        "train": t_train,
        "total": time.perf_counter() - t0,
    }
    report.update({k: v for k, v in (source or {}).items() if k not in report})
    model.metadata["report_summary"] = {
        "simulated_mre": report["simulated"]["mre"],
        "simulated_p90": report["simulated"]["p90"],
        "real_mre": report["real"]["mre"],
        "real_p90": report["real"]["p90"],
        "throughput_predictions_per_s": report["throughput_predictions_per_s"],
        "wall_s": report["wall_s"]["total"],
    }
    report_progress("evaluate", 2, 2)
    return FitResult(model, report, te, test_pred, real, real_pred, history)


def report_json(report: dict[str, Any]) -> str:
    """The report as JSON text (NaN written as null)."""

    def clean(v: Any) -> Any:
        if isinstance(v, float) and not np.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        return v

    return json.dumps(clean(report), indent=1, sort_keys=True)
