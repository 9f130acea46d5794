"""Systems compared per criterion: means with CIs, paired tests on item-level means, corrections, effect sizes.

The unit of analysis is the item, not the rating: the annotators' scores of an item are averaged first, so
that an item rated by three people counts once (ratings of one item are not independent). Systems are
paired by dialogue context (every system answered the same contexts), which is what makes the signed-rank
and paired t-tests valid. Control items are never part of a comparison.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, stats
from statsmodels.stats.multitest import multipletests

from empeval.analysis.kinds.likert.load import require_columns
from empeval.analysis.stats.bootstrap import (
    draws_forgotten_after,
    percentile_interval,
    resample_weights,
    weighted_sums,
)

#: Differences of item means are rounded to this many decimals before ranking: 10/3 - 7/3 is not exactly 1.0
#: in floating point, and without rounding such near-equal values would get different ranks (a false
#: "no ties") and an exact p-value that does not apply.
DEFAULT_DECIMALS = 9

FAMILIES = ("criterion", "study")


def item_means(ratings: pd.DataFrame, *, include_controls: bool = False) -> pd.DataFrame:
    """Mean score of each item over its annotators, the unit every comparison works on.

    Returns
    -------
    means : pandas.DataFrame
        One row per criterion and item (control items left out unless ``include_controls``):

        * ``criterion``, ``system``, ``context``, ``item``
        * ``score``: the mean of the item's ratings on that criterion
        * ``n_ratings``: how many ratings were averaged

    Examples
    --------
    >>> import pandas as pd
    >>> ratings = pd.DataFrame({
    ...     "item": ["c1:gold", "c1:gold", "c1:base", "c1:base", "c2:gold", "c2:base", "c2:base"],
    ...     "context": ["c1", "c1", "c1", "c1", "c2", "c2", "c2"],
    ...     "system": ["gold", "gold", "base", "base", "gold", "base", "base"],
    ...     "annotator": ["ann", "bob", "ann", "bob", "ann", "ann", "bob"],
    ...     "criterion": "empathy", "score": [5, 4, 2, 3, 4, 3, 2], "is_control": False})
    >>> item_means(ratings)
      criterion system context     item  score  n_ratings
    0   empathy   base      c1  c1:base    2.5          2
    1   empathy   base      c2  c2:base    2.5          2
    2   empathy   gold      c1  c1:gold    4.5          2
    3   empathy   gold      c2  c2:gold    4.0          1
    """
    require_columns(ratings, ("item", "context", "system", "criterion", "score", "is_control"), what="item_means")
    # Only the columns grouped and averaged are copied: the report's table has a dozen more, strings at 1M rows.
    columns = ["criterion", "system", "context", "item", "score"]
    subset = ratings[columns] if include_controls else ratings.loc[~ratings["is_control"].astype(bool), columns]
    grouped = subset.groupby(["criterion", "system", "context", "item"], sort=True, observed=True)["score"]
    return grouped.agg(score="mean", n_ratings="size").reset_index()


def context_means(ratings: pd.DataFrame, *, criterion: str) -> pd.DataFrame:
    """Wide table contexts x systems of item-level means for one criterion (an item mean per context and
    system; if a system has several items in one context, their means are averaged).

    Returns
    -------
    wide : pandas.DataFrame
        Index ``context`` (sorted), one column per system, values the item-level mean score; NaN where a
        system has no item in that context.

    Examples
    --------
    >>> import pandas as pd
    >>> ratings = pd.DataFrame({
    ...     "item": ["c1:gold", "c1:gold", "c1:base", "c1:base", "c2:gold", "c2:base", "c2:base"],
    ...     "context": ["c1", "c1", "c1", "c1", "c2", "c2", "c2"],
    ...     "system": ["gold", "gold", "base", "base", "gold", "base", "base"],
    ...     "annotator": ["ann", "bob", "ann", "bob", "ann", "ann", "bob"],
    ...     "criterion": "empathy", "score": [5, 4, 2, 3, 4, 3, 2], "is_control": False})
    >>> context_means(ratings, criterion="empathy")  # doctest: +NORMALIZE_WHITESPACE
    system   base  gold
    context
    c1        2.5   4.5
    c2        2.5   4.0
    """
    return _by_context(item_means(ratings), criterion)


def _by_context(means: pd.DataFrame, criterion: str) -> pd.DataFrame:
    """``context_means`` from the item means already computed (``item_means`` groups the whole table by four
    string columns: the costliest step of a comparison on a large study, so it is done once per call)."""
    means = means.loc[means["criterion"] == criterion]
    # groupby + unstack is pivot_table's result without its generality: 1.0 against 3.6 ms at 12 contexts, 5.3
    # against 9.9 ms at 5,000 (four systems), and a report calls this per criterion and comparison.
    return means.groupby(["context", "system"])["score"].mean().unstack("system").sort_index()


def system_means(
    ratings: pd.DataFrame,
    *,
    criteria: list[str] | None = None,
    n_boot: int = 2000,
    ci_level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Mean score per criterion and system with a percentile bootstrap CI over items.

    The mean is the mean of item-level means (each item weighted equally; equal to the mean of all ratings
    when every item has the same number of ratings). The interval is the percentile bootstrap (Efron &
    Tibshirani 1993) over items, ``n_boot`` resamples, seeded.

    Returns
    -------
    means : pandas.DataFrame
        One row per criterion and system (control items left out):

        * ``criterion``, ``system``
        * ``mean``: mean of the item-level means
        * ``ci_low``, ``ci_high``: percentile bootstrap CI at ``ci_level``
        * ``sd_items``: SD of the item-level means (ddof = 1; NaN with one item)
        * ``mean_ratings``, ``sd_ratings``: mean and SD (ddof = 1) of all the ratings, each rating counted once:
          the table of the EmpatheticDialogues paper (Rashkin et al. 2019) and most papers after it
        * ``n_items``, ``n_ratings``, ``n_annotators``: what the mean rests on

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> ratings = tidy_from_export(simulate_study(n_contexts=10, seed=1).export)
    >>> means = system_means(ratings, criteria=["empathy"])
    >>> print(means[["system", "mean", "ci_low", "ci_high", "n_items"]].round(2).to_string(index=False))
      system  mean  ci_low  ci_high  n_items
    baseline  3.10    2.67     3.47       10
        gold  4.07    3.77     4.37       10
        moel  3.37    2.90     3.77       10
    """
    require_columns(ratings, ("annotator",), what="system_means")
    means = item_means(ratings)
    plain = ratings.loc[~ratings["is_control"].astype(bool), ["criterion", "system", "annotator", "score"]]
    raters = plain.groupby(["criterion", "system"], observed=True)["annotator"].nunique()
    every = plain.groupby(["criterion", "system"], observed=True)["score"].agg(["mean", "std"])
    criteria = list(criteria) if criteria is not None else sorted(means["criterion"].unique())
    rows = []
    with draws_forgotten_after():  # the systems share numbers of items across criteria, not with the next analysis
        for criterion in criteria:
            rows += _system_rows(means, every, raters, criterion, n_boot=n_boot, ci_level=ci_level, seed=seed)
    return pd.DataFrame(rows)


