"""Agreement between scorers: the statistics against scipy and hand-worked rows, and the analysis, figure and card."""

from __future__ import annotations

import html
import itertools
import json
import math
import re
import shutil

import datasets
import numpy as np
import pandas as pd
import pytest
from conftest import html_elements, shown_text
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.legend import Legend
from scipy import stats as sps

from repro.analysis import agreement as sa, plots, report as analysis
from repro import card as repro_card
from repro.dataset_io import output_features, write_split
from repro.errors import ParameterError
from repro.manifest import Manifest, sha256_file
from repro.construct.pairs import select_pair
from repro.construct.selection import best_worst
from repro.parameters import TIE_RULES, AnalyzeParams, CardParams, build
from repro.paths import RunDir


def ragged(rows: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """(flat scores, candidates per row) of a list of score lists."""
    return np.array([s for r in rows for s in r], dtype=np.float64), np.array([len(r) for r in rows])


# --------------------------------------------------------------------------------------------
# Kendall's tau and the picks, row by row
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [2, 3, 4, 7])
def test_tau_b_equals_scipy_kendalltau_with_ties(k):
    rng = np.random.default_rng(k)
    a = rng.integers(0, 3, size=(300, k)).astype(float)  # three levels: many ties
    b = np.where(rng.random((300, k)) < 0.5, a, rng.integers(0, 3, size=(300, k))).astype(float)
    a[:5], b[5:10] = 1.0, 2.0  # constant rows: tau undefined
    tau = sa.kendall_tau_b(a, b)
    expected = np.array([sps.kendalltau(x, y).statistic for x, y in zip(a, b)])
    assert np.array_equal(np.isnan(tau), np.isnan(expected)) and np.isnan(tau).any()
    np.testing.assert_allclose(tau[~np.isnan(tau)], expected[~np.isnan(expected)], rtol=0, atol=1e-12)


def test_tau_b_by_hand():
    rows_a = [[1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 1, 2], [0.1, 0.5], [0.1, 0.5], [4, 4, 4], [0.1, 0.5]]
    rows_b = [[10, 20, 30], [3, 2, 1], [1, 3, 2], [1, 2, 3], [2, -1], [7, 9], [1, 2, 3], [3, 3]]
    # [1,2,3] vs [1,3,2]: pairs (0,1) and (0,2) concordant, (1,2) discordant -> (2 - 1) / 3.
    # [1,1,2] vs [1,2,3]: (0,1) tied in a, (0,2) and (1,2) concordant -> 2 / sqrt(2 * 3).
    expected = [1.0, -1.0, 1 / 3, 2 / math.sqrt(6), -1.0, 1.0, math.nan, math.nan]
    got = [sa.kendall_tau_b(np.array([a]), np.array([b]))[0] for a, b in zip(rows_a, rows_b)]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-15)


def test_picks_follow_select_pairs_tie_rule():
    rng = np.random.default_rng(1)
    for k in (2, 3, 5):
        matrix = rng.integers(0, 3, size=(200, k)).astype(float)
        chosen, rejected = sa.chosen_and_rejected(matrix, "last")
        assert [select_pair(list(row)) for row in matrix] == list(zip(chosen.tolist(), rejected.tolist()))
    chosen, rejected = sa.chosen_and_rejected(np.array([[1, 3, 3, 0, 0], [2, 2, 2, 2, 2], [5, 1, 9, 1, 9]]), "last")
    assert chosen.tolist() == [1, 0, 2] and rejected.tolist() == [4, 4, 3]


