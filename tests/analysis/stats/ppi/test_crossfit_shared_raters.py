"""Cross-prediction-powered inference with shared raters (analysis.stats.ppi.crossfit): given the human ratings,
the intervals are ppi_py's widened by exactly the shared-rater term analysis.stats.ppi.estimates adds to PPI++,
ratings that do not give the scores' labels are refused, and on simulated studies whose raters share batches
(analysis.simulate.judges) the 95% intervals of a learned judge cover the truth."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from empeval.analysis.simulate.judges import BIASED_JUDGE, GOOD_JUDGE, cross_fitted_estimates, simulate_judged_study
from empeval.analysis.stats.ppi.crossfit import cross_fit_judge, crossppi_paired_differences, crossppi_system_means
from empeval.analysis.stats.ppi.estimates import shared_rater_variance
from empeval.analysis.stats.ppi.tables import item_labels

Z95 = stats.norm.ppf(0.975)


@pytest.fixture(scope="module")
def fitted():
    study = simulate_judged_study(judge=BIASED_JUDGE, n_contexts=160, human_share=0.25, seed=9)
    items = study.judge_scores[["context_id", "system"]].reset_index(drop=True)
    features = np.column_stack([study.judge_scores["judge_score"], items["system"] == "gold",
                                items["system"] == "moel"]).astype(float)
    return study, cross_fit_judge(items, features, study.human_ratings, n_folds=4, seed=2)


def test_the_interval_is_ppi_pys_widened_by_the_shared_rater_term(fitted):
    study, scores = fitted
    plain = crossppi_system_means(scores).set_index("system")
    clustered = crossppi_system_means(scores, human_ratings=study.human_ratings).set_index("system")
    ratings = study.human_ratings.merge(item_labels(study.human_ratings), on=["criterion", "system", "context_id"])
    for system in ("baseline", "gold", "moel"):
        mine = ratings.loc[ratings["system"] == system]
        labels = item_labels(mine)["label"]
        extra = shared_rater_variance((mine["score"] - labels.mean()) / mine["n_ratings"], mine["context_id"],
                                      mine["assignment_id"], n_items=labels.size)
        assert clustered.loc[system, "rater_variance"] == pytest.approx(extra)
        half = (plain.loc[system, "crossppi_ci_high"] - plain.loc[system, "crossppi_ci_low"]) / 2
        widened = Z95 * np.sqrt((half / Z95) ** 2 + extra)
        assert clustered.loc[system, "crossppi_mean"] == plain.loc[system, "crossppi_mean"]
        assert (clustered.loc[system, "crossppi_ci_high"] - clustered.loc[system, "crossppi_mean"]) == pytest.approx(
            widened)
        assert clustered.loc[system, "effective_n_human"] == pytest.approx(
            clustered.loc[system, "n_human"] / clustered.loc[system, "width_ratio"] ** 2)
    assert (clustered["rater_variance"] > 0).sum() >= 2 and (plain["rater_variance"] == 0).all()
    # cluster_by=None is ppi_py's interval exactly, ratings or not.
    independent = crossppi_system_means(scores, human_ratings=study.human_ratings, cluster_by=None)
    assert independent["crossppi_ci_low"].tolist() == plain["crossppi_ci_low"].tolist()


def test_paired_differences_get_the_term_of_both_sides(fitted):
    study, scores = fitted
    plain = crossppi_paired_differences(scores)
    clustered = crossppi_paired_differences(scores, human_ratings=study.human_ratings)
    widened = clustered["rater_variance"] > 0
    assert widened.sum() >= 2 and (clustered["crossppi_diff"] == plain["crossppi_diff"]).all()
    width, plain_width = (t["crossppi_ci_high"] - t["crossppi_ci_low"] for t in (clustered, plain))
    assert (width[widened] > plain_width[widened]).all() and (width[~widened] == plain_width[~widened]).all()
    assert (clustered["p_crossppi"] >= plain["p_crossppi"]).all()


def test_ratings_that_do_not_give_the_scores_labels_are_refused(fitted):
    study, scores = fitted
    shifted = study.human_ratings.assign(score=study.human_ratings["score"] + 1)
    with pytest.raises(ValueError, match="human_ratings do not give the labels of cross_fit_scores"):
        crossppi_system_means(scores, human_ratings=shifted)
    with pytest.raises(ValueError, match="cluster_by='batch' is not a column of human_ratings"):
        crossppi_system_means(scores, human_ratings=study.human_ratings, cluster_by="batch")


@pytest.mark.slow  # 30 simulated studies per judge, each cross-fitted and analysed through the DataFrame layer: 20-30 s
@pytest.mark.parametrize("judge", [BIASED_JUDGE, GOOD_JUDGE], ids=lambda judge: judge.name)
def test_crossppi_intervals_cover_the_truth_with_shared_raters(judge):
    hits: dict[str, list[bool]] = {"means": [], "pairs": []}
    for seed in range(200, 230):
        study = simulate_judged_study(judge=judge, n_contexts=200, human_share=0.25, seed=seed)
        truth = dict(zip(study.true_means["system"], study.true_means["true_mean"], strict=True))
        means, pairs = cross_fitted_estimates(study, seed=seed)
        true = means["system"].map(truth)
        hits["means"] += list((means["crossppi_ci_low"] <= true) & (true <= means["crossppi_ci_high"]))
        true = pairs["system_a"].map(truth) - pairs["system_b"].map(truth)
        hits["pairs"] += list((pairs["crossppi_ci_low"] <= true) & (true <= pairs["crossppi_ci_high"]))
        hits.setdefault("widened", []).append(bool((means["rater_variance"] > 0).any()))
    # 90 intervals of each kind: a 95% interval covers at least 86 of 90 about 70% of the time, 82 almost surely.
    assert np.mean(hits["means"]) >= 0.9 and np.mean(hits["pairs"]) >= 0.9 and np.mean(hits["widened"]) > 0.5
