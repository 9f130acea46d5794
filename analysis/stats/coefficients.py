"""Agreement coefficients on arrays, each vectorised over bootstrap resamples of units.

Every function takes per-unit data plus optional ``unit_weights`` of shape (B, U): row b says how often each
unit was drawn in resample b (see ``empeval.analysis.stats.bootstrap.resample_weights``). Without ``unit_weights`` the
plain estimate is returned as a float; with them, an array of B estimates. An estimate that is undefined
(0/0: no pairable unit, no variation) is NaN, never 0 or 1.

Why hand-written: the ``krippendorff`` package and ``statsmodels.stats.inter_rater.fleiss_kappa`` compute one
estimate per call, so a bootstrap would need B calls over re-built data. Both coefficients are sums of
per-unit terms (coincidences for alpha, category counts for kappa), so a resample is a weighted sum and all
B resamples are one matrix product. With all weights equal to one the results equal the libraries' (tested).
Gwet's AC2 and the ICCs have no library here (pingouin is not installed), so they follow the published
formulas: Gwet (2014, Handbook of Inter-Rater Reliability, 4th ed., ch. 3-5) and Shrout & Fleiss (1979).
"""

from __future__ import annotations

import numpy as np

from empeval.analysis.stats.bootstrap import weighted_sums

LEVELS = ("nominal", "ordinal", "interval", "ratio")


