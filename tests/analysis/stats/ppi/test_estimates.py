"""Prediction-powered estimates (analysis.stats.ppi.estimates) equal ppi_py's and the closed form of PPI on a
fixed fixture, and the DataFrame functions compute what they say on it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate, ppi_mean_pval
from ppi_py.baselines import classical_mean_ci
from scipy import stats

from empeval.analysis.stats.ppi.estimates import (
    power_tuned_lambda,
    ppi_mean_interval,
    ppi_paired_differences,
    ppi_system_means,
    shared_rater_variance,
)
from empeval.analysis.stats.significance import adjust_pvalues

Z95 = stats.norm.ppf(0.975)


def fixture_tables(seed: int = 7, n_contexts: int = 60, n_rated: int = 15):
    """A fixed study: two systems, 60 contexts, 15 rated by two or three people in assignments of about four
    contexts (each assignment's rater with her own severity), a judge that tracks quality."""
    rng = np.random.default_rng(seed)
    severity = {f"asg-{batch}-{annotator}": rng.normal(0, 0.8) for batch in range(4) for annotator in range(3)}
    quality = {"gold": 3.8 + rng.normal(0, 0.6, n_contexts), "base": 3.1 + rng.normal(0, 0.6, n_contexts)}
    rows, scores = [], []
    for system, values in quality.items():
        for c, value in enumerate(values):
            scores.append({"context_id": f"c{c:02d}", "system": system, "criterion": "empathy",
                           "judge_score": round(float(0.7 * value + 1.2 + rng.normal(0, 0.3)), 3)})
            if c < n_rated:
                for annotator in range(2 + c % 2):
                    assignment = f"asg-{c % 4}-{annotator}"
                    rows.append({"context_id": f"c{c:02d}", "system": system, "criterion": "empathy",
                                 "annotator": f"a{annotator}", "assignment_id": assignment,
                                 "score": int(np.clip(np.rint(value + severity[assignment] + rng.normal(0, 0.7)),
                                                      1, 5))})
    return pd.DataFrame(rows), pd.DataFrame(scores)


def arrays_for(ratings: pd.DataFrame, judge: pd.DataFrame, system: str):
    """Labels, judge on rated, judge on unrated, computed independently of the library."""
    labels = ratings.loc[ratings["system"] == system].groupby("context_id")["score"].mean()
    scores = judge.loc[judge["system"] == system].set_index("context_id")["judge_score"].sort_index()
    rated = scores.index.isin(labels.index)
    return labels.reindex(scores.index[rated]).to_numpy(), scores[rated].to_numpy(), scores[~rated].to_numpy()


def test_system_means_equal_ppi_py_power_tuned_on_a_fixed_fixture():
    ratings, judge = fixture_tables()
    means = ppi_system_means(ratings, judge, cluster_by=None).set_index("system")
    for system in ("base", "gold"):
        y, f, f_unrated = arrays_for(ratings, judge, system)
        low, high = ppi_mean_ci(y, f, f_unrated, alpha=0.05, lam=None)
        estimate = ppi_mean_pointestimate(y, f, f_unrated, lam=None)
        assert means.loc[system, "ppi_ci_low"] == pytest.approx(float(low[0]), abs=1e-12)
        assert means.loc[system, "ppi_ci_high"] == pytest.approx(float(high[0]), abs=1e-12)
        # ppi_py's point estimate re-tunes lambda around its own lambda = 1 estimate, as its interval does.
        assert means.loc[system, "ppi_mean"] == pytest.approx(float(np.squeeze(estimate)), abs=1e-12)
        human_low, human_high = classical_mean_ci(y, alpha=0.05)
        assert (means.loc[system, "human_ci_low"], means.loc[system, "human_ci_high"]) == pytest.approx(
            (human_low, human_high), abs=1e-12)
        assert means.loc[system, "judge_mean_biased"] == pytest.approx(np.concatenate([f, f_unrated]).mean())
        assert means.loc[system, "n_human"] == 15 and means.loc[system, "n_judge_only"] == 45


def test_ppi_interval_is_the_closed_form_at_the_tuned_lambda():
    ratings, judge = fixture_tables()
    y, f, f_unrated = arrays_for(ratings, judge, "gold")
    result = ppi_mean_interval(y, f, f_unrated)
    lam = result["lam"]
    # theta = lam mean(f~) + mean(Y - lam f); se^2 = lam^2 var(f~) / N + var(Y - lam f) / n (1 / n variances)
    theta = lam * f_unrated.mean() + (y - lam * f).mean()
    se = np.sqrt(lam**2 * f_unrated.var() / f_unrated.size + (y - lam * f).var() / y.size)
    assert 0 < lam < 1
    assert result["ppi_mean"] == pytest.approx(theta, abs=1e-12)
    assert (result["ppi_ci_low"], result["ppi_ci_high"]) == pytest.approx((theta - Z95 * se, theta + Z95 * se),
                                                                          abs=1e-12)
    assert result["ppi_p"] == pytest.approx(2 * stats.norm.sf(abs(theta) / se), rel=1e-9)
    assert result["effective_n_human"] == pytest.approx(
        y.size * (2 * Z95 * y.std() / np.sqrt(y.size)) ** 2 / (2 * Z95 * se) ** 2, rel=1e-9)


def test_plain_ppi_lambda_one_is_judge_mean_plus_mean_rectifier():
    ratings, judge = fixture_tables()
    y, f, f_unrated = arrays_for(ratings, judge, "base")
    theta = f_unrated.mean() + (y - f).mean()
    se = np.sqrt(f_unrated.var() / f_unrated.size + (y - f).var() / y.size)
    low, high = ppi_mean_ci(y, f, f_unrated, alpha=0.05, lam=1)
    assert (float(low[0]), float(high[0])) == pytest.approx((theta - Z95 * se, theta + Z95 * se), abs=1e-12)


def test_tuned_lambda_is_ppi_py_s():
    ratings, judge = fixture_tables()
    y, f, f_unrated = arrays_for(ratings, judge, "gold")
    lam = power_tuned_lambda(y, f, f_unrated)
    low, high = ppi_mean_ci(y, f, f_unrated, alpha=0.05, lam=None)
    fixed_low, fixed_high = ppi_mean_ci(y, f, f_unrated, alpha=0.05, lam=lam)
    assert (float(fixed_low[0]), float(fixed_high[0])) == pytest.approx((float(low[0]), float(high[0])), abs=1e-12)
    # ...and differs from plain PPI and from human-only, so the equality above says something.
    assert ppi_mean_ci(y, f, f_unrated, alpha=0.05, lam=1)[0][0] != pytest.approx(float(low[0]), abs=1e-6)


def test_a_constant_judge_gets_no_weight_and_gives_the_human_interval():
    y = np.array([3.0, 4.0, 5.0, 4.0, 2.0])
    result = ppi_mean_interval(y, np.full(5, 3.0), np.full(20, 3.0))
    assert result["lam"] == 0.0
    assert (result["ppi_ci_low"], result["ppi_ci_high"]) == pytest.approx(
        (result["human_ci_low"], result["human_ci_high"]))


def test_paired_differences_equal_ppi_py_on_per_context_differences_with_holm():
    ratings, judge = fixture_tables()
    ratings = pd.concat([ratings, ratings.loc[ratings["system"] == "gold"].assign(
        system="mid", score=lambda t: np.clip(t["score"] - 1, 1, 5))])
    judge = pd.concat([judge, judge.loc[judge["system"] == "gold"].assign(
        system="mid", judge_score=lambda t: t["judge_score"] - 0.5 + 0.1 * np.sin(np.arange(len(t))))])
    pairs = ppi_paired_differences(ratings, judge, cluster_by=None)
    assert list(zip(pairs["system_a"], pairs["system_b"], strict=True)) == [
        ("base", "gold"), ("base", "mid"), ("gold", "mid")]
    for row in pairs.itertuples():
        y_a, f_a, u_a = arrays_for(ratings, judge, row.system_a)
        y_b, f_b, u_b = arrays_for(ratings, judge, row.system_b)
        low, high = ppi_mean_ci(y_a - y_b, f_a - f_b, u_a - u_b, alpha=0.05, lam=None)
        assert (row.ppi_ci_low, row.ppi_ci_high) == pytest.approx((float(low[0]), float(high[0])), abs=1e-12)
        lam = power_tuned_lambda(y_a - y_b, f_a - f_b, u_a - u_b)
        assert row.p_ppi == pytest.approx(float(ppi_mean_pval(y_a - y_b, f_a - f_b, u_a - u_b, lam=lam)[0]))
        assert row.human_diff == pytest.approx((y_a - y_b).mean())
    assert pairs["p_adj"].to_numpy() == pytest.approx(adjust_pvalues(pairs["p_ppi"].to_numpy(), method="holm"))
    assert (pairs["significant"] == (pairs["p_adj"] < 0.05)).all()
    assert set(pairs["correction"]) == {"holm"} and set(pairs["family"]) == {"criterion"}


def test_shared_raters_widen_both_intervals_by_the_two_way_cluster_term():
    ratings, judge = fixture_tables()
    plain = ppi_system_means(ratings, judge, cluster_by=None).set_index("system")
    clustered = ppi_system_means(ratings, judge).set_index("system")
    for system in ("base", "gold"):
        part = ratings.loc[ratings["system"] == system]
        labels = part.groupby("context_id")["score"].agg(["mean", "size"])
        centred = (part["score"] - labels["mean"].mean()) / part["context_id"].map(labels["size"])
        # Written out: sum over assignments of squared sums, minus the same over (context, assignment) cells.
        by_assignment = sum(centred[part["assignment_id"] == a].sum() ** 2 for a in part["assignment_id"].unique())
        by_cell = sum(group.sum() ** 2 for _, group in centred.groupby([part["context_id"], part["assignment_id"]]))
        extra = max(0.0, (by_assignment - by_cell) / len(labels) ** 2)
        assert extra > 0
        assert shared_rater_variance(centred, part["context_id"], part["assignment_id"],
                                     n_items=len(labels)) == pytest.approx(extra)
        for kind in ("ppi", "human"):
            half = (plain.loc[system, f"{kind}_ci_high"] - plain.loc[system, f"{kind}_ci_low"]) / 2
            widened = (clustered.loc[system, f"{kind}_ci_high"] - clustered.loc[system, f"{kind}_ci_low"]) / 2
            assert widened == pytest.approx(Z95 * np.sqrt((half / Z95) ** 2 + extra), rel=1e-9)
        assert clustered.loc[system, "rater_variance"] == pytest.approx(extra)
        assert plain.loc[system, "rater_variance"] == 0.0
        assert clustered.loc[system, "ppi_mean"] == plain.loc[system, "ppi_mean"]
        assert clustered.loc[system, "lam"] == plain.loc[system, "lam"]


def test_tidy_tables_with_context_and_assignment_columns_are_read_too():
    ratings, judge = fixture_tables()
    tidy = ratings.rename(columns={"context_id": "context", "assignment_id": "assignment"})
    pd.testing.assert_frame_equal(ppi_system_means(tidy, judge), ppi_system_means(ratings, judge))


@pytest.mark.slow  # two fresh interpreters importing numba: seconds each
def test_ppi_py_loads_at_first_use_and_leaves_warnings_on_although_it_turns_them_off():
    silenced = ("any(f[0] == 'ignore' and f[1] is None and f[2] is Warning and f[3] is None "
                "for f in warnings.filters)")
    premise = subprocess.run([sys.executable, "-c", f"import warnings, ppi_py; print({silenced})"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert premise == ["True"], "ppi_py no longer silences warnings on import: the guard may go"
    # Drawing an active sample (empeval.sampling) loads none of the statistics; the estimators load scipy but not
    # ppi_py (numba, scikit-learn); the first interval does, and every warning filter is as it was (crossfit's
    # intervals go through the same ppi_py()).
    loaded = "print(*(name in sys.modules for name in ('scipy', 'statsmodels', 'ppi_py', 'numba')))"
    probe = (f"import sys, warnings, empeval.cli, empeval.sampling; {loaded}; "
             "import empeval.analysis.stats.ppi.crossfit; "
             f"from empeval.analysis.stats.ppi.estimates import ppi_mean_interval; {loaded}; "
             "ppi_mean_interval([1.0, 2.0, 3.0], [1.5, 2.0, 2.5], [2.0, 3.0]); "
             f"print('ppi_py' in sys.modules, {silenced})")
    printed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert printed == ["False"] * 4 + ["True", "True", "False", "False"] + ["True", "False"]


@pytest.mark.parametrize("df", [None, 1, 3, 14.0, 199])
def test_the_interval_reference_gives_scipy_stats_values_exactly(df):
    from scipy import stats

    from empeval.analysis.stats.ppi.estimates import interval_reference

    reference, scipys = interval_reference(df), stats.norm if df is None else stats.t(df)
    rng = np.random.default_rng(7)
    for q in [*rng.random(200), 0.5, 0.975, 1e-12, 1 - 1e-12, 0.0, 1.0]:
        assert reference.ppf(q) == scipys.ppf(q), q
    for x in [*rng.normal(0, 4, 200), 0.0, 40.0, -40.0, np.inf]:
        assert reference.sf(x) == scipys.sf(x), x
    assert np.isnan(reference.sf(np.nan)) and np.isnan(reference.ppf(np.nan))
