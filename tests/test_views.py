"""repro.analysis.views: what 01_construct shows of each stage, on rows built the way construct builds them."""

from __future__ import annotations

import json

import datasets
import numpy as np
import pandas as pd

from repro.analysis import report, views
from repro.construct import stages
from repro.dataset_io import output_features
from repro.construct.pairs import CandidateSet, build_row
from repro.parameters import ConstructParams


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


def _built(tmp_path, rows: list[dict], scores: list[list[float]], **params):
    """01_construct's cells up to its pairs cell on `rows` (a JSON-lines source), `scores` in place of a scorer's:
    the pairs, the candidates, the scores and the context the notebook passes to pair_examples."""
    source = tmp_path / "source.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    ctx = stages.begin(ConstructParams(run_dir=str(tmp_path / "run"), source=str(source), device="cpu", **params))
    prompt_rows = stages.slice_rows(ctx, stages.load(ctx))
    cs = stages.candidates(ctx, prompt_rows)
    return stages.build(ctx, prompt_rows, cs, ctx.keep("score", scores)), cs, scores, ctx  # (as its score cell's)


def test_pair_examples_with_the_candidates_show_every_candidates_score_and_the_pair(tmp_path):
    # 01_construct showed counts and three chosen/rejected pairs: no row's full candidate list with its scores
    rows = [{"prompt": f"Question {i}:\n  explain   topic {i} " + "in detail " * 30, "prompt_id": f"p{i}",
             "resp0": f"Answer {i}a " + "long " * 50, "resp1": f"Answer {i}b", "resp2": f"Answer {i}c"}
            for i in range(9)]
    pairs, cs, scores, ctx = _built(tmp_path, rows, [[0.1 * i, -0.05 * i, -0.05 * i] for i in range(9)],
                                    candidate_columns=["resp0", "resp1", "resp2"])
    shown = views.pair_examples(pairs, cs, scores, ctx.picks, ctx.params)
    assert ">largest margin<" in shown.to_html()  # a notebook can show it
    table = shown.data
    assert list(dict.fromkeys(table.index.get_level_values(0))) == ["largest margin", "middle margin",
                                                                   "smallest margin"]
    largest, smallest = table.loc["largest margin"], table.loc["smallest margin"]
    i = int(np.argmax(np.asarray(pairs["score_chosen"]) - np.asarray(pairs["score_rejected"])))
    assert largest.index.tolist() == ["resp0", "resp1", "resp2"]
    assert largest["score"].tolist() == [round(s, 4) for s in scores[i]]
    assert largest["pair"].tolist() == ["chosen", "", "rejected"]  # the last of the two lowest scores
    assert largest["text"].tolist()[1] == f"Answer {i}b" and largest["prompt"].tolist()[0].startswith(f"Question {i}")
    assert smallest["pair"].tolist() == ["chosen", "", "rejected"]  # all tied: the first and the last
    assert "score − 0 × characters" not in table.columns  # no length penalty decided these pairs
    # without the picks build made (or picks of other pairs): the pairs as without candidates
    assert views.pair_examples(pairs, cs, scores).data.equals(views.pair_examples(pairs).data)
    assert views.pair_examples(pairs, cs, scores, ctx.picks[:1]).data.equals(views.pair_examples(pairs).data)


def test_pair_examples_show_the_candidates_of_the_row_each_pair_comes_from_though_another_has_its_prompt(tmp_path):
    # two rows of one prompt text: the smallest margin showed the first row's candidates under the second's pair
    rows = [{"prompt": "Same question?", "prompt_id": "p2", "resp0": "first a", "resp1": "first b"},
            {"prompt": "Another question?", "prompt_id": "p3", "resp0": "third a", "resp1": "third b"},
            {"prompt": "Same question?", "prompt_id": "p2dup", "resp0": "second a", "resp1": "second b"}]
    pairs, cs, scores, ctx = _built(tmp_path, rows, [[1.0, -1.0], [0.5, -0.5], [0.1, 0.2]],
                                    candidate_columns=["resp0", "resp1"])
    table = views.pair_examples(pairs, cs, scores, ctx.picks, ctx.params).data
    largest, smallest = table.loc["largest margin"], table.loc["smallest margin"]
    assert largest["text"].tolist() == ["first a", "first b"] and largest["pair"].tolist() == ["chosen", "rejected"]
    assert smallest["text"].tolist() == ["second a", "second b"]
    assert smallest["score"].tolist() == [0.1, 0.2] and smallest["pair"].tolist() == ["rejected", "chosen"]