def test_ragged_rows_are_compared_row_by_row_and_bad_rows_counted():
    rows_a = [[1, 2], [0.3, 0.1, 0.2], [5, 5, 5, 1], [1], [1, 2, 3], [1, float("nan")], [2, 1], [1, 2, 3, 4]]
    rows_b = [[2, 1], [0.9, 0.1, 0.5], [1, 2, 3, 0], [1], [1, 2], [1, 2], [9, 8], [4, 3, 2, 1]]
    c = sa.compare_rows(*ragged(rows_a), *ragged(rows_b), "last")
    assert c.rows.tolist() == [0, 1, 2, 6, 7] and c.candidates.tolist() == [2, 3, 4, 2, 4]
    assert c.excluded_reasons == {"fewer than 2 candidate scores": 1,
                                  "the scorers scored different numbers of candidates": 1,
                                  "a candidate score is NaN, infinite or missing": 1}
    kept = c.rows.tolist()
    for at, row in enumerate(kept):
        expected = sps.kendalltau(rows_a[row], rows_b[row]).statistic
        assert c.tau[at] == pytest.approx(expected, abs=1e-12)
        for s, rows in enumerate((rows_a, rows_b)):
            assert (c.chosen[s][at], c.rejected[s][at]) == select_pair(rows[row])
            assert c.margin[s][at] == max(rows[row]) - min(rows[row])


def test_pair_summary_by_hand():
    a = [[3, 1, 2], [2, 0], [0, 1, 2], [7, 7]]
    b = [[9, 8, 0], [1, 0.5], [5, 0, 1], [4, 4]]
    # picks (chosen, rejected): a (0,1) (0,1) (2,0) (0,1); b (0,2) (0,1) (0,1) (0,1), row 3 a full tie for both
    # (first highest, last lowest). tau: row 0 [3,1,2] vs [9,8,0]: 2 concordant, 1 discordant -> 1/3;
    # row 1 -> 1; row 2 [0,1,2] vs [5,0,1]: 1 concordant, 2 discordant -> -1/3; row 3 constant -> undefined.
    s = sa.pair_summary("a", "b", sa.compare_rows(*ragged(a), *ragged(b), "last"))
    assert s["scorers"] == ["a", "b"] and s["rows"] == 4 and s["rows_excluded"] == 0
    assert s["candidates_per_row"] == {"min": 2, "max": 3, "mean": 2.5}
    assert s["same_chosen"] == {"count": 3, "fraction": 0.75}  # rows 0, 1, 3
    assert s["same_rejected"] == {"count": 2, "fraction": 0.5}  # rows 1, 3
    assert s["same_pair"] == {"count": 2, "fraction": 0.5}
    tau = s["kendall_tau"]
    assert (tau["rows"], tau["undefined"]) == (3, 1)
    assert tau["mean"] == pytest.approx(1 / 3) and tau["median"] == pytest.approx(1 / 3)
    assert tau["min"] == pytest.approx(-1 / 3) and tau["max"] == 1.0
    assert tau["fraction_positive"] == pytest.approx(2 / 3) and tau["fraction_negative"] == pytest.approx(1 / 3)
    counts = tau["histogram"]["counts"]
    assert len(counts) == 21 and sum(counts) == 3
    assert counts[20] == counts[13] == counts[7] == 1  # bins centred on 1.0, 0.3 and -0.3
    margins_a, margins_b = [2, 2, 2, 0], [9, 0.5, 5, 0]
    assert s["margin_correlation"]["pearson"]["statistic"] == pytest.approx(sps.pearsonr(margins_a, margins_b)[0])
    assert s["margin_correlation"]["spearman"]["statistic"] == pytest.approx(sps.spearmanr(margins_a, margins_b)[0])
    assert json.loads(json.dumps(s, allow_nan=False)) == s


def test_every_pair_of_three_scorers_and_too_few():
    rng = np.random.default_rng(2)
    counts = np.full(50, 3)
    scores = {name: (rng.normal(size=150), counts) for name in ("p", "q", "r")}
    block = sa.agreement(scores, "p", "last")
    assert block["scorers"] == ["p", "q", "r"] and block["primary"] == "p"
    assert [pair["scorers"] for pair in block["pairs"]] == [["p", "q"], ["p", "r"], ["q", "r"]]
    assert "p (the primary scorer)" in block["decided_by"]
    with pytest.raises(ValueError, match="at least two scorers"):
        sa.agreement({"p": scores["p"]}, "p", "last")
    # a tie rule not among lowest_tie's values was a raw KeyError: 'lowest' (after every pair was compared)
    with pytest.raises(ParameterError, match=r"^lowest_tie must be 'last' or 'first' \(.*\), got 'lowest'\. Did you mean"):
        sa.agreement(scores, "p", "lowest")


