"""What "a conclusion changes" means (analysis.stats.conclusions): a pair's order is the sign of its difference,
none within TIE of zero or when undefined; its conclusion changes when the order reverses or the difference
gains or loses significance (p adj. < alpha, strictly; an undefined p-value is never significant)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from empeval.analysis.stats import rater_aware
from empeval.analysis.stats.conclusions import DEFINITION, TIE, conclusion_changes, order


@pytest.mark.parametrize(("difference", "expected"), [
    (0.4, 1), (-0.4, -1), (1e-6, 1), (-1e-6, -1), (np.float64(2.5), 1), (-3, -1),
    (0.0, 0), (-0.0, 0), (TIE / 2, 0), (-TIE / 2, 0),  # within the tie tolerance: no order
    (float("nan"), 0), (None, 0), (math.inf, 0), (-math.inf, 0),  # undefined: no order
])
def test_the_order_is_the_sign_of_a_defined_difference_beyond_the_tie(difference, expected):
    assert order(difference) == expected


def test_the_tie_tolerance_is_an_open_interval_around_zero():
    assert TIE == 1e-9
    assert (order(TIE), order(-TIE)) == (1, -1)
    assert (order(np.nextafter(TIE, 0)), order(-np.nextafter(TIE, 0))) == (0, 0)


@pytest.mark.parametrize("difference", [0.3, -0.3, 0.0, 5e-10, -2e-9, float("nan"), None, math.inf])
def test_the_rater_aware_check_orders_pairs_by_the_same_rule(difference):
    assert rater_aware._sign(difference) == order(difference)


@pytest.mark.parametrize(("before", "after", "changes"), [
    ((0.40, 0.01), (0.30, 0.02), False),   # same order, significant both times
    ((0.40, 0.01), (0.30, 0.20), True),    # loses significance
    ((0.10, 0.60), (0.30, 0.01), True),    # gains significance
    ((0.10, 0.60), (-0.10, 0.70), True),   # order reverses, never significant
    ((0.0, 0.90), (1e-12, 0.90), False),   # a difference within the tie tolerance has no order
    ((0.20, np.nan), (0.20, 0.90), False),  # an untestable pair is not significant
])
def test_a_conclusion_changes_when_order_or_significance_does(before, after, changes):
    assert conclusion_changes(*before, *after, alpha=0.05) is changes
    assert conclusion_changes(*after, *before, alpha=0.05) is changes  # the same whichever analysis comes first


def test_a_p_value_equal_to_alpha_is_not_significant():
    assert conclusion_changes(0.5, 0.05, 0.5, 0.20, alpha=0.05) is False
    assert conclusion_changes(0.5, 0.049, 0.5, 0.05, alpha=0.05) is True


def test_alpha_decides_what_is_significant():
    """p 0.03 then 0.07: significance is lost at alpha 0.05, never there at 0.01, kept at 0.10."""
    assert conclusion_changes(0.5, 0.03, 0.5, 0.07, alpha=0.05) is True
    assert conclusion_changes(0.5, 0.03, 0.5, 0.07, alpha=0.01) is False
    assert conclusion_changes(0.5, 0.03, 0.5, 0.07, alpha=0.10) is False


def test_a_p_value_becoming_undefined_loses_significance():
    assert conclusion_changes(0.5, 0.001, 0.5, np.nan, alpha=0.05) is True
    assert conclusion_changes(np.nan, np.nan, np.nan, np.nan, alpha=0.05) is False


def test_a_reversal_to_a_significant_difference_in_the_other_direction_changes_the_conclusion():
    """Significant both times, but for the other system: the order alone decides."""
    assert conclusion_changes(0.4, 0.001, -0.4, 0.001, alpha=0.05) is True
    assert conclusion_changes(0.4, 0.001, np.nan, 0.001, alpha=0.05) is True  # the order is lost


def test_the_definition_names_both_ways_a_conclusion_changes():
    assert "order" in DEFINITION and "reverses" in DEFINITION
    assert "gains or loses significance after correction" in DEFINITION and "p adj. < α" in DEFINITION
