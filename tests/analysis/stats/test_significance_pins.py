"""What analysis.stats.significance promises beyond the published values: the documented columns and notes, the options
reaching the tests they name, the edges (one or two contexts, zeros, huge t, a single pair), and the seeded
bootstraps equal to loops written out here."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from empeval.analysis.stats.bootstrap import resample_weights
from empeval.analysis.stats.significance import (
    adjust_by_family,
    adjust_pvalues,
    compare_pairs,
    friedman_test,
    item_means,
    paired_tests,
    system_means,
)

PAIR_COLUMNS = ["criterion", "system_a", "system_b", "n_pairs", "mean_a", "mean_b", "mean_diff", "n_nonzero",
                "w_plus", "w_min", "wilcoxon_method", "p_wilcoxon", "p_adj", "t", "df", "p_t", "p_t_adj",
                "rank_biserial", "rb_ci_low", "rb_ci_high", "d_z", "dz_ci_low", "dz_ci_high", "significant",
                "correction", "family", "note"]
PAIRED_TEST_KEYS = {"n_pairs", "n_nonzero", "mean_a", "mean_b", "mean_diff", "w_plus", "w_min", "p_wilcoxon",
                    "wilcoxon_method", "t", "df", "p_t", "d_z", "dz_ci_low", "dz_ci_high", "rank_biserial",
                    "rb_ci_low", "rb_ci_high", "note"}
NO_VARIANCE = "differences have no variance: t-test and d_z undefined"


def _ratings(scores: dict[str, list[float]], *, criterion: str = "empathy", raters: int = 1) -> pd.DataFrame:
    """One item per system and context (context i is the i-th score), rated ``raters`` times with that score."""
    rows = []
    for system, values in scores.items():
        for i, score in enumerate(values):
            for rater in range(raters):
                rows.append({"item": f"{system}-{i:03d}", "context": f"ctx-{i:03d}", "system": system,
                             "annotator": f"r{rater}", "criterion": criterion, "score": float(score),
                             "is_control": False})
    return pd.DataFrame(rows)


def _quietly(function, *args, **kwargs):
    """Call with every warning turned into an error: undefined results are NaN with a note, never a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return function(*args, **kwargs)


def _rank_biserial_by_loop(d: np.ndarray) -> float:
    nonzero = d[d != 0]
    if nonzero.size == 0:
        return np.nan
    ranks = stats.rankdata(np.abs(nonzero))
    plus, minus = ranks[nonzero > 0].sum(), ranks[nonzero < 0].sum()
    return (plus - minus) / (plus + minus)


def _rb_interval_by_loop(d: np.ndarray, *, n_boot: int, seed, level: float) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, d.size, size=(n_boot, d.size))
    samples = np.array([_rank_biserial_by_loop(d[row]) for row in draws])
    samples = samples[np.isfinite(samples)]
    return tuple(np.quantile(samples, [(1 - level) / 2, (1 + level) / 2]))


# --- paired_tests ---------------------------------------------------------------------------------------


def test_paired_tests_returns_the_documented_keys(sleep):
    assert set(paired_tests(*sleep, n_boot=50)) == PAIRED_TEST_KEYS


