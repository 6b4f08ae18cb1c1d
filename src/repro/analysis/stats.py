"""Paired-score stats (margin = chosen − rejected), pure: float64 arrays to JSON dicts (undefined: None, not NaN)."""

from __future__ import annotations

import decimal
import math
import numbers
import warnings
from typing import Any, Callable

import numpy as np
from scipy import stats as sps

from ..dataset_io import NONFINITE
from ..errors import DataError
from . import prose

SERIES = ("score_chosen", "score_rejected", "margin")
CI_LEVEL = 0.95
CI_QUANTILES = ((1.0 - CI_LEVEL) / 2.0, 1.0 - (1.0 - CI_LEVEL) / 2.0)  # a percentile interval's bounds
# below this many rows a percentile bootstrap's 95% interval is too narrow: it covered the mean of normal data in 74.7%
# of 20,000 simulated datasets of 3 rows, 83.9% of 5, 89.9% of 10, 92.3% of 20 and 93.4% of 30 (1,000 resamples
# each: benchmarks/bench_coverage.py, benchmarks/results/coverage-20261206-122136.json)
BOOTSTRAP_FEW_ROWS = 20
# fewer rows: no agreement statistic (two points are always on a line), no interval (their resamples degenerate)
AGREEMENT_MIN_ROWS = 3
# resamples x rows of one bootstrap block: ~32 MB per float64 matrix; fixed, so intervals depend only on the data
BOOTSTRAP_BLOCK_ELEMENTS = 1 << 22
BOOTSTRAP_MAX_CATEGORIES = 4096  # up to this many distinct (paired) values, resample category counts, not rows
# scores on this grid within [0, 10] are read as ratings (GPT-4 `overall_score` style)
RATING_GRID_STEP = 0.5
RATING_RANGE = (0.0, 10.0)
ANTISYMMETRY_ATOL = 1e-6
SUM_TO_ZERO_ATOL = 1e-4  # sums of several float scores are not exactly 0 even when the scorer's are
AGREEMENT_INTERVALS = ("pearson", "spearman", "lin_ccc", "mean_difference", "loa_low", "loa_high")
Z_95 = 1.959963984540054  # the standard normal's 97.5 % quantile: Bland–Altman's limits of agreement
SPEARMAN_P_VALUES = 10  # fewer values: scipy's t approximation of Spearman's p is far off (3, rho -1: p 0, not 1/3)
# beyond this magnitude a score's fourth power (kurtosis), then its square (variances), overflows float64 in sums
# over up to 1e8 rows: the analysis refuses such scores (rescaled, every statistic holds)
LARGEST_SCORE = 1e70


# what a message about NaN, infinite or missing scores says to do: in 02_analyze, and to a caller of these helpers
EXCLUDE_NONFINITE = ("Fix those scores, or set the parameter exclude_nonfinite: true to leave them out (they are then "
                     "counted in n_excluded in metrics.json).")
EXCLUDE_FIRST = ("Fix those scores, or leave those rows out first, as 02_analyze does with exclude_nonfinite: true "
                 "(repro.analysis.report.validate_scores(table, where, exclude_nonfinite=True) returns the scores of "
                 "the finite rows).")


def nonfinite_rows(where: str, series: dict[str, np.ndarray], fix: str | None = EXCLUDE_NONFINITE,
                   named: Callable[[np.ndarray], str] | None = None) -> tuple[np.ndarray, dict[str, int]]:
    """(rows with a NaN, infinite or missing value in any of `series`, excluded_reasons), or with `fix` a DataError."""
    bad = {name: ~np.isfinite(x) for name, x in series.items()}
    rows = np.logical_or.reduce(list(bad.values()))
    counts = {name: int(b.sum()) for name, b in bad.items() if b.any()}
    if fix and rows.any():
        at = np.flatnonzero(rows)
        more = f" and {at.size - 5} more" if at.size > 5 else ""
        raise DataError(f"{where}: {at.size} of {rows.size} rows have a NaN, infinite or missing score (rows "
                        f"{rows_shown(at[:5], named)}{more}; {', '.join(f'{name}: {n}' for name, n in counts.items())})"
                        f". {fix}")
    return rows, {NONFINITE.format(name): n for name, n in counts.items()}


def rows_shown(rows: np.ndarray, named: Callable[[np.ndarray], str] | None = None) -> str:
    """Row positions as a message names them: by `named`, else counting from 0."""
    return named(rows) if named else f"{', '.join(map(str, rows))} (from 0)"


