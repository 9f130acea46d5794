"""Confidence sequences (analysis/stats/sequential.py): the boundary against the reference implementation's values and
a direct numerical evaluation of the normal mixture, time-uniform coverage under a look after every new context
(against a fixed-n interval re-checked at each look, which does not hold), model-assisted and paired coverage, and the
sqrt(log n / n) width."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

from empeval.analysis.stats.sequential import (
    Decision,
    confidence_sequence,
    decide,
    ipw_ppi_confidence_sequence,
    mixture_log_martingale,
    normal_mixture_boundary,
    normal_mixture_rho,
    paired_confidence_sequence,
    ppi_confidence_sequence,
    ppi_paired_confidence_sequence,
)

LIKERT_VARIANCE = 4.0  # (5 - 1)^2 / 4: the largest variance of a 1-5 scale, as the decisions pass it


def _item_means(quality, rng, k=3):
    """Item labels as a study has them: the mean of k ratings on a 1-5 scale around each response's quality."""
    return np.clip(np.rint(quality[:, None] + rng.normal(0, 0.8, (quality.size, k))), 1, 5).mean(axis=1)


def _true_mean(centre, seed=99, size=2_000_000):
    rng = np.random.default_rng(seed)
    return float(_item_means(rng.normal(centre, 0.6, size), rng).mean())


def test_the_boundary_is_the_reference_implementations():
    # confseq's C++ tests (values from Howard et al.'s R reference): best_rho(100, 0.05) and the two-sided bound
    rho = normal_mixture_rho(100, alpha=0.05)
    assert rho == pytest.approx(12.60056, abs=1e-5)
    assert normal_mixture_boundary(100, rho=rho, alpha=0.05) == pytest.approx(30.35209, abs=1e-5)
    assert mixture_log_martingale(10.0, 100.0, rho=rho) == pytest.approx(-0.6510052, abs=1e-6)


@pytest.mark.parametrize(("v", "alpha"), [(1.0, 0.05), (30.0, 0.01), (100.0, 0.05), (5000.0, 0.01)])
def test_the_boundary_is_where_the_numerically_integrated_mixture_reaches_one_over_alpha(v, alpha):
    rho = normal_mixture_rho(200, alpha)
    crossing = optimize.brentq(lambda s: mixture_log_martingale(s, v, rho=rho) - np.log(1 / alpha),
                               0.0, 50 * np.sqrt(v))
    assert normal_mixture_boundary(v, rho=rho, alpha=alpha) == pytest.approx(crossing, rel=1e-7)


def test_rho_makes_the_boundary_tightest_near_the_planned_size():
    alpha, planned = 0.05, 400
    best = optimize.minimize_scalar(lambda r: normal_mixture_boundary(planned, rho=r, alpha=alpha),
                                    bounds=(1, 1000), method="bounded").x
    tuned = normal_mixture_rho(planned, alpha)
    assert tuned == pytest.approx(best, rel=0.1)  # Howard et al.'s closed form approximates the optimum
    assert normal_mixture_boundary(planned, rho=tuned, alpha=alpha) <= \
        normal_mixture_boundary(planned, rho=best, alpha=alpha) * 1.001


def test_coverage_holds_at_every_look_while_a_fixed_n_interval_rechecked_does_not():
    rng = np.random.default_rng(2028)
    mean, looks, replications = _true_mean(3.4), 300, 300
    sequence_covered = fixed_covered = 0
    n = np.arange(1, looks + 1)
    for _ in range(replications):
        x = _item_means(rng.normal(3.4, 0.6, looks), rng)
        sequence = confidence_sequence(x, planned_n=looks, prior_variance=LIKERT_VARIANCE)
        sequence_covered += bool(((sequence["low"] <= mean) & (mean <= sequence["high"])).all())
        # the fixed-n 95% t interval, re-checked after each new context from the second on
        running = np.cumsum(x) / n
        variance = (np.cumsum(x**2) - n * running**2)[1:] / (n[1:] - 1)
        half = stats.t.ppf(0.975, n[1:] - 1) * np.sqrt(np.maximum(variance, 0) / n[1:])
        fixed_covered += bool((np.abs(running[1:] - mean) <= half).all())
    assert sequence_covered / replications >= 0.93
    assert fixed_covered / replications <= 0.75  # about 0.5: peeking breaks it


def test_model_assisted_sequences_cover_at_every_look_and_are_narrower_with_a_good_judge():
    rng = np.random.default_rng(7)
    mean, rated, judge_only, replications = _true_mean(3.5), 150, 300, 200
    covered, ratios = 0, []
    for _ in range(replications):
        quality = rng.normal(3.5, 0.6, rated + judge_only)
        judge = 0.5 + 0.8 * quality + rng.normal(0, 0.3, quality.size)
        labels = _item_means(quality[:rated], rng)
        ppi = ppi_confidence_sequence(labels, judge[:rated], judge[rated:], planned_n=rated,
                                      prior_variance=LIKERT_VARIANCE)
        human = confidence_sequence(labels, planned_n=rated, prior_variance=LIKERT_VARIANCE)
        covered += bool(((ppi["low"] <= mean) & (mean <= ppi["high"])).all())
        ratios.append(ppi["radius"].iloc[-1] / human["radius"].iloc[-1])
    assert covered / replications >= 0.93
    assert np.median(ratios) < 0.92


