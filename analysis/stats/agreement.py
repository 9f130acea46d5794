"""Inter-rater agreement per criterion (and per system on request), each with an item-level bootstrap CI.

Units of agreement are the rated items (a context plus one response) on one criterion; control items are
left out unless asked for. Coefficients:

- Krippendorff's alpha, ordinal and interval (Krippendorff 2011): the main figure; handles any number of
  raters per item and missing ratings.
- Gwet's AC2 with ordinal weights (Gwet 2014): robust to the skewed marginals Likert data often have.
- Fleiss' kappa (Fleiss 1971), nominal, on items with the most common number of ratings: only for comparison
  with older papers, since it ignores the order of the scale.
- ICC (Shrout & Fleiss 1979), which needs a balanced design (every item with the same number k of ratings): on an
  unbalanced one, on its largest balanced subset (``balanced_subset``: the k that keeps the most ratings, items
  with fewer left out, items with more keeping k of theirs), said in the note; two-way forms only when every
  annotator rated every item of the subset. NaN and a note saying why when not even two items share two ratings.
- Percent exact and within-one agreement over rater pairs within an item.
- Cohen's weighted kappa, quadratic weights (Cohen 1968), only when exactly two raters rated every item (the
  two-rater designs older papers report it for); otherwise there is no such row.

The point estimates of alpha and kappa are those of the ``krippendorff`` package and statsmodels (tested
equal); the CIs are percentile intervals over B resamples of items, computed in one vectorised pass
(``empeval.analysis.stats.coefficients``). Undefined estimates are NaN with the reason in ``note``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from empeval.analysis.kinds.likert.load import DEFAULT_SCALE, require_columns
from empeval.analysis.stats import coefficients
from empeval.analysis.stats.bootstrap import (
    draws_forgotten_after,
    percentile_interval,
    pooled_weights,
    resample_weights,
)

ALL_SYSTEMS = "(all)"

AGREEMENT_COLUMNS = (
    "criterion",
    "system",
    "coefficient",
    "estimate",
    "ci_low",
    "ci_high",
    "n_items",
    "n_raters",
    "n_ratings",
    "n_boot_defined",
    "note",
)

COEFFICIENT_LABELS = {
    "alpha_ordinal": "Krippendorff's alpha (ordinal)",
    "alpha_interval": "Krippendorff's alpha (interval)",
    "ac2_ordinal": "Gwet's AC2 (ordinal weights)",
    "fleiss_kappa": "Fleiss' kappa (nominal)",
    "icc": "ICC",
    "percent_exact": "Exact agreement",
    "percent_within_one": "Within-one agreement",
    "kappa_quadratic": "Cohen's weighted kappa (quadratic; two raters)",
}
# Coefficients only some designs have a row for (the others are in every table, NaN with a note when undefined).
DESIGN_SPECIFIC = frozenset({"kappa_quadratic"})


def agreement_table(
    ratings: pd.DataFrame,
    *,
    criteria: list[str] | None = None,
    by_system: bool = False,
    scale: tuple[int, int] = DEFAULT_SCALE,
    include_controls: bool = False,
    n_boot: int = 1000,
    ci_level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """All agreement coefficients per criterion (and per system when ``by_system``), one row per coefficient.

    The coefficients and their sources are listed in the module docstring; every CI is a percentile bootstrap
    over items (``n_boot`` resamples, seeded), computed for all resamples at once.

    Returns
    -------
    agreement : pandas.DataFrame
        One row per criterion, system and coefficient, in the order of ``COEFFICIENT_LABELS``:

        * ``criterion``
        * ``system``: "(all)" (``ALL_SYSTEMS``) for the pooled rows, else the system
        * ``coefficient``: a key of ``COEFFICIENT_LABELS`` (alpha_ordinal, alpha_interval, ac2_ordinal,
          fleiss_kappa, icc, percent_exact, percent_within_one; kappa_quadratic only for two raters on every item)
        * ``estimate``: the coefficient, NaN when undefined
        * ``ci_low``, ``ci_high``: percentile bootstrap CI over items at ``ci_level``
        * ``n_items``: items the coefficient used (those with at least two ratings)
        * ``n_raters``, ``n_ratings``: annotators and ratings in the group
        * ``n_boot_defined``: resamples in which the coefficient was defined
        * ``note``: the variant used, or why the estimate is undefined

    Examples
    --------
    Krippendorff's (2011) example C, 4 observers x 12 units with missing values; published alpha: ordinal
    0.815, interval 0.849.

    >>> import numpy as np, pandas as pd
    >>> nan = np.nan
    >>> data = [[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
    ...         [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
    ...         [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
    ...         [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]]
    >>> ratings = pd.DataFrame([
    ...     {"item": f"unit-{unit:02d}", "system": "sys", "annotator": f"observer-{observer}",
    ...      "criterion": "empathy", "score": score, "is_control": False}
    ...     for observer, row in enumerate(data) for unit, score in enumerate(row) if not np.isnan(score)])
    >>> table = agreement_table(ratings, n_boot=500)
    >>> columns = ["coefficient", "estimate", "ci_low", "ci_high", "n_items", "n_ratings"]
    >>> print(table[columns].round(3).to_string(index=False))
           coefficient  estimate  ci_low  ci_high  n_items  n_ratings
         alpha_ordinal     0.815   0.421    0.990       11         41
        alpha_interval     0.849   0.389    0.986       11         41
           ac2_ordinal     0.899   0.763    0.989       11         41
          fleiss_kappa     0.641   0.197    0.910        8         41
                   icc     0.701   0.085    0.968        8         41
         percent_exact     0.818   0.618    0.958       11         41
    percent_within_one     0.955   0.864    1.000       11         41

    The ICC needs a balanced design: it is read on the 8 units all four observers rated.

    >>> print(table.loc[table["coefficient"] == "icc", "note"].item())  # doctest: +NORMALIZE_WHITESPACE
    ICC(2,1), crossed design, k = 4 ratings per item; unbalanced design (1 to 4 ratings per item): on its largest
    balanced subset, 8 of 12 items with 4 ratings each
    """
    require_columns(ratings, ("item", "system", "annotator", "criterion", "score", "is_control"), what="agreement")
    # Only the columns the coefficients read are copied (the report's table has a dozen more, strings at 1M rows).
    columns = ["item", "system", "annotator", "criterion", "score"]
    subset = ratings[columns] if include_controls else ratings.loc[~ratings["is_control"].astype(bool), columns]
    criteria = list(criteria) if criteria is not None else sorted(subset["criterion"].unique())
    rows: list[dict] = []
    with draws_forgotten_after():  # the criteria share numbers of items, not with the next analysis
        for criterion in criteria:
            on_criterion = subset.loc[subset["criterion"] == criterion]
            groups = [(ALL_SYSTEMS, on_criterion)]
            if by_system:
                groups += [(system, part) for system, part in on_criterion.groupby("system", sort=True)]
            for system, part in groups:
                for row in _coefficients_for(part, scale=scale, n_boot=n_boot, ci_level=ci_level, seed=seed):
                    rows.append({"criterion": criterion, "system": system, **row})
    return pd.DataFrame(rows, columns=list(AGREEMENT_COLUMNS))


def icc_table(
    ratings: pd.DataFrame,
    *,
    criterion: str,
    include_controls: bool = False,
    n_boot: int = 1000,
    ci_level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """All six Shrout & Fleiss ICC forms for one criterion, valid ones estimated, the others NaN with a note.

    A crossed design (every annotator rated every item) supports all six forms; a balanced one-way design
    (the same number k of ratings per item, annotators differing) supports ICC(1,1) and ICC(1,k) only; an
    unbalanced design is read on its largest balanced subset (``balanced_subset``, named in the note). Formulas:
    ``empeval.analysis.stats.coefficients.icc_two_way`` / ``icc_one_way``.

    Returns
    -------
    icc : pandas.DataFrame
        One row per form, ICC(1,1), ICC(2,1), ICC(3,1), ICC(1,k), ICC(2,k), ICC(3,k):

        * ``criterion``, ``form``
        * ``estimate``: the ICC, NaN when the design does not support the form
        * ``ci_low``, ``ci_high``: percentile bootstrap CI over items at ``ci_level``
        * ``n_items``: items in the design (0 when none applies)
        * ``n_boot_defined``: resamples in which the form was defined
        * ``note``: the design and k, or why the form does not apply

    Examples
    --------
    Shrout & Fleiss (1979), Table 2: 6 targets x 4 judges; published ICC(1,1) .17, ICC(2,1) .29,
    ICC(3,1) .71, ICC(1,4) .44, ICC(2,4) .62, ICC(3,4) .91.

    >>> import pandas as pd
    >>> table_2 = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]
    >>> ratings = pd.DataFrame([
    ...     {"item": f"target-{target}", "annotator": f"judge-{judge}", "criterion": "empathy", "score": score,
    ...      "is_control": False}
    ...     for target, row in enumerate(table_2) for judge, score in enumerate(row)])
    >>> icc = icc_table(ratings, criterion="empathy", n_boot=500)
    >>> print(icc[["form", "estimate", "ci_low", "ci_high", "note"]].round(2).to_string(index=False))
        form  estimate  ci_low  ci_high                  note
    ICC(1,1)      0.17   -0.21     0.38 crossed design, k = 4
    ICC(2,1)      0.29    0.04     0.45 crossed design, k = 4
    ICC(3,1)      0.71    0.31     0.88 crossed design, k = 4
    ICC(1,k)      0.44   -2.39     0.71 crossed design, k = 4
    ICC(2,k)      0.62    0.14     0.76 crossed design, k = 4
    ICC(3,k)      0.91    0.65     0.97 crossed design, k = 4
    """
    require_columns(ratings, ("item", "annotator", "criterion", "score", "is_control"), what="icc_table")
    subset = ratings if include_controls else ratings.loc[~ratings["is_control"].astype(bool)]
    part = subset.loc[subset["criterion"] == criterion]
    design, matrix, reason = _icc_design(part)
    estimates = {} if design is None else _icc_with_ci(design, matrix, n_boot=n_boot, ci_level=ci_level, seed=seed)
    rows = []
    for form in coefficients.ICC_FORMS:
        if form in estimates:
            estimate, low, high, defined = estimates[form]
            note = f"{design} design, k = {matrix.shape[1]}" + (f"; {reason}" if reason else "")
            if not np.isfinite(estimate):
                note = "undefined: no variation between or within items"
        else:
            estimate = low = high = np.nan
            defined = 0
            note = reason if design is None else "annotators differ between items: only the one-way forms apply"
        rows.append(
            {"criterion": criterion, "form": form, "estimate": estimate, "ci_low": low, "ci_high": high,
             "n_items": int(matrix.shape[0]), "n_boot_defined": defined, "note": note}
        )
    return pd.DataFrame(rows)


def reliability_counts(
    ratings: pd.DataFrame, *, scale: tuple[int, int] = DEFAULT_SCALE
) -> tuple[np.ndarray, np.ndarray]:
    """Per-item counts of each scale value, the input of every coefficient in ``empeval.analysis.stats.coefficients``.

    Returns
    -------
    counts : numpy.ndarray
        Shape (items, values): how many ratings of each item (in sorted item order) took each value.
    values : numpy.ndarray
        The value domain, ``lo`` to ``hi`` of ``scale``.

    Examples
    --------
    >>> import pandas as pd
    >>> counts, values = reliability_counts(pd.DataFrame({"item": ["a", "a", "b", "b", "b"],
    ...                                                   "score": [4, 5, 2, 2, 3]}))
    >>> counts
    array([[0., 0., 0., 1., 1.],
           [0., 2., 1., 0., 0.]])
    >>> values
    array([1, 2, 3, 4, 5])
    """
    lo, hi = scale
    values = np.arange(lo, hi + 1)
    scores = ratings["score"].to_numpy(dtype=float)
    if np.any(scores % 1 != 0) or np.any((scores < lo) | (scores > hi)):
        raise ValueError(f"agreement needs whole-number scores on the {lo}-{hi} scale")
    codes, _ = pd.factorize(ratings["item"], sort=True)
    counts = np.zeros((codes.max() + 1 if codes.size else 0, values.size))
    np.add.at(counts, (codes, (scores - lo).astype(int)), 1.0)
    return counts, values


def _coefficients_for(part: pd.DataFrame, *, scale, n_boot: int, ci_level: float, seed: int) -> list[dict]:
    n_raters = int(part["annotator"].nunique())
    base = {"n_raters": n_raters, "n_ratings": int(len(part))}
    if part.empty:
        return [_undefined(key, "no ratings", n_items=0, **base) for key in COEFFICIENT_LABELS
                if key not in DESIGN_SPECIFIC]
    counts, values = reliability_counts(part, scale=scale)
    per_item = counts.sum(axis=1)
    pairable = per_item >= 2
    n_pairable = int(pairable.sum())
    if n_pairable == 0:
        reason = "no item has two or more ratings: nothing to pair"
        return [_undefined(key, reason, n_items=0, **base) for key in COEFFICIENT_LABELS
                if key not in DESIGN_SPECIFIC]
    # Every coefficient is a weighted sum of per-item terms that depend only on the item's counts of each score,
    # so the resamples are summed over the items' distinct count patterns once (a few dozen with k ratings
    # per item) and the coefficients bootstrapped over those: the same sums, in another order.
    patterns, weights = _by_pattern(counts, resample_weights(counts.shape[0], n_boot=n_boot, seed=seed))
    observed_values = np.flatnonzero(counts[pairable].sum(axis=0))
    constant = observed_values.size == 1
    rows = []

    def add(key: str, estimate: float, boot: np.ndarray | None, note: str = "", n_items: int = n_pairable):
        low, high, defined = percentile_interval(boot, level=ci_level) if boot is not None else (np.nan, np.nan, 0)
        rows.append({"coefficient": key, "estimate": estimate, "ci_low": low, "ci_high": high,
                     "n_items": n_items, "n_boot_defined": defined, "note": note, **base})

    no_variation = f"undefined: no variation (every paired rating is {int(values[observed_values[0]])})"
    levels = ("ordinal", "interval")
    if not constant:
        estimates = coefficients.krippendorff_alphas(counts, values, levels=levels)
        boots = coefficients.krippendorff_alphas(patterns, values, levels=levels, unit_weights=weights)
    for level in levels:
        key = f"alpha_{level}"
        if constant:
            rows.append(_undefined(key, no_variation, n_items=n_pairable, **base))
            continue
        add(key, estimates[level], boots[level])

    if constant:
        # Gwet's AC2 is formally 1 here, but identical ratings cannot tell agreement from a constant rater.
        rows.append(_undefined("ac2_ordinal", no_variation, n_items=n_pairable, **base))
    else:
        estimate = coefficients.gwet_ac2(counts, values, weights="ordinal")
        add("ac2_ordinal", estimate, coefficients.gwet_ac2(patterns, values, weights="ordinal", unit_weights=weights))

    rows.append(_fleiss_row(counts, per_item, constant, no_variation, base, n_boot, ci_level, seed))
    rows.append(_icc_row(part, base, n_boot, ci_level, seed))
    design, matrix, _ = _icc_design(part)
    if design == "crossed" and matrix.shape[1] == 2:
        # Two raters, every item rated by both: Cohen's weighted kappa on the pairs, bootstrapped over items.
        estimate = coefficients.cohen_weighted_kappa(matrix, values)
        boot = coefficients.cohen_weighted_kappa(
            matrix, values, unit_weights=resample_weights(matrix.shape[0], n_boot=n_boot, seed=seed))
        add("kappa_quadratic", estimate, boot, note="quadratic weights; two raters on every item",
            n_items=int(matrix.shape[0]))

    for key, tolerance in (("percent_exact", 0.0), ("percent_within_one", 1.0)):
        estimate = coefficients.percent_agreement(counts, values, tolerance=tolerance)
        boot = coefficients.percent_agreement(patterns, values, tolerance=tolerance, unit_weights=weights)
        add(key, estimate, boot, note="share of rater pairs within an item; items weighted equally")
    order = list(COEFFICIENT_LABELS)
    return sorted(rows, key=lambda row: order.index(row["coefficient"]))


def _fleiss_row(counts, per_item, constant, no_variation, base, n_boot, ci_level, seed) -> dict:
    pairable_counts = per_item[per_item >= 2].astype(int)
    m = int(np.bincount(pairable_counts).argmax())
    complete = per_item == m
    table = counts[complete]
    dropped = int((per_item >= 2).sum() - complete.sum())
    note = f"nominal; items with m = {m} ratings"
    if dropped:
        note += f" ({dropped} items with another count left out)"
    if constant:
        return _undefined("fleiss_kappa", no_variation, n_items=int(complete.sum()), **base)
    if table.shape[0] < 2:
        return _undefined("fleiss_kappa", "fewer than two items with the same number of ratings",
                          n_items=int(complete.sum()), **base)
    estimate = coefficients.fleiss_kappa(table)
    patterns, weights = _by_pattern(table, resample_weights(table.shape[0], n_boot=n_boot, seed=seed))
    boot = coefficients.fleiss_kappa(patterns, unit_weights=weights)
    low, high, defined = percentile_interval(boot, level=ci_level)
    if not np.isfinite(estimate):
        note = "undefined: all ratings fall in one category"
    return {"coefficient": "fleiss_kappa", "estimate": estimate, "ci_low": low, "ci_high": high,
            "n_items": int(table.shape[0]), "n_boot_defined": defined, "note": note, **base}


def _icc_row(part: pd.DataFrame, base: dict, n_boot: int, ci_level: float, seed: int) -> dict:
    design, matrix, reason = _icc_design(part)
    if design is None:
        return _undefined("icc", reason, n_items=0, **base)
    estimates = _icc_with_ci(design, matrix, n_boot=n_boot, ci_level=ci_level, seed=seed)
    # ICC(2,1) (absolute agreement, raters random) when raters are crossed with items, else ICC(1,1).
    form = "ICC(2,1)" if design == "crossed" else "ICC(1,1)"
    estimate, low, high, defined = estimates[form]
    note = f"{form}, {design} design, k = {matrix.shape[1]} ratings per item" + (f"; {reason}" if reason else "")
    if not np.isfinite(estimate):
        note = f"{form} undefined: no variation between or within items"
    return {"coefficient": "icc", "estimate": estimate, "ci_low": low, "ci_high": high,
            "n_items": int(matrix.shape[0]), "n_boot_defined": defined, "note": note, **base}


def balanced_subset(part: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The largest balanced subset of one criterion's ratings ``part`` (item, annotator, score), for the ICC: the k
    of at least 2 that keeps the most ratings (k x the items with k or more; a tie goes to the larger k), the items
    with fewer than k ratings left out, each item with more keeping the k of its annotators that sort first
    (pseudonyms, so an arbitrary k: the one-way model treats an item's raters as exchangeable).

    Returns
    -------
    subset : pandas.DataFrame
        The rows of ``part`` kept: ``part`` itself when it is balanced already, empty when no k leaves two items.
    note : str
        What was done, in words, for the agreement table's note ("" when ``part`` is balanced).

    Examples
    --------
    >>> part = pd.DataFrame({"item": list("aaabbbccd"), "annotator": list("xyzxyzxyx"), "score": range(9)})
    >>> subset, note = balanced_subset(part)
    >>> subset.groupby("item").size().to_dict()
    {'a': 3, 'b': 3}
    >>> print(note)
    unbalanced design (1 to 3 ratings per item): on its largest balanced subset, 2 of 4 items with 3 ratings each
    """
    per_item = part.groupby("item")["score"].size()
    if per_item.nunique() == 1:
        return part, ""
    best: tuple[int, int] = (0, 0)  # (ratings kept, k)
    for k in range(2, int(per_item.max()) + 1):
        n_items = int((per_item >= k).sum())
        if n_items >= 2:
            best = max(best, (n_items * k, k))
    words = f"unbalanced design ({per_item.min()} to {per_item.max()} ratings per item)"
    if best == (0, 0):
        return part.iloc[0:0], words
    k = best[1]
    kept = part.loc[part["item"].isin(per_item.index[per_item >= k])].sort_values(["item", "annotator"], kind="stable")
    subset = kept.groupby("item", sort=False).head(k)
    note = (f"{words}: on its largest balanced subset, {subset['item'].nunique()} of {per_item.size} items with {k} "
            "ratings each")
    trimmed = int((per_item > k).sum())
    if trimmed:
        note += f" ({trimmed} items with more keep the {k} annotators whose pseudonyms sort first)"
    return subset, note


def _icc_design(part: pd.DataFrame) -> tuple[str | None, np.ndarray, str]:
    """Classify the design of ``part``, or of its largest balanced subset (balanced_subset) when it is unbalanced:
    'crossed' (complete items x annotators), 'one-way' (same k per item), with the matrix and what the subset is
    ("" for a balanced design); or None with the reason and an empty (0 x 0) matrix."""
    none = np.empty((0, 0))
    if part.empty:
        return None, none, "no ratings"
    part, subset = balanced_subset(part)
    if part.empty:
        return None, none, f"{subset}: no two items share two or more ratings, and the ICC needs them"
    per_item = part.groupby("item")["score"].size()
    k = int(per_item.iloc[0])
    if k < 2 or per_item.size < 2:
        return None, none, "the ICC needs at least two items with at least two ratings each"
    # Crossed: every item rated by the same k annotators, i.e. k annotators in all, none twice on an item.
    # (Checked before pivoting: items x annotators of a large one-way design would not fit in memory.)
    if part["annotator"].nunique() == k and not part.duplicated(["item", "annotator"]).any():
        return "crossed", part.pivot(index="item", columns="annotator", values="score").to_numpy(dtype=float), subset
    ordered = part.sort_values(["item", "annotator"])
    return "one-way", ordered["score"].to_numpy(dtype=float).reshape(-1, k), subset


def _icc_with_ci(design: str, matrix: np.ndarray, *, n_boot: int, ci_level: float, seed: int) -> dict:
    compute = coefficients.icc_two_way if design == "crossed" else coefficients.icc_one_way
    point = compute(matrix)
    boot = compute(matrix, unit_weights=resample_weights(matrix.shape[0], n_boot=n_boot, seed=seed))
    return {form: (point[form], *percentile_interval(boot[form], level=ci_level)) for form in point}


def _by_pattern(counts: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``counts`` and the resample weights summed over the units with each of them."""
    patterns, pattern_of_unit = np.unique(counts, axis=0, return_inverse=True)
    return patterns, pooled_weights(weights, pattern_of_unit)


def _undefined(key: str, reason: str, *, n_items: int, n_raters: int, n_ratings: int) -> dict:
    return {"coefficient": key, "estimate": np.nan, "ci_low": np.nan, "ci_high": np.nan, "n_items": n_items,
            "n_raters": n_raters, "n_ratings": n_ratings, "n_boot_defined": 0, "note": reason}