def test_pairs_of_different_length_or_shape_are_refused():
    message = re.escape("paired tests need two 1-d arrays of the same length")
    with pytest.raises(ValueError, match=f"^{message}$"):
        paired_tests([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match=f"^{message}$"):
        paired_tests([[1.0, 2.0]], [[1.0, 2.0]])


@pytest.mark.parametrize("a, b", [([1.0, np.nan, 3.0], [1.0, 2.0, 3.0]), ([1.0, 2.0, 3.0], [1.0, 2.0, np.nan]),
                                  ([1.0, None, 3.0], [1.0, 2.0, 3.0]), ([1.0, 2.0, 3.0], [None, 2.0, 3.0])])
def test_an_incomplete_pair_is_refused_on_either_side(a, b):
    with pytest.raises(ValueError, match=r"^paired tests need complete pairs \(no NaN\)$"):
        paired_tests(a, b)


def test_without_the_rounding_guard_the_differences_are_a_minus_b():
    result = paired_tests([3.0, 5.0, 4.0], [1.0, 1.0, 1.0], decimals=None, n_boot=20)
    assert result["mean_diff"] == pytest.approx(3.0)
    assert result["w_plus"] == 6.0


def test_all_zero_differences_give_nan_and_both_reasons_quietly():
    result = _quietly(paired_tests, np.full(5, 3.0), np.full(5, 3.0), n_boot=50)
    assert result["wilcoxon_method"] == "undefined"
    for key in ("p_wilcoxon", "t", "df", "p_t", "d_z", "dz_ci_low", "dz_ci_high", "rank_biserial", "rb_ci_low",
                "rb_ci_high"):
        assert np.isnan(result[key]), key
    assert result["note"] == f"all differences are zero: Wilcoxon undefined; {NO_VARIANCE}"


def test_constant_non_zero_differences_leave_the_t_test_undefined():
    result = _quietly(paired_tests, np.full(6, 4.0), np.full(6, 3.0), n_boot=50)
    assert np.isnan(result["t"]) and np.isnan(result["d_z"])
    assert result["note"] == NO_VARIANCE
    assert result["rank_biserial"] == 1.0


def test_small_but_varying_differences_are_tested():
    # sd(d) well below one: a t-test is defined whatever the scale of the differences.
    result = paired_tests(np.array([0.1, 0.3, 0.2, 0.25, 0.15]), np.zeros(5), n_boot=50)
    expected = stats.ttest_1samp([0.1, 0.3, 0.2, 0.25, 0.15], 0.0)
    assert result["t"] == pytest.approx(expected.statistic) and result["df"] == 4
    assert result["note"] == ""


def test_a_single_pair_gives_nan_for_everything_that_needs_variation_quietly():
    result = _quietly(paired_tests, np.array([2.0]), np.array([1.0]), n_boot=50)
    assert np.isnan(result["t"]) and np.isnan(result["rb_ci_low"]) and np.isnan(result["rb_ci_high"])
    assert result["rank_biserial"] == 1.0 and result["note"] == NO_VARIANCE


def test_no_pairs_at_all_give_nan_quietly():
    result = _quietly(paired_tests, np.array([]), np.array([]), n_boot=50)
    assert np.isnan(result["mean_a"]) and np.isnan(result["mean_diff"]) and result["n_pairs"] == 0


def test_two_pairs_are_enough_for_the_t_test_and_the_bootstrap():
    result = paired_tests(np.array([3.0, 5.0]), np.array([1.0, 2.0]), n_boot=50)
    assert result["df"] == 1 and np.isfinite(result["t"])
    assert np.isfinite(result["rb_ci_low"]) and np.isfinite(result["rb_ci_high"])


def test_zero_differences_are_dropped_before_ranking():
    # d = 0, 0, 0.5, 1.5, -2.5: the three non-zero |d| rank 1, 2, 3, so R+ = 3, R- = 3 (as R's wilcox.test's V).
    d = np.array([0.0, 0.0, 0.5, 1.5, -2.5])
    result = paired_tests(d, np.zeros(5), n_boot=50)
    assert result["w_plus"] == 3.0 and result["n_nonzero"] == 3
    assert result["rank_biserial"] == pytest.approx(0.0)


def test_zero_method_wilcox_drops_zeros_and_uses_the_exact_distribution():
    d = np.array([0.0, 1.0, 2.0, 3.0, 4.0, -5.0, 6.0])
    result = paired_tests(d, np.zeros(7), n_boot=50)
    assert result["wilcoxon_method"] == "exact"
    assert result["p_wilcoxon"] == pytest.approx(stats.wilcoxon(d[d != 0], method="exact").pvalue)


def test_zero_method_pratt_ranks_zeros_with_the_normal_approximation():
    d = np.array([0.0, 1.0, 2.0, 3.0, 4.0, -5.0, 6.0])
    result = paired_tests(d, np.zeros(7), zero_method="pratt", n_boot=50)
    assert result["wilcoxon_method"] == "normal approx., continuity-corrected"
    expected = stats.wilcoxon(d, zero_method="pratt", correction=True, method="approx").pvalue
    assert result["p_wilcoxon"] == pytest.approx(expected)
    # Without zeros, Pratt and Wilcoxon agree and the exact distribution applies.
    assert paired_tests(d[1:], np.zeros(6), zero_method="pratt", n_boot=50)["wilcoxon_method"] == "exact"


def test_the_exact_distribution_is_used_up_to_fifty_non_zero_differences_by_default():
    fifty = np.arange(1.0, 51.0) * np.where(np.arange(50) % 3 == 0, -1, 1)
    assert paired_tests(fifty, np.zeros(50), n_boot=20)["wilcoxon_method"] == "exact"
    fifty_one = np.append(fifty, 51.0)
    result = paired_tests(fifty_one, np.zeros(51), n_boot=20)
    assert result["wilcoxon_method"] == "normal approx., continuity-corrected"
    assert result["p_wilcoxon"] == pytest.approx(stats.wilcoxon(fifty_one, correction=True, method="approx").pvalue)


def test_exact_max_n_extends_the_exact_distribution():
    sixty = np.arange(1.0, 61.0) * np.where(np.arange(60) % 4 == 0, -1, 1)
    result = paired_tests(sixty, np.zeros(60), exact_max_n=60, n_boot=20)
    assert result["wilcoxon_method"] == "exact"
    assert result["p_wilcoxon"] == pytest.approx(stats.wilcoxon(sixty, method="exact").pvalue)


def test_the_method_names_the_corrections_applied():
    ties = np.array([1.0, 1.0, 2.0, -3.0, 4.0, 5.0, 2.0])
    assert paired_tests(ties, np.zeros(7), continuity=False, n_boot=20)["wilcoxon_method"] == \
        "normal approx., tie-corrected"
    result = paired_tests(ties, np.zeros(7), n_boot=20)
    assert result["wilcoxon_method"] == "normal approx., tie-corrected, continuity-corrected"
    assert result["p_wilcoxon"] == pytest.approx(stats.wilcoxon(ties, correction=True, method="approx").pvalue)
    uncorrected = paired_tests(ties, np.zeros(7), continuity=False, n_boot=20)["p_wilcoxon"]
    assert uncorrected == pytest.approx(stats.wilcoxon(ties, correction=False, method="approx").pvalue)


def test_small_tied_samples_emit_no_warning():
    _quietly(paired_tests, np.array([1.0, 1.0, -2.0, 3.0]), np.zeros(4), n_boot=50)


def test_the_rank_biserial_interval_is_a_percentile_bootstrap_over_pairs_with_the_defaults():
    # Defaults: 2000 resamples from numpy's default_rng(0), 95%.
    d = np.array([0.0, 0.0, 1.0, -0.5, 2.0, 0.5, 3.0, -1.0, 0.0, 1.5, 2.5, -2.0])
    result = paired_tests(d, np.zeros(d.size))
    low, high = _rb_interval_by_loop(d, n_boot=2000, seed=0, level=0.95)
    assert (result["rb_ci_low"], result["rb_ci_high"]) == pytest.approx((low, high), abs=1e-12)


def test_the_rank_biserial_interval_follows_n_boot_seed_and_level():
    d = np.array([0.0, 1.0, -0.5, 2.0, 0.5, 3.0, -1.0, 0.0, 1.5, 0.75])
    result = paired_tests(d, np.zeros(d.size), n_boot=300, seed=5, ci_level=0.8)
    low, high = _rb_interval_by_loop(d, n_boot=300, seed=5, level=0.8)
    assert (result["rb_ci_low"], result["rb_ci_high"]) == pytest.approx((low, high), abs=1e-12)


def test_d_z_interval_falls_back_to_the_normal_approximation_for_a_huge_t():
    # |t| near 1e7: the noncentral t routines give up; the large-sample interval d_z +- z sqrt(1/n + d_z^2 / 2n)
    # (Hedges & Olkin 1985) is used instead.
    d = 1 + np.array([1e-7, -1e-7, 2e-7, -2e-7, 0.0, 3e-7, -3e-7, 1e-7, -1e-7, 0.5e-7])
    for sign in (1, -1):
        result = _quietly(paired_tests, sign * d, np.zeros(10), n_boot=20, ci_level=0.9)
        d_z, n = result["d_z"], 10
        assert abs(result["t"]) > 1e6
        se = np.sqrt(1 / n + d_z**2 / (2 * n))
        z = stats.norm.ppf(0.95)
        assert result["dz_ci_low"] == pytest.approx(d_z - z * se, rel=1e-12)
        assert result["dz_ci_high"] == pytest.approx(d_z + z * se, rel=1e-12)


def test_d_z_interval_falls_back_whenever_the_noncentral_t_cdf_is_undefined(sleep, monkeypatch):
    # The same fallback at an ordinary t (Student's sleep data), where the 1/n term of the standard error shows.
    monkeypatch.setattr(stats.nct, "cdf", lambda *args, **kwargs: np.nan)
    result = _quietly(paired_tests, *sleep, n_boot=20)
    d_z, n = result["d_z"], 10
    se = np.sqrt(1 / n + d_z**2 / (2 * n))
    z = stats.norm.ppf(0.975)
    assert (result["dz_ci_low"], result["dz_ci_high"]) == pytest.approx((d_z - z * se, d_z + z * se), rel=1e-12)


def test_d_z_interval_for_a_large_but_tractable_t_still_inverts_the_noncentral_t():
    d = np.array([5.1, 4.9, 5.2, 4.8, 5.0, 5.05, 4.95, 5.15])
    result = _quietly(paired_tests, d, np.zeros(8), n_boot=20)
    t_obs, n = result["t"], 8
    assert stats.nct.cdf(t_obs, n - 1, result["dz_ci_low"] * np.sqrt(n)) == pytest.approx(0.975, abs=1e-6)
    assert stats.nct.cdf(t_obs, n - 1, result["dz_ci_high"] * np.sqrt(n)) == pytest.approx(0.025, abs=1e-6)


# --- compare_pairs --------------------------------------------------------------------------------------


def test_compare_pairs_returns_the_documented_columns(sleep):
    table = compare_pairs(_ratings({"a": sleep[0], "b": sleep[1]}), n_boot=50)
    assert list(table.columns) == PAIR_COLUMNS
    assert table.loc[0, "correction"] == "holm" and table.loc[0, "family"] == "criterion"
    assert table.loc[0, "note"] == ""


def test_no_pair_to_compare_gives_an_empty_table_with_the_documented_columns(sleep):
    table = compare_pairs(_ratings({"only": sleep[0]}), n_boot=50)
    assert table.empty and list(table.columns) == PAIR_COLUMNS


def test_a_pair_sharing_one_context_is_not_tested_and_says_why():
    ratings = _ratings({"a": [4, 3, 5], "b": [2, 2, 2]})
    ratings = ratings.loc[~((ratings["system"] == "b") & (ratings["context"] != "ctx-000"))]
    row = compare_pairs(ratings, n_boot=50).iloc[0]
    assert row["n_pairs"] == 1
    assert np.isnan(row["p_wilcoxon"]) and np.isnan(row["p_t"]) and np.isnan(row["p_adj"])
    assert np.isnan(row["p_t_adj"]) and not row["significant"]
    assert row["note"] == "fewer than two contexts rated for both systems"


def test_a_pair_sharing_two_contexts_is_tested():
    row = compare_pairs(_ratings({"a": [4, 5], "b": [2, 1]}), n_boot=50).iloc[0]
    assert row["n_pairs"] == 2 and row["df"] == 1 and np.isfinite(row["p_t"]) and row["note"] == ""


def _same_as_paired_tests(row: pd.Series, expected: dict) -> None:
    for key, value in expected.items():
        if isinstance(value, str):
            assert row[key] == value, key
        else:
            assert row[key] == pytest.approx(value, nan_ok=True), key


def test_compare_pairs_hands_every_option_to_the_paired_tests():
    rng = np.random.default_rng(8)
    scores_a = np.round(rng.uniform(1, 5, size=12), 1)
    scores_b = np.round(scores_a - rng.uniform(-1, 2, size=12), 1)
    scores_b[:3] = np.round(scores_a[:3] + 0.3, 1)  # differences of 0.3: zero once rounded to whole points
    options = dict(decimals=0, zero_method="pratt", exact_max_n=5, continuity=False, n_boot=300, ci_level=0.8)
    row = compare_pairs(_ratings({"a": scores_a, "b": scores_b}), seed=3, **options).iloc[0]
    _same_as_paired_tests(row, paired_tests(scores_a, scores_b, seed=np.random.default_rng(3), **options))
    assert row["n_nonzero"] < 12


def test_compare_pairs_hands_n_boot_and_the_level_to_the_rank_biserial_interval():
    rng = np.random.default_rng(9)
    scores_b = rng.uniform(1, 5, size=15)
    scores_a = scores_b + rng.normal(0.3, 1.0, size=15)
    row = compare_pairs(_ratings({"a": scores_a, "b": scores_b}), n_boot=300, ci_level=0.9, seed=3).iloc[0]
    expected = paired_tests(scores_a, scores_b, n_boot=300, ci_level=0.9, seed=np.random.default_rng(3))
    assert (row["rb_ci_low"], row["rb_ci_high"]) == pytest.approx((expected["rb_ci_low"], expected["rb_ci_high"]))


def test_compare_pairs_drops_zero_differences_by_default_and_keeps_the_exact_distribution():
    row = compare_pairs(_ratings({"a": [3, 4, 5, 2, 4, 1, 5], "b": [3, 3, 2, 6, 2, 6, -1]}), n_boot=50).iloc[0]
    assert row["wilcoxon_method"] == "exact" and row["n_nonzero"] == 6


def test_compare_pairs_hands_exact_max_n_to_the_paired_tests():
    scores_b = np.zeros(10)
    scores_a = np.arange(1.0, 11.0) * np.where(np.arange(10) % 3 == 0, -1, 1)
    row = compare_pairs(_ratings({"a": scores_a, "b": scores_b}), exact_max_n=5, n_boot=50).iloc[0]
    assert row["wilcoxon_method"] == "normal approx., continuity-corrected"


def test_compare_pairs_defaults_are_those_of_the_paired_tests():
    # 52 contexts: one zero difference and 51 distinct others (over the default exact_max_n of 50), fractional
    # means so that every bootstrap resample counts.
    rng = np.random.default_rng(4)
    scores_b = np.round(rng.uniform(1, 5, size=52), 3)
    scores_a = scores_b + np.append(0.0, rng.permutation(np.linspace(-1.5, 2.5, 51)))
    row = compare_pairs(_ratings({"a": scores_a, "b": scores_b})).iloc[0]
    _same_as_paired_tests(row, paired_tests(scores_a, scores_b, seed=np.random.default_rng(0)))
    assert row["wilcoxon_method"] == "normal approx., continuity-corrected"
    assert row["n_nonzero"] == 51


def test_compare_pairs_is_reproducible_from_its_seed(simulated_ratings):
    first = compare_pairs(simulated_ratings, criteria=["empathy"], n_boot=100)
    again = compare_pairs(simulated_ratings, criteria=["empathy"], n_boot=100)
    pd.testing.assert_frame_equal(first, again)
    other = compare_pairs(simulated_ratings, criteria=["empathy"], n_boot=100, seed=1)
    assert not np.allclose(first["rb_ci_low"], other["rb_ci_low"])


def test_compare_pairs_keeps_to_the_criteria_asked_for(simulated_ratings):
    table = compare_pairs(simulated_ratings, criteria=["fluency"], n_boot=20)
    assert set(table["criterion"]) == {"fluency"}


def test_significance_is_p_adj_strictly_below_alpha_of_five_percent_by_default(simulated_ratings):
    table = compare_pairs(simulated_ratings, n_boot=20)
    assert (table["significant"] == (table["p_adj"] < 0.05)).all()
    assert not table["significant"].all() and table["significant"].any()
    at_the_edge = table["p_adj"].iloc[0]
    strict = compare_pairs(simulated_ratings, n_boot=20, alpha=at_the_edge)
    assert not strict["significant"].iloc[0]


def test_study_family_corrects_t_test_p_values_over_the_study_too(simulated_ratings):
    study = compare_pairs(simulated_ratings, family="study", correction="bonferroni", n_boot=20)
    np.testing.assert_allclose(study["p_t_adj"], multipletests(study["p_t"], method="bonferroni")[1])
    np.testing.assert_allclose(study["p_adj"], multipletests(study["p_wilcoxon"], method="bonferroni")[1])
    assert (study["correction"] == "bonferroni").all() and (study["family"] == "study").all()
    within = compare_pairs(simulated_ratings, correction="bonferroni", n_boot=20)
    for _, part in within.groupby("criterion"):
        np.testing.assert_allclose(part["p_t_adj"], multipletests(part["p_t"], method="bonferroni")[1])


def test_an_unknown_family_is_refused(sleep):
    with pytest.raises(ValueError, match=r"^family must be one of \('criterion', 'study'\), got 'paper'$"):
        compare_pairs(_ratings({"a": sleep[0], "b": sleep[1]}), family="paper")


# --- p-value adjustment ---------------------------------------------------------------------------------


def test_holm_caps_adjusted_p_values_at_one():
    np.testing.assert_allclose(adjust_pvalues([0.6, 0.7, 0.9]), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(adjust_pvalues([0.6, 0.7, 0.9]), multipletests([0.6, 0.7, 0.9], method="holm")[1])


def test_missing_p_values_given_as_none_count_as_undefined():
    adjusted = adjust_pvalues([0.01, None, 0.04])
    assert np.isnan(adjusted[1])
    np.testing.assert_allclose(adjusted[[0, 2]], [0.02, 0.04])


def test_adjust_by_family_uses_holm_by_default_and_the_method_asked_for():
    p = pd.Series([0.01, 0.04, 0.03, 0.2, 0.02])
    families = pd.Series(["empathy", "empathy", "fluency", "fluency", "empathy"])
    np.testing.assert_allclose(adjust_by_family(p, families), [0.03, 0.04, 0.06, 0.2, 0.04])
    np.testing.assert_allclose(adjust_by_family(p, families, method="bonferroni"), [0.03, 0.12, 0.06, 0.4, 0.06])


# --- item and system means ------------------------------------------------------------------------------


def test_item_means_are_sorted_whatever_the_order_of_the_ratings(simulated_ratings):
    shuffled = simulated_ratings.sample(frac=1.0, random_state=0)
    means = item_means(shuffled)
    keys = means[["criterion", "system", "context", "item"]]
    assert keys.equals(keys.sort_values(["criterion", "system", "context", "item"]))
    pd.testing.assert_frame_equal(means, item_means(simulated_ratings))


def test_item_means_of_categorical_columns_have_no_empty_combinations():
    ratings = _ratings({"a": [4, 3], "b": [2, 5]}, raters=2)
    for column in ("criterion", "system", "context", "item"):
        ratings[column] = ratings[column].astype("category")
    means = item_means(ratings)
    assert len(means) == 4 and (means["n_ratings"] == 2).all()


def test_item_means_keep_controls_only_when_asked():
    ratings = _ratings({"a": [4, 3], "control-generic": [1, 1]})
    ratings["is_control"] = ratings["system"].str.startswith("control")
    assert set(item_means(ratings)["system"]) == {"a"}
    assert set(item_means(ratings, include_controls=True)["system"]) == {"a", "control-generic"}


@pytest.mark.parametrize("function", [item_means, system_means])
def test_a_missing_column_is_named_with_the_function_that_needs_it(function):
    with pytest.raises(ValueError, match=rf"^{function.__name__} needs column\(s\) 'annotator'|^{function.__name__} "
                                         r"needs column\(s\) 'is_control'"):
        function(pd.DataFrame({"item": [], "context": [], "system": [], "criterion": [], "score": []}))


def test_system_means_count_the_annotators_of_that_criterion_and_system_only():
    ratings = pd.concat([
        _ratings({"a": [4, 3], "b": [2, 2]}, raters=2),                     # r0, r1 rate a and b on empathy
        _ratings({"a": [5, 5]}, criterion="fluency", raters=3),            # r0, r1, r2 rate a on fluency
    ]).reset_index(drop=True)
    controls = _ratings({"a": [1]}, raters=1).assign(annotator="careless", is_control=True,
                                                     item="ctl-a-0", system="a")
    ratings = pd.concat([ratings, controls]).reset_index(drop=True)
    means = system_means(ratings, n_boot=50).set_index(["criterion", "system"])
    assert means.loc[("empathy", "a"), "n_annotators"] == 2
    assert means.loc[("empathy", "b"), "n_annotators"] == 2
    assert means.loc[("fluency", "a"), "n_annotators"] == 3
    assert list(means.reset_index().columns) == ["criterion", "system", "mean", "ci_low", "ci_high", "sd_items",
                                                 "mean_ratings", "sd_ratings", "n_items", "n_ratings",
                                                 "n_annotators"]


def test_system_means_keep_to_the_criteria_asked_for(simulated_ratings):
    assert set(system_means(simulated_ratings, criteria=["relevance"], n_boot=20)["criterion"]) == {"relevance"}


def test_the_sd_of_item_means_uses_n_minus_one_and_is_nan_for_a_single_item():
    means = _quietly(system_means, _ratings({"a": [1, 2, 4], "b": [3]}), n_boot=20).set_index("system")
    assert means.loc["a", "sd_items"] == pytest.approx(np.std([1, 2, 4], ddof=1))
    assert np.isnan(means.loc["b", "sd_items"])
    two = system_means(_ratings({"a": [1, 3]}), n_boot=20).iloc[0]
    assert two["sd_items"] == pytest.approx(np.sqrt(2.0))


def test_system_mean_intervals_are_a_percentile_bootstrap_over_items_with_the_defaults():
    scores = list(np.round(np.random.default_rng(6).uniform(1, 5, size=25), 3))  # every resample counts
    row = system_means(_ratings({"a": scores})).iloc[0]
    weights = resample_weights(len(scores), n_boot=2000, seed=0)
    boot = [np.repeat(np.array(scores, float), w.astype(int)).mean() for w in weights]
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(tuple(np.quantile(boot, [0.025, 0.975])), abs=1e-12)
    narrow = system_means(_ratings({"a": scores}), n_boot=500, seed=4, ci_level=0.5).iloc[0]
    boot = [np.repeat(np.array(scores, float), w.astype(int)).mean()
            for w in resample_weights(len(scores), n_boot=500, seed=4)]
    assert (narrow["ci_low"], narrow["ci_high"]) == pytest.approx(tuple(np.quantile(boot, [0.25, 0.75])), abs=1e-12)


# --- Friedman -------------------------------------------------------------------------------------------


def _three_systems(a, b, c, **kwargs) -> pd.DataFrame:
    return _ratings({"a": a, "b": b, "c": c}, **kwargs)


def test_friedman_returns_the_documented_columns_and_no_note_when_defined():
    table = friedman_test(_three_systems([4, 5, 3, 4], [2, 3, 3, 1], [1, 2, 2, 3]))
    assert list(table.columns) == ["criterion", "n_blocks", "n_systems", "statistic", "p", "kendalls_w", "note"]
    row = table.iloc[0]
    assert (row["n_blocks"], row["n_systems"], row["note"]) == (4, 3, "")


def test_friedman_needs_three_systems_and_says_so(sleep):
    row = friedman_test(_ratings({"a": sleep[0], "b": sleep[1]})).iloc[0]
    assert row["note"] == "Friedman needs three or more systems; see the pairwise tests"
    assert np.isnan(row["statistic"]) and np.isnan(row["kendalls_w"])


def test_friedman_needs_two_contexts_and_says_so():
    row = friedman_test(_three_systems([4], [2], [1])).iloc[0]
    assert row["note"] == "fewer than two contexts rated for every system"
    assert np.isnan(row["p"]) and row["n_blocks"] == 1


def test_friedman_runs_on_two_contexts():
    row = friedman_test(_three_systems([4, 5], [2, 3], [1, 1])).iloc[0]
    expected = stats.friedmanchisquare([4, 5], [2, 3], [1, 1])
    assert row["statistic"] == pytest.approx(expected.statistic) and row["note"] == ""
    assert row["kendalls_w"] == pytest.approx(expected.statistic / (2 * 2))


def test_friedman_is_undefined_when_every_context_gives_all_systems_the_same_mean():
    row = _quietly(friedman_test, _three_systems([3, 4, 2], [3, 4, 2], [3, 4, 2])).iloc[0]
    assert np.isnan(row["statistic"]) and np.isnan(row["p"])
    assert row["note"] == "undefined: every context gives all systems the same mean"


def test_friedman_rounds_item_means_as_asked_before_ranking():
    ratings = pd.concat([_three_systems([4, 5, 3, 4, 2], [4, 3, 3, 1, 2], [1, 2, 5, 3, 2], raters=1),
                         _three_systems([5, 4, 4, 3, 3], [3, 3, 2, 2, 4], [2, 2, 4, 4, 1], raters=1)
                         .assign(annotator="r1")]).reset_index(drop=True)
    wide = item_means(ratings).pivot(index="context", columns="system", values="score")
    raw = friedman_test(ratings, decimals=None).iloc[0]
    assert raw["statistic"] == pytest.approx(stats.friedmanchisquare(*(wide[c] for c in wide)).statistic)
    rounded = friedman_test(ratings, decimals=0).iloc[0]
    expected = stats.friedmanchisquare(*(wide[c].round(0) for c in wide)).statistic
    assert rounded["statistic"] == pytest.approx(expected)
    assert rounded["statistic"] != pytest.approx(raw["statistic"])


def test_friedman_keeps_to_the_criteria_asked_for(simulated_ratings):
    assert friedman_test(simulated_ratings, criteria=["fluency"])["criterion"].tolist() == ["fluency"]
