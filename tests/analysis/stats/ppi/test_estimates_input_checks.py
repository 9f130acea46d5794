"""The inputs prediction-powered inference refuses, and the boundary it accepts: every rule that says "at least 2
human-rated contexts" takes exactly 2 (check_human_share, check_rated_share, ppi_mean_interval), so that moving one
boundary without the others fails here; one label, no judge-only context, and a negative or NaN rater variance are
a ValueError that says what was wrong, never NaN or ZeroDivisionError."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.stats.ppi.estimates import ppi_mean_interval
from empeval.analysis.stats.ppi.tables import MIN_HUMAN_CONTEXTS, check_human_share, check_rated_share

LABELS = np.array([3.0, 4.0])
JUDGED = np.array([3.2, 3.9])
UNRATED = np.array([3.5, 2.5, 4.5])


def test_exactly_the_minimum_of_human_rated_contexts_is_accepted_everywhere_and_one_fewer_nowhere():
    assert MIN_HUMAN_CONTEXTS == 2
    assert check_human_share(0.2, n_contexts=10) == 2
    with pytest.raises(ValueError, match="gives 1 human-rated context"):
        check_human_share(0.1, n_contexts=10)
    part = pd.DataFrame({"label": [4.0, 3.0, np.nan], "judge_score": [4.0, 3.0, 2.0]})
    check_rated_share(part, where="system 'gold'")  # two rated, one left for the judge: accepted
    with pytest.raises(ValueError, match="system 'gold': 1 human-rated context"):
        check_rated_share(part.assign(label=[4.0, np.nan, np.nan]), where="system 'gold'")
    result = ppi_mean_interval(LABELS, JUDGED, UNRATED)
    assert result["n_human"] == 2 and math.isfinite(result["ppi_ci_low"]) and math.isfinite(result["human_ci_high"])
    assert result["ppi_ci_low"] <= result["ppi_mean"] <= result["ppi_ci_high"]


@pytest.mark.parametrize(("labels", "judged", "unrated", "rater_variance", "says"), [
    ([3.0], [3.1], UNRATED, 0.0, "at least 2 human-rated contexts and 1 judge-only context, got 1 and 3"),
    (LABELS, JUDGED, [], 0.0, "got 2 and 0"),
    (LABELS, JUDGED, UNRATED, -0.1, "rater_variance must be a non-negative variance, got -0.1"),
    (LABELS, JUDGED, UNRATED, float("nan"), "rater_variance must be a non-negative variance, got nan"),
    (LABELS, [3.2], UNRATED, 0.0, "same length"),
    ([3.0, float("nan")], JUDGED, UNRATED, 0.0, "must be finite"),
    (LABELS, JUDGED, [3.0, float("inf")], 0.0, "must be finite"),
])
def test_what_ppi_cannot_use_is_a_value_error_that_says_why(labels, judged, unrated, rater_variance, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        ppi_mean_interval(labels, judged, unrated, rater_variance=rater_variance)


def test_constant_labels_give_an_interval_not_a_division_by_zero():
    """Two identical labels: the human-only spread is zero; the result says so with NaN ratios, not an error."""
    result = ppi_mean_interval([4.0, 4.0], [3.0, 3.5], UNRATED)
    assert result["human_mean"] == 4.0
    assert result["human_ci_low"] == result["human_ci_high"] == 4.0
    assert math.isnan(result["width_ratio"]) or result["width_ratio"] >= 0
