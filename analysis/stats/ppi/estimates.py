"""System means and paired system differences from human ratings on a sample of contexts plus a judge's
scores on every item, by prediction-powered inference with power tuning (PPI++).

For one system and criterion, with labels Y_i (item means of the human ratings) on the n human-rated
contexts, the judge's scores f_i on those contexts and f~_j on the N contexts only the judge scored, the
PPI++ estimate of the mean label is (Angelopoulos, Duchi and Zrnic 2023, "PPI++: Efficient
Prediction-Powered Inference", eq. 2 for the mean)

    theta(lambda) = lambda * mean_j f~_j + mean_i (Y_i - lambda * f_i),

unbiased for every lambda; lambda = 1 is the original PPI (Angelopoulos et al., Science 2023) and lambda = 0
the human-only mean. Its CLT interval is theta +- z * sqrt(var(lambda f~) / N + var(Y - lambda f) / n), and
the power-tuned lambda (clipped to [0, 1]) minimises that variance:

    lambda = cov(Y, f) / ((1 + n / N) * var(f, f~)).

A useless judge gets lambda near 0 and costs almost nothing; a good one narrows the interval. The intervals
and p-values are ``ppi_py``'s (``ppi_mean_ci``, ``ppi_mean_pval``, ``classical_mean_ci``); lambda is computed
here with ppi_py's formula (tested equal to ``ppi_mean_ci(lam=None)``) so that the interval, the p-value and
the reported lambda are one and the same.

Paired differences of systems a and b use the same estimator on per-context differences: labels
Y_a - Y_b on contexts people rated for both, judge differences f_a - f_b on every context; the p-values are
corrected over each family as ``analysis.stats.significance.compare_pairs`` corrects the Likert comparisons (Holm
1979 by
default).

Shared raters. ppi_py's intervals treat the human-rated contexts as independent. In a real study they are
not quite: the items of one assignment (one rater's batch) share that rater's severity, so their labels are
correlated and an independent-items interval is too narrow (in ``empeval.analysis.simulate.judges``' studies, 95%
PPI intervals covered about 92%). With ``cluster_by`` (default ``assignment_id``) the variance of the
human-label term gets the two-way cluster-robust correction over items and assignments (Cameron, Gelbach and
Miller 2011, "Robust inference with multiway clustering"): with each rating's contribution to its item's
centred label p_ir = +-(x_ir - mean label of its system) / k_i,

    extra = (sum_assignments (sum p)^2 - sum_(item, assignment) cells (sum p)^2) / n^2,

clipped at 0 (never narrower than ppi_py's), added to both the human-only and the PPI variance. It is the
covariance the shared batches add; the judge's term is per item and adds none, so the power-tuned lambda is
unchanged. ``cluster_by=None`` gives ppi_py's intervals exactly.

Generalising over raters (``generalize="raters"`` or ``"both"``; ``empeval report --generalize``). The shared-rater
term above, clustered by assignment, makes the intervals valid for new contexts rated by this study's raters. For
new raters, ``generalize`` clusters by ``annotator`` (whatever ``cluster_by`` says), multiplies the raters' sum of
squares by R / (R - 1) (the small-sample correction of Cameron, Gelbach and Miller for R raters) and takes the
interval's quantile and the p-value from Student's t with R - 1 degrees of freedom: with a pool of 15 raters the
plain normal interval clustered by annotator covered the mean for new raters about 90% of the time. A PPI
estimate needs its contexts drawn at random, so "raters" and "both" are one target here: new raters and new
contexts. ValueError with fewer than 2 raters.

The *effective number of human-rated contexts* the judge was worth is n * (w_human / w_ppi)^2: the contexts a
human-only study would need for an interval as narrow as the PPI one (widths scale as 1 / sqrt(n)).
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import special, stats

from empeval.analysis.stats.ppi.tables import ITEM_KEYS, check_rated_share, judged_items, rating_clusters
from empeval.analysis.stats.significance import adjust_by_family


def ppi_py() -> Any:
    """The ``ppi_py`` package (its ``baselines`` loaded), imported at first use: it brings numba, scikit-learn and
    statsmodels' regression (about 0.5 s of CPU), which drawing an active sample (``empeval study sample``) or a
    report without judges never needs. ppi_py calls warnings.simplefilter("ignore") when imported, which would
    silence every warning of the process (the report's included); importing it inside catch_warnings puts the
    filters back afterwards.

    Returns
    -------
    ppi_py : module
        The package, as ``import ppi_py`` gives it, with ``ppi_py.baselines``.

    Examples
    --------
    >>> package = ppi_py()
    >>> callable(package.ppi_mean_ci), callable(package.baselines.classical_mean_ci)
    (True, True)
    """
    with warnings.catch_warnings():
        import ppi_py as package
        import ppi_py.baselines  # noqa: F401 - loads package.baselines
    return package


FAMILIES = ("criterion", "study")
GENERALIZE = ("items", "raters", "both")

MEAN_COLUMNS = (
    "criterion", "system", "n_human", "n_ratings", "n_judge_only", "human_share", "human_mean", "human_ci_low",
    "human_ci_high", "judge_mean_biased", "ppi_mean", "ppi_ci_low", "ppi_ci_high", "lam", "width_ratio",
    "effective_n_human", "rater_variance", "n_dropped_missing",
)

DIFFERENCE_COLUMNS = (
    "criterion", "system_a", "system_b", "n_human", "n_judge_only", "human_diff", "human_ci_low", "human_ci_high",
    "judge_diff_biased", "ppi_diff", "ppi_ci_low", "ppi_ci_high", "lam", "p_ppi", "p_adj", "significant",
    "width_ratio", "effective_n_human", "rater_variance", "correction", "family",
)


def power_tuned_lambda(labels, judged_rated, judged_unrated) -> float:
    """The PPI++ power-tuning parameter for a mean (Angelopoulos, Duchi and Zrnic 2023, section 6):
    lambda = cov(Y, f) / ((1 + n / N) var(f, f~)), clipped to [0, 1], as ``ppi_py`` computes it (the covariance
    over the n rated contexts with 1 / n, the variance of all n + N judge scores with 1 / (n + N - 1)).
    A judge that gives every item the same score gets lambda = 0 (ppi_py would return NaN).

    Returns
    -------
    lam : float
        In [0, 1].

    Examples
    --------
    >>> round(power_tuned_lambda([3.0, 4.0, 5.0, 4.0], [3.5, 4.0, 4.5, 4.5], [3.0, 4.0, 5.0]), 4)
    0.2368
    >>> power_tuned_lambda([3.0, 4.0], [4.0, 4.0], [4.0])
    0.0
    """
    y = np.asarray(labels, dtype=float)
    f = np.asarray(judged_rated, dtype=float)
    f_unrated = np.asarray(judged_unrated, dtype=float)
    n, n_unrated = y.size, f_unrated.size
    variance = np.var(np.concatenate([f, f_unrated]), ddof=1)
    if not variance > 0:
        return 0.0
    covariance = np.mean((y - y.mean()) * (f - f.mean()))
    return float(np.clip(covariance / ((1 + n / n_unrated) * variance), 0.0, 1.0))


def shared_rater_variance(contributions, items, clusters, *, n_items: int, small_sample: bool = False) -> float:
    """The variance a mean of ``n_items`` item labels gains from ratings that share a cluster (an assignment:
    one rater's batch), by the two-way cluster-robust formula over items and clusters (Cameron, Gelbach and
    Miller 2011; see the module docstring), clipped at 0.

    ``contributions[j]`` is rating j's share of its item's centred label (+-(x - mean label) / k), ``items[j]``
    its item (or context, for paired differences), ``clusters[j]`` its cluster. ``small_sample`` multiplies the
    clusters' sum of squares by G / (G - 1) for G clusters (for raters as a sample: module docstring).

    Returns
    -------
    extra : float
        (sum over clusters of the squared cluster sum - sum over (item, cluster) cells of the squared cell
        sum) / n_items^2, or 0 when negative.

    Examples
    --------
    Two items, each rated once in the same assignment, both above the mean by 1: their ratings share a rater,
    so the mean's variance grows by 2 * 1 * 1 / 2^2:

    >>> shared_rater_variance([1.0, 1.0], ["c1", "c2"], ["a1", "a1"], n_items=2)
    0.5
    >>> shared_rater_variance([1.0, 1.0], ["c1", "c2"], ["a1", "a2"], n_items=2)
    0.0
    >>> shared_rater_variance([1.0, 1.0, -1.0, -1.0], ["c1", "c2", "c1", "c2"], ["a1", "a1", "a2", "a2"],
    ...                       n_items=2, small_sample=True)
    3.0
    """
    values = np.asarray(contributions, dtype=float)
    if values.size == 0:
        return 0.0
    item_codes, _ = pd.factorize(np.asarray(items, dtype=object))
    cluster_codes, cluster_names = pd.factorize(np.asarray(clusters, dtype=object))
    cell_codes, _ = pd.factorize(item_codes.astype(np.int64) * len(cluster_names) + cluster_codes)
    by_cluster = np.bincount(cluster_codes, weights=values)
    by_cell = np.bincount(cell_codes, weights=values)
    correction = len(cluster_names) / (len(cluster_names) - 1) if small_sample and len(cluster_names) > 1 else 1.0
    return max(0.0, float(correction * (by_cluster @ by_cluster) - by_cell @ by_cell) / n_items**2)


def ppi_mean_interval(
    labels, judged_rated, judged_unrated, *, ci_level: float = 0.95, null: float = 0.0, rater_variance: float = 0.0,
    df: float | None = None,
) -> dict:
    """PPI++ mean of the labels with its CLT interval and two-sided p-value against ``null``, beside the
    human-only mean and interval on the same labels (the lambda = 0 case), for one system (or one pair's
    differences). See the module docstring for the formulas.

    ``labels`` and ``judged_rated`` are aligned (one value per human-rated context); ``judged_unrated`` holds
    the judge's scores on the contexts people did not rate. ``rater_variance`` (``shared_rater_variance``) is
    added to both variances; 0 gives ppi_py's intervals and p-values exactly. ``df`` (the raters less one, when
    raters are taken as a sample: module docstring) takes both intervals' quantiles and p-values from Student's t
    with ``df`` degrees of freedom instead of the normal.

    Returns
    -------
    result : dict
        ``n_human``, ``n_judge_only``, ``human_mean``, ``human_ci_low``, ``human_ci_high``, ``human_p``,
        ``judge_mean_biased`` (the judge's mean over all contexts, uncorrected), ``ppi_mean``, ``ppi_ci_low``,
        ``ppi_ci_high``, ``ppi_p``, ``lam``, ``width_ratio`` (PPI width / human-only width),
        ``effective_n_human`` (n / width_ratio^2), ``rater_variance`` (as passed).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> quality = rng.normal(3.5, 0.6, 500)
    >>> judge = 0.5 + 0.8 * quality + rng.normal(0, 0.2, 500)  # biased, but tracks quality
    >>> labels = quality[:60] + rng.normal(0, 0.4, 60)          # people rated the first 60 contexts
    >>> result = ppi_mean_interval(labels, judge[:60], judge[60:])
    >>> round(result["judge_mean_biased"], 2), round(result["ppi_mean"], 2), round(result["human_mean"], 2)
    (3.27, 3.46, 3.54)
    >>> round(result["width_ratio"], 2), round(result["effective_n_human"])
    (0.73, 113)
    """
    y = np.asarray(labels, dtype=float)
    f = np.asarray(judged_rated, dtype=float)
    f_unrated = np.asarray(judged_unrated, dtype=float)
    if y.shape != f.shape or y.ndim != 1:
        raise ValueError("labels and judged_rated must be 1-d and of the same length (one per human-rated context)")
    if y.size < 2 or f_unrated.size < 1:
        raise ValueError(f"need at least 2 human-rated contexts and 1 judge-only context, got {y.size} and "
                         f"{f_unrated.size}")
    if not np.isfinite(np.concatenate([y, f, f_unrated])).all():
        raise ValueError("labels and judge scores must be finite (drop the judge's failures first)")
    if not rater_variance >= 0:
        raise ValueError(f"rater_variance must be a non-negative variance, got {rater_variance!r}")
    reference = interval_reference(df)
    alpha = 1.0 - _check_level(ci_level)
    lam = power_tuned_lambda(y, f, f_unrated)
    ppi = ppi_py()
    ppi_low, ppi_high = (float(np.squeeze(bound)) for bound in ppi.ppi_mean_ci(y, f, f_unrated, alpha=alpha, lam=lam))
    human_low, human_high = (float(np.squeeze(bound)) for bound in ppi.baselines.classical_mean_ci(y, alpha=alpha))
    ppi_mean = lam * f_unrated.mean() + (y - lam * f).mean()
    human_se = y.std() / np.sqrt(y.size)
    ppi_p = float(np.squeeze(ppi.ppi_mean_pval(y, f, f_unrated, null=null, lam=lam)))
    if rater_variance > 0 or df is not None:
        # ppi_py has no clustered variance: widen its intervals by the shared raters' term (module docstring).
        z = NORMAL.ppf(1 - alpha / 2)
        ppi_se = np.sqrt(((ppi_high - ppi_low) / (2 * z)) ** 2 + rater_variance)
        human_se = np.sqrt(human_se**2 + rater_variance)
        quantile = reference.ppf(1 - alpha / 2)
        ppi_low, ppi_high = ppi_mean - quantile * ppi_se, ppi_mean + quantile * ppi_se
        human_low, human_high = y.mean() - quantile * human_se, y.mean() + quantile * human_se
        ppi_p = float(2 * reference.sf(abs(ppi_mean - null) / ppi_se)) if ppi_se > 0 else np.nan
    human_p = float(2 * reference.sf(abs(y.mean() - null) / human_se)) if human_se > 0 else np.nan
    human_width, ppi_width = human_high - human_low, ppi_high - ppi_low
    ratio = ppi_width / human_width if human_width > 0 else np.nan
    return {
        "n_human": int(y.size), "n_judge_only": int(f_unrated.size),
        "human_mean": float(y.mean()), "human_ci_low": human_low, "human_ci_high": human_high, "human_p": human_p,
        "judge_mean_biased": float(np.concatenate([f, f_unrated]).mean()),
        "ppi_mean": float(ppi_mean), "ppi_ci_low": ppi_low, "ppi_ci_high": ppi_high, "ppi_p": ppi_p,
        "lam": lam, "width_ratio": float(ratio),
        "effective_n_human": float(y.size / ratio**2) if ratio > 0 else np.nan,
        "rater_variance": float(rater_variance),
    }


def ppi_system_means(
    human_ratings: pd.DataFrame,
    judge_scores: pd.DataFrame,
    *,
    judge: str | None = None,
    ci_level: float = 0.95,
    cluster_by: str | None = "assignment_id",
    allow_missing: bool = False,
    generalize: str = "items",
) -> pd.DataFrame:
    """Mean label per criterion and system three ways: human-only (item means of the human-rated contexts,
    CLT interval), judge-only (biased: the judge's own mean, no interval), and PPI++ (power-tuned,
    Angelopoulos, Duchi and Zrnic 2023) with its interval, plus the human-rated contexts the judge was worth.

    Every item must have a judge score unless ``allow_missing`` (which drops the judge's failures and counts
    them); every system needs at least two human-rated contexts and one context only the judge scored.
    ``cluster_by`` names the column of ``human_ratings`` grouping ratings that share a rater (default
    ``assignment_id``, one rater's batch; ``annotator`` also generalises over raters' severities; None treats
    items as independent, ppi_py's intervals exactly): see the module docstring. ``generalize`` "raters" or
    "both" makes the intervals valid for new raters (and new contexts): clustered by ``annotator`` with the
    small-sample correction and t quantiles on the raters less one (module docstring); "items" (default) leaves
    them as ``cluster_by`` makes them.

    Returns
    -------
    means : pandas.DataFrame
        One row per criterion and system:

        * ``criterion``, ``system``
        * ``n_human``: human-rated contexts; ``n_ratings``: their ratings; ``n_judge_only``: contexts only the
          judge scored; ``human_share``: n_human / (n_human + n_judge_only)
        * ``human_mean``, ``human_ci_low``, ``human_ci_high``: the human-only mean and CLT interval
        * ``judge_mean_biased``: the judge's mean over every context, uncorrected (biased)
        * ``ppi_mean``, ``ppi_ci_low``, ``ppi_ci_high``: the PPI++ estimate and interval at ``ci_level``
        * ``lam``: the power-tuning weight given to the judge (0: ignored, 1: plain PPI)
        * ``width_ratio``: PPI width / human-only width
        * ``effective_n_human``: n_human / width_ratio^2, the human-rated contexts a human-only study would
          need for the PPI width
        * ``rater_variance``: the variance shared raters add to both intervals (``shared_rater_variance``;
          0 with ``cluster_by=None``)
        * ``n_dropped_missing``: items dropped because the judge failed on them (``allow_missing``)

    Examples
    --------
    >>> from empeval.analysis.simulate.judges import GOOD_JUDGE, simulate_judged_study
    >>> study = simulate_judged_study(judge=GOOD_JUDGE, n_contexts=200, human_share=0.25, seed=3)
    >>> means = ppi_system_means(study.human_ratings, study.judge_scores)
    >>> columns = ["system", "n_human", "human_mean", "judge_mean_biased", "ppi_mean", "width_ratio"]
    >>> print(means[columns].round(2).to_string(index=False))
      system  n_human  human_mean  judge_mean_biased  ppi_mean  width_ratio
    baseline       50        3.40               3.45      3.40         0.81
        gold       50        3.89               4.01      3.86         0.88
        moel       50        3.72               3.78      3.74         0.81
    """
    level = _check_level(ci_level)
    over_raters = generalises_over_raters(generalize)
    items, dropped = judged_items(human_ratings, judge_scores, judge=judge, allow_missing=allow_missing)
    clustered = clustered_ratings(human_ratings, items, "annotator" if over_raters else cluster_by)
    rows = []
    for (criterion, system), part in items.groupby(["criterion", "system"], sort=True, observed=True):
        check_rated_share(part, where=f"system {system!r}, criterion {criterion!r}")
        rated = part["label"].notna().to_numpy()
        extra = rater_variance_of_mean(clustered, criterion, system, label_mean=part["label"].mean(),
                                       n_items=int(rated.sum()), small_sample=over_raters)
        df = rater_degrees_of_freedom(clustered, criterion, [system]) if over_raters else None
        result = ppi_mean_interval(part["label"].to_numpy()[rated], part["judge_score"].to_numpy()[rated],
                                   part["judge_score"].to_numpy()[~rated], ci_level=level, rater_variance=extra,
                                   df=df)
        result.update(criterion=criterion, system=system, n_ratings=int(part["n_ratings"].sum()),
                      human_share=float(rated.mean()))
        rows.append(result)
    table = pd.DataFrame(rows)
    if table.empty:
        return pd.DataFrame(columns=list(MEAN_COLUMNS))
    table = table.merge(dropped, on=["criterion", "system"], how="left")
    table["n_dropped_missing"] = table["n_dropped_missing"].fillna(0).astype(int)
    return table.reindex(columns=list(MEAN_COLUMNS))


def ppi_paired_differences(
    human_ratings: pd.DataFrame,
    judge_scores: pd.DataFrame,
    *,
    judge: str | None = None,
    ci_level: float = 0.95,
    family: str = "criterion",
    correction: str = "holm",
    alpha: float = 0.05,
    cluster_by: str | None = "assignment_id",
    allow_missing: bool = False,
    generalize: str = "items",
) -> pd.DataFrame:
    """Every pair of systems per criterion: the mean per-context difference a - b, human-only and PPI++
    (labels Y_a - Y_b on contexts people rated for both systems, judge differences f_a - f_b on every
    context), with the PPI++ z-test of "no difference" and its p-value corrected over ``family``
    ("criterion": the pairs of one criterion, as ``empeval.analysis.stats.significance.compare_pairs`` does by default;
    "study": every pair of every criterion) by ``correction`` (any method of
    ``empeval.analysis.stats.significance.adjust_pvalues``,
    Holm by default). ``cluster_by``, ``allow_missing`` and ``generalize`` as in ``ppi_system_means``.

    Returns
    -------
    pairs : pandas.DataFrame
        One row per criterion and pair (a, b), systems in sorted order:

        * ``criterion``, ``system_a``, ``system_b``
        * ``n_human``: contexts people rated for both; ``n_judge_only``: the other contexts both were scored on
        * ``human_diff``, ``human_ci_low``, ``human_ci_high``: human-only mean difference and CLT interval
        * ``judge_diff_biased``: the judge's mean difference over every context, uncorrected (biased)
        * ``ppi_diff``, ``ppi_ci_low``, ``ppi_ci_high``: the PPI++ difference and interval at ``ci_level``
        * ``lam``: the power-tuning weight given to the judge
        * ``p_ppi``: two-sided PPI++ p-value of "no difference"; ``p_adj``: corrected over the family;
          ``significant``: ``p_adj < alpha``
        * ``width_ratio``, ``effective_n_human``, ``rater_variance``: as in ``ppi_system_means``
        * ``correction``, ``family``: as passed

    Examples
    --------
    >>> from empeval.analysis.simulate.judges import GOOD_JUDGE, simulate_judged_study
    >>> study = simulate_judged_study(judge=GOOD_JUDGE, n_contexts=200, human_share=0.25, seed=3)
    >>> pairs = ppi_paired_differences(study.human_ratings, study.judge_scores)
    >>> columns = ["system_a", "system_b", "human_diff", "ppi_diff", "ppi_ci_low", "ppi_ci_high", "p_adj"]
    >>> print(pairs[columns].round(3).to_string(index=False))
    system_a system_b  human_diff  ppi_diff  ppi_ci_low  ppi_ci_high  p_adj
    baseline     gold      -0.487    -0.458      -0.640       -0.276  0.000
    baseline     moel      -0.320    -0.331      -0.547       -0.114  0.005
        gold     moel       0.167     0.121      -0.097        0.340  0.275
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    level = _check_level(ci_level)
    over_raters = generalises_over_raters(generalize)
    items, _ = judged_items(human_ratings, judge_scores, judge=judge, allow_missing=allow_missing)
    clustered = clustered_ratings(human_ratings, items, "annotator" if over_raters else cluster_by)
    rows = []
    for criterion, part in items.groupby("criterion", sort=True, observed=True):
        wide = part.pivot(index="context_id", columns="system", values=["label", "judge_score"])
        labels, scores = wide["label"], wide["judge_score"]
        for system_a, system_b in itertools.combinations(sorted(scores.columns), 2):
            judged = (scores[system_a] - scores[system_b]).dropna()
            differences = pd.DataFrame({"label": (labels[system_a] - labels[system_b]).reindex(judged.index),
                                        "judge_score": judged})
            check_rated_share(differences, where=f"systems {system_a!r} and {system_b!r}, criterion {criterion!r}")
            rated = differences["label"].notna().to_numpy()
            extra = rater_variance_of_difference(clustered, criterion, system_a, system_b, labels,
                                                 contexts=differences.index[rated], small_sample=over_raters)
            df = (rater_degrees_of_freedom(clustered, criterion, [system_a, system_b],
                                           contexts=differences.index[rated]) if over_raters else None)
            result = ppi_mean_interval(differences["label"].to_numpy()[rated], judged.to_numpy()[rated],
                                       judged.to_numpy()[~rated], ci_level=level, rater_variance=extra, df=df)
            rows.append({
                "criterion": criterion, "system_a": system_a, "system_b": system_b,
                "n_human": result["n_human"], "n_judge_only": result["n_judge_only"],
                "human_diff": result["human_mean"], "human_ci_low": result["human_ci_low"],
                "human_ci_high": result["human_ci_high"], "judge_diff_biased": result["judge_mean_biased"],
                "ppi_diff": result["ppi_mean"], "ppi_ci_low": result["ppi_ci_low"],
                "ppi_ci_high": result["ppi_ci_high"], "lam": result["lam"], "p_ppi": result["ppi_p"],
                "width_ratio": result["width_ratio"], "effective_n_human": result["effective_n_human"],
                "rater_variance": result["rater_variance"],
            })
    table = pd.DataFrame(rows)
    if table.empty:
        return pd.DataFrame(columns=list(DIFFERENCE_COLUMNS))
    groups = table["criterion"] if family == "criterion" else pd.Series("study", index=table.index)
    table["p_adj"] = adjust_by_family(table["p_ppi"], groups, method=correction)
    table["significant"] = table["p_adj"] < alpha
    table["correction"] = correction
    table["family"] = family
    return table.reindex(columns=list(DIFFERENCE_COLUMNS))


def clustered_ratings(
    human_ratings: pd.DataFrame, items: pd.DataFrame, cluster_by: str | None
) -> dict[tuple, pd.DataFrame] | None:
    """The human ratings of the human-rated items of ``items`` (``criterion``, ``system``, ``context_id``,
    ``label``, ``n_ratings``), with their cluster (the ``cluster_by`` column) and their item's label and rating
    count, per (criterion, system): what ``rater_variance_of_mean`` and ``rater_variance_of_difference`` read.
    None when ``cluster_by`` is None (items treated as independent).

    Returns
    -------
    clustered : dict or None
        (criterion, system) -> the ratings of its rated items: ``criterion``, ``system``, ``context_id``,
        ``score``, ``cluster``, ``label``, ``n_ratings``.

    Examples
    --------
    >>> import pandas as pd
    >>> ratings = pd.DataFrame({"context_id": ["c1", "c2", "c1"], "system": "gold", "criterion": "empathy",
    ...                         "annotator": ["ann", "ann", "bob"], "score": [4, 2, 5],
    ...                         "assignment_id": ["a1", "a1", "a2"]})
    >>> items = pd.DataFrame({"criterion": "empathy", "system": "gold", "context_id": ["c1", "c2"],
    ...                       "label": [4.5, 2.0], "n_ratings": [2, 1]})
    >>> clustered_ratings(ratings, items, "assignment_id")[("empathy", "gold")][["context_id", "cluster", "label"]]
      context_id cluster  label
    0         c1      a1    4.5
    1         c2      a1    2.0
    2         c1      a2    4.5
    """
    if cluster_by is None:
        return None
    ratings = rating_clusters(human_ratings, cluster_by=cluster_by)
    rated = items.loc[items["label"].notna(), ITEM_KEYS + ["label", "n_ratings"]]
    ratings = ratings.merge(rated, on=ITEM_KEYS, how="inner")
    return {key: part for key, part in ratings.groupby(["criterion", "system"], sort=False, observed=True)}


def rater_variance_of_mean(
    clustered: dict[tuple, pd.DataFrame] | None, criterion, system, *, label_mean: float, n_items: int,
    small_sample: bool = False,
) -> float:
    """The shared-rater variance (``shared_rater_variance``) of one system's mean label on one criterion, over
    its ``n_items`` human-rated items whose labels average ``label_mean``; 0 when ``clustered`` is None or
    holds no rating of that system. ``small_sample`` as in ``shared_rater_variance``.

    Returns
    -------
    extra : float
        The variance to add to the mean's (never negative).

    Examples
    --------
    Two items rated in one assignment, both above the mean label by 1, each by one rater:

    >>> import pandas as pd
    >>> ratings = pd.DataFrame({"context_id": ["c1", "c2"], "score": [5.0, 5.0], "cluster": ["a1", "a1"],
    ...                         "n_ratings": [1, 1]})
    >>> rater_variance_of_mean({("empathy", "gold"): ratings}, "empathy", "gold", label_mean=4.0, n_items=2)
    0.5
    >>> rater_variance_of_mean(None, "empathy", "gold", label_mean=4.0, n_items=2)
    0.0
    """
    ratings = clustered.get((criterion, system)) if clustered is not None else None
    if ratings is None:
        return 0.0
    centred = (ratings["score"] - label_mean) / ratings["n_ratings"]
    return shared_rater_variance(centred, ratings["context_id"], ratings["cluster"], n_items=n_items,
                                 small_sample=small_sample)


def rater_variance_of_difference(
    clustered: dict[tuple, pd.DataFrame] | None, criterion, system_a, system_b, labels: pd.DataFrame, *, contexts,
    small_sample: bool = False,
) -> float:
    """The shared-rater variance of the mean per-context difference a - b of the labels over ``contexts`` (those
    people rated for both systems): each rating of a contributes +(x - mean label of a) / k, each of b
    -(x - mean label of b) / k, so a rater who rated both sides of a context adds the covariance of the two.
    ``labels`` holds the item labels with one column per system, indexed by context. ``small_sample`` as in
    ``shared_rater_variance``.

    Returns
    -------
    extra : float
        The variance to add to the mean difference's (never negative).

    Examples
    --------
    One rater's batch holds gold's response to c1 and base's to c2: her severity enters the difference with
    opposite signs on the two contexts, and the shared term cancels out:

    >>> import pandas as pd
    >>> labels = pd.DataFrame({"gold": [5.0, 3.0], "base": [3.0, 5.0]}, index=["c1", "c2"])
    >>> one = lambda system, context, score: pd.DataFrame({"context_id": [context], "score": [score],
    ...                                                   "cluster": ["a1"], "n_ratings": [1]})
    >>> clustered = {("empathy", "gold"): pd.concat([one("gold", "c1", 5.0), one("gold", "c2", 3.0)]),
    ...              ("empathy", "base"): pd.concat([one("base", "c1", 3.0), one("base", "c2", 5.0)])}
    >>> rater_variance_of_difference(clustered, "empathy", "gold", "base", labels, contexts=["c1", "c2"])
    0.0
    """
    if clustered is None:
        return 0.0
    sides = []
    for system, sign in ((system_a, 1.0), (system_b, -1.0)):
        ratings = clustered.get((criterion, system))
        if ratings is not None:
            ratings = ratings.loc[ratings["context_id"].isin(contexts)]
            sides.append(ratings.assign(
                centred=sign * (ratings["score"] - labels.loc[contexts, system].mean()) / ratings["n_ratings"]))
    if not sides:
        return 0.0
    side_ratings = pd.concat(sides)
    return shared_rater_variance(side_ratings["centred"], side_ratings["context_id"], side_ratings["cluster"],
                                 n_items=len(contexts), small_sample=small_sample)


def rater_degrees_of_freedom(clustered: dict[tuple, pd.DataFrame] | None, criterion, systems, *,
                             contexts=None) -> float:
    """The degrees of freedom of an interval that takes raters as a sample: the raters (clusters) who rated
    ``systems`` on ``criterion`` (on ``contexts`` only, when given), less one. ValueError when fewer than 2
    raters rated them: one rater says nothing of how raters vary.

    Returns
    -------
    df : float

    Examples
    --------
    >>> import pandas as pd
    >>> ratings = pd.DataFrame({"context_id": ["c1", "c2", "c1"], "cluster": ["ann", "bob", "cy"]})
    >>> rater_degrees_of_freedom({("empathy", "gold"): ratings}, "empathy", ["gold"])
    2.0
    >>> rater_degrees_of_freedom({("empathy", "gold"): ratings}, "empathy", ["gold"], contexts=["c2"])
    Traceback (most recent call last):
    ...
    ValueError: generalising over raters needs at least 2 raters of gold on empathy, got 1: ...
    """
    raters: set = set()
    for system in systems:
        ratings = clustered.get((criterion, system)) if clustered is not None else None
        if ratings is not None:
            if contexts is not None:
                ratings = ratings.loc[ratings["context_id"].isin(contexts)]
            raters |= set(ratings["cluster"])
    if len(raters) < 2:
        raise ValueError(f"generalising over raters needs at least 2 raters of {' and '.join(map(str, systems))} on "
                         f"{criterion}, got {len(raters)}: intervals for new raters cannot be computed (generalize="
                         "\"items\" gives them for this study's raters)")
    return float(len(raters) - 1)


@dataclass(frozen=True)
class Reference:
    """The normal distribution (``df`` None) or Student's t with ``df`` degrees of freedom, as an interval's
    quantile and a p-value need them: ``ppf`` and ``sf`` give scipy.stats.norm's and scipy.stats.t's values exactly
    (tests/analysis/stats/ppi/test_estimates.py compares them), through the scipy.special functions those call
    (ndtri and ndtr, stdtrit and stdtr). scipy.stats' argument handling around them cost about 0.25 ms a call, half
    of the intervals' own time in a simulated study's analysis; the boundaries of ``ppf`` (0 and 1) still go through
    scipy.stats."""

    df: float | None = None

    def ppf(self, q: float) -> float:
        """The quantile at ``q``."""
        if not 0 < q < 1:
            return float((stats.norm if self.df is None else stats.t(self.df)).ppf(q))
        return float(special.ndtri(q) if self.df is None else special.stdtrit(self.df, q))

    def sf(self, x: float) -> float:
        """The probability above ``x``."""
        return float(special.ndtr(-x) if self.df is None else special.stdtr(self.df, -x))


#: The normal reference (no degrees of freedom).
NORMAL = Reference()


def interval_reference(df: float | None) -> Reference:
    """The distribution an interval's quantiles and p-values come from: the normal, or Student's t with ``df``
    degrees of freedom when the raters are taken as a sample (the raters less one); ValueError for a ``df`` that
    is not positive.

    Returns
    -------
    reference : Reference
        ``NORMAL`` or ``Reference(df)``: its ``ppf`` and ``sf`` are scipy.stats.norm's or scipy.stats.t(df)'s.

    Examples
    --------
    >>> round(interval_reference(None).ppf(0.975), 3), round(interval_reference(14).ppf(0.975), 3)
    (1.96, 2.145)
    """
    if df is not None and not df > 0:
        raise ValueError(f"df must be positive degrees of freedom (raters less one), got {df!r}")
    return NORMAL if df is None else Reference(float(df))


def generalises_over_raters(generalize: str) -> bool:
    """Whether the target `generalize` ("items", "raters" or "both") takes the raters as a sample; ValueError
    for any other target.

    Returns
    -------
    over_raters : bool
        True for "raters" and "both" (intervals for new raters), False for "items".

    Examples
    --------
    >>> generalises_over_raters("items"), generalises_over_raters("both")
    (False, True)
    """
    if generalize not in GENERALIZE:
        raise ValueError(f"generalize must be one of {', '.join(GENERALIZE)}, got {generalize!r}")
    return generalize != "items"


def _check_level(ci_level: float) -> float:
    if not 0 < ci_level < 1:
        raise ValueError(f"ci_level must be strictly between 0 and 1, got {ci_level!r}")
    return float(ci_level)
