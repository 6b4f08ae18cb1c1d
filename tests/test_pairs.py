import hashlib

import datasets
import numpy as np
import pytest

from repro.dataset_io import SEED_COLUMNS, SEED_FEATURES, output_features, prompt_id_of
from repro.errors import DataError
from repro.construct.pairs import build_row, check_prompt_ids, collect_candidates, select_pair
from repro.parameters import ConstructParams

TWO = ConstructParams(candidate_columns=["resp0", "resp1"])


def test_select_pair_best_and_worst():
    assert select_pair([0.1, 0.9, -0.5]) == (1, 2)
    assert select_pair([-1.0, 1.0]) == (1, 0)


def test_select_pair_ties_are_deterministic():
    # highest ties: the first wins; lowest ties: the last loses
    assert select_pair([1.0, 1.0, -2.0, -2.0]) == (0, 3)
    assert select_pair([0.0, 0.0, 0.0]) == (0, 2)
    assert select_pair([0.5, -1.0, 0.5, -1.0, 0.2]) == (0, 3)


def test_select_pair_rejects_nan_and_single():
    with pytest.raises(DataError):
        select_pair([float("nan"), 1.0])
    with pytest.raises(DataError):
        select_pair([1.0])


@pytest.mark.parametrize("scores, said", [
    ([0.3, None, 0.1], r"score 1 \(from 0\) is None, not a number"),
    (["0.1", "0.3"], r"score 0 \(from 0\) is '0\.1' \(str\), not a number"),
    ([1.0, True], r"score 1 \(from 0\) is True \(bool\), not a number"),
    ([[0.1, 0.2], [0.3, 0.4]], r"score 0 \(from 0\) is \[0\.1, 0\.2\] \(list\), not a number"),
    (np.zeros((2, 2)), r"score 0 \(from 0\) is \[0\.0, 0\.0\] \(list\), not a number"),
    (0.5, r"the score list is float, expected one number per candidate \(a list, tuple"),
    ("0.5", r"the score list is str, expected one number per candidate"),
])
def test_select_pair_refuses_what_is_not_a_list_of_numbers_naming_it(scores, said):
    """select_pair([0.3, None, 0.1]) raised "TypeError: must be real number, not NoneType", a scalar "object of
    type 'float' has no len()": a DataError as NaN's, saying what a score list is."""
    with pytest.raises(DataError, match=r"^A row: " + said):
        select_pair(scores)
    assert select_pair(np.array([0.1, 0.9, np.float32(-0.5)])) == select_pair([0, 1, -1]) == (1, 2)


def test_prompt_id_is_sha256_of_utf8_prompt(train_rows):
    assert prompt_id_of("héllo") == hashlib.sha256("héllo".encode()).hexdigest()
    # the H4 rule holds on real rows
    for row in train_rows[:50]:
        assert prompt_id_of(row["prompt"]) == row["prompt_id"]


def test_a_numeric_prompt_id_is_kept_as_its_text_zero_too():
    # a source numbering its prompts 0..5 got the sha256 of the prompt for row 0 ('0' is falsy) and '1'..'5' else
    ids = [build_row({"prompt": "Q?", "prompt_id": i}, "Q?", ["a", "b"], [1.0, 0.0], messages="chosen",
                     keep_all_candidates=False)["prompt_id"] for i in (0, 1, "")]
    assert ids == ["0", "1", prompt_id_of("Q?")]  # an empty id is none


def test_build_row_has_the_seed_columns_in_order_and_types():
    src = {"prompt": "Q?", "reference_response": "ref"}
    row = build_row(src, "Q?", ["a", "b", "c"], [0.2, 0.7, -0.9], messages="chosen", keep_all_candidates=False)
    assert list(row) == SEED_COLUMNS
    assert row["chosen"] == [{"content": "Q?", "role": "user"}, {"content": "b", "role": "assistant"}]
    assert row["rejected"][1]["content"] == "c"
    assert row["messages"] == row["chosen"]
    assert row["score_chosen"] == 0.7 and row["score_rejected"] == -0.9
    assert row["prompt_id"] == prompt_id_of("Q?")
    ds = datasets.Dataset.from_list([row], features=SEED_FEATURES)
    assert ds.features == SEED_FEATURES
    assert ds.features["score_chosen"].dtype == "float64"
    extra = build_row(src, "Q?", ["a", "b"], [1.0, -1.0], messages="chosen", keep_all_candidates=True)
    ds2 = datasets.Dataset.from_list([extra], features=output_features(True))
    assert ds2.column_names == SEED_COLUMNS + ["candidates", "candidate_scores"]
    # every candidate's score (each scorer's) at its candidate's place: the chosen's and rejected's at theirs
    kept = build_row(src, "Q?", ["a", "b", "c"], [0.2, 0.7, -0.9], messages="chosen", keep_all_candidates=True,
                     more_scores={"rm": [1.5, -0.5, 3.0]})
    assert (kept["candidates"], kept["candidate_scores"], kept["candidate_scores_rm"]) == (
        ["a", "b", "c"], [0.2, 0.7, -0.9], [1.5, -0.5, 3.0])
    for side in ("chosen", "rejected"):
        assert kept["candidate_scores"][kept["candidates"].index(kept[side][1]["content"])] == kept[f"score_{side}"]


def test_messages_from_source():
    src = {"prompt": "Q", "messages": [{"content": "Q", "role": "user"}, {"content": "orig", "role": "assistant"}]}
    row = build_row(src, "Q", ["a", "b"], [1.0, -1.0], messages="source", keep_all_candidates=False)
    assert row["messages"][1]["content"] == "orig"
    with pytest.raises(DataError, match="messages"):
        build_row({"prompt": "Q"}, "Q", ["a", "b"], [1.0, -1.0], messages="source", keep_all_candidates=False)


