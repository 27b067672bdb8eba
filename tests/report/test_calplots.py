"""The figures of the extra measures and the binned reliability diagram's
gap and shared histogram axis, checked on what is drawn."""
import numpy as np
import pytest
from matplotlib.patches import Rectangle

from bench.calib.measures.functions import smooth_ece
from bench.report.plotting import calplots, plots


def _panels():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.5, 1.0, 400)
    over = np.stack([conf, 1 - conf], 1)
    over_labels = np.where(rng.uniform(size=400) < conf - 0.3, 0, 1)  # over-confident
    few = over[:50]
    under_labels = np.zeros(50, dtype=np.int64)  # every one right: under-confident
    return [("over", over, over_labels), ("under", few, under_labels)]


def _bars(ax):
    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() > 0]


def test_gap_bars_are_half_width_and_go_both_ways_over_a_full_accuracy_bar():
    fig = plots.reliability_figure(_panels(), "t")
    main_axes = fig.axes[0::2]
    for ax, sign in zip(main_axes, (+1, -1)):
        bars = _bars(ax)
        widths = sorted({round(b.get_width(), 6) for b in bars})
        assert widths == [round(1 / 30, 6), round(1 / 15, 6)]  # gap: half an accuracy bar
        gaps = [b for b in bars if round(b.get_width(), 6) == round(1 / 30, 6)]
        heights = np.array([b.get_height() for b in gaps])
        assert np.all(np.sign(heights[heights != 0]) == sign)
        # the accuracy bars are drawn below the gaps and the gaps leave a margin on each side
        full = [b for b in bars if b not in gaps]
        assert max(b.zorder for b in full) < min(b.zorder for b in gaps)


def test_sample_histograms_share_one_y_axis():
    fig = plots.reliability_figure(_panels(), "t")
    hist_axes = fig.axes[1::2]
    limits = {ax.get_ylim() for ax in hist_axes}
    assert len(limits) == 1
    top = max(max(b.get_height() for b in _bars(ax)) for ax in hist_axes)
    assert limits.pop()[1] == pytest.approx(top * 1.05)


def test_smooth_data_reports_relplots_smooth_ece_and_skips_empty_confidences():
    _, probs, labels = _panels()[0]
    d = calplots.smooth_data(probs, labels)
    assert d["smece"] == pytest.approx(smooth_ece(probs, labels), abs=1e-9)
    conf = probs.max(axis=1)  # uniform on [0.5, 1]: the curve spans it and no more
    drawn = d["mesh"][~np.isnan(d["mu"])]
    assert conf.min() - 0.03 < drawn.min() < conf.min() + 0.01
    assert drawn.max() == pytest.approx(1.0, abs=0.01)
    fig = calplots.smooth_reliability_figure(_panels(), "t")
    assert len(fig.axes) == 4 and len({ax.get_ylim() for ax in fig.axes[1::2]}) == 1


def _narrow_panel(seed=0, n=500, k=10):
    """Confidences uniform in [0.11, 0.33] (10 classes), every other one right."""
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.11, 0.33, n)
    probs = np.repeat(((1 - conf) / (k - 1))[:, None], k, axis=1)
    probs[:, 0] = conf
    labels = np.where(np.arange(n) % 2 == 0, 0, 1 + np.arange(n) % (k - 1))
    return probs, labels


def test_smooth_curve_is_drawn_only_where_confidences_lie():
    """relplot's bandwidth spreads its curve and density well beyond [0.11,
    0.33]; neither the curve nor its over/under-confident patches may leave
    about [0.05, 0.40]."""
    from matplotlib.collections import PolyCollection

    probs, labels = _narrow_panel()
    d = calplots.smooth_data(probs, labels)
    drawn = d["mesh"][~np.isnan(d["mu"])]
    assert drawn.min() >= 0.05 and drawn.max() <= 0.40 and drawn.size > 20
    fig = calplots.smooth_reliability_figure([("narrow", probs, labels)], "t")
    ax = fig.axes[0]
    xs = np.concatenate([ln.get_xdata()[np.isfinite(ln.get_ydata())] for ln in ax.lines
                         if ln.get_label() == "smoothed accuracy"])
    assert xs.min() >= 0.05 and xs.max() <= 0.40
    patches = [c for c in ax.collections if isinstance(c, PolyCollection)]
    verts = np.concatenate([p.vertices for c in patches for p in c.get_paths()])
    assert verts[:, 0].min() >= 0.05 and verts[:, 0].max() <= 0.40


def test_a_lone_confidence_far_from_the_rest_draws_no_curve_there():
    probs, labels = _narrow_panel(n=1000)
    probs[0] = np.r_[0.9, np.full(9, 0.1 / 9)]  # one sample at 0.9: 0.1% of them
    drawn = calplots.smooth_data(probs, labels)["mesh"]
    drawn = drawn[~np.isnan(calplots.smooth_data(probs, labels)["mu"])]
    assert drawn.max() <= 0.40
    assert calplots.populated(np.array([0.2, 0.9]), probs.max(axis=1)).tolist() == [True,
                                                                                    False]


class _G:
    def __init__(self, per_bins):
        self.values = {f"ece{n}": v for n, v in per_bins.items()}


def test_bin_sensitivity_is_the_mean_and_population_std_over_seeds():
    g = _G({5: [0.1, 0.3], 10: [0.2, 0.2], 15: [0.4, 0.0], 20: [0.5], 30: [0.6]})
    data = calplots.bin_sensitivity([("A", g)])
    assert list(data["bins"]) == [5, 10, 15, 20, 30]
    assert list(data["ece_mean"]) == pytest.approx([0.2, 0.2, 0.2, 0.5, 0.6])
    assert list(data["ece_std"]) == pytest.approx([0.1, 0.0, 0.2, 0.0, 0.0])
    fig = calplots.bin_sensitivity_figure(data, "t")
    (line,) = fig.axes[0].lines[:1]
    assert list(line.get_ydata()) == pytest.approx([20, 20, 20, 50, 60])


def test_a_one_sample_panel_is_drawn_empty_not_an_error():
    d = calplots.smooth_data(np.array([[0.7, 0.3]]), np.array([0]))
    assert np.isnan(d["mu"]).all() and d["gap"] == pytest.approx(-0.3)
    calplots.smooth_reliability_figure([("one", np.array([[0.7, 0.3]]), np.array([0]))], "t")
