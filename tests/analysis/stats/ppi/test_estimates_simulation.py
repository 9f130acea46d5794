"""Simulated model-assisted studies (analysis.simulate.judges): the planted judges are what they say, the 95%
PPI++ intervals cover the truth, a judge correlated about 0.7 with the labels narrows them, a useless one
costs little, and the fast array analysis the benchmark uses is the DataFrame functions' analysis.

Coverage here runs on a few hundred studies with fixed seeds, against bounds such n can show;
benchmarks/ppi_coverage.py prints the 2,000-study table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.simulate.judges import (
    BIASED_JUDGE,
    GOOD_JUDGE,
    USELESS_JUDGE,
    SimulatedJudge,
    analyse_judged_arrays,
    simulate_judged_study,
    true_means,
)
from empeval.analysis.stats.power import Components
from empeval.analysis.stats.ppi.estimates import ppi_paired_differences, ppi_system_means


def coverage(judge: SimulatedJudge, seeds: range, **design) -> dict[str, float]:
    hits: dict[str, list[bool]] = {"means": [], "pairs": [], "human_means": []}
    for seed in seeds:
        study = simulate_judged_study(judge=judge, seed=seed, **design)
        truth = dict(zip(study.arrays["systems"], study.arrays["true_means"], strict=True))
        means, pairs = analyse_judged_arrays(study.arrays)
        hits["means"] += [row["ppi_ci_low"] <= truth[row["system"]] <= row["ppi_ci_high"] for row in means]
        hits["human_means"] += [row["human_ci_low"] <= truth[row["system"]] <= row["human_ci_high"] for row in means]
        hits["pairs"] += [row["ppi_ci_low"] <= truth[row["system_a"]] - truth[row["system_b"]] <= row["ppi_ci_high"]
                          for row in pairs]
    return {key: float(np.mean(value)) for key, value in hits.items()}


@pytest.mark.parametrize("seed", [3, 8])
def test_the_array_analysis_is_the_dataframe_functions_analysis(seed):
    study = simulate_judged_study(judge=BIASED_JUDGE, n_contexts=120, human_share=0.25, seed=seed)
    means, pairs = analyse_judged_arrays(study.arrays)
    expected_means = ppi_system_means(study.human_ratings, study.judge_scores)
    expected_pairs = ppi_paired_differences(study.human_ratings, study.judge_scores)
    columns = ["ppi_mean", "ppi_ci_low", "ppi_ci_high", "human_ci_low", "human_ci_high", "lam"]
    got = pd.DataFrame(means)
    assert list(got["system"]) == list(expected_means["system"])
    np.testing.assert_allclose(got[columns].to_numpy(), expected_means[columns].to_numpy(), rtol=0, atol=1e-12)
    got = pd.DataFrame(pairs).rename(columns={"ppi_mean": "ppi_diff"})
    columns = ["ppi_diff", "ppi_ci_low", "ppi_ci_high", "human_ci_low", "human_ci_high", "lam"]
    np.testing.assert_allclose(got[columns].to_numpy(), expected_pairs[columns].to_numpy(), rtol=0, atol=1e-12)


def test_the_simulated_design_shares_raters_and_samples_whole_contexts():
    study = simulate_judged_study(n_contexts=100, human_share=0.3, seed=4)
    ratings = study.human_ratings
    assert set(ratings["context_id"]) == set(study.rated_contexts) and len(study.rated_contexts) == 30
    assert (ratings.groupby("context_id")["system"].nunique() == 3).all()  # every system on a rated context
    assert (ratings.groupby(["context_id", "system"]).size() == 3).all()
    assert (ratings.groupby(["context_id", "annotator"]).size() == 1).all()  # nobody sees a context twice
    assert ratings.groupby("annotator")["context_id"].nunique().median() >= 5  # raters rate many items
    assert (ratings.groupby("assignment_id")["annotator"].nunique() == 1).all()
    assert len(study.judge_scores) == 300 and study.judge_scores["judge_score"].notna().all()


def test_planted_judges_have_the_correlation_and_bias_they_claim():
    rows = []
    for judge in (GOOD_JUDGE, USELESS_JUDGE, BIASED_JUDGE):
        study = simulate_judged_study(judge=judge, n_contexts=3000, human_share=0.5, seed=1)
        means, pairs = analyse_judged_arrays(study.arrays)
        gap = {(row["system_a"], row["system_b"]): row["judge_mean_biased"] - row["human_mean"] for row in pairs}
        rows.append({"judge": judge.name, "correlation": np.mean([row["correlation"] for row in means]),
                     "baseline_vs_gold": gap[("baseline", "gold")],
                     "judge_says_baseline_vs_gold": pairs[0]["judge_mean_biased"]})
    table = pd.DataFrame(rows).set_index("judge")
    assert 0.66 <= table.loc["good", "correlation"] <= 0.76  # "about 0.7 with the item labels"
    assert abs(table.loc["useless", "correlation"]) < 0.05
    assert 0.55 <= table.loc["biased", "correlation"] <= 0.7
    # The good judge gets system differences right; the biased one, partial to the baseline, ranks it above gold.
    assert abs(table.loc["good", "baseline_vs_gold"]) < 0.05
    assert table.loc["biased", "baseline_vs_gold"] > 0.4 and table.loc["biased", "judge_says_baseline_vs_gold"] > 0


def test_true_means_match_a_large_simulation_of_the_rating_model():
    components = Components()
    rng = np.random.default_rng(0)
    severities = rng.normal(0, components.rater_sd, 20)
    truth = true_means({"a": 0.6}, components=components, severities=severities)["a"]
    n = 400_000
    latent = (components.centre + 0.6 + rng.normal(0, components.context_sd, n)
              + rng.normal(0, components.response_sd, n) + severities[rng.integers(0, 20, n)]
              + rng.normal(0, components.noise_sd, n))
    assert truth == pytest.approx(np.clip(np.rint(latent), 1, 5).mean(), abs=0.005)


def test_ppi_intervals_cover_the_truth_with_a_good_judge():
    result = coverage(GOOD_JUDGE, range(100, 250))  # 450 intervals of each kind
    assert result["means"] >= 0.9 and result["pairs"] >= 0.9 and result["human_means"] >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("judge", [GOOD_JUDGE, USELESS_JUDGE, BIASED_JUDGE], ids=lambda judge: judge.name)
def test_ppi_intervals_cover_the_truth_with_every_judge(judge):
    result = coverage(judge, range(1000, 1400))  # 1,200 intervals of each kind
    assert result["means"] >= 0.925 and result["pairs"] >= 0.925


def test_a_judge_correlated_about_0_7_narrows_the_mean_s_interval_by_a_fifth():
    ratios, correlations = [], []
    for seed in range(20):
        study = simulate_judged_study(judge=GOOD_JUDGE, n_contexts=600, human_share=0.1, seed=seed)
        means = ppi_system_means(study.human_ratings, study.judge_scores)
        ratios += list(means["width_ratio"])
        correlations += [row["correlation"] for row in analyse_judged_arrays(study.arrays)[0]]
    assert 0.65 <= np.mean(correlations) <= 0.75
    assert np.mean(ratios) <= 0.8  # at least 20% narrower on the same human ratings


def test_a_useless_judge_costs_little():
    ratios = []
    for seed in range(20):
        study = simulate_judged_study(judge=USELESS_JUDGE, n_contexts=400, human_share=0.2, seed=seed)
        ratios += list(ppi_system_means(study.human_ratings, study.judge_scores)["width_ratio"])
    assert np.mean(ratios) <= 1.02 and max(ratios) <= 1.06
