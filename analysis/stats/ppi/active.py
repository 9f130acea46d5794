"""Active sampling of the contexts people rate, and the estimators that weight by it (Zrnic and Candès, "Active
Statistical Inference", ICML 2024; the robust mixing of Li, Zrnic and Candès, "Robust Sampling for Active
Statistical Inference", NeurIPS 2025).

The design is in ``active_draw``: each context i is drawn for human rating independently with a probability pi_i
(Poisson sampling: xi_i ~ Bernoulli(pi_i)) that follows the judges' uncertainty about it, mixed with uniform, the
pi_i summing to the expected budget B = human_share x N.

The estimator. With the judge's score f_i on every context, the label Y_i on the drawn ones, and the judge
recentred and weighted, g_i = c + lambda f_i,

    theta = (1/N) sum_i [ g_i + (Y_i - g_i) xi_i / pi_i ]
          = (1/N) sum_i [ lambda f_i + (Y_i - lambda f_i) xi_i / pi_i ]  +  c (1/N) sum_i (1 - xi_i / pi_i),

unbiased for the mean label over the contexts for every fixed (c, lambda) (E[xi_i / pi_i] = 1). The offset c is
what Zrnic and Candès's form lacks: under Poisson sampling the number drawn is random, and a residual
Y - lambda f whose mean is not 0 (any lambda < 1, or a judge on its own scale) adds (mean residual)^2 (1 - pi) / pi
to each context's variance; c = the residual's mean removes it (the survey statistician's generalised regression
estimator; with a fixed-size uniform sample, as in ``estimates``, the offset cancels and PPI++ needs none). Each
summand Z_i = A_i + lambda C_i + c D_i, with A_i = Y_i xi_i / pi_i, C_i = f_i (1 - xi_i / pi_i) and
D_i = 1 - xi_i / pi_i, is independent across contexts (pi_i is a function of context i's judged items), so
Var(theta) = Var(Z) / N, estimated by the sample variance of the Z_i, and the interval is
theta +- z sqrt(Var(Z) / N). The power-tuned (lambda, c) minimise that variance: the least-squares coefficients
of -A on (C, D), with lambda clipped to [0, 1] (PPI++'s convention in ``estimates``) and c refitted given the
clipped lambda. Tuning them on the same data is the PPI++ practice and costs nothing asymptotically.

Beside it the human-only estimate under the same draw is the Hájek mean sum_i w_i Y_i / sum_i w_i (w_i = xi_i /
pi_i), which is theta with f_i replaced by the constant theta itself; its variance by linearisation is
Var(w (Y - theta)) / (N mean(w)^2). Paired differences a - b use the same estimator on per-context differences
(labels Y_a - Y_b, judge differences f_a - f_b, the context's pi: a drawn context has both sides rated).
Shared raters add the two-way cluster-robust term of ``estimates.shared_rater_variance`` with each rating
weighted by its context's 1 / pi.

Two phases (``active_phases``): a uniform burn-in, then a draw on a residual model fitted on the burn-in's labels;
each context's probability is then its overall one, p1 + (1 - p1) q, and the estimators below take it unchanged.

A weight per stratum of the probability (``probability_strata``, ``ipw_stratified_tuning``; stratified PPI, Fisch et
al., NeurIPS 2024): the draw's probability follows the judges' uncertainty, so cutting the contexts by it separates
those the judge is sure of, where its score earns a weight near 1, from those where it earns less; one weight for
all is a compromise between them. The tables tune (lambda, c) in up to ``MAX_PROBABILITY_STRATA`` strata, each with
at least ``MIN_RATED_PER_STRATUM`` rated contexts (one stratum, the pooled rule, when fewer were rated), and widen
the variance by n / (n - 2 (S - 1)) for the extra pairs tuned on the same n rated contexts. Measured on the paid-
ratings benchmark's generator (``analysis.simulate.decisions``, difference correlation 0.7, 1,000 studies of 5,000
contexts, about 205 rated, 4.8 strata on average): the estimates' variance 0.908 of uniform PPI++'s at the same
number rated (one weight on the same active draw: 0.968); estimated over true variance 1.002 (0.966 without the
factor).

A drawn context whose ratings have not come in yet (a report made while the study runs) is a second phase: the
rated contexts are taken for a uniform subsample of the drawn ones, so each context's probability of being rated is
pi_i times the share of the drawn contexts rated (``observed_probabilities``; two-phase sampling, Särndal, Swensson
and Wretman 1992, ch. 9), as the uniform design's estimates take its rated contexts for a uniform sample. Weighting
by pi_i alone counted the unrated drawn contexts as drawn with a label of 0 in effect: with 30% of the drawn
contexts rated, the PPI++ interval covered the mean 46-55% of the time (1,000 seeded studies of 600 contexts;
0.94-0.96 with the scaled probabilities). The number of contexts drawn is random (Poisson sampling); only its
expectation is the budget.

Measured (1,500 seeded studies of 600 contexts, 120 expected human-rated; labels = quality + rater noise; a judge on
its own scale whose error SD is 0.1 on 85% of the contexts and 1.5 on the rest; tests/analysis/stats/
test_ppi_active.py's setting), width against PPI++ on a uniform sample of 120 (coverage 0.951):

* uncertainty = the error variance seen through noise: tau 0.5 width ratio 0.877 (23% fewer ratings for the same
  width), coverage 0.943; tau 0 (pure active) 0.994, coverage 0.935: the judges' uncertainty knows the judge's
  error but not the labels' own noise, so pure active sampling starves the contexts the judge is sure of;
* uncertainty unrelated to the errors: tau 0.5 width ratio 1.043, coverage 0.949; tau 0 1.189, coverage 0.925.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from empeval.analysis.stats.ppi.estimates import (
    DIFFERENCE_COLUMNS,
    MEAN_COLUMNS,
    clustered_ratings,
    generalises_over_raters,
    interval_reference,
    ppi_paired_differences,
    ppi_system_means,
    rater_degrees_of_freedom,
    shared_rater_variance,
)
from empeval.analysis.stats.ppi.tables import MIN_HUMAN_CONTEXTS, judged_items
from empeval.analysis.stats.significance import adjust_by_family

#: The estimators ``model_assisted_estimates`` picks between.
UNIFORM_PPI = "ppi"
ACTIVE_PPI = "active-ppi"

#: The judge's weight and offset are tuned apart in at most this many strata of the inclusion probability, each
#: with at least MIN_RATED_PER_STRATUM rated contexts (``probability_strata``; module docstring).
MAX_PROBABILITY_STRATA = 8
MIN_RATED_PER_STRATUM = 25

ACTIVE_MEAN_COLUMNS = (*MEAN_COLUMNS, "expected_n_human")
ACTIVE_DIFFERENCE_COLUMNS = (*DIFFERENCE_COLUMNS, "expected_n_human")


def ipw_power_tuning(labels, judged, probabilities) -> tuple[float, float]:
    """The weight lambda and offset c minimising the variance of the inverse-probability-weighted PPI++ estimate
    (module docstring): the least-squares coefficients of -A on (C, D), A = xi Y / pi, C = f (1 - xi / pi),
    D = 1 - xi / pi, over all N contexts; lambda clipped to [0, 1] and c refitted given it. A judge whose scores
    do not vary gets lambda = 0; probabilities all 1 (nothing random) give c = 0. ``labels`` holds NaN for the
    contexts not drawn (xi = 0).

    Returns
    -------
    lam, offset : float, float

    Examples
    --------
    A judge that tracks the label on its own scale (one point too high) gets a weight near 1 and an offset near
    -1:

    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(3, 1, 500)
    >>> f = y + 1 + rng.normal(0, 0.3, 500)
    >>> drawn = rng.random(500) < 0.4
    >>> lam, offset = ipw_power_tuning(np.where(drawn, y, np.nan), f, np.full(500, 0.4))
    >>> round(lam, 2), round(offset, 2)
    (0.96, -0.84)
    """
    y, f, pi = _checked(labels, judged, probabilities)
    drawn = ~np.isnan(y)
    weight = np.where(drawn, 1.0 / pi, 0.0)
    a = np.where(drawn, y, 0.0) * weight
    d = 1.0 - weight
    c = f * d
    lam = 0.0
    if np.var(f) > 0 and np.var(c) > 0:
        if np.var(d) > 0:
            design = np.column_stack([c - c.mean(), d - d.mean()])
            coefficients, *_ = np.linalg.lstsq(design, -(a - a.mean()), rcond=None)
            lam = float(np.clip(coefficients[0], 0.0, 1.0))
        else:
            lam = float(np.clip(-np.cov(a, c)[0, 1] / np.var(c, ddof=1), 0.0, 1.0))
    return lam, _offset(a + lam * c, d)


def _offset(rest: np.ndarray, d: np.ndarray) -> float:
    """The c minimising Var(rest + c d); 0 when d does not vary."""
    return float(-np.cov(d, rest)[0, 1] / np.var(d, ddof=1)) if np.var(d) > 0 else 0.0


def probability_strata(probabilities, rated, *, max_strata: int = MAX_PROBABILITY_STRATA,
                       min_rated: int = MIN_RATED_PER_STRATUM) -> np.ndarray:
    """Each context's stratum (0, 1, ...) by its inclusion probability: the contexts cut at the quantiles of the
    probabilities into the most strata, at most ``max_strata``, that leave every stratum at least ``min_rated``
    rated contexts (``rated``: a mask, or labels with NaN where not rated). Contexts of equal probability share a
    stratum (strata of tied probabilities may differ in size), so a uniform draw is one stratum, as is a draw with
    too few ratings to split.

    Returns
    -------
    strata : numpy.ndarray of int, one per context, numbered from the least probable

    Examples
    --------
    >>> pi = np.repeat([0.1, 0.2, 0.4, 0.8], 100)
    >>> np.bincount(probability_strata(pi, np.ones(400, dtype=bool), min_rated=50)).tolist()
    [100, 100, 100, 100]
    >>> np.unique(probability_strata(pi, np.ones(400, dtype=bool), min_rated=150)).tolist()
    [0, 1]
    >>> np.unique(probability_strata(np.full(400, 0.3), np.ones(400, dtype=bool))).tolist()
    [0]
    """
    pi = np.asarray(probabilities, dtype=float)
    rated = np.asarray(rated)
    rated = np.isfinite(rated) if np.issubdtype(rated.dtype, np.floating) else rated.astype(bool)
    if pi.shape != rated.shape:
        raise ValueError(f"probabilities and rated must have one entry per context, got {pi.shape} and {rated.shape}")
    for count in range(max(1, max_strata), 1, -1):
        # A probability equal to a cut goes below it, so tied probabilities stay together (the strata then differ in
        # size); empty strata are dropped and the rest numbered in order.
        cuts = np.searchsorted(np.unique(np.quantile(pi, np.arange(1, count) / count)), pi, side="left")
        _, strata = np.unique(cuts, return_inverse=True)
        if strata.max() > 0 and np.bincount(strata[rated], minlength=strata.max() + 1).min() >= min_rated:
            return strata
    return np.zeros(pi.size, dtype=int)


def ipw_stratified_tuning(labels, judged, probabilities, strata) -> tuple[np.ndarray, np.ndarray]:
    """Per context, the weight lambda and offset c of its stratum, minimising the variance of the
    inverse-probability-weighted PPI++ estimate when each stratum has its own (lambda_s, c_s): the least-squares
    coefficients of -A on (C 1[s], D 1[s]) over all N contexts with one intercept (``ipw_power_tuning``'s
    A, C, D), each lambda_s clipped to [0, 1] and the c_s refitted given them. Stratified PPI (Fisch et al.,
    "Stratified Prediction-Powered Inference for Hybrid Language Model Evaluation", NeurIPS 2024) with the
    inclusion probability as the stratifier: where the draw follows the judges' uncertainty, the strata separate
    the contexts the judge is sure of, where its score deserves more weight, from the others. A stratum whose
    judge scores or weights do not vary gets lambda_s = 0 (or c_s = 0). One stratum gives
    ``ipw_power_tuning``'s (lambda, c).

    Returns
    -------
    lam, offset : numpy.ndarray, numpy.ndarray (one per context)

    Examples
    --------
    A judge exact on the contexts drawn rarely and pure noise on the others gets weight 1 on the first and about 0
    on the second:

    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(3, 1, 2000)
    >>> pi = np.where(np.arange(2000) < 1000, 0.1, 0.5)
    >>> f = np.where(pi < 0.3, y, rng.normal(3, 1, 2000))
    >>> labels = np.where(rng.random(2000) < pi, y, np.nan)
    >>> strata = probability_strata(pi, labels)
    >>> lam, offset = ipw_stratified_tuning(labels, f, pi, strata)
    >>> round(float(lam[0]), 2), round(float(lam[-1]), 2)
    (0.97, 0.0)
    """
    y, f, pi = _checked(labels, judged, probabilities)
    strata = np.asarray(strata)
    if strata.shape != y.shape or not np.issubdtype(strata.dtype, np.integer) or (strata < 0).any():
        raise ValueError(f"strata must be non-negative integers, one per context; got {strata.dtype} {strata.shape} "
                         f"for {y.size} contexts")
    drawn = ~np.isnan(y)
    values, rated = np.unique(strata), np.bincount(strata[drawn], minlength=strata.max() + 1)
    if (short := [int(s) for s in values if rated[s] < MIN_HUMAN_CONTEXTS]):
        raise ValueError(f"stratum {short[0]} has {int(rated[short[0]])} rated context(s); each stratum needs at least "
                         f"{MIN_HUMAN_CONTEXTS} to tune its weight (probability_strata makes strata that have)")
    weight = np.where(drawn, 1.0 / pi, 0.0)
    a = np.where(drawn, y, 0.0) * weight
    d = 1.0 - weight
    c = f * d
    members = [strata == s for s in values]
    varies = [bool(np.var(c[m]) > 0 and np.var(f[m]) > 0) for m in members]
    with_offset = [m for m in members if np.var(d[m]) > 0]
    offset_columns = [np.where(m, d, 0.0) for m in with_offset]
    lam = np.zeros(y.size)
    columns = [np.where(m, c, 0.0) for m, v in zip(members, varies, strict=True) if v]
    if columns:
        coefficients = _least_squares(np.column_stack([np.ones(y.size), *columns, *offset_columns]), -a)
        tuned = iter(np.clip(coefficients[1:1 + len(columns)], 0.0, 1.0))
        for m, v in zip(members, varies, strict=True):
            if v:
                lam[m] = next(tuned)
    offset = np.zeros(y.size)
    if with_offset:
        coefficients = _least_squares(np.column_stack([np.ones(y.size), *offset_columns]), -(a + lam * c))
        for m, value in zip(with_offset, coefficients[1:], strict=True):
            offset[m] = value
    return lam, offset


def _least_squares(design: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The (minimum-norm) least-squares coefficients of `target` on the columns of `design`, through the normal
    equations: a few columns over thousands of contexts, where numpy's lstsq on the tall matrix (an SVD) cost
    15 ms a call against well under 1 ms."""
    return np.linalg.lstsq(design.T @ design, design.T @ target, rcond=None)[0]


