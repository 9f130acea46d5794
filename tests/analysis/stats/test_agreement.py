"""Agreement coefficients reproduce published values, the vectorised bootstrap is exact, undefined is NaN."""

from __future__ import annotations

import krippendorff
import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

from empeval.analysis.stats import coefficients
from empeval.analysis.stats.agreement import agreement_table, icc_table
from empeval.analysis.stats.bootstrap import resample_weights

VALUES = np.arange(1, 6)


def _estimate(table: pd.DataFrame, coefficient: str, criterion: str = "empathy") -> pd.Series:
    row = table.loc[(table["coefficient"] == coefficient) & (table["criterion"] == criterion)
                    & (table["system"] == "(all)")]
    assert len(row) == 1
    return row.iloc[0]


# --- Krippendorff's alpha -------------------------------------------------------------------------------


@pytest.mark.parametrize("level, published", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)])
def test_alpha_reproduces_krippendorff_2011(krippendorff_2011, level, published):
    counts = coefficients.unit_value_counts(krippendorff_2011, VALUES)
    assert round(coefficients.krippendorff_alpha(counts, VALUES, level=level), 3) == published


def test_alpha_from_the_tidy_table_reproduces_krippendorff_2011(krippendorff_2011, to_long):
    table = agreement_table(to_long(krippendorff_2011), n_boot=200)
    assert round(_estimate(table, "alpha_ordinal")["estimate"], 3) == 0.815
    assert round(_estimate(table, "alpha_interval")["estimate"], 3) == 0.849
    assert _estimate(table, "alpha_ordinal")["n_items"] == 11  # unit 12 has a single value: not pairable


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_identity_resample_equals_the_krippendorff_package(seed, level):
    rng = np.random.default_rng(seed)
    data = rng.integers(1, 6, size=(rng.integers(2, 6), rng.integers(5, 200))).astype(float)
    data[rng.random(data.shape) < 0.3] = np.nan
    counts = coefficients.unit_value_counts(data, VALUES)
    identity = np.ones((1, counts.shape[0]))
    expected = krippendorff.alpha(data, level_of_measurement=level, value_domain=VALUES)
    # Equal up to the order of floating-point summation (BLAS product vs the package's pairwise sum).
    assert coefficients.krippendorff_alpha(counts, VALUES, level=level, unit_weights=identity)[0] == pytest.approx(
        expected, rel=1e-12, abs=1e-12)
    assert coefficients.krippendorff_alpha(counts, VALUES, level=level) == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_each_bootstrap_resample_equals_alpha_of_the_resampled_items(level):
    rng = np.random.default_rng(3)
    data = rng.integers(1, 6, size=(3, 40)).astype(float)
    data[rng.random(data.shape) < 0.2] = np.nan
    counts = coefficients.unit_value_counts(data, VALUES)
    weights = resample_weights(counts.shape[0], n_boot=25, seed=11)
    vectorised = coefficients.krippendorff_alpha(counts, VALUES, level=level, unit_weights=weights)
    for b, row in enumerate(weights):
        resampled = data[:, np.repeat(np.arange(data.shape[1]), row.astype(int))]
        assert vectorised[b] == pytest.approx(
            krippendorff.alpha(resampled, level_of_measurement=level, value_domain=VALUES), rel=1e-10)


def test_bootstrap_of_alpha_is_centred_on_the_estimate():
    # 300 items x 3 raters, with real signal: the bootstrap distribution must sit around the estimate.
    rng = np.random.default_rng(5)
    truth = rng.normal(3, 1, size=300)
    data = np.clip(np.rint(truth[None, :] + rng.normal(0, 0.8, size=(3, 300))), 1, 5)
    counts = coefficients.unit_value_counts(data, VALUES)
    estimate = coefficients.krippendorff_alpha(counts, VALUES, level="ordinal")
    boot = coefficients.krippendorff_alpha(counts, VALUES, level="ordinal",
                                           unit_weights=resample_weights(300, n_boot=2000, seed=1))
    assert 0.4 < estimate < 0.9
    assert abs(boot.mean() - estimate) < 0.01
    low, high = np.quantile(boot, [0.025, 0.975])
    assert low < estimate < high and 0.02 < high - low < 0.2


def test_agreement_table_gives_cis_that_bracket_the_estimates(simulated_ratings):
    table = agreement_table(simulated_ratings, n_boot=300)
    defined = table.loc[table["estimate"].notna()]
    assert set(defined["coefficient"]) >= {"alpha_ordinal", "alpha_interval", "ac2_ordinal", "fleiss_kappa",
                                           "percent_exact", "percent_within_one"}
    assert (defined["ci_low"] <= defined["estimate"]).all() and (defined["estimate"] <= defined["ci_high"]).all()
    assert (defined["n_boot_defined"] == 300).all()


