"""A learned judge trained on the study's own human ratings, with cross-fitting, and cross-prediction-powered
inference for the means (Zrnic and Candès, "Cross-prediction-powered inference", PNAS 2024).

A judge trained on the human ratings and then used on the same items would score them with a model that has
seen their labels, and PPI's correction (label - judge on the rated items) would be too small: intervals too
narrow. Cross-fitting avoids it: the human-rated *contexts* are split into K folds (all items of a context in
one fold, so that a system's response is never scored by a model that saw another system's rating of the same
context either); the model of fold k is trained on the other folds and scores fold k's items; every unrated
item is scored by all K models. Cross-PPI then estimates the mean as

    theta = mean_j mean_k f_k(X~_j) + mean_i (Y_i - f_{k(i)}(X_i)),

with a CLT interval (``ppi_py.crossppi_mean_ci``), for system means and for paired system differences.

Power tuning. Zrnic and Candès's estimator gives the judge full weight, so a weak learned judge (few human labels
to learn from, or a difference between systems its embeddings barely see) makes the interval *wider* than the
human-only one: in a walkthrough the learned judge's intervals had an effective n of 18-21 against 24 human-rated
contexts. As PPI++ does for a fixed judge (Angelopoulos, Duchi and Zrnic 2023), the judge's weight lambda is tuned:

    theta_lambda = lambda mean_j fbar(X~_j) + mean_i (Y_i - lambda f_{k(i)}(X_i)),
    Var = lambda^2 Var(fbar) / N + Var(Y - lambda f) / n,   lambda* = Cov(Y, f) / (Var(f) + Var(fbar) n / N),

clipped to [0, 1] (fbar: the mean of the K models' scores of an unrated item). lambda = 0 is the human-only
mean, so the tuned interval is no wider than the human-only one up to the estimation of lambda; lambda = 1 is
ppi_py's interval exactly (``power_tuning=False``).

Shared raters. Like ppi_py's PPI intervals, ppi_py's cross-PPI intervals treat the human-rated contexts as
independent, and the items of one assignment share its rater. Given the ``human_ratings`` the labels came
from, the same two-way cluster-robust term as ``empeval.analysis.stats.ppi.estimates`` adds to the PPI++ variance
(Cameron, Gelbach and Miller 2011; ``shared_rater_variance``, clustered by ``cluster_by``, default
``assignment_id``) is added to the cross-PPI and human-only variances: it is the covariance shared batches add
to the mean of the labels, and the rectifier mean_i (Y_i - f(X_i)) carries it unchanged (the judge's scores are
per item). Without ``human_ratings`` (or with ``cluster_by=None``) the intervals are ppi_py's exactly.

The default model is ridge regression (scikit-learn's ``Ridge``), for embeddings such as MiniLM's of
(context, response); any object with ``fit(X, y)`` and ``predict(X)`` built by ``make_model`` will do.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from empeval.analysis.stats.ppi.estimates import (
    clustered_ratings,
    generalises_over_raters,
    interval_reference,
    ppi_py,
    rater_degrees_of_freedom,
    rater_variance_of_difference,
    rater_variance_of_mean,
)
from empeval.analysis.stats.ppi.tables import ITEM_KEYS, check_rated_share, item_labels
from empeval.analysis.stats.significance import adjust_by_family

CROSS_FIT_COLUMNS = ("criterion", "system", "context_id", "label", "fold", "judge_score")
CROSS_MEAN_COLUMNS = (
    "criterion", "system", "n_human", "n_judge_only", "human_mean", "human_ci_low", "human_ci_high",
    "judge_mean_biased", "crossppi_mean", "crossppi_ci_low", "crossppi_ci_high", "lam", "width_ratio",
    "effective_n_human", "rater_variance", "n_folds",
)


def _ridge() -> Any:
    from sklearn.linear_model import Ridge  # imported on use: scikit-learn is slow to import

    return Ridge(alpha=1.0)


def cross_fit_judge(
    items: pd.DataFrame,
    features: np.ndarray,
    human_ratings: pd.DataFrame,
    *,
    n_folds: int = 5,
    make_model: Callable[[], Any] | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """Fit a judge on the human labels with ``n_folds`` folds over the human-rated contexts, one model per
    criterion and fold (systems pooled); score every rated item with the model of the folds it was not in,
    every unrated item with each fold's model.

    ``items`` has one row per item (``context_id``, ``system``), aligned with the rows of ``features`` (e.g.
    embeddings of context and response). The labels are the item means of ``human_ratings``.

    Returns
    -------
    scores : pandas.DataFrame
        One row per criterion and item: ``criterion``, ``system``, ``context_id``, ``label`` (NaN if unrated),
        ``fold`` (the fold of a rated item's context; -1 for unrated items), ``judge_score`` (the out-of-fold
        score of a rated item; the mean of the fold models' scores of an unrated one), and
        ``fold_score_0`` ... ``fold_score_{K-1}``: each fold model's score of an unrated item (NaN for rated
        items). The input of ``crossppi_system_means`` and ``crossppi_paired_differences``; usable as a
        ``judge_scores`` table for ``empeval.analysis.stats.ppi.agreement``, but not for the PPI++ estimates, whose
        theory assumes a judge fixed before the human labels were seen.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> items = pd.DataFrame({"context_id": [f"c{i:02d}" for i in range(40)], "system": "gold"})
    >>> features = rng.normal(size=(40, 3))
    >>> quality = 3 + features @ [0.5, -0.3, 0.2]
    >>> ratings = pd.DataFrame({"context_id": items["context_id"][:20], "system": "gold", "criterion": "empathy",
    ...                         "annotator": "ann", "score": np.round(quality[:20] + rng.normal(0, 0.3, 20))})
    >>> scores = cross_fit_judge(items, features, ratings, n_folds=4)
    >>> scores.groupby("fold").size().to_dict()
    {-1: 20, 0: 5, 1: 5, 2: 5, 3: 5}
    >>> round(float(np.corrcoef(scores["judge_score"], quality)[0, 1]), 2)
    0.97
    """
    if not isinstance(n_folds, int) or n_folds < 2:
        raise ValueError(f"n_folds must be a whole number of at least 2, got {n_folds!r}")
    table = items.rename(columns={"context": "context_id"}) if "context_id" not in items.columns else items
    missing = [column for column in ("context_id", "system") if column not in table.columns]
    if missing:
        raise ValueError(f"items needs column(s) {', '.join(map(repr, missing))}")
    features = np.asarray(features, dtype=float)
    if features.ndim != 2 or features.shape[0] != len(table):
        raise ValueError(f"features must have one row per item: got shape {features.shape} for {len(table)} items")
    if table.duplicated(["context_id", "system"]).any():
        raise ValueError("items has more than one row for a (context_id, system); keep one per item")
    make_model = make_model or _ridge
    labels = item_labels(human_ratings)
    rng = np.random.default_rng(seed)
    base = table[["context_id", "system"]].reset_index(drop=True)
    parts = []
    for criterion, criterion_labels in labels.groupby("criterion", sort=True):
        part = base.merge(criterion_labels[["system", "context_id", "label"]], on=["system", "context_id"],
                          how="left")
        unknown = criterion_labels.merge(base, on=["system", "context_id"], how="left", indicator=True)
        if (unknown["_merge"] == "left_only").any():
            first = unknown.loc[unknown["_merge"] == "left_only"].iloc[0]
            raise ValueError(f"human_ratings rate an item that items lacks (system {first['system']!r}, "
                             f"context {first['context_id']!r}); every rated item needs features")
        rated = part["label"].notna().to_numpy()
        contexts = np.array(sorted(part.loc[rated, "context_id"].unique()))
        if contexts.size < n_folds:
            raise ValueError(f"criterion {criterion!r}: {contexts.size} human-rated contexts cannot be split into "
                             f"n_folds={n_folds} folds; lower n_folds or rate more contexts")
        fold_of = dict(zip(rng.permutation(contexts), np.arange(contexts.size) % n_folds, strict=True))
        fold = np.where(rated, part["context_id"].map(fold_of).fillna(-1).to_numpy(), -1).astype(int)
        out_of_fold = np.full(len(part), np.nan)
        per_fold = np.full((len(part), n_folds), np.nan)
        for k in range(n_folds):
            train = rated & (fold != k)
            model = make_model()
            model.fit(features[train], part["label"].to_numpy()[train])
            scored = fold == k
            out_of_fold[scored] = np.asarray(model.predict(features[scored]), dtype=float)
            per_fold[~rated, k] = np.asarray(model.predict(features[~rated]), dtype=float)
        part = part.assign(criterion=criterion, fold=fold,
                           judge_score=np.where(rated, out_of_fold, per_fold.mean(axis=1)))
        for k in range(n_folds):
            part[f"fold_score_{k}"] = per_fold[:, k]
        parts.append(part)
    if not parts:
        raise ValueError("human_ratings holds no ratings to train a judge on")
    scores = pd.concat(parts, ignore_index=True)
    fold_columns = [column for column in scores.columns if column.startswith("fold_score_")]
    return scores[list(CROSS_FIT_COLUMNS) + fold_columns].sort_values(ITEM_KEYS).reset_index(drop=True)


def cross_fit_difference_judge(
    pairs: pd.DataFrame,
    features: np.ndarray,
    human_ratings: pd.DataFrame,
    *,
    n_folds: int = 5,
    make_model: Callable[[], Any] | None = None,
    seed: int = 0,
    pair_labels: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Fit a judge of differences on the human label differences with ``n_folds`` folds over the contexts people
    rated for both systems of a pair, one model per criterion and fold (pairs pooled): every such pair is scored by
    the model of the folds its context was not in, every other pair by each fold's model.

    ``pair_labels`` (``criterion``, ``context_id``, ``system_a``, ``system_b``, ``label_diff``) gives each pair's
    label directly instead (an A/B study's net preference for A, from people's choices); ``human_ratings`` is then
    not read. A row may name its pair in either order (its label is negated when turned round).

    ``pairs`` has one row per pair of responses to one context (``context_id``, ``system_a``, ``system_b``),
    aligned with the rows of ``features`` (e.g. the difference of the two responses' embeddings). The label of a
    pair is Y_a - Y_b, the difference of the two items' labels (means of their ratings). The model is fitted on
    every labelled pair in both orientations, (x, d) and (-x, -d), without an intercept, so that it is
    antisymmetric: swapping A and B negates its score, as a judge of differences must.

    Returns
    -------
    scores : pandas.DataFrame
        One row per criterion and pair: ``criterion``, ``context_id``, ``system_a``, ``system_b``, ``label_diff``
        (NaN unless people rated the context for both), ``fold`` (-1 for an unlabelled pair), ``judge_diff`` (the
        out-of-fold score of a labelled pair; the mean of the fold models' scores of another), and
        ``fold_score_0`` ... ``fold_score_{K-1}`` (each fold model's score of an unlabelled pair).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> pairs = pd.DataFrame({"context_id": [f"c{i:02d}" for i in range(60)], "system_a": "a", "system_b": "b"})
    >>> features = rng.normal(size=(60, 3))
    >>> gap = features @ [0.8, -0.4, 0.0]
    >>> ratings = pd.DataFrame({"context_id": np.repeat(pairs["context_id"][:30], 2), "system": ["a", "b"] * 30,
    ...                         "criterion": "empathy", "annotator": "ann",
    ...                         "score": np.column_stack([3 + gap[:30] / 2, 3 - gap[:30] / 2]).ravel()})
    >>> scores = cross_fit_difference_judge(pairs, features, ratings, n_folds=3)
    >>> scores.groupby("fold").size().to_dict()
    {-1: 30, 0: 10, 1: 10, 2: 10}
    >>> round(float(np.corrcoef(scores["judge_diff"], gap)[0, 1]), 2)
    1.0
    """
    if not isinstance(n_folds, int) or n_folds < 2:
        raise ValueError(f"n_folds must be a whole number of at least 2, got {n_folds!r}")
    missing = [column for column in ("context_id", "system_a", "system_b") if column not in pairs.columns]
    if missing:
        raise ValueError(f"pairs needs column(s) {', '.join(map(repr, missing))}")
    features = np.asarray(features, dtype=float)
    if features.ndim != 2 or features.shape[0] != len(pairs):
        raise ValueError(f"features must have one row per pair: got shape {features.shape} for {len(pairs)} pairs")
    make_model = make_model or _ridge_without_intercept
    base = pairs[["context_id", "system_a", "system_b"]].reset_index(drop=True)
    rng = np.random.default_rng(seed)
    parts = []
    for criterion, part in _labelled_pairs(base, human_ratings, pair_labels):
        label = part["label"].to_numpy(dtype=float)
        rated = ~np.isnan(label)
        contexts = np.array(sorted(part.loc[rated, "context_id"].unique()))
        if contexts.size < n_folds:
            raise ValueError(f"criterion {criterion!r}: {contexts.size} contexts rated for both systems of a pair "
                             f"cannot be split into n_folds={n_folds} folds; lower n_folds or rate more contexts")
        fold_of = dict(zip(rng.permutation(contexts), np.arange(contexts.size) % n_folds, strict=True))
        fold = np.where(rated, part["context_id"].map(fold_of).fillna(-1).to_numpy(), -1).astype(int)
        out_of_fold = np.full(len(part), np.nan)
        per_fold = np.full((len(part), n_folds), np.nan)
        for k in range(n_folds):
            train = rated & (fold != k)
            model = make_model()
            model.fit(np.vstack([features[train], -features[train]]), np.concatenate([label[train], -label[train]]))
            scored = fold == k
            out_of_fold[scored] = np.asarray(model.predict(features[scored]), dtype=float)
            per_fold[~rated, k] = np.asarray(model.predict(features[~rated]), dtype=float)
        part = part[["context_id", "system_a", "system_b"]].assign(
            criterion=criterion, label_diff=label, fold=fold,
            judge_diff=np.where(rated, out_of_fold, per_fold.mean(axis=1)))
        for k in range(n_folds):
            part[f"fold_score_{k}"] = per_fold[:, k]
        parts.append(part)
    if not parts:
        raise ValueError("human_ratings holds no ratings to train a judge of differences on")
    scores = pd.concat(parts, ignore_index=True)
    columns = ["criterion", "context_id", "system_a", "system_b", "label_diff", "fold", "judge_diff",
               *(c for c in scores.columns if c.startswith("fold_score_"))]
    return scores[columns].sort_values(["criterion", "context_id", "system_a", "system_b"]).reset_index(drop=True)


