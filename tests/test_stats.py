"""repro.analysis.stats: every statistic against a tiny example worked by hand and an independent numpy/scipy/pandas computation."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from repro.analysis import stats
from repro.errors import DataError

# The hand-worked example: margins [2, 0, -2, 4, 1].
CHOSEN = np.array([3.0, 5.0, 4.0, 6.0, 2.0])
REJECTED = np.array([1.0, 5.0, 6.0, 2.0, 1.0])
MARGIN = CHOSEN - REJECTED


@pytest.fixture(scope="module")
def paired():
    """Fixed, seeded paired data with PairRM-like real values (no ties)."""
    rng = np.random.default_rng(1234)
    chosen = rng.normal(0.8, 1.0, 400)
    rejected = 0.4 * chosen + rng.normal(-0.5, 1.2, 400)
    return chosen, rejected


@pytest.fixture(scope="module")
def ratings():
    """Fixed, seeded 1-10 ratings on a half-point grid (many ties and zero margins)."""
    rng = np.random.default_rng(99)
    chosen = np.clip(np.round(rng.normal(7.5, 1.5, 600) * 2) / 2, 1, 10)
    rejected = np.clip(np.minimum(chosen, np.round(rng.normal(6.0, 2.0, 600) * 2) / 2), 1, 10)
    return chosen, rejected


# --------------------------------------------------------------------------------------------
# describe
# --------------------------------------------------------------------------------------------
def test_describe_by_hand():
    d = stats.describe(MARGIN)
    assert d["mean"] == pytest.approx(1.0)
    assert d["std"] == pytest.approx(math.sqrt(5.0))  # squared deviations 1+1+9+9+0 = 20, / (5-1)
    assert (d["median"], d["q25"], d["q75"], d["min"], d["max"]) == (1.0, 0.0, 2.0, -2.0, 4.0)
    assert d["skewness"] == pytest.approx(0.0, abs=1e-12)  # m3 = (1 - 1 - 27 + 27 + 0) / 5 = 0
    assert d["kurtosis"] == pytest.approx(32.8 / 16 - 3)  # m4 = 164/5, m2 = 4


def test_describe_matches_numpy_moments(paired):
    x = paired[0]
    d = stats.describe(x)
    dev = x - x.mean()
    m2, m3, m4 = (dev**2).mean(), (dev**3).mean(), (dev**4).mean()
    assert d["mean"] == pytest.approx(statistics.fmean(x))
    assert d["std"] == pytest.approx(statistics.stdev(x))
    assert d["median"] == pytest.approx(statistics.median(x))
    q = pd.Series(x).quantile([0.25, 0.75])
    assert (d["q25"], d["q75"]) == pytest.approx((q[0.25], q[0.75]))
    assert (d["min"], d["max"]) == (min(x), max(x))
    assert d["skewness"] == pytest.approx(m3 / m2**1.5)
    assert d["kurtosis"] == pytest.approx(m4 / m2**2 - 3)


def test_describe_constant_data_has_no_shape():
    d = stats.describe(np.full(10, 7.0))
    assert d["std"] == 0.0 and d["skewness"] is None and d["kurtosis"] is None
    # 30 scores of 0.7: the mean came out 0.6999999999999997, the std 2.3e-16, skewness 1 and kurtosis -2 (noise)
    d = stats.describe(np.full(30, 0.7))
    assert (d["mean"], d["std"], d["skewness"], d["kurtosis"]) == (0.7, 0.0, None, None)


# --------------------------------------------------------------------------------------------
# bootstrap
# --------------------------------------------------------------------------------------------
def test_bootstrap_by_hand():
    # two values: resampled means are 0, 0.5, 1 with chances 1/4, 1/2, 1/4, so the 95% interval is [0, 1]
    out = stats.bootstrap_intervals({"x": np.array([0.0, 1.0])}, resamples=1000, seed=0)["x"]
    assert out["mean_ci95"] == [0.0, 1.0] and out["median_ci95"] == [0.0, 1.0]
    const = stats.bootstrap_intervals({"x": np.full(7, 3.5)}, resamples=200, seed=0)["x"]
    assert const == {"mean_ci95": [3.5, 3.5], "median_ci95": [3.5, 3.5]}


def test_bootstrap_equals_a_plain_loop_over_the_same_draws(paired):
    chosen, rejected = paired
    n, resamples, seed = len(chosen), 300, 5
    out = stats.bootstrap_intervals({"c": chosen, "r": rejected, "m": chosen - rejected}, resamples, seed,
                                    block_elements=n * resamples,  # one block: the draws below are the same
                                    max_categories=0)  # resample rows (the path for real-valued scores)
    rows = np.random.default_rng(seed).integers(0, n, size=(resamples, n), dtype=np.int32)
    for name, x in {"c": chosen, "r": rejected, "m": chosen - rejected}.items():
        means = [statistics.fmean(x[r].tolist()) for r in rows]
        medians = [statistics.median(x[r].tolist()) for r in rows]
        assert out[name]["mean_ci95"] == pytest.approx(list(np.quantile(means, [0.025, 0.975])), rel=1e-12)
        assert out[name]["median_ci95"] == pytest.approx(list(np.quantile(medians, [0.025, 0.975])), rel=1e-12)


def test_bootstrap_of_ratings_equals_a_plain_loop_over_the_drawn_counts(ratings):
    chosen, rejected = ratings
    n, resamples, seed = len(chosen), 300, 2
    series = {"c": chosen, "r": rejected, "m": chosen - rejected}
    out = stats.bootstrap_intervals(series, resamples, seed)
    # few distinct pairs: each resample is a count per distinct (chosen, rejected, margin) row
    values, counts = np.unique(np.column_stack(list(series.values())), axis=0, return_counts=True)
    assert len(values) < len(chosen) / 4
    drawn = np.random.default_rng(seed).multinomial(n, counts / n, size=resamples)
    for j, name in enumerate(series):
        samples = [np.repeat(values[:, j], k) for k in drawn]
        assert all(len(sample) == n for sample in samples)
        means = [statistics.fmean(sample.tolist()) for sample in samples]
        medians = [statistics.median(sample.tolist()) for sample in samples]
        assert out[name]["mean_ci95"] == pytest.approx(list(np.quantile(means, [0.025, 0.975])), rel=1e-12)
        assert out[name]["median_ci95"] == list(np.quantile(medians, [0.025, 0.975]))


def test_bootstrap_paths_agree_on_ratings(ratings):
    series = {"c": ratings[0], "m": ratings[0] - ratings[1]}
    counts = stats.bootstrap_intervals(series, 2000, seed=0)
    rows = stats.bootstrap_intervals(series, 2000, seed=0, max_categories=0)
    for name in series:
        assert counts[name]["mean_ci95"] == pytest.approx(rows[name]["mean_ci95"], abs=0.03)
        assert counts[name]["median_ci95"] == rows[name]["median_ci95"]  # on a 0.5 grid, both land on it


@pytest.mark.parametrize("max_categories", [0, stats.BOOTSTRAP_MAX_CATEGORIES])
def test_bootstrap_agrees_with_scipy_and_normal_theory(paired, max_categories):
    x = paired[0]
    # row path in small blocks: 7 full blocks and a partial one, as a large dataset would be processed
    out = stats.bootstrap_intervals({"x": x}, resamples=2000, seed=1, block_elements=len(x) * 256,
                                    max_categories=max_categories)["x"]
    ref = sps.bootstrap((x,), np.mean, n_resamples=2000, method="percentile", rng=np.random.default_rng(7))
    assert out["mean_ci95"] == pytest.approx([ref.confidence_interval.low, ref.confidence_interval.high], abs=0.02)
    half = 1.96 * x.std(ddof=1) / math.sqrt(len(x))
    assert out["mean_ci95"] == pytest.approx([x.mean() - half, x.mean() + half], abs=0.02)
    ref_med = sps.bootstrap((x,), np.median, n_resamples=2000, method="percentile", rng=np.random.default_rng(7))
    assert out["median_ci95"] == pytest.approx([ref_med.confidence_interval.low, ref_med.confidence_interval.high],
                                               abs=0.04)


def test_bootstrap_is_seeded(paired):
    a = stats.bootstrap_intervals({"x": paired[0]}, 200, seed=3)
    assert a == stats.bootstrap_intervals({"x": paired[0]}, 200, seed=3)
    assert a != stats.bootstrap_intervals({"x": paired[0]}, 200, seed=4)


def test_one_row_has_no_intervals_and_no_spread():
    """summarize_scores([1.0], [0.0], 1000, 0) gave mean_ci95 [1.0, 1.0]: a zero-width "95% interval" of one pair,
    for which docs/analysis.md says intervals are undefined."""
    out = stats.summarize_scores([1.0], [0.0], 1000, 0)
    for name, value in (("score_chosen", 1.0), ("score_rejected", 0.0), ("margin", 1.0)):
        assert out[name] == {"mean": value, "std": None, "median": value, "q25": value, "q75": value, "min": value,
                             "max": value, "skewness": None, "kurtosis": None, "mean_ci95": None, "median_ci95": None}
    assert json.loads(json.dumps(out, allow_nan=False)) == out
    assert stats.bootstrap_intervals({"x": np.array([2.5])}, 200, 0) == {"x": {"mean_ci95": None, "median_ci95": None}}


def test_summarize_scores_keys_and_margin(paired):
    out = stats.summarize_scores(*paired, resamples=200, seed=0)
    keys = ["mean", "std", "median", "q25", "q75", "min", "max", "skewness", "kurtosis", "mean_ci95", "median_ci95"]
    assert list(out) == ["score_chosen", "score_rejected", "margin"]
    for block in out.values():
        assert list(block) == keys
        assert block["mean_ci95"][0] <= block["mean"] <= block["mean_ci95"][1]
    assert out["margin"]["mean"] == pytest.approx(out["score_chosen"]["mean"] - out["score_rejected"]["mean"])


# --------------------------------------------------------------------------------------------
# margin sign, tests, effect sizes
# --------------------------------------------------------------------------------------------
def test_margin_sign_by_hand():
    out = stats.margin_sign(MARGIN)
    assert out["counts"] == {"positive": 3, "zero": 1, "negative": 1}
    assert out["fractions"] == {"positive": 0.6, "zero": 0.2, "negative": 0.2}


def test_tests_by_hand():
    t = stats.paired_tests(MARGIN)
    # nonzero margins [2, -2, 4, 1] -> |d| ranks [2.5, 2.5, 4, 1]: R+ = 7.5, R- = 2.5
    assert stats.signed_rank_sums(MARGIN) == (7.5, 2.5, 4)
    w = t["wilcoxon"]
    assert w["statistic"] == 2.5 and w["zeros_discarded"] == 1 and w["n_used"] == 4 and w["zero_method"] == "wilcox"
    # all 16 sign patterns of ranks {1, 2.5, 2.5, 4}: 4 give R+ >= 7.5 and 4 give R+ <= 2.5 -> p = 8/16
    assert w["method"] == "permutation" and w["pvalue"] == pytest.approx(0.5)
    # t = mean / (sd / sqrt(n)) = 1 / (sqrt(5) / sqrt(5)) = 1 on 4 degrees of freedom
    assert t["paired_t"]["statistic"] == pytest.approx(1.0) and t["paired_t"]["df"] == 4
    assert t["paired_t"]["pvalue"] == pytest.approx(2 * sps.t.sf(1.0, 4))
    # 3 positive, 1 negative: p = 2 * P(X >= 3 | n=4, 1/2) = 2 * 5/16
    assert t["sign_test"]["pvalue"] == pytest.approx(10 / 16)
    e = stats.effect_sizes(MARGIN)
    assert e["cohens_dz"] == pytest.approx(1 / math.sqrt(5))
    assert e["rank_biserial"] == pytest.approx((7.5 - 2.5) / 10)


def _normal_wilcoxon_p(d: np.ndarray) -> float:
    """Wilcoxon's normal approximation with the tie correction, written out from the textbook."""
    d = d[d != 0]
    n = d.size
    ranks = pd.Series(np.abs(d)).rank(method="average").to_numpy()
    r_plus = ranks[d > 0].sum()
    ties = pd.Series(np.abs(d)).value_counts().to_numpy()
    var = n * (n + 1) * (2 * n + 1) / 24 - (ties**3 - ties).sum() / 48
    z = (r_plus - n * (n + 1) / 4) / math.sqrt(var)
    return 2 * sps.norm.sf(abs(z))