def refuse_too_large(where: str, series: dict[str, np.ndarray], named: Callable[[np.ndarray], str] | None = None
                     ) -> None:
    """A DataError naming the largest finite score of `series` beyond ±LARGEST_SCORE, its row, a factor to rescale."""
    finite = np.logical_and.reduce([np.isfinite(x) for x in series.values()])
    magnitude = np.where(finite, np.max(np.abs(list(series.values())), axis=0), 0.0)
    if magnitude.max() <= LARGEST_SCORE:
        return
    row = int(magnitude.argmax())
    name, value = max(((name, x[row]) for name, x in series.items()), key=lambda item: abs(item[1]))
    raise DataError(
        f"{where}: {name} holds {value:g} at row {rows_shown(np.array([row]), named)}, too large for the statistics: "
        f"beyond ±{LARGEST_SCORE:g} their squares and fourth powers overflow float64 (variances, t-tests, kurtosis and "
        f"density curves would come out wrong or fail). Rescale the scores: divide {' and '.join(series)} by one "
        f"factor, such as {10.0 ** math.floor(math.log10(abs(value))):.0e} (margins keep their signs and order).")


def _not_a_score(value: Any) -> bool:
    """Whether `value` cannot be a score: text, a bool, a complex number... (None is missing, a Decimal a number)."""
    return value is not None and (isinstance(value, (bool, np.bool_))
                                  or not isinstance(value, (numbers.Real, decimal.Decimal)))


def paired_scores(function: str, **series: Any) -> list[np.ndarray]:
    """`series` as float64 arrays (unsigned ints would wrap in a difference); a DataError where 02_analyze refuses."""
    where, names = f"repro.analysis.{function}", " and ".join(series)
    arrays = {}
    for name, x in series.items():
        try:
            given = np.asarray(x)
            if given.dtype.kind not in "iuf":  # text, bools, complex numbers; objects: a list holding None
                values = np.asarray(x, dtype=object).ravel()  # (as given: numpy writes [1.0, "a"] as text)
                bad = next((i for i, v in enumerate(values) if _not_a_score(v)), None)
                if bad is not None:
                    raise TypeError(f"row {bad} (from 0) holds {values[bad]!r}")
            arrays[name] = given.astype(np.float64)
        except OverflowError as exc:  # (an int beyond float64's range)
            raise DataError(f"{where}: {name} holds a number too large for float64 ({exc}): rescale the scores, "
                            f"dividing them by one factor (margins keep their signs and order).") from None
        except (TypeError, ValueError) as exc:
            raise DataError(f"{where}: {name} must hold numbers, one score per row ({exc}); convert them first, a "
                            f"missing score as NaN.") from None
    shapes = [x.shape for x in arrays.values()]
    if all(shape == (0,) for shape in shapes):
        raise DataError(f"{where}: {names} hold{'s' * (len(shapes) == 1)} no rows: give one score per row, at least "
                        f"one row.")
    if any(len(shape) != 1 for shape in shapes) or len(set(shapes)) > 1:
        raise DataError(f"{where}: {names} must be flat, one score per row{', as many in each' * (len(shapes) > 1)}; "
                        f"got {' and '.join(str(s[0]) if len(s) == 1 else f'shape {s}' for s in shapes)} values. Give "
                        f"them as 1-dimensional arrays or lists, row i of each the same pair.")
    nonfinite_rows(where, arrays, EXCLUDE_FIRST)
    refuse_too_large(where, arrays)
    return list(arrays.values())


