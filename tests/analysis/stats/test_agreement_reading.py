"""Reading alpha beside AC2 (analysis.stats.agreement_reading): the most common real score of a criterion and its
share, and the paragraph that reads the pooled ordinal alpha beside the pooled AC2 with the study's numbers, left
out when no criterion has both. On a high-prevalence table the paragraph shows the paradox it explains (Feinstein
& Cicchetti 1990): 86% agreement, alpha 0.34 by Krippendorff's formula for binary data, AC2 0.82 by Gwet's."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.stats.agreement import ALL_SYSTEMS, agreement_table
from empeval.analysis.stats.agreement_reading import alpha_beside_ac2, modal_share
from tests.analysis.conftest import long_ratings

OPENING = "Reading α beside AC2: here ordinal α is "


def _ratings(criterion: str, scores, *, control: bool = False) -> list[dict]:
    return [{"criterion": criterion, "score": score, "is_control": int(control)} for score in scores]


def _agreement(estimates: dict[tuple[str, str], float], *, system: str = ALL_SYSTEMS) -> pd.DataFrame:
    """An agreement table holding the given (criterion, coefficient) estimates, all on ``system``."""
    return pd.DataFrame([{"criterion": criterion, "system": system, "coefficient": coefficient, "estimate": value}
                         for (criterion, coefficient), value in estimates.items()])


def test_the_modal_share_counts_only_the_real_ratings_of_the_criterion():
    """Controls all scored 1 and fluency mostly 3: neither may change empathy's 4 on 3 of its 5 real ratings."""
    ratings = pd.DataFrame(_ratings("empathy", [4.0, 2.0, 4.0, 5.0, 4.0]) + _ratings("empathy", [1.0] * 6, control=True)
                           + _ratings("fluency", [3.0] * 9 + [4.0]))
    score, share = modal_share(ratings, "empathy")
    assert (score, share) == (4, pytest.approx(0.6)) and type(score) is int and type(share) is float
    assert modal_share(ratings, "fluency") == (3, pytest.approx(0.9))


def test_the_paragraph_is_left_out_when_no_criterion_has_both_coefficients():
    nan = np.nan
    assert alpha_beside_ac2(_agreement({("empathy", "alpha_ordinal"): 0.3, ("empathy", "ac2_ordinal"): nan}),
                            pd.DataFrame(), ["empathy"]) is None
    assert alpha_beside_ac2(_agreement({("empathy", "alpha_ordinal"): nan, ("empathy", "ac2_ordinal"): 0.7}),
                            pd.DataFrame(), ["empathy"]) is None
    assert alpha_beside_ac2(_agreement({("empathy", "alpha_ordinal"): 0.3}), pd.DataFrame(), ["empathy"]) is None
    both = {("empathy", "alpha_ordinal"): 0.3, ("empathy", "ac2_ordinal"): 0.7}
    assert alpha_beside_ac2(_agreement(both), pd.DataFrame(), ["fluency"]) is None  # not a criterion asked for
    # Only the rows pooled over systems are read: one system's coefficients are not the study's.
    assert alpha_beside_ac2(_agreement(both, system="gold"), pd.DataFrame(), ["empathy"]) is None


def test_the_paragraph_gives_the_ranges_of_both_and_each_criterions_modal_score():
    ratings = pd.DataFrame(_ratings("empathy", [4, 4, 4, 2]) + _ratings("fluency", [5, 5, 3, 3, 5])
                           + _ratings("relevance", [1, 1, 1]))
    agreement = _agreement({("empathy", "alpha_ordinal"): 0.31, ("empathy", "ac2_ordinal"): 0.74,
                            ("fluency", "alpha_ordinal"): 0.42, ("fluency", "ac2_ordinal"): 0.81,
                            ("relevance", "alpha_ordinal"): 0.95, ("relevance", "ac2_ordinal"): np.nan})
    text = alpha_beside_ac2(agreement, ratings, ["fluency", "relevance", "empathy"])
    assert text.startswith(OPENING + "0.31–0.42 and AC2 0.74–0.81.")  # relevance, without AC2, is left out
    assert "The most common score and its share of the ratings: fluency 5 (60%); empathy 4 (75%)." in text
    assert "relevance" not in text and "0.95" not in text


def test_a_range_of_one_value_is_written_once():
    ratings = pd.DataFrame(_ratings("empathy", [3, 3]) + _ratings("fluency", [2, 2]))
    agreement = _agreement({("empathy", "alpha_ordinal"): 0.5012, ("empathy", "ac2_ordinal"): 0.7,
                            ("fluency", "alpha_ordinal"): 0.4988, ("fluency", "ac2_ordinal"): 0.9})
    text = alpha_beside_ac2(agreement, ratings, ["empathy", "fluency"])
    assert text.startswith(OPENING + "0.50 and AC2 0.70–0.90.")


def test_the_paragraph_shows_the_high_agreement_low_alpha_paradox_on_a_high_prevalence_table():
    """Two raters, 100 units, yes (2) or no (1): 81 both yes, 9 and 5 split, 5 both no. Agreement is 86% and
    yes 88% of the 200 ratings, so chance agreement is high. Krippendorff (2011), binary data:
    alpha = 1 - (n - 1) o_12 / (n_1 n_2) = 1 - 199 * 14 / (24 * 176) = 0.3404. Gwet (2008), two categories:
    AC1 = (p_a - p_e) / (1 - p_e), p_e = 2 pi (1 - pi), pi = 0.88: (0.86 - 0.2112) / 0.7888 = 0.8225 (AC2 with
    ordinal weights on a two-point scale is AC1)."""
    first = [2] * 81 + [2] * 9 + [1] * 5 + [1] * 5
    second = [2] * 81 + [1] * 9 + [2] * 5 + [1] * 5
    ratings = long_ratings(np.array([first, second]))
    agreement = agreement_table(ratings, scale=(1, 2), n_boot=20)
    estimate = agreement.set_index("coefficient")["estimate"]
    assert estimate["alpha_ordinal"] == pytest.approx(1 - 199 * 14 / (24 * 176), abs=1e-9)
    assert estimate["ac2_ordinal"] == pytest.approx((0.86 - 0.2112) / 0.7888, abs=1e-9)
    assert estimate["percent_exact"] == pytest.approx(0.86)
    assert modal_share(ratings, "empathy") == (2, pytest.approx(0.88))
    text = alpha_beside_ac2(agreement, ratings, ["empathy"])
    assert text.startswith(OPENING + "0.34 and AC2 0.82.")
    assert "empathy 2 (88%)" in text and "Feinstein & Cicchetti 1990" in text and "Gwet 2008" in text