def test_tests_match_independent_computations(ratings, paired):
    for chosen, rejected in (ratings, paired):
        d = chosen - rejected
        t = stats.paired_tests(d)
        assert t["wilcoxon"]["method"] == "asymptotic"
        assert t["wilcoxon"]["pvalue"] == pytest.approx(_normal_wilcoxon_p(d), rel=1e-9)
        ref_t = sps.ttest_rel(chosen, rejected)
        assert (t["paired_t"]["statistic"], t["paired_t"]["pvalue"]) == pytest.approx((ref_t.statistic, ref_t.pvalue))
        k, m = int((d > 0).sum()), int((d != 0).sum())
        tail = sum(math.comb(m, i) for i in range(max(k, m - k), m + 1)) / 2**m
        assert t["sign_test"]["pvalue"] == pytest.approx(min(1.0, 2 * tail), rel=1e-9)
        e = stats.effect_sizes(d)
        assert e["cohens_dz"] == pytest.approx(d.mean() / d.std(ddof=1))
        nz = d[d != 0]
        ranks = pd.Series(np.abs(nz)).rank().to_numpy()
        assert e["rank_biserial"] == pytest.approx((ranks[nz > 0].sum() - ranks[nz < 0].sum()) / (m * (m + 1) / 2))
    assert stats.paired_tests(ratings[0] - ratings[1])["wilcoxon"]["zeros_discarded"] == int(
        (ratings[0] == ratings[1]).sum()) > 0


