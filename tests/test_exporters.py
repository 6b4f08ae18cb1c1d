"""Output formats against independent computations: SPPO's compute_prob.py transcribed in NumPy, the published
column names and split names, and the way back to the seed's columns (seed_view, to_trl)."""

import math

import datasets
import numpy as np
import pandas as pd
import pytest

from repro.analysis.report import validate_scores
from repro.dataset_io import conversation, prompt_id_of
from repro.errors import DataError
from repro.exporters import FORMATS, SCORED_ONLY, detect_format, export_rows, seed_view, sppo_probabilities
from repro.formats import to_trl
from repro.parameters import ConstructParams
from repro.construct.pairs import build_row
from repro.construct.selection import select

# fixed scores (5 candidates per prompt, as SPPO's pairs=5), with a tie and a large spread
SCORES = [[0.3, -1.2, 2.5, 0.7, 0.7], [-0.4, -0.4, 0.1, 3.0, -2.2], [1e-3, -1e-3, 0.0, 0.002, -0.002]]
PROMPTS = ["What is 2+2?", "Name a colour.", "Say hi."]


def compute_prob_transcription(scores_per_row, pairs=5):
    """uclaml/SPPO scripts/compute_prob.py `from_ranks` + `prepare_score`, over a pandas frame, as written there."""
    probs = []
    for score in scores_per_row:
        prb = np.zeros((pairs, pairs))
        for i in range(pairs):
            for j in range(pairs):
                prb[i][j] = 1 / (1 + np.exp(score[j] - score[i]))
        probs.append(prb.tolist())
    train = pd.DataFrame({"rm_scores": list(scores_per_row), "probability": probs})
    metrics = train["rm_scores"].apply(lambda x: np.array(x[-5:]))
    metrics_prob = train["probability"].apply(lambda x: np.stack(x).sum(axis=1))
    maxmin = metrics.apply(lambda x: [x.argmax(), x.argmin()])
    chosen_probs = [train["probability"].iloc[i][maxmin[i][0]][maxmin[i][1]] for i in range(len(train))]
    win = [metrics_prob[i][maxmin[i][0]] / len(metrics_prob.iloc[0]) for i in range(len(metrics_prob))]
    lose = [metrics_prob[i][maxmin[i][1]] / len(metrics_prob.iloc[0]) for i in range(len(metrics_prob))]
    return probs, [list(m) for m in maxmin], chosen_probs, win, lose


def scored_rows(scores=SCORES):
    rows, picks = [], []
    for prompt, s in zip(PROMPTS, scores):
        cands = [f"answer {k} to {prompt}" for k in range(len(s))]
        pick = select(s, None, "", ConstructParams())
        picks.append((pick.chosen, pick.rejected))
        rows.append(build_row({"prompt_id": f"id-{prompt}"}, prompt, cands, s, messages="chosen",
                              keep_all_candidates=True, pick=picks[-1]))
    return rows, picks


def test_sppo_probability_columns_equal_compute_prob_py():
    rows, picks = scored_rows()
    ds = export_rows("sppo", rows, picks)
    probs, maxmin, chosen_probs, win, lose = compute_prob_transcription(SCORES)
    assert ds["probability"] == probs
    np.testing.assert_array_equal(ds["chosen_probs"], chosen_probs)
    np.testing.assert_allclose(ds["chosen_probs_win"], win, rtol=1e-15)
    np.testing.assert_allclose(ds["chosen_probs_lose"], lose, rtol=1e-15)
    # the pair is SPPO's argmax / argmin, except where the seed's tie rule (last of the worst) differs from
    # numpy's argmin (first): row 0 has no tie at the bottom, row 1 neither; so the picks agree
    assert [list(p) for p in picks] == maxmin
    for k, (c, r) in enumerate(picks):
        assert ds[k]["chosen"][1]["content"] == f"answer {c} to {PROMPTS[k]}"
        assert ds[k]["generate_3"] == [{"content": PROMPTS[k], "role": "user"},
                                       {"content": f"answer 3 to {PROMPTS[k]}", "role": "assistant"}]
    assert ds["rm_scores"] == SCORES
    assert np.allclose(np.diag(sppo_probabilities(SCORES[0])), 0.5)


