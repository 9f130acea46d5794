"""Paired system differences by PPI++ with a judge of *differences* as the predictor.

A decision between two systems rests on the mean per-context difference of their labels, Y_a - Y_b. PPI++ on
paired differences (``empeval.analysis.stats.ppi.estimates.ppi_paired_differences``) predicts it with the difference
of a judge's per-item scores, f_a - f_b; a judge that scores responses one at a time mostly sees what the two
responses share (the context's difficulty, which cancels in the difference), so that predictor correlates weakly
with the human difference and PPI++ saved about 6% of the human ratings. A judge of differences (a pairwise judge
asked which response is better, in both orders, or a learned difference judge) predicts the difference itself,
g(context, a, b), in points of the study's scale (A's rating minus B's).

For one criterion and pair (a, b), with labels D_i = Y_a,i - Y_b,i on the n contexts people rated for both
systems, the judge's differences g_i there and g~_j on the N contexts only the judge compared, the estimate is
PPI++'s for a mean (Angelopoulos, Duchi and Zrnic 2023):

    theta(lambda) = lambda * mean_j g~_j + mean_i (D_i - lambda * g_i),
    Var = lambda^2 var(g~) / N + var(D - lambda g) / n,
    lambda* = cov(D, g) / ((1 + n / N) var(g, g~)),

unbiased for every lambda; lambda = 0 is the human-only mean difference. Unlike ``estimates.power_tuned_lambda``
lambda is clipped below at 0 only, not above at 1: a pairwise judge's differences are on a scale of its own (a
preference per order times a factor), and lambda above 1 stretches them to the human scale, which the variance
formula rewards only when it narrows the interval. With ``cluster_by`` (default ``assignment_id``) both variances
get the shared-rater term of ``estimates.rater_variance_of_difference``, as ``ppi_paired_differences`` adds it.

The p-values are the z-tests of no difference, corrected over each family (the pairs of a criterion, or of the
study) by Holm's method by default, as ``analysis.stats.significance.compare_pairs`` corrects the Likert
comparisons.

Input: the human ratings (``context_id``, ``system``, ``criterion``, ``annotator``, ``score``, optionally
``assignment_id``) and the judge's differences, one row per criterion, context and pair: ``criterion``,
``context_id``, ``system_a``, ``system_b``, ``judge_diff`` (A minus B; NaN where the judge failed), optionally
``error``. A row may name its pair in either order; it is turned to the sorted order (negated when swapped).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from scipy import stats

from empeval.analysis.stats.ppi.estimates import (
    FAMILIES,
    clustered_ratings,
    generalises_over_raters,
    interval_reference,
    rater_degrees_of_freedom,
    rater_variance_of_difference,
)
from empeval.analysis.stats.ppi.tables import MIN_HUMAN_CONTEXTS, item_labels
from empeval.analysis.stats.significance import adjust_by_family

PAIR_SCORE_COLUMNS = ("criterion", "context_id", "system_a", "system_b", "judge_diff")
PAIR_KEYS = ["criterion", "system_a", "system_b"]

PAIR_DIFFERENCE_COLUMNS = (
    "criterion", "system_a", "system_b", "n_human", "n_judge_only", "human_diff", "human_ci_low", "human_ci_high",
    "judge_diff_biased", "ppi_diff", "ppi_ci_low", "ppi_ci_high", "lam", "p_ppi", "p_adj", "significant",
    "width_ratio", "effective_n_human", "rater_variance", "correlation", "n_dropped_missing", "correction", "family",
)


def ppi_difference_interval(labels, judged_rated, judged_unrated, *, ci_level: float = 0.95,
                            rater_variance: float = 0.0, null: float = 0.0, df: float | None = None) -> dict:
    """PPI++ mean of per-context label differences ``labels`` with a judge of differences as the predictor
    (``judged_rated`` on the same contexts, ``judged_unrated`` on the contexts only the judge compared), beside the
    human-only mean difference; lambda power-tuned and clipped at 0 below only (module docstring).
    ``rater_variance`` is added to both variances; ``df`` (the raters less one, raters taken as a sample) takes the
    quantiles and p-values from Student's t with ``df`` degrees of freedom instead of the normal.

    Returns
    -------
    result : dict
        ``n_human``, ``n_judge_only``, ``human_diff``, ``human_ci_low``, ``human_ci_high``, ``human_p``,
        ``judge_diff_biased`` (the judge's mean difference over every context, uncorrected), ``ppi_diff``,
        ``ppi_ci_low``, ``ppi_ci_high``, ``p_ppi`` (z-test of ``null``), ``lam``, ``width_ratio`` (PPI++ width /
        human-only width), ``effective_n_human`` (n / width_ratio^2), ``rater_variance``, ``correlation``
        (Pearson's r of judge and label differences on the rated contexts; NaN when either is constant).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> latent = rng.normal(0.3, 0.7, 500)                     # the true per-context difference
    >>> judge = 0.5 * (latent + rng.normal(0, 0.5, 500))       # a compressed judge of differences
    >>> labels = latent[:60] + rng.normal(0, 0.5, 60)          # people rated the first 60 contexts
    >>> result = ppi_difference_interval(labels, judge[:60], judge[60:])
    >>> round(result["human_diff"], 2), round(result["ppi_diff"], 2), round(result["lam"], 2)
    (0.34, 0.25, 1.02)
    >>> round(result["width_ratio"], 2), round(result["effective_n_human"])
    (0.81, 92)
    """
    y = np.asarray(labels, dtype=float)
    g = np.asarray(judged_rated, dtype=float)
    g_unrated = np.asarray(judged_unrated, dtype=float)
    if y.shape != g.shape or y.ndim != 1:
        raise ValueError("labels and judged_rated must be 1-d and of the same length (one per human-rated context)")
    if y.size < MIN_HUMAN_CONTEXTS or g_unrated.size < 1:
        raise ValueError(f"need at least {MIN_HUMAN_CONTEXTS} contexts people rated for both systems and 1 context "
                         f"only the judge compared, got {y.size} and {g_unrated.size}")
    if not np.isfinite(np.concatenate([y, g, g_unrated])).all():
        raise ValueError("label and judge differences must be finite (drop the judge's failures first)")
    if not rater_variance >= 0:
        raise ValueError(f"rater_variance must be a non-negative variance, got {rater_variance!r}")
    if not 0 < ci_level < 1:
        raise ValueError(f"ci_level must be strictly between 0 and 1, got {ci_level!r}")
    reference = interval_reference(df)
    n, big_n = y.size, g_unrated.size
    z = float(reference.ppf(0.5 + ci_level / 2))
    variance = np.var(np.concatenate([g, g_unrated]), ddof=1)
    covariance = float(np.mean((y - y.mean()) * (g - g.mean())))
    lam = max(0.0, covariance / ((1 + n / big_n) * variance)) if variance > 0 else 0.0
    estimate = float(lam * g_unrated.mean() + (y - lam * g).mean())
    judge_variance = g_unrated.var(ddof=1) if big_n > 1 else 0.0
    ppi_se = float(np.sqrt(lam**2 * judge_variance / big_n + (y - lam * g).var(ddof=1) / n + rater_variance))
    human_se = float(np.sqrt(y.var(ddof=1) / n + rater_variance))
    ratio = ppi_se / human_se if human_se > 0 else np.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        correlation = float(np.corrcoef(y, g)[0, 1]) if y.std() > 0 and g.std() > 0 else np.nan
    return {
        "n_human": int(n), "n_judge_only": int(big_n),
        "human_diff": float(y.mean()), "human_ci_low": float(y.mean() - z * human_se),
        "human_ci_high": float(y.mean() + z * human_se),
        "human_p": float(2 * reference.sf(abs(y.mean() - null) / human_se)) if human_se > 0 else np.nan,
        "judge_diff_biased": float(np.concatenate([g, g_unrated]).mean()),
        "ppi_diff": estimate, "ppi_ci_low": estimate - z * ppi_se, "ppi_ci_high": estimate + z * ppi_se,
        "p_ppi": float(2 * reference.sf(abs(estimate - null) / ppi_se)) if ppi_se > 0 else np.nan,
        "lam": float(lam), "width_ratio": float(ratio),
        "effective_n_human": float(n / ratio**2) if ratio > 0 else np.nan,
        "rater_variance": float(rater_variance), "correlation": correlation,
    }


def oriented_pair_scores(pair_scores: pd.DataFrame) -> pd.DataFrame:
    """The judge's differences with every pair named in sorted order (``system_a`` < ``system_b``; a row named
    the other way round has its ``judge_diff`` negated) and ``context_id`` as text, one row per criterion, pair
    and context (a duplicate is refused).

    Examples
    --------
    >>> scores = pd.DataFrame({"criterion": "empathy", "context_id": [1, 2], "system_a": ["moel", "base"],
    ...                        "system_b": ["base", "moel"], "judge_diff": [0.5, -1.0]})
    >>> oriented_pair_scores(scores)[["context_id", "system_a", "system_b", "judge_diff"]]
      context_id system_a system_b  judge_diff
    0          1     base     moel        -0.5
    1          2     base     moel        -1.0
    """
    missing = [column for column in PAIR_SCORE_COLUMNS if column not in pair_scores.columns]
    if missing:
        raise ValueError(f"pair_scores needs column(s) {', '.join(map(repr, missing))} (one row per criterion, "
                         "context and pair of systems, judge_diff = A minus B)")
    table = pair_scores.copy()
    same = table["system_a"] == table["system_b"]
    if same.any():
        raise ValueError(f"pair_scores compares system {table.loc[same, 'system_a'].iloc[0]!r} with itself")
    swap = (table["system_a"].astype(str) > table["system_b"].astype(str)).to_numpy()
    first, second = table["system_a"].copy(), table["system_b"].copy()
    table.loc[swap, "system_a"], table.loc[swap, "system_b"] = second[swap], first[swap]
    table["judge_diff"] = np.where(swap, -table["judge_diff"].astype(float), table["judge_diff"].astype(float))
    table["context_id"] = table["context_id"].astype(str)
    twice = table.duplicated(PAIR_KEYS + ["context_id"])
    if twice.any():
        row = table.loc[twice].iloc[0]
        raise ValueError(f"pair_scores has two rows for criterion {row['criterion']!r}, systems {row['system_a']!r} "
                         f"and {row['system_b']!r}, context {row['context_id']!r}; keep one per pair and context")
    return table.reset_index(drop=True)


def item_score_differences(judge_scores: pd.DataFrame) -> pd.DataFrame:
    """A per-item judge's scores turned into differences (f_a - f_b per context, every pair of systems), in the
    shape of ``pair_scores``: what ``ppi_paired_differences`` uses as its predictor, to compare a judge of
    differences with.

    Examples
    --------
    >>> scores = pd.DataFrame({"criterion": "empathy", "context_id": [1, 1], "system": ["gold", "base"],
    ...                        "judge_score": [4.0, 3.5]})
    >>> item_score_differences(scores)
      criterion context_id system_a system_b  judge_diff
    0   empathy          1     base     gold        -0.5
    """
    rows = []
    for criterion, part in judge_scores.groupby("criterion", sort=True):
        wide = part.assign(context_id=part["context_id"].astype(str)).pivot(
            index="context_id", columns="system", values="judge_score")
        for a, b in itertools.combinations(sorted(wide.columns), 2):
            rows.append(pd.DataFrame({"criterion": criterion, "context_id": wide.index, "system_a": a,
                                      "system_b": b, "judge_diff": (wide[a] - wide[b]).to_numpy()}))
    if not rows:
        return pd.DataFrame(columns=list(PAIR_SCORE_COLUMNS))
    return pd.concat(rows, ignore_index=True)[list(PAIR_SCORE_COLUMNS)]


def difference_table(human_ratings: pd.DataFrame, pair_scores: pd.DataFrame) -> pd.DataFrame:
    """Every compared context of every pair with its label difference: the judge's ``judge_diff`` (sorted pair
    order, ``oriented_pair_scores``) beside ``label_diff`` = Y_a - Y_b, the difference of the item labels (means
    of the ratings), NaN unless people rated the context for both systems.

    Returns
    -------
    differences : pandas.DataFrame
        ``criterion``, ``system_a``, ``system_b``, ``context_id``, ``judge_diff``, ``label_diff``, and ``error``
        when the scores carry it.
    """
    scores = oriented_pair_scores(pair_scores)
    labels = item_labels(_with_text_context(human_ratings))[["criterion", "system", "context_id", "label"]]
    side_a = labels.rename(columns={"system": "system_a", "label": "label_a"})
    side_b = labels.rename(columns={"system": "system_b", "label": "label_b"})
    table = (scores.merge(side_a, on=["criterion", "system_a", "context_id"], how="left")
             .merge(side_b, on=["criterion", "system_b", "context_id"], how="left"))
    table["label_diff"] = table["label_a"] - table["label_b"]
    columns = [*PAIR_KEYS, "context_id", "judge_diff", "label_diff"] + (["error"] if "error" in table.columns else [])
    return table[columns].sort_values([*PAIR_KEYS, "context_id"]).reset_index(drop=True)


def difference_correlations(human_ratings: pd.DataFrame, pair_scores: pd.DataFrame) -> pd.DataFrame:
    """Judge-human agreement on differences: Pearson's r and Spearman's rho of the judge's difference with the
    label difference on the contexts people rated for both systems, per criterion and pair, and per criterion
    over every pair (``system_a`` and ``system_b`` "all pairs").

    Returns
    -------
    correlations : pandas.DataFrame
        ``criterion``, ``system_a``, ``system_b``, ``n_contexts``, ``pearson``, ``spearman`` (NaN with fewer than
        three contexts or a constant side).
    """
    table = difference_table(human_ratings, pair_scores)
    rated = table.loc[table["label_diff"].notna() & table["judge_diff"].notna()]
    rows = []
    for criterion, part in rated.groupby("criterion", sort=True):
        for (a, b), pair in part.groupby(["system_a", "system_b"], sort=True):
            rows.append({"criterion": criterion, "system_a": a, "system_b": b, **_correlations(pair)})
        rows.append({"criterion": criterion, "system_a": "all pairs", "system_b": "all pairs", **_correlations(part)})
    return pd.DataFrame(rows, columns=[*PAIR_KEYS, "n_contexts", "pearson", "spearman"])


def ppi_pair_differences(
    human_ratings: pd.DataFrame,
    pair_scores: pd.DataFrame,
    *,
    ci_level: float = 0.95,
    family: str = "criterion",
    correction: str = "holm",
    alpha: float = 0.05,
    cluster_by: str | None = "assignment_id",
    allow_missing: bool = False,
    generalize: str = "items",
) -> pd.DataFrame:
    """Every pair of systems per criterion the judge compared: the mean per-context difference a - b, human-only
    and PPI++ with the judge's differences as the predictor (``ppi_difference_interval``), with the z-test of no
    difference and its p-value corrected over ``family`` ("criterion" or "study") by ``correction`` (Holm by
    default). ``cluster_by`` and ``generalize`` as in ``estimates.ppi_paired_differences`` ("raters" or "both":
    clustered by annotator with the raters' small-sample correction, t on the pair's raters less one).

    Every compared context needs the judge's difference: a failure (NaN) is refused unless ``allow_missing``,
    which drops those contexts (with their labels) and counts them in ``n_dropped_missing``.

    Returns
    -------
    pairs : pandas.DataFrame
        One row per criterion and pair (sorted system names): ``criterion``, ``system_a``, ``system_b``, the fields
        of ``ppi_difference_interval`` except ``human_p``, ``p_adj``, ``significant`` (``p_adj < alpha``),
        ``n_dropped_missing``, ``correction``, ``family``.

    Examples
    --------
    >>> from empeval.analysis.simulate.judges import SimulatedDifferenceJudge, simulate_judged_study
    >>> study = simulate_judged_study(n_contexts=200, human_share=0.25, seed=3,
    ...                               difference_judge=SimulatedDifferenceJudge("pairs", correlation=0.8))
    >>> pairs = ppi_pair_differences(study.human_ratings, study.pair_scores)
    >>> columns = ["system_a", "system_b", "human_diff", "ppi_diff", "width_ratio", "p_adj"]
    >>> print(pairs[columns].round(3).to_string(index=False))
    system_a system_b  human_diff  ppi_diff  width_ratio  p_adj
    baseline     gold      -0.487    -0.534        0.761  0.000
    baseline     moel      -0.320    -0.441        0.730  0.000
        gold     moel       0.167     0.209        0.685  0.016
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    over_raters = generalises_over_raters(generalize)
    table = difference_table(human_ratings, pair_scores)
    failed = table["judge_diff"].isna()
    if failed.any() and not allow_missing:
        first = table.loc[failed].iloc[0]
        raise ValueError(f"the judge has no difference for {int(failed.sum())} compared context(s) (first: criterion "
                         f"{first['criterion']!r}, {first['system_a']!r} - {first['system_b']!r}, context "
                         f"{first['context_id']!r}); run the judge again to retry its failures, or allow missing "
                         "contexts to drop them")
    human = _with_text_context(human_ratings)
    labels = item_labels(human)
    clustered = clustered_ratings(human, labels, "annotator" if over_raters else cluster_by)
    rows = []
    for (criterion, a, b), part in table.groupby(PAIR_KEYS, sort=True):
        dropped = int(part["judge_diff"].isna().sum())
        part = part.loc[part["judge_diff"].notna()]
        rated = part["label_diff"].notna().to_numpy()
        where = f"systems {a!r} and {b!r}, criterion {criterion!r}"
        if rated.sum() < MIN_HUMAN_CONTEXTS:
            raise ValueError(f"{where}: {int(rated.sum())} context(s) people rated for both systems; prediction-"
                             f"powered inference needs at least {MIN_HUMAN_CONTEXTS}: rate more contexts")
        if rated.all():
            raise ValueError(f"{where}: the judge compared only the {int(rated.sum())} contexts people rated, so "
                             "none is left for the judge alone; have the judge compare every context of the study")
        wide = labels.loc[labels["criterion"] == criterion].pivot(index="context_id", columns="system",
                                                                   values="label")
        contexts = pd.Index(part.loc[rated, "context_id"])
        extra = rater_variance_of_difference(clustered, criterion, a, b, wide, contexts=contexts,
                                             small_sample=over_raters)
        df = rater_degrees_of_freedom(clustered, criterion, [a, b], contexts=contexts) if over_raters else None
        result = ppi_difference_interval(part["label_diff"].to_numpy()[rated], part["judge_diff"].to_numpy()[rated],
                                         part["judge_diff"].to_numpy()[~rated], ci_level=ci_level,
                                         rater_variance=extra, df=df)
        result.pop("human_p")
        rows.append({"criterion": criterion, "system_a": a, "system_b": b, **result, "n_dropped_missing": dropped})
    pairs = pd.DataFrame(rows)
    if pairs.empty:
        return pd.DataFrame(columns=list(PAIR_DIFFERENCE_COLUMNS))
    groups = pairs["criterion"] if family == "criterion" else pd.Series("study", index=pairs.index)
    pairs["p_adj"] = adjust_by_family(pairs["p_ppi"], groups, method=correction)
    pairs["significant"] = pairs["p_adj"] < alpha
    pairs["correction"] = correction
    pairs["family"] = family
    return pairs.reindex(columns=list(PAIR_DIFFERENCE_COLUMNS))


def _with_text_context(human_ratings: pd.DataFrame) -> pd.DataFrame:
    """The ratings with ``context_id`` (the tidy table's ``context`` read as it) as text, as the pair scores have it."""
    ratings = human_ratings.rename(columns={"context": "context_id"}) if "context_id" not in human_ratings.columns \
        else human_ratings
    if "assignment_id" not in ratings.columns and "assignment" in ratings.columns:
        ratings = ratings.rename(columns={"assignment": "assignment_id"})
    return ratings.assign(context_id=ratings["context_id"].astype(str))


def _correlations(part: pd.DataFrame) -> dict:
    x, y = part["judge_diff"].to_numpy(dtype=float), part["label_diff"].to_numpy(dtype=float)
    if x.size < 3 or x.std() == 0 or y.std() == 0:
        return {"n_contexts": int(x.size), "pearson": np.nan, "spearman": np.nan}
    return {"n_contexts": int(x.size), "pearson": float(np.corrcoef(x, y)[0, 1]),
            "spearman": float(stats.spearmanr(x, y).statistic)}