def test_exact_wilcoxon_for_small_untied_samples():
    d = np.array([1.5, -0.2, 3.1, 2.2, 0.7, -1.1, 4.0, 2.9])
    w = stats.wilcoxon_test(d)
    assert w["method"] == "exact"
    # exact null: count sign patterns of ranks 1..8 whose R+ is at most the observed smaller sum
    r_minus = stats.signed_rank_sums(d)[1]
    sums = [sum(r for r, bit in zip(range(1, 9), format(mask, "08b")) if bit == "1") for mask in range(256)]
    assert w["pvalue"] == pytest.approx(2 * sum(s <= r_minus for s in sums) / 256)


def test_all_ties_leave_tests_undefined_with_a_note():
    t = stats.paired_tests(np.zeros(6))
    assert t["wilcoxon"]["pvalue"] is None and "zero" in t["wilcoxon"]["note"]
    assert t["sign_test"]["pvalue"] is None and t["paired_t"]["statistic"] is None
    # equal non-zero margins (0.7 - 0.2 in every row): the t statistic is undefined, and so is its p (it said p = 0)
    equal = np.full(30, 0.7) - np.full(30, 0.2)
    assert stats.paired_tests(equal)["paired_t"] | {"note": ""} == {
        "statistic": None, "pvalue": None, "df": 29, "alternative": "two-sided", "note": ""}
    assert stats.effect_sizes(equal)["cohens_dz"] is None
    assert stats.effect_sizes(np.zeros(6)) == {"cohens_dz": None, "rank_biserial": None}