def _labelled_pairs(base: pd.DataFrame, human_ratings: pd.DataFrame, pair_labels: pd.DataFrame | None):
    """Per criterion, the pairs of `base` with their ``label`` (A's minus B's: the items' labels' difference, or the
    pair's own label from `pair_labels`, negated for a row naming the pair the other way round; NaN unlabelled)."""
    if pair_labels is None:
        labels = item_labels(human_ratings)
        for criterion, criterion_labels in labels.groupby("criterion", sort=True):
            side = criterion_labels[["system", "context_id", "label"]]
            part = (base.merge(side.rename(columns={"system": "system_a", "label": "label_a"}),
                               on=["system_a", "context_id"], how="left")
                    .merge(side.rename(columns={"system": "system_b", "label": "label_b"}),
                           on=["system_b", "context_id"], how="left"))
            yield criterion, part.assign(label=part["label_a"] - part["label_b"])
        return
    keys = ["context_id", "system_a", "system_b"]
    turned = pair_labels.rename(columns={"system_a": "system_b", "system_b": "system_a"}).assign(
        label_diff=lambda frame: -frame["label_diff"])
    both = pd.concat([pair_labels, turned], ignore_index=True).drop_duplicates(["criterion", *keys])
    for criterion, labelled in both.groupby("criterion", sort=True):
        part = base.merge(labelled[[*keys, "label_diff"]], on=keys, how="left")
        yield criterion, part.rename(columns={"label_diff": "label"})


