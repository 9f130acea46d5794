"""The crossed-random-intercepts fit (analysis.stats.crossed) against statsmodels' MixedLM (REML) on small designs."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.stats.crossed import fit_crossed
from empeval.analysis.stats.rater_aware import mixed_model_pairs

EFFECTS = np.array([0.9, 0.3, 0.2, 0.0, -0.6])


def _design(n_annotators, n_items, *, balanced, k=3, seed=0):
    rng = np.random.default_rng(seed)
    if balanced:
        annotator, item = np.repeat(np.arange(n_annotators), n_items), np.tile(np.arange(n_items), n_annotators)
    else:
        item = np.repeat(np.arange(n_items), k)
        annotator = np.concatenate([rng.choice(n_annotators, k, replace=False) for _ in range(n_items)])
    system = item % 5
    y = (3 + EFFECTS[system] + rng.normal(0, 0.4, n_annotators)[annotator] + rng.normal(0, 0.5, n_items)[item]
         + rng.normal(0, 0.7, item.size))
    X = np.column_stack([np.ones(item.size)] + [(system == s).astype(float) for s in range(1, 5)])
    return y, X, annotator, item, system


def _statsmodels(y, system, annotator, item):
    import statsmodels.formula.api as smf

    frame = pd.DataFrame({"y": y, "s": system, "a": annotator, "i": item, "g": 0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return smf.mixedlm("y ~ C(s)", frame, groups="g", re_formula="0",
                           vc_formula={"a": "0 + C(a)", "i": "0 + C(i)"}).fit(reml=True)


@pytest.mark.parametrize("refine", [True, False], ids=["reml-refined", "moments-only"])
def test_balanced_design_matches_statsmodels_reml(refine):
    y, X, annotator, item, system = _design(8, 40, balanced=True, seed=1)
    fit = fit_crossed(y, X, {"annotator": annotator, "item": item}, reml_max_levels=600 if refine else 0)
    reference = _statsmodels(y, system, annotator, item)
    assert np.max(np.abs(fit.fe_params - reference.fe_params.to_numpy())) < 1e-3
    ours = np.array([fit.variances["annotator"], fit.variances["item"], fit.variances["residual"]])
    theirs = np.array([*reference.vcomp, reference.scale])
    assert np.max(np.abs(ours / theirs - 1)) < 0.01


@pytest.mark.parametrize("seed", [2, 3])
def test_unbalanced_design_fixed_effects_match_statsmodels_reml(seed):
    y, X, annotator, item, system = _design(15, 100, balanced=False, seed=seed)
    fit = fit_crossed(y, X, {"annotator": annotator, "item": item})
    reference = _statsmodels(y, system, annotator, item)
    assert np.max(np.abs(fit.fe_params - reference.fe_params.to_numpy())) < 1e-3
    assert np.allclose(np.sqrt(np.diag(fit.cov_params)), reference.bse_fe.to_numpy(), rtol=0.01)


def test_moment_estimates_on_unbalanced_designs_are_nearly_unbiased_and_tests_keep_their_level():
    """By simulation (moments only, no REML refinement), 40 unbalanced designs with all systems equal: the
    mean estimates lie near the truth (0.16, 0.25, 0.49), and the Wald test of a pair rejects near 5%."""
    estimates, rejections = [], []
    for seed in range(40):
        y, X, annotator, item, system = _design(30, 200, balanced=False, seed=100 + seed)
        y = y - EFFECTS[system]  # all systems equal: every pair is a true null
        fit = fit_crossed(y, X, {"annotator": annotator, "item": item}, reml_max_levels=0)
        estimates.append([fit.variances["annotator"], fit.variances["item"], fit.variances["residual"]])
        se = np.sqrt(fit.cov_params[1, 1] + fit.cov_params[2, 2] - 2 * fit.cov_params[1, 2])
        rejections.append(abs(fit.fe_params[1] - fit.fe_params[2]) / se > 1.96)
    mean = np.mean(estimates, axis=0)
    assert np.allclose(mean, [0.16, 0.25, 0.49], atol=0.05)
    assert np.mean(rejections) <= 0.15


def test_one_annotator_gives_nan_with_a_reason(simulated_ratings):
    alone = simulated_ratings.assign(annotator="only-one")
    pairs = mixed_model_pairs(alone, criterion="empathy")
    assert pairs["lmm_diff"].isna().all()
    assert pairs["lmm_note"].str.contains("only one annotator").all()


def test_items_each_rated_by_one_annotator_give_nan_with_a_reason(simulated_ratings):
    single = simulated_ratings.drop_duplicates(["item", "criterion"])
    pairs = mixed_model_pairs(single, criterion="empathy")
    assert pairs["lmm_diff"].isna().all()
    assert pairs["lmm_note"].str.contains("does not cross").all()


def test_moments_and_statsmodels_agree_on_the_simulated_study(simulated_ratings):
    ours = mixed_model_pairs(simulated_ratings, criterion="empathy")
    theirs = mixed_model_pairs(simulated_ratings, criterion="empathy", method="statsmodels")
    assert np.max(np.abs(ours["lmm_diff"] - theirs["lmm_diff"])) < 1e-3


@pytest.mark.parametrize("seed", [2, 3])
def test_unbalanced_small_design_variance_components_are_statsmodels_reml_within_one_percent(seed):
    """Small designs (<= 600 levels) are refined to the REML optimum: on an unbalanced one the components then
    match MixedLM's REML within 1% (the moment estimates alone need not: they are unbiased, not REML)."""
    y, X, annotator, item, system = _design(15, 100, balanced=False, seed=seed)
    fit = fit_crossed(y, X, {"annotator": annotator, "item": item})
    reference = _statsmodels(y, system, annotator, item)
    ours = np.array([fit.variances["annotator"], fit.variances["item"], fit.variances["residual"]])
    theirs = np.array([*reference.vcomp, reference.scale])
    assert np.max(np.abs(ours / theirs - 1)) < 0.01