def test_correlations(paired):
    out = stats.correlations(CHOSEN, REJECTED)
    assert out["pearson"]["statistic"] == pytest.approx(6 / math.sqrt(10 * 22))  # deviations worked by hand
    assert out["spearman"]["statistic"] == pytest.approx(5.5 / math.sqrt(10 * 9.5))  # ranks [2,4,3,5,1] vs [1.5,4,5,3,1.5]
    chosen, rejected = paired
    out = stats.correlations(chosen, rejected)
    frame = pd.DataFrame({"c": chosen, "r": rejected})
    assert out["pearson"]["statistic"] == pytest.approx(np.corrcoef(chosen, rejected)[0, 1])
    assert out["spearman"]["statistic"] == pytest.approx(frame.corr(method="spearman").loc["c", "r"])
    r, n = out["pearson"]["statistic"], len(chosen)
    t = r * math.sqrt((n - 2) / (1 - r * r))
    assert out["pearson"]["pvalue"] == pytest.approx(2 * sps.t.sf(abs(t), n - 2), rel=1e-6)
    # three rows: rho = -1 and scipy's p = 0, where the exact p is 1/3; Spearman's p is given from 10 values on
    three = stats.correlations(np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.5, 1.0]))["spearman"]
    assert three == {"statistic": -1.0, "pvalue": None}
    # two rows: r is ±1 whatever the scores (it said r = 1, p = 1)
    two = stats.correlations(np.array([1.0, 2.0]), np.array([-1.0, -3.0]))
    assert two == {k: {"statistic": None, "pvalue": None} for k in ("pearson", "spearman")}


