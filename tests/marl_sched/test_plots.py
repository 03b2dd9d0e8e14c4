"""Figures: runs evaluated at different steps are aligned, the band is a real 95 %
CI, curves never shift a series onto another's x values, bars show small gaps."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from marl_sched import plots

PNG = b"\x89PNG\r\n\x1a\n"


def test_runs_evaluated_at_different_steps_are_aligned_on_common_steps():
    a = {0: 10.0, 400: 6.0, 800: 2.0}  # evaluated every 400 steps
    b = {0: 12.0, 200: 11.0, 400: 8.0, 600: 7.0, 800: 4.0, 1000: 3.0}  # every 200, longer
    xs, values = plots.align([a, b])
    assert xs.tolist() == [0, 200, 400, 600, 800]  # 1000: only b reached it
    assert values[0].tolist() == [10.0, 8.0, 6.0, 4.0, 2.0]  # a interpolated at 200, 600
    assert values[1].tolist() == [12.0, 11.0, 8.0, 7.0, 4.0]
    with pytest.raises(ValueError):
        plots.align([a, {}])


def test_band_is_the_mean_and_a_student_t_interval(tmp_path):
    runs = [{0: 1.0, 100: 2.0}, {0: 3.0, 100: 2.0}, {0: 2.0, 50: 9.0, 100: 5.0}]
    drawn = plots.band_curves({"cfg": runs}, tmp_path / "c.png", "steps", "jct")
    xs, mean, half = drawn["cfg"]
    assert xs.tolist() == [0, 50, 100]
    np.testing.assert_allclose(mean, [2.0, (1.5 + 2.5 + 9.0) / 3, 3.0])
    at0 = np.array([1.0, 3.0, 2.0])
    expected = stats.t.ppf(0.975, 2) * at0.std(ddof=1) / np.sqrt(3)
    assert half[0] == pytest.approx(expected)
    assert half[2] > 0 and (tmp_path / "c.png").read_bytes()[:8] == PNG
    one = plots.band_curves({"x": runs[:1]}, tmp_path / "d.png", "steps", "jct")
    assert np.isnan(one["x"][2]).all()  # one run: no interval, no band


def test_bars_do_not_start_at_zero_when_differences_are_small(tmp_path):
    assert plots.y_limits([100.0, 101.7]) == pytest.approx((100.0 - 1.7 / 3, 101.7 + 1.7 / 3))
    assert plots.y_limits([10.0, 100.0]) is None  # big differences: from 0
    lo, hi = plots.y_limits([100.0, 101.7], [0.5, 0.5])
    assert lo < 99.5 and hi > 102.2  # error bars inside the axis
    plots.bars({"marl": 100.0, "ff": 101.7}, tmp_path / "b.png", "avg JCT (s)",
               errors={"marl": 0.5, "ff": 0.4}, highlight="marl")  # fmt: skip
    assert (tmp_path / "b.png").read_bytes()[:8] == PNG


def test_window_title_names_trace_window_load_and_split():
    title = plots.window_title("average JCT", "traces/philly.csv", 200, 100, 2.0, "validation")
    assert title == "average JCT — philly.csv jobs 200–299, load 2, validation split"


def test_bars_put_pathological_policies_in_a_panel_of_their_own(tmp_path):
    values = {"mlfs-rl": 0.79, "marl": 0.86, "first-fit": 1.0, "load-balance": 4.5, "random": 6.7}
    panels = plots.bars(values, tmp_path / "b.png", "IQM", outlier_ratio=2.0,
                        errors={"marl": 0.02, "random": None})  # fmt: skip
    assert panels == [["mlfs-rl", "marl", "first-fit"], ["load-balance", "random"]]
    assert plots.bars(values, tmp_path / "c.png", "IQM") == [sorted(values, key=values.get)]
    assert (tmp_path / "b.png").read_bytes()[:8] == PNG


@pytest.mark.parametrize(("lo", "hi"), [(0.7, 7.0), (0.78, 1.1), (0.5, 40.0)])
def test_log_ticks_are_plain_numbers(lo, hi):
    """No ``8×10⁻¹``, and more than the decades labelled."""
    plt = plots._figure()
    fig, ax = plt.subplots()
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    plots.log_ticks(ax.xaxis)
    fig.canvas.draw()
    shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    plt.close(fig)
    assert len(shown) >= 3, shown
    assert all(float(t) > 0 and "10^" not in t and "times" not in t for t in shown), shown


def test_interval_panels_move_pathological_policies_to_their_own_row(tmp_path):
    rows = []
    for p, v, ci in (("mlfs-rl", 0.79, 0.01), ("marl", 0.86, None), ("first-fit", 1.0, 0.002),
                     ("load-balance", 4.5, 0.2), ("random", 6.7, 0.4)):  # fmt: skip
        r = {"policy": p, "iqm_avg_jct_s": v, "iqm_avg_slowdown": v}
        for m in ("avg_jct_s", "avg_slowdown"):
            r[f"ci_low_{m}"] = None if ci is None else v - ci
            r[f"ci_high_{m}"] = None if ci is None else v + ci
        rows.append(r)
    metrics = (("avg_jct_s", "avg JCT"), ("avg_slowdown", "avg slowdown"))
    groups = plots.interval_panels(rows, metrics, tmp_path / "i.png", "title")
    assert groups == [["mlfs-rl", "marl", "first-fit"], ["load-balance", "random"]]
    assert plots.interval_panels(rows[:3], metrics, tmp_path / "j.png", "t") == [groups[0]]
    assert (tmp_path / "i.png").read_bytes()[:8] == PNG


def _twenty_policies_with_outliers() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    jcts = {f"policy-{i}": rng.lognormal(8.0, 1.5, size=300) for i in range(20)}
    jcts["policy-3"][:2] = 1e9  # two pathological jobs
    return jcts


def test_jct_cdf_lines_each_look_unlike_the_others_and_outliers_are_cut(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    jcts = _twenty_policies_with_outliers()
    fig, ax = plt.subplots()
    plots.draw_jct_cdf(ax, jcts)
    looks = [(to_hex(line.get_color()), line.get_linestyle()) for line in ax.lines]
    assert len(looks) == 20 and len(set(looks)) == 20, looks
    assert [line.get_label() for line in ax.lines] == list(jcts)
    every = np.concatenate(list(jcts.values()))
    lo, hi = ax.get_xlim()
    assert ax.get_xscale() == "log"
    assert np.percentile(every, plots.CDF_X_PERCENTILE) <= hi < every.max()
    assert lo <= every.min()
    assert "longer jobs not shown" in ax.get_xlabel()
    fig.canvas.draw()  # the decades inside the range are labelled as plain numbers
    shown = {t.get_text() for t in ax.get_xticklabels() if lo <= t.get_position()[0] <= hi}
    decades = [10**k for k in range(int(np.ceil(np.log10(lo))), int(np.floor(np.log10(hi))) + 1)]
    assert len(decades) >= 3 and {f"{d:,.0f}" if d >= 1 else f"{d:g}" for d in decades} <= shown
    plt.close(fig)
    plots.jct_cdf(jcts, tmp_path / "jct_cdf.png")
    assert (tmp_path / "jct_cdf.png").stat().st_size > 0


def test_jct_cdf_without_outliers_shows_every_job():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    plots.draw_jct_cdf(ax, {"a": [10.0, 20.0, 30.0], "b": [15.0]})
    assert ax.get_xlim()[1] >= 30.0 and "not shown" not in ax.get_xlabel()
    plt.close(fig)
