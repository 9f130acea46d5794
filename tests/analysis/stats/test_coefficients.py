"""What analysis.stats.coefficients promises besides the published values: refusals that say what was wrong, edges
that stay defined (one subject, two targets, two judges), undefined results that are NaN without a warning,
explicit weight matrices, and sums of squares that stay exact far from zero."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

from empeval.analysis.stats import coefficients
from empeval.analysis.stats.bootstrap import resample_weights
from tests.analysis.stats.test_agreement_icc import _icc_by_the_book

VALUES = np.arange(1, 6)


def _quietly(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return function(*args, **kwargs)


def _exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


# --- value counts ---------------------------------------------------------------------------------------


def test_ratings_outside_the_scale_are_named():
    with pytest.raises(ValueError, match=_exactly("ratings [0.0, 7.0] lie outside the value domain "
                                                  "[1.0, 2.0, 3.0, 4.0, 5.0]")):
        coefficients.unit_value_counts(np.array([[1, 7, 0], [2, 7, np.nan]]), VALUES)


def test_none_marks_a_missing_rating_like_nan():
    with_none = coefficients.unit_value_counts([[1, None, 3], [2, 2, None]], VALUES)
    with_nan = coefficients.unit_value_counts(np.array([[1, np.nan, 3], [2, 2, np.nan]]), VALUES)
    np.testing.assert_array_equal(with_none, with_nan)
    assert with_none.dtype == float


# --- Fleiss' kappa --------------------------------------------------------------------------------------


@pytest.mark.parametrize("table", [
    np.zeros((0, 5)),                          # no subject
    np.array([[2, 1, 0], [1, 1, 0]]),          # 3 ratings, then 2
    np.array([[3, 0], [2, 0], [2, 1]]),        # the odd one out is not the first subject
    np.array([[1, 0], [0, 1]]),                # a single rating per subject
])
def test_fleiss_kappa_refuses_tables_without_the_same_two_or_more_ratings_per_subject(table):
    message = "Fleiss' kappa needs the same number (at least 2) of ratings for every subject"
    with pytest.raises(ValueError, match=_exactly(message)):
        coefficients.fleiss_kappa(table)


def test_fleiss_kappa_of_a_single_subject_equals_statsmodels():
    table = np.array([[2, 1, 1, 0, 0]])
    assert coefficients.fleiss_kappa(table) == pytest.approx(statsmodels_fleiss_kappa(table), abs=1e-12)


def test_fleiss_kappa_with_every_rating_in_one_category_is_nan_quietly():
    assert np.isnan(_quietly(coefficients.fleiss_kappa, np.array([[3, 0], [3, 0], [3, 0]])))


# --- Gwet's AC2 -----------------------------------------------------------------------------------------


def test_gwet_ac2_takes_an_explicit_weight_matrix():
    rng = np.random.default_rng(1)
    data = rng.integers(1, 6, size=(3, 20)).astype(float)
    counts = coefficients.unit_value_counts(data, VALUES)
    assert coefficients.gwet_ac2(counts, VALUES, weights=np.eye(5)) == pytest.approx(
        coefficients.gwet_ac2(counts, VALUES, weights="identity"), abs=1e-12)
    quadratic = coefficients.gwet_weights(VALUES, "quadratic").tolist()
    assert coefficients.gwet_ac2(counts, VALUES, weights=quadratic) == pytest.approx(
        coefficients.gwet_ac2(counts, VALUES, weights="quadratic"), abs=1e-12)


def test_gwet_quadratic_and_linear_weights_fall_with_the_distance():
    # Gwet (2014), table 3.6 for q = 5 on 1..5: quadratic 1, 15/16, 3/4, 7/16, 0; linear 1, 3/4, 1/2, 1/4, 0.
    np.testing.assert_allclose(coefficients.gwet_weights(VALUES, "quadratic")[0], [1, 15 / 16, 3 / 4, 7 / 16, 0])
    np.testing.assert_allclose(coefficients.gwet_weights(VALUES, "linear")[0], [1, 3 / 4, 1 / 2, 1 / 4, 0])
    np.testing.assert_allclose(coefficients.gwet_weights(np.array([0, 2, 10]), "quadratic")[1], [0.96, 1, 0.36])


def test_unknown_gwet_weights_are_refused():
    with pytest.raises(ValueError, match=_exactly("unknown weights 'cubic'; use ordinal, linear, quadratic or "
                                                  "identity")):
        coefficients.gwet_weights(VALUES, "cubic")


def test_gwet_ac2_with_units_rated_once_or_never_is_quiet():
    counts = np.array([[0, 2, 1, 0, 0], [0, 0, 0, 1, 0], [0, 0, 0, 0, 0], [1, 1, 0, 0, 0]], dtype=float)
    value = _quietly(coefficients.gwet_ac2, counts, VALUES)
    assert np.isfinite(value)
    assert np.isnan(_quietly(coefficients.gwet_ac2, counts[[1, 2]], VALUES))  # nothing pairable


# --- ICC ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("compute, message", [
    (coefficients.icc_two_way, "the two-way ICC needs a complete targets x judges matrix (no missing ratings)"),
    (coefficients.icc_one_way, "the one-way ICC needs the same number of ratings for every target"),
])
def test_an_icc_with_a_missing_rating_is_refused_with_the_reason(compute, message):
    with pytest.raises(ValueError, match=_exactly(message)):
        compute(np.array([[1.0, 2.0], [3.0, np.nan], [2.0, 2.0]]))


@pytest.mark.parametrize("compute, message", [
    (coefficients.icc_two_way, "the ICC needs at least two targets and two judges"),
    (coefficients.icc_one_way, "the ICC needs at least two targets with two ratings each"),
])
@pytest.mark.parametrize("shape", [(1, 3), (3, 1), (1, 1)])
def test_an_icc_of_fewer_than_two_targets_or_judges_is_refused_with_the_reason(compute, message, shape):
    with pytest.raises(ValueError, match=_exactly(message)):
        compute(np.arange(1.0, 1.0 + shape[0] * shape[1]).reshape(shape))


@pytest.mark.parametrize("compute", [coefficients.icc_two_way, coefficients.icc_one_way])
def test_two_targets_and_two_judges_are_enough(compute):
    matrix = np.array([[1.0, 2.0], [4.0, 4.0]])
    expected = _icc_by_the_book(matrix)
    for form, value in compute(matrix).items():
        assert value == pytest.approx(expected[form], rel=1e-12), form


@pytest.mark.parametrize("compute", [coefficients.icc_two_way, coefficients.icc_one_way])
def test_the_icc_of_scores_far_from_zero_equals_that_of_the_same_scores_near_it(compute):
    # The sums of squares are taken about the grand mean, so adding a constant to every score changes nothing
    # (written naively, sum(y^2) - n k mean^2 loses every digit here).
    rng = np.random.default_rng(2)
    matrix = np.clip(np.rint(rng.normal(3, 1, size=(30, 1)) + rng.normal(0, 0.8, size=(30, 3))), 1, 5)
    near, far = compute(matrix), compute(matrix + 1e7)
    weights = resample_weights(30, n_boot=5, seed=0)
    near_boot, far_boot = compute(matrix, unit_weights=weights), compute(matrix + 1e7, unit_weights=weights)
    for form in near:
        assert far[form] == pytest.approx(near[form], rel=1e-9), form
        np.testing.assert_allclose(far_boot[form], near_boot[form], rtol=1e-9)


@pytest.mark.parametrize("compute", [coefficients.icc_two_way, coefficients.icc_one_way])
def test_an_icc_with_equal_target_means_is_defined_or_nan_but_quiet(compute):
    # Equal target means with spread within targets: BMS = 0, so ICC(1,k) = -WMS / 0.
    _quietly(compute, np.array([[1.0, 3.0], [3.0, 1.0], [2.0, 2.0]]))
    _quietly(compute, np.full((4, 3), 2.0))


# --- Krippendorff's alpha and percent agreement -----------------------------------------------------------


def test_alpha_is_ordinal_unless_told_and_refuses_an_unknown_level():
    counts = coefficients.unit_value_counts(np.array([[1, 2, 3, 3, 5], [1, 3, 3, 4, 5]]), VALUES)
    assert coefficients.krippendorff_alpha(counts, VALUES) == coefficients.krippendorff_alpha(
        counts, VALUES, level="ordinal")
    message = "level must be one of ('nominal', 'ordinal', 'interval', 'ratio'), got 'cardinal'"
    with pytest.raises(ValueError, match=_exactly(message)):
        coefficients.krippendorff_alpha(counts, VALUES, level="cardinal")


@pytest.mark.parametrize("data, values", [
    (np.random.default_rng(0).integers(0, 5, size=(3, 20)).astype(float), np.arange(0, 5)),  # a scale with 0
    (np.array([[4, 5, 4, 5, 5], [5, 5, 4, 4, 5]], dtype=float), VALUES),  # little expected disagreement
])
def test_ratio_alpha_equals_the_krippendorff_package_quietly(data, values):
    import krippendorff

    counts = coefficients.unit_value_counts(data, values)
    expected = krippendorff.alpha(data, level_of_measurement="ratio", value_domain=values)
    assert _quietly(coefficients.krippendorff_alpha, counts, values, level="ratio") == pytest.approx(expected)


def test_alpha_without_variation_is_nan_quietly():
    counts = coefficients.unit_value_counts(np.full((3, 6), 2.0), VALUES)
    for level in coefficients.LEVELS:
        assert np.isnan(_quietly(coefficients.krippendorff_alpha, counts, VALUES, level=level)), level


def test_gwet_weights_are_ordinal_unless_told():
    np.testing.assert_array_equal(coefficients.gwet_weights(VALUES), coefficients.gwet_weights(VALUES, "ordinal"))


def test_percent_agreement_with_units_rated_once_or_never_is_quiet():
    counts = np.array([[0, 2, 1, 0, 0], [0, 0, 0, 1, 0], [0, 0, 0, 0, 0]], dtype=float)
    assert _quietly(coefficients.percent_agreement, counts, VALUES) == pytest.approx(1 / 3)
    assert np.isnan(_quietly(coefficients.percent_agreement, counts[1:], VALUES))