# --------------------------------------------------------------------------------------------
# lengths, invariants, scale
# --------------------------------------------------------------------------------------------
def test_length_statistics():
    texts_c = ["a b c", "one two", "x", "long answer with five tokens"]
    texts_r = ["a", "one two three", "", "short one"]
    lengths = {"chosen_chars": np.array([len(t) for t in texts_c], float),
               "rejected_chars": np.array([len(t) for t in texts_r], float),
               "chosen_tokens": np.array([len(t.split()) for t in texts_c], float),
               "rejected_tokens": np.array([len(t.split()) for t in texts_r], float)}
    margin = np.array([2.0, -1.0, 0.5, 3.0])
    out = stats.length_statistics(lengths, margin)
    assert out["chosen"]["tokens"] == {"mean": (3 + 2 + 1 + 5) / 4, "median": 2.5}
    assert out["rejected"]["chars"] == {"mean": (1 + 13 + 0 + 9) / 4, "median": 5.0}
    # token differences [2, -1, 1, 3] and margins [2, -1, 0.5, 3] have the same order: Spearman 1
    assert out["margin_vs_length_difference"]["tokens"]["spearman"] == pytest.approx(1.0)
    assert out["chosen_longer_fraction_tokens"] == 0.75
    # how often the chosen response is the longer: 3 of 4 by tokens, a sign test over the 4 that differ
    test = out["chosen_longer_test"]["tokens"]
    assert (test["positive"], test["negative"], test["zeros_discarded"]) == (3, 1, 0)
    assert test["pvalue"] == pytest.approx(sps.binomtest(3, 4).pvalue)  # = 0.625
    ref = pd.Series(margin).corr(pd.Series(lengths["chosen_chars"] - lengths["rejected_chars"]), method="spearman")
    assert out["margin_vs_length_difference"]["chars"]["spearman"] == pytest.approx(ref)
    # responses of one length, margins all positive: the note blamed the margins
    same = {k: np.full(4, 24.0) for k in lengths}
    assert stats.length_statistics(same, margin)["chosen_longer_test"]["chars"]["note"] == \
        "every length difference is zero: there is nothing to test"
    # equal lengths count as not longer (docs/analysis.md): 1 of 4 pairs longer, 2 equal, 1 shorter
    tied = {**lengths, "chosen_chars": np.array([5.0, 3, 3, 1]), "rejected_chars": np.array([4.0, 3, 3, 2])}
    assert stats.length_statistics(tied, margin)["chosen_longer_fraction_chars"] == 0.25


def test_pairrm_invariants_by_hand():
    # row 5: two identical candidates, which PairRM scores 0 and 0: the sign order holds (chosen ≥ 0 ≥ rejected)
    chosen = np.array([1.0, 0.5, -0.2, 0.3, 2.0, 0.0])
    rejected = np.array([-1.0, 0.1, -0.5, -0.3000001, 3.0, 0.0])
    out = stats.pairrm_invariants(chosen, rejected)
    assert out["sign_order_fails"] == 3  # rows 1 (rejected > 0), 2 (chosen < 0), 4 (rejected > 0)
    assert out["antisymmetry_holds"] == 3  # rows 0, 3 (within 1e-6) and 5
    assert out["inversions"] == 1 and out["sign_order_fails_fraction"] == 0.5