def _ridge_without_intercept() -> Any:
    from sklearn.linear_model import Ridge

    return Ridge(alpha=1.0, fit_intercept=False)


def crossppi_system_means(
    cross_fit_scores: pd.DataFrame,
    *,
    human_ratings: pd.DataFrame | None = None,
    cluster_by: str | None = "assignment_id",
    ci_level: float = 0.95,
    power_tuning: bool = True,
    generalize: str = "items",
) -> pd.DataFrame:
    """Mean label per criterion and system by cross-prediction-powered inference (Zrnic and Candès 2024;
    ``ppi_py.crossppi_mean_ci``), power-tuned unless ``power_tuning`` is False (module docstring), from the output
    of ``cross_fit_judge``, beside the human-only mean and CLT interval on the same labels. With ``human_ratings``
    (the ratings the labels are the item means of), both intervals get the shared-rater term of
    ``empeval.analysis.stats.ppi.estimates`` over ``cluster_by`` (module docstring). ``generalize`` "raters" or
    "both" (with ``human_ratings``): intervals for new raters, as ``ppi_system_means`` makes them (clustered by
    ``annotator`` with the raters' small-sample correction, t on the raters less one).

    Returns
    -------
    means : pandas.DataFrame
        One row per criterion and system: ``criterion``, ``system``, ``n_human``, ``n_judge_only``,
        ``human_mean``, ``human_ci_low``, ``human_ci_high``, ``judge_mean_biased`` (the learned judge's mean over
        every item, uncorrected), ``crossppi_mean``, ``crossppi_ci_low``, ``crossppi_ci_high``, ``lam`` (the
        judge's weight: 1 without power tuning), ``width_ratio``
        (cross-PPI width / human-only width), ``effective_n_human`` (n_human / width_ratio^2),
        ``rater_variance`` (the shared-rater term added; 0 without ``human_ratings``), ``n_folds``.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> items = pd.DataFrame({"context_id": [f"c{i:03d}" for i in range(300)], "system": "gold"})
    >>> features = rng.normal(size=(300, 3))
    >>> quality = 3 + features @ [0.5, -0.3, 0.2]
    >>> ratings = pd.DataFrame({"context_id": items["context_id"][:60], "system": "gold", "criterion": "empathy",
    ...                         "annotator": "ann", "score": np.round(quality[:60] + rng.normal(0, 0.3, 60))})
    >>> means = crossppi_system_means(cross_fit_judge(items, features, ratings))
    >>> columns = ["system", "n_human", "human_mean", "crossppi_mean", "width_ratio"]
    >>> print(means[columns].round(2).to_string(index=False))
    system  n_human  human_mean  crossppi_mean  width_ratio
      gold       60        2.85           2.86          0.7
    """
    fold_columns = _fold_columns(cross_fit_scores, ci_level)
    over_raters = _over_raters(generalize, human_ratings)
    clustered = _clustered(cross_fit_scores, human_ratings, "annotator" if over_raters else cluster_by)
    rows = []
    for (criterion, system), part in cross_fit_scores.groupby(["criterion", "system"], sort=True):
        check_rated_share(part, where=f"system {system!r}, criterion {criterion!r}")
        rated = part["label"].notna().to_numpy()
        extra = rater_variance_of_mean(clustered, criterion, system, label_mean=part["label"].mean(),
                                       n_items=int(rated.sum()), small_sample=over_raters)
        df = rater_degrees_of_freedom(clustered, criterion, [system]) if over_raters else None
        result = _crossppi(part["label"].to_numpy()[rated], part["judge_score"].to_numpy()[rated],
                           part.loc[~rated, fold_columns].to_numpy(dtype=float), ci_level, rater_variance=extra,
                           tuned=power_tuning, df=df)
        result.pop("p")
        rows.append({"criterion": criterion, "system": system, **result,
                     "judge_mean_biased": float(part["judge_score"].mean()), "n_folds": len(fold_columns)})
    return pd.DataFrame(rows, columns=list(CROSS_MEAN_COLUMNS))


