"""The report's model-assisted tables (analysis.report.judged) on simulated studies, without a store: the
estimates are analysis.stats.ppi's own, a judge failure is refused with its count unless missing items are
allowed (then dropped with their ratings and counted), a learned judge's stored folds meet ratings that changed
since it was fitted, and the calibration figure draws the identity line."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.report.judged import (
    ACTIVE_CROSS_FIT_REFUSED,
    ACTIVE_PPI,
    CROSS_PPI,
    JudgeCoverageError,
    calibration_plot,
    judged_blocks,
    judged_tables,
)
from empeval.analysis.simulate.judges import GOOD_JUDGE, simulate_judged_study
from empeval.analysis.stats.ppi.active import MAX_PROBABILITY_STRATA
from empeval.analysis.stats.ppi.crossfit import cross_fit_judge
from empeval.analysis.stats.ppi.estimates import ppi_paired_differences, ppi_system_means


@pytest.fixture(scope="module")
def study():
    return simulate_judged_study(judge=GOOD_JUDGE, n_contexts=120, human_share=0.25, seed=4)


def tables_of(study, scores=None, **options):
    return judged_tables(study.human_ratings, study.judge_scores if scores is None else scores, judge="good",
                         n_boot=50, **options)


def test_the_tables_are_analysis_judged_estimates(study):
    tables = tables_of(study)
    expected = ppi_system_means(study.human_ratings, study.judge_scores)
    pd.testing.assert_frame_equal(tables.means, expected)
    pd.testing.assert_frame_equal(tables.pairs, ppi_paired_differences(study.human_ratings, study.judge_scores))
    assert tables.failures.empty and tables.n_dropped == 0 and tables.why_not_estimated == ""
    assert set(tables.agreement["system"]) == {"(all)", "baseline", "gold", "moel"}


def test_a_failure_is_refused_with_its_count_then_dropped_and_counted(study):
    scores = study.judge_scores.copy()
    rated = scores["context_id"].isin(study.rated_contexts)
    failed = scores.index[rated][:2].tolist() + scores.index[~rated][:1].tolist()
    scores.loc[failed, "judge_score"] = np.nan
    scores["error"] = None
    scores.loc[failed, "error"] = "HTTP 500"
    with pytest.raises(JudgeCoverageError, match=r"no score for 3 item\(s\).*HTTP 500.*--allow-missing") as caught:
        tables_of(study, scores)
    assert caught.value.n_failed == 3
    tables = tables_of(study, scores, allow_missing=True)
    assert tables.n_dropped == 3 and list(tables.failures["error"]) == ["HTTP 500"] * 3
    assert int((tables.means["n_human"] + tables.means["n_judge_only"]).sum()) == len(scores) - 3
    assert tables.means["n_dropped_missing"].sum() == 0  # dropped before the estimates, with their ratings
    text = "\n".join(getattr(block, "text", "") for block in judged_blocks(
        tables, figure_png=None, figure_path="", correction_name="Holm-Bonferroni",
        family_words="all pairs within each criterion", alpha=0.05, ci_level=0.95, n_boot=50))
    assert "**3 item(s) the judge failed on were dropped**" in text and "(allow missing): 3." in text


def test_a_learned_judges_folds_meet_ratings_changed_since_it_was_fitted(study):
    items = study.judge_scores[["context_id", "system"]].reset_index(drop=True)
    features = np.column_stack([study.judge_scores["judge_score"], items["system"] == "gold"]).astype(float)
    fitted = cross_fit_judge(items, features, study.human_ratings, n_folds=3, seed=1)
    ratings = study.human_ratings
    lost = study.rated_contexts[0]  # its raters were excluded since the fit
    gained = sorted(set(items["context_id"]) - set(study.rated_contexts))[0]  # rated since the fit
    extra = ratings.loc[ratings["context_id"] == study.rated_contexts[1]].assign(context_id=gained)
    now = pd.concat([ratings.loc[ratings["context_id"] != lost], extra], ignore_index=True)
    scores = fitted.drop(columns="label")
    tables = judged_tables(now, scores, judge="learned", cross_fitted=True, n_boot=50)
    assert tables.estimator == CROSS_PPI and tables.n_folds == 3 and tables.n_refitted == 2 * 3
    assert tables.means is not None and tables.means["crossppi_ci_low"].notna().all()
    assert (tables.means["n_human"] == len(study.rated_contexts)).all()
    assert "n_folds" in tables.means and "judge_diff_biased" in tables.pairs


def test_a_learned_judge_gets_no_unweighted_estimates_in_an_actively_sampled_study(study):
    """Cross-PPI weighs rated contexts alike; contexts drawn with unequal probabilities would bias it: refused,
    saying why and what to use, while the same judge's estimates of a uniformly sampled study are computed."""
    items = study.judge_scores[["context_id", "system"]].reset_index(drop=True)
    features = np.column_stack([study.judge_scores["judge_score"], items["system"] == "gold"]).astype(float)
    scores = cross_fit_judge(items, features, study.human_ratings, n_folds=3, seed=1).drop(columns="label")
    contexts = sorted(set(study.judge_scores["context_id"].astype(str)))
    rated = set(map(str, study.rated_contexts))
    drawn = pd.DataFrame({"context_id": contexts, "sampled": [c in rated for c in contexts],
                          "inclusion_probability": [0.4 if i % 2 else 0.15 for i in range(len(contexts))]})
    drawn.attrs.update(human_share=0.25, human_share_seed=4)
    refused = judged_tables(study.human_ratings, scores, judge="learned", cross_fitted=True, n_boot=50,
                            design_sample=drawn)
    assert refused.means is None and refused.pairs is None
    assert refused.why_not_estimated == ACTIVE_CROSS_FIT_REFUSED and "inverse-probability" in ACTIVE_CROSS_FIT_REFUSED
    assert ACTIVE_CROSS_FIT_REFUSED in " ".join(_section_text(refused).split())
    uniform = judged_tables(study.human_ratings, scores, judge="learned", cross_fitted=True, n_boot=50,
                            design_sample=drawn.drop(columns="inclusion_probability"))
    assert uniform.means is not None and uniform.estimator == CROSS_PPI