def _system_rows(means: pd.DataFrame, every: pd.DataFrame, raters: pd.Series, criterion: str, *, n_boot: int,
                 ci_level: float, seed: int) -> list[dict]:
    """``system_means``' rows of one criterion."""
    rows = []
    for system, part in means.loc[means["criterion"] == criterion].groupby("system", sort=True):
        scores = part["score"].to_numpy(dtype=float)
        boot = weighted_sums(resample_weights(scores.size, n_boot=n_boot, seed=seed), scores) / scores.size
        low, high, _ = percentile_interval(boot, level=ci_level)
        rows.append(
            {"criterion": criterion, "system": system, "mean": float(scores.mean()), "ci_low": low,
             "ci_high": high, "sd_items": float(scores.std(ddof=1)) if scores.size > 1 else np.nan,
             "mean_ratings": float(every.loc[(criterion, system), "mean"]),
             "sd_ratings": float(every.loc[(criterion, system), "std"]),
             "n_items": int(scores.size), "n_ratings": int(part["n_ratings"].sum()),
             "n_annotators": int(raters[(criterion, system)])}
        )
    return rows


def paired_tests(
    a: np.ndarray,
    b: np.ndarray,
    *,
    decimals: int | None = DEFAULT_DECIMALS,
    zero_method: str = "wilcox",
    exact_max_n: int = 50,
    continuity: bool = True,
    n_boot: int = 2000,
    ci_level: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> dict:
    """Wilcoxon signed-rank and paired t-test of a - b, with effect sizes and their CIs.

    Wilcoxon (two-sided): exact null distribution when there are at most ``exact_max_n`` non-zero differences
    and no ties among their absolute values, otherwise the normal approximation with tie correction and,
    if ``continuity``, continuity correction (as R's wilcox.test). ``zero_method`` "wilcox" drops zero
    differences (Wilcoxon 1945), "pratt" ranks them first (Pratt 1959). ``w_plus`` is the sum of the ranks of
    positive differences (R's V).

    ``decimals``: differences are rounded to this many decimals before ranking (see ``DEFAULT_DECIMALS``);
    None turns the guard off, which is only useful to show what it prevents.

    Effect sizes: matched-pairs rank-biserial r = (R+ - R-) / (R+ + R-) over non-zero differences (Kerby
    2014), with a percentile bootstrap CI over pairs (``n_boot`` resamples; 0 skips it and leaves the CI NaN, for
    callers that need only the tests); Cohen's d_z = mean(d) / sd(d) with the exact CI from
    the noncentral t distribution (Cumming & Finch 2001).

    Returns
    -------
    result : dict
        * ``n_pairs``, ``n_nonzero``: pairs, and pairs with a non-zero difference
        * ``mean_a``, ``mean_b``, ``mean_diff``: means of a, b and of a - b
        * ``w_plus``: sum of the ranks of the positive differences (R's V); ``w_min``: min(W+, W-), Wilcoxon's
          own statistic T (Wilcoxon 1945; the one tables of critical values and scipy's two-sided ``wilcoxon``
          report)
        * ``p_wilcoxon``, ``wilcoxon_method``: two-sided p and how it was computed ("exact", "normal approx."
          with the corrections applied, or "undefined")
        * ``t``, ``df``, ``p_t``: the paired t-test
        * ``d_z``, ``dz_ci_low``, ``dz_ci_high``: Cohen's d_z and its noncentral-t CI
        * ``rank_biserial``, ``rb_ci_low``, ``rb_ci_high``: matched-pairs rank-biserial r and its bootstrap CI
        * ``note``: why a test is undefined, else ""

    Examples
    --------
    R's ``sleep`` data (Student 1908), where ``wilcox.test(paired = TRUE)`` gives V = 45, p = 0.009091 and
    ``t.test(paired = TRUE)`` t = 4.0621, df = 9, p = 0.002833:

    >>> drug_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
    >>> drug_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]
    >>> result = paired_tests(drug_2, drug_1)
    >>> result["w_plus"], round(result["p_wilcoxon"], 6), result["wilcoxon_method"]
    (45.0, 0.009091, 'normal approx., tie-corrected, continuity-corrected')
    >>> round(result["t"], 4), result["df"], round(result["p_t"], 6), round(result["d_z"], 2)
    (4.0621, 9, 0.002833, 1.28)
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("paired tests need two 1-d arrays of the same length")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("paired tests need complete pairs (no NaN)")
    d = a - b if decimals is None else np.round(a - b, decimals)
    n = d.size
    nonzero = d[d != 0]
    result: dict = {"n_pairs": int(n), "mean_a": _mean(a), "mean_b": _mean(b), "mean_diff": _mean(d),
                    "n_nonzero": int(nonzero.size)}
    notes = []

    w_plus, rank_biserial = _signed_rank_sums(d)
    w_plus, rank_biserial = float(w_plus[0]), float(rank_biserial[0])
    # W+ ranks the non-zero differences among themselves, so with W- they make up m (m + 1) / 2.
    w_minus = nonzero.size * (nonzero.size + 1) / 2 - w_plus
    result["w_plus"], result["w_min"] = w_plus, float(min(w_plus, w_minus))
    if nonzero.size == 0:
        result.update(p_wilcoxon=np.nan, wilcoxon_method="undefined")
        notes.append("all differences are zero: Wilcoxon undefined")
    else:
        ties = np.unique(np.abs(nonzero)).size < nonzero.size
        exact = nonzero.size <= exact_max_n and not ties and (zero_method == "wilcox" or nonzero.size == n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            if exact:
                test = stats.wilcoxon(nonzero, method="exact")
                method = "exact"
            else:
                test = stats.wilcoxon(d, zero_method=zero_method, correction=continuity, method="approx")
                method = ("normal approx." + (", tie-corrected" if ties else "")
                          + (", continuity-corrected" if continuity else ""))
        result.update(p_wilcoxon=float(test.pvalue), wilcoxon_method=method)

    sd = float(np.std(d, ddof=1)) if n > 1 else np.nan
    if n < 2 or not sd > 0:
        result.update(t=np.nan, df=np.nan, p_t=np.nan, d_z=np.nan, dz_ci_low=np.nan, dz_ci_high=np.nan)
        notes.append("differences have no variance: t-test and d_z undefined")
    else:
        test = stats.ttest_1samp(d, 0.0)
        d_z = float(d.mean() / sd)
        low, high = _dz_interval(d_z, n, ci_level)
        result.update(t=float(test.statistic), df=int(n - 1), p_t=float(test.pvalue), d_z=d_z,
                      dz_ci_low=low, dz_ci_high=high)

    result["rank_biserial"] = rank_biserial
    if nonzero.size and n > 1 and n_boot > 0:
        boot_r = _bootstrap_rank_biserial(d, n_boot=n_boot, rng=np.random.default_rng(seed))
        low, high, _ = percentile_interval(boot_r, level=ci_level)
    else:
        low = high = np.nan
    result.update(rb_ci_low=low, rb_ci_high=high, note="; ".join(notes))
    return result


def compare_pairs(
    ratings: pd.DataFrame,
    *,
    criteria: list[str] | None = None,
    family: str = "criterion",
    correction: str = "holm",
    alpha: float = 0.05,
    decimals: int | None = DEFAULT_DECIMALS,
    zero_method: str = "wilcox",
    exact_max_n: int = 50,
    continuity: bool = True,
    n_boot: int = 2000,
    ci_level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """All pairs of systems per criterion: Wilcoxon signed-rank on item-level means paired by context, a
    paired t-test beside it, rank-biserial r and Cohen's d_z with CIs, and p-values corrected for multiple
    testing.

    ``family`` declares what the correction runs over: "criterion" (default; all pairs within a criterion)
    or "study" (all pairwise tests of the study, every criterion). ``correction`` is any method of
    statsmodels' multipletests ("holm", "bonferroni", "fdr_bh", ...) or "none". Both the Wilcoxon and the
    t-test p-values are corrected, each in its own family. The tests and effect sizes are those of
    ``paired_tests``.

    Returns
    -------
    pairs : pandas.DataFrame
        One row per criterion and pair (a, b), systems in sorted order:

        * ``criterion``, ``system_a``, ``system_b``
        * ``n_pairs``: contexts rated for both systems; ``n_nonzero``: those with a non-zero difference
        * ``mean_a``, ``mean_b``, ``mean_diff``: means of the item-level means, and of a - b
        * ``w_plus``, ``wilcoxon_method``, ``p_wilcoxon``: the Wilcoxon signed-rank test
        * ``p_adj``: ``p_wilcoxon`` corrected over the family
        * ``t``, ``df``, ``p_t``, ``p_t_adj``: the paired t-test, and its p corrected over the family
        * ``rank_biserial``, ``rb_ci_low``, ``rb_ci_high``: matched-pairs rank-biserial r with bootstrap CI
        * ``d_z``, ``dz_ci_low``, ``dz_ci_high``: Cohen's d_z with noncentral-t CI
        * ``significant``: ``p_adj < alpha``
        * ``correction``, ``family``: as passed
        * ``note``: why a test is undefined, else ""

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> ratings = tidy_from_export(simulate_study(n_contexts=10, seed=1).export)
    >>> pairs = compare_pairs(ratings, criteria=["empathy"])
    >>> columns = ["system_a", "system_b", "n_pairs", "mean_diff", "p_wilcoxon", "p_adj", "significant"]
    >>> print(pairs[columns].round(3).to_string(index=False))
    system_a system_b  n_pairs  mean_diff  p_wilcoxon  p_adj  significant
    baseline     gold       10     -0.967       0.012  0.035         True
    baseline     moel       10     -0.267       0.187  0.187        False
        gold     moel       10      0.700       0.072  0.143        False
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    means = item_means(ratings)
    criteria = list(criteria) if criteria is not None else sorted(means["criterion"].unique())
    rng = np.random.default_rng(seed)
    rows = []
    for criterion in criteria:
        wide = _by_context(means, criterion)
        for system_a, system_b in itertools.combinations(sorted(wide.columns), 2):
            both = wide[[system_a, system_b]].dropna()
            row = {"criterion": criterion, "system_a": system_a, "system_b": system_b}
            if both.shape[0] < 2:
                row.update(n_pairs=int(both.shape[0]), p_wilcoxon=np.nan, p_t=np.nan,
                           note="fewer than two contexts rated for both systems")
            else:
                row.update(paired_tests(both[system_a].to_numpy(), both[system_b].to_numpy(), decimals=decimals,
                                        zero_method=zero_method, exact_max_n=exact_max_n, continuity=continuity,
                                        n_boot=n_boot, ci_level=ci_level, seed=rng))
            rows.append(row)
    table = pd.DataFrame(rows)
    columns = ["criterion", "system_a", "system_b", "n_pairs", "mean_a", "mean_b", "mean_diff", "n_nonzero",
               "w_plus", "w_min", "wilcoxon_method", "p_wilcoxon", "p_adj", "t", "df", "p_t", "p_t_adj",
               "rank_biserial", "rb_ci_low", "rb_ci_high", "d_z", "dz_ci_low", "dz_ci_high", "significant",
               "correction", "family", "note"]
    if table.empty:
        return pd.DataFrame(columns=columns)
    table = table.reindex(columns=columns)
    groups = table["criterion"] if family == "criterion" else pd.Series("study", index=table.index)
    table["p_adj"] = adjust_by_family(table["p_wilcoxon"], groups, method=correction)
    table["p_t_adj"] = adjust_by_family(table["p_t"], groups, method=correction)
    table["significant"] = table["p_adj"] < alpha
    table["correction"] = correction
    table["family"] = family
    table["note"] = table["note"].fillna("")
    return table


def friedman_test(
    ratings: pd.DataFrame, *, criteria: list[str] | None = None, decimals: int | None = DEFAULT_DECIMALS
) -> pd.DataFrame:
    """Friedman's test across all systems per criterion, on item-level means with contexts as blocks (only
    contexts rated for every system; scipy's ``friedmanchisquare``, tie-corrected). Kendall's
    W = chi2 / (n (k - 1)) as its effect size.

    Returns
    -------
    friedman : pandas.DataFrame
        One row per criterion:

        * ``criterion``
        * ``n_blocks``: contexts rated for every system; ``n_systems``: systems compared
        * ``statistic``: Friedman's chi-squared (k - 1 degrees of freedom); ``p``: its p-value
        * ``kendalls_w``: Kendall's W
        * ``note``: why the test is undefined (fewer than three systems or two contexts), else ""

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> ratings = tidy_from_export(simulate_study(n_contexts=10, seed=1).export)
    >>> friedman = friedman_test(ratings)
    >>> print(friedman.drop(columns="note").round(3).to_string(index=False))
    criterion  n_blocks  n_systems  statistic     p  kendalls_w
      empathy        10          3      9.385 0.009       0.469
      fluency        10          3      3.355 0.187       0.168
    relevance        10          3     14.222 0.001       0.711
    """
    means = item_means(ratings)
    criteria = list(criteria) if criteria is not None else sorted(means["criterion"].unique())
    rows = []
    for criterion in criteria:
        wide = _by_context(means, criterion).dropna()
        wide = wide if decimals is None else wide.round(decimals)
        n, k = wide.shape
        row: dict[str, Any] = {"criterion": criterion, "n_blocks": int(n), "n_systems": int(k), "statistic": np.nan,
                               "p": np.nan, "kendalls_w": np.nan, "note": ""}
        if k < 3:
            row["note"] = "Friedman needs three or more systems; see the pairwise tests"
        elif n < 2:
            row["note"] = "fewer than two contexts rated for every system"
        else:
            with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                test = stats.friedmanchisquare(*(wide[column].to_numpy() for column in wide.columns))
            row.update(statistic=float(test.statistic), p=float(test.pvalue),
                       kendalls_w=float(test.statistic / (n * (k - 1))))
            if not np.isfinite(row["statistic"]):
                row["note"] = "undefined: every context gives all systems the same mean"
        rows.append(row)
    return pd.DataFrame(rows)


def adjust_pvalues(p_values, *, method: str = "holm") -> np.ndarray:
    """Adjusted p-values for one family: "holm" (Holm 1979), "bonferroni", "none", or any other method of
    statsmodels' multipletests. NaN p-values (undefined tests) stay NaN and do not count towards the family.

    Holm is written out here (sort, multiply the i-th smallest by m - i + 1, running maximum, cap at 1) and
    tested equal to multipletests: statsmodels' Holm branch runs a full gc.collect() on every call, which
    cost ~70 ms each and dominated the report's run time.

    Returns
    -------
    adjusted : numpy.ndarray
        The adjusted p-values, in the order given, NaN where the input was NaN.

    Examples
    --------
    >>> adjust_pvalues([0.01, 0.04, 0.03, float("nan")])
    array([0.03, 0.06, 0.06,  nan])
    >>> adjust_pvalues([0.01, 0.04, 0.03], method="fdr_bh")
    array([0.03, 0.04, 0.04])
    """
    p = np.asarray(p_values, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    defined = np.isfinite(p)
    if not defined.any():
        return adjusted
    family = p[defined]
    if method == "none":
        result = family
    elif method == "holm":
        order = np.argsort(family, kind="stable")
        stepped = np.maximum.accumulate(family[order] * np.arange(family.size, 0, -1))
        result = np.empty_like(family)
        result[order] = np.minimum(stepped, 1.0)
    elif method == "bonferroni":
        result = np.minimum(family * family.size, 1.0)
    else:
        result = multipletests(family, method=method)[1]
    adjusted[defined] = result
    return adjusted


def adjust_by_family(p_values: pd.Series, families: pd.Series, *, method: str = "holm") -> pd.Series:
    """Adjust ``p_values`` separately within each family label of ``families`` (same index), with
    ``adjust_pvalues``.

    Returns
    -------
    adjusted : pandas.Series
        The adjusted p-values, same index as ``p_values``.

    Examples
    --------
    >>> import pandas as pd
    >>> p = pd.Series([0.01, 0.04, 0.03, 0.2])
    >>> adjust_by_family(p, pd.Series(["empathy", "empathy", "fluency", "fluency"])).tolist()
    [0.02, 0.04, 0.06, 0.2]
    """
    adjusted = pd.Series(np.nan, index=p_values.index, dtype=float)
    for _, index in p_values.groupby(families, sort=False).groups.items():
        adjusted.loc[index] = adjust_pvalues(p_values.loc[index].to_numpy(dtype=float), method=method)
    return adjusted


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else np.nan


def _signed_rank_sums(d: np.ndarray):
    """R+ and the matched-pairs rank-biserial correlation of differences d (last axis), zeros dropped.

    Works on a (B, n) array of resampled differences at once: zeros share the lowest ranks, so ranking all
    |d| and subtracting the number of zeros gives the ranks among the non-zero differences.
    """
    d = np.atleast_2d(d)
    ranks = stats.rankdata(np.abs(d), axis=-1)
    zeros = (d == 0).sum(axis=-1, keepdims=True)
    ranks = ranks - zeros
    r_plus = np.where(d > 0, ranks, 0.0).sum(axis=-1)
    r_minus = np.where(d < 0, ranks, 0.0).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (r_plus - r_minus) / (r_plus + r_minus)
    return r_plus, r


#: Resampled differences drawn per block in ``_bootstrap_rank_biserial``: bounds its memory at 1M ratings.
_BOOT_BLOCK = 2**22


def _bootstrap_rank_biserial(d: np.ndarray, *, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """The matched-pairs rank-biserial r of ``n_boot`` resamples of the differences ``d`` (pairs drawn with
    replacement, ``rng.integers(0, n, (n_boot, n))``), equal to ``_signed_rank_sums(d[drawn])``.

    Ranking each resample costs a sort of n values per resample. But a resample's average rank of a value
    is fixed by how many of the drawn values are smaller or equal: with the distinct |d| values g sorted
    once, and W_g the number of draws with |d| = |d_g|, the average rank of g is ``sum_{h<g} W_h + (W_g + 1)/2``
    (less the number of zeros drawn, which take the lowest ranks and are dropped). R+ and R- are then the
    counts of positive and negative draws in each group times that rank: one bincount of the draws per
    resample instead of one sort. The draws are made in blocks of rows (the generator gives the same numbers
    drawn in one piece or in row blocks), so memory stays bounded.
    """
    n = d.size
    magnitudes, group = np.unique(np.abs(d), return_inverse=True)
    n_groups = magnitudes.size
    # 3 classes per distinct |d|: 0 zero, 1 positive, 2 negative (only the group of |d| = 0 holds zeros).
    kind = group * 3 + np.where(d > 0, 1, np.where(d < 0, 2, 0))
    rows_per_block = max(1, _BOOT_BLOCK // n)
    estimates = np.empty(n_boot)
    for start in range(0, n_boot, rows_per_block):
        rows = min(rows_per_block, n_boot - start)
        drawn = rng.integers(0, n, size=(rows, n))
        keys = kind[drawn] + (3 * n_groups) * np.arange(rows)[:, None]
        counts = np.bincount(keys.ravel(), minlength=rows * 3 * n_groups).reshape(rows, n_groups, 3)
        weight = counts.sum(axis=2)
        zeros = counts[:, :, 0].sum(axis=1, keepdims=True)
        ranks = np.cumsum(weight, axis=1) - weight + (weight + 1) / 2 - zeros
        r_plus = (counts[:, :, 1] * ranks).sum(axis=1)
        r_minus = (counts[:, :, 2] * ranks).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            estimates[start:start + rows] = (r_plus - r_minus) / (r_plus + r_minus)
    return estimates


def _dz_interval(d_z: float, n: int, level: float) -> tuple[float, float]:
    """CI of d_z by inverting the noncentral t distribution of t = d_z sqrt(n) (Steiger & Fouladi 1997)."""
    df = n - 1
    t_obs = d_z * np.sqrt(n)
    tail = (1.0 - level) / 2.0

    def noncentrality(target: float) -> float:
        # The cdf at t_obs falls as the noncentrality grows; walk away from t_obs until the target is
        # bracketed (a fixed wide bracket runs into the region where nct.cdf returns NaN).
        gap = lambda ncp: stats.nct.cdf(t_obs, df, ncp) - target  # noqa: E731
        direction = -1.0 if target > 0.5 else 1.0
        near, step = t_obs, 1.0
        for _ in range(40):
            far = t_obs + direction * step
            value = gap(far)
            if not np.isfinite(value):
                raise ValueError("noncentral t cdf undefined")
            if np.sign(value) != np.sign(gap(near)):
                return optimize.brentq(gap, min(near, far), max(near, far), xtol=1e-12)
            near, step = far, step * 1.5
        raise ValueError("no bracket for the noncentrality parameter")

    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            low, high = noncentrality(1.0 - tail), noncentrality(tail)
        return float(low / np.sqrt(n)), float(high / np.sqrt(n))
    except (ValueError, RuntimeError):
        # Very large |t| can defeat the noncentral t routines; the large-sample normal interval is then close.
        se = np.sqrt(1.0 / n + d_z**2 / (2.0 * n))
        z = stats.norm.ppf(1.0 - tail)
        return float(d_z - z * se), float(d_z + z * se)
