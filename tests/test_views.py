"""repro.analysis.views: what 01_construct shows of each stage, on rows built the way construct builds them."""

from __future__ import annotations

import datasets
import numpy as np
import pandas as pd

from repro.analysis import report, views
from repro.dataset_io import output_features
from repro.construct.pairs import CandidateSet, build_row


def _pairs(n: int = 9) -> datasets.Dataset:
    rows = []
    for i in range(n):
        prompt = f"Question {i}:\n  explain   topic {i} " + "in detail " * 30
        candidates = [f"Answer {i}a " + "long " * 50, f"Answer {i}b", f"Answer {i}c"]
        scores = [0.1 * i, -0.05 * i, -0.05 * i]
        rows.append(build_row({}, prompt, candidates, scores, messages="chosen", keep_all_candidates=True))
    return datasets.Dataset.from_list(rows, features=output_features(True))


def test_shorten_makes_one_bounded_line():
    assert report.shorten("a\n  b\tc") == "a b c"
    long = report.shorten("word " * 100, width=40)
    assert len(long) == 40 and long.endswith("…") and "\n" not in long
    assert report.shorten(None) == ""


def test_pair_examples_are_the_largest_middle_and_smallest_margin():
    pairs = _pairs()
    shown = views.pair_examples(pairs)
    table = shown.data
    # the notebook shows each text to its 160 characters, left-aligned (pandas cut every cell at 50, right-aligned)
    html = shown.to_html()
    assert f">{table.loc['largest margin', 'prompt']}<" in html and len(table.loc["largest margin", "prompt"]) == 160
    assert "text-align: left" in html and ">largest margin<" in html
    assert list(table.index) == ["largest margin", "middle margin", "smallest margin"]
    margins = np.asarray(pairs["score_chosen"]) - np.asarray(pairs["score_rejected"])
    assert table["margin"].tolist() == [round(margins.max(), 4), round(np.sort(margins)[::-1][4], 4), round(margins.min(), 4)]
    largest = int(np.argmax(margins))
    assert table.loc["largest margin", "chosen"].startswith(f"Answer {largest}a long")  # the assistant's response
    assert table.loc["largest margin", "rejected"] == f"Answer {largest}c"  # the last of the lowest scores
    assert all(len(v) <= report.SHORT for v in table["prompt"]) and "\n" not in table.loc["largest margin", "prompt"]
    one = views.pair_examples(_pairs(1)).data
    assert len(one) == 1  # a single pair is shown once


def test_pair_examples_with_the_candidates_show_every_candidates_score_and_the_pair():
    # 01_construct showed counts and three chosen/rejected pairs: no row's full candidate list with its scores
    pairs = _pairs()
    cs = CandidateSet(rows=list(range(len(pairs))), prompts=pairs["prompt"], candidates=pairs["candidates"],
                      names=[["resp0", "resp1", "resp2"]] * len(pairs))
    shown = views.pair_examples(pairs, cs, pairs["candidate_scores"])
    assert ">largest margin<" in shown.to_html()  # a notebook can show it
    table = shown.data
    assert list(dict.fromkeys(table.index.get_level_values(0))) == ["largest margin", "middle margin",
                                                                   "smallest margin"]
    largest, smallest = table.loc["largest margin"], table.loc["smallest margin"]
    i = int(np.argmax(np.asarray(pairs["score_chosen"]) - np.asarray(pairs["score_rejected"])))
    assert largest.index.tolist() == ["resp0", "resp1", "resp2"]
    assert largest["score"].tolist() == [round(s, 4) for s in pairs[i]["candidate_scores"]]
    assert largest["pair"].tolist() == ["chosen", "", "rejected"]  # the last of the two lowest scores
    assert largest["text"].tolist()[1] == f"Answer {i}b" and largest["prompt"].tolist()[0].startswith(f"Question {i}")
    assert smallest["pair"].tolist() == ["chosen", "", "rejected"]  # all tied: the first and the last
    # candidates of other prompts (a set that does not hold these rows): the pairs as without candidates
    other = CandidateSet(rows=[0], prompts=["another prompt"], candidates=[["x", "y"]], names=[["resp0", "resp1"]])
    assert views.pair_examples(pairs, other, [[0.0, 1.0]]).data.equals(views.pair_examples(pairs).data)


