"""The six Shrout & Fleiss (1979) ICC forms and their bootstrap intervals, each against a value computed here
from scratch: the ANOVA mean squares written out as plain sums, and the bootstrap as a loop that rebuilds every
resampled targets x judges matrix and computes its ICC again."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.stats import coefficients
from empeval.analysis.stats.agreement import agreement_table, icc_table
from empeval.analysis.stats.bootstrap import resample_weights
from tests.analysis.conftest import SHROUT_FLEISS_1979

PUBLISHED = {"ICC(1,1)": 0.17, "ICC(2,1)": 0.29, "ICC(3,1)": 0.71, "ICC(1,k)": 0.44, "ICC(2,k)": 0.62,
             "ICC(3,k)": 0.91}


def _mean_squares(y: list[list[float]]) -> dict[str, float]:
    """BMS, WMS, JMS, EMS of a complete targets x judges matrix (Shrout & Fleiss 1979, Table 1), as sums."""
    n, k = len(y), len(y[0])
    grand = sum(sum(row) for row in y) / (n * k)
    target_means = [sum(row) / k for row in y]
    judge_means = [sum(y[i][j] for i in range(n)) / n for j in range(k)]
    between_targets = k * sum((m - grand) ** 2 for m in target_means)
    within_targets = sum((y[i][j] - target_means[i]) ** 2 for i in range(n) for j in range(k))
    between_judges = n * sum((m - grand) ** 2 for m in judge_means)
    residual = within_targets - between_judges
    return {"BMS": between_targets / (n - 1), "WMS": within_targets / (n * (k - 1)),
            "JMS": between_judges / (k - 1), "EMS": residual / ((n - 1) * (k - 1))}


def _icc_by_the_book(y: np.ndarray) -> dict[str, float]:
    """Shrout & Fleiss (1979), equations 2, 4 and 6 and their k-judge means (section 'Reliability of means')."""
    n, k = np.asarray(y).shape
    ms = _mean_squares(np.asarray(y, dtype=float).tolist())
    bms, wms, jms, ems = ms["BMS"], ms["WMS"], ms["JMS"], ms["EMS"]
    return {
        "ICC(1,1)": (bms - wms) / (bms + (k - 1) * wms),
        "ICC(2,1)": (bms - ems) / (bms + (k - 1) * ems + k * (jms - ems) / n),
        "ICC(3,1)": (bms - ems) / (bms + (k - 1) * ems),
        "ICC(1,k)": (bms - wms) / bms,
        "ICC(2,k)": (bms - ems) / (bms + (jms - ems) / n),
        "ICC(3,k)": (bms - ems) / bms,
    }


def _bootstrap_by_loop(y: np.ndarray, *, n_boot: int, seed: int, forms: tuple[str, ...], level: float = 0.95):
    """Percentile intervals from a plain loop: resample b draws target i weights[b, i] times, exactly as
    analysis.stats.bootstrap.resample_weights seeds it; each resampled matrix gets its ICCs from scratch."""
    weights = resample_weights(y.shape[0], n_boot=n_boot, seed=seed)
    samples = {form: [] for form in forms}
    for row in weights:
        resampled = np.repeat(y, row.astype(int), axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            values = _icc_by_the_book(resampled)
        for form in forms:
            samples[form].append(values[form])
    intervals = {}
    for form, values in samples.items():
        defined = np.array([v for v in values if np.isfinite(v)])
        intervals[form] = (*np.quantile(defined, [(1 - level) / 2, (1 + level) / 2]), defined.size)
    return intervals


def _crossed_ratings(matrix: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame([
        {"item": f"target-{t:03d}", "annotator": f"judge-{j}", "criterion": "empathy", "score": float(score),
         "is_control": False, "system": "sys", "context": f"c{t}"}
        for t, row in enumerate(matrix) for j, score in enumerate(row)])


def _one_way_ratings(matrix: np.ndarray) -> pd.DataFrame:
    """Every target rated by its own k judges (a crowd study): annotator names never repeat across targets."""
    return pd.DataFrame([
        {"item": f"target-{t:03d}", "annotator": f"judge-{t}-{j}", "criterion": "empathy", "score": float(score),
         "is_control": False, "system": "sys", "context": f"c{t}"}
        for t, row in enumerate(matrix) for j, score in enumerate(row)])


def _random_likert(seed: int, n: int = 25, k: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = rng.normal(3, 1, size=(n, 1))
    leniency = rng.normal(0, 0.6, size=(1, k))
    return np.clip(np.rint(truth + leniency + rng.normal(0, 0.7, size=(n, k))), 1, 5)


# --- point estimates ------------------------------------------------------------------------------------


def test_the_reference_itself_reproduces_shrout_fleiss_1979():
    # Guards the guard: the from-scratch formulas give the published table to two decimals.
    assert {form: round(value, 2) for form, value in _icc_by_the_book(SHROUT_FLEISS_1979).items()} == PUBLISHED


@pytest.mark.parametrize("form", coefficients.ICC_FORMS)
def test_two_way_icc_equals_the_mean_squares_formula_on_shrout_fleiss_1979(form):
    assert coefficients.icc_two_way(SHROUT_FLEISS_1979)[form] == pytest.approx(
        _icc_by_the_book(SHROUT_FLEISS_1979)[form], rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_all_six_forms_equal_the_mean_squares_formula_on_random_studies(seed):
    matrix = _random_likert(seed)
    expected = _icc_by_the_book(matrix)
    got = coefficients.icc_two_way(matrix)
    assert list(got) == list(coefficients.ICC_FORMS)
    for form in coefficients.ICC_FORMS:
        assert got[form] == pytest.approx(expected[form], rel=1e-10, abs=1e-12), form


@pytest.mark.parametrize("form, published", [("ICC(1,1)", 0.17), ("ICC(1,k)", 0.44)])
def test_one_way_icc_reproduces_shrout_fleiss_1979(form, published):
    value = coefficients.icc_one_way(SHROUT_FLEISS_1979)[form]
    assert round(value, 2) == published
    assert value == pytest.approx(_icc_by_the_book(SHROUT_FLEISS_1979)[form], rel=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_one_way_icc_equals_the_mean_squares_formula_on_random_studies(seed):
    matrix = _random_likert(seed, n=30, k=3)
    expected = _icc_by_the_book(matrix)
    got = coefficients.icc_one_way(matrix)
    assert set(got) == {"ICC(1,1)", "ICC(1,k)"}
    for form, value in got.items():
        assert value == pytest.approx(expected[form], rel=1e-10, abs=1e-12), form


def test_the_one_way_forms_do_not_depend_on_which_judge_is_which():
    # Case 1: judges are exchangeable within a target, so shuffling each row leaves ICC(1,·) unchanged,
    # while the two-way ICC(3,1) (judges fixed) changes.
    matrix = _random_likert(7)
    rng = np.random.default_rng(0)
    shuffled = np.array([rng.permutation(row) for row in matrix])
    for form in ("ICC(1,1)", "ICC(1,k)"):
        assert coefficients.icc_one_way(shuffled)[form] == pytest.approx(coefficients.icc_one_way(matrix)[form])
    assert coefficients.icc_two_way(shuffled)["ICC(3,1)"] != pytest.approx(coefficients.icc_two_way(matrix)["ICC(3,1)"])


def test_an_icc_without_variation_is_nan_never_zero_or_one():
    for compute in (coefficients.icc_two_way, coefficients.icc_one_way):
        assert all(np.isnan(value) for value in compute(np.full((5, 3), 4.0)).values())


@pytest.mark.parametrize("compute", [coefficients.icc_two_way, coefficients.icc_one_way])
def test_the_icc_refuses_missing_ratings_and_too_small_designs(compute):
    with pytest.raises(ValueError, match="no missing ratings|same number of ratings"):
        compute(np.array([[1.0, 2.0], [3.0, np.nan]]))
    with pytest.raises(ValueError, match="at least two targets"):
        compute(np.array([[1.0, 2.0, 3.0]]))
    with pytest.raises(ValueError, match="at least two targets"):
        compute(np.array([[1.0], [2.0], [3.0]]))


def test_resample_weights_with_the_wrong_width_are_refused():
    with pytest.raises(ValueError, match="unit_weights has 5 columns for 6 units"):
        coefficients.icc_two_way(SHROUT_FLEISS_1979, unit_weights=np.ones((3, 5)))


# --- bootstrap ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("compute, forms", [(coefficients.icc_two_way, coefficients.ICC_FORMS),
                                            (coefficients.icc_one_way, ("ICC(1,1)", "ICC(1,k)"))])
def test_each_resample_equals_the_icc_of_the_resampled_matrix(compute, forms):
    matrix = _random_likert(3, n=12)
    weights = resample_weights(12, n_boot=40, seed=4)
    vectorised = compute(matrix, unit_weights=weights)
    for b, row in enumerate(weights):
        with np.errstate(divide="ignore", invalid="ignore"):
            expected = _icc_by_the_book(np.repeat(matrix, row.astype(int), axis=0))
        for form in forms:
            assert vectorised[form][b] == pytest.approx(expected[form], rel=1e-9, abs=1e-12, nan_ok=True), (b, form)


def test_crossed_icc_intervals_equal_a_plain_bootstrap_loop_on_shrout_fleiss_1979():
    table = icc_table(_crossed_ratings(SHROUT_FLEISS_1979), criterion="empathy", n_boot=300, seed=7).set_index("form")
    reference = _bootstrap_by_loop(SHROUT_FLEISS_1979, n_boot=300, seed=7, forms=coefficients.ICC_FORMS)
    for form, (low, high, defined) in reference.items():
        assert table.loc[form, "ci_low"] == pytest.approx(low, abs=1e-9), form
        assert table.loc[form, "ci_high"] == pytest.approx(high, abs=1e-9), form
        assert table.loc[form, "n_boot_defined"] == defined, form
        assert table.loc[form, "estimate"] == pytest.approx(_icc_by_the_book(SHROUT_FLEISS_1979)[form]), form


def test_crossed_icc_intervals_equal_a_plain_bootstrap_loop_on_a_larger_study():
    matrix = _random_likert(11, n=40, k=3)
    table = icc_table(_crossed_ratings(matrix), criterion="empathy", n_boot=200, seed=3, ci_level=0.9)
    reference = _bootstrap_by_loop(matrix, n_boot=200, seed=3, forms=coefficients.ICC_FORMS, level=0.9)
    got = table.set_index("form")
    for form, (low, high, _) in reference.items():
        assert (got.loc[form, "ci_low"], got.loc[form, "ci_high"]) == pytest.approx((low, high), abs=1e-9), form


def test_one_way_icc_intervals_equal_a_plain_bootstrap_loop():
    matrix = _random_likert(5, n=30, k=3)
    table = icc_table(_one_way_ratings(matrix), criterion="empathy", n_boot=250, seed=2).set_index("form")
    reference = _bootstrap_by_loop(matrix, n_boot=250, seed=2, forms=("ICC(1,1)", "ICC(1,k)"))
    for form, (low, high, defined) in reference.items():
        assert (table.loc[form, "ci_low"], table.loc[form, "ci_high"]) == pytest.approx((low, high), abs=1e-9)
        assert table.loc[form, "n_boot_defined"] == defined
        assert "one-way design, k = 3" == table.loc[form, "note"]


def test_the_agreement_table_reports_icc_2_1_for_a_crossed_design_and_icc_1_1_for_a_one_way_one():
    crossed = agreement_table(_crossed_ratings(SHROUT_FLEISS_1979), n_boot=100, seed=1, scale=(1, 10))
    row = crossed.loc[crossed["coefficient"] == "icc"].iloc[0]
    assert row["estimate"] == pytest.approx(_icc_by_the_book(SHROUT_FLEISS_1979)["ICC(2,1)"])
    assert row["note"].startswith("ICC(2,1), crossed design, k = 4")
    one_way = agreement_table(_one_way_ratings(SHROUT_FLEISS_1979), n_boot=100, seed=1, scale=(1, 10))
    row = one_way.loc[one_way["coefficient"] == "icc"].iloc[0]
    assert row["estimate"] == pytest.approx(_icc_by_the_book(SHROUT_FLEISS_1979)["ICC(1,1)"])
    assert row["note"].startswith("ICC(1,1), one-way design, k = 4")
