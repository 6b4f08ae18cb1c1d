"""repro.compare: alignment, coverage, slice inference, pair and score agreement, on datasets with known differences."""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import re
import unicodedata
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import html_elements, shown_text
from markdown_it import MarkdownIt
from scipy import stats as sps

from repro import compare
from repro.analysis import number, stats
from repro.cli import main
from repro.dataset_io import output_features, prompt_id_of, write_split
from repro.exporters import export_rows
from repro.errors import DataError, DatasetLoadError, ParameterError
from repro.manifest import Manifest, sha256_file
from repro.construct.pairs import build_row
from repro.parameters import CompareParams, ConstructParams, build
from repro.paths import RunDir
from repro.records import CARD_COMPARE, COMPARE_FIX, checked
from repro.slicing import plan_slice
from repro.sources import demo_path
from repro.subject import mark_scorer

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))


def demo_rows() -> list[dict]:
    """The demo's 40 prompts built into rows of the seed's shape, with fixed scores (no model needed)."""
    rng = np.random.default_rng(3)
    rows = []
    for line in demo_path().read_text().splitlines():
        src = json.loads(line)
        cands = [src[c] for c in ("resp0", "resp1", "resp2", "resp3") if src.get(c)]
        scores = [round(float(s), 6) for s in rng.normal(0, 1, len(cands))]
        rows.append(build_row(src, src["prompt"], cands, scores, messages="chosen", keep_all_candidates=False))
    return rows


def write_rows(rows: list[dict], folder) -> str:
    write_split(datasets.Dataset.from_list(rows, features=output_features()), folder)
    return str(folder)


def params(tmp_path, **kw) -> CompareParams:
    return build(CompareParams, {"run_dir": str(tmp_path / "run"), "bootstrap_resamples": 200, **kw})


def assistant(row, side):
    return row[side][-1]["content"]


def perturbed(rows: list[dict]) -> tuple[list[dict], dict]:
    """A "published" copy with known differences; returns it and what the comparison must find."""
    ref = copy.deepcopy(rows)
    known = {}
    dropped = ref[:3]  # rows 0..2: only in the candidate
    ref = ref[3:]
    for k in range(3, 7):  # rows 3..6 swapped (texts and scores)
        r = ref[k - 3]
        r["chosen"], r["rejected"] = r["rejected"], r["chosen"]
        r["score_chosen"], r["score_rejected"] = r["score_rejected"], r["score_chosen"]
    for k in (7, 8):  # the chosen text changed: only rejected equal
        ref[k - 3]["chosen"][-1]["content"] += " (edited)"
    ref[9 - 3]["chosen"][-1]["content"] += " (x)"  # row 9: both texts changed
    ref[9 - 3]["rejected"][-1]["content"] += " (y)"
    jitter = {10: 0.01, 11: -0.02, 12: 0.003, 13: 0.5, 14: -0.25}  # added to the reference's score_chosen
    for k, delta in jitter.items():
        ref[k - 3]["score_chosen"] += delta
    ref[15 - 3]["prompt_id"] = "not-the-same-id"  # row 15: matched by sha256 of the prompt
    ref[16 - 3]["prompt_id"] = "another-id"  # row 16: matched by the normalised prompt only
    ref[16 - 3]["prompt"] = "  " + ref[16 - 3]["prompt"].replace(" ", "\n ", 1) + " "
    extra = copy.deepcopy(ref[20 - 3])
    for n in range(2):  # two rows only in the reference
        new = copy.deepcopy(extra)
        new["prompt"] = f"A prompt the candidate never saw, number {n}."
        new["prompt_id"] = prompt_id_of(new["prompt"])
        ref.append(new)
    random.Random(5).shuffle(ref)
    known.update(dropped=[r["prompt_id"] for r in dropped], jitter=jitter)
    return ref, known


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    base = tmp_path_factory.mktemp("published")
    rows = demo_rows()
    ref, known = perturbed(rows)
    return {"rows": rows, "ref": ref, "known": known, "candidate": write_rows(rows, base / "candidate"),
            "reference": write_rows(ref, base / "reference")}


@pytest.fixture(scope="module")
def compared(published, tmp_path_factory):
    p = build(CompareParams, {"run_dir": str(tmp_path_factory.mktemp("cmp") / "run"), "bootstrap_resamples": 300,
                              "reference": published["reference"], "candidate": published["candidate"]})
    return compare.compare(p), p


# --------------------------------------------------------------------------------------------
# a perturbed copy: every count exact
# --------------------------------------------------------------------------------------------
def test_alignment_and_coverage_of_a_perturbed_copy(compared, published):
    result = compared[0].result
    assert result["reference"]["rows"] == 39 and result["candidate"]["rows"] == 40
    assert result["alignment"]["aligned"] == 37
    assert result["alignment"]["matched_by"] == {"prompt_id": 35, "prompt_sha256": 1, "prompt_normalised": 1}
    cov = result["coverage"]
    assert (cov["in_both"], cov["only_reference"], cov["only_candidate"]) == (37, 2, 3)
    assert {e["prompt_id"] for e in cov["examples"]["only_candidate"]} == set(published["known"]["dropped"])
    assert all(e["prompt"].startswith("A prompt the candidate never saw") for e in cov["examples"]["only_reference"])


def test_pair_agreement_of_a_perturbed_copy(compared):
    pairs = compared[0].result["pairs"]
    assert pairs["categories"] == {"same": 30, "swapped": 4, "same_chosen_only": 0, "same_rejected_only": 2,
                                   "one_shared_other_role": 0, "reranked": 0, "different": 1}
    # `messages` is the chosen conversation (the same list in build_row's rows): the 3 edited chosen texts change
    # it; swapping chosen and rejected does not
    assert pairs["messages"]["equal"] == 37 - 3
    assert pairs["reference_response"] == {"equal": 37, "different": 0, "missing": 0,
                                          "missing_reference": 0, "missing_candidate": 0, "fraction_equal": 1.0}
    # over the 34 rows with the same two texts (30 same, 4 swapped), in the reference's order: the swapped rows'
    # scores were swapped with their texts, so both sides order the two texts alike
    assert pairs["margin_sign"] == {"n": 34, "agree": 34, "fraction": 1.0}


def test_score_agreement_of_a_perturbed_copy(compared, published):
    result = compared[0].result
    s = result["scores"]
    # 30 same pairs x 2 scores, 4 swapped pairs x 2 crossed scores, 2 rows with only rejected equal
    assert s["values"] == 70 and s["rows"] == 36
    assert s["from"] == {"chosen": 30, "rejected": 32, "crossed": 8, "other": 0}  # no candidates listed: no other
    assert s["margin"]["n"] == 30  # margins of the same pair only: a swapped pair's margins have opposite meanings
    # an independent account: every same-text score pair from the rows themselves
    by_id = {r["prompt_id"]: r for r in published["rows"]}
    ref_x, cand_y = [], []
    for r in published["ref"]:
        c = by_id.get(r["prompt_id"]) or next((v for v in published["rows"] if " ".join(v["prompt"].split()) ==
                                               " ".join(r["prompt"].split())), None)
        if c is None:
            continue
        for ref_side in ("chosen", "rejected"):
            for cand_side in ("chosen", "rejected"):
                if assistant(r, ref_side) == assistant(c, cand_side):
                    ref_x.append(r[f"score_{ref_side}"]), cand_y.append(c[f"score_{cand_side}"])
    x, y = np.array(ref_x), np.array(cand_y)
    d = y - x
    assert len(x) == 70
    got = s["scores"]
    assert got["pearson"] == pytest.approx(sps.pearsonr(x, y).statistic)
    assert got["spearman"] == pytest.approx(sps.spearmanr(x, y).statistic)
    ccc = 2 * np.cov(x, y, ddof=0)[0, 1] / (x.var() + y.var() + (x.mean() - y.mean()) ** 2)
    assert got["lin_ccc"] == pytest.approx(ccc)
    jitter = published["known"]["jitter"]
    assert got["bland_altman"]["mean_difference"] == pytest.approx(-sum(jitter.values()) / 70)
    assert got["bland_altman"]["loa_high"] == pytest.approx(d.mean() + 1.959963984540054 * d.std(ddof=1))
    assert got["max_abs_difference"] == pytest.approx(0.5)
    assert got["within"] == {"1e-06": 65 / 70, "0.001": 65 / 70, "0.01": 66 / 70, "0.1": 68 / 70}
    ci = got["ci95"]
    for name in ("pearson", "spearman", "lin_ccc", "mean_difference"):
        value = got["bland_altman"]["mean_difference"] if name == "mean_difference" else got[name]
        assert ci[name][0] <= value <= ci[name][1], name


def test_disagreements_are_listed_and_explained(compared):
    result, tables = compared[0].result, compared[0].tables
    table = tables["disagreements"]
    # 4 swapped + 2 only-rejected + 1 different + 5 jittered (all over 1e-3) + the row matched by its normalised
    # prompt only (no proof of the same prompt, so no agreement)
    assert result["disagreements"]["rows"] == len(table) == 13
    assert table["prompt_id"].notna().all()
    # the swapped rows, texts and scores swapped together, are said to be (they were "unexplained")
    assert result["disagreements"]["explanations"] == {
        "a different candidate text": 3, "unexplained": 5,
        "prompt matched only after whitespace/Unicode normalisation": 1,
        "chosen and rejected the other way round, the same scores (one side's chosen scored lower)": 4}
    assert set(table.loc[table["pair"] == "same", "max_abs_score_difference"].round(6)) >= {0.01, 0.02, 0.003, 0.5}
    # a row that shares no text with its reference row has no same-text score to differ (it read 0.0)
    assert table.loc[table["pair"] == "different", "max_abs_score_difference"].isna().all()
    assert (table["pair"] == "different").sum() == 1


def test_compare_datasets_takes_what_load_side_takes(compared, published):
    # a script's compare_datasets(path, path, p) raised "AttributeError: 'str' object has no attribute 'table'"
    result, p = compared[0].result, compared[1]
    got = compare.compare_datasets(published["reference"], [Path(published["candidate"])], p)[0]
    assert got == {k: v for k, v in result.items() if k in got} and got["candidate"]["specs"] == ["local:candidate"]
    with pytest.raises(ParameterError, match=r"^candidate is a DataFrame: give a dataset's hub id, folder or file"):
        compare.compare_datasets(published["reference"], pd.DataFrame({"prompt": ["a"]}), p)


def test_trls_conversational_rows_match_the_rows_they_were_made_from(published, tmp_path):
    """to_trl's rows (`prompt` a [user] conversation, `chosen` / `rejected` the assistant turn) stopped 04_compare
    with "AttributeError: 'list' object has no attribute 'encode'"; their prompt is its user turn's text now."""
    from repro.formats import to_trl

    trl = tmp_path / "trl.parquet"
    to_trl(datasets.load_dataset(published["candidate"], split="train_prefs")).to_parquet(str(trl))
    result = compare.compare_datasets(published["candidate"], str(trl), params(tmp_path))[0]
    assert result["alignment"]["aligned"] == 40 and result["pairs"]["categories"]["same"] == 40
    assert result["alignment"]["matched_by"]["prompt_id"] == 40


def test_the_main_figures_read_as_one_table(compared):
    # the notebook showed compare.json's nested dict, 150 lines of it; the table is what a reader scans
    table = compare.summary_table(compared[0].result)
    value = table["value"].to_dict()
    assert value[("rows", "aligned")] == "37 of 39 reference rows (35 by prompt_id, 1 by prompt_sha256, 1 by " \
                                         "prompt_normalised)"
    assert (value[("rows", "only in the reference")], value[("rows", "only in the candidate")]) == ("2", "3")
    assert value[("pairs", "same chosen and rejected")] == "30 (81.1 %)"
    assert value[("pairs", "swapped")] == "4 (10.8 %)"
    assert value[("pairs", "margin signs agree")] == "34 of 34 (100.0 %)"
    scores = compared[0].result["scores"]["scores"]
    low, high = scores["ci95"]["pearson"]
    assert value[("scores of the same texts (70)", "Pearson r")] == f"{scores['pearson']:.4g} [{low:.4g}, {high:.4g}]"
    assert value[("scores of the same texts (70)", "max |difference|")] == "0.5"
    assert value[("scores of the same texts (70)", "within 0.01")] == "94.3 %"  # 66 of 70
    assert ("margins of the same pairs (30)", "Spearman ρ") in value
    roles = compared[0].result["scores"]["by_role"]
    assert value[("scores of the same texts (70)", "Pearson r within chosen / rejected")] == \
        f"{roles['chosen']['pearson']:.4g} (n = 30) / {roles['rejected']['pearson']:.4g} (n = 32)"
    assert not any(measure == "95% intervals" for _, measure in value)  # 37 rows, 30 of them the same pairs'
    assert "few_rows_note" not in [note[0] for note in compared[0].result["note_facts"]]


def test_a_published_folder_named_with_square_brackets_is_compared(published, tmp_path):
    # datasets reads the files it is given as glob patterns: a published folder named pub[1] matched none of its
    # own shards ("At least one valid data file must be specified"), and 04_compare could not load it
    pub = write_rows(published["rows"], tmp_path / "pub[1]")
    same = compare.compare(params(tmp_path / "run", reference=pub, candidate=published["candidate"]))
    assert same.result["verdict"].startswith("**Reproduced within 0.001: all 40 reference rows (split `train_prefs`) "
                                             "agree**.")


def test_the_verdict_opens_with_its_conclusion(compared, published, tmp_path):
    # the verdict ran from "37 of 39 reference rows aligned" through every statistic and never said whether the
    # dataset was reproduced; the card's "rows that disagree" named neither the tolerance nor the split
    verdict = compared[0].result["verdict"]
    assert verdict.split("\n\n")[0] == (
        "**Partly reproduced within 0.001: 24 of 39 reference rows (split `train_prefs`) agree**; 13 differ "
        "(tables/compare_disagreements.csv), 2 only in the reference (tables/compare_only_reference.csv); the "
        "candidate has 3 rows the reference lacks (tables/compare_only_candidate.csv).")
    assert verdict.split("\n\n")[1].startswith("37 of 39 reference rows aligned")
    en, zh = card_sections(compared[0].result)
    assert "| rows that disagree (tolerance 0.001; split `train_prefs`) | 13 |" in en
    assert "| 不一致的行（容差 0.001；划分 `train_prefs`） | 13 |" in zh
    same = compare.compare(params(tmp_path / "same", reference=published["candidate"],
                                  candidate=published["candidate"]))
    assert same.result["verdict"].startswith("**Reproduced within 0.001: all 40 reference rows (split `train_prefs`) "
                                             "agree**.\n\n40 of 40")
    unscored = tmp_path / "unscored.jsonl"
    unscored.write_text("".join(json.dumps({k: v for k, v in r.items() if not k.startswith("score_")}) + "\n"
                                for r in published["rows"][:10]))
    pairs = compare.compare(params(tmp_path / "pairs", reference=str(unscored), candidate=published["candidate"]))
    assert pairs.result["verdict"].startswith("**Reproduced on pairs only (scores not compared): all 10 reference rows "
                                              "(split `train_prefs`) agree**; the candidate has 30 rows the reference "
                                              "lacks")
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_text("".join(json.dumps({("chosen_conv" if k == "chosen" else k): v for k, v in r.items()}) + "\n"
                               for r in published["rows"]))
    texts = compare.compare(params(tmp_path / "texts", reference=str(renamed), candidate=published["candidate"]))
    assert texts.result["verdict"].startswith("**Not compared: no pair nor score of the 40 aligned rows (split "
                                              "`train_prefs`) could be compared** (see below).\n\n40 of 40")


def test_a_byte_identical_rebuild_agrees_at_a_tolerance_of_zero(published, tmp_path):
    # a same-text score equal on both sides is not further apart than 0: no row is listed, every score within 0
    same = compare.compare(params(tmp_path, reference=published["candidate"], candidate=published["candidate"],
                                  disagreement_tolerance=0, score_tolerances=[0])).result
    assert same["disagreements"]["rows"] == 0 and same["scores"]["scores"]["within"] == {"0": 1.0}
    assert same["verdict"].startswith("**Reproduced within 0: all 40 reference rows (split `train_prefs`) agree**.")


def test_the_split_compared_is_named_and_the_others_are_said(published, tmp_path):
    # a reference of two splits: the card and the verdict never said which was compared, nor that test_prefs was not
    two = tmp_path / "two"
    write_rows(copy.deepcopy(published["rows"]), two)
    write_split(datasets.Dataset.from_list(copy.deepcopy(published["rows"][:10]), features=output_features()), two,
                "test_prefs")
    result = compare.compare(params(tmp_path / "a", reference=str(two), candidate=published["candidate"])).result
    assert result["reference"]["other_splits"] == ["test_prefs"] and result["candidate"]["other_splits"] == []
    assert result["verdict"].startswith("**Reproduced within 0.001: all 40 reference rows (split `train_prefs`) "
                                        "agree**.")
    assert ("**Other splits not compared.** Only split `train_prefs` was compared; the reference also has split "
            "`test_prefs`: to compare another, set reference_split and candidate_split to it.") in result["notes"]
    en, zh = card_sections(result)
    assert "| rows that disagree (tolerance 0.001; split `train_prefs`) | 0 |" in en
    assert "- Other splits not compared: only split `train_prefs` was compared; the reference also has `test_prefs`." \
           in en
    assert "- 未比较的其他划分：只比较了划分 `train_prefs`；参考数据集另有 `test_prefs`。" in zh
    # another split on each side: both named
    other = compare.compare(params(tmp_path / "b", reference=published["candidate"], candidate=str(two),
                                   candidate_split="test_prefs")).result
    assert other["verdict"].startswith("**Partly reproduced within 0.001: 10 of 40 reference rows (split `train_prefs` "
                                       "against the candidate's `test_prefs`) agree**; 30 only in the reference")
    assert ("Only split `train_prefs` against the candidate's `test_prefs` was compared; the candidate also has split "
            "`train_prefs`") in other["verdict"]
    en, zh = card_sections(other)
    assert "| rows that disagree (tolerance 0.001; split `train_prefs` against this dataset's `test_prefs`) | 0 |" in en
    assert "| 不一致的行（容差 0.001；划分 `train_prefs`，本数据集为 `test_prefs`） | 0 |" in zh
    assert "本数据集另有 `train_prefs`" in zh


