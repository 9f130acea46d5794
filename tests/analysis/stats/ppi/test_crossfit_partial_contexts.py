"""Cross-PPI paired differences when a context is rated for one system and not the other (a study in progress):
the pair gets an estimate, an interval and a p-value, not NaN (issue 28's walkthrough showed n/a for every pair
of the learned judge with 24 human-rated contexts), and the partial context's judge difference comes from the
one fold model that never saw it."""

from __future__ import annotations

import numpy as np
import pytest

from empeval.analysis.simulate.judges import BIASED_JUDGE, simulate_judged_study
from empeval.analysis.stats.ppi.crossfit import cross_fit_judge, crossppi_paired_differences


@pytest.fixture
def study():
    return simulate_judged_study(judge=BIASED_JUDGE, n_contexts=60, human_share=0.4, seed=3)


def fitted(study, ratings):
    items = study.judge_scores[["context_id", "system"]].reset_index(drop=True)
    systems = sorted(items["system"].unique())
    features = np.column_stack([study.judge_scores["judge_score"].to_numpy(dtype=float),
                                *[(items["system"] == s).to_numpy(dtype=float) for s in systems]])
    return cross_fit_judge(items, features, ratings, n_folds=5)


def test_a_context_rated_for_one_system_only_leaves_every_pair_with_numbers(study):
    ratings = study.human_ratings
    partial = study.rated_contexts[:3]
    ratings = ratings.loc[~(ratings["context_id"].isin(partial) & (ratings["system"] == "gold"))]
    scores = fitted(study, ratings)
    pairs = crossppi_paired_differences(scores, human_ratings=ratings)
    assert pairs[["crossppi_ci_low", "crossppi_ci_high", "p_crossppi", "p_adj"]].notna().all().all()
    gold = pairs.loc[(pairs["system_a"] == "baseline") & (pairs["system_b"] == "gold")].iloc[0]
    assert (gold["n_human"], gold["n_judge_only"]) == (21, 39)
    other = pairs.loc[(pairs["system_a"] == "baseline") & (pairs["system_b"] == "moel")].iloc[0]
    assert other["n_human"] == 24


def test_the_partial_contexts_difference_is_its_own_fold_models(study):
    ratings = study.human_ratings
    context = study.rated_contexts[0]
    ratings = ratings.loc[~((ratings["context_id"] == context) & (ratings["system"] == "gold"))]
    scores = fitted(study, ratings)
    from empeval.analysis.stats.ppi.crossfit import _fold_differences

    part = scores.loc[scores["criterion"] == "empathy"]
    fold_columns = [c for c in scores.columns if c.startswith("fold_score_")]
    wide = part.pivot(index="context_id", columns="system", values=["label", "judge_score", "fold", *fold_columns])
    difference = _fold_differences(wide.xs("baseline", axis=1, level=1), wide.xs("gold", axis=1, level=1),
                                   fold_columns)
    baseline = part.loc[(part["context_id"] == context) & (part["system"] == "baseline")].iloc[0]
    gold = part.loc[(part["context_id"] == context) & (part["system"] == "gold")].iloc[0]
    k = int(baseline["fold"])
    assert k >= 0 and int(gold["fold"]) == -1
    expected = baseline["judge_score"] - gold[f"fold_score_{k}"]
    assert difference.loc[context, fold_columns].tolist() == pytest.approx([expected] * len(fold_columns))