def test_sppo_seven_scores_with_tied_lowest_index_probability_as_compute_prob_py():
    # the original pair's 2 scores first, then 5 generated; generate_0 and generate_4 tie at the lowest (one text
    # sampled twice): compute_prob.py indexes `probability` (over the FIRST 5 scores) by np.argmin, the first of them
    scores = [[0.8, -0.6, -0.3, 0.9, 0.1, 0.2, -0.3]]
    generated = scores[0][2:]
    pick = select(generated, None, "", ConstructParams(lowest_tie="first"))
    lead = 2
    row = build_row({"prompt_id": "id"}, PROMPTS[0], ["orig c", "orig r", *[f"g{k}" for k in range(5)]], scores[0],
                    messages="chosen", keep_all_candidates=True, pick=(pick.chosen + lead, pick.rejected + lead))
    ds = export_rows("sppo", [row | {SCORED_ONLY: lead}], [(pick.chosen + lead, pick.rejected + lead)])
    probs, maxmin, chosen_probs, win, lose = compute_prob_transcription(scores)
    assert maxmin == [[1, 0]] and (pick.chosen, pick.rejected) == (1, 0)
    assert ds["probability"] == probs and ds["rm_scores"] == scores
    np.testing.assert_array_equal(ds["chosen_probs"], chosen_probs)
    np.testing.assert_allclose(ds["chosen_probs_win"], win, rtol=1e-15)
    np.testing.assert_allclose(ds["chosen_probs_lose"], lose, rtol=1e-15)
    assert ds[0]["rejected"][1]["content"] == "g0"


def test_each_format_writes_its_published_columns_and_split_names():
    rows, picks = scored_rows()
    expected = {
        "seed": ["prompt", "prompt_id", "messages", "score_chosen", "score_rejected", "reference_response", "chosen",
                 "rejected"],
        "sppo": ["prompt", "prompt_id", "chosen", "rejected", *[f"generate_{i}" for i in range(5)], "probability",
                 "rm_scores", "chosen_probs", "chosen_probs_win", "chosen_probs_lose"],
        "snorkel": ["prompt_id", "prompt", "all_generated_responses", "all_rm_scores", "chosen", "rejected"],
        "rlhflow": ["prompt", "responses", "rewards", "chosen", "rejected", "margin"],
        "selm": ["prompt", "prompt_id", "messages", "reference_response", "chosen", "rejected"],
    }
    for name, columns in expected.items():
        ds = export_rows(name, [{k: v for k, v in r.items()} for r in rows], picks)
        assert ds.column_names == columns, name
    assert FORMATS["snorkel"].split_name(2) == "train_iteration_2"
    assert FORMATS["selm"].split_name(1) == "train_prefs_1"
    assert FORMATS["seed"].split_name(3) == "train_prefs" and FORMATS["sppo"].split_name(1) == "train"
    assert FORMATS["snorkel"].split_name(1, "mine") == "mine"
    rl = export_rows("rlhflow", rows, picks)
    assert rl[1]["margin"] == pytest.approx(3.0 - (-2.2)) and rl[1]["chosen"] == "answer 3 to Name a colour."
    assert rl[1]["prompt"] == [{"content": "Name a colour.", "role": "user"}]


def test_seed_view_maps_every_format_back_to_the_seed_columns():
    rows, picks = scored_rows()
    seed = export_rows("seed", [{k: v for k, v in r.items() if k not in ("candidates", "candidate_scores")}
                                for r in rows], picks)
    for name in ("sppo", "snorkel", "rlhflow"):
        ds = export_rows(name, rows, picks)
        assert detect_format(ds.column_names) == name
        view = seed_view(ds)
        for column in ("prompt", "score_chosen", "score_rejected", "chosen", "rejected"):
            assert view[column] == seed[column], (name, column)
        if name != "rlhflow":
            assert view["prompt_id"] == seed["prompt_id"]
        # every candidate and its score, which each of these formats holds (04_compare compares them, 02_analyze
        # checks PairRM's sum over them); the seed's own columns for them
        assert view["candidates"] == [r["candidates"] for r in rows], name
        assert view["candidate_scores"] == [r["candidate_scores"] for r in rows], name
    assert detect_format(seed.column_names) == "seed" and seed_view(seed) is seed


