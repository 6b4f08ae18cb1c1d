"""The figures: one seaborn theme on plain `Figure`s (no pyplot state: same everywhere), byte-stable PNG and SVG."""

from __future__ import annotations

import contextlib
import functools
import warnings
from pathlib import Path
from typing import Any, Iterable, Iterator

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import font_manager, ft2font
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import MaxNLocator

from ..errors import warn
from .stats import has_spread, paired_scores

HEXBIN_ABOVE = 2000  # above this many points, scatter plots become hexbins (readable, and small SVGs)
GRID_MAX_POINTS = 60  # a grid of more points is drawn with continuous bins (a bar per point would be unreadable)
FIGSIZE = (6.4, 4.4)
DPI = 150  # 960 x 660 px: sharp at the ~600-800 px width a dataset card embeds
COLORS = {"score_chosen": "#1b7837", "score_rejected": "#b2182b", "margin": "#2166ac"}
NO_GLYPH_WARNING = "Glyph .* missing from font"  # matplotlib's, once a glyph: `save` says it once a label
NO_GLYPHS = "Last Resort"  # matplotlib's font of placeholder boxes: it maps every character and draws none
FIGURE_NAMES = ("score_distributions", "score_ecdf", "chosen_vs_rejected", "margin_distribution",
                "margin_vs_length", "score_violin")


@contextlib.contextmanager
def theme() -> Iterator[None]:
    """The look (seaborn whitegrid, 'notebook'), no global state; a glyph a font lacks: said once a label, at `save`."""
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.95), warnings.catch_warnings():
        warnings.filterwarnings("ignore", NO_GLYPH_WARNING)
        yield


@contextlib.contextmanager
def axes(figsize: tuple[float, float] = FIGSIZE) -> Iterator[tuple[Figure, Any]]:
    with theme():
        fig = Figure(figsize=figsize, dpi=DPI, layout="constrained")
        yield fig, fig.add_subplot()


@functools.cache
def _glyphs(font_file: str) -> frozenset[int]:
    """The characters the font file has a glyph for."""
    return frozenset(ft2font.FT2Font(font_file).get_charmap())


def fonts_for(text: str, font: font_manager.FontProperties) -> list[str] | None:
    """Families drawing all `text` like `font`: its own, then ones with glyphs it lacks (font.family); None: boxes."""
    own, weights = font_manager.findfont(font), font_manager.weight_dict
    missing = set(map(ord, text.replace("\n", ""))) - _glyphs(own)  # (a line break is no glyph)
    families = [font_manager.get_font(own).family_name]
    style = (font.get_style(), weights.get(font.get_weight(), font.get_weight()))
    for entry in font_manager.fontManager.ttflist:  # (of `font`'s style: findfont then finds that face, unsaid)
        if not missing:
            break
        if entry.name in families or entry.name.startswith(NO_GLYPHS) or \
                (entry.style, weights.get(entry.weight, entry.weight)) != style:
            continue
        other = font.copy()
        other.set_family(entry.name)
        if has := missing & _glyphs(font_manager.findfont(other)):
            families.append(entry.name)
            missing -= has
    return None if missing else families


def _untitled_legend(ax) -> None:
    if (legend := ax.get_legend()) is not None:
        legend.set_title(None)


def _whole(axis) -> None:
    """Ticks of a count of rows at whole numbers (a few rows drew 0.5, 1.5 rows)."""
    axis.set_major_locator(MaxNLocator(integer=True))


def literal(text: str) -> str:
    """Text from the data (a scorer's or member's name) as a label draws it: each `$` a dollar sign, no mathtext."""
    return text.replace("$", r"\$")


def _n(n: int) -> str:
    return f"n = {n:,}"


def _long(score_chosen: np.ndarray, score_rejected: np.ndarray) -> pd.DataFrame:
    sizes = [len(score_chosen), len(score_rejected)]
    return pd.DataFrame({"score": np.concatenate([score_chosen, score_rejected]),
                         "which": np.repeat(["score_chosen", "score_rejected"], sizes)})