def test_no_comparable_rows_gives_undefined_statistics():
    s = sa.pair_summary("a", "b", sa.compare_rows(*ragged([[1], [2, 3]]), *ragged([[1], [2]]), "last"))
    assert s["rows"] == 0 and s["rows_excluded"] == 2
    assert s["same_chosen"] == {"count": 0, "fraction": None} and s["kendall_tau"]["mean"] is None
    undefined = {"statistic": None, "pvalue": None}
    assert s["margin_correlation"] == {"margin": s["margin_correlation"]["margin"], "pearson": undefined,
                                       "spearman": undefined}


# --------------------------------------------------------------------------------------------
# the analysis stage, the figure and the card
# --------------------------------------------------------------------------------------------
SECOND = "candidate_scores_tiny-seqcls"


def _assistant(conversation: list[dict]) -> str:
    return [m["content"] for m in conversation if m["role"] == "assistant"][-1]


def _scored_rows(train_rows) -> list[dict]:
    """Real rows with three candidates, PairRM-like primary scores and a second scorer's (`SECOND`)."""
    rng = np.random.default_rng(0)
    rows = []
    for r in train_rows[:60]:
        candidates = [_assistant(r["rejected"]), _assistant(r["chosen"]), r["prompt"][:200]]
        primary = rng.normal(size=3)
        primary -= primary.mean()  # sums to zero, as PairRM's
        i_c, i_r = select_pair(list(primary))
        row = {"prompt": r["prompt"], "prompt_id": r["prompt_id"], "messages": r["messages"],
               "score_chosen": float(primary[i_c]), "score_rejected": float(primary[i_r]), "reference_response": "",
               "chosen": [{"content": r["prompt"], "role": "user"}, {"content": candidates[i_c], "role": "assistant"}],
               "rejected": [{"content": r["prompt"], "role": "user"}, {"content": candidates[i_r], "role": "assistant"}],
               "candidates": candidates, "candidate_scores": primary.tolist()}
        # a logit-scale scorer that mostly agrees; every fifth row it scores all candidates alike
        other = 2.0 * primary + rng.normal(scale=0.8, size=3) + 1.5
        row[SECOND] = [0.25] * 3 if len(rows) % 5 == 0 else other.tolist()
        rows.append(row)
    return rows


def _run(tmp_path, rows: list[dict], name: str, model: str = "builtin:tiny-pairrm", second: str = SECOND) -> RunDir:
    run = RunDir(tmp_path / name)
    features = output_features(keep_all_candidates=True)
    if second in rows[0]:
        features[second] = features["candidate_scores"]
    write_split(datasets.Dataset.from_list(rows, features=features), run.dataset)
    manifest = Manifest(run)
    manifest.set_counts(kept=len(rows))
    manifest.record("scorer", {"model": model, "stand_in": True})
    return run


