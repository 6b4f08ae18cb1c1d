"""Pair selection rules (pure): which two of a prompt's scored candidates become `chosen` and `rejected`, as RLHFlow's
`choose_type` (`RLHFLOW_NAMES`), SPPO's compute_prob.py and SELM's online_feedback.py pick them (docs/recipes.md)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import DataError
from ..parameters import ConstructParams
from ..scorers.common import check_scores

# the RLHFlow `choose_type` (dpo_iteration/run_dpo.py) a rule makes the pairs of, with RLHFlow's ties (`rlhflow_name`);
# none makes its max_max (a repeated best text ties and drops the row; best_second pairs another text), max_random or
# random (the best against candidate 0, or 1; candidates 0 and 1: best_random and random_pair draw with a seed)
RLHFLOW_NAMES = {"best_worst": "max_min", "best_worst_length_penalised": "max_min_p"}

# why a row yields no pair (the manifest counts them under these names)
DROP_TIE = "tie"
DROP_MARGIN = "below_min_margin"
DROP_SINGLE = "fewer_than_two_candidates"
DROP_TOO_FEW = "fewer_than_two_distinct_candidates"  # a source row, before scoring (too_few_candidates: drop)
DROP_EMPTIED = "fewer_than_two_nonempty_candidates"  # ... once empty_candidates: drop left its empty texts out


@dataclass(frozen=True)
class Pick:
    """The rule's answer for one row: candidate indices, or the reason the row yields no pair."""

    chosen: int | None = None
    rejected: int | None = None
    dropped: str | None = None


def best_worst(scores: Sequence[float], lowest: str = "last") -> tuple[int, int]:
    """(first of the highest, `lowest` of the lowest); a full tie gives (0, last) or (0, 0)."""
    best, worst = max(scores), min(scores)
    tied = [i for i, s in enumerate(scores) if s == worst]
    return next(i for i, s in enumerate(scores) if s == best), tied[-1 if lowest == "last" else 0]


def rlhflow_name(p: ConstructParams) -> str | None:
    """The RLHFlow choose_type whose pairs `p` makes (for the manifest), None where none: its ties are the first of
    tied lowest rewards (np.argmin), tied pairs dropped, no margin threshold."""
    return RLHFLOW_NAMES.get(p.selection) if (p.lowest_tie, p.ties, p.min_margin) == ("first", "drop", 0) else None


def row_rng(seed: int, key: str) -> np.random.Generator:
    """A generator that depends on (seed, key) only: a row's draw is the same in any order or subset of rows."""
    digest = hashlib.sha256(f"{seed}\x00{key}".encode("utf-8")).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def _indices(scores: Sequence[float], texts: Sequence[str] | None, key: str, p: ConstructParams) -> tuple[int, int]:
    n, rule = len(scores), p.selection
    if rule == "best_worst":
        return best_worst(scores, p.lowest_tie)
    if rule == "best_worst_length_penalised":
        if texts is None or len(texts) != n:
            raise DataError(f"selection {rule!r} needs the candidates' texts (one per score) to measure lengths.")
        return best_worst([s - p.length_penalty * len(t) for s, t in zip(scores, texts)], p.lowest_tie)
    # a candidate whose text another has already is no second choice: the rules below pick among distinct texts
    same = None if texts is None else [t.strip() for t in texts]  # surrounding whitespace aside
    distinct = list(range(n)) if same is None else sorted({t: i for i, t in reversed(list(enumerate(same)))}.values())
    if rule == "random_pair":
        a, b = (distinct[int(i)] for i in row_rng(p.selection_seed, key).choice(len(distinct), size=2, replace=False))
        return (a, b) if scores[a] >= scores[b] else (b, a)
    chosen = max(range(n), key=scores.__getitem__)  # best_second, best_random: the (first) best against another
    others = [i for i in distinct if i != chosen and (same is None or same[i] != same[chosen])]
    if rule == "best_second":
        return chosen, max(others, key=scores.__getitem__)
    return chosen, others[int(row_rng(p.selection_seed, key).integers(len(others)))]


def select(scores: Sequence[float], texts: Sequence[str] | None, key: str, p: ConstructParams) -> Pick:
    """The Pick of one row by `p`'s selection, ties and min_margin; `key` (the prompt_id) seeds the random draws."""
    check_scores(scores, f"The row of prompt_id {key!r}")
    if len(scores) < 2:
        return Pick(dropped=DROP_SINGLE)
    chosen, rejected = _indices(scores, texts, key, p)
    if scores[rejected] > scores[chosen]:  # a rule that picked by something else than the score: order by score
        chosen, rejected = rejected, chosen
    margin = scores[chosen] - scores[rejected]
    if margin == 0 and p.ties == "drop":
        return Pick(dropped=DROP_TIE)
    if margin < p.min_margin:
        return Pick(dropped=DROP_MARGIN)
    return Pick(chosen, rejected)
