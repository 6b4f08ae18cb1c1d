"""repro.analysis.plots: each figure shows the data it is given, with labelled axes and n in the title; files are stable."""

from __future__ import annotations

import struct
import warnings
import xml.etree.ElementTree as ET

import matplotlib
import numpy as np
import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.font_manager import FontProperties

from repro.analysis import agreement as sa, plots
from repro.errors import DataError, ReproWarning


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(3)
    chosen = np.round(rng.normal(7.5, 1.2, 37).clip(1, 10) * 2) / 2
    rejected = np.round(rng.normal(5.5, 1.8, 37).clip(1, 10) * 2) / 2
    return chosen, rejected


def _labelled(fig, n: int):
    ax = fig.axes[0]
    assert f"n = {n:,}" in ax.get_title()
    assert ax.get_ylabel()
    return ax


def test_score_distributions(small):
    ax = _labelled(plots.score_distributions(*small), 37)
    assert ax.get_xlabel() == "score"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["score_chosen", "score_rejected"]
    assert len(ax.lines) == 2  # one KDE per score


def test_score_ecdf_is_the_fraction_of_rows_at_or_below(small):
    ax = _labelled(plots.score_ecdf(*small), 37)
    curves = []
    for line in ax.lines:
        x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
        keep = np.isfinite(x)
        curves.append(dict(zip(x[keep], y[keep])))
    for scores in small:  # each score's ECDF is one of the lines, exact at every distinct value
        expected = {v: np.mean(scores <= v) for v in np.unique(scores)}
        assert any(c.keys() == expected.keys() and all(np.isclose(c[v], expected[v]) for v in c) for c in curves)


def test_chosen_vs_rejected_scatter_and_diagonal(small):
    ax = _labelled(plots.chosen_vs_rejected(*small), 37)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("score_chosen", "score_rejected")
    # ratings repeat on their grid: one marker per pair of values, its area growing with its rows (at alpha 0.5, a
    # point of 2 rows looked as one of 200)
    pairs, rows = np.unique(np.column_stack(small), axis=0, return_counts=True)
    assert rows.max() > 1
    points = [c for c in ax.collections if isinstance(c, PathCollection)][0]
    shown = {tuple(xy): size for xy, size in zip(points.get_offsets().tolist(), points.get_sizes())}
    assert shown.keys() == {tuple(xy) for xy in pairs.tolist()}
    # few rows: areas in proportion to them (2 rows had been drawn 22 times the area of 1)
    assert all(shown[tuple(xy)] == 14 * n for xy, n in zip(pairs.tolist(), rows)) and rows.max() * 14 <= 320
    assert [t.get_text() for t in ax.get_legend().get_texts()][:2] == ["1 row", f"{rows.max()} rows"]
    diagonal = [line for line in ax.lines if line.get_label() == "y = x (tie)"][0]
    assert np.array_equal(diagonal.get_xdata(), diagonal.get_ydata())
    assert points.get_zorder() > diagonal.get_zorder()  # a tie's marker above the line's dashes


def test_hexbin_when_large():
    rng = np.random.default_rng(0)
    n = plots.HEXBIN_ABOVE + 500
    chosen, rejected = rng.normal(size=n), rng.normal(size=n)
    ax = _labelled(plots.chosen_vs_rejected(chosen, rejected), n)
    hexes = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(hexes) == 1 and hexes[0].get_array().sum() == n  # every row falls in one hexagon
    assert not any(isinstance(c, PathCollection) for c in ax.collections)


def test_margin_distribution_counts_every_row_and_marks_zero(small):
    margin = small[0] - small[1]
    ax = _labelled(plots.margin_distribution(margin), 37)
    assert sum(p.get_height() for p in ax.patches) == 37
    zero = [line for line in ax.lines if line.get_label() == "margin = 0 (tie)"][0]
    assert list(zero.get_xdata()) == [0.0, 0.0]
    assert "score_chosen − score_rejected" in ax.get_xlabel()


def test_continuous_scores_get_continuous_bins_however_few_their_distinct_values():
    # 40 PairRM-like margins (40 distinct values): one bar per value would draw a flat block of ones
    margin = np.random.default_rng(5).normal(0.34, 0.16, 40)
    assert plots.value_grid(margin) is None
    ax = plots.margin_distribution(margin).axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert sum(heights) == 40 and len(heights) == 10 and max(heights) >= 5


def test_ratings_are_binned_on_their_grid(small):
    chosen = small[0]
    grid = plots.value_grid(chosen)
    assert grid is not None and np.allclose(np.diff(grid), 0.5) and set(chosen) <= set(grid)
    margin = small[0] - small[1]
    ax = plots.margin_distribution(margin).axes[0]
    bars = {round(p.get_x() + p.get_width() / 2, 9): p.get_height() for p in ax.patches}
    values, counts = np.unique(margin, return_counts=True)
    assert all(bars[round(v, 9)] == c for v, c in zip(values, counts))  # one bar centred on each grid value
    assert plots.value_grid(np.array([1.0, 2.0, 2.25 + 1e-3])) is None  # off the grid by a little: continuous