@pytest.fixture(scope="module")
def two_scorers(train_rows, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("agreement")
    rows = _scored_rows(train_rows)
    run = _run(tmp, rows, "two")
    result = analysis.analyze(AnalyzeParams(run_dir=str(run.root), bootstrap_resamples=200))
    return rows, run, result


def test_analysis_reports_the_agreement_of_two_scorers(two_scorers):
    rows, run, result = two_scorers
    m = json.loads(run.metrics.read_text())
    block = m["agreement"]
    assert block["scorers"] == ["builtin:tiny-pairrm", "tiny-seqcls"] and block["primary"] == "builtin:tiny-pairrm"
    assert block["columns"] == {"builtin:tiny-pairrm": "candidate_scores", "tiny-seqcls": "candidate_scores_tiny-seqcls"}
    (pair,) = block["pairs"]
    a = [r["candidate_scores"] for r in rows]
    b = [r[SECOND] for r in rows]
    picks_a, picks_b = [select_pair(x) for x in a], [select_pair(x) for x in b]
    assert pair["rows"] == 60 and pair["rows_excluded"] == 0
    assert pair["same_chosen"]["count"] == sum(x[0] == y[0] for x, y in zip(picks_a, picks_b))
    assert pair["same_rejected"]["count"] == sum(x[1] == y[1] for x, y in zip(picks_a, picks_b))
    taus = np.array([sps.kendalltau(x, y).statistic for x, y in zip(a, b)])
    assert pair["kendall_tau"]["undefined"] == 12 == np.isnan(taus).sum()
    assert pair["kendall_tau"]["mean"] == pytest.approx(np.nanmean(taus))
    assert pair["kendall_tau"]["median"] == pytest.approx(np.nanmedian(taus))
    margins_a, margins_b = np.ptp(a, axis=1), np.ptp(b, axis=1)
    assert pair["margin_correlation"]["spearman"]["statistic"] == pytest.approx(sps.spearmanr(margins_a, margins_b)[0])
    assert pair["margin_correlation"]["pearson"]["statistic"] == pytest.approx(sps.pearsonr(margins_a, margins_b)[0])
    # the table and the headline say the same
    table = pd.read_csv(run.tables / "scorer_agreement.csv")
    assert table.to_dict("records") == result.agreement.to_dict("records")
    assert table.loc[0, "same_chosen"] == pair["same_chosen"]["count"] and table.loc[0, "kendall_tau_undefined"] == 12
    assert table.loc[0, "margin_spearman"] == pytest.approx(pair["margin_correlation"]["spearman"]["statistic"])
    assert f"same chosen in {pair['same_chosen']['fraction']:.1%}" in analysis.headline(m)
    # every finding its own bullet: the agreement's had been glued to the end of the invariants' line
    lines = analysis.headline(m).splitlines()
    assert [line[:31] for line in lines if line.startswith("- PairRM's") or "Scorers `" in line] == [
        "- PairRM's invariants: score_ch", "- Scorers `builtin:tiny-pairrm`"]


def test_same_rejected_follows_the_runs_lowest_tie(two_scorers, tmp_path):
    """A run with lowest_tie: first (SPPO's, RLHFlow's, SELM's) picked the first of tied lowest scores; the agreement
    had picked the last whatever the run's rule, and said so as if it were the run's."""
    rows, run_last, _ = two_scorers
    run = _run(tmp_path, rows, "first")
    Manifest(run).update(parameters={"lowest_tie": "first"})
    (pair,) = analysis.analyze(AnalyzeParams(run_dir=str(run.root), bootstrap_resamples=200)).metrics["agreement"][
        "pairs"]
    a, b = [r["candidate_scores"] for r in rows], [r[SECOND] for r in rows]
    assert pair["same_rejected"]["count"] == sum(best_worst(x, "first")[1] == best_worst(y, "first")[1]
                                                 for x, y in zip(a, b))
    last = json.loads(run_last.metrics.read_text())["agreement"]
    assert pair["same_rejected"] != last["pairs"][0]["same_rejected"]  # the tied rows of the second scorer
    block = json.loads(run.metrics.read_text())["agreement"]
    assert (block["lowest_tie"], block["tie_rule"]) == ("first", TIE_RULES["first"])
    assert (last["lowest_tie"], last["tie_rule"]) == ("last", TIE_RULES["last"])  # the manifest's, else the default


def test_notebook_cell_shows_the_table(two_scorers, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *objects: shown.extend(objects))
    analysis.show_agreement(two_scorers[2])
    # a column per pair, a row per measure (15 columns were twice as wide as JupyterLab's panel), numbers to 4
    # decimals as in the other tables
    assert list(shown[1].data.columns) == ["builtin:tiny-pairrm vs tiny-seqcls"]
    assert list(shown[1].data.index) == [c for c in two_scorers[2].agreement.columns if c not in ("scorer_a", "scorer_b")]
    assert not re.search(r"\d\.\d{5}", shown[1].to_html()) and re.search(r">60</td>", shown[1].to_html())  # rows


def test_scorer_names_from_the_data_show_as_text_in_the_notebook_cell(train_rows, tmp_path, monkeypatch):
    """A run someone sent, its second scorer's column named `candidate_scores_<img src=x onerror=...>` and its primary
    scorer named with a backtick in its manifest: show_agreement put the names between backticks (the primary's closed
    them), said who decided the pairs as it was, and the table's header held the names as HTML; JupyterLab ran the
    <img>s. Now they show as text."""
    primary, other = "rm` <img src=y onerror=alert(2)> `", "<img src=x onerror=alert(1)>"
    rows = [{**{k: v for k, v in r.items() if k != SECOND}, f"candidate_scores_{other}": r[SECOND]}
            for r in _scored_rows(train_rows)]
    run = _run(tmp_path, rows, "run", model=primary, second=f"candidate_scores_{other}")
    result = analysis.analyze(AnalyzeParams(run_dir=str(run.root), bootstrap_resamples=200))
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *objects: shown.extend(objects))
    analysis.show_agreement(result)
    sentence, table = shown[0].data, shown[1].to_html()
    assert html_elements(sentence) == []
    assert f"Scorers: {primary}, {other}. {primary} (the primary scorer) picked" in shown_text(sentence)
    assert not re.search(r"<(img|script)\b", table) and html.escape(f"{primary} vs {other}") in table
    assert html_elements(result._repr_markdown_()) == []  # (the headline's line of the two)
    assert f"Scorers {primary} vs {other} (60 prompts)" in shown_text(result._repr_markdown_())


