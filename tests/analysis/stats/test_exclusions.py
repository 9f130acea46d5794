"""Re-running an analysis without some annotators (analysis.stats.exclusions): every rating of an excluded
annotator goes, controls included, and nothing else; ``side_by_side`` stacks the analysis of all ratings over
that of the rest, under a first column ``raters``, with the options passed to both runs."""
from __future__ import annotations

import pandas as pd
import pytest

from empeval.analysis.stats.exclusions import ALL_RATERS, EXCLUDING_FLAGGED, exclude_annotators, side_by_side
from empeval.analysis.stats.significance import system_means


@pytest.fixture
def ratings() -> pd.DataFrame:
    """Three annotators on two systems; w2 also answered a control. A non-default index, to see it reset."""
    rows = [
        ("w1", "a", 4.0, False), ("w1", "b", 2.0, False),
        ("w2", "a", 1.0, False), ("w2", "b", 5.0, False), ("w2", "a", 3.0, True),
        ("w3", "a", 5.0, False), ("w3", "b", 3.0, False),
    ]
    table = pd.DataFrame(rows, columns=["annotator", "system", "score", "is_control"])
    table.index = range(100, 100 + len(table))
    return table


def test_every_rating_of_an_excluded_annotator_goes_controls_included(ratings):
    kept = exclude_annotators(ratings, ["w2"])
    assert list(kept["annotator"]) == ["w1", "w1", "w3", "w3"]
    assert not kept["is_control"].any()
    assert list(kept.columns) == list(ratings.columns)
    assert list(kept.index) == [0, 1, 2, 3]
    pd.testing.assert_frame_equal(kept, ratings.loc[ratings["annotator"] != "w2"].reset_index(drop=True))


def test_excluding_nobody_or_unknown_annotators_keeps_every_rating_and_the_input_is_untouched(ratings):
    before = ratings.copy()
    for nobody in ([], ["w9"], set()):
        pd.testing.assert_frame_equal(exclude_annotators(ratings, nobody), before.reset_index(drop=True))
    assert exclude_annotators(ratings, (a for a in ["w1", "w3"]))["annotator"].tolist() == ["w2"] * 3
    pd.testing.assert_frame_equal(ratings, before)


def test_an_annotator_is_matched_by_the_whole_name(ratings):
    """"w1" excludes w1 only, not a "w10" or a "w" that merely shares its start."""
    longer = pd.concat([ratings, ratings.assign(annotator="w10")], ignore_index=True)
    assert set(exclude_annotators(longer, ["w1", "w"])["annotator"]) == {"w2", "w3", "w10"}


def _mean_per_system(table: pd.DataFrame, *, controls: bool = False, scale: float = 1.0) -> pd.DataFrame:
    """A small analysis with options: the mean score of each system."""
    if not controls:
        table = table.loc[~table["is_control"]]
    means = table.groupby("system", as_index=False)["score"].mean()
    return means.assign(score=means["score"] * scale)


def test_side_by_side_stacks_the_analysis_of_all_raters_over_that_of_the_rest(ratings):
    table = side_by_side(ratings, ["w2"], _mean_per_system, scale=10.0)
    assert list(table.columns) == ["raters", "system", "score"]
    assert list(table.index) == [0, 1, 2, 3]
    assert table[["raters", "system"]].values.tolist() == [
        [ALL_RATERS, "a"], [ALL_RATERS, "b"], [EXCLUDING_FLAGGED, "a"], [EXCLUDING_FLAGGED, "b"]]
    assert table["score"].tolist() == pytest.approx([100 / 3, 100 / 3, 45.0, 25.0])
    assert (ALL_RATERS, EXCLUDING_FLAGGED) == ("all raters", "excluding flagged")


def test_side_by_side_passes_every_option_to_both_runs(ratings):
    with_controls = side_by_side(ratings, iter(["w1"]), _mean_per_system, controls=True)
    by = with_controls.set_index(["raters", "system"])["score"]
    assert by[(ALL_RATERS, "a")] == pytest.approx(13 / 4) and by[(EXCLUDING_FLAGGED, "a")] == pytest.approx(3.0)


def test_side_by_side_with_nobody_excluded_shows_the_same_result_twice(ratings):
    table = side_by_side(ratings, [], _mean_per_system)
    first, second = (part.drop(columns="raters").reset_index(drop=True) for _, part in table.groupby("raters"))
    pd.testing.assert_frame_equal(first, second)


def test_side_by_side_reruns_without_the_flagged(simulated, simulated_ratings):
    spammers = sorted(simulated.spammers)
    assert not exclude_annotators(simulated_ratings, spammers)["annotator"].isin(spammers).any()
    table = side_by_side(simulated_ratings, spammers, system_means, n_boot=50)
    assert list(table.columns)[0] == "raters"
    assert set(table["raters"]) == {ALL_RATERS, EXCLUDING_FLAGGED}
    by = table.set_index(["raters", "criterion", "system"])["mean"]
    # Random clickers and straight-liners pull the best system down towards the middle of the scale.
    assert by[(EXCLUDING_FLAGGED, "empathy", "gold")] > by[(ALL_RATERS, "empathy", "gold")]
