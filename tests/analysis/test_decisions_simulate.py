"""The decisions simulator behind benchmarks/paid_ratings.py (analysis/simulate/decisions.py): its judge has the
difference correlation asked for, its planner's n decides as often as planned, every strategy keeps its type-I error
and coverage on seeded studies, and its running estimates are the ones analysis.stats.sequential computes."""
from __future__ import annotations

import math

import numpy as np
import pytest

from empeval.analysis.simulate import decisions
from empeval.analysis.simulate.decisions import (
    ACTIVE_AS_DRAWN,
    POISSON_UNIFORM,
    STRATEGIES,
    UNDECIDED,
    DecisionDesign,
    active_probabilities,
    pilot,
    plans_for,
    run_strategy,
    sequence_half_width,
    simulate_pool,
    wrong_direction,
)
from empeval.analysis.stats.sequential import confidence_sequence

SMALL = DecisionDesign(pool=1500)


def test_decisions_simulate_judge_has_the_difference_correlation_asked_for():
    for rho in (0.3, 0.7, 0.9):
        design = DecisionDesign(difference_correlation=rho, pool=100_000)
        pool = simulate_pool(design, np.random.default_rng(1))
        measured = [np.corrcoef(pool.d[:, p], pool.g[:, p])[0, 1] for p in range(len(design.pairs))]
        assert np.mean(measured) == pytest.approx(rho, abs=0.01)


def test_decisions_simulate_refuses_a_correlation_the_labels_cannot_reach():
    with pytest.raises(ValueError, match="difference_correlation must be in"):
        DecisionDesign(difference_correlation=0.97).judge_error_sd()


def test_decisions_simulate_pool_mean_difference_is_the_truth_exactly():
    """v is centred per system over the pool, so the pool's mean expected difference is mu_a - mu_b; the labels'
    mean differs from it only by rater noise."""
    design = DecisionDesign(pool=20_000)
    pool = simulate_pool(design, np.random.default_rng(2))
    assert pool.d.mean(axis=0) == pytest.approx(design.true_differences, abs=0.03)


def test_decisions_simulate_ppi_variance_falls_by_one_minus_rho_squared():
    """PPI++ with a judge of difference correlation rho leaves 1 - rho^2 of the human-only variance per label
    (Angelopoulos et al. 2023); the pilot's SDs say so."""
    design = DecisionDesign(difference_correlation=0.7)
    plan = pilot(design, np.random.default_rng(3), size=100_000)
    ratio = (plan.sd["PPI uniform"] / plan.sd["human fixed"]) ** 2
    assert ratio.mean() == pytest.approx(1 - 0.7**2, abs=0.03)


def test_decisions_simulate_raw_uncertainty_without_mixing_costs_more_than_uniform():
    """The judges' uncertainty measures the judge's error only, not the people's: drawing on it raw, unmixed, makes
    the inverse-probability estimate noisier than uniform; the calibrated rule is not worse than uniform."""
    design = DecisionDesign(difference_correlation=0.7, uniform_mix=0.0)
    plan = pilot(design, np.random.default_rng(4), size=100_000)
    raw = (plan.sd["PPI active, raw uncertainty"] / plan.sd["PPI uniform"]) ** 2
    calibrated = (plan.sd["PPI active, calibrated"] / plan.sd["PPI uniform"]) ** 2
    assert raw.mean() > 1.1
    assert calibrated.mean() < 1.0


def test_decisions_simulate_active_probabilities_are_a_mixed_distribution():
    q = active_probabilities(np.array([0.0, 1.0, 4.0, 9.0]), uniform_mix=0.2)
    assert q.sum() == pytest.approx(1.0)
    assert q[0] == pytest.approx(0.2 / 4)  # no uncertainty: only the uniform share
    assert q[3] / q[1] == pytest.approx((0.8 * 3 / 6 + 0.05) / (0.8 * 1 / 6 + 0.05))