def test_agreement_figure_and_table_are_recorded(two_scorers):
    _, run, result = two_scorers
    m = result.metrics
    fig = m["figures"]["scorer_agreement"]
    assert fig["title"] == "Agreement between scorers (n = 60 prompts)"
    assert (run.root / fig["png"]).stat().st_size > 10_000 and (run.root / fig["svg"]).is_file()
    assert m["tables"]["scorer_agreement"] == "tables/scorer_agreement.csv"
    outputs = json.loads(run.manifest.read_text())["outputs"]
    for rel in (fig["png"], fig["svg"], m["tables"]["scorer_agreement"]):
        assert outputs[rel]["sha256"] == sha256_file(run.root / rel)
    # the figure draws the histogram the metrics hold: one bar group per tau bin with rows
    figure = plots.scorer_agreement(m["agreement"])
    heights = sorted(round(p.get_height(), 9) for p in figure.axes[0].patches if p.get_height() > 0)
    counts = np.array(m["agreement"]["pairs"][0]["kendall_tau"]["histogram"]["counts"])
    assert heights == sorted(np.round(counts[counts > 0] / counts.sum(), 9).tolist())


@pytest.mark.parametrize("names", [("p", "q"), ("builtin:tiny-pairrm", "rmllama", "rmdeberta"),
                                   tuple(f"builtin:tiny-reward-deberta-{k}" for k in range(4)),
                                   ("llm-blender/PairRM", "skywork_reward_llama_3_1_8b_v0_2_bf16_run",
                                    "armorm_llama3_8b_v0_1_multi_objective_rm", "c" * 30),
                                   ("OpenAssistant/reward-model-deberta-v3-large-v2", "s" * 40, "t"),
                                   ("x" * 60 + "/" + "y" * 40, "s" * 40, "t")])
@pytest.mark.parametrize("agreeing", [True, False])
def test_the_agreement_figure_is_readable_for_any_number_of_pairs(names, agreeing):
    # three scorers: 'builtin:tiny-pairrm vs rmllama' and the other pairs' names ran into each other below the bars;
    # four (6 pairs) drew a figure 27.6 inches wide; the legends lay over the tallest bars (the same picks' legend
    # over scorers that mostly agree, the pairs' over the tau of scorers that do not); names as long as a scorer's
    # may be (40 characters, a hub id's more) put the pairs' legend's colour keys and first letters off the figure
    rng = np.random.default_rng(3)
    base = rng.normal(size=240) if agreeing else np.zeros(240)
    block = sa.agreement({name: (base + rng.normal(scale=0.1 * (i + 1) if agreeing else 1.0, size=240),
                                 np.full(60, 4)) for i, name in enumerate(names)}, names[0], "last")
    figure = plots.scorer_agreement(block)
    width, height = figure.get_size_inches()
    assert width <= 12.8 and height <= 8.8, (width, height)
    (canvas := FigureCanvasAgg(figure)).draw()  # as saved (the labels are placed when drawn)
    renderer = canvas.get_renderer()
    boxes = [label.get_window_extent(renderer) for label in figure.axes[1].get_yticklabels()]
    assert len(boxes) == len(block["pairs"])
    assert not [(a, b) for a, b in itertools.combinations(boxes, 2) if a.overlaps(b)]
    legends = figure.findobj(Legend)
    assert len(legends) == 1 + (len(names) > 2)  # same chosen / same rejected, and the pairs' colours
    bars = [bar.get_window_extent(renderer) for ax in figure.axes for bar in ax.patches
            if bar.get_height() > 0 and bar.get_width() > 0]
    for box in boxes + [legend.get_window_extent(renderer) for legend in legends]:
        assert figure.bbox.x0 <= box.x0 and box.x1 <= figure.bbox.x1 and figure.bbox.y0 <= box.y0, (box, figure.bbox)
    for legend, panel in ((legend, legend.figure) for legend in legends):  # each under its own panel
        assert panel.bbox.x0 <= legend.get_window_extent(renderer).x0 <= legend.get_window_extent(renderer).x1 <= \
            panel.bbox.x1, (legend.get_window_extent(renderer), panel.bbox)
    for legend in legends:
        assert not [bar for bar in bars if legend.get_window_extent(renderer).overlaps(bar)], legend