def test_pair_examples_mark_the_paired_candidate_not_an_original_of_the_same_text(tmp_path):
    # SPPO's layout (the original pair ranked first, never paired): original_chosen, of resp1's text, was "chosen"
    rows = [{"prompt": f"Question {i}?", "prompt_id": f"p{i}", "resp0": f"short {i}", "resp1": f"best {i}",
             "resp2": f"worst {i}", "chosen": [{"role": "user", "content": f"Question {i}?"},
                                               {"role": "assistant", "content": f"best {i}"}],
             "rejected": [{"role": "user", "content": f"Question {i}?"},
                          {"role": "assistant", "content": f"worst {i}"}]} for i in range(3)]
    pairs, cs, scores, ctx = _built(tmp_path, rows, [[0.9, -0.9, 0.1, 0.9, -0.9]] * 3, output_format="sppo",
                                    candidate_columns=["resp0", "resp1", "resp2"], include_original_pair=True,
                                    original_pair_position="first_scored_only", keep_all_candidates=True)
    table = views.pair_examples(pairs, cs, scores, ctx.picks, ctx.params).data
    block = table.loc["largest margin"]
    assert block.index.tolist() == ["original_chosen", "original_rejected", "resp0", "resp1", "resp2"]
    assert block["pair"].tolist() == ["", "", "", "chosen", "rejected"]


def test_pair_examples_show_the_length_penalised_score_that_picked_the_pair(tmp_path):
    # best_worst_length_penalised: the marks sat on candidates that are not the highest / lowest score shown
    rows = [{"prompt": f"Question {i}?", "prompt_id": f"p{i}", "resp0": "long " * 40, "resp1": "short",
             "resp2": "mid " * 10} for i in range(3)]
    pairs, cs, scores, ctx = _built(tmp_path, rows, [[1.0, 0.5, -0.8]] * 3,
                                    candidate_columns=["resp0", "resp1", "resp2"],
                                    selection="best_worst_length_penalised", length_penalty=0.01)
    table = views.pair_examples(pairs, cs, scores, ctx.picks, ctx.params).data
    block = table.loc["largest margin"]
    penalised = block["score − 0.01 × characters"]
    assert penalised.tolist() == [round(s - 0.01 * len(t), 4) for s, t in zip(scores[0], cs.candidates[0])]
    assert block["pair"].tolist() == ["", "chosen", "rejected"]  # by the penalised score, not the score
    assert penalised.idxmax() == "resp1" and penalised.idxmin() == "resp2" and block["score"].idxmax() == "resp0"


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
    # after a resume: the rows the row cache gave the interrupted call (they read as made here before)
    resumed = views.scorer_table({"cache": {"rows_from_cache": 0, "rows_computed": 2, "resumed_from_cache": 6}})
    assert resumed["value"].to_dict()["rows resumed that the row cache gave the call that made them"] == "6"


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
              "dropped_too_few_candidates", "dropped_duplicate_prompt_id", "kept_one_text", "dropped_long_prompts",
              "empty_candidates_dropped", "dropped_fewer_than_two_nonempty_candidates"] + [
        f"dropped_{r}" for r in (DROP_TIE, DROP_MARGIN, DROP_SINGLE)]
    table = views.counts_table(dict.fromkeys(counts, 1)).data
    assert table["meaning"].str.len().min() > 0, table[table["meaning"] == ""].index.tolist()
    for lang in ("en", "zh"):
        t = repro_card.phrases(lang)
        assert [c for c in counts if not getattr(t, f"count_{c}", None)] == [], lang


def test_texts_in_a_notebook_table_are_shown_as_written_not_read_as_html():
    """A response that explains `<textarea>` opened a live text box in 01's pair examples, which swallowed the rest
    of the table (the smallest margin's example was gone): Styler does not escape cells unless told."""
    texts = ["Explain the <textarea> element", "a <b>bold</b> & <script>x</script> answer"]
    html = report.readable(pd.DataFrame({"prompt": texts, "margin": [0.5, -1.25]})).to_html()
    assert "<textarea>" not in html and "<b>" not in html and "<script>" not in html
    assert ">Explain the &lt;textarea&gt; element<" in html
    assert ">a &lt;b&gt;bold&lt;/b&gt; &amp; &lt;script&gt;x&lt;/script&gt; answer<" in html
    assert ">0.5000<" in html and ">-1.2500<" in html  # numbers as before


def test_column_names_in_a_notebook_table_are_shown_as_written_not_read_as_html():
    """`candidate_columns: ["<img src=x onerror=alert(1)>"]`, a column of a dataset someone sent: the cells were
    escaped, not the header, and JupyterLab ran the <img> of 01_construct's preview (02_analyze's scorer names too)."""
    name = "<img src=x onerror=alert(1)>"
    html = views.rows_preview(datasets.Dataset.from_list([{"prompt": "Why?", name: "Because."}]), ["prompt", name])
    html = html.to_html()
    assert "<img" not in html and ">&lt;img src=x onerror=alert(1)&gt;<" in html and ">Because.<" in html