def test_decisions_simulate_running_estimate_is_the_sequence_modules():
    """The vectorised running mean and SD of the human-only stream are analysis.stats.sequential's, so the
    benchmark's sequences are the product's (up to the product's one pseudo-observation, off here)."""
    pool = simulate_pool(SMALL, np.random.default_rng(5))
    index = np.arange(200)
    estimate, sd = decisions._running_estimates(pool, index, np.ones(200), use_judge=False)
    sequence = confidence_sequence(pool.d[index, 0], planned_n=100, alpha=0.05)
    assert estimate[-1, 0] == pytest.approx(sequence["estimate"].iloc[-1])
    assert sd[-1, 0] == pytest.approx(sequence["sd"].iloc[-1], rel=0.01)
    half = sequence_half_width(sd[-1:, :1], np.array([[200.0]]), 0.05, 100.0)
    assert half[0, 0] == pytest.approx(sequence["radius"].iloc[-1], rel=0.02)


def test_decisions_simulate_every_strategy_keeps_type_i_and_coverage():
    """120 seeded studies per strategy: a direction claimed on the equal pair at most 0.05 + 2 SE of the time
    (2 SE at 0.05 and n = 120 is 0.04, so a strategy whose error were 0.15 would fail with probability above
    0.99), the six final intervals all covering at least 0.88 of the time (nominal 0.95: 0.88 is 3.5 SE below),
    and the planner's fixed n deciding every comparison about as often as planned (0.8)."""
    design = SMALL
    plan = pilot(design, np.random.default_rng(6), size=60_000)
    plans = plans_for(design, plan)
    truth = design.true_differences
    n = 120
    outcomes: dict[str, list] = {strategy: [] for strategy in STRATEGIES}
    for seed in range(n):
        pool = simulate_pool(design, np.random.default_rng(1000 + seed))
        for strategy in STRATEGIES:
            outcomes[strategy].append(run_strategy(
                design, strategy, pool, np.random.default_rng([seed, STRATEGIES.index(strategy)]),
                planned=plans[strategy], human_planned=plans["human fixed"], sequence_half_width=sequence_half_width,
                plan=plan))
    for strategy, found in outcomes.items():
        type_i = np.mean([wrong_direction(o.states, truth)[truth == 0].any() for o in found])
        coverage = np.mean([o.covered.all() for o in found])
        assert type_i <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / n), strategy
        assert coverage >= 0.88, strategy
        decided = np.mean([o.decided for o in found])
        if strategy.endswith("sequential"):
            assert decided >= 0.95, strategy  # the cap is three times the human planner's n
            assert all((o.states != UNDECIDED).all() == o.decided for o in found)
        else:
            assert 0.65 <= decided <= 0.95, strategy
    human = plans["human fixed"]
    assert plans["PPI uniform"] < 0.65 * human  # 1 - 0.7^2 = 0.51 of the variance


def test_decisions_simulate_the_reports_active_estimator_keeps_type_i_and_coverage_and_needs_fewer_contexts():
    """empeval's single active draw as `study sample` draws it and the report estimates it (Poisson, the judge's
    weight tuned per stratum of the probability): on 100 seeded studies its type-I error and coverage hold as every
    other strategy's do, and the pilot sizes it below uniform PPI (drawn and estimated the same way), whose only
    difference is the probabilities."""
    design = SMALL
    plan = pilot(design, np.random.default_rng(7), size=20_000, residual=True, residual_studies=12,
                 residual_rules=(ACTIVE_AS_DRAWN, POISSON_UNIFORM))
    plans = plans_for(design, plan)
    assert plans[ACTIVE_AS_DRAWN] < plans[POISSON_UNIFORM]
    truth, n = design.true_differences, 100
    found = [run_strategy(design, ACTIVE_AS_DRAWN, simulate_pool(design, np.random.default_rng(2000 + seed)),
                          np.random.default_rng([seed, 99]), planned=plans[ACTIVE_AS_DRAWN],
                          human_planned=plans["human fixed"], sequence_half_width=sequence_half_width, plan=plan)
             for seed in range(n)]
    type_i = np.mean([wrong_direction(o.states, truth)[truth == 0].any() for o in found])
    assert type_i <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / n)
    assert np.mean([o.covered.all() for o in found]) >= 0.87  # nominal 0.95; 0.87 is 3.7 SE below
    assert 0.6 <= np.mean([o.decided for o in found]) <= 0.95
