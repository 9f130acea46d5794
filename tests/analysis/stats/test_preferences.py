"""A/B preference tests: counts, exact binomial p-values, tie handling, correction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from empeval.analysis.stats.preferences import preference_tests
from empeval.analysis.stats.significance import adjust_pvalues


def _judgements(wins_a: int, ties: int, wins_b: int, a: str = "new", b: str = "old", **extra) -> pd.DataFrame:
    preferred = [a] * wins_a + ["tie"] * ties + [b] * wins_b
    return pd.DataFrame({"system_a": a, "system_b": b, "preferred": preferred, **extra})


def test_ties_excluded_by_default():
    row = preference_tests(_judgements(15, 3, 5)).iloc[0]
    assert (row["system_a"], row["system_b"]) == ("new", "old")
    assert (row["wins_a"], row["ties"], row["wins_b"], row["n"]) == (15, 3, 5, 23)
    assert row["n_tested"] == 20
    # Two-sided exact binomial test of 15 of 20: 2 * P(X >= 15 | n = 20, p = 0.5) = 0.04139.
    assert round(row["p"], 5) == 0.04139
    assert row["win_rate_a"] == pytest.approx(15 / 23) and row["tie_rate"] == pytest.approx(3 / 23)
    assert row["share_a"] == pytest.approx(0.75)


def test_tie_handling_is_configurable():
    judgements = _judgements(15, 3, 5, a="a-sys", b="b-sys")
    split = preference_tests(judgements, ties="split").iloc[0]
    assert (split["k_tested"], split["n_tested"]) == (16, 22)  # one tie to each side, the odd one dropped
    assert split["p"] == pytest.approx(stats.binomtest(16, 22).pvalue)
    as_loss = preference_tests(judgements, ties="as_loss").iloc[0]
    assert (as_loss["k_tested"], as_loss["n_tested"]) == (15, 23)
    with pytest.raises(ValueError, match="ties must be one of"):
        preference_tests(judgements, ties="ignore")


def test_presentation_order_is_pooled():
    judgements = pd.concat([_judgements(6, 0, 2, a="x", b="y"), _judgements(1, 1, 5, a="y", b="x")])
    row = preference_tests(judgements).iloc[0]
    assert (row["system_a"], row["system_b"]) == ("x", "y")
    assert (row["wins_a"], row["ties"], row["wins_b"]) == (11, 1, 3)


def test_clopper_pearson_interval_of_the_decisive_share():
    row = preference_tests(_judgements(12, 0, 8, a="a", b="b")).iloc[0]
    interval = stats.binomtest(12, 20).proportion_ci(method="exact")
    assert (row["share_ci_low"], row["share_ci_high"]) == pytest.approx((interval.low, interval.high))


def test_holm_over_the_pairs_of_a_criterion():
    judgements = pd.concat([
        _judgements(30, 2, 10, a="a", b="b", criterion="empathy"),
        _judgements(18, 0, 12, a="a", b="c", criterion="empathy"),
        _judgements(20, 5, 5, a="b", b="c", criterion="empathy"),
        _judgements(9, 1, 11, a="a", b="b", criterion="fluency"),
    ])
    table = preference_tests(judgements)
    empathy = table.loc[table["criterion"] == "empathy"]
    np.testing.assert_allclose(empathy["p_adj"], adjust_pvalues(empathy["p"].to_numpy()))
    fluency = table.loc[table["criterion"] == "fluency"].iloc[0]
    assert fluency["p_adj"] == pytest.approx(fluency["p"])  # a family of one
    study = preference_tests(judgements, family="study")
    np.testing.assert_allclose(study["p_adj"], adjust_pvalues(study["p"].to_numpy()))


def test_a_preference_for_an_unknown_system_names_the_row():
    judgements = _judgements(2, 0, 1, a="a", b="b")
    judgements.loc[1, "preferred"] = "c"
    with pytest.raises(ValueError, match="row 2: preferred is 'c'"):
        preference_tests(judgements)


def test_all_ties_leave_the_test_undefined():
    row = preference_tests(_judgements(0, 4, 0, a="a", b="b")).iloc[0]
    assert row["n_tested"] == 0 and np.isnan(row["p"]) and np.isnan(row["p_adj"])
