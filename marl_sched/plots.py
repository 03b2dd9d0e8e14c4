"""Plots people would rather look at than read: JCT CDFs, bar charts with error bars,
curves, and learning curves with a 95 % confidence band over seeds (PNG)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from marl_sched.files import atomic_write_bytes


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


def _finish_lines(plt, fig, ax, path, xlabel: str, ylabel: str, title: str) -> None:
    """Label, grid, legend, write and close a line plot (curve, band_curves)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, path)
    plt.close(fig)


#: the JCT CDF's line colours (matplotlib's tab10) and styles, cycled together: policy
#: ``i`` gets colour ``i mod 10`` and style ``i mod 4``, so up to lcm(10, 4) = 20
#: policies each look unlike every other, and neighbours differ in both
CDF_COLOURS = tuple(f"C{i}" for i in range(10))
CDF_STYLES = ("-", "--", ":", "-.")
#: the JCT CDF's x axis ends at this percentile of every policy's JCTs together, so a
#: few pathological jobs do not squash the curves into the left of the figure
CDF_X_PERCENTILE = 99.5


def cdf_style(i: int) -> tuple[str, str]:
    """(colour, line style) of the ``i``-th line of a JCT CDF (:data:`CDF_COLOURS`)."""
    return CDF_COLOURS[i % len(CDF_COLOURS)], CDF_STYLES[i % len(CDF_STYLES)]


def draw_jct_cdf(ax, jcts: Mapping[str, Sequence[float]], title: str = "") -> None:
    """On ``ax``: one JCT CDF per policy (:func:`cdf_style`), log x axis, cut at the
    :data:`CDF_X_PERCENTILE`-th percentile when outliers would squash it."""
    pooled = []
    for i, (name, values) in enumerate(jcts.items()):
        v = np.sort(np.maximum(np.asarray(values, dtype=float), 1e-3))
        if len(v) == 0:
            continue
        pooled.append(v)
        colour, style = cdf_style(i)
        ax.plot(v, np.arange(1, len(v) + 1) / len(v), label=name, lw=1.6, color=colour, ls=style)
    ax.set_xscale("log")
    xlabel = "job completion time (s, log scale)"
    if pooled:
        every = np.concatenate(pooled)
        lo, top = float(every.min()), float(every.max())
        hi = float(np.percentile(every, CDF_X_PERCENTILE))
        if top <= 2 * hi:  # no outliers to speak of: every job shown
            hi = top
        else:
            xlabel = (
                f"job completion time (s, log scale; to the {CDF_X_PERCENTILE:g}th percentile, "
                f"{hi:,.0f} s: {int(np.sum(every > hi)):,} longer jobs not shown)"
            )
        hi = max(hi, lo * 10**0.5)  # at least half a decade wide
        ax.set_xlim(lo / 10**0.05, hi * 10**0.05)
        _decade_ticks(ax.xaxis)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.0)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="lower right", ncol=2 if len(jcts) > 10 else 1)
    ax.set_title(title or "JCT CDF")


def _decade_ticks(axis) -> None:
    """Every decade of a log axis labelled as a plain number (``1,000``); an axis of
    under two decades gets :func:`log_ticks`' 1-2-5 steps instead."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    lo, hi = sorted(axis.get_view_interval())
    if hi / max(lo, 1e-12) < 100:
        log_ticks(axis)
        return
    axis.set_major_locator(LogLocator(base=10, subs=(1.0,)))
    axis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}" if x >= 1 else f"{x:g}"))
    axis.set_minor_locator(LogLocator(base=10, subs=tuple(np.arange(2.0, 10.0))))
    axis.set_minor_formatter(NullFormatter())


def jct_cdf(jcts: Mapping[str, Sequence[float]], path: str | Path, title: str = "") -> None:
    """``jct_cdf.png``: :func:`draw_jct_cdf` written to ``path``."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    draw_jct_cdf(ax, jcts, title)
    _save(fig, path)
    plt.close(fig)


