"""PPI++ on per-context differences with a judge of differences (analysis.stats.ppi.differences): the estimate is
PPI++'s formula with its power-tuned lambda, lambda = 0 is the human-only difference, pairs are read in either
order, failures are refused or dropped and counted, and the fast array analysis is the DataFrame function's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.simulate.judges import SimulatedDifferenceJudge, analyse_difference_arrays, simulate_judged_study
from empeval.analysis.stats.ppi.differences import (
    difference_correlations,
    item_score_differences,
    oriented_pair_scores,
    ppi_difference_interval,
    ppi_pair_differences,
)


def test_the_estimate_is_the_ppi_formula_with_the_tuned_lambda():
    rng = np.random.default_rng(5)
    latent = rng.normal(0.2, 0.7, 300)
    judge = 0.4 * (latent + rng.normal(0, 0.4, 300))
    labels = latent[:50] + rng.normal(0, 0.5, 50)
    result = ppi_difference_interval(labels, judge[:50], judge[50:])
    y, g, g_unrated = labels, judge[:50], judge[50:]
    lam = np.mean((y - y.mean()) * (g - g.mean())) / ((1 + 50 / 250) * np.var(judge, ddof=1))
    assert lam > 1  # a compressed judge is stretched back: lambda is not clipped at 1
    assert result["lam"] == pytest.approx(lam)
    assert result["ppi_diff"] == pytest.approx(lam * g_unrated.mean() + (y - lam * g).mean())
    se = np.sqrt(lam**2 * g_unrated.var(ddof=1) / 250 + (y - lam * g).var(ddof=1) / 50)
    assert result["ppi_ci_high"] - result["ppi_ci_low"] == pytest.approx(2 * 1.959964 * se, rel=1e-5)
    assert result["width_ratio"] < 0.9 and result["effective_n_human"] > 50 / 0.9**2


def test_a_judge_against_the_humans_gets_lambda_zero_and_the_human_only_interval():
    rng = np.random.default_rng(1)
    labels = rng.normal(0.3, 1.0, 40)
    result = ppi_difference_interval(labels, -labels + rng.normal(0, 0.1, 40), rng.normal(0, 1, 100))
    assert result["lam"] == 0.0
    assert (result["ppi_ci_low"], result["ppi_ci_high"]) == pytest.approx((result["human_ci_low"],
                                                                          result["human_ci_high"]))
    assert result["width_ratio"] == pytest.approx(1.0)


@pytest.mark.parametrize(("labels", "rated", "unrated", "message"), [
    ([1.0], [1.0], [0.0], "at least 2 contexts"),
    ([1.0, 2.0], [1.0, 2.0], [], "1 context only the judge"),
    ([1.0, np.nan], [1.0, 2.0], [0.0], "finite"),
    ([1.0, 2.0], [1.0], [0.0], "same length"),
])
def test_bad_input_is_a_clear_error(labels, rated, unrated, message):
    with pytest.raises(ValueError, match=message):
        ppi_difference_interval(labels, rated, unrated)


def test_two_contexts_rated_for_both_systems_are_enough():
    result = ppi_difference_interval([1.0, 0.0], [0.5, 0.0], [0.2, -0.1, 0.4])
    assert result["n_human"] == 2 and np.isfinite(result["ppi_ci_low"])


def test_a_pair_named_the_other_way_round_is_negated():
    study = simulate_judged_study(n_contexts=120, human_share=0.25, seed=2,
                                  difference_judge=SimulatedDifferenceJudge("pairs", correlation=0.7))
    swapped = study.pair_scores.rename(columns={"system_a": "system_b", "system_b": "system_a"})
    swapped["judge_diff"] = -swapped["judge_diff"]
    pd.testing.assert_frame_equal(ppi_pair_differences(study.human_ratings, swapped),
                                  ppi_pair_differences(study.human_ratings, study.pair_scores))
    assert (oriented_pair_scores(swapped)["system_a"] < oriented_pair_scores(swapped)["system_b"]).all()


def test_failures_are_refused_or_dropped_and_counted():
    study = simulate_judged_study(n_contexts=120, human_share=0.25, seed=2,
                                  difference_judge=SimulatedDifferenceJudge("pairs", correlation=0.7))
    scores = study.pair_scores.copy()
    scores.loc[[0, 3, 4], "judge_diff"] = np.nan  # context 0: pairs 0; context 1: pairs 0 and 1
    with pytest.raises(ValueError, match="no difference for 3 compared context"):
        ppi_pair_differences(study.human_ratings, scores)
    pairs = ppi_pair_differences(study.human_ratings, scores, allow_missing=True)
    assert pairs["n_dropped_missing"].tolist() == [2, 1, 0]
    assert (pairs["n_human"] + pairs["n_judge_only"]).tolist() == [118, 119, 120]


def test_holm_over_the_pairs_of_a_criterion():
    study = simulate_judged_study(n_contexts=200, human_share=0.25, seed=7,
                                  difference_judge=SimulatedDifferenceJudge("pairs", correlation=0.7))
    pairs = ppi_pair_differences(study.human_ratings, study.pair_scores)
    order = np.argsort(pairs["p_ppi"].to_numpy())
    p = pairs["p_ppi"].to_numpy()[order]
    expected = np.minimum(1, np.maximum.accumulate(p * np.array([3, 2, 1])))
    np.testing.assert_allclose(pairs["p_adj"].to_numpy()[order], expected)
    assert (pairs["significant"] == (pairs["p_adj"] < 0.05)).all()


@pytest.mark.parametrize("seed", [3, 11])
def test_the_array_analysis_is_the_dataframe_functions_analysis(seed):
    study = simulate_judged_study(n_contexts=150, human_share=0.25, seed=seed,
                                  difference_judge=SimulatedDifferenceJudge("pairs", correlation=0.6, scale=0.5))
    got = pd.DataFrame(analyse_difference_arrays(study.arrays))
    expected = ppi_pair_differences(study.human_ratings, study.pair_scores)
    columns = ["ppi_diff", "ppi_ci_low", "ppi_ci_high", "human_ci_low", "human_ci_high", "lam", "rater_variance"]
    assert got[["system_a", "system_b"]].to_numpy().tolist() == expected[["system_a", "system_b"]].to_numpy().tolist()
    np.testing.assert_allclose(got[columns].to_numpy(), expected[columns].to_numpy(dtype=float), rtol=0, atol=1e-12)
    if seed == 11:
        assert (expected["rater_variance"] > 0).any()  # the shared raters' term is there, not zero by accident


def test_item_scores_differenced_are_what_ppi_paired_differences_uses():
    from empeval.analysis.stats.ppi.estimates import ppi_paired_differences

    study = simulate_judged_study(n_contexts=150, human_share=0.25, seed=4)
    ours = ppi_pair_differences(study.human_ratings, item_score_differences(study.judge_scores))
    theirs = ppi_paired_differences(study.human_ratings, study.judge_scores)
    np.testing.assert_allclose(ours["ppi_diff"], theirs["ppi_diff"], atol=1e-9)  # lambda below 1 here: one estimate
    assert (theirs["lam"] < 1).all()


def test_difference_correlations_per_pair_and_over_pairs():
    study = simulate_judged_study(n_contexts=400, human_share=0.5, seed=6,
                                  difference_judge=SimulatedDifferenceJudge("pairs", correlation=0.8))
    table = difference_correlations(study.human_ratings, study.pair_scores)
    assert len(table) == 4 and table["system_a"].iloc[-1] == "all pairs"
    assert table["n_contexts"].tolist() == [200, 200, 200, 600]
    assert table["pearson"].between(0.7, 0.9).all()