def crossppi_paired_differences(
    cross_fit_scores: pd.DataFrame,
    *,
    human_ratings: pd.DataFrame | None = None,
    cluster_by: str | None = "assignment_id",
    ci_level: float = 0.95,
    family: str = "criterion",
    correction: str = "holm",
    alpha: float = 0.05,
    power_tuning: bool = True,
    generalize: str = "items",
) -> pd.DataFrame:
    """Every pair of systems per criterion: the mean per-context difference a - b by (power-tuned, unless
    ``power_tuning`` is False) cross-prediction-powered inference (``ppi_py.crossppi_mean_ci`` on label
    differences, out-of-fold score differences and each fold model's score differences on the unrated contexts; a
    context's items share a fold, so both sides of a difference come from one model), with the z-test of "no
    difference" and its p-value corrected over ``family`` by ``correction`` as
    ``analysis.stats.ppi.estimates.ppi_paired_differences`` does. ``human_ratings`` and ``cluster_by`` add the
    shared-rater term as in ``crossppi_system_means``, and ``generalize`` takes the raters as a sample as there
    (t on the raters of the pair's rated contexts less one).

    Returns
    -------
    pairs : pandas.DataFrame
        One row per criterion and pair (a, b), systems in sorted order: ``criterion``, ``system_a``,
        ``system_b``, ``n_human``, ``n_judge_only``, ``human_diff``, ``human_ci_low``, ``human_ci_high``,
        ``crossppi_diff``, ``crossppi_ci_low``, ``crossppi_ci_high``, ``lam``, ``width_ratio``, ``effective_n_human``,
        ``rater_variance``, ``p_crossppi``, ``p_adj``, ``significant``, ``correction``, ``family``.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> items = pd.DataFrame({"context_id": np.repeat([f"c{i:03d}" for i in range(200)], 2),
    ...                       "system": ["gold", "base"] * 200})
    >>> features = np.column_stack([rng.normal(size=(400, 2)), items["system"] == "gold"])
    >>> quality = 3 + features @ [0.5, -0.3, 0.4]
    >>> rated = items["context_id"] < "c050"
    >>> ratings = items[rated].assign(criterion="empathy", annotator="ann",
    ...                               score=np.round(quality[rated] + rng.normal(0, 0.3, int(rated.sum()))))
    >>> pairs = crossppi_paired_differences(cross_fit_judge(items, features, ratings))
    >>> columns = ["system_a", "system_b", "n_human", "human_diff", "crossppi_diff", "width_ratio", "p_adj"]
    >>> print(pairs[columns].round(3).to_string(index=False))
    system_a system_b  n_human  human_diff  crossppi_diff  width_ratio  p_adj
        base     gold       50       -0.46         -0.469        0.792    0.0
    """
    if family not in ("criterion", "study"):
        raise ValueError(f"family must be one of ('criterion', 'study'), got {family!r}")
    fold_columns = _fold_columns(cross_fit_scores, ci_level)
    over_raters = _over_raters(generalize, human_ratings)
    clustered = _clustered(cross_fit_scores, human_ratings, "annotator" if over_raters else cluster_by)
    rows = []
    for criterion, part in cross_fit_scores.groupby("criterion", sort=True):
        wide = part.pivot(index="context_id", columns="system",
                          values=["label", "judge_score", "fold", *fold_columns])
        for system_a, system_b in itertools.combinations(sorted(wide["judge_score"].columns), 2):
            difference = _fold_differences(wide.xs(system_a, axis=1, level=1), wide.xs(system_b, axis=1, level=1),
                                           fold_columns)
            difference = difference.loc[difference["judge_score"].notna()]
            check_rated_share(difference, where=f"systems {system_a!r} and {system_b!r}, criterion {criterion!r}")
            rated = difference["label"].notna().to_numpy()
            extra = rater_variance_of_difference(clustered, criterion, system_a, system_b, wide["label"],
                                                 contexts=difference.index[rated], small_sample=over_raters)
            df = (rater_degrees_of_freedom(clustered, criterion, [system_a, system_b],
                                           contexts=difference.index[rated]) if over_raters else None)
            result = _crossppi(difference["label"].to_numpy()[rated], difference["judge_score"].to_numpy()[rated],
                               difference.loc[~rated, fold_columns].to_numpy(dtype=float), ci_level,
                               rater_variance=extra, tuned=power_tuning, df=df)
            rows.append({"criterion": criterion, "system_a": system_a, "system_b": system_b,
                         "human_diff": result.pop("human_mean"), "crossppi_diff": result.pop("crossppi_mean"),
                         "p_crossppi": result.pop("p"), **result})
    columns = ["criterion", "system_a", "system_b", "n_human", "n_judge_only", "human_diff", "human_ci_low",
               "human_ci_high", "crossppi_diff", "crossppi_ci_low", "crossppi_ci_high", "lam", "width_ratio",
               "effective_n_human", "rater_variance", "p_crossppi", "p_adj", "significant", "correction", "family"]
    table = pd.DataFrame(rows)
    if table.empty:
        return pd.DataFrame(columns=columns)
    groups = table["criterion"] if family == "criterion" else pd.Series("study", index=table.index)
    table["p_adj"] = adjust_by_family(table["p_crossppi"], groups, method=correction)
    table["significant"] = table["p_adj"] < alpha
    table["correction"] = correction
    table["family"] = family
    return table.reindex(columns=columns)