def test_agreement_statistics_by_hand():
    x, y = np.array([1.0, 2, 3, 4]), np.array([1.0, 4, 3, 6])  # y − x = [0, 2, 0, 2]
    out = stats.agreement_statistics(x, y, [0, 1, 2], resamples=20, seed=0)
    # means 2.5 and 3.5, population variances 1.25 and 3.25, covariance 1.75: 2·1.75 / (1.25 + 3.25 + 1²)
    assert out["lin_ccc"] == pytest.approx(7 / 11)
    assert out["pearson"] == pytest.approx(1.75 / math.sqrt(1.25 * 3.25))
    # Bland–Altman of y − x (y the candidate): mean 1, sample sd √(4/3)
    sd = math.sqrt(4 / 3)
    assert out["bland_altman"] == pytest.approx({"mean_difference": 1.0, "sd_difference": sd,
                                                 "loa_low": 1 - stats.Z_95 * sd, "loa_high": 1 + stats.Z_95 * sd})
    # a difference equal to the tolerance is within it
    assert out["max_abs_difference"] == 2.0 and out["within"] == {"0": 0.5, "1": 0.5, "2": 1.0}
    # a byte-identical rebuild: everything within a tolerance of 0
    assert stats.agreement_statistics(x, x.copy(), [0], resamples=20, seed=0)["within"] == {"0": 1.0}


def test_candidate_score_invariants_by_hand():
    # rows: [0.5, -0.5], [1.0, 0.2, -1.2], [0.3, -0.2], [] (no candidates)
    flat = np.array([0.5, -0.5, 1.0, 0.2, -1.2, 0.3, -0.2])
    out = stats.candidate_score_invariants(flat, np.array([2, 3, 2, 0]), np.array([0.5, 1.0, 0.3, 0.1]),
                                           np.array([-0.5, -1.2, -0.3, -0.1]))
    # row 3 has no candidate scores (SPPO's 7 rm_scores for 5 generate_i give none): not checked, not a failure
    assert out["rows"] == 3 and out["candidates_per_row"] == {"min": 2, "max": 3, "mean": 7 / 3}
    assert out["sum_to_zero_holds"] == 2  # rows 0 and 1; row 2 sums to 0.1
    assert out["two_candidate_rows"] == 2 and out["antisymmetry_holds_among_two_candidate_rows"] == 2
    assert out["chosen_is_best_and_rejected_is_worst"] == 2  # row 2's rejected (-0.3) is not its worst (-0.2)


def test_detect_scale():
    ratings = stats.detect_scale(np.array([7.5, 8.0, 10.0]), np.array([1.0, 6.5, 8.0]))
    assert ratings["kind"] == "rating" and ratings["distinct_values"] == 5  # 1, 6.5, 7.5, 8, 10
    assert "ratings, not PairRM logits" in ratings["sentence"]
    rng = np.random.default_rng(0)
    logits = stats.detect_scale(np.abs(rng.normal(size=50)), -np.abs(rng.normal(size=50)))
    assert logits["kind"] == "logit" and "logits" in logits["sentence"]
    assert stats.detect_scale(np.array([40.0, 90.0]), np.array([10.0, 50.0]))["kind"] == "unclear"  # 0-100 points
    # labels of 1 and 0 (or two values on the grid): no rating scale can be told from two values, and no tie is
    # "common" among them
    for chosen, rejected in ((np.ones(30), np.zeros(30)), (np.full(30, 5.0), np.r_[np.full(29, 5.0), 5.5])):
        assert stats.detect_scale(chosen, rejected)["kind"] == "unclear"
    # every score one value (on the rating grid, inside 1-10 too): constant, not ratings
    for value in (0.0, 5.0):
        constant = stats.detect_scale(np.full(60, value), np.full(60, value))
        assert constant["kind"] == "constant" and constant["distinct_values"] == 1
        assert constant["sentence"] == (f"All 120 scores are {value:g}: constant scores rank nothing (every pair is a "
                                        f"tie). Check the scorer and the data; the statistics below say nothing of a "
                                        f"preference.")
    # a classifier's or a judge's probabilities (every score in [0, 1], off the rating grid): they read as PairRM's
    # logits ("invariants expected to hold") though they are not log-odds
    probability = stats.detect_scale(rng.uniform(0.5, 1.0, 50), rng.uniform(0.0, 0.5, 50))
    assert probability["kind"] == "probability" and "probabilities" in probability["sentence"]
    assert "logits" not in probability["sentence"] and "do not apply" in probability["sentence"]


