"""The checks of the two input tables (analysis.stats.ppi.tables): bad input to the model-assisted estimates is
refused with a message naming what was wrong and the option that fixes it; the judge's failures are listed, and
dropped only on request."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.simulate.judges import GOOD_JUDGE, simulate_judged_study
from empeval.analysis.stats.ppi.estimates import ppi_paired_differences, ppi_system_means
from empeval.analysis.stats.ppi.tables import check_human_share, judge_failures


@pytest.fixture(scope="module")
def study():
    return simulate_judged_study(judge=GOOD_JUDGE, n_contexts=60, human_share=0.25, seed=11)


@pytest.mark.parametrize("share", [0, 0.0, 1, 1.0, -0.2, 1.5, float("nan"), "0.2", True])
def test_a_human_share_outside_zero_one_is_refused_naming_the_option(share):
    with pytest.raises(ValueError, match="human_share"):
        check_human_share(share, n_contexts=400)


def test_a_human_share_giving_fewer_than_two_contexts_is_refused():
    with pytest.raises(ValueError, match=r"human_share=0.003 of 400 contexts gives 1 human-rated context"):
        check_human_share(0.003, n_contexts=400)
    assert check_human_share(0.005, n_contexts=400) == 2
    with pytest.raises(ValueError, match="human_share=0.99 of 50 contexts leaves no context for the judge"):
        check_human_share(0.99, n_contexts=50)


def test_a_system_nobody_rated_is_refused_as_a_human_share_of_zero(study):
    ratings = study.human_ratings.loc[study.human_ratings["system"] != "moel"]
    with pytest.raises(ValueError, match=r"'moel', criterion 'empathy': 0 human-rated context\(s\).*human_share"):
        ppi_system_means(ratings, study.judge_scores)


def test_one_rated_context_per_system_is_refused(study):
    first = study.rated_contexts[0]
    ratings = study.human_ratings.loc[study.human_ratings["context_id"] == first]
    with pytest.raises(ValueError, match=r"1 human-rated context\(s\); .* at least 2 per system.*human_share"):
        ppi_system_means(ratings, study.judge_scores)
    with pytest.raises(ValueError, match=r"systems 'baseline' and 'gold'.*1 human-rated.*human_share"):
        ppi_paired_differences(ratings, study.judge_scores)


def test_every_context_rated_is_refused_as_a_human_share_of_one(study):
    judge = study.judge_scores.loc[study.judge_scores["context_id"].isin(study.rated_contexts)]
    with pytest.raises(ValueError, match="a human share of 1.*lower the study's human_share"):
        ppi_system_means(study.human_ratings, judge)


def test_missing_judge_scores_are_refused_unless_allow_missing_and_then_counted(study):
    judge = study.judge_scores.copy()
    unrated = judge.index[~judge["context_id"].isin(study.rated_contexts) & (judge["system"] == "gold")][:3]
    rated = judge.index[judge["context_id"].isin(study.rated_contexts) & (judge["system"] == "moel")][:1]
    judge.loc[unrated.union(rated), "judge_score"] = np.nan
    with pytest.raises(ValueError, match=r"no score for 4 item\(s\).*judge_failures\(\).*allow_missing=True"):
        ppi_system_means(study.human_ratings, judge)
    with pytest.raises(ValueError, match="allow_missing=True"):
        ppi_paired_differences(study.human_ratings, judge)
    failures = judge_failures(judge, study.human_ratings)
    assert len(failures) == 4 and set(failures["reason"]) == {"no score"}
    assert sorted(failures["system"]) == ["gold", "gold", "gold", "moel"]

    means = ppi_system_means(study.human_ratings, judge, allow_missing=True).set_index("system")
    assert means["n_dropped_missing"].to_dict() == {"baseline": 0, "gold": 3, "moel": 1}
    assert means.loc["gold", "n_judge_only"] == 45 - 3 and means.loc["moel", "n_human"] == 15 - 1
    # Dropping is the same as removing those items from both tables.
    dropped = judge.loc[judge["judge_score"].isna(), ["context_id", "system"]]
    keep = ~study.human_ratings.set_index(["context_id", "system"]).index.isin(
        pd.MultiIndex.from_frame(dropped))
    expected = ppi_system_means(study.human_ratings.loc[keep], judge.dropna(subset=["judge_score"]))
    pd.testing.assert_frame_equal(means.reset_index().drop(columns="n_dropped_missing"),
                                  expected.drop(columns="n_dropped_missing")[means.reset_index().columns.drop(
                                      "n_dropped_missing")])


def test_a_rated_item_the_judge_never_scored_counts_as_missing(study):
    first = study.rated_contexts[0]
    judge = study.judge_scores.loc[~((study.judge_scores["context_id"] == first)
                                     & (study.judge_scores["system"] == "gold"))]
    with pytest.raises(ValueError, match=r"no score for 1 item\(s\).*system 'gold', context '" + first):
        ppi_system_means(study.human_ratings, judge)
    failures = judge_failures(judge, study.human_ratings)
    assert failures[["system", "context_id", "reason"]].values.tolist() == [["gold", first, "not scored"]]


def test_several_judges_need_one_chosen_by_name(study):
    both = pd.concat([study.judge_scores, study.judge_scores.assign(judge="length", judge_score=1.0)])
    with pytest.raises(ValueError, match=r"several judges \('good', 'length'\): choose one with judge="):
        ppi_system_means(study.human_ratings, both)
    with pytest.raises(ValueError, match=r"judge='llm' has no scores in judge_scores; it holds 'good', 'length'"):
        ppi_system_means(study.human_ratings, both, judge="llm")
    pd.testing.assert_frame_equal(ppi_system_means(study.human_ratings, both, judge="good"),
                                  ppi_system_means(study.human_ratings, study.judge_scores))


@pytest.mark.parametrize(("change", "message"), [
    (lambda r, j: (r.drop(columns="score"), j), r"human_ratings needs column\(s\) 'score'"),
    (lambda r, j: (r, j.drop(columns="judge_score")), r"judge_scores needs column\(s\) 'judge_score'"),
    (lambda r, j: (r.assign(score="five"), j), "human_ratings: column 'score' must hold numbers; row 0"),
    (lambda r, j: (r, j.assign(judge_score="high")), "judge_scores: column 'judge_score' must hold numbers"),
    (lambda r, j: (r, pd.concat([j, j.head(1)])), "more than one score for an item"),
    (lambda r, j: (r.drop(columns="assignment_id"), j), "cluster_by='assignment_id' is not a column"),
])
def test_malformed_tables_are_refused_saying_what_and_where(study, change, message):
    ratings, judge = change(study.human_ratings, study.judge_scores)
    with pytest.raises(ValueError, match=message):
        ppi_system_means(ratings, judge)


def test_bad_science_options_are_refused_by_name(study):
    with pytest.raises(ValueError, match="ci_level must be strictly between 0 and 1"):
        ppi_system_means(study.human_ratings, study.judge_scores, ci_level=95)
    with pytest.raises(ValueError, match="family must be one of"):
        ppi_paired_differences(study.human_ratings, study.judge_scores, family="everything")