def ipw_ppi_mean_interval(labels, judged, probabilities, *, ci_level: float = 0.95, null: float = 0.0,
                          rater_variance: float = 0.0, lam: float | None = None,
                          offset: float | None = None, df: float | None = None,
                          strata: np.ndarray | None = None) -> dict:
    """The inverse-probability-weighted PPI++ mean of the labels over N contexts drawn by Poisson sampling with
    the given ``probabilities`` (one per context, in (0, 1]): theta = mean_i [g_i + (Y_i - g_i) xi_i / pi_i],
    g_i = c + lambda f_i, with its CLT interval theta +- z sqrt(Var(Z) / N + rater_variance) and two-sided p-value
    against ``null``; beside it the Hájek human-only mean and interval on the same draw. ``labels`` holds NaN where the
    context was not drawn; ``judged`` the judge's score of every context. ``lam`` None power-tunes lambda
    and c (``ipw_power_tuning``); a number fixes lambda, and ``offset`` None then tunes c given it (``lam=1,
    offset=0``: Zrnic and Candès's active inference; ``lam=0, offset=0``: Horvitz-Thompson). ``df`` (the raters
    less one, when raters are taken as a sample: ``estimates``' module docstring) takes both intervals' quantiles
    and p-values from Student's t with ``df`` degrees of freedom instead of the normal. ``strata`` (one integer per
    context, e.g. ``probability_strata``) with ``lam`` and ``offset`` None tunes a (lambda, c) per stratum
    (``ipw_stratified_tuning``); the estimate stays unbiased for any fixed weights, and its variance is estimated
    the same way times n / (n - 2 (S - 1)) for the S strata's extra tuned pairs (n the rated contexts), the usual
    degrees-of-freedom factor of a fitted regression's residual variance.

    Returns
    -------
    result : dict
        The keys of ``estimates.ppi_mean_interval`` (``n_human``: contexts drawn and rated, ``n_judge_only``,
        ``human_mean``/``human_ci_low``/``human_ci_high``/``human_p``: Hájek, ``judge_mean_biased``,
        ``ppi_mean``/``ppi_ci_low``/``ppi_ci_high``/``ppi_p``, ``lam``, ``width_ratio``: weighted PPI width /
        Hájek width, ``rater_variance``), ``offset`` (c), with ``effective_n_human`` = s_Y^2 / se^2, the contexts
        a *uniform* human-only sample would need for the same width (s_Y^2 the weighted variance of the labels),
        ``expected_n_human`` = sum pi, and ``strata``, the number of strata tuned apart (``lam`` and ``offset``
        are then their means over the contexts).

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> quality = rng.normal(3.5, 0.6, 2000)
    >>> noise_sd = np.where(rng.random(2000) < 0.5, 0.1, 0.8)   # the judge is sure of half the contexts
    >>> judge = quality + rng.normal(0, noise_sd)
    >>> from empeval.analysis.stats.ppi.active_draw import sampling_probabilities
    >>> pi = sampling_probabilities(noise_sd**2, budget=200)
    >>> drawn = rng.random(2000) < pi
    >>> labels = np.where(drawn, quality, np.nan)
    >>> result = ipw_ppi_mean_interval(labels, judge, pi)
    >>> round(result["ppi_mean"], 2), round(float(quality.mean()), 2), round(result["lam"], 2)
    (3.51, 3.49, 0.61)
    >>> round(result["expected_n_human"]), result["n_human"], round(result["effective_n_human"])
    (200, 194, 404)
    """
    y, f, pi = _checked(labels, judged, probabilities)
    if not rater_variance >= 0:
        raise ValueError(f"rater_variance must be a non-negative variance, got {rater_variance!r}")
    if not 0 < ci_level < 1:
        raise ValueError(f"ci_level must be strictly between 0 and 1, got {ci_level!r}")
    reference = interval_reference(df)
    drawn = ~np.isnan(y)
    n_total, n_drawn = y.size, int(drawn.sum())
    if n_drawn < MIN_HUMAN_CONTEXTS:
        raise ValueError(f"need at least {MIN_HUMAN_CONTEXTS} human-rated contexts, got {n_drawn} of {n_total}")
    weight = np.where(drawn, 1.0 / pi, 0.0)
    y0 = np.where(drawn, y, 0.0)
    n_strata = 1 if strata is None else int(np.unique(strata).size)
    weights: np.ndarray | float  # the judge's weight lambda: per context when tuned per stratum
    offsets: np.ndarray | float
    if lam is None and offset is None and strata is not None and n_strata > 1:
        weights, offsets = ipw_stratified_tuning(y, f, pi, strata)
    else:
        n_strata = 1
        if lam is None:
            weights, tuned = ipw_power_tuning(y, f, pi)
        else:
            weights, tuned = lam, _offset(y0 * weight + lam * f * (1.0 - weight), 1.0 - weight)
        offsets = tuned if offset is None else offset
    g = offsets + weights * f
    z_values = g + (y0 - g) * weight
    z = reference.ppf(0.5 + ci_level / 2)
    theta = float(z_values.mean())
    # Each (lambda, c) tuned beyond the first pair is fitted on the same rated contexts: without the degrees-of-freedom
    # factor the stratified variance came out 3.4% low (1,000 simulated studies, about 5 strata of ~40 rated each).
    tuned_apart = n_drawn / (n_drawn - 2 * (n_strata - 1))
    se = float(np.sqrt(np.var(z_values, ddof=1) / n_total * tuned_apart + rater_variance))
    human = float((weight * y0).sum() / weight.sum())
    residual = weight * (y0 - human)
    human_se = float(np.sqrt(np.var(residual, ddof=1) / n_total / weight.mean() ** 2 + rater_variance))
    label_variance = float((weight * (y0 - human) ** 2).sum() / weight.sum())

    def p_value(estimate: float, error: float) -> float:
        return float(2 * reference.sf(abs(estimate - null) / error)) if error > 0 else float("nan")

    ratio = se / human_se if human_se > 0 else float("nan")
    return {
        "n_human": n_drawn, "n_judge_only": n_total - n_drawn,
        "human_mean": human, "human_ci_low": float(human - z * human_se), "human_ci_high": float(human + z * human_se),
        "human_p": p_value(human, human_se), "judge_mean_biased": float(f.mean()),
        "ppi_mean": theta, "ppi_ci_low": float(theta - z * se), "ppi_ci_high": float(theta + z * se),
        "ppi_p": p_value(theta, se),
        "lam": float(np.mean(weights)), "offset": float(np.mean(offsets)), "width_ratio": float(ratio),
        "effective_n_human": label_variance / se**2 if se > 0 else float("nan"),
        "rater_variance": float(rater_variance), "expected_n_human": float(pi.sum()), "strata": n_strata,
    }


