"""The ICC of an unbalanced design, read on its largest balanced subset (issue 30): Shrout & Fleiss's (1979) Table 2
with ratings added that unbalance it gives back the published values, because the subset is exactly Table 2; the
note says which subset was used; a design with no two items sharing two ratings still has no ICC, and says why."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.stats.agreement import agreement_table, balanced_subset, icc_table
from tests.analysis.conftest import SHROUT_FLEISS_1979

# Shrout & Fleiss (1979), Table 4 (published to two decimals).
PUBLISHED = {"ICC(1,1)": 0.17, "ICC(2,1)": 0.29, "ICC(3,1)": 0.71, "ICC(1,k)": 0.44, "ICC(2,k)": 0.62,
             "ICC(3,k)": 0.91}


def _row(target: str, judge: str, score: float) -> dict:
    return {"item": target, "annotator": judge, "criterion": "empathy", "score": float(score), "is_control": False,
            "system": "sys", "context": target}


def _crossed_with_extras() -> pd.DataFrame:
    """Table 2 (6 targets x the same 4 judges) plus two targets only two of the judges rated."""
    rows = [_row(f"target-{t}", f"judge-{j}", s) for t, scores in enumerate(SHROUT_FLEISS_1979)
            for j, s in enumerate(scores)]
    rows += [_row("target-extra-1", "judge-0", 3), _row("target-extra-1", "judge-1", 9),
             _row("target-extra-2", "judge-2", 1), _row("target-extra-2", "judge-3", 10)]
    return pd.DataFrame(rows)


def _one_way_with_extras() -> pd.DataFrame:
    """Table 2 with every target rated by its own four judges, a fifth rating on one target (by a judge whose
    pseudonym sorts last, so the subset keeps the published four) and two targets with two ratings only."""
    rows = [_row(f"target-{t}", f"judge-{t}-{j}", s) for t, scores in enumerate(SHROUT_FLEISS_1979)
            for j, s in enumerate(scores)]
    rows += [_row("target-0", "zz-late-judge", 1), _row("target-extra-1", "judge-x-0", 3),
             _row("target-extra-1", "judge-x-1", 9), _row("target-extra-2", "judge-y-0", 1),
             _row("target-extra-2", "judge-y-1", 10)]
    return pd.DataFrame(rows)


def test_the_subset_keeps_the_k_that_keeps_the_most_ratings():
    ratings = _one_way_with_extras()
    subset, note = balanced_subset(ratings)
    assert subset.groupby("item").size().to_dict() == {f"target-{t}": 4 for t in range(6)}
    assert "zz-late-judge" not in set(subset["annotator"])
    assert note == ("unbalanced design (2 to 5 ratings per item): on its largest balanced subset, 6 of 8 items with "
                    "4 ratings each (1 items with more keep the 4 annotators whose pseudonyms sort first)")
    table_2 = ratings.loc[ratings["item"].str.fullmatch(r"target-\d") & (ratings["annotator"] != "zz-late-judge")]
    subset, note = balanced_subset(table_2)
    assert subset is table_2 and note == ""  # balanced already: used whole, nothing to say


@pytest.mark.parametrize("form", ["ICC(1,1)", "ICC(1,k)"])
def test_a_one_way_unbalanced_design_gives_the_published_one_way_forms(form):
    table = icc_table(_one_way_with_extras(), criterion="empathy", n_boot=100).set_index("form")
    assert round(table.loc[form, "estimate"], 2) == PUBLISHED[form]
    assert table.loc[form, "n_items"] == 6
    assert "one-way design, k = 4; unbalanced design" in table.loc[form, "note"]
    assert np.isnan(table.loc["ICC(2,1)", "estimate"])  # judges differ between targets: no two-way form


@pytest.mark.parametrize("form", list(PUBLISHED))
def test_a_crossed_unbalanced_design_gives_every_published_form(form):
    table = icc_table(_crossed_with_extras(), criterion="empathy", n_boot=100).set_index("form")
    assert round(table.loc[form, "estimate"], 2) == PUBLISHED[form]
    assert table.loc[form, "note"].startswith("crossed design, k = 4; unbalanced design (2 to 4 ratings per item): "
                                              "on its largest balanced subset, 6 of 8 items")


def test_the_agreement_table_reports_the_icc_of_the_subset_and_says_so():
    table = agreement_table(_crossed_with_extras(), scale=(1, 10), n_boot=100)
    icc = table.loc[table["coefficient"] == "icc"].iloc[0]
    assert round(icc["estimate"], 2) == PUBLISHED["ICC(2,1)"] and icc["n_items"] == 6
    assert icc["ci_low"] < icc["estimate"] < icc["ci_high"]
    assert icc["note"].startswith("ICC(2,1), crossed design, k = 4 ratings per item; unbalanced design")


def test_no_two_items_sharing_two_ratings_still_has_no_icc_and_says_why():
    ratings = pd.DataFrame([_row("a", "r1", 1), _row("a", "r2", 2), _row("a", "r3", 3), _row("b", "r1", 4),
                            _row("c", "r2", 5)])
    icc = agreement_table(ratings, n_boot=20).set_index("coefficient").loc["icc"]
    assert np.isnan(icc["estimate"])
    assert icc["note"] == ("unbalanced design (1 to 3 ratings per item): no two items share two or more ratings, "
                           "and the ICC needs them")