def test_paired_sequences_cover_the_difference_human_only_and_model_assisted():
    rng = np.random.default_rng(11)
    rated, judge_only, replications = 120, 240, 200
    difference = _true_mean(3.7, seed=5) - _true_mean(3.5, seed=6)
    human_covered = ppi_covered = 0
    for _ in range(replications):
        context = rng.normal(0, 0.5, rated + judge_only)  # what both systems' responses share
        quality_a = 3.7 + context + rng.normal(0, 0.3, context.size)
        quality_b = 3.5 + context + rng.normal(0, 0.3, context.size)
        judge_a = quality_a + rng.normal(0, 0.3, context.size)
        judge_b = quality_b + rng.normal(0, 0.3, context.size)
        a, b = _item_means(quality_a[:rated], rng), _item_means(quality_b[:rated], rng)
        human = paired_confidence_sequence(a, b, planned_n=rated, prior_variance=4 * LIKERT_VARIANCE)
        ppi = ppi_paired_confidence_sequence(a, b, judge_a[:rated], judge_b[:rated], judge_a[rated:],
                                             judge_b[rated:], planned_n=rated, prior_variance=4 * LIKERT_VARIANCE)
        human_covered += bool(((human["low"] <= difference) & (difference <= human["high"])).all())
        ppi_covered += bool(((ppi["low"] <= difference) & (difference <= ppi["high"])).all())
    assert human_covered / replications >= 0.93 and ppi_covered / replications >= 0.93


def test_the_width_shrinks_like_root_log_n_over_n():
    x = np.tile([1.0, -1.0], 500_000)  # standard deviation 1 at every even look
    sequence = confidence_sequence(x, planned_n=100)
    looks = np.array([1_000, 10_000, 100_000, 1_000_000])
    radius = sequence["radius"].to_numpy()[looks - 1]
    assert np.all(np.diff(radius * np.sqrt(looks)) > 0)  # slower than 1 / sqrt(n) ...
    scaled = radius * np.sqrt(looks / np.log(looks))
    assert scaled.max() / scaled.min() < 1.35  # ... and as sqrt(log n / n), up to the slowly vanishing constants
    rho = normal_mixture_rho(100)
    assert radius == pytest.approx(np.sqrt((looks + rho) * np.log((looks + rho) / (rho * 0.05**2))) / looks)


def test_decisions_read_the_interval():
    assert decide(0.01, 0.5) is Decision.A_BETTER and decide(-0.5, -0.01) is Decision.B_BETTER
    assert decide(-0.2, 0.2, margin=0.25) is Decision.EQUIVALENT
    assert decide(-0.2, 0.2) is Decision.UNDECIDED and decide(-0.3, 0.2, margin=0.25) is Decision.UNDECIDED
    assert decide(-np.inf, np.inf, margin=1.0) is Decision.UNDECIDED


def test_bad_inputs_are_refused_by_name():
    with pytest.raises(ValueError, match="alpha"):
        confidence_sequence([1.0, 2.0], planned_n=10, alpha=1.5)
    with pytest.raises(ValueError, match="values must be finite"):
        confidence_sequence([1.0, np.nan], planned_n=10)
    with pytest.raises(ValueError, match="aligned"):
        ppi_confidence_sequence([1.0, 2.0], [1.0], [1.0], planned_n=10)
    with pytest.raises(ValueError, match="planned_n"):
        normal_mixture_rho(0)
    first = confidence_sequence([3.0, 4.0, 5.0], planned_n=10)
    assert np.isinf(first["radius"].iloc[0]) and np.isfinite(first["radius"].iloc[1])


def test_the_radius_is_waudby_smith_et_als_theorem_in_their_parametrisation():
    # Theorem 2.2: sd * sqrt(2 (t rho^2 + 1) / (t^2 rho^2) * log(sqrt(t rho^2 + 1) / alpha)), rho^2 = 1 / our rho,
    # with their rho^2 = (2 log(1 / alpha) + log(1 + 2 log(1 / alpha))) / t* at the planned t*
    rng = np.random.default_rng(3)
    x, alpha, planned = rng.normal(0, 2, 500), 0.05, 250
    sequence = confidence_sequence(x, planned_n=planned, alpha=alpha)
    theirs = (-2 * np.log(alpha) + np.log(-2 * np.log(alpha) + 1)) / planned
    t = sequence["n"].to_numpy()[1:]
    radius = sequence["sd"].to_numpy()[1:] * np.sqrt(
        2 * (t * theirs + 1) / (t**2 * theirs) * np.log(np.sqrt(t * theirs + 1) / alpha))
    assert sequence["radius"].to_numpy()[1:] == pytest.approx(radius, rel=1e-12)
    assert sequence["sd"].iloc[-1] == pytest.approx(x.std(), rel=1e-9)  # the 1 / t sample deviation, as theirs


