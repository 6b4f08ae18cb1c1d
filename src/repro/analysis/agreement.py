"""metrics.json's `agreement` block: how far scorers agree on the same candidates (per row: same chosen / rejected by
the run's tie rule `lowest_tie`, Kendall's tau-b; margins across rows), from flat scores and candidates per row."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ParameterError, did_you_mean
from ..parameters import TIE_RULES
from .stats import clean, correlations, describe, row_starts, row_sums

# Histogram of per-row tau: 21 bins centred on -1.0, -0.9, ..., 1.0, so the values small candidate counts give
# (±1, ±1/3, 0, ±0.5, ...) fall inside bins, never on an edge.
TAU_BIN_EDGES = np.round(np.linspace(-1.05, 1.05, 22), 2)
TAU_STATISTICS = ("mean", "std", "median", "q25", "q75", "min", "max")


@dataclass
class RowComparison:
    """Two scorers' per-row picks, tau and margins over the rows both scored comparably."""

    rows: np.ndarray  # positions (in the input rows) of the compared rows
    excluded_reasons: dict[str, int]
    candidates: np.ndarray  # candidates per compared row
    chosen: np.ndarray  # (2, rows): a row per scorer
    rejected: np.ndarray  # (2, rows)
    tau: np.ndarray  # Kendall's tau-b per compared row, NaN where undefined
    margin: np.ndarray  # (2, rows): best − worst


def chosen_and_rejected(matrix: np.ndarray, lowest_tie: str) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a (rows, k) score matrix: (chosen, rejected) indices: the first highest, the `lowest_tie` lowest."""
    # argmax/argmin return the first of equal extremes
    last = matrix.shape[1] - 1 - np.argmin(matrix[:, ::-1], axis=1)
    return np.argmax(matrix, axis=1), last if lowest_tie == "last" else np.argmin(matrix, axis=1)


def kendall_tau_b(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Kendall's tau-b between matching rows of two (rows, k) score matrices; NaN where a row is constant."""
    i, j = np.triu_indices(a.shape[1], 1)
    sign_a, sign_b = np.sign(a[:, j] - a[:, i]), np.sign(b[:, j] - b[:, i])
    # concordant − discordant over sqrt(pairs untied in a × pairs untied in b): tau-b's definition
    numerator = (sign_a * sign_b).sum(axis=1)
    denominator = np.sqrt(np.count_nonzero(sign_a, axis=1) * np.count_nonzero(sign_b, axis=1).astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / denominator, np.nan)


def compare_rows(flat_a: np.ndarray, counts_a: np.ndarray, flat_b: np.ndarray, counts_b: np.ndarray,
                 lowest_tie: str) -> RowComparison:
    """Two scorers row by row (picks by `lowest_tie`); rows without two comparable, finite score lists: counted out."""
    counts_a, counts_b = np.asarray(counts_a, dtype=np.int64), np.asarray(counts_b, dtype=np.int64)
    if counts_a.size != counts_b.size:
        raise ValueError(f"compare_rows needs the same rows for both scorers, got {counts_a.size} and {counts_b.size}")
    reasons = {
        "fewer than 2 candidate scores": (np.minimum(counts_a, counts_b) < 2),
        "the scorers scored different numbers of candidates": (counts_a != counts_b),
        "a candidate score is NaN, infinite or missing": (row_sums(~np.isfinite(flat_a), counts_a)
                                                          + row_sums(~np.isfinite(flat_b), counts_b)) > 0,
    }
    excluded, excluded_reasons = np.zeros(counts_a.size, dtype=bool), {}
    for reason, rows in reasons.items():  # each row is counted under its first reason
        if (new := rows & ~excluded).any():
            excluded_reasons[reason] = int(new.sum())
        excluded |= rows
    kept = np.flatnonzero(~excluded)
    starts_a, starts_b = row_starts(counts_a), row_starts(counts_b)
    n, k_of = kept.size, counts_a[kept]
    chosen, rejected, margin = np.empty((2, n), np.int64), np.empty((2, n), np.int64), np.empty((2, n))
    tau = np.empty(n)
    for k in np.unique(k_of):  # rows with k candidates form (rows, k) matrices
        at = np.flatnonzero(k_of == k)
        rows = kept[at][:, None]
        matrices = (flat_a[starts_a[rows] + np.arange(k)], flat_b[starts_b[rows] + np.arange(k)])
        for s, matrix in enumerate(matrices):
            chosen[s, at], rejected[s, at] = chosen_and_rejected(matrix, lowest_tie)
            margin[s, at] = matrix.max(axis=1) - matrix.min(axis=1)
        tau[at] = kendall_tau_b(*matrices)
    return RowComparison(rows=kept, excluded_reasons=excluded_reasons, candidates=k_of, chosen=chosen,
                         rejected=rejected, tau=tau, margin=margin)


