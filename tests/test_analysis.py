"""The analysis stage and notebooks/02_analyze.ipynb on real rows, checked against independent computations."""

from __future__ import annotations

import json
import math
import re
import traceback
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import html_elements, shown_text

from repro.analysis import report as analysis
from repro.card import gather_facts
from repro.construct.pairs import build_row
from repro.dataset_io import SEED_COLUMNS, output_features, write_split
from repro.errors import DataError, Interrupted, ParameterError, ReproError
from repro.exporters import export_rows
from repro.manifest import Manifest, sha256_file
from repro.parameters import AnalyzeParams, CardParams
from repro.paths import RunDir
from repro.subject import mark_scorer

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "02_analyze.ipynb"


def _assistant(conversation: list[dict]) -> str:
    return [m["content"] for m in conversation if m["role"] == "assistant"][-1]


@pytest.fixture(scope="module")
def real(sample_dir, tmp_path_factory):
    """analyze() on the 200 real GPT-4-rated rows of the fixture, standalone (no construction run)."""
    run_dir = tmp_path_factory.mktemp("real") / "run"
    p = AnalyzeParams(dataset=str(sample_dir / "train_prefs.jsonl"), run_dir=str(run_dir))
    return analysis.analyze(p), RunDir(run_dir)


# --------------------------------------------------------------------------------------------
# the real sample
# --------------------------------------------------------------------------------------------
def ratings(rows: list[dict]) -> pd.DataFrame:
    """score_chosen / score_rejected of rows read straight from the jsonl, in pandas."""
    return pd.DataFrame({k: [r[k] for r in rows] for k in ("score_chosen", "score_rejected")})


def test_real_sample_headline_numbers(real, train_rows):
    result, run = real
    m = json.loads(run.metrics.read_text())
    assert m == result.metrics
    scores = ratings(train_rows)
    ties = int((scores["score_chosen"] == scores["score_rejected"]).sum())
    assert m["n"] == len(train_rows) == 200 and m["n_excluded"] == 0 and m["excluded_reasons"] == {}
    assert m["score_chosen"]["mean"] == pytest.approx(scores["score_chosen"].mean(), rel=1e-12)
    assert m["score_rejected"]["mean"] == pytest.approx(scores["score_rejected"].mean(), rel=1e-12)
    assert m["ties"] == m["margin_sign"]["counts"]["zero"] == ties and ties > 0  # the fixture keeps real ties
    assert m["scale"]["kind"] == "rating" and "ratings, not PairRM logits" in m["scale"]["sentence"]
    assert m["invariants"]["expected_to_hold"] is False
    assert m["scorer"] is None and m["scores_from_stand_in"] is None
    assert m["invariants"]["candidate_scores"] is None  # no candidate_scores column
    assert "ratings, not PairRM logits" in analysis.headline(m)


def test_a_record_value_the_prose_cannot_write_names_the_template_and_its_line(real):
    # a metrics.json edited by hand (a mean as text): the headline's template raised inside 02_analyze's cell, IPython
    # read report.jinja as Python and failed, and `repro run` said "CellExecutionError: " and nothing more
    m = json.loads(real[1].metrics.read_text())
    m["score_chosen"]["mean"] = str(m["score_chosen"]["mean"])
    template = Path(analysis.__file__).parent / "templates" / "report.jinja"
    line = next(i for i, text in enumerate(template.read_text().splitlines(), 1) if "{{ c.mean | g(" in text)
    with pytest.raises(ReproError) as caught:
        analysis.headline(m)
    assert str(caught.value).startswith(f"The analysis' template report.jinja, line {line}: ValueError: Unknown format "
                                        "code 'g' for object of type 'str'. If a run's records (metrics.json, ")
    assert "a bug in repro.analysis" in str(caught.value) and caught.value.__suppress_context__
    assert not [f for f, _ in traceback.walk_tb(caught.value.__traceback__) if f.f_code.co_filename.endswith(".jinja")]


def test_real_sample_matches_an_independent_computation(real, train_rows):
    m = real[0].metrics
    chosen = np.array([r["score_chosen"] for r in train_rows])
    rejected = np.array([r["score_rejected"] for r in train_rows])
    margin = chosen - rejected
    for name, x in (("score_chosen", chosen), ("score_rejected", rejected), ("margin", margin)):
        s = pd.Series(x)
        block = m[name]
        assert block["mean"] == pytest.approx(s.mean()) and block["std"] == pytest.approx(s.std())
        assert block["median"] == s.median() and block["q25"] == s.quantile(0.25) and block["q75"] == s.quantile(0.75)
        assert (block["min"], block["max"]) == (s.min(), s.max())
        # pandas' skew/kurt are the bias-corrected G1/G2; convert the metrics' g1/g2 to compare
        n = len(x)
        g1, g2 = block["skewness"], block["kurtosis"]
        assert s.skew() == pytest.approx(g1 * math.sqrt(n * (n - 1)) / (n - 2))
        assert s.kurt() == pytest.approx((n - 1) / ((n - 2) * (n - 3)) * ((n + 1) * g2 + 6))
        half = 1.96 * s.std() / math.sqrt(n)
        # the percentile bootstrap and the normal approximation agree to a small part of the interval's width
        assert block["mean_ci95"] == pytest.approx([s.mean() - half, s.mean() + half], abs=0.15 * half)
        assert block["median_ci95"][0] <= block["median"] <= block["median_ci95"][1]
    assert m["margin_sign"]["counts"] == {"positive": int((margin > 0).sum()), "zero": int((margin == 0).sum()),
                                          "negative": int((margin < 0).sum())}
    assert m["tests"]["sign_test"]["positive"] == int((margin > 0).sum())
    assert m["correlation"]["pearson"]["statistic"] == pytest.approx(np.corrcoef(chosen, rejected)[0, 1])
    # lengths: the assistant turn of chosen/rejected, characters and str.split() tokens, computed in Python
    lengths = {f"{side}_{unit}": np.array([f(_assistant(r[side])) for r in train_rows], float)
               for side in ("chosen", "rejected") for unit, f in (("chars", len), ("tokens", lambda t: len(t.split())))}
    for side in ("chosen", "rejected"):
        for unit in ("chars", "tokens"):
            x = lengths[f"{side}_{unit}"]
            assert m["length"][side][unit] == {"mean": pytest.approx(x.mean()), "median": np.median(x)}
    # pairs whose chosen and rejected are one response (the fixture keeps 4 real ones): counted
    assert m["same_responses"] == sum(_assistant(r["chosen"]) == _assistant(r["rejected"]) for r in train_rows) == 4
    diff = pd.Series(lengths["chosen_tokens"] - lengths["rejected_tokens"])
    assert m["length"]["margin_vs_length_difference"]["tokens"]["spearman"] == pytest.approx(
        pd.Series(margin).corr(diff, method="spearman"))