def test_seed_view_takes_sppos_generated_scores_from_the_end():
    # the published SPPO rows: 7 rm_scores (2 original + 5 generated, compute_prob ranks x[-5:]), 5 generate_i
    rows, picks = scored_rows()
    ds = export_rows("sppo", rows, picks).to_list()
    for r in ds:
        r["rm_scores"] = [9.0, -9.0] + r["rm_scores"]
    import datasets

    view = seed_view(datasets.Dataset.from_list(ds))
    assert view["score_chosen"] == [max(s) for s in SCORES]
    # 7 scores for 5 texts: no score is said to be a candidate's (the 7 were ranked together, not the last 5)
    assert view["candidates"] == [r["candidates"] for r in rows] and view["candidate_scores"] == [None] * 3


def test_to_trl_reads_every_format():
    rows, picks = scored_rows()
    reference = to_trl(export_rows("seed", rows, picks, keep_all_candidates=True))
    for name in ("sppo", "snorkel", "rlhflow"):
        out = to_trl(export_rows(name, rows, picks))
        for column in ("prompt", "chosen", "rejected", "score_margin"):
            assert out[column] == reference[column], (name, column)
    selm = to_trl(export_rows("selm", rows, picks))
    # no scores: no score columns (they were null, and `row["score_margin"] > 0` a TypeError on them)
    assert selm["chosen"] == reference["chosen"] and selm.column_names == ["prompt_id", "prompt", "chosen", "rejected"]
    # SPPO's `_score` table (UCLAML/synthetic_data_..._score): the pair and its probabilities, no scores
    score_table = export_rows("sppo", rows, picks).select_columns(
        ["chosen", "rejected", "chosen_probs", "chosen_probs_win", "chosen_probs_lose"])
    out = to_trl(score_table)
    for column in ("prompt", "chosen", "rejected"):
        assert out[column] == reference[column], column
    assert out.column_names == selm.column_names
    # RLHFlow's pair table (its DPO data: prompt, chosen, rejected, margin): refused as if its scores were not
    # numbers; its margin is the score_margin, the scores it does not hold are not made up as null columns
    pairs = to_trl(export_rows("rlhflow", rows, picks).select_columns(["prompt", "chosen", "rejected", "margin"]))
    for column in ("prompt", "chosen", "rejected", "score_margin"):
        assert pairs[column] == reference[column], column
    assert pairs.column_names == [*selm.column_names, "score_margin"]
    # by the layout, not the values: a seed table whose scores are null is refused, an empty SELM split converts
    nulls = export_rows("seed", rows, picks).map(lambda r: {"score_chosen": None, "score_rejected": None})
    with pytest.raises(DataError, match=r"must be finite numbers \(not null, NaN nor infinite\), got \[None, None\]"):
        to_trl(nulls)
    empty = to_trl(export_rows("selm", rows, picks).select([]))
    assert len(empty) == 0 and empty.column_names == selm.column_names


def test_sppo_needs_the_same_number_of_candidates_in_every_row():
    rows, picks = scored_rows([[0.1, 0.2], [0.3, 0.1, 0.0], [1.0, 0.0]])
    with pytest.raises(DataError, match="generate_i"):
        export_rows("sppo", rows, picks)


def test_seed_view_pairs_scored_rows_that_have_no_pair_yet():
    import datasets

    # RLHFlow's get_rewards.py output: {prompt, responses, rewards}; its max_min pair is argmax / argmin
    annotated = datasets.Dataset.from_list([
        {"prompt": [{"content": "Q", "role": "user"}], "responses": ["a", "b", "c"], "rewards": [0.5, 2.0, -1.0]}])
    view = seed_view(annotated)
    assert view[0]["chosen"][1]["content"] == "b" and view[0]["rejected"][1]["content"] == "c"
    assert (view[0]["score_chosen"], view[0]["score_rejected"]) == (2.0, -1.0) and view[0]["prompt"] == "Q"


