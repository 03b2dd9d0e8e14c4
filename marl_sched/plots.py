"""Plots people would rather look at than read: JCT CDFs and bar charts (PNG)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from marl_sched.metrics import atomic_write_bytes


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str | Path) -> None:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())


def jct_cdf(jcts: Mapping[str, Sequence[float]], path: str | Path, title: str = "") -> None:
    """One CDF line of job completion times per policy (log x axis)."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, values in jcts.items():
        v = np.sort(np.asarray(values, dtype=float))
        if len(v) == 0:
            continue
        ax.plot(np.maximum(v, 1e-3), np.arange(1, len(v) + 1) / len(v), label=name, lw=1.6)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (s, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.0)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title or "JCT CDF")
    _save(fig, path)
    plt.close(fig)


def bars(
    values: Mapping[str, float],
    path: str | Path,
    ylabel: str,
    title: str = "",
    highlight: str | None = None,
) -> None:
    """A bar per policy, sorted ascending, value printed on each bar."""
    plt = _figure()
    items = sorted(values.items(), key=lambda kv: kv[1])
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(items) + 2), 4))
    colors = ["#d95f02" if k == highlight else "#1b9e77" for k, _ in items]
    rects = ax.bar([k for k, _ in items], [v for _, v in items], color=colors)
    for r, (_, v) in zip(rects, items, strict=True):
        ax.annotate(
            f"{v:,.0f}" if v >= 100 else f"{v:.3g}",
            (r.get_x() + r.get_width() / 2, r.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.tick_params(axis="x", rotation=30)
    ax.grid(axis="y", alpha=0.3)
    _save(fig, path)
    plt.close(fig)


def curve(
    xs: Sequence[float],
    ys: Mapping[str, Sequence[float]],
    path: str | Path,
    xlabel: str,
    ylabel: str,
    title: str = "",
) -> None:
    """Lines over a shared x axis (learning curves, scaling)."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, y in ys.items():
        ax.plot(list(xs)[: len(y)], list(y), marker="o", ms=3, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, path)
    plt.close(fig)