def test_margin_vs_length(small):
    margin = small[0] - small[1]
    diff = np.arange(37.0) - 18
    ax = _labelled(plots.margin_vs_length(margin, diff), 37)
    # the unit metrics.json and the card name: str.split's tokens, not a model's (read as such, they were)
    assert ax.get_xlabel() == "length difference, chosen − rejected (whitespace-separated tokens)"
    points = [c for c in ax.collections if isinstance(c, PathCollection)][0]
    assert np.array_equal(points.get_offsets(), np.column_stack([diff, margin]))


def test_score_violin(small):
    ax = _labelled(plots.score_violin(*small), 37)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["score_chosen", "score_rejected"]


def test_draw_all_saves_png_and_svg_stably(small, tmp_path):
    out = plots.draw_all(*small, tmp_path / "a", length_difference=np.arange(37.0))
    assert list(out) == list(plots.FIGURE_NAMES)
    for name, fig in out.items():
        png, svg = fig["png"].read_bytes(), fig["svg"].read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", png[16:24]) == (960, 660)  # 6.4 x 4.4 inches at 150 dpi
        assert ET.fromstring(svg).tag.endswith("svg")
        assert "n = 37" in fig["title"]
    again = plots.draw_all(*small, tmp_path / "b", length_difference=np.arange(37.0))
    for name in out:
        assert out[name]["png"].read_bytes() == again[name]["png"].read_bytes(), name
        assert out[name]["svg"].read_bytes() == again[name]["svg"].read_bytes(), name


def test_draw_all_without_lengths_skips_that_figure(small, tmp_path):
    out = plots.draw_all(*small, tmp_path)
    assert "margin_vs_length" not in out and len(out) == len(plots.FIGURE_NAMES) - 1
    assert not (tmp_path / "margin_vs_length.png").exists()


def test_scores_all_equal_draw_every_figure_without_a_density(tmp_path):
    # a reward model that gives one value (or a dataset of ties only): seaborn's KDE raised LinAlgError and
    # 02_analyze failed; the histograms are drawn, without a density curve that has nothing to estimate
    same = np.full(6, 0.5)
    figures = plots.draw_all(same, same, tmp_path, length_difference=np.arange(6.0))
    assert sorted(figures) == sorted(plots.FIGURE_NAMES)
    ax = plots.score_distributions(same, same).axes[0]
    assert len([c for c in ax.collections if isinstance(c, PolyCollection)]) == 2 and not ax.lines  # no KDE
    ax = plots.margin_distribution(same - same).axes[0]
    assert sum(p.get_height() for p in ax.patches) == 6
    assert [line.get_label() for line in ax.lines] == ["margin = 0 (tie)"]