def test_trls_conversational_rows_read_as_the_seeds_and_its_reward_pairs_are_not_rlhflows():
    """to_trl's own rows (`prompt` a [user] conversation, `chosen` / `rejected` the assistant turn) stopped 03_card and
    04_compare ("'list' object has no attribute 'encode'"): they read as the seed's rows now, the prompt its user
    turn's text. TRL's reward-modelling rows (a string prompt, chosen, rejected, and a `margin`) were taken for
    RLHFlow's pair table, whose prompt is a conversation: "RLHFlow's pairs without their scores"."""
    rows, picks = scored_rows()
    seed = export_rows("seed", rows, picks)
    trl = to_trl(seed)
    view = seed_view(trl)
    for column in ("prompt", "prompt_id", "chosen", "rejected", "score_chosen", "score_rejected"):
        assert view[column] == seed[column], column
    assert view["score_margin"] == trl["score_margin"]  # its other columns kept
    pairs = export_rows("rlhflow", rows, picks).select_columns(["prompt", "chosen", "rejected", "margin"])
    reward = datasets.Dataset.from_list([{**r, "prompt": r["prompt"][0]["content"]} for r in pairs])
    assert detect_format(pairs.features) == detect_format(pairs[0]) == "rlhflow"
    assert detect_format(reward.features) == detect_format(reward[0]) == "seed" and seed_view(reward) is reward


def recipe_rows(train_rows, fmt, scores_of_row_2):
    """Four real UltraFeedback rows reshaped to `fmt`'s layout: their two responses (the rejected first, so that a
    score out of place picks another pair) and scores; row 2's score list is `scores_of_row_2` instead."""
    rows = []
    for k, r in enumerate(train_rows[:4]):
        texts = [r["rejected"][-1]["content"], r["chosen"][-1]["content"]]
        scores = [r["score_rejected"], r["score_chosen"]] if k != 2 else scores_of_row_2
        rows.append({"snorkel": {"prompt_id": r["prompt_id"], "prompt": r["prompt"], "all_generated_responses": texts,
                                 "all_rm_scores": scores, "chosen": r["chosen"], "rejected": r["rejected"]},
                     "rlhflow": {"prompt": [{"content": r["prompt"], "role": "user"}],
                                 "responses": texts, "rewards": scores},
                     "sppo": {"prompt": r["prompt"], "prompt_id": r["prompt_id"], "chosen": r["chosen"],
                              "rejected": r["rejected"], "rm_scores": scores,
                              **{f"generate_{i}": conversation(r["prompt"], t) for i, t in enumerate(texts)}}}[fmt])
    return datasets.Dataset.from_list(rows)


@pytest.mark.parametrize("fmt, column", [("snorkel", "all_rm_scores"), ("rlhflow", "rewards"), ("sppo", "rm_scores")])
@pytest.mark.parametrize("scores, problem", [([8.0], "holds 1 score for 2 candidates"),
                                             ([8.0, 7.5, 6.0], "holds 3 scores for 2 candidates"),
                                             ([8.0, None], "score 1 .from 0. is None, not a number"),
                                             ([8.0, math.nan], None)])
def test_a_score_list_that_does_not_fit_its_candidates_is_refused_naming_the_row(train_rows, fmt, column, scores,
                                                                                 problem):
    """A row whose score list did not give each candidate one finite score was read on: one score short stopped on an
    IndexError (or was read without a word, its pair inside the list), one too many was read without a word, a null
    score stopped on a TypeError, a NaN was kept (in a row not yet paired, np.argmax chose it as the best). Now it is
    refused where it is read (02_analyze, 03_card, 04_compare, to_trl all read through seed_view), naming the row."""
    good = recipe_rows(train_rows, fmt, [1.0, 2.0])
    assert seed_view(good)["score_chosen"] == [r["score_chosen"] for r in train_rows[:2]] + [2.0, train_rows[3][
        "score_chosen"]]
    if fmt == "sppo" and len(scores) == 3:  # SPPO's published rows: the original pair's scores first (7 for 5)
        assert seed_view(recipe_rows(train_rows, fmt, scores))[2]["score_chosen"] == 6.0
        return
    if problem is None:  # a NaN is a score: the pair's, it is told as the seed's NaN are (exclude_nonfinite)
        row = seed_view(recipe_rows(train_rows, fmt, scores))[2]
        assert math.isnan(row["score_chosen"]) or math.isnan(row["score_rejected"])
        with pytest.raises(DataError, match=r"must be finite numbers \(not null, NaN nor infinite\)"):
            to_trl(recipe_rows(train_rows, fmt, scores))
        return
    prompt_id = prompt_id_of(train_rows[2]["prompt"]) if fmt == "rlhflow" else train_rows[2]["prompt_id"]
    with pytest.raises(DataError, match=rf"^Row 2 \(from 0\), prompt_id '{prompt_id}': '{column}' {problem}: give "
                                        r"each candidate in '\S+' one score, in their order, or leave the row"):
        seed_view(recipe_rows(train_rows, fmt, scores))
    with pytest.raises(DataError, match=rf"'{column}' {problem}"):
        to_trl(recipe_rows(train_rows, fmt, scores))