def clean(value: Any) -> Any:
    """A JSON-ready copy: numpy scalars become Python numbers, NaN and infinities become None."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [clean(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def _quiet(fn, *args, **kwargs):
    # scipy warns (and returns NaN) on constant input; NaN becomes None and the caller says why.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def has_spread(x: np.ndarray) -> bool:
    """Whether `x` holds two different values (else a mean, a std, a t is rounding noise or undefined; a KDE fails)."""
    return bool(x.size > 1 and x.min() < x.max())


def describe(x: np.ndarray) -> dict[str, float | None]:
    """Mean, sample std (ddof 1), median, quartiles, range, skewness (g1) and excess kurtosis (g2) of `x`."""
    if x.size and not has_spread(x):  # no spread: exact values, not the rounding noise of a mean and moments
        value = float(x[0])
        return clean({"mean": value, "std": 0.0 if x.size > 1 else None, "median": value, "q25": value, "q75": value,
                      "min": value, "max": value, "skewness": None, "kurtosis": None})
    q25, median, q75 = np.quantile(x, [0.25, 0.5, 0.75])
    return clean({
        "mean": x.mean(), "std": x.std(ddof=1) if x.size > 1 else None, "median": median, "q25": q25, "q75": q75,
        "min": x.min(), "max": x.max(),
        # biased moment estimators (scipy's defaults): g1 = m3 / m2^1.5, g2 = m4 / m2^2 - 3; None if constant
        "skewness": _quiet(sps.skew, x, bias=True),
        "kurtosis": _quiet(sps.kurtosis, x, fisher=True, bias=True),
    })


def bootstrap_intervals(series: dict[str, np.ndarray], resamples: int, seed: int,
                        block_elements: int = BOOTSTRAP_BLOCK_ELEMENTS,
                        max_categories: int = BOOTSTRAP_MAX_CATEGORIES) -> dict[str, dict[str, list[float]]]:
    """Percentile bootstrap intervals of the mean and median of each paired series (the same rows for all)."""
    arrays = {name: np.asarray(x, dtype=np.float64) for name, x in series.items()}  # paired, n >= 1 (callers')
    if len(next(iter(arrays.values()))) < 2:  # nothing to resample: no interval, not a zero-width one
        return {name: {"mean_ci95": None, "median_ci95": None} for name in arrays}
    rng = np.random.default_rng(seed)
    values = None  # few distinct rows (ratings): multinomial category counts; else index matrices in bounded blocks
    if all(np.unique(x).size <= max_categories for x in arrays.values()):
        values, counts = np.unique(np.column_stack(list(arrays.values())), axis=0, return_counts=True)
    if values is not None and len(values) <= max_categories:
        means, medians = _bootstrap_categories(values, counts, list(arrays), resamples, rng)
    else:
        means, medians = _bootstrap_rows(arrays, resamples, rng, block_elements)
    return {name: {"mean_ci95": clean(np.quantile(means[name], CI_QUANTILES)),
                   "median_ci95": clean(np.quantile(medians[name], CI_QUANTILES))} for name in arrays}


def _bootstrap_categories(values: np.ndarray, counts: np.ndarray, names: list[str], resamples: int,
                          rng: np.random.Generator) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    n = int(counts.sum())
    drawn = rng.multinomial(n, counts / n, size=resamples)  # (resamples, categories): how often each was drawn
    means, medians = {}, {}
    for j, name in enumerate(names):
        order = np.argsort(values[:, j], kind="stable")
        sorted_values = values[order, j]
        cumulative = np.cumsum(drawn[:, order], axis=1)
        # the median of n sorted values is the mean of those at 0-based positions (n-1)//2 and n//2
        low = sorted_values[(cumulative > (n - 1) // 2).argmax(axis=1)]
        high = sorted_values[(cumulative > n // 2).argmax(axis=1)]
        means[name] = drawn @ values[:, j] / n
        medians[name] = (low + high) / 2
    return means, medians


def _bootstrap_rows(arrays: dict[str, np.ndarray], resamples: int, rng: np.random.Generator, block_elements: int
                    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    n = len(next(iter(arrays.values())))
    block = max(1, min(resamples, block_elements // n))
    index_dtype = np.int32 if n < 2**31 else np.int64
    # Medians come from the ranks of the drawn rows: partitioning integers is about twice as fast as floats.
    sorted_values, ranks = {}, {}
    for name, x in arrays.items():
        order = np.argsort(x, kind="stable")
        sorted_values[name] = x[order]
        ranks[name] = np.empty(n, dtype=index_dtype)
        ranks[name][order] = np.arange(n, dtype=index_dtype)
    middle = [(n - 1) // 2, n // 2]  # the median of n sorted values is the mean of these two
    means = {name: np.empty(resamples) for name in arrays}
    medians = {name: np.empty(resamples) for name in arrays}
    for start in range(0, resamples, block):
        stop = min(resamples, start + block)
        rows = rng.integers(0, n, size=(stop - start, n), dtype=index_dtype)
        for name, x in arrays.items():
            means[name][start:stop] = x[rows].mean(axis=1)
            drawn = np.partition(ranks[name][rows], middle, axis=1)
            medians[name][start:stop] = (sorted_values[name][drawn[:, middle[0]]]
                                         + sorted_values[name][drawn[:, middle[1]]]) / 2
    return means, medians


def summarize_scores(score_chosen: np.ndarray, score_rejected: np.ndarray, resamples: int, seed: int
                     ) -> dict[str, dict[str, Any]]:
    """`describe` and bootstrap intervals of the chosen, rejected and margin series (one row: std, intervals None)."""
    chosen, rejected = paired_scores("stats.summarize_scores", score_chosen=score_chosen, score_rejected=score_rejected)
    series = {"score_chosen": chosen, "score_rejected": rejected, "margin": chosen - rejected}
    intervals = bootstrap_intervals(series, resamples, seed)
    return {name: {**describe(x), **intervals[name]} for name, x in series.items()}


def margin_sign(margin: np.ndarray) -> dict[str, dict[str, float]]:
    """Counts and fractions of rows with margin > 0 (chosen preferred), = 0 (tie) and < 0 (inversion)."""
    margin, = paired_scores("stats.margin_sign", margin=margin)
    counts = {"positive": int((margin > 0).sum()), "zero": int((margin == 0).sum()),
              "negative": int((margin < 0).sum())}
    return {"counts": counts, "fractions": {k: v / margin.size for k, v in counts.items()}}


def signed_rank_sums(margin: np.ndarray) -> tuple[float, float, int]:
    """(R+, R−, n) of Wilcoxon's signed ranks: zeros dropped, |margin| ranked with average ranks for ties."""
    d = margin[margin != 0]
    ranks = sps.rankdata(np.abs(d), method="average")
    return float(ranks[d > 0].sum()), float(ranks[d < 0].sum()), int(d.size)