def test_collect_candidates_drops_rows_with_too_few_distinct():
    rows = [
        {"prompt": "p0", "resp0": "a", "resp1": "b"},
        {"prompt": "p1", "resp0": "same", "resp1": "same"},
        {"prompt": "p2", "resp0": "x", "resp1": None},
        {"prompt": "p3", "resp0": "x", "resp1": "y", "reference_response": "z"},
    ]
    cs = collect_candidates(rows, ConstructParams(candidate_columns=["resp0", "resp1"], include_reference=True))
    assert cs.rows == [0, 3]
    assert cs.candidates == [["a", "b"], ["x", "y", "z"]]
    assert cs.names[1] == ["resp0", "resp1", "reference_response"]
    assert cs.dropped == {"fewer_than_two_distinct_candidates": 2}
    with pytest.raises(DataError, match=r"source row 1 \(from 0\)"):
        collect_candidates(rows, ConstructParams(candidate_columns=["resp0", "resp1"], too_few_candidates="error"))


def test_texts_that_differ_only_in_surrounding_whitespace_are_one_candidate():
    rows = [{"prompt": "p", "resp0": "Paris.", "resp1": "Paris.\n"}, {"prompt": "q", "resp0": " a", "resp1": "b "}]
    cs = collect_candidates(rows, TWO)
    assert cs.rows == [1] and cs.dropped == {"fewer_than_two_distinct_candidates": 1}


def test_too_few_candidates_keep_keeps_a_row_of_one_text_as_sppo_does():
    rows = [{"prompt": "p0", "resp0": "same", "resp1": "same", "resp2": "same"},
            {"prompt": "p1", "resp0": "x", "resp1": None, "resp2": None}]
    p = ConstructParams(candidate_columns=["resp0", "resp1", "resp2"], too_few_candidates="keep")
    cs = collect_candidates(rows, p)
    assert cs.rows == [0] and cs.candidates == [["same"] * 3]  # a lone candidate still has nothing to pair with
    assert cs.dropped == {"fewer_than_two_distinct_candidates": 1} and cs.one_text == 1
    row = build_row(rows[0], "p0", cs.candidates[0], [0.5, 0.5, 0.5], messages="chosen", keep_all_candidates=False)
    assert row["chosen"] == row["rejected"] and row["score_chosen"] == row["score_rejected"]
    # the rules that pair the best with ANOTHER text have none to take
    with pytest.raises(ValueError, match="too_few_candidates: keep.*best_worst"):
        ConstructParams(too_few_candidates="keep", selection="best_second")


def test_original_pair_candidates(train_rows):
    cs = collect_candidates(train_rows[:20], ConstructParams(candidate_columns=[], include_original_pair=True))
    assert all(n == ["original_chosen", "original_rejected"] for n in cs.names)
    first_kept = train_rows[cs.rows[0]]
    assert cs.candidates[0][0] == first_kept["chosen"][-1]["content"]



def test_original_pair_of_plain_texts():
    # chosen / rejected held as texts (as analysis' response_text reads them) were refused: "no assistant message"
    rows = [{"prompt": "p1", "chosen": "good", "rejected": "bad"}]
    cs = collect_candidates(rows, ConstructParams(candidate_columns=[], include_original_pair=True))
    assert cs.candidates == [["good", "bad"]] and cs.names == [["original_chosen", "original_rejected"]]
    with pytest.raises(DataError, match=r"source row 0 \(from 0\) column 'rejected' has no assistant message; "
                                        r"expected a text or a list of \{content, role\} dicts"):
        collect_candidates([{**rows[0], "rejected": 5}], ConstructParams(candidate_columns=[],
                                                                         include_original_pair=True))

def test_bad_candidates_name_the_row():
    with pytest.raises(DataError, match=r"source row 7.*'resp1'.*string"):
        collect_candidates([{"prompt": "p", "resp0": "a", "resp1": 5}], TWO, row_numbers=[7])
    # UltraFeedback's own chosen / rejected conversations named as candidate columns: the setting that ranks them
    row = {"prompt": "p", "chosen": [{"content": "p", "role": "user"}, {"content": "a", "role": "assistant"}]}
    with pytest.raises(DataError, match=r"candidate 'chosen': expected a string, got list .*conversation: "
                                        r"include_original_pair: true ranks its last assistant message"):
        collect_candidates([row], ConstructParams(candidate_columns=["chosen", "resp1"]))
    with pytest.raises(DataError, match=r"'resp1' is empty.*empty_candidates"):
        collect_candidates([{"prompt": "p", "resp0": "a", "resp1": "  "}], TWO)
    cs = collect_candidates([{"prompt": "p", "resp0": "a", "resp1": " ", "resp2": "c"}],
                            ConstructParams(candidate_columns=["resp0", "resp1", "resp2"], empty_candidates="drop"))
    assert cs.candidates == [["a", "c"]]
    # upstream's recipes (SPPO's rank.py, RLHFlow's get_rewards.py, SELM) rank an empty response like any text
    cs = collect_candidates([{"prompt": "p", "resp0": "a", "resp1": "", "resp2": "c"}],
                            ConstructParams(candidate_columns=["resp0", "resp1", "resp2"], empty_candidates="rank"))
    assert cs.candidates == [["a", "", "c"]] and cs.names == [["resp0", "resp1", "resp2"]]
    with pytest.raises(DataError, match="prompt"):
        collect_candidates([{"prompt": "", "resp0": "a", "resp1": "b"}], TWO)


def test_duplicate_prompt_ids():
    assert check_prompt_ids(["a", "b", "a"], "keep_first") == [0, 1]
    with pytest.raises(DataError, match="rows 10 and 12"):
        check_prompt_ids(["a", "b", "a"], "error", [10, 11, 12])