def test_real_sample_tables(real, train_rows):
    result, run = real
    summary = pd.read_csv(run.tables / analysis.SUMMARY_TABLE, index_col="statistic")
    assert summary.loc["mean", "score_chosen"] == pytest.approx(ratings(train_rows)["score_chosen"].mean(), rel=1e-12)
    assert summary.loc["mean_ci95_low", "margin"] == result.metrics["margin"]["mean_ci95"][0]
    assert summary.loc["median_ci95_high", "score_rejected"] == result.metrics["score_rejected"]["median_ci95"][1]
    extremes = pd.read_csv(run.tables / analysis.EXTREMES_TABLE)
    margins = np.array([r["score_chosen"] - r["score_rejected"] for r in train_rows])
    largest = extremes[extremes["which"] == "largest"]
    smallest = extremes[extremes["which"] == "smallest"]
    assert len(largest) == len(smallest) == 10
    assert list(largest["margin"]) == sorted(margins, reverse=True)[:10]
    assert list(smallest["margin"]) == sorted(margins)[:10]
    for _, row in extremes.iterrows():
        assert row["prompt_id"] == train_rows[row["row"]]["prompt_id"]
        assert row["margin"] == margins[row["row"]]
        whole = " ".join(train_rows[row["row"]]["prompt"].split())  # one line; a cut one says so
        assert row["prompt"] == whole if len(whole) <= 120 else row["prompt"] == whole[:119].rstrip() + "…"
    assert any(p.endswith("…") for p in extremes["prompt"])
    # the notebook's view: the 64-character prompt_id cut short (it took the prompt's width), the prompt whole
    html = analysis.readable(result.extremes).to_html()
    first = result.extremes.iloc[0]
    assert first["prompt_id"] not in html and f">{first['prompt_id'][:11]}…<" in html
    assert f">{first['prompt']}<" in html and "text-align: left" in html


def test_real_sample_outputs_are_recorded_and_reproducible(real, sample_dir, tmp_path):
    result, run = real
    manifest = json.loads(run.manifest.read_text())
    assert manifest["stages"]["analyze"]["status"] == "done"
    recorded = manifest["outputs"]
    assert set(recorded) == {str(p.relative_to(run.root)) for p in result.outputs}
    for rel, out in recorded.items():
        assert sha256_file(run.root / rel) == out["sha256"], rel
    for name, fig in result.metrics["figures"].items():
        assert (run.root / fig["png"]).is_file() and (run.root / fig["svg"]).is_file() and "n = 200" in fig["title"]
    again = RunDir(tmp_path / "again")
    analysis.analyze(AnalyzeParams(dataset=str(sample_dir / "train_prefs.jsonl"), run_dir=str(again.root)))
    again_outputs = json.loads(again.manifest.read_text())["outputs"]
    assert {k: v["sha256"] for k, v in again_outputs.items()} == {k: v["sha256"] for k, v in recorded.items()}