def wilcoxon_test(margin: np.ndarray) -> dict[str, Any]:
    """Two-sided Wilcoxon signed-rank test of margin = 0, zeros (ties) discarded first (Wilcoxon's method)."""
    nonzero = margin[margin != 0]
    out: dict[str, Any] = {"zero_method": "wilcox", "zeros_discarded": int(margin.size - nonzero.size),
                           "n_used": int(nonzero.size), "alternative": "two-sided",
                           "zeros": "rows with margin == 0 (ties) are dropped before ranking (Wilcoxon's method)"}
    if nonzero.size == 0:
        return {**out, "statistic": None, "pvalue": None, "method": None,
                "note": "every margin is zero: there is nothing to test"}
    tied = np.unique(np.abs(nonzero)).size < nonzero.size
    # scipy's 'auto' rule, made explicit so the method used is recorded: exact null distribution for small
    # samples without ties, exhaustive permutation for tiny tied samples, normal approximation otherwise.
    method = ("exact" if nonzero.size <= 50 and not tied else "permutation" if nonzero.size <= 13 else "asymptotic")
    res = sps.wilcoxon(nonzero, zero_method="wilcox", method="auto", alternative="two-sided")
    return {**out, "statistic": clean(res.statistic), "pvalue": clean(res.pvalue), "method": method,
            "statistic_is": "min(R+, R-), the smaller signed-rank sum"}


def paired_t_test(margin: np.ndarray) -> dict[str, Any]:
    """Two-sided paired t-test of mean margin = 0 (the one-sample t-test on chosen − rejected)."""
    res = _quiet(sps.ttest_1samp, margin, 0.0)
    spread = has_spread(margin)  # equal margins: a "t" of rounding noise, or inf
    out = {"statistic": clean(res.statistic) if spread else None, "pvalue": clean(res.pvalue) if spread else None,
           "df": int(margin.size - 1), "alternative": "two-sided"}
    if out["statistic"] is None:
        out["note"] = "all margins are equal (zero variance): the t statistic is undefined"
    return out


def sign_test(margin: np.ndarray, what: str = "margin") -> dict[str, Any]:
    """Two-sided exact binomial sign test of P(margin > 0) = 1/2 over the non-zero margins (ties discarded)."""
    positive, negative = int((margin > 0).sum()), int((margin < 0).sum())
    out: dict[str, Any] = {"positive": positive, "negative": negative,
                           "zeros_discarded": int(margin.size - positive - negative), "alternative": "two-sided"}
    if positive + negative == 0:
        return {**out, "pvalue": None, "note": f"every {what} is zero: there is nothing to test"}
    return {**out, "pvalue": clean(sps.binomtest(positive, positive + negative, 0.5).pvalue)}


