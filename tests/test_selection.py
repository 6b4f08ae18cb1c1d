"""Pair selection rules on hand-made tables: ties, equal margins, a single candidate, random draws, margins."""

import math
from typing import get_args

import numpy as np
import pytest

from repro.errors import DataError
from repro.construct.selection import DROP_MARGIN, DROP_SINGLE, DROP_TIE, Pick, row_rng, select
from repro.parameters import ConstructParams, SelectionRule

# (rule, scores, texts, expected (chosen, rejected)): worked out by hand from each rule's definition
TABLE = [
    ("best_worst", [0.1, 0.9, -0.5], None, (1, 2)),
    ("best_worst", [1.0, 1.0, -2.0, -2.0], None, (0, 3)),  # first of the best, last of the worst
    ("best_worst", [0.0, 0.0, 0.0], None, (0, 2)),  # a full tie: first and last
    ("best_second", [0.1, 0.9, -0.5, 0.4], None, (1, 3)),
    ("best_second", [2.0, 1.0, 2.0, -1.0], None, (0, 2)),  # the best tied twice: its twin is second
    ("best_second", [3.0, 1.0, 1.0, 0.0], None, (0, 1)),  # second place tied: the first of them
    # length-penalised: 1.0 - 0.1*10 = 0.0, 0.8 - 0.1*2 = 0.6, 0.5 - 0.1*1 = 0.4, -0.2 - 0.1*3 = -0.5
    ("best_worst_length_penalised", [1.0, 0.8, 0.5, -0.2], ["x" * 10, "ab", "c", "def"], (1, 3)),
    # penalised: 2.0 - 3.0 = -1.0 < 0.9 - 0.1 = 0.8 picks (1, 0); the raw scores order the pair (0, 1), as RLHFlow
    ("best_worst_length_penalised", [2.0, 0.9], ["y" * 30, "z"], (0, 1)),
]


@pytest.mark.parametrize("rule, scores, texts, expected", TABLE)
def test_rules_on_a_hand_made_table(rule, scores, texts, expected):
    pick = select(scores, texts, "", ConstructParams(selection=rule, length_penalty=0.1))
    assert (pick.chosen, pick.rejected) == expected and pick.dropped is None


@pytest.mark.parametrize("rule, scores, texts", [
    ("best_worst", [1.0, 1.0, -2.0, 0.5, -2.0], None),
    ("best_worst", [0.0, 0.0, 0.0], None),  # a full tie: numpy pairs candidate 0 with itself
    ("best_worst", [-1.0, 3.0, -1.0], None),
    # penalised: 1.0 - 0.5 = 0.5, 0.3 - 0.4 = -0.1, 0.9 - 1.0 = -0.1, 2.0 - 0.1 = 1.9
    ("best_worst_length_penalised", [1.0, 0.3, 0.9, 2.0], ["x" * 5, "y" * 4, "z" * 10, "w"]),
])
def test_lowest_tie_first_is_numpys_argmax_and_argmin(rule, scores, texts):
    # SPPO's compute_prob.py, RLHFlow's run_dpo.py and SELM's online_feedback.py take np.argmax / np.argmin
    ranked = scores if texts is None else [s - 0.1 * len(t) for s, t in zip(scores, texts)]
    pick = select(scores, texts, "", ConstructParams(selection=rule, length_penalty=0.1, lowest_tie="first"))
    assert (pick.chosen, pick.rejected) == (int(np.argmax(ranked)), int(np.argmin(ranked)))
    last = select(scores, texts, "", ConstructParams(selection=rule, length_penalty=0.1))
    assert last.rejected == max(i for i, s in enumerate(ranked) if s == min(ranked))  # the seed's rule, unchanged


def test_every_rule_orders_the_pair_by_score_and_a_single_candidate_yields_none():
    scores, texts = [0.3, -1.2, 2.5, 0.7, 0.7], ["a", "bb", "ccc", "dddd", "e"]
    for rule in get_args(SelectionRule):
        for key in ("p1", "p2", "p3", "p4"):
            pick = select(scores, texts, key, ConstructParams(selection=rule, selection_seed=0, length_penalty=0.01))
            assert pick.chosen != pick.rejected
            assert scores[pick.chosen] >= scores[pick.rejected], (rule, key, pick)
        assert select([1.0], ["a"], "", ConstructParams(selection=rule, selection_seed=0)) == Pick(dropped=DROP_SINGLE)