def unit_value_counts(reliability_data: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Counts of each value per unit from a raters x units matrix with NaN for missing ratings.

    Returns
    -------
    counts : numpy.ndarray
        Shape (U, V): for each unit, how many raters gave each of the V ``values``.

    Examples
    --------
    Krippendorff's (2011) example C, 4 observers x 12 units:

    >>> import numpy as np
    >>> nan = np.nan
    >>> data = np.array([[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
    ...                  [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
    ...                  [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
    ...                  [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]])
    >>> values = np.arange(1, 6)
    >>> counts = unit_value_counts(data, values)
    >>> counts[:3]
    array([[3., 0., 0., 0., 0.],
           [0., 3., 1., 0., 0.],
           [0., 0., 4., 0., 0.]])
    """
    data = np.asarray(reliability_data, dtype=float)
    values = np.asarray(values, dtype=float)
    observed = data[~np.isnan(data)]
    if not np.isin(observed, values).all():
        outside = np.setdiff1d(observed, values)
        raise ValueError(f"ratings {outside.tolist()} lie outside the value domain {values.tolist()}")
    return (data.T[:, :, None] == values[None, None, :]).sum(axis=1).astype(float)


def _as_weights(unit_weights: np.ndarray | None, n_units: int) -> tuple[np.ndarray, bool]:
    if unit_weights is None:
        return np.ones((1, n_units)), True
    weights = np.atleast_2d(np.asarray(unit_weights))
    if weights.dtype.kind not in "uif":  # resample counts stay integers (see analysis.stats.bootstrap.weighted_sums)
        weights = weights.astype(float)
    if weights.shape[1] != n_units:
        raise ValueError(f"unit_weights has {weights.shape[1]} columns for {n_units} units")
    return weights, False


def _finish(estimates: np.ndarray, scalar: bool):
    return float(estimates[0]) if scalar else estimates


# --- Krippendorff's alpha -------------------------------------------------------------------------------


def coincidence_contributions(counts: np.ndarray) -> np.ndarray:
    """Per-unit contributions to Krippendorff's coincidence matrix, shape (U, V, V).

    o_ck(u) = (n_uc n_uk - [c=k] n_uc) / (m_u - 1), and zero for units with fewer than two values
    (Krippendorff 2011, "Computing Krippendorff's alpha-reliability", section C).

    Returns
    -------
    contributions : numpy.ndarray
        Shape (U, V, V); summed over units, the coincidence matrix.

    Examples
    --------
    The coincidence matrix of Krippendorff's (2011) example C, as published there:

    >>> import numpy as np
    >>> nan = np.nan
    >>> data = np.array([[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
    ...                  [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
    ...                  [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
    ...                  [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]])
    >>> values = np.arange(1, 6)
    >>> counts = unit_value_counts(data, values)
    >>> coincidence_contributions(counts).sum(axis=0).round(2)
    array([[ 7.  ,  1.33,  0.33,  0.33,  0.  ],
           [ 1.33, 10.  ,  1.33,  0.33,  0.  ],
           [ 0.33,  1.33,  8.  ,  0.33,  0.  ],
           [ 0.33,  0.33,  0.33,  4.  ,  0.  ],
           [ 0.  ,  0.  ,  0.  ,  0.  ,  3.  ]])
    """
    counts = np.asarray(counts, dtype=float)
    m = counts.sum(axis=1)
    outer = counts[:, :, None] * counts[:, None, :]
    diagonal = counts[:, :, None] * np.eye(counts.shape[1])[None, :, :]
    # max(m, 2) mirrors the krippendorff package: units with one value contribute 0 / 1 = 0.
    return (outer - diagonal) / (np.maximum(m, 2) - 1)[:, None, None]


def krippendorff_alpha(
    counts: np.ndarray,
    values: np.ndarray,
    *,
    level: str = "ordinal",
    unit_weights: np.ndarray | None = None,
):
    """Krippendorff's alpha = 1 - D_o / D_e from per-unit value counts (U, V) over the ordered ``values``.

    D_o and D_e use the coincidence matrix o and the expected coincidences e_ck = (n_c n_k - [c=k] n_c) / (n-1)
    with the metric of ``level`` (nominal, ordinal, interval, ratio; Krippendorff 2011). The ordinal metric
    depends on the marginal value frequencies, so it is rebuilt for every resample.

    Returns
    -------
    alpha : float or numpy.ndarray
        The estimate (NaN when there is no expected disagreement), or shape (B,) with ``unit_weights``.

    Examples
    --------
    Krippendorff's (2011) example C; published: nominal 0.743, ordinal 0.815, interval 0.849.

    >>> import numpy as np
    >>> nan = np.nan
    >>> data = np.array([[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
    ...                  [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
    ...                  [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
    ...                  [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]])
    >>> values = np.arange(1, 6)
    >>> counts = unit_value_counts(data, values)
    >>> [round(krippendorff_alpha(counts, values, level=level), 3) for level in ("nominal", "ordinal", "interval")]
    [0.743, 0.815, 0.849]

    All bootstrap resamples at once, as ``empeval.analysis.stats.agreement`` computes its CIs:

    >>> from empeval.analysis.stats.bootstrap import resample_weights
    >>> krippendorff_alpha(counts, values, unit_weights=resample_weights(12, n_boot=1000, seed=0)).shape
    (1000,)
    """
    return krippendorff_alphas(counts, values, levels=(level,), unit_weights=unit_weights)[level]


def krippendorff_alphas(
    counts: np.ndarray,
    values: np.ndarray,
    *,
    levels: tuple[str, ...] = ("ordinal", "interval"),
    unit_weights: np.ndarray | None = None,
) -> dict:
    """Krippendorff's alpha at several ``levels`` at once: ``krippendorff_alpha`` for each, with the
    coincidence matrices summed over the resamples once (the costliest step; it does not depend on the level).

    Returns
    -------
    alphas : dict
        Level -> the estimate (float), or shape (B,) with ``unit_weights``.

    Examples
    --------
    Krippendorff's (2011) example C; published: ordinal 0.815, interval 0.849.

    >>> import numpy as np
    >>> nan = np.nan
    >>> data = np.array([[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
    ...                  [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
    ...                  [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
    ...                  [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]])
    >>> alphas = krippendorff_alphas(unit_value_counts(data, np.arange(1, 6)), np.arange(1, 6))
    >>> {level: round(alpha, 3) for level, alpha in alphas.items()}
    {'ordinal': 0.815, 'interval': 0.849}
    """
    for level in levels:
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    counts = np.asarray(counts, dtype=float)
    values = np.asarray(values, dtype=float)
    weights, scalar = _as_weights(unit_weights, counts.shape[0])
    n_values = values.size
    per_unit = coincidence_contributions(counts).reshape(counts.shape[0], n_values * n_values)
    observed = weighted_sums(weights, per_unit).reshape(-1, n_values, n_values)  # (B, V, V)
    n_v = observed.sum(axis=1)  # (B, V)
    n = n_v.sum(axis=1)  # (B,)
    expected = (n_v[:, :, None] * n_v[:, None, :] - n_v[:, :, None] * np.eye(n_values)[None]) / (n - 1)[:, None, None]
    alphas = {}
    for level in levels:
        distance = _distances(values, level, n_v)  # (B, V, V)
        with np.errstate(divide="ignore", invalid="ignore"):
            disagreement_observed = (observed * distance).sum(axis=(1, 2))
            disagreement_expected = (expected * distance).sum(axis=(1, 2))
            alpha = 1.0 - disagreement_observed / disagreement_expected
        alpha[~(disagreement_expected > 0)] = np.nan
        alphas[level] = _finish(alpha, scalar)
    return alphas


def _distances(values: np.ndarray, level: str, n_v: np.ndarray) -> np.ndarray:
    n_boot, n_values = n_v.shape
    if level == "nominal":
        metric = (values[:, None] != values[None, :]).astype(float)
    elif level == "interval":
        metric = (values[:, None] - values[None, :]) ** 2
    elif level == "ratio":
        total = values[:, None] + values[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            metric = np.where(total != 0, (values[:, None] - values[None, :]) / total, 0.0) ** 2
    else:  # ordinal: (sum of n_g for g from c to k, minus (n_c + n_k) / 2) squared
        index = np.arange(n_values)
        lo = np.minimum(index[:, None], index[None, :])
        hi = np.maximum(index[:, None], index[None, :])
        cumulative = np.cumsum(n_v, axis=1)
        between = cumulative[:, hi] - cumulative[:, lo] + n_v[:, lo]
        return (between - (n_v[:, index[:, None]] + n_v[:, index[None, :]]) / 2.0) ** 2
    return np.broadcast_to(metric, (n_boot, n_values, n_values))


# --- Gwet's AC2 -----------------------------------------------------------------------------------------


def gwet_weights(values: np.ndarray, weights: str = "ordinal") -> np.ndarray:
    """Gwet's (2014, ch. 3) agreement weights over the ordered categories ``values``.

    ordinal: w_kl = 1 - C(|k-l|+1, 2) / C(q, 2) on category ranks; linear: 1 - |x_k-x_l| / (x_max-x_min);
    quadratic: 1 - (x_k-x_l)^2 / (x_max-x_min)^2; identity: unweighted (AC1).

    Returns
    -------
    weights : numpy.ndarray
        Shape (q, q), symmetric, 1 on the diagonal.

    Examples
    --------
    >>> import numpy as np
    >>> gwet_weights(np.arange(1, 6), "ordinal")
    array([[1. , 0.9, 0.7, 0.4, 0. ],
           [0.9, 1. , 0.9, 0.7, 0.4],
           [0.7, 0.9, 1. , 0.9, 0.7],
           [0.4, 0.7, 0.9, 1. , 0.9],
           [0. , 0.4, 0.7, 0.9, 1. ]])
    """
    values = np.asarray(values, dtype=float)
    q = values.size
    if weights == "identity":
        return np.eye(q)
    if weights == "ordinal":
        rank = np.arange(q)
        spread = np.abs(rank[:, None] - rank[None, :]) + 1
        pairs = spread * (spread - 1) / 2.0
        return 1.0 - pairs / pairs.max()
    span = values.max() - values.min()
    if weights == "linear":
        return 1.0 - np.abs(values[:, None] - values[None, :]) / span
    if weights == "quadratic":
        return 1.0 - (values[:, None] - values[None, :]) ** 2 / span**2
    raise ValueError(f"unknown weights {weights!r}; use ordinal, linear, quadratic or identity")


def gwet_ac2(
    counts: np.ndarray,
    values: np.ndarray,
    *,
    weights: str | np.ndarray = "ordinal",
    unit_weights: np.ndarray | None = None,
):
    """Gwet's AC2 for any number of raters with missing ratings (Gwet 2014, eq. 5.2-5.4; irrCAC's gwet.ac1.raw).

    p_a = mean over units rated at least twice of sum_k r_ik (r*_ik - 1) / (r_i (r_i - 1)), r*_ik = sum_l w_kl r_il;
    pi_k = mean over units rated at least once of r_ik / r_i; p_e = T_w / (q (q-1)) sum_k pi_k (1 - pi_k),
    T_w the sum of all weights; AC2 = (p_a - p_e) / (1 - p_e). With identity weights this is AC1.

    Returns
    -------
    ac2 : float or numpy.ndarray
        The estimate (NaN when undefined), or shape (B,) with ``unit_weights``.

    Examples
    --------
    Krippendorff's (2011) example C; Gwet (2014) and irrCAC give AC1 = 0.7754 on these data.

    >>> import numpy as np
    >>> nan = np.nan
    >>> data = np.array([[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
    ...                  [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
    ...                  [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
    ...                  [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]])
    >>> values = np.arange(1, 6)
    >>> counts = unit_value_counts(data, values)
    >>> round(gwet_ac2(counts, values, weights="identity"), 4), round(gwet_ac2(counts, values), 3)
    (0.7754, 0.899)
    """
    counts = np.asarray(counts, dtype=float)
    values = np.asarray(values, dtype=float)
    category_weights = gwet_weights(values, weights) if isinstance(weights, str) else np.asarray(weights, float)
    unit_w, scalar = _as_weights(unit_weights, counts.shape[0])
    q = values.size
    r_i = counts.sum(axis=1)
    pairable = r_i >= 2
    rated = r_i >= 1
    weighted = counts @ category_weights.T
    with np.errstate(divide="ignore", invalid="ignore"):
        agreement = np.where(
            pairable, (counts * (weighted - 1.0)).sum(axis=1) / (r_i * (r_i - 1.0)), 0.0
        )
        shares = np.where(rated[:, None], counts / r_i[:, None], 0.0)
        # One pass over the resamples for every per-unit quantity: columns agreement, pairable, rated, shares.
        sums = weighted_sums(unit_w, np.column_stack([agreement, pairable, rated, shares]))
        p_a = sums[:, 0] / sums[:, 1]
        pi = sums[:, 3:] / sums[:, 2][:, None]
        p_e = category_weights.sum() / (q * (q - 1.0)) * (pi * (1.0 - pi)).sum(axis=1)
        ac2 = (p_a - p_e) / (1.0 - p_e)
    ac2[~np.isfinite(ac2)] = np.nan
    return _finish(ac2, scalar)


# --- Fleiss' kappa --------------------------------------------------------------------------------------


def fleiss_kappa(counts: np.ndarray, *, unit_weights: np.ndarray | None = None):
    """Fleiss' (1971) kappa from a subjects x categories table in which every subject has the same number m
    of ratings: P_i = (sum_j n_ij^2 - m) / (m (m-1)), p_j = sum_i n_ij / (N m), kappa = (mean P_i - sum p_j^2) /
    (1 - sum p_j^2). Equals statsmodels' fleiss_kappa(method="fleiss") on the plain table.

    Returns
    -------
    kappa : float or numpy.ndarray
        The estimate (NaN when every rating falls in one category), or shape (B,) with ``unit_weights``.

    Examples
    --------
    Ten subjects, five categories, 14 raters each (the worked example of Wikipedia's "Fleiss' kappa"
    article, kappa = 0.210):

    >>> table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    ...          [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    >>> round(fleiss_kappa(table), 3)
    0.21
    """
    counts = np.asarray(counts, dtype=float)
    m = counts.sum(axis=1)
    if counts.shape[0] == 0 or not np.all(m == m[0]) or m[0] < 2:
        raise ValueError("Fleiss' kappa needs the same number (at least 2) of ratings for every subject")
    m = m[0]
    weights, scalar = _as_weights(unit_weights, counts.shape[0])
    per_subject = ((counts**2).sum(axis=1) - m) / (m * (m - 1.0))
    total = weights.sum(axis=1, dtype=float)
    sums = weighted_sums(weights, np.column_stack([per_subject, counts]))
    p_bar = sums[:, 0] / total
    p_j = sums[:, 1:] / (total * m)[:, None]
    p_e = (p_j**2).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = (p_bar - p_e) / (1.0 - p_e)
    kappa[~np.isfinite(kappa)] = np.nan
    return _finish(kappa, scalar)


# --- Percent agreement ----------------------------------------------------------------------------------


def percent_agreement(
    counts: np.ndarray,
    values: np.ndarray,
    *,
    tolerance: float = 0.0,
    unit_weights: np.ndarray | None = None,
):
    """Share of rater pairs within a unit whose scores differ by at most ``tolerance`` (0: exact agreement,
    1: within one point), averaged over units with at least two ratings, each unit weighted equally.

    Returns
    -------
    share : float or numpy.ndarray
        The share (NaN without a unit rated twice), or shape (B,) with ``unit_weights``.

    Examples
    --------
    Two units rated (4, 5) and (2, 2, 3): exact agreement 0/2 and 2/6 of the ordered rater pairs.

    >>> import numpy as np
    >>> counts = np.array([[0, 0, 0, 1, 1], [0, 2, 1, 0, 0]])
    >>> round(percent_agreement(counts, np.arange(1, 6)), 4), percent_agreement(counts, np.arange(1, 6), tolerance=1)
    (0.1667, 1.0)
    """
    counts = np.asarray(counts, dtype=float)
    values = np.asarray(values, dtype=float)
    weights, scalar = _as_weights(unit_weights, counts.shape[0])
    m = counts.sum(axis=1)
    pairable = m >= 2
    close = (np.abs(values[:, None] - values[None, :]) <= tolerance + 1e-12).astype(float)
    # Ordered pairs of different ratings: n_c n_k for c != k, n_c (n_c - 1) on the diagonal.
    agreeing_pairs = np.einsum("uc,ck,uk->u", counts, close, counts) - counts.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(pairable, agreeing_pairs / (m * (m - 1.0)), 0.0)
        sums = weighted_sums(weights, np.column_stack([share, pairable]))
        result = sums[:, 0] / sums[:, 1]
    result[~np.isfinite(result)] = np.nan
    return _finish(result, scalar)


def cohen_weighted_kappa(
    pairs: np.ndarray,
    values: np.ndarray,
    *,
    weights: str = "quadratic",
    unit_weights: np.ndarray | None = None,
):
    """Cohen's (1968) weighted kappa of two raters who rated the same units: 1 - sum(w O) / sum(w E), with O the
    joint distribution of their scores, E the product of its margins, and disagreement weights w_ij =
    (i - j)^2 ("quadratic", the usual choice for a Likert scale, equal to an ICC of consistency in large samples)
    or |i - j| ("linear") over the positions of ``values``. ``pairs``: shape (n, 2), each row the two raters'
    scores of a unit (scores among ``values``).

    Returns
    -------
    kappa : float or numpy.ndarray
        The kappa (NaN when the raters used one score between them), or shape (B,) with ``unit_weights``.

    Examples
    --------
    >>> import numpy as np
    >>> pairs = np.array([[1, 1], [2, 2], [3, 4], [4, 4], [5, 4], [2, 3]])
    >>> round(cohen_weighted_kappa(pairs, np.arange(1, 6)), 4)
    0.8421
    """
    if weights not in ("quadratic", "linear"):
        raise ValueError(f"weights must be 'quadratic' or 'linear', got {weights!r}")
    pairs = np.asarray(pairs, dtype=float)
    values = np.asarray(values, dtype=float)
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        raise ValueError(f"pairs must have shape (n, 2): the two raters' scores of each unit, got {pairs.shape}")
    k = values.size
    position = {float(v): i for i, v in enumerate(values)}
    try:
        codes = np.vectorize(lambda v: position[float(v)], otypes=[np.int64])(pairs) if pairs.size else pairs
    except KeyError as missing:
        raise ValueError(f"score {missing.args[0]} is not one of the scale's values {values.tolist()}") from None
    cell = (codes[:, 0] * k + codes[:, 1]).astype(np.int64)
    unit_weight, scalar = _as_weights(unit_weights, pairs.shape[0])
    flat = np.zeros((unit_weight.shape[0], k * k))
    for c in np.unique(cell):  # at most k^2 cells: one weighted sum per cell over all resamples at once
        flat[:, c] = unit_weight[:, cell == c].sum(axis=1)
    observed = flat.reshape(-1, k, k)
    total = observed.sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        joint = observed / total[:, None, None]
        expected = joint.sum(axis=2)[:, :, None] * joint.sum(axis=1)[:, None, :]
        distance = np.subtract.outer(np.arange(k), np.arange(k))
        w = distance**2 if weights == "quadratic" else np.abs(distance)
        kappa = 1.0 - (joint * w).sum(axis=(1, 2)) / (expected * w).sum(axis=(1, 2))
    kappa[~np.isfinite(kappa)] = np.nan
    return _finish(kappa, scalar)


# --- Intraclass correlations ----------------------------------------------------------------------------

ICC_FORMS = ("ICC(1,1)", "ICC(2,1)", "ICC(3,1)", "ICC(1,k)", "ICC(2,k)", "ICC(3,k)")


def icc_two_way(matrix: np.ndarray, *, unit_weights: np.ndarray | None = None) -> dict:
    """The six Shrout & Fleiss (1979) ICCs for a complete targets x judges matrix (every judge rates every
    target), from the two-way ANOVA mean squares BMS, JMS, EMS and the one-way WMS:

    ICC(1,1) = (BMS-WMS) / (BMS+(k-1)WMS)           ICC(1,k) = (BMS-WMS) / BMS
    ICC(2,1) = (BMS-EMS) / (BMS+(k-1)EMS+k(JMS-EMS)/n)   ICC(2,k) = (BMS-EMS) / (BMS+(JMS-EMS)/n)
    ICC(3,1) = (BMS-EMS) / (BMS+(k-1)EMS)           ICC(3,k) = (BMS-EMS) / BMS

    Returns
    -------
    icc : dict
        Form name (``ICC_FORMS``) -> the estimate (NaN when undefined), or an array of shape (B,) with
        ``unit_weights``.

    Examples
    --------
    Shrout & Fleiss (1979), Table 2; published .17, .29, .71, .44, .62, .91:

    >>> table_2 = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]
    >>> {form: round(value, 2) for form, value in icc_two_way(table_2).items()}
    {'ICC(1,1)': 0.17, 'ICC(2,1)': 0.29, 'ICC(3,1)': 0.71, 'ICC(1,k)': 0.44, 'ICC(2,k)': 0.62, 'ICC(3,k)': 0.91}
    """
    y = np.asarray(matrix, dtype=float)
    if np.isnan(y).any():
        raise ValueError("the two-way ICC needs a complete targets x judges matrix (no missing ratings)")
    n, k = y.shape
    if n < 2 or k < 2:
        raise ValueError("the ICC needs at least two targets and two judges")
    weights, scalar = _as_weights(unit_weights, n)
    y = y - y.mean()  # centring keeps the sums of squares free of cancellation
    draws = weights.sum(axis=1, dtype=float)
    row_means = y.mean(axis=1)
    # One pass over the resamples: columns row mean, its square, row sum of squares, then y itself.
    sums = weighted_sums(weights, np.column_stack([row_means, row_means**2, (y**2).sum(axis=1), y]))
    grand = sums[:, 0] / draws
    col_means = sums[:, 3:] / draws[:, None]
    ss_total = sums[:, 2] - draws * k * grand**2
    ss_rows = k * (sums[:, 1] - draws * grand**2)
    ss_cols = draws * ((col_means - grand[:, None]) ** 2).sum(axis=1)
    ss_error = ss_total - ss_rows - ss_cols
    bms = ss_rows / (draws - 1)
    jms = ss_cols / (k - 1)
    ems = ss_error / ((draws - 1) * (k - 1))
    wms = (ss_cols + ss_error) / (draws * (k - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        forms = {
            "ICC(1,1)": (bms - wms) / (bms + (k - 1) * wms),
            "ICC(2,1)": (bms - ems) / (bms + (k - 1) * ems + k * (jms - ems) / draws),
            "ICC(3,1)": (bms - ems) / (bms + (k - 1) * ems),
            "ICC(1,k)": (bms - wms) / bms,
            "ICC(2,k)": (bms - ems) / (bms + (jms - ems) / draws),
            "ICC(3,k)": (bms - ems) / bms,
        }
    return {name: _finish(_nan_if_undefined(value), scalar) for name, value in forms.items()}


def icc_one_way(matrix: np.ndarray, *, unit_weights: np.ndarray | None = None) -> dict:
    """ICC(1,1) and ICC(1,k) (Shrout & Fleiss 1979, case 1) when every target has k ratings from judges that
    differ between targets, as in crowd studies: from the one-way ANOVA mean squares BMS and WMS.

    Returns
    -------
    icc : dict
        "ICC(1,1)" and "ICC(1,k)" -> the estimate (NaN when undefined), or an array of shape (B,) with
        ``unit_weights``.

    Examples
    --------
    Shrout & Fleiss (1979), Table 2, read as if each target's judges were different people:

    >>> table_2 = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]
    >>> {form: round(value, 2) for form, value in icc_one_way(table_2).items()}
    {'ICC(1,1)': 0.17, 'ICC(1,k)': 0.44}
    """
    y = np.asarray(matrix, dtype=float)
    if np.isnan(y).any():
        raise ValueError("the one-way ICC needs the same number of ratings for every target")
    n, k = y.shape
    if n < 2 or k < 2:
        raise ValueError("the ICC needs at least two targets with two ratings each")
    weights, scalar = _as_weights(unit_weights, n)
    y = y - y.mean()
    draws = weights.sum(axis=1, dtype=float)
    row_means = y.mean(axis=1)
    sums = weighted_sums(weights, np.column_stack([row_means, row_means**2, (y**2).sum(axis=1)]))
    grand = sums[:, 0] / draws
    ss_total = sums[:, 2] - draws * k * grand**2
    ss_rows = k * (sums[:, 1] - draws * grand**2)
    bms = ss_rows / (draws - 1)
    wms = (ss_total - ss_rows) / (draws * (k - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        forms = {"ICC(1,1)": (bms - wms) / (bms + (k - 1) * wms), "ICC(1,k)": (bms - wms) / bms}
    return {name: _finish(_nan_if_undefined(value), scalar) for name, value in forms.items()}


def _nan_if_undefined(values: np.ndarray) -> np.ndarray:
    values = np.array(values, dtype=float)
    values[~np.isfinite(values)] = np.nan
    return values