@pytest.mark.parametrize("fmt", ["rlhflow", "sppo"])
def test_a_row_not_yet_paired_is_paired_on_its_scores_that_are_not_nan(train_rows, fmt):
    """A row scored but not yet paired (RLHFlow's get_rewards, SPPO's from_ranks) with a NaN in its scores was paired
    by np.argmax / np.argmin, which both return the NaN's index: one candidate was chosen and rejected, its scores NaN,
    so 02_analyze refused (or dropped) a row whose best (9) and worst (1) are finite. Now the pair is the best and the
    worst of the scores that are not NaN; with fewer than two, no pair and NaN scores, told as the seed's NaN are."""
    scores = [[9.0, math.nan, 1.0], [math.nan, 5.0, 1.0], [math.nan, math.nan, 1.0], [math.nan] * 3]
    rows = []
    for r, s, other in zip(train_rows, scores, train_rows[4:]):
        texts = [r["chosen"][-1]["content"], other["chosen"][-1]["content"], r["rejected"][-1]["content"]]
        rows.append({"prompt": [{"content": r["prompt"], "role": "user"}], "responses": texts, "rewards": s}
                    if fmt == "rlhflow" else {"prompt": r["prompt"], "prompt_id": r["prompt_id"], "rm_scores": s,
                                              **{f"generate_{i}": conversation(r["prompt"], t)
                                                 for i, t in enumerate(texts)}})
    view = seed_view(ds := datasets.Dataset.from_list(rows))
    assert view["score_chosen"][:2] == [9.0, 5.0] and view["score_rejected"][:2] == [1.0, 1.0]
    text = (lambda turns: turns[-1]["content"])
    assert [text(view[k]["chosen"]) for k in (0, 1)] == [text(train_rows[0]["chosen"]), text(train_rows[5]["chosen"])]
    assert [text(view[k]["rejected"]) for k in (0, 1)] == [text(r["rejected"]) for r in train_rows[:2]]
    assert all(math.isnan(view[k][c]) for k in (2, 3) for c in ("score_chosen", "score_rejected"))
    assert view["chosen"][2:] == view["rejected"][2:] == [None, None]  # (never one candidate as both)
    chosen, _, keep, reasons = validate_scores(view, "dataset 'x'", exclude_nonfinite=True)
    assert list(chosen) == [9.0, 5.0] and list(keep) == [0, 1]
    assert reasons == {"score_chosen is NaN, infinite or missing": 2, "score_rejected is NaN, infinite or missing": 2}
    with pytest.raises(DataError, match=r"^Row 2 \(from 0; .* must be finite numbers .*, got \[nan, nan\]"):
        to_trl(ds)  # (its scores named, as a seed row's NaN are, not its chosen missing)
    # a text twice, NaN at its first place: the score is the one at the place paired (5), not the text's first (NaN)
    twice = dict(rows[1])
    if fmt == "rlhflow":
        twice["responses"] = [twice["responses"][1]] + twice["responses"][1:]
    else:
        twice["generate_0"] = twice["generate_1"]
    assert seed_view(datasets.Dataset.from_list([twice]))["score_chosen"] == [5.0]


def test_scores_written_as_text_are_refused_naming_the_first_row(train_rows):
    """A score list of texts ("8.5") was read as numbers one by one; a score column of texts is refused elsewhere
    (dataset_io.score_array), and so is this list now."""
    rows = recipe_rows(train_rows, "snorkel", [8.0, 7.5]).to_list()
    text = datasets.Dataset.from_list([r | {"all_rm_scores": [str(s) for s in r["all_rm_scores"]]} for r in rows])
    with pytest.raises(DataError, match=rf"^Row 0 \(from 0\), prompt_id '{train_rows[0]['prompt_id']}': "
                                        rf"'all_rm_scores' score 0 \(from 0\) is '{train_rows[0]['score_rejected']}', "
                                        r"not a number"):
        seed_view(text)