def _net_preferences(gap, rng, size, k=2):
    """An A/B study's labels: per context, the mean of k choices (+1 for A, -1 for B, 0 for a tie within 0.3) of raters
    who perceive each response's quality with noise, A's being `gap` better on average; and a judge of differences
    that sees the same qualities with its own noise and answers in half steps from -2 to 2 (two orders averaged)."""
    quality_a = gap + rng.normal(0, 0.8, size)
    quality_b = rng.normal(0, 0.8, size)
    seen = (quality_a - quality_b)[:, None] + rng.normal(0, 0.7, (size, k))
    labels = np.where(seen > 0.3, 1.0, np.where(seen < -0.3, -1.0, 0.0)).mean(axis=1)
    judge = np.clip(np.rint(2 * (quality_a - quality_b + rng.normal(0, 0.4, size))), -4, 4) / 2
    return labels, judge


def test_net_preference_sequences_of_an_ab_study_cover_at_every_look_and_a_judge_of_differences_narrows_them():
    """The A/B decisions' sequences (server/annotation/kinds/pairwise_decisions.py: labels in [-1, 1], prior variance
    1; the judge's verdicts in its own steps, weighed by lambda)."""
    rng = np.random.default_rng(31)
    truth = float(_net_preferences(0.2, np.random.default_rng(5), 2_000_000)[0].mean())
    rated, judge_only, replications = 120, 360, 200
    human_covered = ppi_covered = 0
    ratios = []
    for _ in range(replications):
        labels, judge = _net_preferences(0.2, rng, rated + judge_only)
        human = confidence_sequence(labels[:rated], planned_n=rated, prior_variance=1.0)
        ppi = ppi_confidence_sequence(labels[:rated], judge[:rated], judge[rated:], planned_n=rated,
                                      prior_variance=1.0)
        human_covered += bool(((human["low"] <= truth) & (truth <= human["high"])).all())
        ppi_covered += bool(((ppi["low"] <= truth) & (truth <= ppi["high"])).all())
        ratios.append(ppi["radius"].iloc[-1] / human["radius"].iloc[-1])
    assert human_covered / replications >= 0.93 and ppi_covered / replications >= 0.93
    assert np.median(ratios) < 0.9


def test_an_actively_sampled_study_needs_the_weighted_sequences_which_cover_at_every_look():
    """Contexts the judge scores high are drawn three times as often (as an active draw does with the contexts it
    is unsure of): the plain sequence over the rated contexts then estimates their mean, not the study's, and
    misses it; the inverse-probability weighted sequences, human-only and model-assisted, cover at every look."""
    rng = np.random.default_rng(41)
    contexts, replications = 600, 200
    covered = {"plain": 0, "weighted": 0, "weighted model-assisted": 0}
    ratios = []
    for _ in range(replications):
        difference = rng.normal(0.2, 0.6, contexts)
        judge = difference + rng.normal(0, 0.4, contexts)
        pi = np.where(judge > 0.3, 0.4, 0.12)
        order = rng.permutation(np.flatnonzero(rng.random(contexts) < pi))  # drawn, in hand-out order
        labels = difference[order] + rng.normal(0, 0.5, order.size)
        truth, budget = difference.mean(), pi.sum()
        sequences = {
            "plain": confidence_sequence(labels, planned_n=budget, prior_variance=LIKERT_VARIANCE),
            "weighted": ipw_ppi_confidence_sequence(labels, np.zeros(order.size), pi[order], np.zeros(contexts),
                                                    expected_rated=budget, planned_n=budget,
                                                    prior_variance=LIKERT_VARIANCE),
            "weighted model-assisted": ipw_ppi_confidence_sequence(labels, judge[order], pi[order], judge,
                                                                   expected_rated=budget, planned_n=budget,
                                                                   prior_variance=LIKERT_VARIANCE)}
        for name, sequence in sequences.items():
            covered[name] += bool(((sequence["low"] <= truth) & (truth <= sequence["high"])).all())
        weighted = sequences["weighted"]["radius"].iloc[-1]
        ratios.append(sequences["weighted model-assisted"]["radius"].iloc[-1] / weighted)
    assert covered["plain"] / replications < 0.5
    assert covered["weighted"] / replications >= 0.93 and covered["weighted model-assisted"] / replications >= 0.93
    assert np.median(ratios) < 0.9


def test_the_weighted_sequence_refuses_what_it_cannot_weigh():
    with pytest.raises(ValueError, match=r"probabilities must lie in \(0, 1\]"):
        ipw_ppi_confidence_sequence([1.0], [1.0], [0.0], [1.0, 2.0], expected_rated=1.0, planned_n=2)
    with pytest.raises(ValueError, match="every context of the study"):
        ipw_ppi_confidence_sequence([1.0, 2.0], [1.0, 2.0], [0.5, 0.5], [1.0], expected_rated=1.0, planned_n=2)
    with pytest.raises(ValueError, match="expected_rated must lie in"):
        ipw_ppi_confidence_sequence([1.0], [1.0], [0.5], [1.0, 2.0], expected_rated=3.0, planned_n=2)