def test_the_disagreements_read_in_a_notebook(compared):
    # the two 64-character prompt ids took most of the width and pushed pair and explanation off the screen
    table = compared[0].tables["disagreements"]
    html = compare.disagreements(compared[0]).to_html()
    full = table["prompt_id"].iloc[0]
    assert len(full) == 64 and full not in html and f">{full[:11]}…<" in html
    assert "explanation" in html and "a different candidate text" in html
    # the candidate's id is shown only where it differs from the reference's on some row
    assert ("candidate_prompt_id" in html) == bool((table["candidate_prompt_id"] != table["prompt_id"]).any())
    same = dataclasses.replace(compared[0], tables={"disagreements": table.assign(candidate_prompt_id=table["prompt_id"])})
    assert "candidate_prompt_id" not in compare.disagreements(same).to_html()


def test_no_disagreement_is_said_in_a_sentence(compared):
    result = compared[0]
    none = dataclasses.replace(result, tables={"disagreements": result.tables["disagreements"].iloc[:0]})
    assert "No aligned row disagrees" in compare.disagreements(none).data  # not a table of headers only


def test_the_summary_table_shows_the_names_in_a_reason_as_they_are(published, tmp_path):
    # the notebook's summary table (a pandas table: no Markdown) showed the reason scores were not compared as the
    # verdict (Markdown) escapes it: a column "a $1 | *b* _c_ <d> `e`" shown with its $, *, _, <, ` escaped
    odd = "a $1 | *b* _c_ <d> `e`"
    rows = [{**{k: v for k, v in r.items() if k != "score_chosen"}, odd: "x", "score $ chosen": r["score_chosen"]}
            for r in published["rows"]]
    (path := tmp_path / "reference.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = compare.compare(params(tmp_path, reference=str(path), candidate=published["candidate"])).result
    said = compare.summary_table(result)["value"][("scores", "not compared")]
    assert said.startswith(f"The reference lacks score_chosen (its columns: {', '.join(rows[0])}); its `score $ chosen` "
                           f"may be `score_chosen` renamed: rename it back. Scores cannot be compared"), said
    assert "a \\$1 | \\*b\\* \\_c\\_ &lt;d&gt; &#96;e&#96;" in result["verdict"]  # (Markdown: escaped, as text)


def test_text_from_the_data_never_becomes_html_in_the_verdict(published, tmp_path):
    """A reference someone sent, with a column named "<img src=x onerror=...>", its score_chosen renamed
    "Score`<chosen>`" and two rows of prompt_id "<img src=3>": the verdict (04_compare's output) listed its columns and
    the duplicated id as they were, and put the renamed column between backticks it closed; the slice sentence did
    the same with a file's name and the candidate run's parameters (from its manifest). JupyterLab ran the <img>s.
    Now they show as text."""
    rows = copy.deepcopy(published["rows"])
    for r in rows:
        r["Score`<chosen>`"], r["<img src=x onerror=alert(1)>"] = r.pop("score_chosen"), "x"
    rows[1]["prompt_id"] = rows[2]["prompt_id"] = "<img src=3>"
    (path := tmp_path / "reference.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    verdict = compare.compare(params(tmp_path, reference=str(path), candidate=published["candidate"]))._repr_markdown_()
    assert html_elements(verdict) == []
    for shown in (", <img src=x onerror=alert(1)>)", "its Score`<chosen>` may be score_chosen renamed",
                  "with <img src=3>…"):
        assert shown in shown_text(verdict)
    source, name, drop = pa.table({"prompt": [f"Prompt {i}." for i in range(40)]}), "<img src=x onerror=f(4)>", "<b>"
    sides = [compare.Side(side, [name], "train_prefs", source.slice(10, 20), np.zeros(20, dtype=np.int64))
             for side in ("reference", "candidate")]
    result = compare.compare_datasets(*sides, params(tmp_path / "slice", reference="x"), source,
                                      hints={"part_start": 0, "drop_from": drop})[0]
    for shown in (result["verdict"], *card_sections(result)):  # (and the card's Reproduction section, each language)
        assert html_elements(shown) == [] and f"drop_from={drop}" in shown_text(shown), shown
    assert f"(got {drop!r})). local:{name}: reproduced exactly by part_start=0" in shown_text(result["verdict"])


def test_a_published_folder_and_a_run_someone_sent_never_put_html_or_links_in_the_verdict(published, tmp_path):
    """A published folder named `<img src=x onerror=...>` and a `](javascript:...)` link, with its score_chosen and a
    duplicated prompt_id so named, compared with a run folder someone sent whose manifest records that text as a
    reason its construction dropped rows (`dropped_<...>`) and as its `limit`: the verdict's slice sentence
    (04_compare's output, compare.json's `verdict`) held the reason and the limit as they were, and the card the limit;
    JupyterLab ran the <img>. Now the reason shows as text, nothing of it is a link, and text as a limit is refused
    where the manifest is read (no run's record)."""
    evil = "<img src=x onerror=alert(1)> ` [x](javascript:alert(1))"
    rows = [r for i, r in enumerate(copy.deepcopy(published["rows"])) if i not in (5, 6)]  # the two it dropped
    for r in (reference := copy.deepcopy(rows)):
        r[evil] = r.pop("score_chosen")  # (its scores: not compared)
    reference[1]["prompt_id"] = reference[2]["prompt_id"] = evil
    name = evil.replace("[", "")  # (a folder's `[x]` is a glob pattern to datasets: none of its files found)
    write_split(datasets.Dataset.from_list(reference), folder := tmp_path / name)
    run = RunDir(tmp_path / "sent")
    recipe = {"part_start": 0, "part_stop": None, "drop_rows": 0, "drop_from": "end", "mini_index": 0, "mini_count": 1}
    (m := Manifest(run)).start_run({**recipe, "limit": None}, ["01_construct"])
    m.set_counts(source=40, **{f"dropped_{evil}": 2}, kept=38)
    write_rows(rows, run.dataset)
    source = pa.table({k: [r[k] for r in published["rows"]] for k in ("prompt_id", "prompt")})
    markdown = MarkdownIt().enable("table")
    markdown.validateLink = lambda url: True  # (markdown-it drops javascript: links itself; JupyterLab's marked not)
    result = compare.compare_datasets(str(folder), str(run.root), params(tmp_path, reference="x"), source,
                                      compare._hints(str(run.root)))[0]
    for shown in (result["verdict"], *card_sections(result)):  # (and the card's Reproduction section)
        tokens = [t for token in markdown.parse(shown) for t in [token, *(token.children or [])]]
        assert html_elements(shown) == [] and not [t for t in tokens if t.type in ("link_open", "image")], shown
    text = shown_text(result["verdict"])
    assert f"([5:7]; {evil}: 2)" in text and f"local:{name}: " in text
    assert f", {evil}). Scores cannot be compared" in text and "with <img src=x onerr…)" in text  # (prompt_id, cut)
    # text as its limit: not a run's record (repro.records), refused naming the file and the place
    m.update(parameters={**recipe, "limit": evil})
    with pytest.raises(DataError, match=re.escape(f'{run.manifest} holds "<img src=x onerror=alert(1)> ` [x](j... as '
                                                  'its parameters["limit"] where a whole number belongs')):
        compare._hints(str(run.root))


def test_outputs_are_written_and_recorded(compared):
    result, p = compared
    run = RunDir(p.run_root)
    on_disk = json.loads((run.root / "compare.json").read_text())
    assert on_disk["alignment"] == result.result["alignment"]
    assert on_disk["verdict"].split("\n\n")[1].startswith("37 of 39 reference rows aligned")
    # of 37, every pair in one of the four (2 rows share only the rejected text)
    assert ("; 81.1 % same pairs, 10.8 % swapped, 5.4 % with one text in common, 2.7 % different candidates;"
            in on_disk["verdict"])
    outputs = Manifest(run).read()["outputs"]
    for name in compare.TABLES:
        assert f"tables/compare_{name}.csv" in outputs
    for name in compare.FIGURES:
        assert f"figures/{name}.png" in outputs and f"figures/{name}.svg" in outputs
    for rel, out in outputs.items():
        assert sha256_file(run.root / rel) == out["sha256"], rel
    only = pd.read_csv(run.tables / "compare_only_candidate.csv")
    assert len(only) == 3
    assert "/" not in json.dumps(on_disk["reference"]["specs"]).replace("local:", "")


# --------------------------------------------------------------------------------------------
# alignment details
# --------------------------------------------------------------------------------------------
def test_duplicate_prompt_ids_are_reported_not_merged(published, tmp_path):
    ref = copy.deepcopy(published["rows"][:10])
    ref[4]["prompt_id"] = ref[3]["prompt_id"]  # two reference rows claim one id
    result = compare.compare(params(tmp_path, reference=write_rows(ref, tmp_path / "ref"),
                                    candidate=published["candidate"])).result
    assert result["coverage"]["duplicates_reference"] == 2
    # row 4 still matches by its prompt? no: it was left out with its id twin, never merged
    assert result["alignment"]["aligned"] == 8
    # the candidate's row of that id is no row the reference lacks: it is left out with the two (it was counted
    # "only in the candidate", sending a reproducer after a row the rebuild does not have too many of)
    assert result["coverage"]["only_candidate"] == 31 and result["coverage"]["duplicates_candidate"] == 1
    assert "**Duplicates.**" in result["verdict"] and "2 reference rows share 1 prompt_id value (e.g." in result["verdict"]
    assert "and so was the 1 candidate row with such a key (not counted as only in the candidate)" in result["verdict"]
    dup = pd.read_csv(tmp_path / "run" / "tables" / "compare_duplicates.csv")
    assert sorted(zip(dup["side"], dup["row"], dup["rows_with_key"])) == [
        ("candidate", 3, 1), ("reference", 3, 2), ("reference", 4, 2)]
    assert set(dup["duplicated_in"]) == {"reference"}
    assert 3 not in set(pd.read_csv(tmp_path / "run" / "tables" / "compare_only_candidate.csv")["row"])


def test_rows_left_out_for_a_duplicated_key_are_counted_in_the_table_and_the_card(published, tmp_path):
    # "aligned 8 of 10, only in the reference 0": the 2 reference rows (and 1 candidate row) of a duplicated key were
    # in neither count, in the summary table nor in the card
    ref = copy.deepcopy(published["rows"][:10])
    ref[4]["prompt_id"] = ref[3]["prompt_id"]
    result = compare.compare(params(tmp_path, reference=write_rows(ref, tmp_path / "ref"),
                                    candidate=published["candidate"])).result
    assert result["verdict"].startswith(
        "**Partly reproduced within 0.001: 8 of 10 reference rows (split `train_prefs`) agree**; 2 left out, their key "
        "duplicated in the reference (tables/compare_duplicates.csv); the candidate has 31 rows the reference lacks")
    value = compare.summary_table(result)["value"].to_dict()
    assert value[("rows", "left out, their key duplicated (reference / candidate)")] == "2 / 1"
    en, zh = card_sections(result)
    assert "| rows left out, their key duplicated (the reference / this dataset) | 2 / 1 |" in en
    assert "| 因键重复而未对齐的行（参考数据集 / 本数据集） | 2 / 1 |" in zh
    # the note said only "2 of the reference's rows share 1 key value" beside the table's "2 / 1": the candidate's row
    # left out is one whose key is duplicated in the reference, and the note says so
    assert ("- Duplicates: 2 of the reference's rows share 1 key value: they are left out of the alignment, not merged. "
            "Also left out: 1 of this dataset's rows, its key duplicated in the reference.") in en
    assert ("- 重复：参考数据集有 2 行共享 1 个键值：这些行未参与对齐，也未合并。另有本数据集的 1 行因键在参考数据集中重复，"
            "同样未参与对齐。") in zh
    shown = [int(re.split(r"(?<!\\)\|", line)[2].split(" / ")[0]) for line in en.splitlines()
             if line.startswith(("| rows aligned", "| rows only in the reference", "| rows left out"))]
    assert sum(shown) == 10  # every reference row counted once
    unique = compare.summary_table(compare.compare(params(tmp_path / "u", reference=published["candidate"],
                                                          candidate=published["candidate"])).result)
    assert not any("duplicated" in measure for _, measure in unique.index)


def test_rows_left_out_for_a_duplicated_key_name_the_side_that_holds_the_duplicate(published, tmp_path):
    # a key twice in the reference: "the candidate has 1 row left out, its key duplicated", as though the candidate
    # held it twice
    ref = copy.deepcopy(published["rows"][:10])
    ref[4]["prompt_id"] = ref[3]["prompt_id"]
    result = compare.compare(params(tmp_path, reference=write_rows(ref, tmp_path / "ref"),
                                    candidate=published["candidate"])).result
    assert result["coverage"]["duplicated_in"] == {"reference": {"reference": 2}, "candidate": {"reference": 1}}
    assert result["verdict"].split("\n\n")[0] == (
        "**Partly reproduced within 0.001: 8 of 10 reference rows (split `train_prefs`) agree**; 2 left out, their key "
        "duplicated in the reference (tables/compare_duplicates.csv); the candidate has 31 rows the reference lacks "
        "(tables/compare_only_candidate.csv) and 1 row left out, its key duplicated in the reference "
        "(tables/compare_duplicates.csv).")
    # the other way round, and a key twice on both sides
    cand = copy.deepcopy(published["rows"][:10])
    cand[4]["prompt_id"] = cand[3]["prompt_id"]
    ref = copy.deepcopy(published["rows"][:10])
    ref[7]["prompt_id"] = ref[6]["prompt_id"] = cand[7]["prompt_id"] = cand[6]["prompt_id"]
    result = compare.compare(params(tmp_path / "c", reference=write_rows(ref, tmp_path / "r2"),
                                    candidate=write_rows(cand, tmp_path / "c2"))).result
    assert result["verdict"].split("\n\n")[0].endswith(
        "3 left out, their key duplicated: 1 in the candidate and 2 on both sides (tables/compare_duplicates.csv); "
        "the candidate has 4 rows left out, their key duplicated: 2 in the candidate and 2 on both sides "
        "(tables/compare_duplicates.csv).")


def test_a_reference_whose_every_prompt_repeats_is_named_as_such(published, tmp_path):
    # the dataset twice over (several pairs per prompt): "They hold different prompts", with equal ids as its example
    twice = write_rows(copy.deepcopy(published["rows"][:10]) * 2, tmp_path / "twice")
    with pytest.raises(DataError, match=r"No row could be aligned: every prompt of the reference \(20 rows\) is "
                                        r"shared by several rows, .* deduplicate it"):
        compare.compare(params(tmp_path, reference=twice, candidate=published["candidate"]))
    # two repeated keys: the example names the rows of one key, not of both
    some = write_rows(copy.deepcopy(published["rows"][:10] + published["rows"][:2]), tmp_path / "some")
    verdict = compare.compare(params(tmp_path, reference=some, candidate=published["candidate"])).result["verdict"]
    assert "4 reference rows share 2 prompt_id values (e.g. rows 0, 10, counted from 0, with " in verdict


def test_rows_aligned_by_prompt_id_whose_prompts_differ_are_said(published, tmp_path):
    # the same prompt_id on two rows of other prompts: "100 % same pairs", not a word of the prompts
    ref = copy.deepcopy(published["rows"][:10])
    for row in ref[2:4]:
        row["prompt"] = "A different question altogether."
    result = compare.compare(params(tmp_path, reference=write_rows(ref, tmp_path / "ref"),
                                    candidate=published["candidate"])).result
    assert result["alignment"]["prompt_differs"] == 2
    assert ("**Prompts differ.** 2 rows aligned by prompt_id hold other prompt texts on the two sides (e.g. reference "
            "rows 2, 3, counted from 0)") in result["verdict"]


def test_one_row_is_said_in_the_singular(published, tmp_path):
    ref = copy.deepcopy(published["rows"][:10])
    ref[2]["prompt"] = "A different question altogether."
    result = compare.compare(params(tmp_path, reference=write_rows(ref, tmp_path / "ref"),
                                    candidate=published["candidate"])).result
    assert ("**Prompts differ.** 1 row aligned by prompt_id holds another prompt text on the two sides (e.g. "
            "reference row 2, counted from 0)") in result["verdict"]
    sentence = compare.infer_slice([np.array([1, 2, 4, 5])], 7, max_mini_count=1)["sentence"]
    assert "span source rows [1:6] (1 source row before, 1 after). 1 source row inside the span is in no " in sentence


def test_order_of_rows_does_not_matter(published):
    rows = published["rows"]
    keys = compare.row_keys(pa.Table.from_pylist(rows))
    shuffled = list(range(len(rows)))
    random.Random(1).shuffle(shuffled)
    keys2 = compare.row_keys(pa.Table.from_pylist([rows[i] for i in shuffled]))
    a = compare.align(keys, keys2, len(rows), len(rows))
    assert a.n == 40 and [shuffled[j] for j in a.second_rows] == list(a.first_rows)


# --------------------------------------------------------------------------------------------
# slice inference on a synthetic 61135-row source
# --------------------------------------------------------------------------------------------
N_SOURCE = 61135


@pytest.fixture(scope="module")
def source_keys():
    prompts = [f"Synthetic prompt number {i}." for i in range(N_SOURCE)]
    return {"prompt": prompts, "prompt_id": [prompt_id_of(p) for p in prompts]}


def test_one_mini_is_placed_and_its_parameters_found():
    plan = plan_slice(N_SOURCE, ConstructParams(part_start=40000, part_stop=61135, drop_rows=400, mini_index=1,
                                                mini_count=4))
    hints = {"part_start": 40000, "part_stop": 61135, "drop_rows": 400, "drop_from": "end", "mini_index": 1,
             "mini_count": 4}
    out = compare.infer_slice([np.arange(plan.start, plan.stop)], N_SOURCE, max_mini_count=8, hints=hints,
                              names=["mini_1"])
    assert out["span"] == [45183, 50366] and out["inside_span_not_in_reference"]["count"] == 0
    assert out["hints_reproduce"]["exact"] is True
    g = out["groups"][0]
    assert g["contiguous"] and g["solutions"][0] == hints
    # 20732..20735 rows after the drop all cut minis of 5183: drops of 400..403 rows from the end give the same mini
    ends = {s["drop_rows"] for s in g["solutions"] if (s["part_start"], s["part_stop"], s["mini_count"], s["drop_from"])
            == (40000, 61135, 4, "end")}
    assert ends == {400, 401, 402, 403}
    for s in g["solutions"]:
        p = plan_slice(N_SOURCE, ConstructParams(**s))
        assert (p.start, p.stop) == (45183, 50366)
    # the same mini if the 400 rows came off the start of the part instead: the hints then do not reproduce it
    shifted = compare.infer_slice([np.arange(45583, 50766)], N_SOURCE, max_mini_count=8, hints=hints)
    assert shifted["hints_reproduce"]["exact"] is False
    assert {"part_start": 40000, "part_stop": 61135, "drop_rows": 400, "drop_from": "start", "mini_index": 1,
            "mini_count": 4} in shifted["groups"][0]["solutions"]


def test_a_candidate_slice_that_is_every_row_of_several_minis_reproduces_them():
    # a 40-row run compared with the four 10-row minis of it: the verdict said its rows "[0:40], not the reference's"
    minis = [np.arange(10 * i, 10 * i + 10) for i in range(4)]
    whole = {"part_start": 0, "drop_rows": 0, "drop_from": "end", "mini_index": 0, "mini_count": 1}
    out = compare.infer_slice(minis, 40, max_mini_count=8, hints=whole)
    assert out["hints_reproduce"] == {"parameters": whole, "rows": [0, 40], "exact": True}
    assert compare.infer_slice(minis[:3], 40, max_mini_count=8, hints=whole)["hints_reproduce"]["exact"] is False
    gap = compare.infer_slice([minis[0], minis[2], minis[3]], 40, max_mini_count=8, hints=whole)
    assert gap["hints_reproduce"]["exact"] is False  # rows 10-19 are in the candidate's slice, in no mini


def test_a_slice_that_starts_inside_the_source_is_found():
    # rows [10:30] of 40: the search tried only the whole source and said "no parameters reproduce it"
    out = compare.infer_slice([np.arange(10, 30)], 40, max_mini_count=8)
    first = {"part_start": 10, "part_stop": 30, "drop_rows": 0, "drop_from": "end", "mini_index": 0, "mini_count": 1}
    assert out["groups"][0]["solutions"][0] == first
    assert "group 0: reproduced exactly by part_start=10, part_stop=30, drop_rows=0" in out["sentence"]
    for s in out["groups"][0]["solutions"]:
        plan = plan_slice(40, ConstructParams(**s))
        assert (plan.start, plan.stop) == (10, 30)


def test_reference_rows_not_in_the_source_are_never_reproduced_exactly():
    # a reference of source rows [20:40] and 10 prompts the source lacks: "reproduced exactly by part_start=20"
    hints = {"part_start": 20, "drop_rows": 0, "drop_from": "end", "mini_index": 0, "mini_count": 1}
    out = compare.infer_slice([np.arange(20, 40)], 40, max_mini_count=8, hints=hints, not_in_source=[10],
                              names=["local:other"])
    assert out["not_in_source"] == 10 and out["hints_reproduce"]["exact"] is False
    assert "exactly" not in out["sentence"]
    assert "10 of the reference's 30 rows are not in the source" in out["sentence"]
    assert ("The candidate's own parameters (part_start=20, drop_rows=0, drop_from=end, mini_index=0, mini_count=1) "
            "give source rows [20:40], the located ones, but not the 10 the source lacks.") in out["sentence"]
    assert ("local:other: no slice of the source reproduces it (10 of its 30 rows are not in the source); its other "
            "20 rows are those of part_start=20") in out["sentence"]


def test_a_candidate_cut_by_limit_says_its_own_parameters_are_not_checked():
    # its parameters were dropped without a word ("limit" cuts the slice they give)
    hints = {"part_start": 20, "part_stop": 40, "mini_count": 1, "limit": 5}
    out = compare.infer_slice([np.arange(20, 40)], 40, max_mini_count=2, hints=hints)
    assert "hints_reproduce" not in out and out["hints_limited"] == 5
    assert ("The candidate's run kept only its first 5 rows (`limit`): its own parameters are not checked against "
            "the reference's.") in out["sentence"]
    assert out["groups"][0]["solutions"][0]["part_start"] == 20  # still the first tried


def test_invalid_hints_say_why_without_advice_meant_for_a_params_file():
    # the candidate run's own parameters, recorded in its manifest: nothing to fix "with --set" in a comparison
    out = compare.infer_slice([np.arange(100, 200)], N_SOURCE, max_mini_count=2,
                              hints={"part_start": 0, "mini_index": 3, "mini_count": 2})
    why = out["hints_reproduce"]["why"]
    assert out["hints_reproduce"]["rows"] is None and "mini_index" in why and "the candidate run's parameters" in why
    assert "--set" not in why and "params file" not in why


def test_several_minis_with_a_drop_in_the_middle_of_the_part():
    kept = np.r_[np.arange(40000, 50000), np.arange(50400, 61135)]  # 400 rows dropped from the middle
    n = kept.size
    minis = [kept[i * (n // 4): (n if i == 3 else (i + 1) * (n // 4))] for i in range(4)]
    out = compare.infer_slice(minis, N_SOURCE, max_mini_count=8, names=[f"mini_{i}" for i in range(4)])
    assert out["dropped_rows_of_part"] == {"count": 400, "ranges": [[50000, 50400]], "contiguous": True}
    assert out["span"] == [40000, 61135] and out["after_span"] == 0
    g0, g1, g2, g3 = out["groups"]
    assert {"part_start": 40000, "part_stop": 61135, "drop_rows": 400, "drop_from": "end", "mini_index": 0,
            "mini_count": 4} in g0["solutions"]
    assert not g1["contiguous"] and g1["solutions"] == [] and "[50000:50400]" in g1["why_none"]
    assert {"part_start": 40000, "part_stop": 61135, "drop_rows": 400, "drop_from": "start", "mini_index": 2,
            "mini_count": 4} in g2["solutions"]
    assert {"part_start": 40000, "part_stop": 61135, "drop_rows": 400, "drop_from": "start", "mini_index": 3,
            "mini_count": 4} in g3["solutions"]
    assert "400 source rows inside the span are in no reference row (the part's dropped rows" in out["sentence"]
    assert g0["solutions"][0]["mini_index"] == 0 and g0["solutions"][0]["mini_count"] == 4
    assert out["family_solutions"] == [] and "were not dropped from the start or the end" in out["sentence"]
    # the same four minis with the 400 rows dropped from the end: one setting explains the family
    plans = [plan_slice(N_SOURCE, ConstructParams(part_start=40000, part_stop=61135, drop_rows=400, mini_index=i,
                                                mini_count=4))
             for i in range(4)]
    end = compare.infer_slice([np.arange(q.start, q.stop) for q in plans], N_SOURCE, max_mini_count=8)
    assert {"part_start": 40000, "part_stop": 61135, "drop_rows": 400, "drop_from": "end",
            "mini_count": 4} in end["family_solutions"]
    assert end["inside_span_not_in_reference"]["count"] == 0 and end["after_span"] == 400


def test_slice_inference_through_the_comparison(source_keys, tmp_path):
    source = pa.table(source_keys)
    plan = plan_slice(N_SOURCE, ConstructParams(part_start=40000, part_stop=61135, drop_rows=400, mini_index=1,
                                                mini_count=4))
    ids = [source_keys["prompt_id"][i] for i in range(plan.start, plan.stop)]
    prompts = [source_keys["prompt"][i] for i in range(plan.start, plan.stop)]
    ref = compare.Side("reference", ["ref"], "train_prefs", pa.table({"prompt": prompts, "prompt_id": ids}),
                       np.zeros(len(ids), dtype=np.int64))
    # the candidate misses 10 rows in the middle of the mini (and has no prompt_id: matched by the prompt)
    keep = [i for i in range(len(ids)) if not 100 <= i < 110]
    cand = compare.Side("candidate", ["cand"], "train_prefs", pa.table({"prompt": [prompts[i] for i in keep]}),
                        np.zeros(len(keep), dtype=np.int64))
    p = params(tmp_path, reference="x")
    result, tables, _ = compare.compare_datasets(ref, cand, p, source, hints={"part_start": 40000, "part_stop": 61135,
                                                                             "mini_count": 4})
    s = result["slice"]
    assert s["located"] == 5183 and s["not_in_source"] == 0 and s["span"] == [45183, 50366]
    assert s["candidate_ranges"] == [[45183, 45283], [45293, 50366]]
    assert s["groups"][0]["solutions"][0]["drop_rows"] == 400
    assert list(tables["reference_source_index"]["source_index"]) == list(range(45183, 50366))
    assert result["alignment"]["matched_by"] == {"prompt_id": 0, "prompt_sha256": 5173, "prompt_normalised": 0}
    assert result["pairs"]["available"] is False and result["scores"]["available"] is False


def test_a_row_the_construction_dropped_is_no_slice_mismatch(source_keys, tmp_path):
    # too_few_candidates: drop left source row 306 out of an exact rebuild of mini 2 of 8: "The candidate's own
    # parameters (...) give source rows [224:336], not the reference's ... no parameters reproduce it: its rows are not
    # one contiguous range"
    run = RunDir(tmp_path / "rebuilt")
    m = Manifest(run)
    recipe = {"part_start": 0, "part_stop": None, "drop_rows": 100, "drop_from": "end", "mini_index": 2,
              "mini_count": 8, "limit": None}
    m.start_run(recipe, ["01_construct"])
    m.set_counts(source=1000, dropped=100, sliced=112, dropped_too_few_candidates=1, dropped_duplicate_prompt_id=0,
                 kept=111)
    hints = compare._hints(str(run.root))
    assert hints == {**recipe, "dropped": {"too_few_candidates": 1}}  # the part's own `dropped` is no row of its slice
    source = pa.table({k: v[:1000] for k, v in source_keys.items()})
    rows = np.setdiff1d(np.arange(224, 336), [306])
    side = compare.Side("reference", ["ref"], "train_prefs", source.take(rows), np.zeros(rows.size, dtype=np.int64))
    result = compare.compare_datasets(side, dataclasses.replace(side, name="candidate"),
                                      params(tmp_path, reference="x"), source, hints=hints)[0]
    s = result["slice"]
    assert s["hints_reproduce"]["exact"] is True
    assert s["hints_reproduce"]["dropped"] == {"count": 1, "ranges": [[306, 307]], "contiguous": True,
                                               "reasons": {"too_few_candidates": 1}}
    assert ("The candidate's own parameters (part_start=0, drop_rows=100, drop_from=end, mini_index=2, mini_count=8) "
            "reproduce the reference's rows exactly: source rows [224:336] less the 1 row its construction dropped "
            "([306:307]; too few candidates: 1), which the reference lacks too.") in s["sentence"]
    assert ("ref: reproduced exactly by part_start=0, part_stop=1000, drop_rows=100, drop_from=end, mini_index=2, "
            "mini_count=8 (") in s["sentence"]
    assert s["sentence"].endswith(" settings in all), less 1 row the candidate's construction dropped too ([306:307]).")
    assert "not one contiguous range" not in s["sentence"] and "not the reference's" not in s["sentence"]
    en, zh = card_sections(result)
    assert "reproduce the reference's rows exactly, less the 1 row its construction dropped too ([306:307])." in en
    assert "ref: reproduced exactly by part_start=0, part_stop=1000, drop_rows=100, drop_from=end, mini_index=2, " \
           "mini_count=8, less 1 row this dataset's construction dropped too." in en
    assert "恰好复现参考数据集的行（除去其构建时丢弃、参考数据集也没有的 1 行：[306:307]）" in zh
    assert "ref：由 part_start=0、part_stop=1000、drop_rows=100、drop_from=end、mini_index=2、mini_count=8 恰好复现" \
           "（除去本数据集构建时也丢弃的 1 行）" in zh
    # a count that is not the rows the candidate lacks: no telling which rows it dropped
    other = compare.infer_slice([rows], 1000, max_mini_count=8, candidate=rows,
                                hints={**hints, "dropped": {"too_few_candidates": 2}})
    assert other["hints_reproduce"]["exact"] is False and "dropped" not in other["hints_reproduce"]
    # the reference holds the row the candidate dropped: its slice is the parameters', the row only in the reference
    whole = compare.infer_slice([np.arange(224, 336)], 1000, max_mini_count=8, candidate=rows, hints=hints)
    assert whole["hints_reproduce"]["exact"] is True and whole["groups"][0]["solutions"][0]["mini_index"] == 2
    assert "its construction dropped" in whole["sentence"] and "which the reference lacks too" not in whole["sentence"]


def test_a_prompt_the_source_holds_twice_is_placed_at_its_copy_among_the_rows_around_it():
    # source rows 0..39; row 30 repeats row 12's prompt: the reference [10:20] was "1 row not in the source"
    prompts = [f"prompt {i}" for i in range(40)]
    prompts[30] = prompts[12]
    source = {"prompt": prompts, "prompt_id": [str(i) for i in range(40)]}
    del source["prompt_id"]  # matched by the prompt, as a source without ids is
    keys = compare.row_keys(pa.table({"prompt": prompts[10:20]}))
    index = compare.locate(keys, compare.row_keys(pa.table(source)), 10)
    assert list(index) == list(range(10, 20))
    # from the other end of the source, its other copy
    assert list(compare.locate(compare.row_keys(pa.table({"prompt": prompts[25:35]})),
                               compare.row_keys(pa.table(source)), 10)) == list(range(25, 35))
    # in any order (a test split is a random sample): the copy among where the other rows lie, not the row order's
    # neighbours (it picked the wrong copy in 45 of 200 shuffles)
    near = [f"prompt {i}" for i in range(40)]
    near[27] = near[23]  # the copies close together: the reference [25:35] holds the second
    rng = np.random.default_rng(0)
    for _ in range(50):
        order = rng.permutation(10)
        keys = compare.row_keys(pa.table({"prompt": [near[25 + k] for k in order]}))
        assert list(compare.locate(keys, compare.row_keys(pa.table({"prompt": near})), 10)) == [25 + k for k in order]
    # both copies in the reference: each row gets its own
    keys = compare.row_keys(pa.table({"prompt": prompts[10:32]}))
    assert sorted(compare.locate(keys, compare.row_keys(pa.table(source)), 22)) == list(range(10, 32))
    # a row the reference holds twice, whose prompt the source holds again far off: the copy among its rows, twice
    # (the untaken far copy made the rows two ranges)
    keys = compare.row_keys(pa.table({"prompt": prompts[:20] + [prompts[12]]}))
    assert list(compare.locate(keys, compare.row_keys(pa.table(source)), 21)) == [*range(20), 12]
    # a reference holding one source row twice: both copies are placed, and no slice gives it exactly
    twice = compare.row_keys(pa.table({"prompt": prompts[10:16] + prompts[15:20]}))
    index = compare.locate(twice, compare.row_keys(pa.table(source)), 11)
    assert list(index) == [*range(10, 16), *range(15, 20)]
    out = compare.infer_slice([index], 40, max_mini_count=2, hints={"part_start": 10, "part_stop": 20})
    assert out["repeated"] == 1 and out["hints_reproduce"]["exact"] is False and "exactly" not in out["sentence"]
    assert out["inside_span_not_in_reference"]["count"] == 0
    assert out["sentence"].startswith("1 of the reference's 11 rows repeats a source row another reference row holds: "
                                      "no slice repeats a row.")
    assert "give source rows [10:20], the located ones, but not the reference's 1 repeated." in out["sentence"]


def test_no_row_in_common_still_says_where_each_side_lies_in_the_source(source_keys, tmp_path):
    # the wrong mini: nothing to compare, but the source says which rows each side holds (that was lost)
    source = pa.table(source_keys)
    sides = [compare.Side(name, [name], "train_prefs", pa.table({"prompt": source_keys["prompt"][lo:hi]}),
                          np.zeros(hi - lo, dtype=np.int64)) for name, lo, hi in (("ref", 45183, 50366),
                                                                                  ("cand", 40000, 45183))]
    with pytest.raises(DataError, match=r"No row of the candidate .* The reference's 5183 located rows span source "
                                        r"rows \[45183:50366\] .* The candidate's rows are source rows "
                                        r"\[40000:45183\]\."):
        compare.compare_datasets(*sides, params(tmp_path, reference="x"), source)


@pytest.mark.parametrize("decimals", [1, 12])  # with ties, and without
def test_weighted_ranks_equal_ranking_the_drawn_copies(decimals):
    rng = np.random.default_rng(0)
    x = np.round(rng.normal(size=50), decimals)
    w = np.bincount(rng.integers(0, 50, 50), minlength=50)
    ranks = stats._WeightedRanks(x).ranks(w.astype(float))
    assert np.allclose(np.repeat(ranks, w), sps.rankdata(np.repeat(x, w)))


# --------------------------------------------------------------------------------------------
# real rows, re-scored by the stand-in
# --------------------------------------------------------------------------------------------
def test_real_rows_against_themselves_rescored_by_the_stand_in(train_rows, tmp_path, one_torch_thread):
    from scoring_defaults import run_scoring

    real = train_rows[:80]
    rows = [r for r in real if assistant(r, "chosen") != assistant(r, "rejected")]
    prompts = [r["prompt"] for r in rows]
    candidates = [[assistant(r, "chosen"), assistant(r, "rejected")] for r in rows]
    scored = run_scoring(prompts, candidates, model="builtin:tiny-pairrm", device="cpu", dtype="fp32",
                         batch_tokens=4096, chunk_size=64, work_dir=tmp_path / "work", progress=False)
    rebuilt = [build_row(r, r["prompt"], c, s, messages="chosen", keep_all_candidates=False)
               for r, c, s in zip(rows, candidates, scored.scores)]
    reference = tmp_path / "real.jsonl"
    reference.write_text("".join(json.dumps(r) + "\n" for r in real))
    result = compare.compare(params(tmp_path, reference=str(reference),
                                    candidate=write_rows(rebuilt, tmp_path / "rebuilt"))).result
    assert result["alignment"]["aligned"] == len(rows) and result["alignment"]["matched_by"]["prompt_id"] == len(rows)
    assert result["coverage"]["only_reference"] == len(real) - len(rows)
    kept_order = sum(s[0] >= s[1] for s in scored.scores)  # the stand-in also prefers H4's chosen (first wins ties)
    cats = result["pairs"]["categories"]
    assert cats["same"] == kept_order and cats["swapped"] == len(rows) - kept_order and cats["different"] == 0
    # GPT-4 ratings (1-10) against a random model's logits near 0: the scores of the same texts do not agree
    s = result["scores"]["scores"]
    assert s["n"] == 2 * len(rows) and s["within"]["0.1"] == 0.0
    assert s["lin_ccc"] is not None and abs(s["lin_ccc"]) < 0.05


# --------------------------------------------------------------------------------------------
# bad input: one clear paragraph each
# --------------------------------------------------------------------------------------------
def test_no_row_in_common(published, tmp_path):
    other = copy.deepcopy(published["rows"][:5])
    for i, r in enumerate(other):
        r["prompt"] = f"Something else entirely {i}"
        r["prompt_id"] = prompt_id_of(r["prompt"])
    with pytest.raises(DataError, match=r"No row of the candidate \(40 rows.*matches a row of the reference \(5 rows"):
        compare.compare(params(tmp_path, reference=write_rows(other, tmp_path / "o"), candidate=published["candidate"]))
    assert not (tmp_path / "run" / "compare.json").exists()


def test_a_renamed_score_column_is_named_with_the_fix(published, tmp_path):
    path = tmp_path / "renamed.jsonl"
    path.write_text("".join(json.dumps({("chosen_score" if k == "score_chosen" else k): v for k, v in r.items()})
                            + "\n" for r in published["rows"]))
    result = compare.compare(params(tmp_path, reference=str(path), candidate=published["candidate"])).result
    assert result["scores"]["available"] is False
    assert result["scores"]["reason"].startswith("The reference lacks score_chosen (its columns: ")
    assert "; its `chosen_score` may be `score_chosen` renamed: rename it back. Scores cannot be compared without " \
           "both columns on both sides" in result["scores"]["reason"]


def test_seed_columns_on_one_side_only_are_named(published, tmp_path):
    # a renamed prompt_id or reference_response got no word (the "same reference_response" row just went away)
    names = {"prompt_id": "id", "reference_response": "response"}
    path = tmp_path / "renamed.jsonl"
    path.write_text("".join(json.dumps({names.get(k, k): v for k, v in r.items()}) + "\n" for r in published["rows"]))
    for reference, candidate, only in ((str(path), published["candidate"], "candidate"),
                                       (published["candidate"], str(path), "reference")):
        result = compare.compare(params(tmp_path / only, reference=reference, candidate=candidate)).result
        assert (f"**Seed columns on one side only.** Only the {only} has `prompt_id`, `reference_response`: they are "
                "not compared (if one was renamed on the other side, rename it back).") in result["notes"]


def test_a_reference_without_scores_is_compared_on_pairs_only(published, tmp_path):
    path = tmp_path / "noscores.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if not k.startswith("score_")}) + "\n"
                            for r in published["rows"]))
    result = compare.compare(params(tmp_path, reference=str(path), candidate=published["candidate"])).result
    assert result["pairs"]["categories"]["same"] == 40 and result["pairs"]["margin_sign"] is None
    assert result["scores"]["available"] is False
    assert ("**Scores not compared.** The reference lacks score_chosen and score_rejected (its columns: prompt, "
            "prompt_id, messages, reference_response, chosen, rejected). Scores cannot be compared") in result["verdict"]
    assert "figures/compare_scores.png" not in json.dumps(result["figures"])
    value = compare.summary_table(result)["value"].to_dict()
    assert value[("scores", "not compared")] == result["scores"]["reason"]
    assert value[("pairs", "same chosen and rejected")] == "40 (100.0 %)"


def test_what_was_not_compared_is_said_not_counted_as_agreement(published, tmp_path):
    # chosen/rejected renamed, or no scores: "No aligned row disagrees: the same chosen and rejected, ... every score
    # within 0.001", "disagreeing 0", "margin signs agree 0 of 0 (n/a)", "rows that disagree | 0" of pairs or scores
    # never compared
    names = {"chosen": "chosen_conv", "rejected": "rejected_conv"}
    renamed, unscored = tmp_path / "renamed.jsonl", tmp_path / "unscored.jsonl"
    renamed.write_text("".join(json.dumps({names.get(k, k): v for k, v in r.items()}) + "\n"
                               for r in published["rows"]))
    unscored.write_text("".join(json.dumps({k: v for k, v in r.items() if not k.startswith("score_")}) + "\n"
                                for r in published["rows"]))
    texts = compare.compare(params(tmp_path / "t", reference=str(renamed), candidate=published["candidate"]))
    result = texts.result
    assert result["pairs"]["margin_sign"] is None and "margin signs" not in result["verdict"]
    assert "its `chosen_conv` may be `chosen` renamed, its `rejected_conv` may be `rejected` renamed: rename them " \
           "back" in result["pairs"]["reason"]
    assert (result["pairs"]["cause"], result["scores"]["cause"]) == ("no_texts", "no_texts")
    assert result["disagreements"]["not_compared"] == {"pairs": result["pairs"]["reason"],
                                                       "scores": result["scores"]["reason"]}
    said = compare.disagreements(texts).data
    assert "No aligned row disagrees:" not in said and "the same chosen and rejected" not in said
    assert said.startswith("No aligned row was found to disagree, but pairs and scores were not compared: pairs: "
                           "no chosen/rejected texts to compare (the reference lacks chosen and rejected;")
    value = compare.summary_table(result)["value"].to_dict()
    assert value[("rows", "disagreeing")] == "0 (pairs and scores not compared)"
    assert ("pairs", "margin signs agree") not in value
    en, zh = card_sections(result)
    assert "| rows that disagree (tolerance 0.001; split `train_prefs`) | 0 (pairs and scores not compared) |" in en
    assert "margin signs" not in en
    assert "| 不一致的行（容差 0.001；划分 `train_prefs`） | 0（未比较回复对与得分） |" in zh
    assert "margin 符号" not in zh
    assert "- Pairs not compared: the reference lacks chosen and rejected (its `chosen_conv` may be `chosen` " \
           "renamed, its `rejected_conv` may be `rejected` renamed)." in en
    assert "- 未比较回复对：参考数据集缺少 chosen 与 rejected（其 `chosen_conv` 可能是改了名的 `chosen`，" \
           "其 `rejected_conv` 可能是改了名的 `rejected`）。" in zh

    pairs_only = compare.compare(params(tmp_path / "u", reference=str(unscored), candidate=published["candidate"]))
    assert pairs_only.result["scores"]["cause"] == "no_scores"
    said = compare.disagreements(pairs_only).data
    assert said.startswith("No aligned row disagrees in what was compared: the same chosen and rejected. Scores were "
                           "not compared: The reference lacks score_chosen and score_rejected")
    assert "within disagreement_tolerance" not in said
    assert compare.summary_table(pairs_only.result)["value"][("rows", "disagreeing")] == "0 (scores not compared)"
    en, zh = card_sections(pairs_only.result)
    assert "| rows that disagree (tolerance 0.001; split `train_prefs`) | 0 (scores not compared) |" in en
    assert "| 不一致的行（容差 0.001；划分 `train_prefs`） | 0（未比较得分） |" in zh


def test_texts_the_same_but_for_whitespace_or_unicode_form_are_said_so(published, tmp_path):
    # a reference whose texts differ only in surrounding whitespace or NFC vs NFD: "a different candidate text", and
    # a prompt in NFD (its sha256 id another) "only in the reference"
    nfd = unicodedata.normalize("NFD", " café")
    cand, ref = copy.deepcopy(published["rows"][:5]), copy.deepcopy(published["rows"][:5])
    ref[0]["chosen"][-1]["content"] = "\n " + ref[0]["chosen"][-1]["content"] + "  "
    cand[1]["rejected"][-1]["content"] += " café"
    ref[1]["rejected"][-1]["content"] += nfd
    cand[2]["prompt"] += " café"
    ref[2]["prompt"] += nfd
    for row in (cand[2], ref[2]):
        row["prompt_id"] = prompt_id_of(row["prompt"])
    result = compare.compare(params(tmp_path, reference=write_rows(ref, tmp_path / "ref"),
                                    candidate=write_rows(cand, tmp_path / "cand")))
    assert result.result["alignment"]["matched_by"] == {"prompt_id": 4, "prompt_sha256": 0, "prompt_normalised": 1}
    assert result.result["coverage"]["only_reference"] == 0
    why = dict(zip(result.tables["disagreements"]["reference_row"], result.tables["disagreements"]["explanation"]))
    for row in (0, 1):
        assert "the same texts but for whitespace/Unicode form" in why[row] and "different" not in why[row]
    assert "the same texts but for whitespace/Unicode form: 2" in result.result["verdict"]


def test_non_finite_reference_scores_are_left_out_and_said(published, tmp_path):
    # a published copy with a NaN, an infinite and a missing score: the agreement is of the others, and the verdict,
    # the table, the card and each row's explanation say so (not a perfect r over "0 differences" and 3 unexplained)
    rows = copy.deepcopy(published["rows"])
    rows[3]["score_chosen"], rows[5]["score_rejected"], rows[8]["score_chosen"] = float("nan"), float("inf"), None
    path = tmp_path / "nonfinite.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # NaN and Infinity, as Python's json writes them
    out = compare.compare(params(tmp_path, reference=str(path), candidate=published["candidate"]))
    scores = out.result["scores"]
    assert scores["excluded_nonfinite"] == 3 and scores["scores"]["n"] == 77 and scores["scores"]["pearson"] == 1
    assert "max |diff| 0 over 77 values (3 scores NaN, infinite or missing on one side, left out)" in out.result[
        "verdict"]
    assert compare.summary_table(out.result)["value"].to_dict()[("scores", "left out: NaN, infinite or missing")] \
        == "3"
    table = out.tables["disagreements"].set_index("prompt_id")
    flagged = table.loc[[rows[k]["prompt_id"] for k in (3, 5, 8)]]
    assert list(flagged["explanation"]) == ["a NaN, infinite or missing score (left out of the score agreement)"] * 3
    assert list(flagged["max_abs_score_difference"]) == [0, 0, 0] and len(table) == 3  # of the finite ones
    for r in rows:  # every reference score NaN: said so, not only "0 score(s) of the same text"
        r["score_chosen"] = r["score_rejected"] = float("nan")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    reason = compare.compare(params(tmp_path, reference=str(path), candidate=published["candidate"])).result[
        "scores"]["reason"]
    assert reason == "Every score of the same texts is NaN, infinite or missing on one side or both (80 scores)."
    from repro.card import CardFacts, render_section

    facts = CardFacts(run=RunDir(tmp_path / "run"), title="t", features=None, splits=[], built_here=True,
                      license="mit", language=["en"], comparison=json.loads(json.dumps(out.result)))
    assert "| same-text scores left out (NaN, infinite or missing) | 3 |" in render_section(facts, "reproduction", "en")
    assert "| 因 NaN、无穷或缺失而未比较的相同文本得分 | 3 |" in render_section(facts, "reproduction", "zh")


def test_the_cards_left_out_scores_count_those_missing_on_either_side_and_on_both(published, tmp_path):
    # a score NaN on one side and another NaN on both: the card's "same-text scores left out (NaN, infinite or
    # missing)" said 1, and with only the one NaN on both sides no row at all, though neither was compared
    ref, cand = copy.deepcopy(published["rows"]), copy.deepcopy(published["rows"])
    ref[3]["score_chosen"] = float("nan")  # one side
    ref[5]["score_rejected"] = cand[5]["score_rejected"] = float("nan")  # both sides
    paths = {}
    for name, rows in (("ref", ref), ("cand", cand)):
        paths[name] = tmp_path / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = compare.compare(params(tmp_path, reference=str(paths["ref"]), candidate=str(paths["cand"]))).result
    assert out["scores"]["scores"]["n"] == 78  # 80 same-text scores, 2 left out
    assert compare.summary_table(out)["value"].to_dict()[("scores", "left out: NaN, infinite or missing")] == "2"
    en, zh = card_sections(out)
    assert "| same-text scores left out (NaN, infinite or missing) | 2 |" in en
    assert "| 因 NaN、无穷或缺失而未比较的相同文本得分 | 2 |" in zh
    both = compare.compare(params(tmp_path / "both", reference=str(paths["cand"]), candidate=str(paths["cand"])))
    assert both.result["scores"]["scores"]["n"] == 79 and both.result["scores"]["nonfinite_on_both_sides"] == 1
    en, zh = card_sections(both.result)
    assert "| same-text scores left out (NaN, infinite or missing) | 1 |" in en
    assert "| 因 NaN、无穷或缺失而未比较的相同文本得分 | 1 |" in zh


def test_pairs_that_agree_with_every_score_null_are_reproduced_on_pairs_only(published, tmp_path):
    # a reference whose scores are all null beside a candidate of the same pairs: the verdict said "Not reproduced on
    # pairs only (scores not compared): 0 of 10 reference rows agree" though every pair was the same, the note "only 0
    # scores of the same text on both sides (…)" with no full stop, and the Chinese card not why
    ref = copy.deepcopy(published["rows"][:10])
    for row in ref:
        row["score_chosen"] = row["score_rejected"] = None
    out = compare.compare(params(tmp_path, reference=write_rows(ref, tmp_path / "ref"),
                                 candidate=write_rows(published["rows"][:10], tmp_path / "cand"))).result
    assert out["pairs"]["fractions"]["same"] == 1 and out["scores"]["values"] == 0
    assert out["scores"]["cause"] == "nonfinite"  # which the card words (en.jinja, zh.jinja)
    assert out["verdict"].startswith("**Reproduced on pairs only (scores not compared): all 10 reference rows ")
    why = "every score of the same texts is NaN, infinite or missing on one side or both (20 scores)"
    assert f"**Scores not compared.** {why[0].upper()}{why[1:]}.\n" in out["verdict"] + "\n"
    assert out["disagreements"]["rows"] == 0
    en, zh = card_sections(out)
    assert "| 0 (scores not compared) |" in en and "| 0（未比较得分） |" in zh
    assert f"Scores were not compared: {why}." in en
    assert "未比较得分：两侧相同文本的得分全部为 NaN、无穷或缺失（一侧或两侧；共 20 个）。" in zh


def _edited(row: dict) -> dict:  # each row's chosen and rejected response another text: no score of the same text
    return {**row, **{side: row[side][:-1] + [{**row[side][-1], "content": row[side][-1]["content"] + " (edited)"}]
                      for side in ("chosen", "rejected")}}


@pytest.mark.parametrize("cause, change, reason, en_why, zh_why", [
    ("no_texts", lambda rows: [{k: v for k, v in r.items() if k != "rejected"} for r in rows[:10]],
     "No chosen/rejected texts: scores cannot be matched to the same text.",
     "Scores were not compared: no chosen/rejected texts: scores cannot be matched to the same text.",
     "未比较得分：没有 chosen/rejected 文本，无法按相同文本匹配得分。"),
    ("few_values", lambda rows: [{**rows[0], "score_rejected": float("nan")}],
     "only 1 score of the same text on both sides (1 more NaN, infinite or missing on one side)",
     "Scores were compared row by row only: only 1 score of the same text on both sides (1 more NaN, infinite or "
     "missing on one side), too few for statistics.",
     "得分只逐行比较：两侧相同文本的得分只有 1 个（另有 1 个在一侧为 NaN、无穷或缺失），不足以计算统计量。"),
    ("unmatched", lambda rows: [_edited(r) for r in rows[:10]], "No score of the same text is on both sides.",
     "Scores were not compared: no score of the same text is on both sides.",
     "未比较得分：没有哪个文本在两侧都有得分。")],
    ids=["no_texts", "few_values", "unmatched"])  # nonfinite: test_pairs_that_agree_with_every_score_null_…
def test_the_card_says_in_both_languages_why_scores_were_not_compared(published, tmp_path, cause, change, reason,
                                                                      en_why, zh_why):
    # compare.json's scores.reason was English built in Python: the English card repeated it, the Chinese left out
    # what it could not word (the NaN scores on one side; no texts and no score of the same text were one sentence)
    path = tmp_path / "reference.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in change(copy.deepcopy(published["rows"]))))
    result = compare.compare(params(tmp_path, reference=str(path), candidate=published["candidate"])).result
    scores = result["scores"]
    assert (scores["available"], scores.get("cause"), scores["reason"]) == (False, cause, reason)  # still read there
    en, zh = card_sections(result)
    assert en_why in en and zh_why in zh


def test_noise_scores_are_not_hidden_by_the_gap_between_chosen_and_rejected(published, tmp_path):
    # a reference of the same texts whose chosen scores are shuffled across rows (rejected = -chosen): pooled over
    # chosen and rejected, r was high (chosen scores are the high ones on both sides), and the verdict and the card
    # gave only that; each role's r and the margins' r show the scores do not agree
    rows = copy.deepcopy(published["rows"])
    shuffled = np.random.default_rng(0).permutation([r["score_chosen"] for r in rows])
    for r, value in zip(rows, shuffled):
        r["score_chosen"], r["score_rejected"] = float(abs(value)), -float(abs(value))
    candidate = copy.deepcopy(rows)
    for r, original in zip(candidate, published["rows"]):
        r["score_chosen"], r["score_rejected"] = abs(original["score_chosen"]), -abs(original["score_chosen"])
    out = compare.compare(params(tmp_path, reference=write_rows(rows, tmp_path / "ref"),
                                 candidate=write_rows(candidate, tmp_path / "cand")))
    s = out.result["scores"]
    x = np.array([r["score_chosen"] for r in rows])
    y = np.array([r["score_chosen"] for r in candidate])
    assert s["scores"]["pearson"] > 0.6  # pooled: the role gap
    assert s["by_role"]["chosen"] == {"n": 40, "pearson": pytest.approx(sps.pearsonr(x, y).statistic),
                                      "spearman": pytest.approx(sps.spearmanr(x, y).statistic)}
    assert abs(s["by_role"]["chosen"]["pearson"]) < 0.4 and s["by_role"]["rejected"]["n"] == 40
    assert s["margin"]["pearson"] == pytest.approx(sps.pearsonr(2 * x, 2 * y).statistic)
    role, margin = (number(v) for v in (s["by_role"]["chosen"]["pearson"], s["margin"]["pearson"]))
    assert f"(chosen alone {role}, n = 40; rejected alone" in out.result["verdict"]
    assert f"margins of the same pairs: r = {margin} over 40 rows" in out.result["verdict"]
    from repro.card import CardFacts, render_section

    facts = CardFacts(run=RunDir(tmp_path / "run"), title="t", features=None, splits=[], built_here=True,
                      license="mit", language=["en"], comparison=json.loads(json.dumps(out.result)))
    en, zh = (render_section(facts, "reproduction", lang) for lang in ("en", "zh"))
    assert f"| Pearson r within each role (chosen / rejected) | {role} (n = 40) / " in en
    assert f"| 各角色内的 Pearson r（chosen / rejected） | {role} (n = 40) / " in zh
    assert f"| Pearson r of the same pairs' margins | {margin} [" in en and f"| 相同回复对的差值的 Pearson r | {margin} [" in zh


def test_statistics_of_few_rows_say_their_n_and_that_their_intervals_are_too_narrow(train_rows, tmp_path):
    # a stand-in run of 12 fixture rows that ranked 9 of its pairs the other way round against the fixture: by_role
    # held n: 3 per role, but the verdict said "(chosen alone 0.3292, rejected alone 0.9712)", the table and the card
    # "0.3292 / 0.9712" and "Pearson r of the same pairs' margins 0.709 [0.709, 1]", not a word of their 3 rows
    rows = copy.deepcopy(train_rows[:12])
    rng = np.random.default_rng(0)
    for k, r in enumerate(rows):
        if k >= 3:
            r["chosen"], r["rejected"] = r["rejected"], r["chosen"]
        r["score_chosen"], r["score_rejected"] = sorted(rng.normal(0, 3, 2).tolist(), reverse=True)
    candidate = tmp_path / "crossed.jsonl"
    candidate.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = compare.compare(params(tmp_path, reference=str(ROOT / "tests/fixtures/ultrafeedback/train_prefs.jsonl"),
                                 candidate=str(candidate))).result
    s = out["scores"]
    assert (s["by_role"]["chosen"]["n"], s["by_role"]["rejected"]["n"], s["margin"]["n"], s["rows"]) == (3, 3, 3, 12)
    assert s["few_rows"] == {"scores": 12, "margin": 3, "chosen": 3, "rejected": 3}
    chosen, rejected, margin = (number(v) for v in (s["by_role"]["chosen"]["pearson"],
                                                    s["by_role"]["rejected"]["pearson"], s["margin"]["pearson"]))
    assert f"(chosen alone {chosen}, n = 3; rejected alone {rejected}, n = 3)" in out["verdict"]
    assert f"margins of the same pairs: r = {margin} over 3 rows" in out["verdict"]
    note = ("**Few rows.** With fewer than 20 rows (scores of the same texts: 12; margins of the same pairs: 3; "
            "chosen texts alone: 3; rejected texts alone: 3), these statistics are tentative, and their "
            "percentile-bootstrap 95% intervals are too narrow: on normal data they cover the mean about 75% of the "
            "time at 3 rows, 84% at 5 and 90% at 10; read them as rough.")
    assert note in out["notes"] and note in out["verdict"]
    value = compare.summary_table(out)["value"].to_dict()
    assert value[("scores of the same texts (24)", "Pearson r within chosen / rejected")] == \
        f"{chosen} (n = 3) / {rejected} (n = 3)"
    low, high = (number(v) for v in s["margin"]["ci95"]["pearson"])
    assert value[("margins of the same pairs (3)", "Pearson r")] == f"{margin} [{low}, {high}]"
    for section, n in (("margins of the same pairs (3)", "3 rows"), ("scores of the same texts (24)", "12 rows")):
        assert value[(section, "95% intervals")] == f"too narrow: {n}, fewer than 20 (read them as rough)"
    en, zh = card_sections(out)
    assert f"| Pearson r within each role (chosen / rejected) | {chosen} (n = 3) / {rejected} (n = 3) |" in en
    assert f"| 各角色内的 Pearson r（chosen / rejected） | {chosen} (n = 3) / {rejected} (n = 3) |" in zh
    assert f"| Pearson r of the same pairs' margins | {margin} [{low}, {high}] (n = 3) |" in en
    assert f"| 相同回复对的差值的 Pearson r | {margin} [{low}, {high}] (n = 3) |" in zh
    assert ("- Few rows: with fewer than 20 rows (scores of the same texts: 12; margins of the same pairs: 3; chosen "
            "texts alone: 3; rejected texts alone: 3), these statistics are tentative, and their 95% bootstrap "
            "intervals too narrow (on normal data they cover the mean about 75% of the time at 3 rows, 84% at 5 and "
            "90% at 10): read them as rough.") in en
    assert ("- 行数过少：少于 20 行（相同文本的得分：12；相同回复对的差值：3；仅 chosen 文本：3；仅 rejected 文本：3），"
            "这些统计量只是初步结果，其 95% 自助法区间偏窄（在正态数据上，3 行时它约 75% 的情况下覆盖均值，5 行时约 84%，"
            "10 行时约 90%）：请视为粗略估计。") in zh


def test_stand_in_scores_and_scores_on_other_scales_are_said_in_the_verdict(published, tmp_path):
    # a stand-in run compared with UltraFeedback's GPT-4 ratings: "r = -0.1356 ... mean difference -6.9", with
    # nothing to say that the candidate's scores are noise and the two sides are not on one scale
    rows = copy.deepcopy(published["rows"])
    for k, r in enumerate(rows):
        r["score_chosen"], r["score_rejected"] = float(6 + k % 5), float(1 + k % 4)
    run = tmp_path / "candidate_run"
    write_rows(published["rows"], run / "dataset")
    (run / "manifest.json").write_text(json.dumps({"scorer": {"model": "builtin:tiny-pairrm", "stand_in": True}}))
    out = compare.compare(params(tmp_path, reference=write_rows(rows, tmp_path / "ratings"), candidate=str(run)))
    notes = out.result["notes"]
    assert ("**Stand-in scores.** The candidate's scores come from a stand-in scorer (random weights): their "
            "agreement with the reference's says nothing of a real scorer's.") in notes
    assert ("**Different scales.** The reference's scores read as ratings on a grid, the candidate's as real-valued "
            "logits: their differences, tolerances and near-ties compare unlike numbers.") in notes
    assert notes[-1] in out.result["verdict"]
    en, zh = card_sections(out.result)  # the card lists the notes, in both languages
    assert "- Stand-in scores: this dataset's scores come from a stand-in scorer (random weights)" in en
    assert "- 替身分数：本数据集的分数来自替身评分器（随机权重）" in zh
    assert "- Different scales: the reference's scores read as ratings on a grid, this dataset's as real-valued " \
           "logits" in en
    assert "- 尺度不同：参考数据集的分数是网格上的评分，本数据集的是实数 logit" in zh
    plain = compare.compare(params(tmp_path / "plain", reference=published["reference"],
                                   candidate=published["candidate"]))
    assert not any("Stand-in" in n or "scales" in n for n in plain.result["notes"])


def test_too_few_values_give_no_statistics_and_too_few_rows_no_interval(published, tmp_path):
    # one reference row (its chosen and rejected): r = 1, ρ = 1, CCC 1 and an interval [1, 1] over one row
    one = compare.compare(params(tmp_path, reference=write_rows(published["rows"][:1], tmp_path / "one"),
                                 candidate=published["candidate"])).result["scores"]
    assert one["available"] is False and one["reason"] == "only 2 scores of the same text on both sides"
    two = compare.compare(params(tmp_path, reference=write_rows(published["rows"][:2], tmp_path / "two"),
                                 candidate=published["candidate"])).result["scores"]["scores"]
    assert two["n"] == 4 and two["ci95"] == dict.fromkeys(two["ci95"])
    assert two["bootstrap"]["note"] == "fewer than three rows: no interval"


def test_the_verdicts_conclusion_says_when_scores_are_too_few_for_statistics(published, tmp_path):
    # one reference row: "**Reproduced within 0.001: all 1 reference row agrees**", not a word of the scores having
    # no statistics (the summary table's "no statistics" and the card's "too few for statistics" said it)
    out = compare.compare(params(tmp_path, reference=write_rows(published["rows"][:1], tmp_path / "one"),
                                 candidate=published["candidate"])).result
    assert out["verdict"].split("\n\n")[0] == (
        "**Reproduced within 0.001: all 1 reference row (split `train_prefs`) agrees**; scores compared row by row "
        "only, no statistics (only 2 scores of the same text on both sides); the candidate has 39 rows the reference "
        "lacks (tables/compare_only_candidate.csv).")
    enough = compare.compare(params(tmp_path / "two", reference=write_rows(published["rows"][:2], tmp_path / "two"),
                                    candidate=published["candidate"])).result
    assert "no statistics" not in enough["verdict"]


def test_a_hub_reference_is_named_with_the_commit_it_was_read_at(published, tmp_path, monkeypatch):
    # compare.json and the card named the hub id only: a later `hf download` of a newer commit compares other rows
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    commit = "abcdef123456" + "0" * 28
    snapshot = tmp_path / "hub" / "datasets--someone--published" / "snapshots" / commit
    write_split(datasets.Dataset.from_list(published["ref"], features=output_features()), snapshot, "train_prefs")
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text(commit)
    hub = compare.compare(params(tmp_path / "hub_run", reference="someone/published", candidate=published["candidate"]))
    assert hub.result["reference"]["rows"] == 39 and hub.result["reference"]["commits"] == {"someone/published": commit}
    assert json.loads((tmp_path / "hub_run" / "run" / "compare.json").read_text())["reference"]["commits"] == {
        "someone/published": commit}
    en, zh = card_sections(hub.result)
    assert "This dataset was compared with `someone/published` at commit abcdef123456 (`compare.json`," in en
    assert "本数据集已与 `someone/published` 的提交 abcdef123456 对比（`compare.json`，" in zh
    local = compare.compare(params(tmp_path / "local", reference=published["reference"],
                                   candidate=published["candidate"])).result
    assert local["reference"]["commits"] == {}  # a local folder: no commit, the sentence as it was
    en, zh = card_sections(local)
    assert "This dataset was compared with `local:reference` (`compare.json`, made by " in en
    assert "本数据集已与 `local:reference` 对比（`compare.json`，" in zh


def test_an_unreachable_hub_id_offline(published, tmp_path):
    with pytest.raises(DatasetLoadError, match=r"Parameter reference='nobody/nothing-here'.*HF_HUB_OFFLINE.*hf download"):
        compare.compare(params(tmp_path, reference="nobody/nothing-here", candidate=published["candidate"]))


def test_missing_reference_and_bad_parameters(tmp_path):
    with pytest.raises(ParameterError, match="reference is not set"):
        compare.compare(params(tmp_path))
    for bad, value in (("score_tolerances", [-1.0]), ("near_tie", -0.1), ("max_mini_count", 0),
                       ("bootstrap_resamples", 10), ("reference", [])):
        with pytest.raises(ParameterError, match=bad):
            build(CompareParams, {bad: value})
    with pytest.raises(DataError, match="Parameter candidate is not set.*01_construct"):
        compare.compare(params(tmp_path, reference="x.jsonl"))
    # a side with no rows, and one whose rows cannot be matched (neither prompt_id nor prompt)
    empty = tmp_path / "empty.parquet"
    datasets.Dataset.from_dict({"prompt": [], "chosen": []}).to_parquet(empty)  # columns, no rows
    # (a file: no split to name; and one prefix: it said "Parameter reference='...': reference '...' holds ...")
    with pytest.raises(DataError, match=rf"^reference '{empty}' holds no rows"):
        compare.load_side("reference", str(empty), "train_prefs")
    with pytest.raises(DataError, match=rf"^reference '{empty}' holds no rows"):  # a Path as a str (it raised TypeError)
        compare.load_side("reference", empty, "train_prefs")
    with pytest.raises(ParameterError, match=r"^reference is a Dataset: give a dataset's hub id, folder or file \(a "
                                             r"Dataset in memory: save it first, e.g. ds.to_parquet\('x.parquet'\)\), "
                                             r"or a list of them\.$"):
        compare.load_side("reference", datasets.Dataset.from_dict({"prompt": ["a"]}), "train_prefs")
    # an empty list, as CompareParams refuses it (it crashed: "ArrowInvalid: Must pass at least one table")
    with pytest.raises(ParameterError, match=r"^reference is an empty list: name at least one dataset \(a hub id, "
                                             r"folder or file\)\.$"):
        compare.load_side("reference", [], "train_prefs")
    anonymous = tmp_path / "anonymous.jsonl"
    anonymous.write_text(json.dumps({"text": "a", "score_chosen": 1.0}) + "\n")
    with pytest.raises(DataError, match=rf"Parameter reference='{anonymous}' has neither a prompt_id nor a prompt "
                                        r"column \(it has \['text', "
                                        r"'score_chosen'\]\).*Point it at a preference dataset"):
        compare.compare(params(tmp_path, reference=str(anonymous), candidate=str(anonymous)))


# --------------------------------------------------------------------------------------------
# the params file, the card section, and `repro run` with 04_compare
# --------------------------------------------------------------------------------------------
def test_verify_params_file_names_the_published_dataset_and_its_source():
    from repro.parameters import load_params_file, validate_all
    from repro.paths import project_root

    values = load_params_file(project_root() / "params" / "verify_part2_mini_1.yaml")
    p = validate_all(values)["compare"]
    assert p.reference == "YYYYYYibo/ultrafeedback_binarized_dataset_offline_pairrm_part2_mini_1"
    assert p.compare_source == "ZHLiu627/ultrafeedback_binarized_with_response_full"
    assert values["notebooks"] == ["04_compare"] and p.candidate == str(project_root() / "runs" / "part2_mini_1")


def test_card_section_in_both_languages(compared):
    """The card reads compare.json itself (repro.card does not import repro.compare)."""
    from repro.card import CardFacts, render_section

    result, p = compared[0].result, compared[1]
    facts = CardFacts(run=RunDir(p.run_root), title="t", features=None, splits=[], built_here=True, license="mit",
                      language=["en"], comparison=json.loads((p.run_root / "compare.json").read_text()))
    assert facts.comparison == json.loads(json.dumps(result))
    en, zh = (render_section(facts, "reproduction", lang).split("\n\n") for lang in ("en", "zh"))
    assert en[0] == "## Reproduction" and zh[0] == "## 复现对比"
    assert "| rows aligned (of the reference's 39) | 37 |" in en[2]
    assert "| 对齐的行数（参考数据集共 39 行） | 37 |" in zh[2]
    assert "| same chosen and rejected | 30 (81.1 %) |" in en[2] and "| chosen 与 rejected 均相同 | 30 (81.1 %) |" in zh[2]
    assert "| one text in common, the other not | 2 (5.4 %) |" in en[2] and "| 仅一条回复相同 | 2 (5.4 %) |" in zh[2]
    def values(table):  # the value column (names may hold escaped pipes)
        return [re.split(r"(?<!\\)\|", line)[2] for line in table.splitlines()[2:]]

    assert "| rows that disagree (tolerance 0.001; split `train_prefs`) | 13 |" in en[2]
    assert "| 不一致的行（容差 0.001；划分 `train_prefs`） | 13 |" in zh[2]
    assert "| same `messages` | 34 / 37 |" in en[2] and "| `messages` 相同 | 34 / 37 |" in zh[2]
    assert values(en[2]) == values(zh[2]) and len(values(en[2])) == 19  # 4 coverage, 7 pair, 8 score lines


def card_sections(result: dict) -> tuple[str, str]:
    """The Reproduction section of a card with this compare.json (one the card reads: records.COMPARE's shape), in
    English and in Chinese."""
    from repro.card import CardFacts, render_section

    comparison = checked(Path("compare.json"), json.loads(json.dumps(result)), CARD_COMPARE, COMPARE_FIX)
    facts = CardFacts(run=RunDir("x"), title="t", features=None, splits=[], built_here=True, license="mit",
                      language=["en"], comparison=comparison)
    return render_section(facts, "reproduction", "en"), render_section(facts, "reproduction", "zh")


def test_a_statistic_with_no_value_is_said_in_each_language_on_the_card(published, tmp_path):
    # a candidate whose chosen scores are all one value has no Pearson r within chosen: the Chinese half said "n/a"
    flat = [{**r, "score_chosen": 1.0} for r in published["rows"]]
    result = compare.compare(params(tmp_path, reference=published["candidate"],
                                    candidate=write_rows(flat, tmp_path / "flat"))).result
    assert result["scores"]["by_role"]["chosen"]["pearson"] is None
    en, zh = card_sections(result)
    assert "| Pearson r within each role (chosen / rejected) | n/a (n = 40) / 1 (n = 40) |" in en
    assert "| 各角色内的 Pearson r（chosen / rejected） | 无 (n = 40) / 1 (n = 40) |" in zh and "n/a" not in zh


def test_the_cards_slice_notes_and_missing_scores_are_in_each_language(source_keys, tmp_path):
    # the slice sentence and the reason scores were not compared were English in the Chinese half; the notes were
    # left out of both
    source = pa.table(source_keys)
    ids, prompts = source_keys["prompt_id"][100:150], source_keys["prompt"][100:150]
    ref = compare.Side("reference", ["ref"], "train_prefs", pa.table({"prompt": prompts, "prompt_id": ids}),
                       np.zeros(50, dtype=np.int64))
    cand = compare.Side("candidate", ["cand"], "train_prefs", pa.table({"prompt": prompts[:49]}),
                        np.zeros(49, dtype=np.int64))
    result = compare.compare_datasets(ref, cand, params(tmp_path, reference="x"), source,
                                      hints={"part_start": 100, "part_stop": 150})[0]
    en, zh = card_sections(result)
    assert ("Slice: the reference's 50 rows found in the source span source rows [100:150] (100 before, "
            f"{N_SOURCE - 150} after), none missing inside. This dataset's parameters (part_start=100, "
            "part_stop=150) reproduce the reference's rows exactly.") in en
    assert (f"切片：参考数据集在源数据中找到的 50 行位于源数据第 [100:150] 行（之前 100 行，之后 {N_SOURCE - 150} 行），"
            "其间无缺行。本数据集的参数（part_start=100、part_stop=150）恰好复现参考数据集的行。") in zh
    assert "Scores were not compared: the reference lacks score_chosen and score_rejected; this dataset lacks" in en
    assert "未比较得分：参考数据集缺少 score_chosen 与 score_rejected；本数据集缺少" in zh
    assert "- Seed columns on one side only: the reference alone has `prompt_id`." in en
    assert "- 仅一侧有的种子列：只有参考数据集有 `prompt_id`。" in zh
    assert not re.search(r"[A-Za-z]{3,} [a-z]{3,} [a-z]{3,}", zh.replace("part_start", "")), zh  # no English prose
    assert "candidate" not in en





def test_repro_run_with_04_compare_on_a_demo_run_and_a_perturbed_copy(repro_run, demo_run_copy, tmp_path):
    def compare(*args):
        proc = repro_run("params/demo.yaml", "--out", run_dir, *args)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    run_dir = demo_run_copy
    rows = datasets.load_dataset(str(run_dir / "dataset"), split="train_prefs").to_list()
    n = len(rows)
    ref = copy.deepcopy(rows[2:])  # 2 rows dropped
    ref[0]["chosen"], ref[0]["rejected"] = ref[0]["rejected"], ref[0]["chosen"]  # 1 swapped, with its scores
    ref[0]["score_chosen"], ref[0]["score_rejected"] = ref[0]["score_rejected"], ref[0]["score_chosen"]
    ref[1]["score_chosen"] += 0.25  # 1 score jittered
    ref.reverse()
    reference = write_rows_with(ref, tmp_path / "published", rows)
    compare("--set", "notebooks=[04_compare]", "--set", f"reference={reference}")
    result = json.loads((run_dir / "compare.json").read_text())
    assert result["alignment"]["aligned"] == n - 2 and result["coverage"]["only_candidate"] == 2
    assert result["pairs"]["categories"]["swapped"] == 1 and result["pairs"]["categories"]["same"] == n - 3
    assert result["scores"]["scores"]["max_abs_difference"] == pytest.approx(0.25)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["stages"]["compare"]["aligned"] == n - 2
    # the card written again from 04_compare's kernel: 03_card stays done (before, it was left `running`)
    assert {name: entry["status"] for name, entry in manifest["notebooks"].items()} == dict.fromkeys(
        ["01_construct", "02_analyze", "03_card", "04_compare"], "done")
    for name in ("compare.json", "tables/compare_disagreements.csv", "figures/compare_scores.png",
                 "figures/compare_bland_altman.png", "figures/compare_agreement.png"):
        assert name in manifest["outputs"], name
    card = (run_dir / "dataset" / "README.md").read_text()
    assert "## Reproduction" in card and "## 复现对比" in card
    section = card.split("## Reproduction")[1].split("\n## ")[0]
    assert f"| rows aligned (of the reference's {n - 2}) | {n - 2} |" in section
    assert "`local:published`" in section and str(tmp_path) not in section
    # compared again with a dataset of other prompts: it fails, and nothing of the first comparison looks current
    # (the card kept its Reproduction section, tables/ the old disagreements, the manifest their records)
    other = copy.deepcopy(rows)
    for row in other:
        row["prompt"], row["prompt_id"] = "Another " + row["prompt"], "x" + row["prompt_id"]
    proc = repro_run("params/demo.yaml", "--out", run_dir, "--set", "notebooks=[04_compare]", "--force", "--set",
                     f"reference={write_rows_with(other, tmp_path / 'other', rows)}")
    assert proc.returncode == 1 and "No row of the candidate" in proc.stderr, proc.stderr[-3000:]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert [name for name in manifest["outputs"] if "compare" in name] == ["notebooks/04_compare.ipynb"]  # its error
    assert not (run_dir / "compare.json").exists() and not list((run_dir / "tables").glob("compare_*"))
    card = (run_dir / "dataset" / "README.md").read_text()
    assert "## Reproduction" not in card and "## 复现对比" not in card and "## Characteristics" in card


def write_rows_with(rows: list[dict], folder, like: list[dict]) -> str:
    """Write rows with the same features as the demo run's (which keeps candidates and their scores)."""
    write_split(datasets.Dataset.from_list(rows, features=output_features(keep_all_candidates="candidates" in like[0])),
                folder)
    return str(folder)


def test_the_notebook_alone_under_papermill(run_notebook, published, tmp_path):
    out = tmp_path / "out.ipynb"
    run_notebook(
        ROOT / "notebooks" / "04_compare.ipynb", out,
        parameters={"run_dir": str(tmp_path / "run"), "reference": published["reference"],
                    "candidate": published["candidate"], "bootstrap_resamples": 200})
    result = json.loads((tmp_path / "run" / "compare.json").read_text())
    assert result["alignment"]["aligned"] == 37 and result["pairs"]["categories"]["swapped"] == 4
    executed = json.loads(out.read_text())
    shown = ["".join(o["data"]["text/markdown"]) for c in executed["cells"] for o in c.get("outputs", [])
             if "text/markdown" in o.get("data", {})]
    assert shown[0].startswith("**Parameters** of 04_compare, run directory") and "| `bootstrap_resamples` | `200`" \
        " (default `1000`) |" in shown[0]  # the parameters as a table, then the verdict first of the results
    assert shown[1].startswith("**Partly reproduced within 0.001: 24 of 39 reference rows (split `train_prefs`) "
                               "agree**")
    assert not (tmp_path / "run" / "dataset" / "README.md").exists()  # no card yet: 03_card adds the section


def test_the_candidate_runs_slicing_parameters_are_the_hints(tmp_path):
    run = RunDir(tmp_path / "rebuilt")
    m = Manifest(run)
    recipe = {"part_start": 40000, "part_stop": 61135, "drop_rows": 400, "drop_from": "end", "mini_index": 1,
              "mini_count": 4, "limit": None, "source": "x"}
    m.start_run(recipe, ["01_construct"])
    assert compare._hints(str(run.root)) == {}  # nothing built yet: no counts
    m.set_counts(source=61135, kept=5183)
    expected = {k: v for k, v in recipe.items() if k != "source"}
    assert compare._hints(str(run.root)) == expected == compare._hints(str(run.dataset))
    m.update(parameters={**recipe, "limit": 10})  # a limited run keeps a prefix of the mini: infer_slice says so
    assert compare._hints(str(run.root)) == {**expected, "limit": 10}
    assert compare._hints(str(tmp_path / "elsewhere.jsonl")) == {}


def test_bootstrap_intervals_equal_recomputing_on_the_drawn_rows():
    rng = np.random.default_rng(4)
    x = np.round(rng.normal(size=40), 1)
    y = x + np.round(rng.normal(0, 0.3, 40), 1)
    rows = np.repeat(np.arange(20), 2)  # two values per row, resampled together
    got = stats.agreement_statistics(x, y, [0.1], resamples=5, seed=9, clusters=rows)
    draw = np.random.default_rng(9)
    values = {"pearson": [], "spearman": [], "lin_ccc": [], "mean_difference": [], "loa_low": [], "loa_high": []}
    for _ in range(5):
        picked = draw.integers(0, 20, 20)
        take = np.concatenate([np.flatnonzero(rows == r) for r in picked])
        xs, ys = x[take], y[take]
        values["pearson"].append(sps.pearsonr(xs, ys).statistic)
        values["spearman"].append(sps.spearmanr(xs, ys).statistic)
        values["lin_ccc"].append(2 * np.cov(xs, ys, ddof=0)[0, 1] / (xs.var() + ys.var() + (xs.mean() - ys.mean()) ** 2))
        d = ys - xs  # Bland–Altman's limits: the sample sd (n − 1) of the drawn differences
        values["mean_difference"].append(d.mean())
        values["loa_low"].append(d.mean() - stats.Z_95 * d.std(ddof=1))
        values["loa_high"].append(d.mean() + stats.Z_95 * d.std(ddof=1))
    for name, v in values.items():
        assert got["ci95"][name] == pytest.approx(list(np.quantile(v, [0.025, 0.975]))), name


def test_margin_signs_compare_the_order_of_the_same_two_texts(published, tmp_path):
    """Two best-vs-worst datasets have positive margins everywhere: their own margins' signs always agree, even on
    a swapped pair. The sign that says something is the candidate's margin over the reference's pair, in the
    reference's order: a swapped pair then disagrees, and a pair of other texts is not counted."""
    ref = copy.deepcopy(published["rows"])
    for r in ref[:6]:  # the reference ranks the pair the other way: texts swapped, its margin still positive
        r["chosen"], r["rejected"] = r["rejected"], r["chosen"]
    for r in ref[6:8]:  # other texts: not the same pair, no sign to compare
        r["chosen"][-1]["content"] += " (x)"
        r["rejected"][-1]["content"] += " (y)"
    result = compare.compare(params(tmp_path, reference=write_rows(ref, tmp_path / "ref"),
                                    candidate=published["candidate"])).result
    assert result["pairs"]["categories"]["swapped"] == 6 and result["pairs"]["categories"]["different"] == 2
    assert result["pairs"]["margin_sign"] == {"n": 38, "agree": 32, "fraction": 32 / 38}
    assert "margin signs agree in 84.2 %" in result["verdict"]


def demo_pairs(scores: list[float], keep_all_candidates: bool) -> list[dict]:
    """The first four demo prompts' rows, resp0 and resp1 scored `scores`."""
    return [build_row(src, src["prompt"], [src["resp0"], src["resp1"]], scores, messages="chosen",
                      keep_all_candidates=keep_all_candidates)
            for src in map(json.loads, demo_path().read_text().splitlines()[:4])]


def write_sides(tmp_path, reference: list[dict], candidate: list[dict]) -> list[str]:
    """The two sides' rows written as datasets (with candidates where the rows keep them): [reference, candidate]."""
    keep = "candidates" in candidate[0]
    for name, side in (("reference", reference), ("candidate", candidate)):
        write_split(datasets.Dataset.from_list(side, features=output_features(keep_all_candidates=keep)),
                    tmp_path / name)
    return [str(tmp_path / "reference"), str(tmp_path / "candidate")]


def test_a_score_that_differs_because_other_candidates_were_ranked_is_explained(tmp_path):
    """The same pair, scored among other candidates on one side (a reference response added): PairRM's score is a
    mean over the row's candidates, so the same texts' scores differ; 04_compare called such rows unexplained."""
    rng = np.random.default_rng(3)
    rows = []
    for line in demo_path().read_text().splitlines()[:6]:
        src = json.loads(line)
        cands = [src[c] for c in ("resp0", "resp1", "resp2")]
        rows.append(build_row(src, src["prompt"], cands, [round(float(s), 6) for s in rng.normal(0, 1, len(cands))],
                              messages="chosen", keep_all_candidates=True))
    ref = copy.deepcopy(rows)
    ref[2]["candidates"] = [*ref[2]["candidates"], "A reference response."]
    ref[2]["candidate_scores"] = [*ref[2]["candidate_scores"], 0.0]
    ref[2]["score_chosen"] += 0.3
    ref[4]["score_chosen"] += 0.3  # the same candidates: nothing explains it
    folders = write_sides(tmp_path, ref, rows)
    result = compare.compare(params(tmp_path, reference=folders[0], candidate=folders[1]))
    table = result.tables["disagreements"].set_index("prompt_id")["explanation"]
    assert table.to_dict() == {rows[2]["prompt_id"]: "other candidates ranked (a PairRM score depends on every "
                                                     "candidate of its row)", rows[4]["prompt_id"]: "unexplained"}


def test_a_near_tie_does_not_explain_a_score_that_moved(tmp_path):
    """A row whose margin changes sign near zero is a near-tie; but when a same-text score also moved by more than
    disagreement_tolerance, the near-tie does not explain that, and the row is not called explained."""
    rows = demo_pairs([0.02, -0.02], keep_all_candidates=True)
    ref = copy.deepcopy(rows)
    ref[1]["score_chosen"] = ref[1]["candidate_scores"][0] = -0.1  # sign flip near zero, the score moved by 0.12
    ref[2]["score_chosen"] = ref[2]["candidate_scores"][0] = -0.03  # sign flip near zero, moved 0.05: within 0.06
    folders = write_sides(tmp_path, ref, rows)
    result = compare.compare(params(tmp_path, reference=folders[0], candidate=folders[1],
                                    disagreement_tolerance=0.06)).result
    assert result["disagreements"]["explanations"] == {"a near-tie (|margin| < 0.05)": 2, "unexplained": 1}


def test_a_swapped_pair_whose_scores_moved_says_both(tmp_path):
    # texts swapped, scores kept: a real disagreement of two best-vs-worst rankings, called only "unexplained"
    rows = demo_pairs([0.4, -0.4], keep_all_candidates=False)
    ref = copy.deepcopy(rows)
    ref[1]["chosen"], ref[1]["rejected"] = ref[1]["rejected"], ref[1]["chosen"]
    folders = write_sides(tmp_path, ref, rows)
    result = compare.compare(params(tmp_path, reference=folders[0], candidate=folders[1])).result
    assert result["disagreements"]["explanations"] == {
        "chosen and rejected the other way round, their scores moved": 1, "unexplained": 1}
    assert ("1 aligned row disagrees (a row may have several reasons: chosen and rejected the other way round, their "
            "scores moved: 1, unexplained: 1)") in result["verdict"]
    assert "; `reference_response` equal in 4 of 4; `messages` equal in 4 of 4;" in result["verdict"]
    # two candidates a row on both sides (score_rejected = -score_chosen): a zero mean difference says nothing
    assert result["scores"]["scores"]["bland_altman"]["mean_difference"] == pytest.approx(0)
    assert any(note.startswith("**Mean difference 0 by construction.**") for note in result["notes"])
    # a column null on both sides is not "equal in 0 of 0"
    for row in [*ref, *rows]:
        row["reference_response"] = None
    folders = write_sides(tmp_path / "no_reference", ref, rows)
    result = compare.compare(params(tmp_path / "no_reference", reference=folders[0], candidate=folders[1])).result
    assert "`reference_response` equal" not in result["verdict"] and "`messages` equal in 4 of 4" in result["verdict"]
    # a reference without scores: a swap is only a swap (it read "the same scores")
    for row in ref:
        row["score_chosen"] = row["score_rejected"] = None
    folders = write_sides(tmp_path / "unscored", ref, rows)
    result = compare.compare(params(tmp_path / "unscored", reference=folders[0], candidate=folders[1])).result
    assert result["disagreements"]["explanations"]["chosen and rejected the other way round"] == 1
    assert not any("same scores" in why for why in result["disagreements"]["explanations"])


def test_a_column_null_on_one_side_is_said(tmp_path):
    # `reference_response` filled in the reference, null throughout the candidate: "same reference_response 0 of 0"
    # and not a word in the verdict
    rows = demo_pairs([0.4, -0.4], keep_all_candidates=False)
    candidate = copy.deepcopy(rows)
    for row in candidate[1:]:
        row["reference_response"] = None
    folders = write_sides(tmp_path, rows, candidate)
    result = compare.compare(params(tmp_path, reference=folders[0], candidate=folders[1])).result
    assert result["pairs"]["reference_response"] == {"equal": 1, "different": 0, "missing": 3, "missing_reference": 0,
                                                     "missing_candidate": 3, "fraction_equal": 0.25}
    value = compare.summary_table(result)["value"].to_dict()
    assert value[("pairs", "same reference_response")] == "1 of 1; missing in the candidate in 3 rows"
    assert ("**`reference_response` missing.** Of the 4 aligned rows, 3 in the candidate hold no `reference_response` "
            "(null): they are not compared on it.") in result["notes"]
    candidate[2]["reference_response"] = candidate[3]["reference_response"] = rows[1]["reference_response"]
    folders = write_sides(tmp_path / "one", rows, candidate)  # one row: "1 in the candidate holds", not "hold"
    result = compare.compare(params(tmp_path / "one", reference=folders[0], candidate=folders[1])).result
    assert any("Of the 4 aligned rows, 1 in the candidate holds no `reference_response` (null)" in note
               for note in result["notes"])
    for row in rows + candidate:  # null on both sides: nothing to say in the verdict, "missing on both sides" then
        row["reference_response"] = None
    folders = write_sides(tmp_path / "both", rows, candidate)
    result = compare.compare(params(tmp_path / "both", reference=folders[0], candidate=folders[1])).result
    assert compare.summary_table(result)["value"][("pairs", "same reference_response")] == "missing on both sides"
    assert "missing" not in result["verdict"]


def test_rows_whose_messages_or_reference_response_differ_are_listed(tmp_path):
    # one prompt's whitespace changed in `messages` (same prompt_id, same pair): "`messages` equal in 3 of 4" and an
    # empty disagreements table, no row named anywhere
    rows = demo_pairs([0.4, -0.4], keep_all_candidates=False)
    ref = copy.deepcopy(rows)
    ref[1]["messages"][0]["content"] += "  "
    ref[2]["reference_response"] += " (edited)"
    folders = write_sides(tmp_path, ref, rows)
    result = compare.compare(params(tmp_path, reference=folders[0], candidate=folders[1]))
    table = result.tables["disagreements"].set_index("prompt_id")
    assert table["explanation"].to_dict() == {
        rows[1]["prompt_id"]: "`messages` the same but for whitespace/Unicode form",
        rows[2]["prompt_id"]: "another `reference_response`"}
    assert set(table["pair"]) == {"same"} and result.result["disagreements"]["rows"] == 2


def test_sppo_probabilities_are_compared_beside_the_scores(tmp_path):
    """SPPO's `probability` / `chosen_probs` columns: a rebuild with the same scores and pairs but other
    probabilities read "100 % same pairs" and nothing else; both sides' probability columns are compared too."""
    rng = np.random.default_rng(4)
    rows = []
    for line in demo_path().read_text().splitlines()[:6]:
        src = json.loads(line)
        cands = [src[c] for c in ("resp0", "resp1", "resp2")]
        rows.append(build_row(src, src["prompt"], cands, [round(float(s), 6) for s in rng.normal(0, 1, 3)],
                              messages="chosen", keep_all_candidates=True))
    picks = [(r["candidates"].index(assistant(r, "chosen")), r["candidates"].index(assistant(r, "rejected")))
             for r in rows]
    candidate = export_rows("sppo", rows, picks)
    ref = candidate.to_list()
    ref[1]["chosen_probs"] += 0.25
    ref[4]["chosen_probs"] -= 0.125
    ref[2]["probability"][0][1] += 0.5
    ref[3]["probability"] = [[0.5]]  # another shape: it differs
    write_split(datasets.Dataset.from_list(ref, features=candidate.features), tmp_path / "reference")
    write_split(candidate, tmp_path / "candidate")
    p = params(tmp_path, reference=str(tmp_path / "reference"), candidate=str(tmp_path / "candidate"))
    result = compare.compare(p).result
    assert result["pairs"]["fractions"]["same"] == 1.0
    probs = result["probabilities"]
    assert probs["chosen_probs"] == {"rows": 6, "missing": 0, "other_candidates": 0, "other_order": 0, "other_shape": 0,
                                     "differ": 2,
                                     "max_abs_difference": pytest.approx(0.25),
                                     "within": {"1e-06": 4 / 6, "0.001": 4 / 6, "0.01": 4 / 6, "0.1": 4 / 6}}
    assert (probs["probability"]["differ"], probs["probability"]["other_shape"]) == (2, 1)
    assert probs["probability"]["max_abs_difference"] == pytest.approx(0.5)
    assert probs["chosen_probs_win"]["differ"] == probs["chosen_probs_lose"]["differ"] == 0
    assert ("; SPPO's probabilities further apart than 0.001: `probability` in 2 of 6 rows (max |diff| 0.5, 1 of "
            "another shape), "
            "`chosen_probs` in 2 of 6 rows (max |diff| 0.25), `chosen_probs_win` in 0 of 6 rows (max |diff| 0), "
            "`chosen_probs_lose` in 0 of 6 rows (max |diff| 0);") in result["verdict"]
    table = compare.summary_table(result)
    assert table.loc[("SPPO probabilities", "`chosen_probs` further apart than 0.001"), "value"] == \
        "2 of 6 rows (max |difference| 0.25)"
    assert table.loc[("SPPO probabilities", "`probability` further apart than 0.001"), "value"] == \
        "2 of 6 rows (max |difference| 0.5, 1 of another shape)"
    # each row that differs is listed, with the columns that differ as its explanation
    listed = pd.read_csv(p.run_root / "tables" / "compare_disagreements.csv").set_index("prompt_id")["explanation"]
    assert listed.to_dict() == {ref[1]["prompt_id"]: "other `chosen_probs`", ref[2]["prompt_id"]: "other `probability`",
                                ref[3]["prompt_id"]: "other `probability`", ref[4]["prompt_id"]: "other `chosen_probs`"}
    assert result["disagreements"]["rows"] == 4
    # the card's Reproduction section says it too, in both languages
    from repro.card import CardFacts, render_section
    facts = CardFacts(run=RunDir(p.run_root), title="t", features=None, splits=[], built_here=True, license="mit",
                      language=["en"], comparison=json.loads((p.run_root / "compare.json").read_text()))
    en, zh = (render_section(facts, "reproduction", lang) for lang in ("en", "zh"))
    assert "| `chosen_probs` apart by more than 0.001 | 2 of 6 rows; max \\|difference\\| 0.25 |" in en
    assert "| `probability` apart by more than 0.001 | 2 of 6 rows (1 of another shape); max \\|difference\\| 0.5 |" \
        in en
    assert "| `chosen_probs` 相差超过 0.001 | 6 行中有 2 行；最大 \\|差值\\| 0.25 |" in zh
    assert "| `probability` 相差超过 0.001 | 6 行中有 2 行（其中 1 行形状不同）；最大 \\|差值\\| 0.5 |" in zh
    # a reference in two parts, the second without `probability`: compared over the first part's rows, the others
    # said to be missing on a side (in compare.json, the summary table and the card)
    parts = [tmp_path / "part_a", tmp_path / "part_b"]
    write_split(datasets.Dataset.from_list(ref[:3], features=candidate.features), parts[0])
    write_split(datasets.Dataset.from_list(ref[3:], features=candidate.features).remove_columns("probability"),
                parts[1])
    p = params(tmp_path / "parts", reference=[str(f) for f in parts], candidate=str(tmp_path / "candidate"))
    result = compare.compare(p).result
    assert {k: result["probabilities"]["probability"][k] for k in ("rows", "missing", "differ")} == \
        {"rows": 3, "missing": 3, "differ": 1}
    assert result["probabilities"]["chosen_probs"]["differ"] == 2
    assert compare.summary_table(result)["value"][("SPPO probabilities", "`probability` further apart than 0.001")] \
        == "1 of 3 rows (max |difference| 0.5, 3 missing on a side)"
    facts = dataclasses.replace(facts, run=RunDir(p.run_root),
                                comparison=json.loads((p.run_root / "compare.json").read_text()))
    en, zh = (render_section(facts, "reproduction", lang) for lang in ("en", "zh"))
    assert "| `probability` apart by more than 0.001 | 1 of 3 rows; max \\|difference\\| 0.5; 3 more rows missing " \
        "on a side |" in en
    assert "| `probability` 相差超过 0.001 | 3 行中有 1 行；最大 \\|差值\\| 0.5；另有 3 行在一侧缺失 |" in zh
    # a side without them: nothing compared, nothing said
    write_split(datasets.Dataset.from_list(rows, features=output_features(keep_all_candidates=True)), tmp_path / "seed")
    plain = compare.compare(params(tmp_path / "plain", reference=str(tmp_path / "seed"),
                                   candidate=str(tmp_path / "candidate"))).result
    assert plain["probabilities"] == {} and "probabilities" not in plain["verdict"]


def ranked_otherwise(tmp_path, fmt: str) -> compare.ComparisonResult:
    """Two sides in format `fmt` of 4 rows of 5 candidates: the same ranking, the reverse, another pair of the same
    candidates (as another scorer prompt gives), and other texts (row 3: the reference's are edited)."""
    order = {"reference": [[2, 1, 0, -1, -2]] * 4,
             "candidate": [[2, 1, 0, -1, -2], [-2, -1, 0, 1, 2], [0, 2, 1, -2, -1], [-2, -1, 0, 1, 2]]}
    folders = {}
    for side, scores in order.items():
        rows = []
        for k, s in enumerate(scores):
            texts = [f"answer {i} to question {k}" + (" (v2)" if side == "reference" and k == 3 else "")
                     for i in range(5)]
            rows.append(build_row({"prompt_id": f"id{k}"}, f"question {k}", texts, [float(x) for x in s],
                                  messages="chosen", keep_all_candidates=True, pick=(s.index(2), s.index(-2))))
        write_split(export_rows(fmt, rows, [(s.index(2), s.index(-2)) for s in scores]), tmp_path / side)
        folders[side] = str(tmp_path / side)
    return compare.compare(params(tmp_path, **folders))


@pytest.mark.parametrize("fmt", ["sppo", "snorkel", "rlhflow"])
def test_the_same_candidates_ranked_otherwise_are_said_so(tmp_path, fmt):
    """Formats that publish every candidate and its score (SPPO's generate_i + rm_scores, Snorkel's
    all_generated_responses + all_rm_scores, RLHFlow's responses + rewards): the same candidates scored otherwise (a
    rebuild with another scorer prompt) read "different candidates" and "a different candidate text", and only the
    pair's scores were compared."""
    compared = ranked_otherwise(tmp_path, fmt)
    result = compared.result
    assert result["pairs"]["categories"] == {"same": 1, "swapped": 1, "same_chosen_only": 0, "same_rejected_only": 0,
                                             "one_shared_other_role": 0, "reranked": 1, "different": 1}
    assert ("25.0 % same pairs, 25.0 % swapped, 0.0 % with one text in common, 25.0 % same candidates ranked "
            "differently, 25.0 % different candidates;") in result["verdict"]
    explanations = result["disagreements"]["explanations"]
    assert explanations["same candidates, ranked differently"] == 1 and explanations["a different candidate text"] == 1
    assert explanations["other candidates ranked (a PairRM score depends on every candidate of its row)"] == 1
    # every candidate's score of the same text, not only the pair's: 5 a row, but none in row 3
    assert (result["scores"]["values"], result["scores"]["rows"]) == (15, 3)
    assert result["scores"]["from"] == {"chosen": 1, "rejected": 1, "crossed": 2, "other": 11}
    assert compare.summary_table(result)["value"][("pairs", "same candidates, ranked differently")] == "1 (25.0 %)"
    from repro.card import CardFacts, render_section
    facts = CardFacts(run=RunDir(tmp_path / "run"), title="t", features=None, splits=[], built_here=True,
                      license="mit", language=["en"], comparison=json.loads(json.dumps(result)))
    assert "| same candidates, ranked differently | 1 (25.0 %) |" in render_section(facts, "reproduction", "en")
    assert "| 候选回复相同，排序不同 | 1 (25.0 %) |" in render_section(facts, "reproduction", "zh")


def test_sppo_probabilities_of_the_same_candidates_in_another_order(tmp_path):
    """The same candidates listed in another order, scored alike: the pair and its chosen_probs* are the same; only the
    matrix `probability`, indexed by position, is not comparable (all four had read "of other candidates")."""
    texts = [f"answer {i} to question 0" for i in range(5)]
    scores = [2.0, 1.0, 0.0, -1.0, -2.0]
    for side, order in (("reference", [0, 1, 2, 3, 4]), ("candidate", [4, 3, 2, 1, 0])):
        s = [scores[i] for i in order]
        row = build_row({"prompt_id": "id0"}, "question 0", [texts[i] for i in order], s, messages="chosen",
                        keep_all_candidates=True, pick=(s.index(2.0), s.index(-2.0)))
        write_split(export_rows("sppo", [row], [(s.index(2.0), s.index(-2.0))]), tmp_path / side)
    result = compare.compare(params(tmp_path, reference=str(tmp_path / "reference"),
                                    candidate=str(tmp_path / "candidate"))).result
    assert result["pairs"]["categories"]["same"] == 1
    probs = result["probabilities"]
    assert {k: probs["probability"][k] for k in ("rows", "other_candidates", "other_order")} == \
        {"rows": 0, "other_candidates": 0, "other_order": 1}
    assert {k: probs["chosen_probs"][k] for k in ("rows", "differ", "other_candidates", "other_order")} == \
        {"rows": 1, "differ": 0, "other_candidates": 0, "other_order": 0}
    assert "1 of the same candidates in another order, not comparable" in result["verdict"]
    assert "of other candidates" not in result["verdict"]
    assert ("pairs", "same candidates, ranked differently") not in compare.summary_table(result).index  # none is


def test_sppo_probabilities_of_other_candidates_are_not_compared(tmp_path):
    """SPPO's probabilities are over a row's candidates, in their order: those of other texts are not comparable,
    yet the verdict said they differed (`probability` in 8 of 8 rows, for a rebuild of other candidates)."""
    compared = ranked_otherwise(tmp_path, "sppo")
    result = compared.result
    probability = result["probabilities"]["probability"]
    assert {k: probability[k] for k in ("rows", "differ", "missing", "other_candidates")} == \
        {"rows": 3, "differ": 2, "missing": 0, "other_candidates": 1}
    assert "`probability` in 2 of 3 rows (max |diff| " in result["verdict"]
    assert "1 of other candidates, not comparable)" in result["verdict"]
    assert "other `chosen_probs`" not in compared.tables["disagreements"]["explanation"].iloc[-1]
    assert compare.summary_table(result)["value"][("SPPO probabilities", "`probability` further apart than 0.001")] \
        .endswith(", 1 of other candidates, not comparable)")
    from repro.card import CardFacts, render_section
    facts = CardFacts(run=RunDir(tmp_path / "run"), title="t", features=None, splits=[], built_here=True,
                      license="mit", language=["en"], comparison=json.loads(json.dumps(result)))
    assert "; 1 more row of other candidates (not comparable) |" in render_section(facts, "reproduction", "en")
    assert "；另有 1 行的候选回复不同（不可比较） |" in render_section(facts, "reproduction", "zh")


def conclusion(result: dict) -> str:
    return result["verdict"].split("\n\n")[0]


def test_a_score_nan_on_both_sides_at_the_same_place_is_no_difference(published, tmp_path):
    # a dataset compared with itself, one score NaN on both sides: "Partly reproduced ... 39 of 40 agree; 1 differ"
    # and "(1 scores NaN, infinite or missing on one side, left out)"
    rows = copy.deepcopy(published["rows"])
    rows[2]["score_chosen"] = float("nan")
    path = tmp_path / "nan.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    both = compare.compare(params(tmp_path / "both", reference=str(path), candidate=str(path)))
    assert conclusion(both.result) == "**Reproduced within 0.001: all 40 reference rows (split `train_prefs`) agree**."
    assert both.result["scores"]["excluded_nonfinite"] == 0 and len(both.tables["disagreements"]) == 0
    assert "over 79 values (1 score NaN, infinite or missing alike on both sides: no difference)" in both.result[
        "verdict"]
    one = compare.compare(params(tmp_path / "one", reference=str(path), candidate=published["candidate"])).result
    assert conclusion(one) == ("**Partly reproduced within 0.001: 39 of 40 reference rows (split `train_prefs`) "
                               "agree**; 1 differs (tables/compare_disagreements.csv).")
    assert "(1 score NaN, infinite or missing on one side, left out)" in one["verdict"]


def test_rows_of_another_prompt_or_matched_by_normalised_prompt_do_not_agree(published, tmp_path):
    # "Reproduced ... all 40 agree" over a row aligned by prompt_id holding another prompt, or matched only by
    # whitespace/Unicode-normalised prompt text
    ref, cand = copy.deepcopy(published["rows"][:10]), copy.deepcopy(published["rows"][:10])
    ref[2]["prompt"] = "A different question altogether."
    cand[5]["prompt"] += " café"
    ref[5]["prompt"] += unicodedata.normalize("NFD", " café")
    for row in (cand[5], ref[5]):
        row["prompt_id"] = prompt_id_of(row["prompt"])
    out = compare.compare(params(tmp_path, reference=write_rows(ref, tmp_path / "ref"),
                                 candidate=write_rows(cand, tmp_path / "cand")))
    assert conclusion(out.result) == ("**Partly reproduced within 0.001: 8 of 10 reference rows (split `train_prefs`) "
                                      "agree**; 2 differ (tables/compare_disagreements.csv).")
    why = dict(zip(out.tables["disagreements"]["reference_row"], out.tables["disagreements"]["explanation"]))
    assert why == {2: "another prompt text under the same prompt_id",
                   5: "prompt matched only after whitespace/Unicode normalisation"}


def test_a_score_of_fewer_than_three_values_is_still_compared_row_by_row(published, tmp_path):
    # a 1-row reference whose only difference is a score: "Not reproduced on pairs only (scores not compared)"
    ref = copy.deepcopy(published["rows"][:1])
    ref[0]["score_chosen"] += 0.5
    result = compare.compare(params(tmp_path, reference=write_rows(ref, tmp_path / "ref"),
                                    candidate=published["candidate"])).result
    assert conclusion(result).startswith("**Not reproduced within 0.001: 0 of 1 reference row (split `train_prefs`) "
                                         "agrees**; 1 differs (tables/compare_disagreements.csv); scores compared row "
                                         "by row only, no statistics (only 2 scores of the same text on both sides)")
    assert result["disagreements"]["not_compared"] == {} and result["scores"]["available"] is False
    assert "**Scores not compared.**" not in result["verdict"]
    assert compare.summary_table(result)["value"][("scores", "no statistics")] == \
        "only 2 scores of the same text on both sides"
    en, zh = card_sections(result)
    assert "Scores were compared row by row only: only 2 scores of the same text on both sides, too few for " \
           "statistics." in en and "未比较得分" not in zh and "得分只逐行比较：两侧相同文本的得分只有 2 个" in zh


def test_the_not_compared_conclusion_still_counts_rows_that_differ_or_are_on_one_side(published, tmp_path):
    # "Not compared: no pair nor score of the 35 aligned rows could be compared" and not a word of the 3 rows of
    # other `messages` nor of the 5 rows only in the candidate
    names = {"chosen": "chosen_conv", "rejected": "rejected_conv"}
    rows = copy.deepcopy(published["rows"][5:])
    for row in rows[:3]:
        row["messages"][-1]["content"] = "other text"
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_text("".join(json.dumps({names.get(k, k): v for k, v in r.items()}) + "\n" for r in rows))
    result = compare.compare(params(tmp_path, reference=str(renamed), candidate=published["candidate"])).result
    assert conclusion(result) == (
        "**Not compared: no pair nor score of the 35 aligned rows (split `train_prefs`) could be compared** (see "
        "below); 3 differ (tables/compare_disagreements.csv); the candidate has 5 rows the reference lacks "
        "(tables/compare_only_candidate.csv).")


def test_the_conclusion_counts_the_candidates_rows_left_out_for_a_duplicated_key(published, tmp_path):
    rows = published["rows"]
    cand = write_rows([*copy.deepcopy(rows), copy.deepcopy(rows[7])], tmp_path / "cand")
    result = compare.compare(params(tmp_path, reference=published["candidate"], candidate=cand)).result
    assert conclusion(result) == (
        "**Partly reproduced within 0.001: 39 of 40 reference rows (split `train_prefs`) agree**; 1 left out, its key "
        "duplicated in the candidate (tables/compare_duplicates.csv); the candidate has 2 rows left out, their key "
        "duplicated in the candidate (tables/compare_duplicates.csv).")
    extra = write_rows([*copy.deepcopy(rows[:7]), *copy.deepcopy(rows[8:]), *copy.deepcopy([rows[7]] * 2)],
                       tmp_path / "extra")
    ref = write_rows(copy.deepcopy(rows[:7] + rows[8:]), tmp_path / "ref")
    result = compare.compare(params(tmp_path / "x", reference=ref, candidate=extra)).result
    assert conclusion(result) == (
        "**Reproduced within 0.001: all 39 reference rows (split `train_prefs`) agree**; the candidate has 2 rows "
        "left out, their key duplicated in the candidate (tables/compare_duplicates.csv).")


def test_singular_words_and_the_cards_reason_for_scores_not_compared(published, tmp_path):
    sentence = compare.infer_slice([np.array([1, 2, 4, 5])], 7, max_mini_count=1)["sentence"]
    assert "; 1 of them is in neither dataset." in sentence
    names = {"chosen": "chosen_conv", "rejected": "rejected_conv"}
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_text("".join(json.dumps({names.get(k, k): v for k, v in r.items()}) + "\n"
                               for r in published["rows"]))
    result = compare.compare(params(tmp_path, reference=str(renamed), candidate=published["candidate"])).result
    en, _ = card_sections(result)
    assert "Scores were not compared: no chosen/rejected texts: scores cannot be matched to the same text.\n" in en


def sppo_side(folder, scored_only: bool, shift: float = 0.0) -> list[dict]:
    """4 SPPO rows of 5 generated texts, written to `folder`: with `scored_only`, in the published layout (prompt_id,
    prompt, generate_0..4, probability, rm_scores) of 7 scores, the original chosen and rejected ranked first; else as
    the default recipe writes them, 5 scores for the 5 texts (the same order, each `shift` higher)."""
    rng, rows, picks = np.random.default_rng(5), [], []
    for k in range(4):
        texts = [f"original chosen {k}", f"original rejected {k}", *(f"answer {i} to question {k}" for i in range(5))]
        scores = [round(float(s), 6) for s in rng.normal(0, 1, 7)]
        lead = 2 if scored_only else 0
        texts, scores = texts[2 - lead:], [s + shift * (not scored_only) for s in scores[2 - lead:]]
        pick = (lead + int(np.argmax(scores[lead:])), lead + int(np.argmin(scores[lead:])))
        rows.append({**build_row({"prompt_id": f"id{k}"}, f"question {k}", texts, scores, messages="chosen",
                                 keep_all_candidates=True, pick=pick), "scored_only": lead})
        picks.append(pick)
    ds = export_rows("sppo", rows, picks)
    if scored_only:
        ds = ds.select_columns(["prompt_id", "prompt", *(f"generate_{i}" for i in range(5)), "probability",
                                "rm_scores"])
    write_split(ds, folder)
    return rows


def test_a_reference_that_ranked_more_texts_than_it_lists_names_the_cause_and_the_fix(tmp_path):
    """SPPO's published rows hold 7 rm_scores for 5 generate_i (the original pair ranked first), the default recipe 5
    for 5: a PairRM score is a mean over every text ranked with it, so a faithful rebuild's scores cannot match. The
    verdict read "Not reproduced ... unexplained: 6, other `probability`: 6", with no word of why nor of the fix."""
    sppo_side(tmp_path / "reference", scored_only=True)
    sppo_side(tmp_path / "candidate", scored_only=False, shift=0.1)
    out = compare.compare(params(tmp_path, reference=str(tmp_path / "reference"),
                                 candidate=str(tmp_path / "candidate")))
    result = out.result
    why = "other texts ranked beside the same candidates (a PairRM score depends on every text ranked with it)"
    assert set(out.tables["disagreements"]["explanation"]) <= {why, f"same candidates, ranked differently; {why}"}
    assert result["disagreements"]["rows"] == 4 and result["disagreements"]["explanations"][why] == 4
    assert "unexplained" not in result["disagreements"]["explanations"]
    # the probabilities are over other texts (compute_prob.py: the first 5 of 7 scores): not comparable, not "other"
    assert {k: result["probabilities"]["probability"][k] for k in ("rows", "other_candidates")} == \
        {"rows": 0, "other_candidates": 4}
    assert conclusion(result) == (
        "**Not reproduced within 0.001: 0 of 4 reference rows (split `train_prefs`) agree**; 4 differ "
        "(tables/compare_disagreements.csv), 4 of them because the reference ranked 7 texts for its 5 candidates and "
        "the candidate 5 for 5 (see below).")
    fix = "`--set include_original_pair=true --set original_pair_position=first_scored_only`"
    note = next(n for n in result["notes"] if n.startswith("**Other texts ranked.**"))
    assert fix in note and "2 more texts than it lists" in note and note in result["verdict"]
    en, zh = card_sections(result)
    assert "- Other texts ranked: in 4 aligned rows the reference ranked 7 texts for its 5 candidates" in en
    assert fix in en and fix in zh and "- 排序的文本不同：" in zh
    # the 7-score rebuild the note points to: the same texts ranked, nothing to explain
    sppo_side(tmp_path / "seven", scored_only=True)
    same = compare.compare(params(tmp_path / "same", reference=str(tmp_path / "reference"),
                                  candidate=str(tmp_path / "seven"))).result
    assert conclusion(same) == "**Reproduced within 0.001: all 4 reference rows (split `train_prefs`) agree**."
    assert not any(n.startswith("**Other texts ranked.**") for n in same["notes"])


def test_a_tied_reference_row_a_tie_dropping_recipe_leaves_out_is_named_and_not_counted_against(tmp_path):
    """RLHFlow's get_rewards.py keeps a row whose rewards all tie, its run_dpo.py (and the recipe: ties: drop) drops
    it: a faithful rebuild read "Partly reproduced within 0.01: 4 of 5 reference rows agree; 1 only in the reference",
    with no word that the row is an expected tie drop."""
    rewards = [[1.5, -0.5, 0.25], [0.75] * 3, [-1.0, 2.0, 0.5], [0.125, 0.625, -0.375], [3.0, 1.0, 2.0]]
    lines = [{"prompt": [{"content": f"question {k}", "role": "user"}],
              "responses": [f"answer {i} to question {k}" for i in range(3)], "rewards": r}
             for k, r in enumerate(rewards)]
    reference = tmp_path / "uf_split0_responses_K8_reward.json"
    reference.write_text("".join(json.dumps(line) + "\n" for line in lines))
    kept = [line for line in lines if len(set(line["rewards"])) > 1]
    rows = [build_row({}, line["prompt"][0]["content"], line["responses"], line["rewards"], messages="chosen",
                      keep_all_candidates=True) for line in kept]
    picks = [(int(np.argmax(line["rewards"])), int(np.argmin(line["rewards"]))) for line in kept]
    run = tmp_path / "rlhflow_iter1"
    write_split(export_rows("rlhflow", rows, picks), run / "dataset")

    def compared(ties: str | None, name: str) -> dict:
        recorded = {"parameters": {"ties": ties}, "counts": {"kept": 4, "dropped_tie": 1}} if ties else {}
        (run / "manifest.json").write_text(json.dumps(recorded))
        return compare.compare(params(tmp_path / name, reference=str(reference), candidate=str(run),
                                      disagreement_tolerance=0.01)).result

    result = compared("drop", "drop")
    assert result["coverage"]["only_reference"] == 1
    assert conclusion(result) == (
        "**Reproduced within 0.01: all 4 reference rows (split `train_prefs`) agree**; 1 more left out as the "
        "candidate's recipe does, its chosen and rejected scores tied (`ties: drop`; "
        "tables/compare_only_reference.csv).")
    note = ("**Tied rows only in the reference.** 1 row only in the reference has its chosen and rejected scores "
            "tied: the candidate's recipe leaves such rows out (`ties: drop`, as RLHFlow's run_dpo.py does), so it is expected "
            "to be missing and is not counted against the reproduction.")
    assert note in result["notes"]
    en, zh = card_sections(result)
    assert "- Tied rows only in the reference: 1 has its chosen and rejected scores tied" in en
    assert "- 仅在参考数据集中的平局行：" in zh and "`ties: drop`" in zh
    # the candidate's recipe not recorded: counted against it, and said what would explain it
    unknown = compared(None, "unknown")
    assert conclusion(unknown) == (
        "**Partly reproduced within 0.01: 4 of 5 reference rows (split `train_prefs`) agree**; 1 only in the "
        "reference (tables/compare_only_reference.csv; 1 of them with its chosen and rejected scores tied: see "
        "below).")
    assert any(n.startswith("**Tied rows only in the reference.**") and "not recorded" in n for n in unknown["notes"])
    kept_ties = compared("keep", "keep")  # a recipe that keeps ties should hold the row
    assert conclusion(kept_ties).startswith("**Partly reproduced within 0.01: 4 of 5 reference rows")
    assert any("`ties: keep`" in n for n in kept_ties["notes"])


def test_pairrms_length_limits_explain_rows_only_where_pairrm_may_have_scored(train_rows, tmp_path):
    """GPT-4's ratings on both sides (H4's rows and an edited copy): a row whose pair differs was explained by "a
    candidate over PairRM's length limits (truncated)", though PairRM scored neither side."""
    rows = [{k: v for k, v in r.items() if k != "source_index"} for r in copy.deepcopy(train_rows)]
    long = [3, 7, 11]
    for i in long:  # a rejected response of more words than PairRM keeps
        rows[i]["rejected"][-1]["content"] += " word" * 1300
        assert compare.over_length_limit(rows[i]["prompt"], rows[i]["rejected"][-1]["content"])

    def explanations(scale: float, offset: float) -> dict[str, int]:
        ref = [{**r, "score_chosen": r["score_chosen"] * scale + offset,
                "score_rejected": r["score_rejected"] * scale - offset} for r in rows]
        cand = copy.deepcopy(ref)
        for i in long:  # the pair the other way round
            cand[i]["chosen"], cand[i]["rejected"] = cand[i]["rejected"], cand[i]["chosen"]
        for name, side in (("reference", ref), ("candidate", cand)):
            write_split(datasets.Dataset.from_list(side), tmp_path / name)
        result = compare.compare_datasets(str(tmp_path / "reference"), str(tmp_path / "candidate"),
                                          params(tmp_path))[0]
        return result["disagreements"]["explanations"]

    truncated = "a candidate over PairRM's length limits (truncated)"
    ratings = explanations(1.0, 0.0)  # on a grid of 0.5 from 1 to 10: ratings, not PairRM's logits
    assert sum(ratings.values()) >= len(long) and truncated not in ratings
    logits = explanations(0.37, 0.0123)  # real-valued: PairRM's may be
    assert logits.get(truncated) == len(long)


def test_a_stand_ins_repro_score_output_is_said_to_hold_a_stand_ins_scores(published, tiny_pairrm_dir, tmp_path):
    """`repro score`'s output of a stand-in, compared with the published rows: the repro_stand_in.json beside it was
    not read, so nothing said the candidate's scores were noise (a run's manifest saying stand-in was). Now it is."""
    rows = tmp_path / "scored" / "rows.jsonl"
    assert main(["score", "--model", str(tiny_pairrm_dir), "--input", published["candidate"], "--output", str(rows),
                 "--device", "cpu", "--source-maxlength", "64", "--candidate-maxlength", "32"]) == 0
    out = compare.compare(params(tmp_path, reference=published["reference"], candidate=str(rows)))
    assert ("**Stand-in scores.** The candidate's scores come from a stand-in scorer (random weights): their "
            "agreement with the reference's says nothing of a real scorer's.") in out.result["notes"]
    # the scores of a scorer that is none: no such note
    mark_scorer(rows, {"model": "llm-blender/PairRM-hf", "kind": "pairrm", "stand_in": False})
    out = compare.compare(params(tmp_path / "real", reference=published["reference"], candidate=str(rows)))
    assert not any("Stand-in" in n for n in out.result["notes"])