def paired_tests(margin: np.ndarray) -> dict[str, dict[str, Any]]:
    """The `tests` block: Wilcoxon signed-rank, paired t and sign test on the margin."""
    margin, = paired_scores("stats.paired_tests", margin=margin)
    return {"wilcoxon": wilcoxon_test(margin), "paired_t": paired_t_test(margin), "sign_test": sign_test(margin)}


def effect_sizes(margin: np.ndarray) -> dict[str, float | None]:
    """Cohen's d_z (mean margin / its sample std) and the matched-pairs rank-biserial correlation."""
    margin, = paired_scores("stats.effect_sizes", margin=margin)
    sd = margin.std(ddof=1) if has_spread(margin) else 0.0
    r_plus, r_minus, used = signed_rank_sums(margin)
    return clean({
        "cohens_dz": margin.mean() / sd if sd > 0 else None,
        # Kerby's simple difference formula over the ranks the Wilcoxon test uses (zeros discarded)
        "rank_biserial": (r_plus - r_minus) / (r_plus + r_minus) if used else None,
    })


def spearman(x: np.ndarray, y: np.ndarray) -> dict[str, float | None]:
    """Spearman's rho of x and y from 3 values on (two are always in order), its two-sided p-value from 10 on."""
    if x.size < 3:
        return {"statistic": None, "pvalue": None}
    rho = _quiet(sps.spearmanr, x, y)
    return clean({"statistic": rho.statistic, "pvalue": rho.pvalue if x.size >= SPEARMAN_P_VALUES else None})


def correlations(x: np.ndarray, y: np.ndarray) -> dict[str, dict[str, float | None]]:
    """Pearson and Spearman correlation of x and y with two-sided p-values; undefined for fewer than three values."""
    if x.size < 3:  # two points are always on a line
        return {"pearson": {"statistic": None, "pvalue": None}, "spearman": spearman(x, y)}
    pearson = _quiet(sps.pearsonr, x, y)
    return clean({"pearson": {"statistic": pearson.statistic, "pvalue": pearson.pvalue}, "spearman": spearman(x, y)})


def length_statistics(lengths: dict[str, np.ndarray], margin: np.ndarray) -> dict[str, Any]:
    """Mean/median of `{side}_{chars|tokens}`, Spearman of margin vs their difference, its sign test."""
    out: dict[str, Any] = {side: {unit: {"mean": np.mean(lengths[f"{side}_{unit}"]),
                                         "median": np.median(lengths[f"{side}_{unit}"])}
                                  for unit in ("chars", "tokens")} for side in ("chosen", "rejected")}
    out["margin_vs_length_difference"] = {}
    for unit in ("chars", "tokens"):
        diff = lengths[f"chosen_{unit}"] - lengths[f"rejected_{unit}"]
        rho = spearman(margin, diff)
        out["margin_vs_length_difference"][unit] = {"spearman": rho["statistic"], "pvalue": rho["pvalue"]}
        out[f"chosen_longer_fraction_{unit}"] = float((diff > 0).mean())
        out.setdefault("chosen_longer_test", {})[unit] = sign_test(diff, "length difference")
    return clean(out)


def pairrm_invariants(score_chosen: np.ndarray, score_rejected: np.ndarray) -> dict[str, Any]:
    """Counts of rows breaking PairRM's sign order and rows with two-candidate antisymmetry (reported only)."""
    c, r = paired_scores("stats.pairrm_invariants", score_chosen=score_chosen, score_rejected=score_rejected)
    sign_fails = int((~((c >= 0) & (r <= 0))).sum())
    antisymmetric = int(np.isclose(c, -r, rtol=0.0, atol=ANTISYMMETRY_ATOL).sum())
    return {
        "sign_order_fails": sign_fails, "sign_order_fails_fraction": sign_fails / c.size,
        "antisymmetry_holds": antisymmetric, "antisymmetry_holds_fraction": antisymmetric / c.size,
        "antisymmetry_atol": ANTISYMMETRY_ATOL, "inversions": int((c < r).sum()),
        "about": prose("report", "pairrm_about"),
    }


def row_starts(counts: np.ndarray) -> np.ndarray:
    """Where each row's values start in a flat array of rows with `counts` values each."""
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