def value_grid(values: np.ndarray) -> np.ndarray | None:
    """The evenly spaced grid (step: the smallest gap) the values lie on, as ratings do, or None for continuous ones."""
    distinct = np.unique(np.asarray(values, dtype=np.float64))
    distinct = distinct[np.isfinite(distinct)]
    if distinct.size < 2:
        return distinct if distinct.size else None
    step = float(np.min(np.diff(distinct)))
    steps = (distinct - distinct[0]) / step
    if steps[-1] + 1 > GRID_MAX_POINTS or not np.allclose(steps, np.round(steps), rtol=0.0, atol=1e-6):
        return None
    return distinct[0] + step * np.arange(int(round(steps[-1])) + 1)


def _bins(values: np.ndarray) -> int | np.ndarray:
    # Values on a grid (ratings): one bin centred on each grid point, none falling between two points.
    grid = value_grid(values)
    if grid is not None:
        step = float(grid[1] - grid[0]) if grid.size > 1 else 1.0
        return np.concatenate([grid - step / 2, [grid[-1] + step / 2]])
    return min(60, max(10, int(np.sqrt(values.size))))


def score_distributions(score_chosen: np.ndarray, score_rejected: np.ndarray) -> Figure:
    """Overlaid histograms with KDE of score_chosen and score_rejected."""
    with axes() as (fig, ax):
        data = _long(score_chosen, score_rejected)
        scores = data["score"].to_numpy()
        sns.histplot(data=data, x="score", hue="which", bins=_bins(scores), kde=has_spread(scores),
                     stat="count", common_bins=True, element="step", alpha=0.3, palette=COLORS, ax=ax)
        _untitled_legend(ax)
        _whole(ax.yaxis)
        ax.set(xlabel="score", ylabel="rows", title=f"Distribution of scores ({_n(len(score_chosen))} pairs)")
    return fig


def score_ecdf(score_chosen: np.ndarray, score_rejected: np.ndarray) -> Figure:
    """Empirical CDFs of score_chosen and score_rejected."""
    with axes() as (fig, ax):
        # one weighted point per distinct value: the same ECDF, drawn from 15 points instead of 2n for ratings
        counts = _long(score_chosen, score_rejected).groupby(["which", "score"]).size().rename("rows").reset_index()
        sns.ecdfplot(data=counts, x="score", hue="which", weights="rows", palette=COLORS, ax=ax)
        _untitled_legend(ax)
        ax.set(xlabel="score", ylabel="fraction of rows ≤ score",
               title=f"ECDF of scores ({_n(len(score_chosen))} pairs)")
    return fig