def _count(mask: np.ndarray) -> dict[str, Any]:
    return {"count": int(mask.sum()), "fraction": float(mask.mean()) if mask.size else None}


def tau_summary(tau: np.ndarray) -> dict[str, Any]:
    """Per-row tau's distribution: rows with a defined tau, undefined ones, statistics, signs and a histogram."""
    defined = tau[np.isfinite(tau)]
    statistics = describe(defined) if defined.size else {}
    counts, _ = np.histogram(defined, bins=TAU_BIN_EDGES)
    return {
        "variant": "tau-b (scipy.stats.kendalltau's default), per row over its candidates",
        "rows": int(defined.size), "undefined": int(tau.size - defined.size),
        "undefined_means": "a scorer gave all of the row's candidates the same score",
        **{stat: statistics.get(stat) for stat in TAU_STATISTICS},
        **{f"fraction_{sign}": float(mask.mean()) if defined.size else None
           for sign, mask in (("positive", defined > 0), ("zero", defined == 0), ("negative", defined < 0))},
        "histogram": {"edges": TAU_BIN_EDGES.tolist(), "counts": counts.tolist()},
    }


def pair_summary(name_a: str, name_b: str, comparison: RowComparison) -> dict[str, Any]:
    """The JSON-ready agreement of one pair of scorers from their row comparison."""
    c, k = comparison, comparison.candidates
    same_chosen, same_rejected = c.chosen[0] == c.chosen[1], c.rejected[0] == c.rejected[1]
    return clean({
        "scorers": [name_a, name_b], "rows": int(c.rows.size), "rows_excluded": sum(c.excluded_reasons.values()),
        "excluded_reasons": dict(c.excluded_reasons),
        "candidates_per_row": {"min": k.min(), "max": k.max(), "mean": k.mean()} if k.size else None,
        "same_chosen": _count(same_chosen), "same_rejected": _count(same_rejected),
        "same_pair": _count(same_chosen & same_rejected),
        "kendall_tau": tau_summary(c.tau),
        "margin_correlation": {"margin": "best - worst candidate score, each scorer on its own scale",
                               **correlations(*c.margin)},
    })


def agreement(scores: dict[str, tuple[np.ndarray, np.ndarray]], primary: str | None, lowest_tie: str) -> dict[str, Any]:
    """The `agreement` block over every pair of `{name: (flat scores, candidates per row)}`; `primary` picked the
    pairs (None: not among these); each scorer's picks break ties by `lowest_tie`, the run's parameter."""
    names = list(scores)
    if lowest_tie not in TIE_RULES:
        raise ParameterError(
            f"lowest_tie must be {' or '.join(map(repr, TIE_RULES))} (the run's parameter: which of equal lowest "
            f"scores is rejected), got {lowest_tie!r}.{did_you_mean(str(lowest_tie), TIE_RULES)}")
    if len(names) < 2:
        raise ValueError(f"agreement needs at least two scorers, got {names}")
    return {
        "scorers": names, "primary": primary,
        "decided_by": (f"{primary} (the primary scorer) picked chosen and rejected" if primary is not None else
                       "the scorer that picked chosen and rejected is not among these"),
        "lowest_tie": lowest_tie, "tie_rule": TIE_RULES[lowest_tie],
        "pairs": [pair_summary(a, b, compare_rows(*scores[a], *scores[b], lowest_tie))
                  for a, b in itertools.combinations(names, 2)],
    }