def row_sums(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each row's sum of a flat array of rows with `counts` values each (0 for an empty row)."""
    return np.bincount(np.repeat(np.arange(counts.size), counts), weights=values, minlength=counts.size)


def candidate_score_invariants(flat_scores: np.ndarray, candidates_per_row: np.ndarray, score_chosen: np.ndarray,
                               score_rejected: np.ndarray) -> dict[str, Any]:
    """PairRM checks needing every candidate's score (flat, counts per row; rows of 0 unchecked): sums, extremes."""
    counts = np.asarray(candidates_per_row, dtype=np.int64)
    c, r, counts = score_chosen[counts > 0], score_rejected[counts > 0], counts[counts > 0]
    sums, starts = row_sums(flat_scores, counts), row_starts(counts)
    best, worst = np.maximum.reduceat(flat_scores, starts), np.minimum.reduceat(flat_scores, starts)
    two = counts == 2
    return {
        "rows": int(counts.size),
        "candidates_per_row": {"min": int(counts.min()), "max": int(counts.max()), "mean": float(counts.mean())},
        "sum_to_zero_holds": int(np.isclose(sums, 0.0, rtol=0.0, atol=SUM_TO_ZERO_ATOL).sum()),
        "sum_to_zero_atol": SUM_TO_ZERO_ATOL,
        "two_candidate_rows": int(two.sum()),
        "antisymmetry_holds_among_two_candidate_rows": int(
            np.isclose(c[two], -r[two], rtol=0.0, atol=ANTISYMMETRY_ATOL).sum()),
        "chosen_is_best_and_rejected_is_worst": int(((c == best) & (r == worst)).sum()),
    }


def detect_scale(score_chosen: np.ndarray, score_rejected: np.ndarray, pairwise: bool | None = True,
                 rule: str | None = None) -> dict[str, Any]:
    """Whether the scores look like a 1–10 rating grid, probabilities (all in [0, 1]) or logits (PairRM's; a reward
    model's if `pairwise` is false; None: no scorer recorded, read as PairRM's); `rule`: a pair rule, not best_worst."""
    v = np.concatenate(paired_scores("stats.detect_scale", score_chosen=score_chosen, score_rejected=score_rejected))
    on_grid = np.isclose(v / RATING_GRID_STEP, np.round(v / RATING_GRID_STEP), rtol=0.0, atol=1e-9)
    grid_fraction = float(on_grid.mean())
    lo, hi = float(v.min()), float(v.max())
    distinct = int(np.unique(v).size)
    in_range = RATING_RANGE[0] <= lo and hi <= RATING_RANGE[1]
    kind = ("constant" if distinct == 1 else "rating" if grid_fraction == 1.0 and in_range and distinct >= 3 else
            "probability" if grid_fraction < 0.5 and 0.0 <= lo and hi <= 1.0 else
            "logit" if grid_fraction < 0.5 else "unclear")  # (two values: labels, or too few to tell a scale)
    sentence = prose("report", "scale_sentence", kind, v.size, RATING_GRID_STEP, lo, hi, distinct, grid_fraction,
                     pairwise, rule)
    return {"kind": kind, "grid_step": RATING_GRID_STEP, "grid_fraction": grid_fraction, "distinct_values": distinct,
            "min": lo, "max": hi, "sentence": sentence}


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    # einsum's plain loop, not BLAS: threaded BLAS on a handful of short vectors spins on a busy machine (10x slower)
    return float(np.einsum("i,i->", a, b))


def _weighted_moments(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float, float, float, float]:
    """(mean x, mean y, var x, var y, cov) with weights w (population moments, 1/sum w)."""
    total = w.sum()
    mx, my = _dot(w, x) / total, _dot(w, y) / total
    dx, dy = x - mx, y - my
    wdx = w * dx
    return mx, my, _dot(wdx, dx) / total, _dot(w * dy, dy) / total, _dot(wdx, dy) / total


def _pearson(mx: float, my: float, vx: float, vy: float, cov: float) -> float:
    """Pearson's r from `_weighted_moments`."""
    return cov / math.sqrt(vx * vy) if vx > 0 and vy > 0 else math.nan


def _lin(mx: float, my: float, vx: float, vy: float, cov: float) -> float:
    """Lin's concordance correlation 2·cov / (var x + var y + (mean x − mean y)²) from `_weighted_moments`."""
    denominator = vx + vy + (mx - my) ** 2
    return 2 * cov / denominator if denominator > 0 else math.nan


def bland_altman(x: np.ndarray, y: np.ndarray) -> dict[str, float | None]:
    """Bland–Altman of y − x: mean difference, its sample std, the 95 % limits of agreement mean ± 1.96·std."""
    d = y - x
    sd = d.std(ddof=1) if d.size > 1 else math.nan
    return clean({"mean_difference": d.mean(), "sd_difference": sd, "loa_low": d.mean() - Z_95 * sd,
                  "loa_high": d.mean() + Z_95 * sd})


class _WeightedRanks:
    """Average ranks of a fixed array inside a bootstrap resample given as weights (how often each was drawn),
    without sorting again: the weight of everything smaller, plus (its tie group's weight + 1) / 2."""

    def __init__(self, x: np.ndarray):
        self.order = order = np.argsort(x, kind="stable")
        sorted_x = x[order]
        new_group = np.r_[True, sorted_x[1:] != sorted_x[:-1]]
        self.ties = not new_group.all()
        self.starts = np.flatnonzero(new_group)
        self.group = np.empty(x.size, dtype=np.int64)
        self.group[order] = np.cumsum(new_group) - 1

    def ranks(self, w: np.ndarray) -> np.ndarray:
        totals = w[self.order]
        if self.ties:
            totals = np.add.reduceat(totals, self.starts)
        average = np.cumsum(totals) - (totals - 1) / 2  # weight before the group + (its weight + 1) / 2
        if self.ties:
            return average[self.group]
        out = np.empty_like(average)
        out[self.order] = average
        return out


def rough_interval(n: int) -> bool:
    """Whether an agreement interval of `n` rows exists but is too narrow to read as 95%."""
    return AGREEMENT_MIN_ROWS <= n < BOOTSTRAP_FEW_ROWS


def agreement_statistics(x: np.ndarray, y: np.ndarray, tolerances: list[float], resamples: int, seed: int,
                         clusters: np.ndarray | None = None) -> dict[str, Any]:
    """How well y reproduces x, with percentile-bootstrap intervals over whole clusters (a resample: a weight each)."""
    n = x.size
    d = y - x
    out: dict[str, Any] = {"n": n}
    if n < AGREEMENT_MIN_ROWS:
        return {**out, "note": "fewer than three values: agreement statistics are undefined"}
    r = correlations(x, y)
    out.update({"pearson": r["pearson"]["statistic"], "spearman": r["spearman"]["statistic"],
                "lin_ccc": clean(_lin(*_weighted_moments(x, y, np.ones(n)))), "bland_altman": bland_altman(x, y),
                "max_abs_difference": float(np.abs(d).max()),
                "within": {f"{t:g}": float((np.abs(d) <= t).mean()) for t in tolerances}})
    clusters = np.arange(n) if clusters is None else np.asarray(clusters)
    _, cluster = np.unique(clusters, return_inverse=True)
    n_clusters = int(cluster.max()) + 1
    out["bootstrap"] = {"resamples": resamples, "seed": seed, "level": CI_LEVEL, "method": "percentile",
                        "unit": "row (a row's values are resampled together)", "clusters": n_clusters}
    if n_clusters < AGREEMENT_MIN_ROWS:
        out["ci95"] = dict.fromkeys(AGREEMENT_INTERVALS)
        out["bootstrap"]["note"] = "fewer than three rows: no interval"
        return out
    rng = np.random.default_rng(seed)
    rank_x, rank_y = _WeightedRanks(x), _WeightedRanks(y)
    draws = {name: np.empty(resamples) for name in AGREEMENT_INTERVALS}
    for b in range(resamples):
        w = np.bincount(rng.integers(0, n_clusters, n_clusters), minlength=n_clusters)[cluster].astype(np.float64)
        total = w.sum()
        moments = _weighted_moments(x, y, w)
        draws["pearson"][b], draws["lin_ccc"][b] = _pearson(*moments), _lin(*moments)
        draws["spearman"][b] = _pearson(*_weighted_moments(rank_x.ranks(w), rank_y.ranks(w), w))
        md = _dot(w, d) / total
        sd = math.sqrt(max(_dot(w, (d - md) ** 2) / (total - 1), 0.0)) if total > 1 else math.nan
        draws["mean_difference"][b] = md
        draws["loa_low"][b], draws["loa_high"][b] = md - Z_95 * sd, md + Z_95 * sd
    out["ci95"] = {name: clean(np.nanquantile(v, CI_QUANTILES)) if np.isfinite(v).any() else None
                   for name, v in draws.items()}
    return out