def test_a_failed_analysis_leaves_nothing_of_the_earlier_one(sample_dir, tmp_path, monkeypatch):
    # its tables (summary_statistics.csv, extreme_margins.csv) and their records stayed, looking current
    p = AnalyzeParams(dataset=str(sample_dir / "train_prefs.jsonl"), run_dir=str(tmp_path / "run"),
                      bootstrap_resamples=100)
    analysis.analyze(p)
    monkeypatch.setattr(analysis.plots, "draw_all", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        analysis.analyze(p)
    run = RunDir(tmp_path / "run")
    assert not run.metrics.exists() and not list(run.tables.glob("*")) and not list(run.figures.glob("*"))
    assert not json.loads(run.manifest.read_text())["outputs"]
    # stopped (Ctrl-C, JupyterLab's interrupt): it said "3 finished chunk(s) are safe ...; run the notebook again to
    # continue", of 01_construct's chunks, though an analysis keeps nothing to continue from
    (run.work / "scoring").mkdir(parents=True)
    (run.work / "scoring" / "chunk-000000.json").write_text("{}")
    monkeypatch.setattr(analysis.plots, "draw_all", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(Interrupted, match=r"^stage 'analyze' was stopped, and keeps nothing to continue from: run the "
                                          r"notebook again\.$"):
        analysis.analyze(p)


def test_an_analysis_on_its_own_records_its_parameters_environment_and_status(real, sample_dir, tmp_path):
    """02_analyze alone (papermill, JupyterLab) is in the run's record as 01_construct alone is: its parameters,
    the environment and a status, so that manifest.json says what made metrics.json."""
    _, run = real
    manifest = json.loads(run.manifest.read_text())
    assert manifest["status"] == "complete" and manifest["driver"] == "papermill"
    assert manifest["parameters"]["bootstrap_resamples"] == 1000
    assert manifest["parameters"]["dataset"] == str(sample_dir / "train_prefs.jsonl")
    assert manifest["notebooks"]["02_analyze"]["status"] == "done" and manifest["environment"]["packages"]
    # again with another value: the record says which made the metrics now
    analysis.analyze(AnalyzeParams(dataset=str(sample_dir / "train_prefs.jsonl"), run_dir=str(tmp_path / "again"),
                                   bootstrap_resamples=200))
    again = json.loads((tmp_path / "again" / "manifest.json").read_text())
    assert again["parameters"]["bootstrap_resamples"] == 200 == \
        json.loads((tmp_path / "again" / "metrics.json").read_text())["bootstrap"]["resamples"]

# --------------------------------------------------------------------------------------------
# response texts
# --------------------------------------------------------------------------------------------
def test_response_texts_take_the_last_assistant_turn():
    conversations = pa.array([
        [{"content": "q", "role": "user"}, {"content": "first", "role": "assistant"},
         {"content": "q2", "role": "user"}, {"content": "second answer", "role": "assistant"}],
        [{"content": "q", "role": "user"}],
        [],
        [{"content": "only", "role": "assistant"}],
    ])
    assert analysis.response_texts(conversations).to_pylist() == ["second answer", None, None, "only"]
    assert analysis.response_texts(pa.array(["plain text"])).to_pylist() == ["plain text"]
    assert analysis.response_texts(pa.array([[1, 2]])) is None


def test_token_counts_equal_str_split():
    texts = ["  a b\u00a0c\n\nd  ", "", " ", "x\u3000y", "a\x1cb\x85c", "tab\tsep\r\nline", "é日本 語", None]
    chars, tokens = analysis.text_lengths(pa.array(texts))
    expected = [len(t.split()) if t is not None else None for t in texts]
    assert [None if np.isnan(v) else int(v) for v in tokens] == expected
    assert [None if np.isnan(v) else int(v) for v in chars] == [len(t) if t is not None else None for t in texts]


# --------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------
def _jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _analyze(tmp_path, dataset, **kw):
    return analysis.analyze(AnalyzeParams(dataset=dataset, run_dir=str(tmp_path / "run"), **kw))


def test_missing_score_column(tmp_path):
    data = _jsonl(tmp_path / "d.jsonl", [{"score_chosen": 1.0, "score_reject": 0.0}] * 3)
    with pytest.raises(DataError, match=r"lacks column \['score_rejected'\]"):
        _analyze(tmp_path, data)
    assert not (tmp_path / "run").exists()  # the input is read first: a dataset the analysis cannot read writes nothing


@pytest.mark.parametrize("layout", ["sppo_score", "rlhflow_pairs"])
def test_a_recipes_pairs_without_scores_are_refused_as_such(tmp_path, layout):
    """SPPO's `_score` table (compute_prob.py's pairs and probabilities) and RLHFlow's pair table (a margin) hold no
    scores: 02_analyze said every row had a missing score and to set exclude_nonfinite, which then found 0 rows with
    finite scores. A single file has no split: the message named one ('train_prefs')."""
    rows = []
    for k in range(6):
        s = [0.5 * k, -1.0, 0.25]
        rows.append(build_row({"prompt_id": f"id{k}"}, f"question {k}", [f"answer {i} to {k}" for i in range(3)], s,
                              messages="chosen", keep_all_candidates=True, pick=(0, 1)))
    name, columns, scored_in = {
        "sppo_score": ("sppo", ["chosen", "rejected", "chosen_probs", "chosen_probs_win", "chosen_probs_lose"],
                       "rm_scores"),
        "rlhflow_pairs": ("rlhflow", ["prompt", "chosen", "rejected", "margin"], "rewards")}[layout]
    export_rows(name, rows, [(0, 1)] * 6).select_columns(columns).to_parquet(str(tmp_path / "train.parquet"))
    with pytest.raises(DataError) as info:
        _analyze(tmp_path, str(tmp_path / "train.parquet"), exclude_nonfinite=True)
    message = str(info.value)
    assert message.startswith(f"dataset {str(tmp_path / 'train.parquet')!r} lacks columns "
                              f"['score_chosen', 'score_rejected']; it has {columns}.")
    assert "needs the paired scores" in message and f"`{scored_in}`" in message
    assert "split" not in message and "exclude_nonfinite" not in message
    assert not (tmp_path / "run").exists()


def test_trls_reward_pairs_are_plain_pairs_not_rlhflows(tmp_path):
    """TRL's reward-modelling rows (a string prompt, chosen, rejected and a `margin`, no prompt_id) were said to be
    "RLHFlow's pairs without their scores", whose prompt is a conversation: they are pairs without scores."""
    rows = [{"prompt": f"question {k}", "chosen": f"yes {k}", "rejected": "no", "margin": 1.0} for k in range(4)]
    with pytest.raises(DataError) as info:
        _analyze(tmp_path, _jsonl(tmp_path / "rm.jsonl", rows))
    message = str(info.value)
    assert "lacks columns ['score_chosen', 'score_rejected']" in message and "RLHFlow" not in message


def test_non_numeric_scores(tmp_path):
    words = _jsonl(tmp_path / "w.jsonl", [{"score_chosen": "good", "score_rejected": 1.0}] * 3)
    with pytest.raises(DataError, match=r"'score_chosen' must hold numbers .*row 0 holds 'good'"):
        _analyze(tmp_path, words)
    mixed = _jsonl(tmp_path / "m.jsonl", [{"score_chosen": 1.0, "score_rejected": 0.5},
                                          {"score_chosen": 2.0, "score_rejected": "n/a"}])
    with pytest.raises(DataError, match=r"'score_rejected' must hold numbers .*row 1 holds 'n/a'"):
        _analyze(tmp_path, mixed)
    # a number written as text in one row: datasets stores the column as JSON text, 7.5 for "7.5"
    quoted = _jsonl(tmp_path / "q.jsonl", [{"score_chosen": 1.0, "score_rejected": 0.5},
                                           {"score_chosen": "7.5", "score_rejected": 0.5}])
    with pytest.raises(DataError, match=r"'score_chosen' must hold numbers \(float64 scores\), but it holds values of "
                                        r"mixed types; some rows hold their score as text, such as \"7.5\" in quotes"):
        _analyze(tmp_path, quoted)
    # 04_compare names its own parameter
    from repro import compare
    from repro.parameters import CompareParams, build

    with pytest.raises(DataError, match=r"the reference: column 'score_chosen' must hold numbers .*point `reference` "):
        compare.compare(build(CompareParams, {
            "run_dir": str(tmp_path / "c"), "bootstrap_resamples": 200,
            "reference": _jsonl(tmp_path / "r.jsonl", [{"prompt": f"p{i}", "chosen": "a", "rejected": "b",
                                                       "score_chosen": "good", "score_rejected": 0.0} for i in range(3)]),
            "candidate": _jsonl(tmp_path / "c.jsonl", [{"prompt": f"p{i}", "chosen": "a", "rejected": "b",
                                                       "score_chosen": 1.0, "score_rejected": 0.0} for i in range(3)])}))


def test_nonfinite_scores_are_an_error_unless_excluded(tmp_path):
    rows = [{"prompt_id": f"id{i}", "score_chosen": float(i), "score_rejected": 0.0} for i in range(6)]
    rows[1]["score_chosen"] = float("nan")
    rows[3]["score_rejected"] = None
    rows[4]["score_chosen"] = float("inf")
    data = str(tmp_path / "d.parquet")
    pd.DataFrame(rows).to_parquet(data)
    # the rows are named by their position counted from 0 (the second row, jsonl line 2, is row 1), and say so
    with pytest.raises(DataError, match=r"3 of 6 rows .*\(rows 1 \(from 0; prompt_id id1\), 3 \(prompt_id id3\), "
                                        r"4 \(prompt_id id4\); score_chosen: 2, score_rejected: 1\)\. "
                                        r".*exclude_nonfinite: true"):
        _analyze(tmp_path, data)
    result = _analyze(tmp_path, data, exclude_nonfinite=True, bootstrap_resamples=100)
    m = result.metrics
    assert m["n"] == 3 and m["n_excluded"] == 3
    assert m["excluded_reasons"] == {"score_chosen is NaN, infinite or missing": 2,
                                     "score_rejected is NaN, infinite or missing": 1}
    assert m["score_chosen"]["mean"] == pytest.approx((0 + 2 + 5) / 3)
    assert set(result.extremes["row"]) == {0, 2, 5}
    # fewer rows than the 10 largest and 10 smallest: each row once (every row was listed twice), largest first
    assert list(result.extremes["which"]) == ["largest", "largest", "smallest"]
    assert sorted(result.extremes["row"]) == [0, 2, 5]
    assert m["length"] == {"available": False, "reason": "the dataset has no chosen or rejected column",
                           "cause": "no_column", "columns": ["chosen", "rejected"]}  # (the card words the cause)
    assert "margin_vs_length" not in m["figures"]


def test_empty_and_single_row_datasets(tmp_path):
    empty = tmp_path / "empty"
    datasets.Dataset.from_dict({"score_chosen": [], "score_rejected": []},
                               features=datasets.Features({c: datasets.Value("float64") for c in
                                                           ("score_chosen", "score_rejected")})).save_to_disk(empty)
    with pytest.raises(DataError, match="could not be loaded .*it may be empty"):  # datasets cannot reload it
        _analyze(tmp_path, str(empty))
    no_rows = pa.table({"score_chosen": pa.array([], pa.float64()), "score_rejected": pa.array([], pa.float64())})
    with pytest.raises(DataError, match="has no rows"):
        analysis.validate_scores(no_rows, "dataset 'x'", exclude_nonfinite=False)
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(DataError, match="is an empty file"):
        _analyze(tmp_path, str(tmp_path / "empty.jsonl"))
    empty_parquet = tmp_path / "empty.parquet"
    pd.DataFrame({"score_chosen": [], "score_rejected": []}, dtype=float).to_parquet(empty_parquet)
    with pytest.raises(DataError, match=r"empty\.parquet' holds no rows"):  # not "damaged", no split (a file)
        _analyze(tmp_path, str(empty_parquet))
    one = _jsonl(tmp_path / "one.jsonl", [{"score_chosen": 2.0, "score_rejected": 1.0}])
    with pytest.raises(DataError, match=r"needs at least 2 .*Point `dataset` at more rows, or, for this run's own "
                                        r"dataset, build more \(a higher `limit`, a larger slice\)\."):
        _analyze(tmp_path, one)


def test_validate_scores_takes_a_dataset_or_a_dataframe_as_a_table():
    """docs/analysis.md tells a script to call validate_scores: a datasets.Dataset gave "AttributeError: 'Dataset'
    object has no attribute 'column'", a DataFrame another AttributeError; now both are read as the table."""
    rows = {"prompt_id": ["a", "b", "c", "d", "e"], "score_chosen": [2.0, float("nan"), 3.0, 1.0, 9.0],
            "score_rejected": [1.0, 0.0, 3.5, 1.0, 0.0]}
    table = pa.table(rows)
    chosen, rejected, kept, reasons = analysis.validate_scores(table, "dataset 'x'", exclude_nonfinite=True)
    assert chosen.tolist() == [2.0, 3.0, 1.0, 9.0] and rejected.tolist() == [1.0, 3.5, 1.0, 0.0]
    assert kept.tolist() == [0, 2, 3, 4] and reasons == {"score_chosen is NaN, infinite or missing": 1}
    for given in (datasets.Dataset.from_dict(rows), pd.DataFrame(rows)):
        got = analysis.validate_scores(given, "dataset 'x'", exclude_nonfinite=True)
        assert [x.tolist() for x in got[:3]] == [chosen.tolist(), rejected.tolist(), kept.tolist()]
        assert got[3] == reasons
    picked = datasets.Dataset.from_dict(rows).select([4, 3, 2, 1])  # its rows, not the whole table it maps into
    got = analysis.validate_scores(picked, "dataset 'x'", exclude_nonfinite=True)
    assert got[0].tolist() == [9.0, 1.0, 3.0] and got[2].tolist() == [0, 1, 2]
    with pytest.raises(DataError, match=r"validate_scores: table is dict, expected a pyarrow\.Table, a datasets\."
                                        r"Dataset or a pandas DataFrame"):
        analysis.validate_scores(rows, "dataset 'x'", exclude_nonfinite=True)


def test_validate_scores_names_rows_by_position_and_prompt_id():
    rows = {"score_chosen": [2.0, float("nan")], "score_rejected": [1.0, 0.0]}
    with pytest.raises(DataError, match=r"\(rows 1 \(from 0\); score_chosen: 1\)"):  # no prompt_id: as stats names them
        analysis.validate_scores(pa.table(rows), "dataset 'x'", exclude_nonfinite=False)
    with pytest.raises(DataError, match=r"\(rows 1 \(from 0; prompt_id b\); score_chosen: 1\)"):
        analysis.validate_scores(pa.table({"prompt_id": ["a", "b"], **rows}), "dataset 'x'", exclude_nonfinite=False)


@pytest.mark.parametrize("rows, said", [
    ([{"score_chosen": 2.0, "score_rejected": 1.0}], r"needs at least 2 .*Point `dataset` at more rows"),
    ([{"score_chosen": 2.0, "score_rejected": float("nan")}] + [{"score_chosen": 2.0, "score_rejected": 1.0}] * 2,
     r"1 of 3 rows have a NaN.*set the parameter exclude_nonfinite: true"),
])
def test_a_dataset_the_validation_rejects_is_a_failed_analysis_in_the_record(tmp_path, rows, said):
    # it failed before the manifest was touched: the run stayed `complete` (or had no record), and 03_card said that
    # metrics.json was not found and to run 02_analyze again, which fails the same way
    data = tmp_path / "d.parquet"
    pd.DataFrame(rows).to_parquet(data)
    with pytest.raises(DataError, match=said):
        _analyze(tmp_path, str(data))
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["stages"]["analyze"]["status"] == "failed"
    assert re.search("DataError: .*" + said, manifest["notebooks"]["02_analyze"]["error"])
    facts = gather_facts(CardParams(run_dir=str(tmp_path / "run"), card_dataset=str(data)))
    assert re.search(said, facts.analysis_error) and ("characteristics", "analysis_failed") in facts.left_out
    assert facts.analysis_error.startswith("DataError: ")  # the error itself (not "stage 'analyze' failed: ...")
    # as `repro run` records a notebook's failure: no "Notebook 02_analyze failed at cell 6 (execution count 5)"
    Manifest(RunDir(tmp_path / "run")).notebook_status("02_analyze", "failed", error=(
        f"Notebook 02_analyze failed at cell 6 (execution count 5): {manifest['stages']['analyze']['error']}\nsaved"))
    facts = gather_facts(CardParams(run_dir=str(tmp_path / "run"), card_dataset=str(data)))
    assert facts.analysis_error.startswith("DataError: ") and "cell 6" not in facts.analysis_error


def _pairs(n: int, shift: float, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"prompt": f"p{i}", "chosen": "w " * (i % 7 + 2), "rejected": "d", "score_chosen": c,
             "score_rejected": c - shift - abs(d)} for i, (c, d) in enumerate(rng.normal(0, 1, (n, 2)).tolist())]


def test_few_rows_and_p_values_below_the_smallest_float_are_said_as_such(tmp_path):
    # 5 rows: a percentile bootstrap's 95% interval covers the mean about 84% of the time on normal data, shown as a
    # 95% interval without a word; 3000 clearly apart: p-values underflow to 0, printed "p = 0"
    few = _analyze(tmp_path / "few", _jsonl(tmp_path / "few.jsonl", _pairs(5, 0.1, 1)), bootstrap_resamples=200)
    assert few.metrics["bootstrap"]["few_rows"] is True
    assert "With 5 rows, these percentile-bootstrap 95% intervals are too narrow" in analysis.headline(few.metrics)
    many = _analyze(tmp_path / "many", _jsonl(tmp_path / "many.jsonl", _pairs(3000, 5.0, 2)), bootstrap_resamples=200)
    tests = many.metrics["tests"]
    assert [tests[t]["pvalue"] for t in ("wilcoxon", "paired_t", "sign_test")] == [0.0, 0.0, 0.0]
    headline = analysis.headline(many.metrics)
    assert "Wilcoxon signed-rank p < 1e-300 (" in headline and "paired t p < 1e-300, sign test p < 1e-300;" in headline
    # a dataset from another tool: its scores read as PairRM's, said as a reading, not as a fact
    assert "as PairRM's are (no record names the scorer: read as PairRM's)" in many.metrics["scale"]["sentence"]
    assert "are expected to hold if PairRM made them." in many.metrics["scale"]["sentence"]
    assert not re.search(r"p = 0(?![.\d])", headline) and "too narrow" not in headline and many.metrics["bootstrap"]["few_rows"] is False
    # two rows: no Spearman of margin vs length (two points are always in order), as correlations has none
    two = _analyze(tmp_path / "two", _jsonl(tmp_path / "two.jsonl", _pairs(2, 0.1, 3)), bootstrap_resamples=200)
    assert two.metrics["length"]["margin_vs_length_difference"]["tokens"] == {"spearman": None, "pvalue": None}
    assert "Spearman of margin vs token length difference = n/a (p = n/a)" in analysis.headline(two.metrics)


def test_the_scale_of_rows_made_elsewhere_is_read_as_known_recipe_names_their_scorer_as_the_card_reads_it(tmp_path):
    """Rows made elsewhere, known_recipe naming their scorer: 02_analyze's scale said "as PairRM's are (no record names
    the scorer: read as PairRM's)" whichever it named, where the card of the same rows and known_recipe read them as
    that scorer's. Now 02_analyze takes known_recipe too and both read the scale through one function."""
    rng = np.random.default_rng(2)
    rows = _jsonl(tmp_path / "theirs.jsonl", [  # PairRM's sign order, off any grid
        {"prompt": f"p{i}", "chosen": "a", "rejected": "b", "score_chosen": abs(c), "score_rejected": -abs(d)}
        for i, (c, d) in enumerate(rng.normal(1.0, 1.0, (30, 2)).tolist())])
    for k, (recipe, said, pairrm) in enumerate((
            ({"scorer": "sfairXC/FsfairX-LLaMA3-RM-v0.1"}, "These scores are real-valued, as a reward model's logits "
                                                           "are: ", False),
            ({"scorer": "llm-blender/PairRM"}, "These scores are real-valued logits, as PairRM's are: ", True),
            (None, "as PairRM's are (no record names the scorer: read as PairRM's)", None))):
        run = tmp_path / f"run{k}"
        m = analysis.analyze(AnalyzeParams(dataset=rows, run_dir=str(run), known_recipe=recipe,
                                           bootstrap_resamples=100)).metrics
        assert m["scorer"] is None and said in m["scale"]["sentence"], recipe
        assert gather_facts(CardParams(run_dir=str(run), card_dataset=rows, known_recipe=recipe)
                            ).scale_read_as_pairrm is pairrm, recipe


def test_rows_told_as_pairrms_that_break_its_sign_order_are_read_as_a_reward_models(tmp_path):
    """known_recipe names PairRM, but some rows break its sign order (score_chosen >= 0 >= score_rejected), which its
    scores never do: 02_analyze and the card read the scale as a reward model's, not PairRM's (a rule no test held)."""
    rng = np.random.default_rng(1)
    rows = _jsonl(tmp_path / "theirs.jsonl", [
        {"prompt": f"p{i}", "chosen": "a", "rejected": "b", "score_chosen": c, "score_rejected": c - abs(d)}
        for i, (c, d) in enumerate(rng.normal(1.0, 1.0, (30, 2)).tolist())])
    recipe, run = {"scorer": "llm-blender/PairRM"}, tmp_path / "run"
    m = analysis.analyze(AnalyzeParams(dataset=rows, run_dir=str(run), known_recipe=recipe,
                                       bootstrap_resamples=100)).metrics
    assert m["scorer"] is None and 0 < m["invariants"]["sign_order_fails"] < 30
    assert "These scores are real-valued, as a reward model's logits are: " in m["scale"]["sentence"]
    assert gather_facts(CardParams(run_dir=str(run), card_dataset=rows, known_recipe=recipe)
                        ).scale_read_as_pairrm is False


def test_no_dataset_and_no_run_dataset(tmp_path):
    with pytest.raises(DataError, match="Run notebooks/01_construct.ipynb"):
        analysis.analyze(AnalyzeParams(run_dir=str(tmp_path / "nothing")))


def test_a_run_whose_01_construct_did_not_finish_is_refused_by_02_analyze_as_by_03_card(sample_dir, tmp_path):
    # JupyterLab: a built run, then 01_construct's §1 Source rows run again (or a run stopped mid-way): 03_card refused
    # it, but 02_analyze analysed the rows the record no longer described and wrote metrics, tables and figures
    # (and 04_compare compared them, writing compare.json)
    from repro.compare import compare
    from repro.construct import stages
    from repro.parameters import CompareParams, ConstructParams, build

    run = RunDir(tmp_path / "run")
    own = {"run_dir": str(run.root), "source": str(sample_dir / "train_prefs.jsonl"), "candidate_columns": [],
           "include_original_pair": True, "limit": 4, "scorer_model": "builtin:tiny-pairrm"}
    ctx = stages.begin(build(ConstructParams, own))

    def cells_from_slice(source_rows):
        cs = stages.candidates(ctx, rows := stages.slice_rows(ctx, source_rows))
        stages.write(ctx, stages.build(ctx, rows, cs, stages.score(ctx, cs)))

    cells_from_slice(stages.load(ctx))
    source_rows = stages.load(ctx)  # one cell run again: the run is `running` until its write cell
    before = {p: p.read_bytes() for p in run.root.rglob("*") if p.is_file()}
    refused = (rf"{run.root} holds a run whose 01_construct did not finish \(its manifest.json says running\): its "
               rf"record may not describe {run.dataset}\. Run notebooks/01_construct.ipynb to its end first \(Run "
               rf"All; a kernel still running it: wait for it\); nothing was written\.")
    for notebook in (lambda: analysis.analyze(AnalyzeParams(run_dir=str(run.root), bootstrap_resamples=100)),
                     lambda: analysis.analyze(AnalyzeParams(run_dir=str(run.root), dataset=str(run.dataset),
                                                            bootstrap_resamples=100)),
                     lambda: gather_facts(CardParams(run_dir=str(run.root))),
                     lambda: compare(CompareParams(run_dir=str(run.root), reference=own["source"])),
                     # its dataset, described from another run directory (it analysed, compared and carded it)
                     lambda: analysis.analyze(AnalyzeParams(run_dir=str(tmp_path / "other"), dataset=str(run.dataset),
                                                            bootstrap_resamples=100)),
                     lambda: compare(CompareParams(run_dir=str(tmp_path / "other"), reference=own["source"],
                                                   candidate=str(run.dataset))),
                     lambda: gather_facts(CardParams(run_dir=str(tmp_path / "other"), card_dataset=str(run.dataset)))):
        with pytest.raises(DataError, match=refused):
            notebook()
        assert {p: p.read_bytes() for p in run.root.rglob("*") if p.is_file()} == before
        assert not (tmp_path / "other").exists()
    cells_from_slice(source_rows)  # the cells below it, run again: complete, and analysed
    assert analysis.analyze(AnalyzeParams(run_dir=str(run.root), bootstrap_resamples=100)).metrics["n"] == 4


def test_too_few_resamples_is_a_parameter_error():
    from repro.parameters import build

    with pytest.raises(ParameterError, match="bootstrap_resamples"):
        build(AnalyzeParams, {"bootstrap_resamples": 10})


# --------------------------------------------------------------------------------------------
# the notebook, run as users run it
# --------------------------------------------------------------------------------------------
def test_notebook_standalone_on_the_real_sample(run_notebook, sample_dir, train_rows, tmp_path):
    run_dir = tmp_path / "run"
    out = tmp_path / "out.ipynb"
    run_notebook(
        NOTEBOOK, out, kernel_name="python3", cwd=str(tmp_path),
        parameters={"dataset": str(sample_dir / "train_prefs.jsonl"), "run_dir": str(run_dir),
                    "bootstrap_resamples": 200})
    m = json.loads((run_dir / "metrics.json").read_text())
    scores = ratings(train_rows)
    ties = int((scores["score_chosen"] == scores["score_rejected"]).sum())
    assert (m["n"], m["ties"], m["bootstrap"]["resamples"]) == (len(train_rows), ties, 200)
    assert m["score_chosen"]["mean"] == pytest.approx(scores["score_chosen"].mean(), rel=1e-12)
    assert m["score_rejected"]["mean"] == pytest.approx(scores["score_rejected"].mean(), rel=1e-12)
    for fig in m["figures"].values():
        assert (run_dir / fig["png"]).stat().st_size > 10_000 and (run_dir / fig["svg"]).is_file()
    executed = json.loads(out.read_text())
    shown = json.dumps([c.get("outputs", []) for c in executed["cells"]])
    assert "ratings, not PairRM logits" in shown and shown.count("image/png") == len(m["figures"])


@pytest.fixture
def stand_in_run(train_rows, tmp_path):
    """A run directory as 01_construct leaves it: two-candidate PairRM-like scores from a stand-in scorer."""
    rng = np.random.default_rng(0)
    rows = []
    for r in train_rows[:150]:
        s = float(abs(rng.normal(0.3, 0.2)))
        rows.append({**{k: r.get(k) for k in SEED_COLUMNS}, "reference_response": "", "score_chosen": s,
                     "score_rejected": -s, "candidates": [_assistant(r["rejected"]), _assistant(r["chosen"])],
                     "candidate_scores": [-s, s]})
    run = RunDir(tmp_path / "run")
    write_split(datasets.Dataset.from_list(rows, features=output_features(keep_all_candidates=True)), run.dataset)
    Manifest(run).record("scorer", {"model": "builtin:tiny-pairrm", "stand_in": True})
    return run


def test_repro_run_analyses_the_runs_own_dataset(repro_run, stand_in_run):
    proc = repro_run(ROOT / "params" / "demo.yaml", "--out", stand_in_run.root, "--set", "notebooks=[02_analyze]",
                     "--set", "bootstrap_resamples=200", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = json.loads(stand_in_run.metrics.read_text())
    assert m["n"] == 150 and m["dataset"]["source"] == str(stand_in_run.dataset)
    assert m["scores_from_stand_in"] is True and m["scorer"]["model"] == "builtin:tiny-pairrm"
    assert m["scale"]["kind"] == "logit" and m["invariants"]["expected_to_hold"] is True
    assert m["invariants"]["antisymmetry_holds"] == 150 and m["invariants"]["sign_order_fails"] == 0
    assert m["invariants"]["candidate_scores"] == {
        "rows": 150, "candidates_per_row": {"min": 2, "max": 2, "mean": 2.0}, "sum_to_zero_holds": 150,
        "sum_to_zero_atol": 1e-4, "two_candidate_rows": 150, "antisymmetry_holds_among_two_candidate_rows": 150,
        "chosen_is_best_and_rejected_is_worst": 150}
    manifest = json.loads(stand_in_run.manifest.read_text())
    assert manifest["status"] == "complete" and manifest["stages"]["analyze"]["status"] == "done"
    assert sha256_file(stand_in_run.metrics) == manifest["outputs"]["metrics.json"]["sha256"]
    executed = (stand_in_run.notebooks / "02_analyze.ipynb").read_text()
    assert "Stand-in scores" in executed
    # the stand-in note is its own blockquote paragraph, and the numbers follow it as a list
    assert "responses.\n\n**150 pairs**" in analysis.headline(m) and "\n- margin > 0 in 150 rows" in analysis.headline(m)


def test_a_reward_models_scores_are_not_expected_to_keep_pairrms_invariants(tmp_path):
    # a sequence classifier's logits read as "real-valued, as PairRM's are ... invariants expected to hold", and the
    # sign order it never keeps was then reported as broken
    run = RunDir(tmp_path / "run")
    rng = np.random.default_rng(3)
    rows = [{"prompt": f"p{i}", "score_chosen": float(a), "score_rejected": float(a - abs(d))}
            for i, (a, d) in enumerate(zip(rng.normal(1.5, 1.0, 40), rng.normal(0.0, 1.0, 40)))]
    write_split(datasets.Dataset.from_list(rows), run.dataset)
    Manifest(run).record("scorer", {"model": "my/reward-model", "kind": "sequence_classifier"})
    m = analysis.analyze(AnalyzeParams(run_dir=str(run.root), bootstrap_resamples=100)).metrics
    assert m["scale"]["kind"] == "logit" and m["invariants"]["expected_to_hold"] is False
    assert "PairRM's invariants:" not in analysis.headline(m) and "as PairRM's are" not in m["scale"]["sentence"]
    assert "a reward model's logits" in m["scale"]["sentence"]
    Manifest(run).record("scorer", {"model": "llm-blender/PairRM"})  # PairRM's kind: its invariants are expected
    m = analysis.analyze(AnalyzeParams(run_dir=str(run.root), bootstrap_resamples=100)).metrics
    assert m["invariants"]["expected_to_hold"] is True and "as PairRM's are" in m["scale"]["sentence"]
    # a pair rule other than best vs worst: the sign order is not the pair's to keep (the headline says why)
    Manifest(run).update(parameters={"selection": "best_second"})
    m = analysis.analyze(AnalyzeParams(run_dir=str(run.root), bootstrap_resamples=100)).metrics
    assert m["invariants"]["selection"] == "best_second"
    assert "so score_chosen >= 0 >= score_rejected need not hold" in m["scale"]["sentence"]
    assert "are expected to hold" not in m["scale"]["sentence"]
    assert ("the pair is not each row's best and worst (selection best_second), so score_chosen >= 0 >= "
            "score_rejected need not hold") in analysis.headline(m)


def test_dataset_split_names_another_split_of_the_runs_own_dataset(tmp_path):
    """A recipe's run holds `train` and `test`: dataset_split='test' with dataset unset analysed `train` without a
    word (the split 01_construct wrote always won); now it analyses `test`, and a split the run lacks is refused."""
    run = RunDir(tmp_path / "run")
    for split, n in (("train", 6), ("test", 4)):
        rows = [{"prompt": f"{split} {i}", "score_chosen": 1.0 + i, "score_rejected": -1.0 - i} for i in range(n)]
        write_split(datasets.Dataset.from_list(rows), run.dataset, split)
    Manifest(run).update(dataset={"split": "train"})
    p = {"run_dir": str(run.root), "bootstrap_resamples": 100}
    assert analysis.analyze(AnalyzeParams(**p)).metrics["dataset"]["split"] == "train"  # the default: 01's split
    assert analysis.analyze(AnalyzeParams(**p, dataset_split="test")).metrics["n"] == 4
    with pytest.raises(DataError, match=r"Parameter dataset_split='tset': this run's dataset at \S+ has no such split "
                                        r"\(it has \['test', 'train'\]\)\. Did you mean 'test'\? Name one of those, or "
                                        r"leave dataset_split"):
        analysis.analyze(AnalyzeParams(**p, dataset_split="tset"))


@pytest.mark.parametrize("fmt", ["sppo", "snorkel", "rlhflow"])
def test_a_formats_own_candidate_scores_are_checked(tmp_path, fmt):
    """SPPO's rm_scores, Snorkel's all_rm_scores and RLHFlow's rewards are every candidate's score: the analysis (and
    the card) said the dataset had no candidate scores. PairRM's scores sum to 0 over the candidates ranked together:
    SPPO's published rows hold 7 (UltraFeedback's pair ranked with the 5 generate_i), so none is any candidate's."""
    rng = np.random.default_rng(8)

    def built(ranked: int) -> datasets.Dataset:  # 6 rows of 5 candidates, PairRM-like scores of `ranked` texts
        rows, picks = [], []
        for k in range(6):
            s = rng.normal(0, 1, ranked)
            s = s - s.mean()
            picks.append((int(np.argmax(s[-5:])), int(np.argmin(s[-5:]))))
            rows.append(build_row({"prompt_id": f"id{k}"}, f"question {k}", [f"answer {i} to {k}" for i in range(5)],
                                  s[-5:].tolist(), messages="chosen", keep_all_candidates=True, pick=picks[-1]))
            rows[-1]["all_ranked"] = s.tolist()
        return export_rows(fmt, rows, picks).add_column("all_ranked", [r["all_ranked"] for r in rows])

    ds = built(5).remove_columns("all_ranked")
    ds.to_parquet(str(tmp_path / "five.parquet"))
    checks = _analyze(tmp_path / "five", str(tmp_path / "five.parquet"), bootstrap_resamples=100).metrics[
        "invariants"]["candidate_scores"]
    assert checks["rows"] == checks["sum_to_zero_holds"] == checks["chosen_is_best_and_rejected_is_worst"] == 6
    if fmt == "sppo":  # 7 rm_scores for 5 generate_i: not applicable, not broken
        published = built(7)
        published = published.remove_columns("rm_scores").rename_column("all_ranked", "rm_scores")
        published.to_parquet(str(tmp_path / "seven.parquet"))
        metrics = _analyze(tmp_path / "seven", str(tmp_path / "seven.parquet"), bootstrap_resamples=100).metrics
        assert metrics["invariants"]["candidate_scores"] is None
        assert "candidate scores sum to 0" not in analysis.headline(metrics)


def test_lengths_are_measured_in_a_column_of_texts_and_conversations_and_a_row_without_one_is_named(tmp_path,
                                                                                                 train_rows):
    """One row whose `chosen` is a text among conversations (a column of mixed types) turned the whole length analysis
    off ("column 'chosen' is extension<arrow.json>, neither text nor a list of {content, role} messages"), naming no
    row; now that text is the row's response, as in a column of texts, and a row without a response to measure (here:
    `rejected` without the assistant's turn), which the lengths left out unsaid, is named."""
    rows = json.loads(json.dumps(train_rows[:40]))
    rows[3]["chosen"] = rows[3]["chosen"][-1]["content"]
    rows[5]["rejected"] = rows[5]["rejected"][:1]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = AnalyzeParams(dataset=str(path), run_dir=str(tmp_path / "run"), bootstrap_resamples=100)
    m = analysis.analyze(p).metrics
    read = rows[:5] + rows[6:]
    margin = pd.Series([r["score_chosen"] - r["score_rejected"] for r in read])
    diff = pd.Series([len(r["chosen"] if isinstance(r["chosen"], str) else _assistant(r["chosen"]))
                      - len(_assistant(r["rejected"])) for r in read])
    length = m["length"]
    assert length["available"] and length["n"] == 39 and m["n"] == 40
    assert length["left_out"] == {"rows": 1, "first_row": 5, "column": "rejected"}
    assert length["margin_vs_length_difference"]["chars"]["spearman"] == pytest.approx(
        margin.corr(diff, method="spearman"))
    assert (length["chosen_longer_test"]["chars"]["positive"], length["chosen_longer_test"]["chars"]["negative"]) == (
        (diff > 0).sum(), (diff < 0).sum())


def test_text_from_the_data_never_becomes_html_in_the_input_view_and_the_headline(tmp_path, train_rows):
    """A dataset someone sent, named ``rows` <img src=x onerror=...> ` ``, whose `chosen` messages have a field named
    "<img ...>" and whose scorer (recorded beside it by `repro score`) is named with a <script>: the input view put the
    file name between backticks it closed, and the headline printed the scorer, the name and the length reason's column
    type as they were; JupyterLab ran the <img> and <script> of 02_analyze's output. Now they show as text."""
    rows = json.loads(json.dumps(train_rows[:12]))
    for r in rows:
        r["chosen"] = [{"<img src=x onerror=alert(3)>": m["content"]} for m in r["chosen"]]
    path = tmp_path / "rows` <img src=x onerror=alert(1)> `.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    scorer = "builtin:tiny\n\n<script>alert(2)</script>"
    mark_scorer(path, {"model": scorer, "kind": "pairrm", "stand_in": True})
    p = AnalyzeParams(dataset=str(path), run_dir=str(tmp_path / "run"), bootstrap_resamples=100)
    view = analysis.load(p)._repr_markdown_()
    assert html_elements(view) == [] and f"12 rows of {path} (split train_prefs)" in shown_text(view)
    headline = analysis.analyze(p)._repr_markdown_()
    assert html_elements(headline) == []
    for shown in (f"stand-in scorer ({scorer.replace(chr(10), ' ')})", f"analysed from {path} (",
                  "column 'chosen' is list<item: struct<<img src=x onerror=alert(3)>: string>>"):
        assert shown in shown_text(headline)