def active_system_means(
    human_ratings: pd.DataFrame,
    judge_scores: pd.DataFrame,
    design_sample: pd.DataFrame,
    *,
    judge: str | None = None,
    ci_level: float = 0.95,
    cluster_by: str | None = "assignment_id",
    allow_missing: bool = False,
    generalize: str = "items",
) -> pd.DataFrame:
    """``estimates.ppi_system_means`` for an actively sampled study: per criterion and system, the
    inverse-probability-weighted PPI++ mean (``ipw_ppi_mean_interval``) over every judged context, with the
    probabilities of ``design_sample`` (``server.backend.judges.scores.human_sample``: ``context_id``,
    ``sampled``, ``inclusion_probability``). A context counts as drawn for a system when people rated its item.
    ``generalize`` "raters" or "both": intervals for new raters, as ``ppi_system_means`` makes them (clustered by
    ``annotator`` with the raters' small-sample correction, t on the raters less one).

    Returns
    -------
    means : pandas.DataFrame
        The columns of ``ppi_system_means`` (``human_*``: the Hájek mean; ``effective_n_human``: against a uniform
        human-only sample) and ``expected_n_human`` (sum of the probabilities).

    Examples
    --------
    >>> ratings, scores, sample = _example_study()
    >>> means = active_system_means(ratings, scores, sample, cluster_by=None)
    >>> print(means[["system", "n_human", "n_judge_only", "ppi_mean", "lam"]].round(2).to_string(index=False))
    system  n_human  n_judge_only  ppi_mean  lam
      gold        5             3      3.67 0.97
      moel        5             3      3.22 0.92
    """
    over_raters = generalises_over_raters(generalize)
    items, dropped, probability, drawn = _weighted_items(human_ratings, judge_scores, design_sample, judge=judge,
                                                         allow_missing=allow_missing)
    clustered = clustered_ratings(human_ratings, items, "annotator" if over_raters else cluster_by)
    rows = []
    for (criterion, system), part in items.groupby(["criterion", "system"], sort=True, observed=True):
        labels = part["label"].to_numpy(dtype=float)
        where = f"system {system!r}, criterion {criterion!r}"
        _check_drawn(labels, where)
        pi, scaled = _observed(probability, drawn, part["context_id"], labels)
        extra = _rater_variance(clustered, [(criterion, system, 1.0)], labels, pi, part["context_id"], scaled,
                                small_sample=over_raters)
        df = rater_degrees_of_freedom(clustered, criterion, [system]) if over_raters else None
        result = ipw_ppi_mean_interval(labels, part["judge_score"].to_numpy(dtype=float), pi, ci_level=ci_level,
                                       rater_variance=extra, df=df, strata=probability_strata(pi, labels))
        result.update(criterion=criterion, system=system, n_ratings=int(part["n_ratings"].sum()),
                      human_share=float(np.isfinite(labels).mean()))
        rows.append(result)
    if not rows:
        return pd.DataFrame(columns=list(ACTIVE_MEAN_COLUMNS))
    table = pd.DataFrame(rows).merge(dropped, on=["criterion", "system"], how="left")
    table["n_dropped_missing"] = table["n_dropped_missing"].fillna(0).astype(int)
    return table.reindex(columns=list(ACTIVE_MEAN_COLUMNS))


