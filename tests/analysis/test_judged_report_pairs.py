"""The report's model-assisted section with a judge of differences (analysis.report.judged): its verdicts make the
paired differences (PPI++ with them as the predictor), the section prints the judge-human correlation of
differences beside the one of scores, verdicts that cannot be used leave the per-item pairs and say why; and a
learned judge's paired differences get numbers while a context is rated for some systems only (issue 28's
walkthrough: n/a for every CI, p and adjusted p, 24 human-rated contexts)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.report.document import Table
from empeval.analysis.report.judged import PAIR_PPI, judged_blocks, judged_tables
from empeval.analysis.simulate.judges import (
    BIASED_JUDGE,
    GOOD_JUDGE,
    SimulatedDifferenceJudge,
    simulate_judged_study,
)
from empeval.analysis.stats.ppi.crossfit import cross_fit_judge
from empeval.analysis.stats.ppi.differences import ppi_pair_differences

BLOCKS = {"figure_png": None, "figure_path": "", "correction_name": "Holm-Bonferroni",
          "family_words": "all pairs within each criterion", "alpha": 0.05, "ci_level": 0.95, "n_boot": 50}


@pytest.fixture(scope="module")
def study():
    return simulate_judged_study(judge=GOOD_JUDGE, n_contexts=160, human_share=0.25, seed=4,
                                 difference_judge=SimulatedDifferenceJudge("pairs", correlation=0.8, scale=0.5))


def text_of(tables) -> str:
    parts = []
    for block in judged_blocks(tables, **BLOCKS):
        parts.append(getattr(block, "text", ""))
        frame = getattr(block, "frame", None)
        if isinstance(frame, pd.DataFrame):
            parts.append(frame.to_string())
        parts.append(getattr(block, "caption", ""))
    return "\n".join(parts)


def test_the_judge_of_differences_makes_the_paired_differences(study):
    tables = judged_tables(study.human_ratings, study.judge_scores, judge="good", n_boot=50,
                           pair_scores=study.pair_scores, pair_judge="pairs")
    assert tables.pairs_estimator == PAIR_PPI and tables.pair_judge == "pairs" and tables.pairs_note == ""
    pd.testing.assert_frame_equal(tables.pairs, ppi_pair_differences(study.human_ratings, study.pair_scores))
    [row] = tables.correlations.to_dict("records")
    assert row["n_contexts"] == row["n_pair_contexts"] == 3 * 40 and row["n_items"] == 3 * 40
    assert row["pair_difference_r"] > row["item_difference_r"] + 0.1  # what the judge of differences is for
    text = text_of(tables)
    assert "with the judge of differences pairs's verdicts as the predictor" in text
    assert "differences r, judge of differences" in text and "The paired differences use the judge of" in text
    assert "judge_correlations" in tables.csv_tables()


def test_without_pair_scores_the_section_still_prints_both_correlations(study):
    tables = judged_tables(study.human_ratings, study.judge_scores, judge="good", n_boot=50)
    assert tables.pairs_estimator == "ppi" and tables.pair_judge is None
    [row] = tables.correlations.to_dict("records")
    assert np.isfinite(row["score_r"]) and np.isfinite(row["item_difference_r"]) and row["n_pair_contexts"] == 0
    assert "differences r, item scores differenced" in text_of(tables)


def test_verdicts_that_cannot_be_used_leave_the_item_pairs_and_say_why(study):
    scores = study.pair_scores.copy()
    scores.loc[0, "judge_diff"] = np.nan
    tables = judged_tables(study.human_ratings, study.judge_scores, judge="good", n_boot=50, pair_scores=scores,
                           pair_judge="pairs")
    assert tables.pairs_estimator == "ppi" and "no difference for 1 compared context" in tables.pairs_note
    assert "were not used for the paired differences" in text_of(tables)
    allowed = judged_tables(study.human_ratings, study.judge_scores, judge="good", n_boot=50, pair_scores=scores,
                            pair_judge="pairs", allow_missing=True)
    assert allowed.pairs_estimator == PAIR_PPI and allowed.pairs["n_dropped_missing"].sum() == 1


def test_a_learned_judges_pairs_get_numbers_while_contexts_are_rated_for_some_systems_only():
    study = simulate_judged_study(judge=BIASED_JUDGE, n_contexts=60, human_share=0.4, seed=3)
    assert len(study.rated_contexts) == 24
    items = study.judge_scores[["context_id", "system"]].reset_index(drop=True)
    features = np.column_stack([study.judge_scores["judge_score"], items["system"] == "gold"]).astype(float)
    fitted = cross_fit_judge(items, features, study.human_ratings, n_folds=5, seed=1)
    # Later one assignment's ratings are excluded: three contexts keep ratings for two systems of three.
    ratings = study.human_ratings
    dropped = ratings["context_id"].isin(study.rated_contexts[:3]) & (ratings["system"] == "moel")
    tables = judged_tables(ratings.loc[~dropped], fitted.drop(columns="label"), judge="learned",
                           cross_fitted=True, n_boot=50)
    pairs = tables.pairs
    assert pairs[["crossppi_ci_low", "crossppi_ci_high", "p_crossppi", "p_adj"]].notna().all().all()
    [frame] = [block.frame for block in judged_blocks(tables, **BLOCKS)
               if isinstance(block, Table) and "Pair (a − b)" in block.frame.columns]
    assert not frame[["cross-PPI Δ [CI]", "p", "p adj."]].isin(["n/a"]).any().any()
    assert not frame["cross-PPI Δ [CI]"].str.endswith("n/a").any() and "note" not in frame.columns