def test_draw_all_refuses_a_nan_score_naming_its_row(tmp_path):
    # it titled "n = 3 pairs" and drew 2 points
    with pytest.raises(DataError, match=r"^repro\.analysis\.plots\.draw_all: 1 of 4 rows have a NaN, infinite or "
                                        r"missing score \(rows 1 \(from 0\); score_chosen: 1\)\. .*exclude_nonfinite"):
        plots.draw_all(np.array([1.0, np.nan, 2.0, 4.0]), np.array([0.0, 0.0, 1.0, 1.0]), tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("draw", ["compare_scores", "compare_bland_altman"])
def test_a_comparisons_legend_covers_no_point(draw):
    # the Bland–Altman legend sat in the upper left, over the five rows whose scores had moved by +0.2
    reference = np.linspace(-1.0, 1.0, 80)
    candidate = reference.copy()
    candidate[:5] += 0.2 if draw == "compare_bland_altman" else 1.5  # the rows that disagree: upper left
    fig = getattr(plots, draw)(reference, candidate, *([{"mean_difference": 0.025, "loa_low": -0.1, "loa_high": 0.15}]
                                                       if draw == "compare_bland_altman" else []))
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = fig.legends[0].get_window_extent()
    title, whole = ax.title.get_window_extent(), fig.bbox  # beside the axes, the legend pushed the title off the left
    assert whole.x0 <= title.x0 and title.x1 <= whole.x1
    points = ax.transData.transform(np.concatenate([c.get_offsets() for c in ax.collections]))
    inside = ((points[:, 0] >= legend.x0) & (points[:, 0] <= legend.x1) & (points[:, 1] >= legend.y0)
              & (points[:, 1] <= legend.y1))
    assert not inside.any(), points[inside]


@pytest.mark.parametrize("margins", ["best_worst", "symmetric"])
def test_the_margin_legend_covers_no_bar(margins):
    # best-vs-worst margins pile up just above 0: the legend in the upper left hid the tallest bars
    rng = np.random.default_rng(0)
    margin = rng.exponential(0.3, 157) if margins == "best_worst" else rng.normal(0, 0.3, 157)
    fig = plots.margin_distribution(margin)
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    assert not [bar for bar in ax.patches if bar.get_height() and legend.overlaps(bar.get_window_extent())]


def test_axes_of_row_counts_have_whole_ticks():
    # a few rows drew 0.5, 1.5 rows on the histograms' count axis
    margin = np.array([0.1, 0.5, 0.9])
    for fig, axis in ((plots.margin_distribution(margin), "y"), (plots.score_distributions(margin, margin - 1), "y"),
                      (plots.compare_agreement({"same pair": 1, "swapped": 2}), "x")):
        ax = fig.axes[0]
        getattr(ax, f"get_{axis}lim")()  # the view as drawn
        ticks = getattr(ax, f"get_{axis}ticks")()
        assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks


def _agreement_of(*names: str) -> dict:
    rng = np.random.default_rng(3)
    return sa.agreement({name: (rng.normal(size=240), np.full(60, 4)) for name in names}, names[0], "last")


def test_a_dollar_sign_in_a_scorers_name_is_drawn_as_written(tmp_path):
    # a scorer named a$\frac$b (matplotlib's mathtext between two $) stopped plots.save with ParseSyntaxException;
    # "$5 rm" beside "$3 rm" drew "5 rm vs " in math italics, its dollars gone
    for names, label in ((("a$\\frac$b", "llama_rm", "my-rm"), "a$\\frac$b vs my-rm"),
                         (("$5 rm", "$3 rm"), "$5 rm vs $3 rm")):
        plots.save(plots.scorer_agreement(_agreement_of(*names)), tmp_path / "agree")
        svg = (tmp_path / "agree.svg").read_text()  # (each text drawn, as a comment before its glyphs)
        assert svg.count(f"<!-- {label} -->") == 1 + (len(names) > 2) and "Oblique" not in svg  # tick, legend entry


def test_a_label_no_installed_font_can_draw_is_said_once_and_the_figure_still_written(tmp_path):
    # a scorer at models/奖励 模型 café 🚀/pairrm 替身 é: matplotlib warned "Glyph 26367 (\N{CJK UNIFIED
    # IDEOGRAPH-66FF}) missing from font(s) DejaVu Sans" for each glyph, and scorer_agreement.png showed
    # 'pairrm □□ é vs llama_rm' unsaid in the notebook and by repro run
    if families := plots.fonts_for("替身", FontProperties()):
        pytest.skip(f"an installed font ({families[-1]}) has 替身: no boxes to tell of here")
    # three scorers: each pair's label is a tick and a legend entry (two scorers draw no legend), said once
    labels = ["pairrm 替身 é vs llama_rm", "pairrm 替身 é vs my-rm"]  # ("llama_rm vs my-rm": drawn, not said)
    figure = plots.scorer_agreement(_agreement_of("pairrm 替身 é", "llama_rm", "my-rm"))
    assert [t.get_text() for t in figure.findobj(plots.Text) if t.get_visible()].count(labels[0]) == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        files = plots.save(figure, tmp_path / "agree")
    assert [(w.category, str(w.message)) for w in caught] == [(ReproWarning, (
        f"agree.png: no installed font has every character of the label {label!r}: they are drawn as boxes. Install a "
        f"font that has them (Debian: fonts-noto-cjk, fonts-symbola for emoji; then delete {matplotlib.get_cachedir()}/"
        f"fontlist-*.json, matplotlib's list of fonts) and draw it again, or rename what the label names."))
        for label in labels]
    assert files["png"].stat().st_size and files["svg"].stat().st_size  # the figure, its boxes said


def test_a_labels_letters_its_font_lacks_come_from_an_installed_font_that_has_them(tmp_path):
    # (no CJK font here: DejaVu Serif, shipped with matplotlib, stands in for one; ᴕ: DejaVu Serif has it, Sans not)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        figure = plots.scorer_agreement(_agreement_of("mini-ᴕ", "llama_rm"))
        plots.save(figure, tmp_path / "agree")
    assert not caught  # matplotlib found every glyph (its boxes' font warns when used), repro said nothing
    (tick,) = figure.axes[1].get_yticklabels()
    assert tick.get_text() == "mini-ᴕ vs llama_rm" and tick.get_fontfamily() == ["DejaVu Sans", "DejaVu Serif"]


def test_a_label_wrapped_onto_two_lines_is_no_label_drawn_as_boxes(tmp_path):
    # a reviewer: long hub ids wrap the scorer pair's label; its line break counted as a character no font has, so
    # every such run warned "drawn as boxes" (a plain ASCII label), and a wrapped CJK name got no fallback font
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pair = _agreement_of("llm-blender/PairRM", "OpenAssistant/reward-model-deberta-v3-large-v2")
        figure = plots.scorer_agreement(pair)
        plots.save(figure, tmp_path / "agree")
    assert any("\n" in t.get_text() for t in figure.findobj(plots.Text)) and not caught
    # a tab (as a CRLF file's \r) has no glyph: boxes, said
    with pytest.warns(ReproWarning, match=r"label 'my-rm\\t vs llama_rm'"):
        plots.save(plots.scorer_agreement(_agreement_of("my-rm\t", "llama_rm")), tmp_path / "tab")