def active_paired_differences(
    human_ratings: pd.DataFrame,
    judge_scores: pd.DataFrame,
    design_sample: pd.DataFrame,
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
    """``estimates.ppi_paired_differences`` for an actively sampled study: every pair a, b of systems per
    criterion, the inverse-probability-weighted PPI++ mean of the per-context differences (labels Y_a - Y_b where
    people rated both, judge differences f_a - f_b on every context, the context's probability), its z-test of
    "no difference" corrected over ``family`` by ``correction`` as ``ppi_paired_differences`` does.
    ``generalize`` as in ``active_system_means`` (t on the raters of the pair's rated contexts less one).

    Returns
    -------
    pairs : pandas.DataFrame
        The columns of ``ppi_paired_differences`` and ``expected_n_human``.

    Examples
    --------
    >>> ratings, scores, sample = _example_study()
    >>> pairs = active_paired_differences(ratings, scores, sample, cluster_by=None)
    >>> print(pairs[["system_a", "system_b", "n_human", "ppi_diff", "ppi_ci_low", "ppi_ci_high"]].round(2).to_string(
    ...     index=False))
    system_a system_b  n_human  ppi_diff  ppi_ci_low  ppi_ci_high
        gold     moel        5      0.46        0.25         0.68
    """
    if family not in ("criterion", "study"):
        raise ValueError(f"family must be one of ('criterion', 'study'), got {family!r}")
    over_raters = generalises_over_raters(generalize)
    items, _, probability, drawn = _weighted_items(human_ratings, judge_scores, design_sample, judge=judge,
                                                   allow_missing=allow_missing)
    clustered = clustered_ratings(human_ratings, items, "annotator" if over_raters else cluster_by)
    rows = []
    for criterion, part in items.groupby("criterion", sort=True, observed=True):
        wide = part.pivot(index="context_id", columns="system", values=["label", "judge_score"])
        labels, scores = wide["label"], wide["judge_score"]
        for system_a, system_b in itertools.combinations(sorted(scores.columns), 2):
            judged = (scores[system_a] - scores[system_b]).dropna()
            differences = (labels[system_a] - labels[system_b]).reindex(judged.index).to_numpy(dtype=float)
            _check_drawn(differences, f"systems {system_a!r} and {system_b!r}, criterion {criterion!r}")
            pi, scaled = _observed(probability, drawn, judged.index, differences)
            extra = _rater_variance(clustered, [(criterion, system_a, 1.0), (criterion, system_b, -1.0)],
                                    differences, pi, judged.index, scaled, small_sample=over_raters)
            df = (rater_degrees_of_freedom(clustered, criterion, [system_a, system_b],
                                           contexts=judged.index[np.isfinite(differences)]) if over_raters else None)
            result = ipw_ppi_mean_interval(differences, judged.to_numpy(dtype=float), pi, ci_level=ci_level,
                                           rater_variance=extra, df=df, strata=probability_strata(pi, differences))
            rows.append({
                "criterion": criterion, "system_a": system_a, "system_b": system_b,
                "n_human": result["n_human"], "n_judge_only": result["n_judge_only"],
                "human_diff": result["human_mean"], "human_ci_low": result["human_ci_low"],
                "human_ci_high": result["human_ci_high"], "judge_diff_biased": result["judge_mean_biased"],
                "ppi_diff": result["ppi_mean"], "ppi_ci_low": result["ppi_ci_low"],
                "ppi_ci_high": result["ppi_ci_high"], "lam": result["lam"], "p_ppi": result["ppi_p"],
                "width_ratio": result["width_ratio"], "effective_n_human": result["effective_n_human"],
                "rater_variance": result["rater_variance"], "expected_n_human": result["expected_n_human"],
            })
    if not rows:
        return pd.DataFrame(columns=list(ACTIVE_DIFFERENCE_COLUMNS))
    table = pd.DataFrame(rows)
    groups = table["criterion"] if family == "criterion" else pd.Series("study", index=table.index)
    table["p_adj"] = adjust_by_family(table["p_ppi"], groups, method=correction)
    table["significant"] = table["p_adj"] < alpha
    table["correction"] = correction
    table["family"] = family
    return table.reindex(columns=list(ACTIVE_DIFFERENCE_COLUMNS))


@dataclass
class AssistedEstimates:
    """What ``model_assisted_estimates`` chose and computed: ``estimator`` (``UNIFORM_PPI`` or ``ACTIVE_PPI``),
    the system means and the paired differences."""

    estimator: str
    means: pd.DataFrame
    pairs: pd.DataFrame


def is_actively_sampled(design_sample: pd.DataFrame | None) -> bool:
    """Whether the design's record of its human sample carries inclusion probabilities (an active draw).

    >>> is_actively_sampled(pd.DataFrame({"context_id": [1], "sampled": [True], "inclusion_probability": [0.4]}))
    True
    >>> is_actively_sampled(pd.DataFrame({"context_id": [1], "sampled": [True], "inclusion_probability": [None]}))
    False
    """
    return (design_sample is not None and "inclusion_probability" in design_sample.columns
            and bool(design_sample["inclusion_probability"].notna().any()))


def model_assisted_estimates(
    human_ratings: pd.DataFrame,
    judge_scores: pd.DataFrame,
    design_sample: pd.DataFrame | None = None,
    *,
    judge: str | None = None,
    ci_level: float = 0.95,
    family: str = "criterion",
    correction: str = "holm",
    alpha: float = 0.05,
    cluster_by: str | None = "assignment_id",
    allow_missing: bool = False,
    generalize: str = "items",
) -> AssistedEstimates:
    """The model-assisted means and paired differences with the estimator the design calls for: the
    inverse-probability-weighted ones (``active_system_means``, ``active_paired_differences``) when
    ``design_sample`` records inclusion probabilities (``is_actively_sampled``), else PPI++ on a uniform sample
    (``estimates.ppi_system_means``, ``estimates.ppi_paired_differences``). Options as theirs.

    Examples
    --------
    >>> ratings, scores, sample = _example_study()
    >>> model_assisted_estimates(ratings, scores, sample, cluster_by=None).estimator
    'active-ppi'
    >>> model_assisted_estimates(ratings, scores, None, cluster_by=None).estimator
    'ppi'
    """
    if design_sample is not None and is_actively_sampled(design_sample):
        return AssistedEstimates(
            ACTIVE_PPI,
            active_system_means(human_ratings, judge_scores, design_sample, judge=judge, ci_level=ci_level,
                                cluster_by=cluster_by, allow_missing=allow_missing, generalize=generalize),
            active_paired_differences(human_ratings, judge_scores, design_sample, judge=judge, ci_level=ci_level,
                                      family=family, correction=correction, alpha=alpha, cluster_by=cluster_by,
                                      allow_missing=allow_missing, generalize=generalize))
    return AssistedEstimates(
        UNIFORM_PPI,
        ppi_system_means(human_ratings, judge_scores, judge=judge, ci_level=ci_level, cluster_by=cluster_by,
                         allow_missing=allow_missing, generalize=generalize),
        ppi_paired_differences(human_ratings, judge_scores, judge=judge, ci_level=ci_level, family=family,
                               correction=correction, alpha=alpha, cluster_by=cluster_by, allow_missing=allow_missing,
                               generalize=generalize))


def observed_probabilities(probabilities, rated, drawn) -> tuple[np.ndarray, float]:
    """Each context's probability of being *rated*, while only part of the drawn contexts have been: pi_i times the
    share of the drawn contexts rated so far (the rated ones a uniform subsample of the drawn ones: module
    docstring), and that share (1 once every drawn context is rated). A rated context the draw did not record as
    drawn counts as drawn.

    >>> rated, drawn = [True, False, False, False], [True, True, False, False]
    >>> pi, share = observed_probabilities([0.5, 0.5, 0.2, 0.2], rated, drawn)
    >>> pi.tolist(), share
    ([0.25, 0.25, 0.1, 0.1], 0.5)
    >>> observed_probabilities([0.5, 0.2], [True, False], [True, False])[1]
    1.0
    """
    pi = np.asarray(probabilities, dtype=float)
    rated = np.asarray(rated, dtype=bool)
    drawn = np.asarray(drawn, dtype=bool) | rated
    share = float(rated.sum() / drawn.sum()) if drawn.any() else 1.0
    return pi * share, share


def _checked(labels, judged, probabilities) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = np.asarray(labels, dtype=float)
    f = np.asarray(judged, dtype=float)
    pi = np.asarray(probabilities, dtype=float)
    if y.ndim != 1 or y.shape != f.shape or y.shape != pi.shape:
        raise ValueError("labels, judged and probabilities must be 1-d and of the same length (one per context), "
                         f"got {y.shape}, {f.shape} and {pi.shape}")
    if not np.isfinite(f).all():
        raise ValueError("judge scores must be finite on every context (drop the judge's failures first)")
    if np.isinf(y).any():
        raise ValueError("labels must be finite where the context was drawn (NaN where it was not)")
    if not (np.isfinite(pi).all() and (pi > 0).all() and (pi <= 1).all()):
        raise ValueError("probabilities must lie in (0, 1] for every context (a context that could not be drawn "
                         "has no unbiased weight)")
    return y, f, pi


def _weighted_items(human_ratings, judge_scores, design_sample, *, judge, allow_missing):
    """judged_items with each item's context probability, the probabilities by context (as str), and whether the
    draw drew each context (as str; every context with a probability counts as drawn when the record has no
    ``sampled`` column)."""
    if design_sample is None or not is_actively_sampled(design_sample):
        raise ValueError("design_sample records no inclusion probability: the study was not actively sampled "
                         "(use estimates.ppi_system_means, or model_assisted_estimates, which picks)")
    probability = pd.Series(design_sample["inclusion_probability"].to_numpy(dtype=float),
                            index=design_sample["context_id"].astype(str).to_numpy())
    items, dropped = judged_items(human_ratings, judge_scores, judge=judge, allow_missing=allow_missing)
    items["probability"] = probability.reindex(items["context_id"].astype(str)).to_numpy()
    unknown = items["probability"].isna()
    if unknown.any():
        first = items.loc[unknown].iloc[0]
        raise ValueError(f"context {first['context_id']} (system {first['system']!r}) has no inclusion "
                         f"probability in the design's sample ({int(unknown.sum())} item(s) lack one): the "
                         "estimates weight every context by its probability")
    drawn = pd.Series(design_sample["sampled"].fillna(False).astype(bool).to_numpy() if "sampled" in design_sample
                      else np.ones(len(design_sample), dtype=bool), index=probability.index)
    return items, dropped, probability, drawn


def _observed(probability: pd.Series, drawn: pd.Series, contexts, labels: np.ndarray) -> tuple[np.ndarray, pd.Series]:
    """``observed_probabilities`` of `contexts` (labels NaN where not rated), and every context's probability
    (``_weighted_items``'s by context) scaled by the same share, for the shared-rater term."""
    keys = pd.Index(contexts).astype(str)
    pi, share = observed_probabilities(probability.reindex(keys), np.isfinite(labels),
                                       drawn.reindex(keys).to_numpy(dtype=bool))
    return pi, probability * share


def _check_drawn(labels: np.ndarray, where: str) -> None:
    n_drawn = int(np.isfinite(labels).sum())
    if n_drawn < MIN_HUMAN_CONTEXTS:
        raise ValueError(f"{where}: {n_drawn} human-rated context(s); the weighted estimate needs at least "
                         f"{MIN_HUMAN_CONTEXTS}: wait for the drawn contexts' ratings")


def _rater_variance(clustered, sides, labels, pi, contexts, probability, *, small_sample: bool = False) -> float:
    """The shared-rater term of a weighted mean over N contexts: each rating contributes
    sign (x - Hájek mean label of its system) / (k pi) (estimates.shared_rater_variance, n_items = N; its
    ``small_sample`` correction when raters are taken as a sample)."""
    if clustered is None:
        return 0.0
    parts = []
    for criterion, system, sign in sides:
        ratings = clustered.get((criterion, system))
        if ratings is None:
            continue
        ratings = ratings.loc[ratings["context_id"].astype(str).isin(set(map(str, contexts)))]
        if ratings.empty:
            continue
        weight = 1.0 / probability.reindex(ratings["context_id"].astype(str)).to_numpy(dtype=float)
        item_labels = ratings.groupby("context_id")["label"].first()
        item_pi = probability.reindex(item_labels.index.astype(str)).to_numpy(dtype=float)
        centre = float((item_labels.to_numpy() / item_pi).sum() / (1.0 / item_pi).sum())
        parts.append(pd.DataFrame({"c": sign * (ratings["score"].to_numpy() - centre)
                                   / ratings["n_ratings"].to_numpy() * weight,
                                   "item": ratings["context_id"].to_numpy(), "cluster": ratings["cluster"].to_numpy()}))
    if not parts:
        return 0.0
    table = pd.concat(parts)
    return shared_rater_variance(table["c"], table["item"], table["cluster"], n_items=len(labels),
                                 small_sample=small_sample)


def _example_study() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """A small actively sampled study for the docstrings: 8 contexts, systems gold and moel, 5 contexts drawn."""
    contexts = list(range(1, 9))
    quality = {"gold": [4, 3, 5, 2, 4, 3, 4, 3], "moel": [3, 3, 4, 2, 3, 3, 4, 2]}
    drawn = [1, 2, 4, 6, 7]
    pi = [0.8, 0.5, 0.4, 0.9, 0.4, 0.7, 0.6, 0.7]
    ratings = pd.DataFrame([{"context_id": c, "system": s, "criterion": "empathy", "annotator": a,
                             "score": quality[s][c - 1] + (1 if a == "bob" and c % 2 else 0)}
                            for c in drawn for s in quality for a in ("ann", "bob")])
    scores = pd.DataFrame([{"context_id": c, "system": s, "criterion": "empathy",
                            "judge_score": quality[s][c - 1] + 0.3 * ((c * 7) % 3 - 1)}
                           for c in contexts for s in quality])
    sample = pd.DataFrame({"context_id": contexts, "sampled": [c in drawn for c in contexts],
                           "inclusion_probability": pi})
    return ratings, scores, sample