def _fold_differences(side_a: pd.DataFrame, side_b: pd.DataFrame, fold_columns: list[str]) -> pd.DataFrame:
    """Per context, a - b of the labels, the out-of-fold scores and each fold model's scores.

    A context people rated for one system and not the other (a study in progress, or one system's ratings
    excluded) has no label difference, so it sits with the unrated contexts, whose term needs each fold model's
    difference; but the rated side has only its own fold's score (the other models were trained on it). Its
    difference is then taken with that fold's model on both sides, f_k(a) - f_k(b), for every fold: model k never
    saw the context. Without this every such context made the pair's cross-PPI estimate, interval and p-value NaN
    (the n/a of issue 28's walkthrough, with 24 contexts rated while assignments were still out)."""
    difference = side_a.drop(columns="fold") - side_b.drop(columns="fold")
    folds = difference[fold_columns].to_numpy(dtype=float)
    partial = (difference["label"].isna() & np.isnan(folds).any(axis=1)).to_numpy()
    for row in np.flatnonzero(partial):
        fold_a, fold_b = int(side_a["fold"].iloc[row]), int(side_b["fold"].iloc[row])
        value = np.nan
        if fold_a >= 0 and 0 <= fold_a < len(fold_columns):
            value = side_a["judge_score"].iloc[row] - side_b[fold_columns[fold_a]].iloc[row]
        elif 0 <= fold_b < len(fold_columns):
            value = side_a[fold_columns[fold_b]].iloc[row] - side_b["judge_score"].iloc[row]
        if np.isnan(value):  # neither side's fold model scored the other: the out-of-fold scores
            value = side_a["judge_score"].iloc[row] - side_b["judge_score"].iloc[row]
        folds[row, :] = value
    difference[fold_columns] = folds
    return difference


