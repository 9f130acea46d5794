"""The planner (analysis.stats.ppi.planner): its PPI++ variance formula matches the spread of PPI estimates in
simulated studies, and the contexts it asks for are the fewest that reach the target half-width."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from empeval.analysis.simulate.judges import GOOD_JUDGE, analyse_judged_arrays, simulate_judged_study
from empeval.analysis.stats.power import Components
from empeval.analysis.stats.ppi.planner import human_ratings_needed, label_sd_from_components, ppi_half_width

Z95 = stats.norm.ppf(0.975)


def test_the_formula_predicts_the_spread_of_simulated_ppi_estimates():
    # One context per batch (items_per_assignment = number of systems): no shared batches within a system,
    # the independent-contexts setting the formula assumes.
    errors, human_errors, correlations, sds = [], [], [], []
    for seed in range(120):
        study = simulate_judged_study(judge=GOOD_JUDGE, n_contexts=400, human_share=0.2, items_per_assignment=3,
                                      seed=seed)
        means, _ = analyse_judged_arrays(study.arrays)
        truth = dict(zip(study.arrays["systems"], study.arrays["true_means"], strict=True))
        errors += [row["ppi_mean"] - truth[row["system"]] for row in means]
        human_errors += [row["human_mean"] - truth[row["system"]] for row in means]
        correlations += [row["correlation"] for row in means]
        sds += [(row["human_ci_high"] - row["human_ci_low"]) / (2 * Z95) * math.sqrt(row["n_human"]) for row in means]
    rho, sigma = float(np.mean(correlations)), float(np.mean(sds))
    predicted = ppi_half_width(80, judge_correlation=rho, label_sd=sigma, n_contexts=400) / Z95
    human = ppi_half_width(80, judge_correlation=0.0, label_sd=sigma, n_contexts=400) / Z95
    assert np.std(errors) == pytest.approx(predicted, rel=0.12)
    assert np.std(human_errors) == pytest.approx(human, rel=0.12)
    assert np.std(errors) / np.std(human_errors) == pytest.approx(predicted / human, rel=0.08)


@pytest.mark.parametrize("rho", [0.0, 0.3, 0.7, 0.9])
@pytest.mark.parametrize("n_contexts", [None, 600, 2000])
def test_the_planned_contexts_are_the_fewest_that_reach_the_half_width(rho, n_contexts):
    plan = human_ratings_needed(rho, half_width=0.09, label_sd=0.75, n_contexts=n_contexts).iloc[0]
    n = int(plan["contexts_with_judge"])
    assert ppi_half_width(n, judge_correlation=rho, label_sd=0.75, n_contexts=n_contexts) <= 0.09
    assert ppi_half_width(n - 1, judge_correlation=rho, label_sd=0.75, n_contexts=n_contexts) > 0.09
    n0 = int(plan["contexts_human_only"])
    assert Z95 * 0.75 / math.sqrt(n0) <= 0.09 < Z95 * 0.75 / math.sqrt(n0 - 1)
    assert plan["ratings_with_judge"] == 3 * n and plan["saving"] == pytest.approx(1 - n / n0)


def test_with_unbounded_contexts_the_judge_saves_rho_squared():
    plan = human_ratings_needed([0.5, 0.7], half_width=0.05, label_sd=0.8, raters_per_item=3, n_systems=4)
    assert list(plan["contexts_human_only"]) == [984, 984]  # ceil(1.96^2 0.64 / 0.0025)
    assert list(plan["contexts_with_judge"]) == [math.ceil(983.4 * 0.75), math.ceil(983.4 * 0.51)]
    assert list(plan["ratings_human_only"]) == [984 * 12, 984 * 12]


def test_a_target_out_of_reach_of_the_scored_contexts_is_reported_not_invented():
    plan = human_ratings_needed(0.9, half_width=0.03, label_sd=0.8, n_contexts=1000).iloc[0]
    assert np.isnan(plan["contexts_with_judge"]) and "score more contexts" in plan["note"]


def test_label_sd_comes_from_the_design_components():
    c = Components(context_sd=0.3, response_sd=0.4, rater_sd=0.5, noise_sd=0.6)
    assert label_sd_from_components(c, raters_per_item=2) == pytest.approx(math.sqrt(0.09 + 0.16 + (0.25 + 0.36) / 2))
    default = human_ratings_needed(0.5, half_width=0.1).iloc[0]
    assert default["label_sd"] == pytest.approx(label_sd_from_components(Components(), raters_per_item=3))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"judge_correlation": 1.5, "half_width": 0.1}, "judge_correlation must be in"),
    ({"judge_correlation": 0.5, "half_width": 0.0}, "half_width must be positive"),
    ({"judge_correlation": 0.5, "half_width": 0.1, "label_sd": -1.0}, "label_sd must be positive"),
    ({"judge_correlation": 0.5, "half_width": 0.1, "ci_level": 95}, "ci_level must be strictly between"),
    ({"judge_correlation": 0.5, "half_width": 0.1, "n_contexts": 1}, "n_contexts must be at least 2"),
])
def test_bad_plans_are_refused_by_option_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        human_ratings_needed(**kwargs)
