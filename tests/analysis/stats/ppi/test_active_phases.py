"""The two-phase active design (analysis/stats/ppi/active_phases.py): a uniform burn-in, then probabilities from a
residual model fitted fold-wise on its labels. Each context's probability does not depend on its own fold's labels
(what makes the inverse-probability weights exact); the probabilities spend the budget and never fall below the
burn-in's; the weighted PPI++ estimate is unbiased and its interval covers on seeded simulated studies; a useful
feature buys a smaller variance and a useless one costs little."""
from __future__ import annotations

import numpy as np
import pytest

from empeval.analysis.stats.ppi.active import ipw_ppi_mean_interval
from empeval.analysis.stats.ppi.active_phases import (
    MIN_RESIDUAL_CONTEXTS,
    assign_folds,
    burn_in_probability,
    two_phase_probabilities,
)


def simulated(rng: np.random.Generator, n: int, *, informative: bool = True):
    """Labels around 3 with a judge whose error SD is 0.2 on easy contexts and 1.5 on hard ones (30%); when
    `informative` the features show hardness through noise, and the judge's distance from the middle, else they are
    pure noise."""
    hard = rng.random(n) < 0.3
    quality = rng.normal(3.0, 0.7, n)
    labels = quality + rng.normal(0, 0.3, n)
    judged = quality + rng.normal(0, 1, n) * np.where(hard, 1.5, 0.2)
    if not informative:
        return labels, judged, rng.normal(0, 1, (n, 2))
    return labels, judged, np.c_[hard + rng.normal(0, 0.4, n), np.abs(judged - 3)]


def design_for(rng, labels, judged, features, budget, burn_in=0.3):
    n = labels.size
    p1 = burn_in_probability(budget, n, burn_in)
    folds = assign_folds(n, 5, rng)
    burnt = rng.random(n) < p1
    design = two_phase_probabilities(features, np.where(burnt, labels, np.nan)[:, None], judged[:, None], folds,
                                     burn_in_probability=p1, budget=budget)
    return design, burnt, folds, p1


def test_a_folds_probabilities_do_not_depend_on_its_own_burn_in():
    rng = np.random.default_rng(1)
    labels, judged, features = simulated(rng, 1000)
    p1 = burn_in_probability(200, 1000, 0.3)
    folds = assign_folds(1000, 5, np.random.default_rng(2))
    burnt = np.random.default_rng(3).random(1000) < p1
    first = two_phase_probabilities(features, np.where(burnt, labels, np.nan)[:, None], judged[:, None], folds,
                                    burn_in_probability=p1, budget=200)
    changed = labels.copy()
    changed[folds == 0] += np.random.default_rng(4).normal(0, 3, (folds == 0).sum())  # fold 0's labels only
    second = two_phase_probabilities(features, np.where(burnt, changed, np.nan)[:, None], judged[:, None], folds,
                                     burn_in_probability=p1, budget=200)
    assert np.array_equal(first.probability[folds == 0], second.probability[folds == 0])
    assert not np.allclose(first.probability[folds != 0], second.probability[folds != 0])
    moved = burnt.copy()
    moved[folds == 0] = ~moved[folds == 0]  # nor on which of its contexts the burn-in drew
    third = two_phase_probabilities(features, np.where(moved, labels, np.nan)[:, None], judged[:, None], folds,
                                    burn_in_probability=p1, budget=200)
    assert np.array_equal(first.probability[folds == 0], third.probability[folds == 0])


def test_the_probabilities_spend_the_budget_and_keep_the_burn_in_floor():
    rng = np.random.default_rng(5)
    labels, judged, features = simulated(rng, 800)
    design, _, folds, p1 = design_for(rng, labels, judged, features, budget=160)
    assert design.probability.sum() == pytest.approx(160, rel=1e-9)
    assert design.probability.min() >= p1 and design.probability.max() <= 1
    assert np.allclose(design.probability, p1 + (1 - p1) * design.phase_two)
    for k in range(5):  # each fold spends its share of phase 2's budget
        member = folds == k
        assert ((1 - p1) * design.phase_two[member]).sum() == pytest.approx((160 - 800 * p1) * member.mean(),
                                                                             rel=1e-9)
    assert len(design.taus) == 5 and all(0 <= tau <= 1 for tau in design.taus)
    assert "residual model fitted on the uniform burn-in's" in design.basis