# --------------------------------------------------------------------------------------------
# what the helpers are given, as a notebook gives it: NaN, unsigned integers, lists, nothing
NAN_CHOSEN, NAN_REJECTED = np.array([1.0, np.nan, 2.0, 4.0]), np.array([0.0, 0.0, 1.0, 1.0])


@pytest.mark.parametrize("call", [
    lambda c, r: stats.summarize_scores(c, r, 200, 0), lambda c, r: stats.margin_sign(c - r),
    lambda c, r: stats.paired_tests(c - r), lambda c, r: stats.effect_sizes(c - r),
    lambda c, r: stats.detect_scale(c, r), lambda c, r: stats.pairrm_invariants(c, r)])
def test_a_nan_or_infinite_score_is_refused_naming_its_row_and_the_exclusion(call):
    # summarize_scores gave score_chosen mean 1.0, std 0.0, max 1.0; paired_t said "all margins are equal"; the sign
    # test counted the NaN as a zero
    for chosen in (NAN_CHOSEN, np.where(np.isnan(NAN_CHOSEN), np.inf, NAN_CHOSEN)):
        with pytest.raises(DataError, match=r"^repro\.analysis\.stats\.\w+: 1 of 4 rows have a NaN, infinite or "
                                            r"missing score \(rows 1 \(from 0\); (score_chosen|margin): 1\)\. "
                                            r".*exclude_nonfinite"):
            call(chosen, NAN_REJECTED)


def test_scores_are_read_as_float64_lists_and_unsigned_integers_too():
    # uint8 [5, 7] - [4, 8] wrapped to a margin of 255 (mean 128.0); a list was a raw TypeError
    out = stats.summarize_scores(np.array([5, 7], np.uint8), np.array([4, 8], np.uint8), 100, 0)
    assert out["margin"]["mean"] == 0.0 and out["margin"]["min"] == -1.0
    assert stats.summarize_scores([1.0, 2.0], [0.0, 1.0], 100, 0) == stats.summarize_scores(
        np.array([1.0, 2.0]), np.array([0.0, 1.0]), 100, 0)
    assert stats.margin_sign([1, 0, -2])["counts"] == {"positive": 1, "zero": 1, "negative": 1}


def test_no_scores_or_unpaired_scores_are_a_clear_error():
    # detect_scale raised a raw ValueError (min of an empty array), pairrm_invariants a ZeroDivisionError
    for call in (stats.detect_scale, stats.pairrm_invariants):
        with pytest.raises(DataError, match=r"^repro\.analysis\.stats\.\w+: score_chosen and score_rejected hold no "
                                            r"rows: give one score per row"):
            call(np.array([]), np.array([]))
    with pytest.raises(DataError, match=r"must be flat, one score per row, as many in each; got 3 and 2 values"):
        stats.summarize_scores([1.0, 2.0, 3.0], [0.0, 1.0], 100, 0)
    with pytest.raises(DataError, match=r"score_chosen must hold numbers"):
        stats.detect_scale(["high", "low"], [0.0, 1.0])


def test_clean_is_strict_json():
    out = stats.clean({"a": np.float64("nan"), "b": [np.int64(3), np.inf], "c": np.bool_(True), "d": "x"})
    assert out == {"a": None, "b": [3, None], "c": True, "d": "x"}
    assert type(out["b"][0]) is int


@pytest.mark.parametrize("call", [
    lambda c, r: stats.summarize_scores(c, r, 50, 0), lambda c, r: stats.margin_sign(c - r),
    lambda c, r: stats.paired_tests(c - r), lambda c, r: stats.effect_sizes(c - r),
    lambda c, r: stats.detect_scale(c, r), lambda c, r: stats.pairrm_invariants(c, r)])