def test_an_actively_sampled_study_is_weighted_and_its_methods_say_how_the_judges_weight_was_tuned(study):
    """A judge that does not learn, contexts drawn with recorded unequal probabilities: the inverse-probability
    weighted estimator, and the methods name the active draw and the weight tuned per stratum of the probability."""
    contexts = sorted(set(study.judge_scores["context_id"].astype(str)))
    rated = set(map(str, study.rated_contexts))
    drawn = pd.DataFrame({"context_id": contexts, "sampled": [c in rated for c in contexts],
                          "inclusion_probability": [0.4 if i % 2 else 0.15 for i in range(len(contexts))]})
    drawn.attrs.update(human_share=0.25, human_share_seed=4)
    tables = tables_of(study, design_sample=drawn)
    assert tables.estimator == ACTIVE_PPI and tables.means["ppi_ci_low"].notna().all()
    text = " ".join(_section_text(tables).split())
    assert "Zrnic and Candès, ICML 2024" in text and "stratified PPI, Fisch et al." in text
    assert f"up to {MAX_PROBABILITY_STRATA} strata" in text
    uniform = " ".join(_section_text(tables_of(study)).split())
    assert "stratified PPI" not in uniform


def test_the_section_says_its_intervals_reach_new_raters_whichever_estimator_made_them(study):
    """--generalize raters: PPI++ on a judge's item scores and cross-PPI on a learned judge's both take the raters
    as a sample (wider intervals than for this study's raters), and the section names the target with the
    estimator."""
    plain = tables_of(study, generalize="raters")
    assert "PPI++) take the raters as a sample too" in plain.target_note
    assert "new raters and new contexts" in " ".join(_section_text(plain).split())
    items = study.judge_scores[["context_id", "system"]].reset_index(drop=True)
    features = np.column_stack([study.judge_scores["judge_score"], items["system"] == "gold"]).astype(float)
    scores = cross_fit_judge(items, features, study.human_ratings, n_folds=3, seed=1).drop(columns="label")
    learned = judged_tables(study.human_ratings, scores, judge="learned", cross_fitted=True, n_boot=50,
                            generalize="raters")
    assert learned.means is not None and "(cross-PPI) take the raters as a sample too" in learned.target_note
    assert "--generalize raters asks" in " ".join(_section_text(learned).split())
    fixed = judged_tables(study.human_ratings, scores, judge="learned", cross_fitted=True, n_boot=50)
    assert fixed.target_note == ""

    def widths(tables, low, high):
        return (tables.means[high] - tables.means[low]).to_numpy()

    # Clustered by rater instead of by assignment: one system's interval may come out narrower, but together they
    # widen (the raters' share is added, with t on the raters less one).
    over_raters, own_raters = (widths(t, "crossppi_ci_low", "crossppi_ci_high") for t in (learned, fixed))
    assert not np.allclose(over_raters, own_raters) and over_raters.sum() > own_raters.sum()


def test_the_calibration_figure_draws_the_identity_line(study):
    tables = tables_of(study)
    figure = calibration_plot(tables.calibration, criteria=["empathy"])
    axis = figure.axes[0]
    identity = [line for line in axis.get_lines() if line.get_linestyle() == "--"]
    assert len(identity) == 1 and list(identity[0].get_xdata()) == list(identity[0].get_ydata())
    assert axis.get_title() == "Empathy"


def _section_text(tables) -> str:
    return "\n".join(getattr(block, "text", "") for block in judged_blocks(
        tables, figure_png=None, figure_path="", correction_name="Holm-Bonferroni",
        family_words="all pairs within each criterion", alpha=0.05, ci_level=0.95, n_boot=50))


def test_the_design_sample_is_stated_and_sampled_contexts_left_unrated_are_warned_of(study):
    contexts = sorted(set(study.judge_scores["context_id"].astype(str)))
    rated = set(map(str, study.rated_contexts))
    sample = pd.DataFrame({"context_id": contexts, "sampled": [c in rated for c in contexts]})
    sample.attrs.update(human_share=0.25, human_share_seed=4)
    complete = tables_of(study, design_sample=sample)
    assert complete.design.n_sampled == len(rated) and complete.design.n_sampled_unrated == 0
    assert complete.design.n_contexts == len(contexts) == 120 and complete.design.n_rated_outside == 0
    assert (f"By design (human share 0.25, seed 4), people rate a seeded uniform random sample of {len(rated)} of "
            f"the study's 120 contexts; all {len(rated)} have human ratings.") in _section_text(complete)

    unrated = next(c for c in contexts if c not in rated)
    rated_outside = sorted(rated)[0]
    shifted = sample.assign(sampled=[(c in rated and c != rated_outside) or c == unrated for c in contexts])
    shifted.attrs.update(sample.attrs)
    warned = tables_of(study, design_sample=shifted)
    assert (warned.design.n_sampled_unrated, warned.design.n_rated_outside) == (1, 1)
    text = _section_text(warned)
    assert f"{len(rated) - 1} have human ratings so far. **1 sampled context(s) have no usable human rating**" in text
    assert "**1 context(s) outside the design's sample have human ratings**" in text
    assert "By design" not in _section_text(tables_of(study))  # no record, no claim about the design
