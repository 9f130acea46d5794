"""Judge-human agreement (analysis.stats.ppi.agreement) is measured against the item label and equals the
reference implementations: krippendorff's alpha, scipy's Spearman."""

from __future__ import annotations

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from empeval.analysis.simulate.judges import GOOD_JUDGE, simulate_judged_study
from empeval.analysis.stats.bootstrap import resample_weights
from empeval.analysis.stats.ppi.agreement import calibration_table, interval_alpha_two_coders, judge_agreement


@pytest.fixture(scope="module")
def study():
    return simulate_judged_study(judge=GOOD_JUDGE, n_contexts=80, human_share=0.5, seed=5)


def test_closed_form_alpha_equals_the_krippendorff_package_with_and_without_resampling():
    rng = np.random.default_rng(3)
    a = np.round(rng.normal(3.5, 0.8, 30) * 3) / 3
    b = a * 0.6 + 1.5 + rng.normal(0, 0.4, 30)
    expected = krippendorff.alpha(reliability_data=np.vstack([a, b]), level_of_measurement="interval")
    assert interval_alpha_two_coders(a, b) == pytest.approx(expected, abs=1e-10)
    weights = resample_weights(30, n_boot=3, seed=1)
    boot = interval_alpha_two_coders(a, b, unit_weights=weights)
    for row, alpha in zip(weights, boot, strict=True):
        drawn = np.repeat(np.arange(30), row)
        assert alpha == pytest.approx(krippendorff.alpha(reliability_data=np.vstack([a[drawn], b[drawn]]),
                                                         level_of_measurement="interval"), abs=1e-10)


def test_agreement_is_against_the_mean_of_each_item_s_ratings(study):
    table = judge_agreement(study.human_ratings, study.judge_scores, n_boot=200)
    labels = study.human_ratings.groupby(["system", "context_id"])["score"].mean().rename("label")
    joined = study.judge_scores.join(labels, on=["system", "context_id"], how="inner")
    assert list(table["system"]) == ["(all)", "baseline", "gold", "moel"]
    for row in table.itertuples():
        part = joined if row.system == "(all)" else joined.loc[joined["system"] == row.system]
        assert row.n_items == len(part)
        assert row.spearman == pytest.approx(stats.spearmanr(part["label"], part["judge_score"]).statistic)
        assert row.pearson == pytest.approx(np.corrcoef(part["label"], part["judge_score"])[0, 1])
        assert row.alpha_interval == pytest.approx(krippendorff.alpha(
            reliability_data=np.vstack([part["label"], part["judge_score"]]), level_of_measurement="interval"))
        assert row.alpha_ci_low < row.alpha_interval < row.alpha_ci_high
        assert row.n_boot_defined == 200


def test_a_shifted_judge_keeps_its_ranks_but_loses_alpha(study):
    shifted = study.judge_scores.assign(judge_score=study.judge_scores["judge_score"] + 1.5)
    plain = judge_agreement(study.human_ratings, study.judge_scores, n_boot=0).set_index("system")
    moved = judge_agreement(study.human_ratings, shifted, n_boot=0).set_index("system")
    assert moved["spearman"].to_numpy() == pytest.approx(plain["spearman"].to_numpy())
    assert (moved["alpha_interval"] < plain["alpha_interval"] - 0.3).all()
    assert moved.loc["(all)", "judge_mean"] - moved.loc["(all)", "label_mean"] == pytest.approx(
        plain.loc["(all)", "judge_mean"] - plain.loc["(all)", "label_mean"] + 1.5)


def test_calibration_bins_cover_every_rated_item_and_average_its_labels(study):
    table = calibration_table(study.human_ratings, study.judge_scores, n_bins=4)
    labels = study.human_ratings.groupby(["system", "context_id"])["score"].mean().rename("label")
    joined = study.judge_scores.join(labels, on=["system", "context_id"], how="inner")
    assert table["n_items"].sum() == len(joined) and list(table["bin"]) == [1, 2, 3, 4]
    assert (table["judge_low"].to_numpy()[1:] > table["judge_high"].to_numpy()[:-1]).all()
    for row in table.itertuples():
        inside = joined.loc[joined["judge_score"].between(row.judge_low, row.judge_high)]
        assert row.n_items == len(inside) and row.label_mean == pytest.approx(inside["label"].mean())


def test_a_judge_answering_on_the_scale_gets_one_bin_per_answer(study):
    discrete = study.judge_scores.assign(judge_score=study.judge_scores["judge_score"].round().clip(1, 5))
    table = calibration_table(study.human_ratings, discrete, n_bins=5)
    rated = discrete.loc[discrete["context_id"].isin(study.rated_contexts), "judge_score"]
    assert list(table["judge_low"]) == sorted(rated.unique()) and (table["judge_low"] == table["judge_high"]).all()
    assert list(table["n_items"]) == rated.value_counts().sort_index().tolist()


def test_agreement_refuses_missing_judge_scores_unless_allowed(study):
    judge = study.judge_scores.copy()
    judge.loc[judge["context_id"] == study.rated_contexts[0], "judge_score"] = np.nan
    with pytest.raises(ValueError, match="allow_missing=True"):
        judge_agreement(study.human_ratings, judge)
    table = judge_agreement(study.human_ratings, judge, n_boot=0, allow_missing=True)
    assert table.set_index("system").loc["(all)", "n_items"] == 40 * 3 - 3
    assert isinstance(calibration_table(study.human_ratings, judge, allow_missing=True), pd.DataFrame)