def test_scores_02_analyze_refuses_as_too_large_are_refused_by_the_helpers_too(call):
    # effect_sizes([1e200, 1, 2]) gave cohens_dz 0.0, paired_t statistic 0.0 and p 1.0, summarize_scores a margin
    # std of None: 02_analyze refuses such scores (their squares overflow), the helpers said wrong numbers
    with pytest.raises(DataError, match=r"^repro\.analysis\.stats\.\w+: (score_chosen|margin) holds 1e\+200 at row 0 "
                                        r"\(from 0\), too large for the statistics: beyond ±1e\+70 .*Rescale the "
                                        r"scores: divide (score_chosen and score_rejected|margin) by one factor, "
                                        r"such as 1e\+200"):
        call(np.array([1e200, 1.0, 2.0]), np.zeros(3))
    assert stats.effect_sizes(np.array([1e70, 1.0, 2.0]))["cohens_dz"] == pytest.approx(0.5774, abs=1e-4)


@pytest.mark.parametrize("given, holds", [
    (["1", "-2"], "'1'"), ([True, False], "True"), (np.array([1 + 1j, 2.0]), r"\(1\+1j\)"),
    ([1.0, "n/a"], "'n/a'"), ([2.0, None, False], "False")])
def test_what_is_not_a_number_is_refused_not_parsed_or_counted(given, holds):
    # margin_sign(['1', '-2']) parsed the text, [True, False] counted as 1 and 0, a complex margin lost its imaginary
    # part (a ComplexWarning): all counted as scores
    with pytest.raises(DataError, match=r"^repro\.analysis\.stats\.margin_sign: margin must hold numbers, one score "
                                        rf"per row \(row \d \(from 0\) holds {holds}\); convert them first"):
        stats.margin_sign(given)
    with pytest.raises(DataError, match=r"NaN, infinite or missing score \(rows 1 \(from 0\); margin: 1\)"):
        stats.margin_sign([2.0, None, -1])  # a missing score is one, as NaN is
    assert stats.margin_sign(np.array([3, -1], np.int8))["counts"]["negative"] == 1


def test_decimal_scores_are_numbers_and_a_number_beyond_float64_is_told_to_rescale():
    # a decimal128 column (to_pandas gives Decimals) was refused "must hold numbers" after the non-number check came,
    # though 02_analyze reads it; an integer beyond float64 raised a bare OverflowError
    from decimal import Decimal

    assert stats.summarize_scores([Decimal("1.5"), Decimal("2"), Decimal("3.25")], [0.5, 2.5, 1.0], 50,
                                  0)["score_chosen"]["mean"] == pytest.approx(2.25)
    with pytest.raises(DataError, match=r"effect_sizes: margin holds a number too large for float64 .*rescale"):
        stats.effect_sizes([10 ** 400, 1, 2])


ROOT = Path(__file__).resolve().parents[1]
# where each text quotes how often a 95% percentile interval covers the mean at 3, 5 and 10 rows
EN_COVERAGE = r"about (\d+)% of the time at 3 rows,\s+(\d+)% at 5 and (\d+)% at 10"
COVERAGE_QUOTES = {
    "src/repro/card/templates/en.jinja": EN_COVERAGE, "src/repro/analysis/templates/report.jinja": EN_COVERAGE,
    "docs/analysis.md": EN_COVERAGE,
    "src/repro/card/templates/zh.jinja": r"3 行时它约 (\d+)% 的情况下覆盖均值，5 行时约 (\d+)%，10 行时约 (\d+)%",
}


def test_the_coverage_the_texts_quote_is_what_the_simulation_gives():
    # the card, 02_analyze and docs/analysis.md said 76%, 86% and 89% at 3, 5 and 10 rows (400 simulated datasets, as
    # stats.py's comment said; docs: 76% / 89%): 20,000 normal samples x 1,000 resamples give 74.7%, 83.9%, 89.9%
    saved = json.loads(max((ROOT / "benchmarks" / "results").glob("coverage-*.json")).read_text())
    assert (saved["datasets"], saved["resamples"], saved["level"]) == (20_000, 1_000, 0.95)
    expected = [str(round(100 * saved["coverage"][n])) for n in ("3", "5", "10")]
    for path, pattern in COVERAGE_QUOTES.items():
        quoted = re.findall(pattern, (ROOT / path).read_text())
        assert quoted and all(list(q) == expected for q in quoted), (path, quoted, expected)
    # and the docs give the simulation's settings
    docs = (ROOT / "docs" / "analysis.md").read_text()
    assert re.search(r"20,000 standard-normal\s+samples per size, 1,000 resamples each", docs)