def _fold_columns(cross_fit_scores: pd.DataFrame, ci_level: float) -> list[str]:
    if not 0 < ci_level < 1:
        raise ValueError(f"ci_level must be strictly between 0 and 1, got {ci_level!r}")
    fold_columns = sorted(column for column in cross_fit_scores.columns if column.startswith("fold_score_"))
    missing = [column for column in CROSS_FIT_COLUMNS if column not in cross_fit_scores.columns]
    if missing or not fold_columns:
        raise ValueError("cross_fit_scores must be the output of cross_fit_judge (missing "
                         f"{', '.join(map(repr, missing or ['fold_score_0']))})")
    return fold_columns


def _clustered(cross_fit_scores: pd.DataFrame, human_ratings: pd.DataFrame | None,
               cluster_by: str | None) -> dict[tuple, pd.DataFrame] | None:
    """The human ratings of the rated items, by (criterion, system), for the shared-rater term (None without
    ratings or clustering); refuses ratings that do not give the labels of ``cross_fit_scores``."""
    if human_ratings is None or cluster_by is None:
        return None
    labels = item_labels(human_ratings)
    rated = cross_fit_scores.loc[cross_fit_scores["label"].notna(), ITEM_KEYS + ["label"]]
    merged = rated.merge(labels, on=ITEM_KEYS, how="left", suffixes=("", "_ratings"))
    differs = ~np.isclose(merged["label"], merged["label_ratings"])
    if differs.any():
        first = merged.loc[differs].iloc[0]
        raise ValueError(f"human_ratings do not give the labels of cross_fit_scores (criterion {first['criterion']!r}, "
                         f"system {first['system']!r}, context {first['context_id']!r}: label {first['label']} "
                         f"in the scores, {first['label_ratings']} from the ratings); pass the ratings the labels "
                         "are the item means of")
    return clustered_ratings(human_ratings, merged.drop(columns="label_ratings"), cluster_by)


