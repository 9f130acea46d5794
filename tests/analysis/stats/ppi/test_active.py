"""Active sampling (analysis.stats.ppi.active) in seeded simulations: the inverse-probability-weighted PPI++
intervals cover the mean and the paired difference; with a judge whose errors are heteroscedastic and an
uncertainty that tracks them, they are narrower than uniform PPI++ at the same expected number of human-rated
contexts; with an uncertainty unrelated to the errors the mixing with uniform keeps them within a small factor
of uniform PPI++ (and pure active sampling, tau = 0, does worse). Plus the probabilities' rules and the tables."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.stats.ppi.active import (
    ACTIVE_PPI,
    UNIFORM_PPI,
    active_paired_differences,
    active_system_means,
    ipw_power_tuning,
    ipw_ppi_mean_interval,
    ipw_stratified_tuning,
    model_assisted_estimates,
    observed_probabilities,
    probability_strata,
)
from empeval.analysis.stats.ppi.active_draw import sampling_probabilities
from empeval.analysis.stats.ppi.estimates import ppi_mean_interval

N, SHARE, TRUE_MEAN = 600, 0.2, 3.5
BUDGET = SHARE * N


def _population(rng: np.random.Generator, *, informative: bool):
    """One study: labels (a context's quality plus rater noise), a judge on its own scale whose error SD is 0.1 on
    85% of the contexts and 1.5 on the others, and an uncertainty that is (informative) the error variance seen
    through noise, or (not) unrelated to it."""
    quality = rng.normal(TRUE_MEAN, 0.7, N)
    labels = quality + rng.normal(0, 0.3, N)
    error_sd = np.where(rng.random(N) < 0.85, 0.1, 1.5)
    judge = 0.5 + 0.85 * quality + rng.normal(0, error_sd)
    if informative:
        uncertainty = error_sd**2 * np.exp(rng.normal(0, 0.3, N))
    else:
        uncertainty = np.exp(rng.normal(0, 1.5, N))
    return labels, judge, uncertainty


def _run(seed: int, reps: int, *, informative: bool, tau: float = 0.5):
    """Coverage of TRUE_MEAN and mean widths: weighted PPI++ on an active Poisson draw, and PPI++ on a uniform
    sample of BUDGET contexts."""
    rng = np.random.default_rng(seed)
    covered, widths, uniform_widths = 0, [], []
    for _ in range(reps):
        labels, judge, uncertainty = _population(rng, informative=informative)
        pi = sampling_probabilities(uncertainty, BUDGET, tau=tau)
        drawn = rng.random(N) < pi
        result = ipw_ppi_mean_interval(np.where(drawn, labels, np.nan), judge, pi)
        covered += result["ppi_ci_low"] <= TRUE_MEAN <= result["ppi_ci_high"]
        widths.append(result["ppi_ci_high"] - result["ppi_ci_low"])
        rated = np.zeros(N, dtype=bool)
        rated[rng.choice(N, int(BUDGET), replace=False)] = True
        uniform = ppi_mean_interval(labels[rated], judge[rated], judge[~rated])
        uniform_widths.append(uniform["ppi_ci_high"] - uniform["ppi_ci_low"])
    return covered / reps, float(np.mean(widths)), float(np.mean(uniform_widths))


def test_informative_uncertainty_covers_and_beats_uniform_ppi_at_the_same_budget():
    coverage, width, uniform_width = _run(11, 600, informative=True)
    assert coverage >= 0.93
    assert width < 0.92 * uniform_width, (width, uniform_width)


def test_uninformative_uncertainty_covers_and_costs_little_thanks_to_the_mixing():
    coverage, width, uniform_width = _run(12, 600, informative=False)
    assert coverage >= 0.93
    assert width < 1.1 * uniform_width, (width, uniform_width)
    _, pure_width, _ = _run(12, 200, informative=False, tau=0.0)
    assert pure_width > width  # what the mixing protects against


def test_paired_differences_cover_and_beat_uniform_ppi():
    rng = np.random.default_rng(5)
    truth, covered, widths, uniform_widths, reps = 0.2, 0, [], [], 500
    for _ in range(reps):
        quality = rng.normal(0, 0.7, N)
        error_sd = np.where(rng.random(N) < 0.85, 0.1, 1.5)
        a = 3.5 + truth + quality + rng.normal(0, 0.3, N)
        b = 3.5 + quality + rng.normal(0, 0.3, N) + 0.5 * rng.normal(0, 1, N) * (error_sd > 0.5)
        judged = (a - b) + rng.normal(0, error_sd)  # the judge's difference, sure of half the contexts
        pi = sampling_probabilities(error_sd**2, BUDGET)
        drawn = rng.random(N) < pi
        result = ipw_ppi_mean_interval(np.where(drawn, a - b, np.nan), judged, pi)
        covered += result["ppi_ci_low"] <= truth <= result["ppi_ci_high"]
        widths.append(result["ppi_ci_high"] - result["ppi_ci_low"])
        rated = np.zeros(N, dtype=bool)
        rated[rng.choice(N, int(BUDGET), replace=False)] = True
        uniform = ppi_mean_interval((a - b)[rated], judged[rated], judged[~rated])
        uniform_widths.append(uniform["ppi_ci_high"] - uniform["ppi_ci_low"])
    assert covered / reps >= 0.93
    assert np.mean(widths) < 0.92 * np.mean(uniform_widths), (np.mean(widths), np.mean(uniform_widths))


@pytest.mark.parametrize("call, message", [
    (lambda: ipw_ppi_mean_interval([1.0, np.nan, np.nan], [1.0, 2.0, 3.0], [0.5, 0.5, 0.5]), "at least 2"),
    (lambda: ipw_ppi_mean_interval([1.0, 2.0, np.nan], [1.0, 2.0, 3.0], [0.5, 0.0, 0.5]), "(0, 1]"),
    (lambda: ipw_ppi_mean_interval([1.0, 2.0], [1.0, 2.0, 3.0], [0.5, 0.5, 0.5]), "same length"),
])
def test_bad_inputs_are_refused_with_a_reason(call, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        call()


def test_a_useless_judge_gets_no_weight_and_constant_probabilities_give_the_uniform_estimate():
    rng = np.random.default_rng(3)
    labels = rng.normal(3, 1, 400)
    drawn = rng.random(400) < 0.3
    y = np.where(drawn, labels, np.nan)
    assert ipw_power_tuning(y, rng.normal(0, 1, 400), np.full(400, 0.3))[0] < 0.15
    result = ipw_ppi_mean_interval(y, np.full(400, 2.0), np.full(400, 0.3))
    assert result["lam"] == 0.0 and result["human_mean"] == pytest.approx(labels[drawn].mean())


def test_strata_cut_the_probabilities_into_the_most_groups_that_keep_enough_rated_contexts_each():
    rng = np.random.default_rng(8)
    pi = np.sort(rng.uniform(0.05, 0.6, 1000))
    rated = rng.random(1000) < pi
    strata = probability_strata(pi, rated, max_strata=8, min_rated=25)
    counts = np.bincount(strata[rated])
    assert 1 < counts.size < 8 and counts.min() >= 25  # the rarely drawn eighth holds too few rated contexts
    finer = np.searchsorted(np.quantile(pi, np.arange(1, counts.size + 1) / (counts.size + 1)), pi, side="left")
    assert np.bincount(finer[rated]).min() < 25  # one stratum more would leave one short: the most that fit
    assert (np.diff(strata) >= 0).all()  # sorted probabilities: strata never go back down
    assert (probability_strata(pi, np.where(rated, 1.0, np.nan), max_strata=8, min_rated=25) == strata).all()
    many = int(rated.sum()) // 5
    fewer = probability_strata(pi, rated, max_strata=8, min_rated=many)
    assert 1 < np.unique(fewer).size < counts.size and np.bincount(fewer[rated]).min() >= many
    assert np.unique(probability_strata(pi, rated, max_strata=8, min_rated=10_000)).size == 1
    assert np.unique(probability_strata(np.full(1000, 0.2), rated)).size == 1  # a uniform draw
    ties = probability_strata(np.repeat([0.1, 0.5], [900, 100]), np.ones(1000, dtype=bool), min_rated=10)
    assert np.unique(ties[:900]).size == 1 and np.unique(ties[900:]).size == 1 and ties[0] != ties[-1]
    with pytest.raises(ValueError, match="one entry per context"):
        probability_strata(pi, rated[:10])


def test_one_stratum_tunes_as_the_pooled_rule_and_bad_strata_are_refused():
    rng = np.random.default_rng(4)
    labels, judge, uncertainty = _population(rng, informative=True)
    pi = sampling_probabilities(uncertainty, BUDGET)
    y = np.where(rng.random(N) < pi, labels, np.nan)
    lam, offset = ipw_stratified_tuning(y, judge, pi, np.zeros(N, dtype=int))
    pooled_lam, pooled_offset = ipw_power_tuning(y, judge, pi)
    assert np.allclose(lam, pooled_lam) and np.allclose(offset, pooled_offset)
    with pytest.raises(ValueError, match="non-negative integers, one per context"):
        ipw_stratified_tuning(y, judge, pi, np.zeros(N))
    with pytest.raises(ValueError, match="non-negative integers, one per context"):
        ipw_stratified_tuning(y, judge, pi, np.zeros(N - 1, dtype=int))
    lonely = np.zeros(N, dtype=int)
    lonely[np.flatnonzero(np.isnan(y))[:5]] = 1  # a stratum of contexts nobody rated
    with pytest.raises(ValueError, match="stratum 1 has 0 rated context"):
        ipw_ppi_mean_interval(y, judge, pi, strata=lonely)


def test_a_weight_per_probability_stratum_trusts_the_judge_where_it_is_sure_and_keeps_an_honest_variance():
    """Stratified PPI (Fisch et al. 2024) on the active draw: the contexts the judge is sure of (drawn rarely) get
    a weight near 1, the others less; the intervals cover, are narrower than one weight for all, and their
    estimated variance (with the degrees-of-freedom factor) matches the estimates' spread over the studies."""
    rng = np.random.default_rng(21)
    errors, variances, widths, pooled_widths, weights = [], [], [], [], []
    for _ in range(400):
        labels, judge, uncertainty = _population(rng, informative=True)
        pi = sampling_probabilities(uncertainty, 2 * BUDGET)
        y = np.where(rng.random(N) < pi, labels, np.nan)
        strata = probability_strata(pi, y)
        result = ipw_ppi_mean_interval(y, judge, pi, strata=strata)
        pooled = ipw_ppi_mean_interval(y, judge, pi)
        assert result["strata"] == np.unique(strata).size > 1 and pooled["strata"] == 1
        se = (result["ppi_ci_high"] - result["ppi_mean"]) / 1.959964
        errors.append(result["ppi_mean"] - TRUE_MEAN)  # the contexts are a sample too: Var(Z) / N counts it
        variances.append(se**2)
        widths.append(result["ppi_ci_high"] - result["ppi_ci_low"])
        pooled_widths.append(pooled["ppi_ci_high"] - pooled["ppi_ci_low"])
        lam, _ = ipw_stratified_tuning(y, judge, pi, strata)
        weights.append((lam[strata == 0].mean(), lam[strata == strata.max()].mean()))
    errors = np.asarray(errors)
    coverage = np.mean(np.abs(errors) <= 1.959964 * np.sqrt(variances))
    assert coverage >= 0.93, coverage
    assert 0.9 <= np.mean(variances) / np.mean(errors**2) <= 1.15, (np.mean(variances), np.mean(errors**2))
    assert np.mean(widths) < 0.98 * np.mean(pooled_widths), (np.mean(widths), np.mean(pooled_widths))
    sure, unsure = np.mean(weights, axis=0)
    assert sure > 0.9 and unsure < sure - 0.1, (sure, unsure)


def _tidy_study(seed: int):
    """A tidy active study: 3 systems, 80 contexts, two raters per drawn item, assignments of 6 items."""
    rng = np.random.default_rng(seed)
    systems, contexts = {"base": 3.0, "gold": 3.6, "moel": 3.3}, list(range(1, 81))
    error_sd = np.where(rng.random(80) < 0.5, 0.1, 1.0)
    pi = sampling_probabilities(error_sd**2, 24)
    drawn = rng.random(80) < pi
    scores, ratings = [], []
    for i, context in enumerate(contexts):
        for system, mean in systems.items():
            quality = mean + rng.normal(0, 0.6)
            scores.append({"context_id": context, "system": system, "criterion": "empathy",
                           "judge_score": quality + rng.normal(0, error_sd[i])})
            if drawn[i]:
                for rater in ("ann", "bob"):
                    ratings.append({"context_id": context, "system": system, "criterion": "empathy",
                                    "annotator": rater, "score": int(np.clip(round(quality + rng.normal(0, 0.5)), 1,
                                                                              5)),
                                    "assignment_id": f"{rater}-{len(ratings) // 12}"})
    sample = pd.DataFrame({"context_id": contexts, "sampled": drawn, "inclusion_probability": pi})
    return pd.DataFrame(ratings), pd.DataFrame(scores), sample


def test_the_tables_give_one_row_per_system_and_pair_and_the_shared_raters_widen_them():
    ratings, scores, sample = _tidy_study(4)
    means = active_system_means(ratings, scores, sample)
    assert means["system"].tolist() == ["base", "gold", "moel"]
    assert (means["n_human"] == int(sample["sampled"].sum())).all()
    assert means["expected_n_human"].round(6).eq(24).all()
    assert (means["rater_variance"] > 0).any()
    plain = active_system_means(ratings, scores, sample, cluster_by=None)
    assert (means["ppi_ci_high"] - means["ppi_ci_low"] >= plain["ppi_ci_high"] - plain["ppi_ci_low"] - 1e-12).all()
    pairs = active_paired_differences(ratings, scores, sample)
    assert list(zip(pairs["system_a"], pairs["system_b"], strict=True)) == [("base", "gold"), ("base", "moel"),
                                                                            ("gold", "moel")]
    assert pairs["p_adj"].ge(pairs["p_ppi"]).all() and pairs["correction"].eq("holm").all()


def test_model_assisted_estimates_picks_the_weighted_estimator_only_when_probabilities_are_recorded():
    ratings, scores, sample = _tidy_study(6)
    assert model_assisted_estimates(ratings, scores, sample).estimator == ACTIVE_PPI
    uniform = sample.assign(inclusion_probability=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chosen = model_assisted_estimates(ratings, scores, uniform)
    assert chosen.estimator == UNIFORM_PPI and len(chosen.means) == 3 and len(chosen.pairs) == 3
    with pytest.raises(ValueError, match="no inclusion probability"):
        active_system_means(ratings, scores, uniform)
    with pytest.raises(ValueError, match="context 80 .* no inclusion probability"):
        active_system_means(ratings, scores, sample.iloc[:-1])


# --- a report made while the study runs: part of the drawn contexts rated ----------------------------------------

def _partly_rated(seed: int, rated_share: float, *, informative: bool):
    """One study of N contexts drawn with its probabilities, of which people have rated `rated_share` of the drawn
    (a uniform subsample: the order of the hand-out does not depend on the labels)."""
    rng = np.random.default_rng(seed)
    labels, judge, uncertainty = _population(rng, informative=informative)
    pi = sampling_probabilities(uncertainty, BUDGET)
    drawn = rng.random(N) < pi
    rated = drawn & (rng.random(N) < rated_share)
    return np.where(rated, labels, np.nan), judge, pi, rated, drawn, float(labels.mean())


@pytest.mark.parametrize("informative", [True, False], ids=["informative", "flat"])
def test_while_a_third_of_the_drawn_contexts_are_rated_the_scaled_probabilities_keep_the_coverage(informative):
    """Weighting by the draw's probabilities alone counts the drawn contexts not rated yet as rated 0 in effect:
    with a third of them rated, the PPI++ interval covers far less than 95% (measured: 0.46-0.55). Scaled by the
    share rated (observed_probabilities), it covers."""
    reps, covered, covered_unscaled = 300, 0, 0
    for seed in range(reps):
        labels, judge, pi, rated, drawn, truth = _partly_rated(900 + seed, 1 / 3, informative=informative)
        scaled, share = observed_probabilities(pi, rated, drawn)
        assert share == pytest.approx(rated.sum() / drawn.sum())
        result = ipw_ppi_mean_interval(labels, judge, scaled)
        covered += result["ppi_ci_low"] <= truth <= result["ppi_ci_high"]
        unscaled = ipw_ppi_mean_interval(labels, judge, pi)
        covered_unscaled += unscaled["ppi_ci_low"] <= truth <= unscaled["ppi_ci_high"]
    se = np.sqrt(0.95 * 0.05 / reps)
    assert covered / reps >= 0.95 - 3 * se, covered / reps
    assert covered_unscaled / reps < 0.85  # what the tables did before: the scaling is what holds the coverage


def test_the_tables_scale_the_probabilities_by_the_share_of_the_drawn_contexts_rated_so_far():
    ratings, scores, sample = _tidy_study(4)
    drawn = sample.loc[sample["sampled"], "context_id"].tolist()
    waiting = set(drawn[::3])  # a third of the drawn contexts: no rating yet
    partial = ratings.loc[~ratings["context_id"].isin(waiting)]
    means = active_system_means(partial, scores, sample, cluster_by=None)
    share = (len(drawn) - len(waiting)) / len(drawn)
    part = scores.loc[scores["system"] == "gold"].sort_values("context_id")
    labels = (partial.loc[partial["system"] == "gold"].groupby("context_id")["score"].mean()
              .reindex(part["context_id"]).to_numpy(dtype=float))
    expected = ipw_ppi_mean_interval(labels, part["judge_score"].to_numpy(), sample["inclusion_probability"] * share)
    gold = means.loc[means["system"] == "gold"].iloc[0]
    assert gold["n_human"] == len(drawn) - len(waiting)
    assert (gold["ppi_mean"], gold["ppi_ci_low"], gold["ppi_ci_high"]) == pytest.approx(
        (expected["ppi_mean"], expected["ppi_ci_low"], expected["ppi_ci_high"]))
    everything = active_system_means(ratings, scores, sample, cluster_by=None)  # every drawn context rated: share 1
    plain = ipw_ppi_mean_interval(
        ratings.loc[ratings["system"] == "gold"].groupby("context_id")["score"].mean()
        .reindex(part["context_id"]).to_numpy(dtype=float), part["judge_score"].to_numpy(),
        sample["inclusion_probability"])
    assert everything.loc[everything["system"] == "gold", "ppi_ci_low"].iloc[0] == pytest.approx(plain["ppi_ci_low"])
    pairs = active_paired_differences(partial, scores, sample, cluster_by=None)
    unscaled = active_paired_differences(partial, scores, sample.assign(sampled=sample["context_id"].isin(
        set(drawn) - waiting)), cluster_by=None)  # the same ratings, as if the waiting contexts had not been drawn
    widths = pairs["ppi_ci_high"] - pairs["ppi_ci_low"]
    assert (widths > (unscaled["ppi_ci_high"] - unscaled["ppi_ci_low"]) * 1.1).all()