def _scatter_or_hexbin(ax, x: np.ndarray, y: np.ndarray, color: str) -> None:
    on_grids = value_grid(x) is not None and value_grid(y) is not None  # (counted only then: 61,135 rows are not)
    points = pd.DataFrame({"x": x, "y": y}).value_counts(sort=False).rename("rows").reset_index() if on_grids else None
    if points is not None and len(points) < len(x):
        # values on grids (ratings) repeat: one marker per pair of values, its area growing with its rows
        most = int(points["rows"].max())

        def area(rows):  # 1 row: a plain scatter point's; in proportion to the rows while the largest fits
            rows = np.asarray(rows)
            return 14 * rows if 14 * most <= 320 else 14 + 306 * (rows - 1) / (most - 1)

        # above the y = x line: a tie of one row was a dot under its dashes
        ax.scatter(points["x"], points["y"], s=area(points["rows"]), alpha=0.6, color=color, edgecolor="none",
                   zorder=3)
        for rows in sorted({1, (most + 1) // 2, most}):  # the legend's key to the areas
            ax.scatter([], [], s=area(rows), alpha=0.6, color=color, edgecolor="none",
                       label=f"{rows:,} row{'s' * (rows > 1)}")
    elif len(x) > HEXBIN_ABOVE:
        hb = ax.hexbin(x, y, gridsize=40, mincnt=1, cmap="viridis", bins="log")
        ax.figure.colorbar(hb, ax=ax, label="rows (log scale)")
    else:
        sns.scatterplot(x=x, y=y, s=14, alpha=0.5, color=color, edgecolor="none", ax=ax)


def _legend_below(ax) -> None:
    """The legend under the figure, for figures whose points may lie anywhere (those that disagree, the ones to see)."""
    ax.figure.legend(loc="outside lower center", ncols=3)


def _versus(x: np.ndarray, y: np.ndarray, identity: str, below: bool = False, **labels: str) -> Figure:
    """y against x (a hexbin when many), the line y = x labelled `identity`, the legend upper left or `below`."""
    with axes() as (fig, ax):
        _scatter_or_hexbin(ax, x, y, COLORS["margin"])
        lo, hi = float(min(np.min(x), np.min(y))), float(max(np.max(x), np.max(y)))
        pad = 0.02 * (hi - lo or 1.0)
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="0.3", linestyle="--", linewidth=1, label=identity)
        _legend_below(ax) if below else ax.legend(loc="upper left")
        ax.set(**labels)
    return fig


def chosen_vs_rejected(score_chosen: np.ndarray, score_rejected: np.ndarray) -> Figure:
    """score_rejected against score_chosen with the line y = x (hexbin when there are many rows)."""
    return _versus(score_chosen, score_rejected, "y = x (tie)", xlabel="score_chosen", ylabel="score_rejected",
                   title=f"Chosen vs rejected score ({_n(len(score_chosen))} pairs)")


def margin_distribution(margin: np.ndarray) -> Figure:
    """Histogram with KDE of margin = score_chosen − score_rejected, with 0 marked."""
    with axes() as (fig, ax):
        sns.histplot(x=margin, bins=_bins(margin), kde=has_spread(margin), color=COLORS["margin"], ax=ax)
        ax.axvline(0.0, color="0.2", linestyle="--", linewidth=1.2, label="margin = 0 (tie)")
        ax.legend(loc="best")  # where it hides fewest bars: best-vs-worst margins pile up just above 0
        _whole(ax.yaxis)
        ax.set(xlabel="margin = score_chosen − score_rejected", ylabel="rows",
               title=f"Distribution of the margin ({_n(len(margin))} pairs)")
    return fig


def margin_vs_length(margin: np.ndarray, length_difference: np.ndarray) -> Figure:
    """Margin against the chosen − rejected response length difference (the length-bias picture)."""
    with axes() as (fig, ax):
        _scatter_or_hexbin(ax, length_difference, margin, COLORS["margin"])
        ax.axhline(0.0, color="0.3", linestyle="--", linewidth=1)
        ax.axvline(0.0, color="0.3", linestyle=":", linewidth=1)
        ax.set(xlabel="length difference, chosen − rejected (whitespace-separated tokens)",
               ylabel="margin = score_chosen − score_rejected",
               title=f"Margin vs response length difference ({_n(len(margin))} pairs)")
    return fig


def score_violin(score_chosen: np.ndarray, score_rejected: np.ndarray) -> Figure:
    """Violins (with quartiles) of score_chosen and score_rejected side by side."""
    with axes() as (fig, ax):
        sns.violinplot(data=_long(score_chosen, score_rejected), x="which", y="score", hue="which",
                       palette=COLORS, inner="quart", cut=0, legend=False, ax=ax)
        ax.set(xlabel="", ylabel="score", title=f"Scores of chosen and rejected ({_n(len(score_chosen))} pairs)")
    return fig


def compare_scores(reference: np.ndarray, candidate: np.ndarray) -> Figure:
    """A reproduction's scores against the published ones for the same texts, with the identity line."""
    return _versus(reference, candidate, "y = x (same score)", True, xlabel="reference score", ylabel="candidate score",
                   title=f"Scores of the same texts: candidate vs reference ({_n(len(reference))} scores)")


def compare_bland_altman(reference: np.ndarray, candidate: np.ndarray, summary: dict) -> Figure:
    """Bland–Altman: candidate − reference against their mean, with the mean difference and limits of agreement."""
    with axes() as (fig, ax):
        _scatter_or_hexbin(ax, (reference + candidate) / 2, candidate - reference, COLORS["margin"])
        for key, style, label in (("mean_difference", "-", "mean difference"), ("loa_low", "--", "limits of agreement"),
                                  ("loa_high", "--", None)):
            if summary.get(key) is not None:
                ax.axhline(summary[key], color="0.25", linestyle=style, linewidth=1, label=label)
        _legend_below(ax)
        ax.set(xlabel="mean of reference and candidate score", ylabel="candidate − reference",
               title=f"Bland–Altman ({_n(len(reference))} scores)")
    return fig


def compare_agreement(counts: dict[str, int]) -> Figure:
    """Aligned rows by how their chosen/rejected texts agree (same, swapped, ..., different)."""
    with axes() as (fig, ax):
        total = sum(counts.values())
        sns.barplot(x=list(counts.values()), y=list(counts), color=COLORS["margin"], orient="h", ax=ax)
        for i, value in enumerate(counts.values()):
            ax.text(value, i, f" {value:,} ({value / max(total, 1):.1%})", va="center", fontsize=9)
        ax.set_xlim(0, max(max(counts.values()), 1) * 1.3)
        _whole(ax.xaxis)
        ax.set(xlabel="aligned rows", ylabel="", title=f"Pair agreement ({_n(total)} aligned rows)")
    return fig


def save(fig: Figure, stem: Path) -> dict[str, Path]:
    """Write `fig` to `stem`.png and `stem`.svg; returns both paths."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = {"png": stem.with_suffix(".png"), "svg": stem.with_suffix(".svg")}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", NO_GLYPH_WARNING)
        _drawable(fig, paths["png"].name)  # (before the layout: a label's fonts change its size)
        if (engine := fig.get_layout_engine()) is not None:  # lay out once, not once per file
            engine.execute(fig)
            fig.set_layout_engine("none")
        # fixed metadata and SVG id salt: byte-stable files (matplotlib otherwise stamps dates and salts ids randomly)
        with matplotlib.rc_context({"svg.hashsalt": "repro"}):
            fig.savefig(paths["png"], format="png", metadata={"Software": None})
            fig.savefig(paths["svg"], format="svg", metadata={"Date": None, "Creator": None})
    return paths


def _drawable(fig: Figure, name: str) -> None:
    """`fig`'s labels whole: glyphs a font lacks (CJK, emoji) from other fonts (`fonts_for`); else said, with a fix."""
    boxes = set()
    for line in (text for text in fig.findobj(Text) if text.get_visible() and text.get_text().strip()):
        if (families := fonts_for(line.get_text(), line.get_fontproperties())) is None:
            if line.get_text() in boxes:
                continue
            boxes.add(line.get_text())
            warn(f"{name}: no installed font has every character of the label {line.get_text()!r}"
                 f": they are drawn as boxes. Install a font that has them (Debian: fonts-noto-cjk, fonts-symbola for "
                 f"emoji; then delete {matplotlib.get_cachedir()}/fontlist-*.json, matplotlib's list of fonts) and "
                 f"draw it again, or rename what the label names.")
        elif len(families) > 1:
            line.set_fontfamily(families)


def save_titled(fig: Figure, stem: Path) -> dict[str, Any]:
    """`save`, with the figure's title (its suptitle, else its first axes' title)."""
    return {**save(fig, stem), "title": fig.get_suptitle() or fig.axes[0].get_title()}


def figure_files(figures_dir: Path, names: Iterable[str]) -> list[Path]:
    """The PNG and SVG files of these figures."""
    return [(figures_dir / name).with_suffix(ext) for name in names for ext in (".png", ".svg")]


def draw_all(score_chosen: np.ndarray, score_rejected: np.ndarray, figures_dir: Path,
             length_difference: np.ndarray | None = None, length_margin: np.ndarray | None = None
             ) -> dict[str, dict[str, object]]:
    """Draw and save every figure as {name: {"png", "svg", "title"}}; margin_vs_length only with lengths."""
    score_chosen, score_rejected = paired_scores("plots.draw_all", score_chosen=score_chosen,
                                                 score_rejected=score_rejected)
    margin = score_chosen - score_rejected
    length_margin = margin if length_margin is None else length_margin
    builders = {
        "score_distributions": lambda: score_distributions(score_chosen, score_rejected),
        "score_ecdf": lambda: score_ecdf(score_chosen, score_rejected),
        "chosen_vs_rejected": lambda: chosen_vs_rejected(score_chosen, score_rejected),
        "margin_distribution": lambda: margin_distribution(margin),
        "margin_vs_length": lambda: margin_vs_length(length_margin, length_difference),
        "score_violin": lambda: score_violin(score_chosen, score_rejected),
    }
    return {name: save_titled(build(), Path(figures_dir) / name) for name, build in builders.items()
            if name != "margin_vs_length" or length_difference is not None}


def _pair_label(a: str, b: str, chars: int, wrap: bool) -> str:
    """'a vs b' (`wrap`: 'a' over 'vs b'), its lines cut at `chars` characters (a hub id may be longer)."""
    lines = [a, f"vs {b}"] if wrap else [f"{a} vs {b}"]
    return "\n".join(line[i:i + chars] for line in lines for i in range(0, len(line), chars))


def scorer_agreement(agreement: dict) -> Figure:
    """Agreement of each pair of scorers (metrics.json's `agreement` block): per-prompt Kendall tau, same picks."""
    pairs = agreement["pairs"]
    labels = [" vs ".join(p["scorers"]) for p in pairs]
    edges = np.asarray(pairs[0]["kendall_tau"]["histogram"]["edges"])
    centres = (edges[:-1] + edges[1:]) / 2
    taus = pd.DataFrame([{"pair": label, "tau": centre, "rows": count}
                         for label, p in zip(labels, pairs)
                         for centre, count in zip(centres, p["kendall_tau"]["histogram"]["counts"])])
    # a pair's row label: "a vs b" where it fits in half the panel (~0.09 in a character), else "a" over "vs b"; no
    # line wider than two thirds of the panel (the bars keep the rest)
    wrap = 0.09 * max(map(len, labels)) > FIGSIZE[0] / 2
    ticks = [_pair_label(*p["scorers"], chars=int(FIGSIZE[0] / 1.5 / 0.09), wrap=wrap) for p in pairs]
    picks = pd.DataFrame([{"pair": literal(label), "which": which.replace("_", " "),
                           "fraction": p[which]["fraction"] or 0.0}
                          for label, p in zip(ticks, pairs) for which in ("same_chosen", "same_rejected")])
    rows = max(p["rows"] for p in pairs)
    # the pairs' legend: a pair on one line where it fits across the panel (~0.08 in a character, 0.6 in for the
    # key), else as its row (its key and first letters were off the figure); in as many columns as fit
    fits = int((FIGSIZE[0] - 0.6) / 0.08)
    keys = {label: label if len(label) <= fits else tick for label, tick in zip(labels, ticks)}
    longest = max(len(line) for key in keys.values() for line in key.split("\n"))
    columns = max(1, min(len(pairs), int(FIGSIZE[0] // (0.08 * longest + 0.6))))
    # as tall as the pairs' rows (of their lines) and the pairs' legend need
    height = max(FIGSIZE[1], 2.2 + 0.3 * sum(tick.count("\n") + 1 for tick in ticks),
                 3.6 + 0.25 * max(key.count("\n") + 1 for key in keys.values()) * -(-len(pairs) // columns))
    with theme():
        fig = Figure(figsize=(FIGSIZE[0] * 2, height), dpi=DPI, layout="constrained")
        panels = fig.subfigures(1, 2)
        left, right = (panel.add_subplot() for panel in panels)
        sns.histplot(data=taus, x="tau", weights="rows", hue="pair", bins=edges.tolist(), stat="proportion",
                     common_norm=False, multiple="dodge", shrink=0.85, ax=left, legend=len(pairs) > 1)
        undefined = ", ".join(f"{p['kendall_tau']['undefined']:,}" for p in pairs)
        left.set(xlabel="Kendall's tau-b per prompt", ylabel="fraction of prompts", xlim=(edges[0], edges[-1]),
                 title=f"Rank agreement per prompt (tau undefined, left out: {undefined})")
        sns.barplot(data=picks, y="pair", x="fraction", hue="which", orient="h", palette=[COLORS["score_chosen"],
                    COLORS["score_rejected"]], ax=right)
        right.set(ylabel="", xlabel="fraction of prompts", xlim=(0, 1), title="Same chosen / same rejected")
        for ax, panel, ncols in ((left, panels[0], columns), (right, panels[1], 2)):
            if (legend := ax.get_legend()) is not None:
                panel.legend(legend.legend_handles, [literal(keys.get(t.get_text(), t.get_text()))
                                                     for t in legend.texts],
                             loc="outside lower center", ncols=ncols)
                legend.remove()
        fig.suptitle(f"Agreement between scorers ({_n(rows)} prompts)")
    return fig