def test_counts_table_says_what_each_count_means():
    shown = views.counts_table({"source": 40, "sliced": 10, "kept": 9})
    table = shown.data
    assert "text-align: left" in shown.to_html()  # the meanings read as sentences
    assert table["rows"].to_dict() == {"source": 40, "sliced": 10, "kept": 9}
    assert table.loc["kept", "meaning"] == "rows written to the dataset"
    assert views.counts_table({"dropped": 2}).data.loc["dropped", "meaning"] == "rows dropped by drop_rows"


def test_candidates_table_counts_rows_by_candidates_and_drops():
    cs = CandidateSet(candidates=[["a", "b"], ["a", "b", "c"], ["x", "y"]], dropped={"fewer_than_two_distinct_candidates": 2})
    table = views.candidates_table(cs)
    assert table["rows"].to_dict() == {"2 candidates": 2, "3 candidates": 1,
                                       "dropped: fewer than two distinct candidates": 2}
    cs.one_text = 1  # too_few_candidates: keep
    assert views.candidates_table(cs).loc["kept with one text: chosen = rejected", "rows"] == 1


def test_score_and_margin_figures_are_inline_pngs():
    pairs = _pairs()
    for image in (views.score_distribution(pairs["candidate_scores"]), views.margin_distribution(pairs)):
        assert image.data[:8] == b"\x89PNG\r\n\x1a\n" and image.format == "png"
    scorer = views.scorer_table({"model": "builtin:tiny-pairrm", "stand_in": True, "path": "/somewhere", "dtype": "fp32"})
    assert isinstance(scorer, pd.DataFrame) and scorer["value"].to_dict() == {
        "model": "builtin:tiny-pairrm", "stand_in": "True", "dtype": "fp32"}
    # the row cache's counts as rows of their own, not a dict's repr cut off in the cell
    cached = views.scorer_table({"model": "m", "cache": {"rows_from_cache": 3, "rows_computed": 194,
                                                         "damaged_entries": 0, "key_format": 1}})
    assert cached["value"].to_dict() == {"model": "m", "rows from the row cache": "3", "rows computed": "194"}
    # the rate next to the time it is made of: loading apart (14.3 s beside 4.25 prompts/s of 9.4 s read as wrong)
    timed = views.scorer_table({"prompts": 40, "prompts_per_second": 4.25, "seconds": 14.3, "load_seconds": 4.9,
                                "scoring_seconds": 9.4})["value"].to_dict()
    assert list(timed) == ["prompts", "prompts_per_second", "scoring_seconds", "load_seconds"]
    damaged = views.scorer_table({"cache": {"rows_from_cache": 0, "rows_computed": 2, "damaged_entries": 1}})
    assert damaged["value"].to_dict()["damaged row-cache entries (computed again)"] == "1"


def test_rows_preview_shows_each_text_whole_to_its_bound():
    rows = datasets.Dataset.from_list([{"prompt": "Why " * 60, "resp0": "Because. " * 5, "other": "x"}])
    shown = views.rows_preview(rows, ["prompt", "resp0", "missing"])
    assert list(shown.data.columns) == ["prompt", "resp0"]
    assert f">{report.shorten('Why ' * 60)}<" in shown.to_html()


def test_every_count_a_run_records_has_a_meaning_in_the_notebook_and_both_cards():
    # a selection rule's drops (ties: drop, min_margin, first_scored_only) showed an empty meaning
    from repro import card as repro_card
    from repro.construct.selection import DROP_MARGIN, DROP_SINGLE, DROP_TIE
    counts = ["source", "part", "dropped", "after_drop", "sliced", "generated", "with_candidates", "scored", "kept",
              "dropped_too_few_candidates", "dropped_duplicate_prompt_id", "kept_one_text"] + [
        f"dropped_{r}" for r in (DROP_TIE, DROP_MARGIN, DROP_SINGLE)]
    table = views.counts_table(dict.fromkeys(counts, 1)).data
    assert table["meaning"].str.len().min() > 0, table[table["meaning"] == ""].index.tolist()
    for lang in ("en", "zh"):
        t = repro_card.phrases(lang)
        assert [c for c in counts if not getattr(t, f"count_{c}", None)] == [], lang