def test_card_states_the_agreement_in_both_languages(two_scorers):
    _, run, result = two_scorers
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(run.root)}))
    body = repro_card.render_body(facts)
    english, chinese = body.split("\n---\n", 1)
    pair = result.metrics["agreement"]["pairs"][0]
    for half, heading, aside in ((english, "### Agreement between scorers", " ("),
                                 (chinese, "### 评分模型之间的一致性", "（")):  # (each half's own brackets)
        assert heading in half and "`builtin:tiny-pairrm`" in half
        row = next(line for line in half.splitlines() if line.startswith("| `builtin:tiny-pairrm` vs `tiny-seqcls`"))
        assert f"| 60 | {pair['same_chosen']['count']}{aside}" in row and "| 12 |" in row
    assert "picked by the primary scorer `builtin:tiny-pairrm`" in english
    assert "figures/scorer_agreement.png" in english


def test_one_scorer_changes_nothing_and_removes_an_old_agreement(two_scorers, tmp_path):
    rows, run_two, two = two_scorers
    one = _run(tmp_path, [{k: v for k, v in r.items() if k != SECOND} for r in rows], "one")
    # the run rebuilt with one scorer, analysed where an earlier analysis of two scorers left its table and figure
    run = RunDir(tmp_path / "again")
    shutil.copytree(run_two.root, run.root)
    shutil.rmtree(run.dataset)
    shutil.copytree(one.dataset, run.dataset)
    result = analysis.analyze(AnalyzeParams(run_dir=str(run.root), bootstrap_resamples=200))
    m = json.loads(run.metrics.read_text())
    assert "agreement" not in m and result.agreement is None
    assert set(m["figures"]) == set(plots.FIGURE_NAMES) and set(m["tables"]) == {"summary_statistics", "extreme_margins"}
    for stale in ("figures/scorer_agreement.png", "figures/scorer_agreement.svg", "tables/scorer_agreement.csv"):
        assert not (run.root / stale).exists(), stale
    # the same pairs analysed with a second scorer's column: every other number is the same
    differing = {"agreement", "figures", "tables", "dataset"}
    assert {k: v for k, v in m.items() if k not in differing} == {
        k: v for k, v in two.metrics.items() if k not in differing}
    shutil.copy(run.metrics, one.metrics)
    assert "Agreement between scorers" not in repro_card.render_body(
        repro_card.gather_facts(build(CardParams, {"run_dir": str(one.root)})))


def test_scorer_names_from_columns():
    columns = ["candidate_scores", "candidate_scores_armorm", "candidate_scores_", "score_chosen"]
    assert analysis.scorer_columns(columns, "primary") == {"primary": "candidate_scores",
                                                           "armorm": "candidate_scores_armorm"}
    assert analysis.scorer_columns(columns, "armorm") == {"armorm (primary)": "candidate_scores",
                                                          "armorm": "candidate_scores_armorm"}
    assert analysis.primary_scorer_name({"model": "llm-blender/PairRM-hf"}) == "llm-blender/PairRM-hf"
    assert analysis.primary_scorer_name(None) == "primary"
