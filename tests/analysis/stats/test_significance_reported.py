"""Statistics papers report, checked against the libraries that compute them independently: the mean and SD of
all ratings per system and criterion (the EmpatheticDialogues paper's table) against pandas on the raw ratings,
and Wilcoxon's own statistic T = min(W+, W-) beside W+ against scipy.stats.wilcoxon's two-sided statistic."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from empeval.analysis import simulate_study, tidy_from_export
from empeval.analysis.stats.significance import compare_pairs, paired_tests, system_means


def test_the_mean_and_sd_of_all_ratings_are_those_of_the_raw_ratings():
    ratings = tidy_from_export(simulate_study(n_contexts=12, seed=5).export)
    means = system_means(ratings, n_boot=50)
    plain = ratings.loc[~ratings["is_control"].astype(bool)]
    for row in means.itertuples():
        scores = plain.loc[(plain["criterion"] == row.criterion) & (plain["system"] == row.system), "score"]
        assert row.mean_ratings == pytest.approx(scores.mean())
        assert row.sd_ratings == pytest.approx(np.std(scores.to_numpy(dtype=float), ddof=1))
        assert row.n_ratings == scores.size


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-4, 4), min_size=3, max_size=40))
def test_wilcoxons_t_is_min_of_the_rank_sums_as_scipy_reports_it(steps):
    a = np.array(steps, dtype=float) / 2 + 3.0
    b = np.full_like(a, 3.0)
    if not (a - b != 0).any():
        return
    result = paired_tests(a, b, n_boot=0)
    # The statistic is the same whatever the p-value's method; method="auto" would run a 9,999-resample permutation
    # test for every small sample with ties (0.4 s each, 30 s of CPU for this test in the suite) for a p never read.
    scipy_t = stats.wilcoxon(a - b, zero_method="wilcox", alternative="two-sided", method="approx").statistic
    assert result["w_min"] == pytest.approx(float(scipy_t))
    assert result["w_min"] <= result["w_plus"]


def test_the_pairwise_table_carries_wilcoxons_t():
    ratings = tidy_from_export(simulate_study(n_contexts=12, seed=6).export)
    table = compare_pairs(ratings, n_boot=0)
    assert "w_min" in table.columns
    defined = table.dropna(subset=["p_wilcoxon"])
    assert (defined["w_min"] <= defined["w_plus"]).all()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=2, max_size=40),
       st.sampled_from(["quadratic", "linear"]))
def test_cohens_weighted_kappa_is_scikit_learns(pairs, weights):
    from sklearn.metrics import cohen_kappa_score

    from empeval.analysis.stats.coefficients import cohen_weighted_kappa

    pairs = np.array(pairs)
    ours = cohen_weighted_kappa(pairs, np.arange(1, 6), weights=weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        theirs = cohen_kappa_score(pairs[:, 0], pairs[:, 1], weights=weights, labels=[1, 2, 3, 4, 5])
    if np.isfinite(theirs):
        assert ours == pytest.approx(float(theirs), abs=1e-12)
    else:
        assert np.isnan(ours)


def test_two_raters_on_every_item_get_a_weighted_kappa_row_and_other_designs_none():
    import pandas as pd

    from empeval.analysis.stats.agreement import agreement_table
    from empeval.analysis.stats.coefficients import cohen_weighted_kappa

    rng = np.random.default_rng(2)
    truth = rng.integers(1, 6, 30)
    scores = {"ann": truth, "bob": np.clip(truth + rng.integers(-1, 2, 30), 1, 5)}
    ratings = pd.DataFrame([{"item": f"i{i}", "system": "s", "annotator": name, "criterion": "empathy",
                             "score": int(values[i]), "is_control": False}
                            for name, values in scores.items() for i in range(30)])
    table = agreement_table(ratings, n_boot=200)
    row = table.loc[table["coefficient"] == "kappa_quadratic"].iloc[0]
    assert row["estimate"] == pytest.approx(cohen_weighted_kappa(np.column_stack([scores["ann"], scores["bob"]]),
                                                                 np.arange(1, 6)))
    assert row["ci_low"] < row["estimate"] < row["ci_high"] and row["n_items"] == 30
    third = pd.concat([ratings, ratings.loc[ratings["annotator"] == "ann"].assign(annotator="cat")])
    assert "kappa_quadratic" not in set(agreement_table(third, n_boot=50)["coefficient"])