def test_agreement_per_system_on_request(simulated_ratings):
    table = agreement_table(simulated_ratings, criteria=["empathy"], by_system=True, n_boot=50)
    assert set(table["system"]) == {"(all)", "gold", "moel", "baseline"}
    assert "control-generic" not in set(table["system"])


# --- Fleiss, Gwet, ICC, percent agreement ---------------------------------------------------------------


def test_fleiss_kappa_reproduces_fleiss_1971(fleiss_1971):
    assert round(coefficients.fleiss_kappa(fleiss_1971), 3) == 0.430
    assert coefficients.fleiss_kappa(fleiss_1971) == pytest.approx(statsmodels_fleiss_kappa(fleiss_1971), abs=1e-12)


def test_fleiss_kappa_resamples_match_statsmodels(fleiss_1971):
    weights = resample_weights(30, n_boot=10, seed=2)
    vectorised = coefficients.fleiss_kappa(fleiss_1971, unit_weights=weights)
    for b, row in enumerate(weights):
        table = np.repeat(fleiss_1971, row.astype(int), axis=0)
        assert vectorised[b] == pytest.approx(statsmodels_fleiss_kappa(table), abs=1e-12)


@pytest.mark.parametrize("form, published", [("ICC(1,1)", 0.17), ("ICC(2,1)", 0.29), ("ICC(3,1)", 0.71),
                                             ("ICC(1,k)", 0.44), ("ICC(2,k)", 0.62), ("ICC(3,k)", 0.91)])
def test_icc_reproduces_shrout_fleiss_1979(shrout_fleiss_1979, form, published):
    assert round(coefficients.icc_two_way(shrout_fleiss_1979)[form], 2) == published


def test_icc_table_estimates_all_forms_for_a_crossed_design(shrout_fleiss_1979, to_long):
    table = icc_table(to_long(shrout_fleiss_1979.T), criterion="empathy", n_boot=200).set_index("form")
    assert round(table.loc["ICC(2,1)", "estimate"], 2) == 0.29
    assert round(table.loc["ICC(3,1)", "estimate"], 2) == 0.71
    assert table["estimate"].notna().all()


def test_icc_with_different_raters_per_item_gives_only_the_one_way_forms(shrout_fleiss_1979):
    rows = [{"item": f"t{t}", "annotator": f"judge-{t}-{j}", "criterion": "empathy", "score": float(score),
             "is_control": False} for t, scores in enumerate(shrout_fleiss_1979) for j, score in enumerate(scores)]
    table = icc_table(pd.DataFrame(rows), criterion="empathy", n_boot=50).set_index("form")
    assert round(table.loc["ICC(1,1)", "estimate"], 2) == 0.17
    assert np.isnan(table.loc["ICC(2,1)", "estimate"])
    assert "only the one-way forms" in table.loc["ICC(2,1)", "note"]


def test_icc_of_an_unbalanced_design_is_computed_on_its_largest_balanced_subset(krippendorff_2011, to_long):
    # The 8 of 12 units every one of the 4 raters rated (32 ratings; 3 raters would keep 30): ICC(2,1) of Shrout &
    # Fleiss's two-way table on them is 0.7007 (their formula, by hand: MSR, MSC and MSE of the 8 x 4 table).
    row = _estimate(agreement_table(to_long(krippendorff_2011), n_boot=50), "icc")
    assert round(row["estimate"], 3) == 0.701 and row["n_items"] == 8
    assert "largest balanced subset, 8 of 12 items" in row["note"]


def test_gwet_ordinal_weights_match_irrcac():
    # irrCAC's documented ordinal.weights(1:3): 1, 2/3, 0 from the diagonal outwards.
    expected = np.array([[1, 2 / 3, 0], [2 / 3, 1, 2 / 3], [0, 2 / 3, 1]])
    np.testing.assert_allclose(coefficients.gwet_weights(np.arange(1, 4), "ordinal"), expected)


def test_gwet_ac1_reproduces_the_handbook_value(krippendorff_2011):
    # Gwet (2014) / irrCAC gwet.ac1.raw(cac.raw4raters), the same 4 x 12 data: AC1 = 0.7754, p_a = 0.8182.
    counts = coefficients.unit_value_counts(krippendorff_2011, VALUES)
    assert round(coefficients.gwet_ac2(counts, VALUES, weights="identity"), 4) == 0.7754
    assert round(coefficients.percent_agreement(counts, VALUES), 4) == 0.8182