def bars(
    values: Mapping[str, float],
    path: str | Path,
    ylabel: str,
    title: str = "",
    highlight: str | None = None,
    errors: Mapping[str, float | None] | None = None,
    outlier_ratio: float | None = None,
) -> list[list[str]]:
    """A bar per policy, sorted ascending, value on each bar; returns the names drawn
    in each panel. ``errors``: half-widths drawn as error bars (None: none); y starts near
    the smallest bar when the differences are small (:func:`y_limits`); bars above
    ``outlier_ratio`` × the smallest go to a second panel."""
    plt = _figure()
    items = sorted(values.items(), key=lambda kv: kv[1])
    low = min(v for _, v in items)
    cut = [kv for kv in items if outlier_ratio and low > 0 and kv[1] > outlier_ratio * low]
    panels = [[kv for kv in items if kv not in cut]] + ([cut] if cut else [])
    widths = [max(3.0, 0.8 * len(p) + 1.2) for p in panels]
    fig, axes = plt.subplots(
        1, len(panels), figsize=(sum(widths) + 0.8, 4.2), squeeze=False,
        gridspec_kw={"width_ratios": widths},
    )  # fmt: skip
    for k, (ax, panel) in enumerate(zip(axes[0], panels, strict=True)):
        _bar_panel(ax, panel, errors, highlight, ylabel if k == 0 else "")
        if k == 1:
            ax.set_title(f"more than {outlier_ratio:g}× the best (own axis)", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return [[k for k, _ in panel] for panel in panels]


def _bar_panel(ax, items, errors, highlight, ylabel: str) -> None:
    colors = ["#d95f02" if k == highlight else "#1b9e77" for k, _ in items]
    err = [float((errors or {}).get(k) or 0.0) for k, _ in items]
    rects = ax.bar([k for k, _ in items], [v for _, v in items], color=colors,
                   yerr=err if errors else None, capsize=4 if errors else 0)  # fmt: skip
    for r, (_, v), e in zip(rects, items, err, strict=True):
        ax.annotate(
            f"{v:,.0f}" if v >= 100 else f"{v:.3g}",
            (r.get_x() + r.get_width() / 2, r.get_height() + e),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    limits = y_limits([v for _, v in items], err)
    if limits is not None:
        ax.set_ylim(*limits)
        ylabel = f"{ylabel} (axis not from 0)" if ylabel else "(axis not from 0)"
    else:  # from 0 (a wide interval is cut there), room above for the labels
        ax.set_ylim(0, 1.08 * max(v + e for (_, v), e in zip(items, err, strict=True)))
    ax.set_ylabel(ylabel)
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.0f}" if y >= 100 else f"{y:g}"))
    ax.tick_params(axis="x", rotation=35)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    ax.grid(axis="y", alpha=0.3)


def log_ticks(axis) -> None:
    """Readable ticks on a log axis: plain numbers (0.8, 1, 2, 5 — never ``8×10⁻¹``) at
    1-2-5 steps, or at every integer multiple when the axis spans less than a decade."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    lo, hi = sorted(axis.get_view_interval())
    subs = (1.0, 2.0, 5.0) if hi / max(lo, 1e-12) > 10 else tuple(np.arange(1.0, 10.0))
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    axis.set_minor_formatter(NullFormatter())


def y_limits(values: Sequence[float], errors: Sequence[float] = ()) -> tuple[float, float] | None:
    """Y limits that show small differences between positive bars: None (from 0) unless
    the lowest bar is above 80 % of the highest; then a third of the span as margin."""
    if not values:
        return None
    errs = list(errors) or [0.0] * len(values)
    lo = min(v - e for v, e in zip(values, errs, strict=True))
    hi = max(v + e for v, e in zip(values, errs, strict=True))
    if lo <= 0 or min(values) < 0.8 * max(values):
        return None
    span = max(hi - lo, 1e-9 * hi)
    return max(0.0, lo - span / 3), hi + span / 3


def window_title(what: str, trace: str, start: int, jobs: int | None, load: float | None,
                 split: str | None = None) -> str:  # fmt: skip
    """``what — <trace> jobs a–b, load L, <split> split``: the title of a comparison."""
    end = "end" if jobs is None else start + jobs - 1
    shown_load = 1.0 if load is None else load
    parts = [f"{Path(str(trace)).name} jobs {start}–{end}", f"load {shown_load:g}"]
    if split:
        parts.append(f"{split} split")
    return f"{what} — {', '.join(parts)}"


def align(runs: Sequence[Mapping[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Runs measured at different x values on common ones (inside the range all cover,
    linearly interpolated). Returns ``(xs (n,), values (runs, n))``; ValueError for an
    empty run."""
    if not runs or any(len(r) == 0 for r in runs):
        raise ValueError("align: every run needs at least one point")
    lo = max(min(r) for r in runs)
    hi = min(max(r) for r in runs)
    xs = np.array(sorted({x for r in runs for x in r if lo <= x <= hi}), dtype=float)
    values = np.empty((len(runs), len(xs)))
    for i, r in enumerate(runs):
        rx = np.array(sorted(r), dtype=float)
        values[i] = np.interp(xs, rx, [r[x] for x in sorted(r)])
    return xs, values


def mean_ci(values: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Mean over runs (axis 0) and the half-width of its ``level`` Student-t
    confidence interval (NaN with one run: one sample gives no interval)."""
    from scipy import stats

    n = values.shape[0]
    mean = values.mean(axis=0)
    if n < 2:
        return mean, np.full_like(mean, np.nan)
    sem = values.std(axis=0, ddof=1) / np.sqrt(n)
    return mean, stats.t.ppf(0.5 + level / 2, n - 1) * sem


def band_curves(
    groups: Mapping[str, Sequence[Mapping[float, float]]],
    path: str | Path,
    xlabel: str,
    ylabel: str,
    title: str = "",
) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Learning curves: per group, the mean over its runs and a 95 % band on the steps
    :func:`align` gives. Returns ``{group: (xs, mean, half-width)}``."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(7, 4))
    drawn = {}
    for name, runs in groups.items():
        xs, values = align(runs)
        mean, half = mean_ci(values)
        drawn[name] = (xs, mean, half)
        # a band needs two runs: one run is drawn as a line and says so
        label = (
            f"{name} (mean of {len(runs)} runs, 95 % CI)"
            if len(runs) > 1
            else (f"{name} (1 run: no band)")
        )
        (line,) = ax.plot(xs, mean, marker="o", ms=3, label=label)
        if len(runs) > 1:
            ax.fill_between(xs, mean - half, mean + half, color=line.get_color(), alpha=0.2)
    _finish_lines(plt, fig, ax, path, xlabel, ylabel, title)
    return drawn


def interval_panels(
    summary: Sequence[Mapping[str, float | None]],
    metrics: Sequence[tuple[str, str]],
    path: str | Path,
    title: str,
    labels: Mapping[str, str] | None = None,
    outlier_ratio: float = 2.0,
) -> list[list[str]]:
    """Interval estimates, one log-x panel per metric: each policy's IQM as a tick and
    its 95 % interval as a band (none when ``ci_low_<m>`` is None); policies above
    ``outlier_ratio`` in a lower row. ``summary``: rows with ``policy``, ``iqm_<m>``,
    ``ci_low_<m>``, ``ci_high_<m>``. Returns the policies of each row."""
    plt = _figure()
    first = metrics[0][0]
    order = [str(r["policy"]) for r in summary]
    by = {str(r["policy"]): r for r in summary}
    bad = [p for p in order if (by[p][f"iqm_{first}"] or 0) > outlier_ratio]
    groups = [[p for p in order if p not in bad]] + ([bad] if bad else [])
    heights = [max(len(g), 1) for g in groups]
    fig, axes = plt.subplots(
        len(groups), len(metrics), squeeze=False, sharey="row",
        figsize=(3.2 * len(metrics), 0.42 * sum(heights) + 1.6 + 0.6 * len(groups)),
        gridspec_kw={"height_ratios": heights},
    )  # fmt: skip
    for row, group in zip(axes, groups, strict=True):
        for ax, (m, label) in zip(row, metrics, strict=True):
            for i, p in enumerate(group):
                r = by[p]
                if r.get(f"ci_low_{m}") is not None:
                    ax.plot([r[f"ci_low_{m}"], r[f"ci_high_{m}"]], [i, i], lw=6, alpha=0.5,
                            color="#1b9e77", solid_capstyle="butt")  # fmt: skip
                ax.plot([r[f"iqm_{m}"]], [i], "k|", ms=12)
            if group is groups[0]:  # the reference; the lower row keeps its own range
                ax.axvline(1.0, color="grey", lw=0.8, ls="--")
            ax.set_xscale("log")
            ax.margins(x=0.08)
            ax.autoscale_view()
            log_ticks(ax.xaxis)
            ax.set_yticks(range(len(group)), [(labels or {}).get(p, p) for p in group])
            ax.set_ylim(len(group) - 0.5, -0.5)  # best on top
            ax.grid(axis="x", alpha=0.3)
            if group is groups[0]:
                ax.set_title(f"IQM {label}", fontsize=9)
            else:
                ax.set_title(f"{label}: above {outlier_ratio:g}× (own axis)", fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return groups