def test_too_small_a_burn_in_gives_uniform_probabilities_and_says_why():
    rng = np.random.default_rng(6)
    labels, judged, features = simulated(rng, 200)
    design, _, _, p1 = design_for(rng, labels, judged, features, budget=40)  # ~12 burn-in contexts
    assert np.allclose(design.probability, 40 / 200)
    assert design.taus == (1.0,) * 5
    assert f"too few for the residual model (each fold's model needs {MIN_RESIDUAL_CONTEXTS}" in design.basis


def test_the_weighted_estimate_is_unbiased_and_covers_on_simulated_studies():
    """200 seeded studies of 300 contexts, 75 expected rated (burn-in 30%): the mean estimate within 3 Monte
    Carlo SE of the truth (3.0), coverage at least 0.91 (nominal 0.95; 0.91 is 2.7 SE below)."""
    estimates, covered = [], []
    for seed in range(200):
        rng = np.random.default_rng([28, seed])
        labels, judged, features = simulated(rng, 300)
        design, burnt, _, _ = design_for(rng, labels, judged, features, budget=75)
        rated = burnt | (rng.random(300) < design.phase_two)
        result = ipw_ppi_mean_interval(np.where(rated, labels, np.nan), judged, design.probability)
        estimates.append(result["ppi_mean"])
        covered.append(result["ppi_ci_low"] <= 3.0 <= result["ppi_ci_high"])
    estimates = np.asarray(estimates)
    assert abs(estimates.mean() - 3.0) < 3 * estimates.std(ddof=1) / np.sqrt(len(estimates))
    assert np.mean(covered) >= 0.91


@pytest.mark.parametrize("informative, most", [(True, 0.96), (False, 1.02)])
def test_a_useful_feature_buys_variance_and_a_useless_one_costs_little(informative, most):
    """The design's variance sum_i r_i^2 (1 - pi_i) / pi_i against uniform probabilities' (r the residual of the
    labels on the calibrated judge), over 8 pools of 2,000 contexts, 400 expected rated."""
    ratios = []
    for seed in range(8):
        rng = np.random.default_rng([7, seed])
        labels, judged, features = simulated(rng, 2000, informative=informative)
        design, *_ = design_for(rng, labels, judged, features, budget=400)
        slope = np.cov(labels, judged)[0, 1] / np.var(judged, ddof=1)
        r2 = (labels - labels.mean() - slope * (judged - judged.mean())) ** 2
        uniform = 400 / 2000
        ratios.append((r2 * (1 - design.probability) / design.probability).sum() / (r2 * (1 - uniform) / uniform).sum())
    assert np.mean(ratios) < most, ratios


def test_inconsistent_inputs_are_refused_with_what_was_wrong():
    rng = np.random.default_rng(8)
    labels, judged, features = simulated(rng, 100)
    with pytest.raises(ValueError, match=r"features \(N x p\), labels and judged \(N x m\) and folds \(N,\) must "
                                         "agree"):
        two_phase_probabilities(features, labels[:, None], judged[:50, None], np.zeros(100),
                                burn_in_probability=0.05, budget=20)
    with pytest.raises(ValueError, match=r"burn-in probability 0\.5 must be positive and below the design's mean "
                                         r"probability budget / N = 0\.2"):
        two_phase_probabilities(features, labels[:, None], judged[:, None], np.zeros(100), burn_in_probability=0.5,
                                budget=20)
    with pytest.raises(ValueError, match="burn-in share must be strictly between 0 and 1, got 1.0"):
        burn_in_probability(20, 100, 1.0)
