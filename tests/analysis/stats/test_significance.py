"""System comparison: published test values, item-level pairing, the rounding guard, corrections, effect sizes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from empeval.analysis.stats.significance import (
    adjust_pvalues,
    compare_pairs,
    friedman_test,
    item_means,
    paired_tests,
    system_means,
)


def _paired_ratings(scores_a, scores_b, *, criterion="empathy", a="drug1", b="drug2") -> pd.DataFrame:
    """One rating per item, items paired by context: the shape of a study with one rater per response."""
    rows = []
    for i, (x, y) in enumerate(zip(scores_a, scores_b, strict=True)):
        for system, score in ((a, x), (b, y)):
            rows.append({"item": f"{system}-{i}", "context": f"ctx-{i}", "system": system, "annotator": "r1",
                         "criterion": criterion, "score": float(score), "is_control": False})
    return pd.DataFrame(rows)


def _triples(pairs_of_triples, *, criterion="empathy") -> pd.DataFrame:
    rows = []
    for i, (triple_a, triple_b) in enumerate(pairs_of_triples):
        for system, triple in (("A", triple_a), ("B", triple_b)):
            for rater, score in enumerate(triple):
                rows.append({"item": f"{system}-{i}", "context": f"ctx-{i}", "system": system,
                             "annotator": f"r{rater}", "criterion": criterion, "score": score, "is_control": False})
    return pd.DataFrame(rows)


def test_paired_t_test_reproduces_students_sleep_data(sleep):
    result = paired_tests(*sleep)
    assert round(result["t"], 3) == -4.062
    assert round(result["p_t"], 5) == 0.00283
    assert result["df"] == 9


def test_sleep_data_through_the_ratings_table(sleep):
    row = compare_pairs(_paired_ratings(*sleep), n_boot=100).iloc[0]
    assert (row["system_a"], row["system_b"]) == ("drug1", "drug2")
    assert round(row["t"], 3) == -4.062 and round(row["p_t"], 5) == 0.00283
    assert row["mean_diff"] == pytest.approx(-1.58)


def test_wilcoxon_on_sleep_matches_r(sleep):
    # R: wilcox.test(extra ~ group, data = sleep, paired = TRUE) -> V = 0, p-value = 0.009091
    # (one zero difference dropped, ties, normal approximation with continuity correction).
    result = paired_tests(*sleep)
    assert result["w_plus"] == 0
    assert round(result["p_wilcoxon"], 6) == 0.009091
    assert result["n_nonzero"] == 9 and "tie-corrected" in result["wilcoxon_method"]


def test_floating_point_ties_between_item_means_are_ties():
    # (1,1,2) vs (1,1,1) and (1,1,3) vs (1,1,2) both differ by 1/3, but as float item means the two
    # differences are 0.33333333333333326 and 0.3333333333333335.
    ratings = _triples([((1, 1, 2), (1, 1, 1)), ((1, 1, 3), (1, 1, 2)), ((2, 3, 4), (1, 1, 1)),
                        ((5, 5, 5), (1, 1, 2)), ((4, 4, 5), (1, 2, 2)), ((3, 3, 3), (1, 1, 2))])
    means = item_means(ratings).pivot(index="context", columns="system", values="score")
    raw = (means["A"] - means["B"]).to_numpy()
    assert np.unique(raw).size == raw.size  # the trap: no tie without rounding
    unguarded = paired_tests(means["A"].to_numpy(), means["B"].to_numpy(), decimals=None)
    assert unguarded["wilcoxon_method"] == "exact"  # would wrongly use the tie-free exact distribution
    row = compare_pairs(ratings, n_boot=50).iloc[0]
    assert "tie-corrected" in row["wilcoxon_method"]
    expected = stats.wilcoxon(np.round(raw, 9), correction=True, method="approx").pvalue
    assert row["p_wilcoxon"] == pytest.approx(expected)


def test_exact_p_value_when_the_sample_allows():
    result = paired_tests(np.arange(1.0, 11.0) + 10, np.full(10, 10.0))
    assert result["wilcoxon_method"] == "exact"
    assert result["p_wilcoxon"] == pytest.approx(2 / 2**10)
    assert result["w_plus"] == 55 and result["rank_biserial"] == 1.0


def test_large_samples_use_the_normal_approximation():
    rng = np.random.default_rng(0)
    a = rng.normal(size=80)
    assert paired_tests(a + 0.3, a + rng.normal(scale=0.5, size=80))["wilcoxon_method"].startswith("normal")


def test_rank_biserial_of_a_small_example():
    # |d| ranks 1..4 for d = 1, 2, -3, 4: R+ = 7, R- = 3, r = (7 - 3) / 10.
    result = paired_tests(np.array([1.0, 2.0, -3.0, 4.0]), np.zeros(4))
    assert result["rank_biserial"] == pytest.approx(0.4)
    assert result["rb_ci_low"] <= 0.4 <= result["rb_ci_high"]


def test_d_z_interval_inverts_the_noncentral_t(sleep):
    result = paired_tests(*sleep, ci_level=0.95)
    n = 10
    t_obs = result["d_z"] * np.sqrt(n)
    assert result["d_z"] == pytest.approx(-1.58 / np.std(sleep[0] - sleep[1], ddof=1))
    assert stats.nct.cdf(t_obs, n - 1, result["dz_ci_low"] * np.sqrt(n)) == pytest.approx(0.975, abs=1e-6)
    assert stats.nct.cdf(t_obs, n - 1, result["dz_ci_high"] * np.sqrt(n)) == pytest.approx(0.025, abs=1e-6)


def test_all_zero_differences_leave_the_tests_undefined():
    result = paired_tests(np.full(5, 3.0), np.full(5, 3.0))
    assert np.isnan(result["p_wilcoxon"]) and np.isnan(result["t"]) and np.isnan(result["d_z"])
    assert "all differences are zero" in result["note"]


def test_holm_matches_statsmodels_on_a_fixed_vector():
    p = np.array([0.01, 0.04, 0.03, 0.005, 0.2, 0.04, 0.0001])
    np.testing.assert_allclose(adjust_pvalues(p), multipletests(p, method="holm")[1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(adjust_pvalues(p[:4]), [0.03, 0.06, 0.06, 0.02])


def test_undefined_p_values_stay_out_of_the_family():
    p = np.array([0.01, np.nan, 0.04])
    adjusted = adjust_pvalues(p)
    assert np.isnan(adjusted[1])
    np.testing.assert_allclose(adjusted[[0, 2]], multipletests([0.01, 0.04], method="holm")[1])


def test_other_corrections_come_from_statsmodels():
    p = np.array([0.01, 0.02, 0.03, 0.5])
    np.testing.assert_allclose(adjust_pvalues(p, method="fdr_bh"), multipletests(p, method="fdr_bh")[1])
    np.testing.assert_allclose(adjust_pvalues(p, method="bonferroni"), multipletests(p, method="bonferroni")[1])
    np.testing.assert_allclose(adjust_pvalues(p, method="none"), p)


def test_correction_family_is_declared(simulated_ratings):
    within = compare_pairs(simulated_ratings, n_boot=50)
    study = compare_pairs(simulated_ratings, family="study", n_boot=50)
    assert len(within) == 9  # 3 criteria x 3 pairs
    for _, part in within.groupby("criterion"):
        np.testing.assert_allclose(part["p_adj"], multipletests(part["p_wilcoxon"], method="holm")[1])
    np.testing.assert_allclose(study["p_adj"], multipletests(study["p_wilcoxon"], method="holm")[1])
    assert (study["p_adj"] >= within["p_adj"] - 1e-15).all()
    np.testing.assert_allclose(within["p_wilcoxon"], study["p_wilcoxon"])


def test_annotators_are_averaged_within_an_item_first():
    rows = [
        # system A, context 1: three ratings 1, 1, 1 -> item mean 1; context 2: one rating 5 -> item mean 5
        *({"item": "A1", "context": "c1", "system": "A", "annotator": f"r{i}", "score": 1} for i in range(3)),
        {"item": "A2", "context": "c2", "system": "A", "annotator": "r0", "score": 5},
    ]
    ratings = pd.DataFrame(rows).assign(criterion="empathy", is_control=False)
    means = system_means(ratings, n_boot=100)
    assert means.loc[0, "mean"] == 3.0  # (1 + 5) / 2, not (1 + 1 + 1 + 5) / 4
    assert means.loc[0, "n_items"] == 2 and means.loc[0, "n_ratings"] == 4


def test_system_means_carry_bootstrap_cis(simulated_ratings):
    means = system_means(simulated_ratings, n_boot=500)
    assert len(means) == 9
    assert (means["ci_low"] < means["mean"]).all() and (means["mean"] < means["ci_high"]).all()
    assert (means["n_items"] == 40).all()


def test_controls_are_never_compared(simulated_ratings):
    assert not compare_pairs(simulated_ratings, n_boot=20)[["system_a", "system_b"]].stack().str.startswith(
        "control").any()
    assert not system_means(simulated_ratings, n_boot=20)["system"].str.startswith("control").any()


def test_friedman_matches_scipy_on_the_context_blocks(simulated_ratings):
    result = friedman_test(simulated_ratings).set_index("criterion")
    means = item_means(simulated_ratings)
    wide = means.loc[means["criterion"] == "empathy"].pivot(index="context", columns="system", values="score")
    expected = stats.friedmanchisquare(*(wide[c] for c in wide.columns))
    assert result.loc["empathy", "statistic"] == pytest.approx(expected.statistic)
    assert result.loc["empathy", "p"] == pytest.approx(expected.pvalue)
    assert result.loc["empathy", "kendalls_w"] == pytest.approx(expected.statistic / (40 * 2))


def test_friedman_needs_three_systems(sleep):
    row = friedman_test(_paired_ratings(*sleep)).iloc[0]
    assert np.isnan(row["p"]) and "three or more systems" in row["note"]


def test_pairs_missing_a_context_are_dropped_from_that_pair(sleep):
    ratings = _paired_ratings(*sleep)
    ratings = ratings.loc[~((ratings["system"] == "drug2") & (ratings["context"] == "ctx-0"))]
    assert compare_pairs(ratings, n_boot=20).iloc[0]["n_pairs"] == 9