def test_best_random_draws_among_the_others_from_seed_and_key_only():
    scores = [0.1, 0.9, -0.5, 0.4, 0.0]
    keys = [f"prompt-{i}" for i in range(60)]
    best_random = ConstructParams(selection="best_random", selection_seed=7)
    rejected = [select(scores, None, k, best_random).rejected for k in keys]
    assert all(select(scores, None, k, best_random).chosen == 1 for k in keys)
    assert set(rejected) == {0, 2, 3, 4}  # every other candidate is drawn sometimes, the best never
    # the same (seed, key) gives the same draw, in any order; another seed gives other draws
    assert [select(scores, None, k, best_random).rejected for k in reversed(keys)] == rejected[::-1]
    seed_8 = best_random.model_copy(update={"selection_seed": 8})
    assert [select(scores, None, k, seed_8).rejected for k in keys] != rejected
    # the draw is numpy's, from a generator seeded by (seed, key): recomputed independently here
    others = [0, 2, 3, 4]
    assert rejected[5] == others[int(row_rng(7, "prompt-5").integers(4))]


def test_random_pair_draws_two_distinct_candidates():
    scores = [0.5, -0.25, 1.5, 0.0]
    random_pair = ConstructParams(selection="random_pair", selection_seed=0)
    picks = {(p.chosen, p.rejected) for p in (select(scores, None, str(i), random_pair) for i in range(80))}
    assert len(picks) == 6  # all C(4, 2) pairs occur, each ordered by score
    assert all(scores[c] > scores[r] for c, r in picks)


def test_rules_that_pick_a_second_candidate_never_pick_a_copy_of_the_first():
    # short answers ('42') come out identical across samples: best_second paired '42' with '42' (a margin of 0) in
    # five rows of six, random_pair drew a text and its copy
    texts, scores = ["42", "42\n", "The answer is 42 because six times seven is forty-two."], [1.0, 1.0, -0.5]
    assert select(scores, texts, "k", ConstructParams(selection="best_second")) == Pick(0, 2)
    for rule in ("best_random", "random_pair"):
        for key in map(str, range(40)):
            pick = select(scores, texts, key, ConstructParams(selection=rule, selection_seed=3))
            assert texts[pick.chosen].strip() != texts[pick.rejected].strip(), (rule, key)
    # without copies the draws are those of before (the same indices from the same generator)
    distinct = ["a", "b", "c", "d"]
    for key in map(str, range(20)):
        p = ConstructParams(selection="random_pair", selection_seed=0)
        assert select([0.5, -0.25, 1.5, 0.0], distinct, key, p) == select([0.5, -0.25, 1.5, 0.0], None, key, p)


def test_ties_keep_or_drop_and_min_margin():
    assert select([0.5, 0.5], None, "", ConstructParams(ties="keep")) == Pick(0, 1)
    assert select([0.5, 0.5], None, "", ConstructParams(ties="drop")) == Pick(dropped=DROP_TIE)
    # best_second with the best tied: a tie, dropped under `drop` although the row's scores differ
    best_second = ConstructParams(selection="best_second", ties="drop")
    assert select([2.0, 1.0, 2.0], None, "", best_second) == Pick(dropped=DROP_TIE)
    # equal margins: both rows kept at the threshold, dropped just above it
    assert select([1.0, 0.0], None, "", ConstructParams(min_margin=1.0)) == Pick(0, 1)
    assert select([0.25, -0.75, 0.0], None, "", ConstructParams(min_margin=1.0)) == Pick(0, 1)
    assert select([1.0, 0.0], None, "", ConstructParams(min_margin=1.0 + 1e-12)) == Pick(dropped=DROP_MARGIN)
    assert select([0.5, 0.5], None, "", ConstructParams(ties="keep", min_margin=0.1)) == Pick(dropped=DROP_MARGIN)


def test_nan_scores_and_missing_texts_are_errors():
    with pytest.raises(DataError, match="NaN"):
        select([math.nan, 1.0], None, "", ConstructParams())
    with pytest.raises(DataError, match="texts"):
        select([0.0, 1.0], None, "", ConstructParams(selection="best_worst_length_penalised"))