def _ac2_by_the_book(data: np.ndarray, weights: np.ndarray) -> float:
    """Gwet (2014) eq. 5.2-5.4, written as plain loops over subjects and raters."""
    q = len(VALUES)
    units = [data[:, u][~np.isnan(data[:, u])] for u in range(data.shape[1])]
    units = [u for u in units if u.size >= 1]
    p_a_terms, pi = [], np.zeros(q)
    for ratings in units:
        r = np.array([(ratings == v).sum() for v in VALUES], dtype=float)
        pi += r / r.sum()
        if r.sum() >= 2:
            p_a_terms.append(sum(r[k] * (sum(weights[k, m] * r[m] for m in range(q)) - 1) for k in range(q))
                             / (r.sum() * (r.sum() - 1)))
    pi /= len(units)
    p_a = np.mean(p_a_terms)
    p_e = weights.sum() / (q * (q - 1)) * sum(p * (1 - p) for p in pi)
    return (p_a - p_e) / (1 - p_e)


@pytest.mark.parametrize("seed", range(4))
def test_gwet_ac2_matches_the_formula_written_out(seed):
    rng = np.random.default_rng(seed)
    data = rng.integers(1, 6, size=(4, 30)).astype(float)
    data[rng.random(data.shape) < 0.3] = np.nan
    counts = coefficients.unit_value_counts(data, VALUES)
    weights = coefficients.gwet_weights(VALUES, "ordinal")
    assert coefficients.gwet_ac2(counts, VALUES) == pytest.approx(_ac2_by_the_book(data, weights), abs=1e-12)


def test_percent_agreement_counts_rater_pairs_within_items():
    # Item 1: scores 3, 3, 4 -> pairs (3,3) exact, (3,4) x2 within one: 1/3 exact, 3/3 within one.
    # Item 2: scores 1, 5 -> 0 exact, 0 within one.
    counts = np.array([[0, 0, 2, 1, 0], [1, 0, 0, 0, 1]], dtype=float)
    assert coefficients.percent_agreement(counts, VALUES) == pytest.approx((1 / 3 + 0) / 2)
    assert coefficients.percent_agreement(counts, VALUES, tolerance=1) == pytest.approx((1 + 0) / 2)


# --- undefined cases ------------------------------------------------------------------------------------


def test_no_variation_gives_nan_with_a_reason_never_zero_or_one(to_long):
    constant = np.full((3, 10), 4.0)
    table = agreement_table(to_long(constant), n_boot=50)
    for coefficient in ("alpha_ordinal", "alpha_interval", "ac2_ordinal", "fleiss_kappa", "icc"):
        row = _estimate(table, coefficient)
        assert np.isnan(row["estimate"]), coefficient
        assert "no variation" in row["note"], coefficient
    assert _estimate(table, "percent_exact")["estimate"] == 1.0  # raw agreement is defined: all pairs agree


def test_no_pairable_item_gives_nan_with_a_reason(to_long):
    diagonal = np.full((3, 3), np.nan)
    np.fill_diagonal(diagonal, [1, 3, 5])
    table = agreement_table(to_long(diagonal), n_boot=50)
    assert table["estimate"].isna().all()
    assert table["note"].str.contains("nothing to pair").all()


def test_bootstrap_drops_resamples_without_variation_and_says_how_many(to_long):
    data = np.full((2, 30), 3.0)
    data[:, 0] = [1, 5]  # one item carries all the variation: many resamples miss it
    row = _estimate(agreement_table(to_long(data), n_boot=400), "alpha_interval")
    assert np.isfinite(row["estimate"])
    assert 0 < row["n_boot_defined"] < 400


def test_scores_off_the_scale_are_refused(to_long):
    with pytest.raises(ValueError, match="1-5 scale"):
        agreement_table(to_long(np.array([[1.0, 2.5], [1.0, 2.0]])), n_boot=10)


def test_units_of_different_systems_are_never_pooled_as_raters(simulated_ratings):
    # Every item belongs to exactly one system, so pooled and per-system item counts add up.
    table = agreement_table(simulated_ratings, criteria=["fluency"], by_system=True, n_boot=20)
    alpha_rows = table.loc[table["coefficient"] == "alpha_ordinal"].set_index("system")
    assert alpha_rows.loc["(all)", "n_items"] == alpha_rows.drop(index="(all)")["n_items"].sum()