def _over_raters(generalize: str, human_ratings: pd.DataFrame | None) -> bool:
    """Whether `generalize` takes the raters as a sample; that needs the ratings (who rated what)."""
    over_raters = generalises_over_raters(generalize)
    if over_raters and human_ratings is None:
        raise ValueError(f"generalize={generalize!r} needs human_ratings (who rated what) to take the raters as a "
                         "sample")
    return over_raters


def _crossppi(y: np.ndarray, f: np.ndarray, f_unrated: np.ndarray, ci_level: float, *,
              rater_variance: float = 0.0, tuned: bool = True, df: float | None = None) -> dict:
    """Cross-PPI (power-tuned when ``tuned``: module docstring) and human-only intervals on one set of labels, and
    the cross-PPI test of 0; with ``rater_variance``, both variances widened by it (module docstring); with
    ``df``, quantiles and p-value from Student's t on ``df`` degrees of freedom (raters as a sample), else
    normal."""
    alpha = 1.0 - ci_level
    z = stats.norm.ppf(1 - alpha / 2)
    human_low, human_high = (float(np.squeeze(bound))
                             for bound in ppi_py().baselines.classical_mean_ci(y, alpha=alpha))
    if tuned:
        n, big_n = y.size, f_unrated.shape[0]
        fbar = f_unrated.mean(axis=1)
        denominator = f.var() + fbar.var() * n / big_n
        lam = float(np.clip(np.mean((y - y.mean()) * (f - f.mean())) / denominator, 0.0, 1.0)) \
            if denominator > 0 else 0.0
        estimate = float(lam * f_unrated.mean() + (y - lam * f).mean())
        se = float(np.sqrt(lam**2 * fbar.var() / big_n + (y - lam * f).var() / n))
        low, high = estimate - z * se, estimate + z * se
    else:
        lam = 1.0
        low, high = (float(np.squeeze(bound))
                     for bound in ppi_py().crossppi_mean_ci(y, f, f_unrated, alpha=alpha))
        estimate = float(f_unrated.mean() + (y - f).mean())
        se = (high - low) / (2 * z)
    reference = interval_reference(df)
    if rater_variance > 0 or df is not None:
        se = float(np.sqrt(se**2 + rater_variance))
        human_se = float(np.sqrt(((human_high - human_low) / (2 * z)) ** 2 + rater_variance))
        quantile = reference.ppf(1 - alpha / 2)
        low, high = estimate - quantile * se, estimate + quantile * se
        human_low, human_high = float(y.mean()) - quantile * human_se, float(y.mean()) + quantile * human_se
    ratio = (high - low) / (human_high - human_low) if human_high > human_low else np.nan
    return {"n_human": int(y.size), "n_judge_only": int(f_unrated.shape[0]), "human_mean": float(y.mean()),
            "human_ci_low": human_low, "human_ci_high": human_high, "crossppi_mean": estimate,
            "crossppi_ci_low": low, "crossppi_ci_high": high, "lam": lam, "width_ratio": ratio,
            "effective_n_human": float(y.size / ratio**2) if ratio > 0 else np.nan,
            "rater_variance": float(rater_variance),
            "p": float(2 * reference.sf(abs(estimate) / se)) if se > 0 else np.nan}
