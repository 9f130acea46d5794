"""How far to trust a judge: its agreement with the label the estimates actually use (the mean of an item's
k human ratings), on the human-rated items.

- Spearman's rho (scipy): does the judge order items as people do? What PPI++ gains from, roughly.
- Krippendorff's alpha, interval metric (Krippendorff 2011), judge and label as two coders: does the judge
  give the same numbers? A shifted or compressed judge scores low here even when it orders items well.
  Percentile bootstrap CI over items (Efron and Tibshirani 1993). Estimate and bootstrap use the closed form
  of alpha for two coders with no missing values (below; tested equal to the ``krippendorff`` package),
  vectorised over resamples: the package builds a coincidence matrix over every distinct value, which for a
  continuous judge on 300 items (600 distinct values) takes about 3 s per call, and a bootstrap makes a
  thousand calls.
- A calibration table: judge-score bins against the mean label, what a calibration plot draws.

Closed form (two coders, values a_u and b_u on every unit u, unit weights w_u): with W = sum w,
D_o = sum w (a - b)^2 / W and D_e = 2 sum w ((a - m)^2 + (b - m)^2) / (2W - 1), m the weighted mean of all
2W values, alpha = 1 - D_o / D_e.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from empeval.analysis.stats.bootstrap import percentile_interval, resample_weights
from empeval.analysis.stats.ppi.tables import judged_items

ALL_SYSTEMS = "(all)"

AGREEMENT_COLUMNS = (
    "criterion", "system", "n_items", "spearman", "spearman_p", "pearson", "alpha_interval", "alpha_ci_low",
    "alpha_ci_high", "n_boot_defined", "label_mean", "judge_mean", "note",
)

CALIBRATION_COLUMNS = (
    "criterion", "bin", "judge_low", "judge_high", "n_items", "judge_mean", "label_mean", "label_sd",
    "label_ci_low", "label_ci_high",
)


def interval_alpha_two_coders(a, b, *, unit_weights=None):
    """Krippendorff's alpha, interval metric, for two coders who coded every unit (closed form of the module
    docstring); with ``unit_weights`` of shape (B, n), one alpha per row of weights (bootstrap resamples).

    Returns
    -------
    alpha : float or numpy.ndarray
        NaN where the values do not vary (alpha undefined).

    Examples
    --------
    Equal to the ``krippendorff`` package:

    >>> import krippendorff, numpy as np
    >>> a, b = np.array([1.0, 2.0, 3.0, 4.0, 5.0]), np.array([1.5, 2.0, 2.5, 4.5, 4.0])
    >>> round(float(interval_alpha_two_coders(a, b)), 6)
    0.90583
    >>> round(float(krippendorff.alpha(reliability_data=[a, b], level_of_measurement="interval")), 6)
    0.90583
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    scalar = unit_weights is None
    w = np.ones((1, a.size)) if scalar else np.asarray(unit_weights, dtype=float)
    total = w.sum(axis=1)
    mean = (w @ (a + b)) / (2 * total)
    observed = (w @ (a - b) ** 2) / total
    squares = w @ (a**2 + b**2) - 2 * total * mean**2
    expected = 2 * squares / (2 * total - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = np.where(expected > 1e-12, 1 - observed / expected, np.nan)
    return float(alpha[0]) if scalar else alpha


def judge_agreement(
    human_ratings: pd.DataFrame,
    judge_scores: pd.DataFrame,
    *,
    judge: str | None = None,
    n_boot: int = 1000,
    ci_level: float = 0.95,
    seed: int = 0,
    allow_missing: bool = False,
) -> pd.DataFrame:
    """Judge-human agreement per criterion, for each system and for all systems pooled, on the human-rated
    items: Spearman's rho, Pearson's r and Krippendorff's alpha (interval) between the judge's score and the
    label (mean of the item's human ratings), alpha with a percentile bootstrap CI over items (``n_boot``
    resamples, seeded). Items the judge failed on are refused unless ``allow_missing``.

    Returns
    -------
    agreement : pandas.DataFrame
        One row per criterion and system (``system`` "(all)" for the pooled row):

        * ``criterion``, ``system``, ``n_items``: human-rated items with a judge score
        * ``spearman``, ``spearman_p``: Spearman's rho and its p-value; ``pearson``: Pearson's r
        * ``alpha_interval``, ``alpha_ci_low``, ``alpha_ci_high``: Krippendorff's alpha (interval) and CI
        * ``n_boot_defined``: resamples in which alpha was defined
        * ``label_mean``, ``judge_mean``: means over these items (a gap is the judge's bias)
        * ``note``: why a figure is undefined, else ""

    Examples
    --------
    >>> from empeval.analysis.simulate.judges import BIASED_JUDGE, GOOD_JUDGE, simulate_judged_study
    >>> good = simulate_judged_study(judge=GOOD_JUDGE, n_contexts=200, human_share=0.5, seed=3)
    >>> biased = simulate_judged_study(judge=BIASED_JUDGE, n_contexts=200, human_share=0.5, seed=3)
    >>> columns = ["system", "n_items", "spearman", "alpha_interval", "alpha_ci_low", "alpha_ci_high"]
    >>> print(judge_agreement(good.human_ratings, good.judge_scores)[columns].round(2).to_string(index=False))
      system  n_items  spearman  alpha_interval  alpha_ci_low  alpha_ci_high
       (all)      300      0.78            0.79          0.74           0.83
    baseline      100      0.71            0.74          0.63           0.82
        gold      100      0.79            0.81          0.73           0.86
        moel      100      0.69            0.75          0.64           0.82
    >>> print(judge_agreement(biased.human_ratings, biased.judge_scores)[columns].round(2).to_string(index=False))
      system  n_items  spearman  alpha_interval  alpha_ci_low  alpha_ci_high
       (all)      300      0.61            0.51          0.43           0.57
    baseline      100      0.65            0.49          0.37           0.58
        gold      100      0.74            0.48          0.31           0.60
        moel      100      0.64            0.51          0.36           0.63
    """
    items, _ = judged_items(human_ratings, judge_scores, judge=judge, allow_missing=allow_missing)
    rated = items.loc[items["label"].notna()]
    rows = []
    for criterion, part in rated.groupby("criterion", sort=True, observed=True):
        groups = [(ALL_SYSTEMS, part)] + list(part.groupby("system", sort=True, observed=True))
        for system, group in groups:
            rows.append({"criterion": criterion, "system": system,
                         **_agreement_row(group["label"].to_numpy(), group["judge_score"].to_numpy(),
                                          n_boot=n_boot, ci_level=ci_level, seed=seed)})
    return pd.DataFrame(rows, columns=list(AGREEMENT_COLUMNS))


def calibration_table(
    human_ratings: pd.DataFrame,
    judge_scores: pd.DataFrame,
    *,
    judge: str | None = None,
    n_bins: int = 5,
    ci_level: float = 0.95,
    allow_missing: bool = False,
) -> pd.DataFrame:
    """The judge's calibration per criterion, every system pooled, on the human-rated items: items binned by
    judge score, and the mean label per bin with a normal-approximation CI. A well-calibrated judge has
    ``label_mean`` close to ``judge_mean`` in every bin; what a calibration plot draws. Bins are equal-count
    (quantiles of the judge score), or one per distinct score when the judge gives ``n_bins`` or fewer
    distinct scores (e.g. a judge answering on the 1-5 scale).

    Returns
    -------
    calibration : pandas.DataFrame
        One row per criterion and bin: ``criterion``, ``bin`` (1, 2, ...), ``judge_low``, ``judge_high`` (the
        bin's range of judge scores), ``n_items``, ``judge_mean``, ``label_mean``, ``label_sd``,
        ``label_ci_low``, ``label_ci_high``.

    Examples
    --------
    >>> from empeval.analysis.simulate.judges import BIASED_JUDGE, simulate_judged_study
    >>> study = simulate_judged_study(judge=BIASED_JUDGE, n_contexts=200, human_share=0.5, seed=3)
    >>> table = calibration_table(study.human_ratings, study.judge_scores, n_bins=4)
    >>> print(table[["bin", "n_items", "judge_mean", "label_mean"]].round(2).to_string(index=False))
     bin  n_items  judge_mean  label_mean
       1       75        2.94        3.06
       2       75        3.34        3.47
       3       75        3.60        3.84
       4       75        4.02        4.26
    """
    if not isinstance(n_bins, int) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive whole number, got {n_bins!r}")
    z = stats.norm.ppf((1 + ci_level) / 2)
    items, _ = judged_items(human_ratings, judge_scores, judge=judge, allow_missing=allow_missing)
    rated = items.loc[items["label"].notna()]
    rows = []
    for criterion, part in rated.groupby("criterion", sort=True, observed=True):
        scores = part["judge_score"]
        if scores.nunique() <= n_bins:
            bins = scores.rank(method="dense").astype(int)
        else:
            bins = pd.qcut(scores, n_bins, labels=False, duplicates="drop").astype(int) + 1
        for number, group in part.groupby(bins.to_numpy(), sort=True):
            labels = group["label"].to_numpy()
            sd = float(labels.std(ddof=1)) if labels.size > 1 else np.nan
            half = z * sd / np.sqrt(labels.size) if labels.size > 1 else np.nan
            rows.append({"criterion": criterion, "bin": int(number), "judge_low": float(group["judge_score"].min()),
                         "judge_high": float(group["judge_score"].max()), "n_items": int(labels.size),
                         "judge_mean": float(group["judge_score"].mean()), "label_mean": float(labels.mean()),
                         "label_sd": sd, "label_ci_low": float(labels.mean() - half),
                         "label_ci_high": float(labels.mean() + half)})
    return pd.DataFrame(rows, columns=list(CALIBRATION_COLUMNS))


def _agreement_row(labels: np.ndarray, judged: np.ndarray, *, n_boot: int, ci_level: float, seed: int) -> dict:
    row = {"n_items": int(labels.size), "label_mean": float(labels.mean()) if labels.size else np.nan,
           "judge_mean": float(judged.mean()) if judged.size else np.nan, "spearman": np.nan, "spearman_p": np.nan,
           "pearson": np.nan, "alpha_interval": np.nan, "alpha_ci_low": np.nan, "alpha_ci_high": np.nan,
           "n_boot_defined": 0, "note": ""}
    if labels.size < 3:
        row["note"] = "fewer than three human-rated items with a judge score"
        return row
    if np.ptp(labels) == 0 or np.ptp(judged) == 0:
        row["note"] = "no variation in the labels or the judge's scores: correlations undefined"
    else:
        spearman = stats.spearmanr(labels, judged)
        row.update(spearman=float(spearman.statistic), spearman_p=float(spearman.pvalue),
                   pearson=float(stats.pearsonr(labels, judged).statistic))
    if np.ptp(np.concatenate([labels, judged])) == 0:
        row["note"] = "every value is the same: alpha undefined"
        return row
    row["alpha_interval"] = interval_alpha_two_coders(labels, judged)
    if n_boot > 0:
        boot = interval_alpha_two_coders(labels, judged,
                                         unit_weights=resample_weights(labels.size, n_boot=n_boot, seed=seed))
        low, high, defined = percentile_interval(boot, level=ci_level)
        row.update(alpha_ci_low=low, alpha_ci_high=high, n_boot_defined=int(defined))
    return row
