"""What an interval for a system mean or a paired difference generalises to: new contexts, new raters, or both.

A Likert study's estimate of system s on a criterion is a weighted sum of its ratings: the mean of item means,
``theta = sum_r w_r y_r`` with ``w_r = 1 / (n k_i)`` for rating r of item i (n items, k_i ratings of item i); a
paired difference a - b over the n contexts rated for both uses ``w_r = +-1 / (n k_i)`` (+ on a's items, - on
b's). Which variance that sum has depends on what is taken as a random sample (the *target*):

- ``items``: the contexts (and the rating noise), with this study's raters held fixed. An interval for
  "new contexts rated by this study's raters": the report's percentile bootstrap over items, today's default.
- ``raters``: the raters (and the rating noise), with this study's contexts held fixed: "new raters rating
  this study's contexts".
- ``both``: contexts and raters: "new raters and new contexts", what a paper's reader usually assumes.

With few raters the raters' share of the variance is the part an items-only interval leaves out: with 15 raters
of severity SD 0.3 on a 1-5 scale, 95% item-bootstrap intervals covered the mean for new raters about 78% of
the time.

Two estimates of the variance, for crossed designs (every rater rates many items, every item several raters):

1. ``crossed`` (default): the variance of ``sum_r w_r y_r`` under the crossed random-effects model
   ``y = mu_system + u_context + u_item + u_rater + u_rater:system + e`` (``empeval.analysis.stats.crossed``:
   variance components by Gao & Owen's 2017 method of moments),

       Var = sum_f s_f^2 sum_(levels l of f) W_l^2 + s_e^2 sum_r w_r^2,   W_l = sum_(r in l) w_r,

   over the factors f the target treats as random (items: context and item; raters: rater and rater:system;
   both: all four). The rater:system term is what lets a difference generalise over raters: a rater's overall
   severity cancels in a - b, a rater's preference for one system does not. For ``items`` and ``both`` the
   contexts' share (context, item and noise) is taken from the estimate's own contexts instead, V_items below,
   so that a system whose responses vary more gets its own wider interval (the model pools that variance over
   systems); the raters' share then counts only what V_items does not already hold. Degrees of freedom by
   Satterthwaite (each component with its number of levels - 1), for a t interval.
2. ``cluster``: the two-way cluster-robust variance of Cameron, Gelbach and Miller (2011, "Robust inference
   with multiway clustering", JBES 29(2)) over contexts and raters, from ``e_r = w_r (y_r - mean of side)``:

       V_items = sum_c (sum_(r in c) e_r)^2,  V_raters = sum_j (sum_(r in j) e_r)^2,
       V_cells = sum_(c, j) (sum_(r in c, j) e_r)^2,  V_both = V_items + V_raters - V_cells,

   each with the G / (G - 1) correction of its number of clusters, V_both clipped below at the larger of the
   other two (never narrower than an interval for one of the two); t with (fewer clusters - 1) degrees of
   freedom. No model: it also holds when raters differ in more than severity, but it needs many raters. With
   contexts fixed (``raters``) V_raters also holds the contexts' own variation: conservative.

Owen's pigeonhole bootstrap (Owen 2007, "The pigeonhole bootstrap", Annals of Applied Statistics 1(2)),
``pigeonhole_variance``, resamples contexts and raters independently with replacement and keeps the ratings
whose context and rater were both drawn (as often as both were): the reference the tests compare the two
against for ``both``. It is conservative: it counts the rating noise about three times over, once in its own
right and once each with the contexts and the raters (Owen 2007: for an R x C table of one rating per cell,
E(V*) is about s_row^2 / R + s_column^2 / C + 3 s_e^2 / (R C) where the mean's variance has s_e^2 / (R C)), so the
tests compare it with the crossed variance plus twice the noise's share, ``2 s_e^2 sum_r w_r^2``.

One rater cannot say how raters vary: ``raters`` and ``both`` then raise ValueError (the report falls back to
``items`` and says so). Items rated once each leave the item and the noise untold apart: they are merged into
the noise, which is exact for ``items`` and ``both`` and conservative for ``raters``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from empeval.analysis.kinds.likert.load import require_columns
from empeval.analysis.stats.significance import FAMILIES, adjust_by_family

TARGETS = ("items", "raters", "both")
METHODS = ("crossed", "cluster")

#: What an interval of each target is valid for, in the report's words.
TARGET_WORDS = {
    "items": "new contexts rated by this study's raters",
    "raters": "new raters rating this study's contexts",
    "both": "new raters and new contexts",
}

#: The factors of the crossed model each target treats as random (the rating noise always is).
RANDOM_FACTORS = {
    "items": ("context", "item"),
    "raters": ("rater", "rater:system"),
    "both": ("context", "item", "rater", "rater:system"),
}

MEAN_COLUMNS = ("criterion", "system", "mean", "se", "df", "ci_low", "ci_high", "n_items", "n_raters", "target",
                "method", "note")
PAIR_COLUMNS = ("criterion", "system_a", "system_b", "n_pairs", "mean_diff", "se", "df", "ci_low", "ci_high", "t",
                "p", "p_adj", "significant", "n_raters", "target", "method", "correction", "family", "note")


@dataclass
class Weighted:
    """An estimate as a weighted sum of ratings: ``estimate = sum(weights * scores)``, with each rating's
    context, item, rater and system codes (integers from 0) and the side it is on (0 for a mean; 0 = a, 1 = b
    for a difference)."""

    scores: np.ndarray
    weights: np.ndarray
    context: np.ndarray
    item: np.ndarray
    rater: np.ndarray
    rater_system: np.ndarray
    side: np.ndarray

    @property
    def estimate(self) -> float:
        return float(self.weights @ self.scores)


def check_target(target: str) -> str:
    """``target`` if it is one of TARGETS, else ValueError naming them.

    >>> check_target("both")
    'both'
    """
    if target not in TARGETS:
        raise ValueError(f"generalize must be one of {', '.join(TARGETS)}, got {target!r}")
    return target


def two_way_variance(contributions, contexts, raters) -> dict:
    """The pieces of Cameron, Gelbach and Miller's (2011) two-way cluster-robust variance of a sum whose
    centred terms are ``contributions`` (``e_r = w_r (y_r - mean)``), clustered by ``contexts`` and ``raters``
    (see the module docstring), each with its G / (G - 1) correction (the cells' with theirs).

    Returns
    -------
    pieces : dict
        ``items``, ``raters``, ``cells`` (the corrected V's), ``both`` (V_items + V_raters - V_cells, clipped
        below at max(V_items, V_raters)), ``n_contexts``, ``n_raters``.

    Examples
    --------
    Two raters each rating both contexts; rater 1 scores everything 0.5 above rater 2:

    >>> e = np.array([0.5, 0.5, -0.5, -0.5]) / 4
    >>> pieces = two_way_variance(e, ["c1", "c2", "c1", "c2"], ["r1", "r1", "r2", "r2"])
    >>> pieces["items"], pieces["raters"], round(pieces["cells"], 4), round(pieces["both"], 4)
    (0.0, 0.25, 0.0833, 0.25)
    """
    values = np.asarray(contributions, dtype=float)
    context_codes, context_names = pd.factorize(np.asarray(contexts, dtype=object))
    rater_codes, rater_names = pd.factorize(np.asarray(raters, dtype=object))
    cell_codes, cell_names = pd.factorize(context_codes.astype(np.int64) * len(rater_names) + rater_codes)

    def corrected(codes: np.ndarray, count: int) -> float:
        sums = np.bincount(codes, weights=values, minlength=count)
        return float(sums @ sums) * count / (count - 1) if count > 1 else np.nan

    v_items = corrected(context_codes, len(context_names))
    v_raters = corrected(rater_codes, len(rater_names))
    v_cells = corrected(cell_codes, len(cell_names))
    both = max(v_items + v_raters - v_cells, v_items, v_raters)
    return {"items": v_items, "raters": v_raters, "cells": v_cells, "both": both,
            "n_contexts": len(context_names), "n_raters": len(rater_names)}


def crossed_variance(weighted: Weighted, variances: dict[str, float], *, target: str) -> tuple[float, float]:
    """The variance of ``weighted.estimate`` under the crossed random-effects model with components
    ``variances`` (factor -> s_f^2, and "residual"; a factor missing from it counts as 0), taking as random the
    factors of ``RANDOM_FACTORS[target]`` and the noise: ``sum_f s_f^2 sum_l W_l^2 + s_e^2 sum_r w_r^2``
    (module docstring), with its Satterthwaite degrees of freedom (component f on L_f - 1, the noise on the
    ratings less all levels).

    Returns
    -------
    variance, df : float, float

    Examples
    --------
    A mean of 4 ratings, 2 raters x 2 items, each rating weighted 1/4: the rater term is s_rater^2 (1/4 + 1/4)
    = 0.1, the noise's s_e^2 / 4 = 0.1, on 1 degree of freedom each (Satterthwaite: 0.2^2 / (0.1^2 + 0.1^2) = 2):

    >>> w = Weighted(scores=np.array([3.0, 4.0, 4.0, 5.0]), weights=np.full(4, 0.25),
    ...              context=np.array([0, 1, 0, 1]), item=np.array([0, 1, 0, 1]), rater=np.array([0, 0, 1, 1]),
    ...              rater_system=np.array([0, 0, 1, 1]), side=np.zeros(4, dtype=int))
    >>> crossed_variance(w, {"rater": 0.2, "item": 0.3, "residual": 0.4}, target="raters")
    (0.2, 2.0)
    >>> round(crossed_variance(w, {"rater": 0.2, "item": 0.3, "residual": 0.4}, target="both")[0], 3)
    0.35
    """
    check_target(target)
    parts, dfs = [], []
    n_levels = 0
    for factor in RANDOM_FACTORS[target]:
        variance = float(variances.get(factor, 0.0))
        codes = getattr(weighted, factor.replace(":", "_"))
        sums = np.bincount(codes, weights=weighted.weights)
        levels = int(np.count_nonzero(np.bincount(codes)))
        n_levels += levels
        if variance > 0:
            parts.append(variance * float(sums @ sums))
            dfs.append(max(levels - 1, 1))
    noise = float(variances.get("residual", 0.0)) * float(weighted.weights @ weighted.weights)
    parts.append(noise)
    dfs.append(max(weighted.scores.size - n_levels, 1))
    total = float(sum(parts))
    denominator = sum(part**2 / df for part, df in zip(parts, dfs, strict=True))
    return total, float(total**2 / denominator) if denominator > 0 else np.inf


def pigeonhole_variance(weighted: Weighted, *, n_boot: int = 1000, seed: int = 0) -> float:
    """The pigeonhole bootstrap variance (Owen 2007) of a mean of item means (one side) or of a mean difference
    of paired item means (two sides): each resample draws the contexts and the raters independently with
    replacement; a rating counts as often as its context times its rater was drawn, an item's mean is then the
    weighted mean of its drawn ratings, a context counts when every side has a drawn rating, and the estimate is
    the mean over those contexts (as drawn) of the sides' item means, signed as ``weighted.weights`` are.

    Returns
    -------
    variance : float
        The variance of the ``n_boot`` resampled estimates (ddof = 1).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> rater, context = np.repeat(np.arange(12), 30), np.tile(np.arange(30), 12)
    >>> y = rng.normal(0, 0.5, 12)[rater] + rng.normal(0, 1.0, 30)[context] + rng.normal(0, 0.7, 360)
    >>> w = Weighted(scores=y, weights=np.full(360, 1 / 360), context=context, item=context, rater=rater,
    ...              rater_system=rater, side=np.zeros(360, dtype=int))
    >>> from empeval.analysis.stats.crossed import fit_crossed
    >>> fit = fit_crossed(y, np.ones((360, 1)), {"item": context, "rater": rater}, reml_max_levels=0)
    >>> boot = pigeonhole_variance(w, n_boot=2000)
    >>> round(boot, 4), round(crossed_variance(w, fit.variances, target="both")[0], 4)
    (0.0354, 0.0355)
    """
    rng = np.random.default_rng(seed)
    n_contexts, n_raters = int(weighted.context.max()) + 1, int(weighted.rater.max()) + 1
    n_sides = int(weighted.side.max()) + 1
    signs = np.sign(weighted.weights)
    # One unit per (context, side): its item; several items of one system in a context are one unit here.
    unit = weighted.context * n_sides + weighted.side
    n_units = n_contexts * n_sides
    sign_of_unit = np.zeros(n_units)
    sign_of_unit[unit] = signs
    estimates = np.empty(n_boot)
    block = max(1, 2**21 // max(weighted.scores.size, 1))
    for start in range(0, n_boot, block):
        rows = min(block, n_boot - start)
        context_draws = rng.multinomial(n_contexts, np.full(n_contexts, 1 / n_contexts), size=rows)
        rater_draws = rng.multinomial(n_raters, np.full(n_raters, 1 / n_raters), size=rows).astype(float)
        per_rating = rater_draws[:, weighted.rater]  # rows x ratings: how often each rating's rater was drawn
        keys = (unit[None, :] + n_units * np.arange(rows)[:, None]).ravel()
        totals = np.bincount(keys, weights=(per_rating * weighted.scores).ravel(), minlength=rows * n_units)
        counts = np.bincount(keys, weights=per_rating.ravel(), minlength=rows * n_units)
        totals, counts = totals.reshape(rows, n_contexts, n_sides), counts.reshape(rows, n_contexts, n_sides)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = totals / counts
        present = (counts > 0).all(axis=2)
        signed = np.where(present, (means * sign_of_unit.reshape(n_contexts, n_sides)).sum(axis=2), 0.0)
        used = context_draws * present
        estimates[start:start + rows] = (used * signed).sum(axis=1) / np.maximum(used.sum(axis=1), 1)
    return float(np.var(estimates, ddof=1))


def generalized_interval(weighted: Weighted, *, target: str, method: str = "crossed",
                         variances: dict[str, float] | None = None, ci_level: float = 0.95,
                         null: float = 0.0) -> dict:
    """The estimate with its standard error, degrees of freedom, t interval at ``ci_level`` and two-sided p of
    ``null``, for ``target`` by ``method`` (module docstring). ``variances`` (the crossed model's components)
    is needed by "crossed". ValueError when fewer than two raters (``raters``, ``both``) or contexts rated.

    Returns
    -------
    result : dict
        ``estimate``, ``se``, ``df``, ``ci_low``, ``ci_high``, ``t``, ``p``.

    Examples
    --------
    >>> w = Weighted(scores=np.array([3.0, 4.0, 4.0, 5.0]), weights=np.full(4, 0.25),
    ...              context=np.array([0, 1, 0, 1]), item=np.array([0, 1, 0, 1]), rater=np.array([0, 0, 1, 1]),
    ...              rater_system=np.array([0, 0, 1, 1]), side=np.zeros(4, dtype=int))
    >>> result = generalized_interval(w, target="both", variances={"rater": 0.2, "item": 0.3, "residual": 0.4})
    >>> round(result["estimate"], 2), round(result["se"], 3), round(result["df"], 2)
    (4.0, 0.548, 1.38)
    >>> generalized_interval(Weighted(*(a[:2] for a in (w.scores, w.weights, w.context, w.item, w.rater,
    ...                                                 w.rater_system, w.side))), target="raters", variances={})
    Traceback (most recent call last):
    ValueError: generalising over raters needs ratings from at least 2 raters, got 1: ...
    """
    check_target(target)
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    n_raters = int(np.unique(weighted.rater).size)
    n_contexts = int(np.unique(weighted.context).size)
    if target != "items" and n_raters < 2:
        raise ValueError(f"generalising over raters needs ratings from at least 2 raters, got {n_raters}: the "
                         "intervals for new raters cannot be computed (use generalize=\"items\")")
    if target != "raters" and n_contexts < 2:
        raise ValueError(f"generalising over contexts needs at least 2 rated contexts, got {n_contexts}")
    if method == "crossed":
        if variances is None:
            raise ValueError("the crossed method needs the model's variance components (variances=...)")
        if target == "raters":
            variance, df = crossed_variance(weighted, variances, target=target)
        else:
            variance, df = _own_contexts_variance(weighted, variances, with_raters=target == "both")
    else:
        centred = weighted.weights * (weighted.scores - _side_means(weighted))
        pieces = two_way_variance(centred, weighted.context, weighted.rater)
        variance = pieces[target]
        clusters = {"items": n_contexts, "raters": n_raters, "both": min(n_contexts, n_raters)}[target]
        df = float(max(clusters - 1, 1))
    estimate = weighted.estimate
    se = float(np.sqrt(max(variance, 0.0)))
    quantile = float(stats.t.ppf(0.5 + ci_level / 2, df))
    t = (estimate - null) / se if se > 0 else np.nan
    p = float(2 * stats.t.sf(abs(t), df)) if np.isfinite(t) else np.nan
    return {"estimate": estimate, "se": se, "df": float(df), "ci_low": estimate - quantile * se,
            "ci_high": estimate + quantile * se, "t": float(t), "p": p}


def _own_contexts_variance(weighted: Weighted, variances: dict[str, float], *,
                           with_raters: bool) -> tuple[float, float]:
    """The crossed method's variance for ``items`` and ``both``: the contexts' share from the estimate's own
    contexts, ``V_items`` of ``two_way_variance`` (so that a system whose responses vary more than the others' gets
    its own wider interval, which a variance pooled over systems would not give it), and with ``with_raters`` the
    raters' share from the model, without what V_items already holds of it (a rater's ratings within one context):
    ``s_f^2 (sum_l W_l^2 - sum_(context, l) W_(context, l)^2)`` for f = rater and rater:system. Satterthwaite
    degrees of freedom (the contexts less one for V_items, the levels less one for each rater share)."""
    centred = weighted.weights * (weighted.scores - _side_means(weighted))
    n_contexts = int(np.unique(weighted.context).size)
    parts = [two_way_variance(centred, weighted.context, weighted.rater)["items"]]
    dfs = [max(n_contexts - 1, 1)]
    for factor in RANDOM_FACTORS["raters"] if with_raters else ():
        variance = float(variances.get(factor, 0.0))
        codes = getattr(weighted, factor.replace(":", "_"))
        if variance <= 0:
            continue
        cells = pd.factorize(weighted.context.astype(np.int64) * (int(codes.max()) + 1) + codes)[0]
        by_level = np.bincount(codes, weights=weighted.weights)
        by_cell = np.bincount(cells, weights=weighted.weights)
        parts.append(variance * max(float(by_level @ by_level - by_cell @ by_cell), 0.0))
        dfs.append(max(int(np.unique(codes).size) - 1, 1))
    total = float(sum(parts))
    denominator = sum(part**2 / df for part, df in zip(parts, dfs, strict=True))
    return total, float(total**2 / denominator) if denominator > 0 else np.inf


def _side_means(weighted: Weighted) -> np.ndarray:
    """Each rating's side's estimate (the mean of that side's item means), the centre of its contribution."""
    side_totals = np.bincount(weighted.side, weights=np.abs(weighted.weights) * weighted.scores)
    side_weights = np.bincount(weighted.side, weights=np.abs(weighted.weights))
    return (side_totals / side_weights)[weighted.side]


# --- from the tidy ratings table ----------------------------------------------------------------------------


class _Criterion:
    """One criterion's non-control ratings, coded, with the crossed model's variance components."""

    def __init__(self, ratings: pd.DataFrame, criterion: str, *, need_model: bool, target: str = "items") -> None:
        data = ratings.loc[(ratings["criterion"] == criterion) & ~ratings["is_control"].astype(bool)]
        self.data = data.reset_index(drop=True)
        n_raters = self.data["annotator"].nunique()
        if target != "items" and n_raters < 2:
            raise ValueError(f"generalising over raters needs ratings from at least 2 raters, got {n_raters} on "
                             f"{criterion}: the intervals for new raters cannot be computed (use generalize=\"items\")")
        self.criterion = criterion
        self.codes = {
            "context": pd.factorize(self.data["context"])[0],
            "item": pd.factorize(self.data["item"])[0],
            "rater": pd.factorize(self.data["annotator"])[0],
            "rater:system": pd.factorize(self.data["annotator"].astype(str) + "\x1f"
                                         + self.data["system"].astype(str))[0],
        }
        self.variances: dict[str, float] = {}
        self.note = ""
        if need_model and not self.data.empty:
            self.variances, self.note = _components(self.data, self.codes)

    def weighted(self, sides: list[tuple[str, float]]) -> Weighted:
        """The estimate of the systems of ``sides`` (system, sign): one side, the mean of its item means; two,
        the mean over the contexts rated for both of the difference of their item means."""
        data = self.data
        in_sides = data["system"].isin([system for system, _ in sides]).to_numpy().copy()
        part = data.loc[in_sides]
        if len(sides) == 1:
            units = part["item"]
            n_units = units.nunique()
        else:
            both = part.groupby("context")["system"].nunique()
            keep = part["context"].isin(both.index[both == len(sides)]).to_numpy()
            in_sides[np.flatnonzero(in_sides)[~keep]] = False
            part = data.loc[in_sides]
            units = part["context"]
            n_units = units.nunique()
        ratings_per_item = part.groupby("item")["score"].transform("size").to_numpy(dtype=float)
        items_per_unit = (part.groupby([units, part["system"]])["item"].transform("nunique").to_numpy(dtype=float))
        sign = part["system"].map(dict(sides)).to_numpy(dtype=float)
        weights = sign / (max(n_units, 1) * items_per_unit * ratings_per_item)
        side = part["system"].map({system: k for k, (system, _) in enumerate(sides)}).to_numpy(dtype=np.int64)
        codes = {name: pd.factorize(code[in_sides])[0] for name, code in self.codes.items()}
        return Weighted(scores=part["score"].to_numpy(dtype=float), weights=weights, context=codes["context"],
                        item=codes["item"], rater=codes["rater"], rater_system=codes["rater:system"], side=side)


def _components(data: pd.DataFrame, codes: dict[str, np.ndarray]) -> tuple[dict[str, float], str]:
    """The crossed model's variance components on one criterion (``score ~ system`` with random intercepts),
    by moments (no REML refinement: the estimator's variance needs the components, not the last digit). A
    factor the design cannot tell apart from the others is left out, in this order: rater:system (raters who
    rated one system each), context (one system per context), item (items rated once each: merged into the
    noise); the note says which."""
    from empeval.analysis.stats.crossed import fit_crossed

    systems = sorted(data["system"].unique())
    design = np.zeros((len(data), len(systems)))
    design[:, 0] = 1.0
    system_codes = pd.Categorical(data["system"], categories=systems).codes
    design[system_codes > 0, system_codes[system_codes > 0]] = 1.0
    factors = ["context", "item", "rater", "rater:system"]
    left_out: list[str] = []
    for dropped in ([], ["rater:system"], ["rater:system", "context"], ["rater:system", "context", "item"],
                    ["context"], ["item"], ["context", "item"]):
        used = [f for f in factors if f not in dropped and np.unique(codes[f]).size > 1]
        levels = sum(np.unique(codes[f]).size for f in used)
        if not used or levels + len(systems) >= len(data):
            continue
        try:
            fit = fit_crossed(data["score"].to_numpy(dtype=float), design, {f: codes[f] for f in used},
                              reml_max_levels=0)
        except (ValueError, np.linalg.LinAlgError):
            continue
        left_out = [f for f in factors if f not in used]
        note = "; ".join(filter(None, [fit.note, f"not told apart, left out: {', '.join(left_out)}"
                                       if left_out else ""]))
        return dict(fit.variances), note
    # No random factor told apart from the noise (one rater who rated each item once, say): every rating on its
    # own, their variance about the system means the noise's.
    residuals = data["score"].to_numpy(dtype=float) - data.groupby("system")["score"].transform("mean").to_numpy()
    if len(data) <= len(systems):
        raise ValueError(f"{len(data)} ratings cannot estimate {len(systems)} system means and their variance")
    variance = float(residuals @ residuals) / (len(data) - len(systems))
    return {"residual": variance}, "no random factor could be told apart from the noise: ratings taken as independent"


def generalized_means(ratings: pd.DataFrame, *, target: str, criteria: list[str] | None = None,
                      method: str = "crossed", ci_level: float = 0.95) -> pd.DataFrame:
    """Mean score per criterion and system (the mean of item means, as ``significance.system_means``) with the
    interval of ``target`` by ``method`` (module docstring). Control items are left out.

    Returns
    -------
    means : pandas.DataFrame
        One row per criterion and system: ``criterion``, ``system``, ``mean``, ``se``, ``df``, ``ci_low``,
        ``ci_high`` (t interval at ``ci_level``), ``n_items``, ``n_raters``, ``target``, ``method``, ``note``
        (components the design could not tell apart). ValueError when ``target`` needs raters and a criterion
        has one.

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> ratings = tidy_from_export(simulate_study(n_contexts=20, n_random_clickers=0, n_straight_liners=0,
    ...                                          seed=1).export)
    >>> items = generalized_means(ratings, target="items", criteria=["empathy"])
    >>> both = generalized_means(ratings, target="both", criteria=["empathy"])
    >>> print(both[["system", "mean", "ci_low", "ci_high", "df"]].round(2).to_string(index=False))
      system  mean  ci_low  ci_high    df
    baseline  2.27    1.81     2.73 22.64
        gold  3.88    3.49     4.28 23.47
        moel  3.17    2.79     3.54 25.91
    >>> bool(((both["ci_high"] - both["ci_low"]) > (items["ci_high"] - items["ci_low"])).all())
    True
    """
    check_target(target)
    require_columns(ratings, ("item", "context", "system", "annotator", "criterion", "score", "is_control"),
                    what="generalized_means")
    criteria = list(criteria) if criteria is not None else sorted(ratings["criterion"].unique())
    rows = []
    for criterion in criteria:
        coded = _Criterion(ratings, criterion, need_model=method == "crossed", target=target)
        for system in sorted(coded.data["system"].unique()):
            weighted = coded.weighted([(system, 1.0)])
            result = generalized_interval(weighted, target=target, method=method, variances=coded.variances,
                                          ci_level=ci_level)
            rows.append({"criterion": criterion, "system": system, "mean": result["estimate"], "se": result["se"],
                         "df": result["df"], "ci_low": result["ci_low"], "ci_high": result["ci_high"],
                         "n_items": int(np.unique(weighted.item).size), "n_raters": int(np.unique(weighted.rater).size),
                         "target": target, "method": method, "note": coded.note})
    return pd.DataFrame(rows, columns=list(MEAN_COLUMNS))


def generalized_pairs(ratings: pd.DataFrame, *, target: str, criteria: list[str] | None = None,
                      method: str = "crossed", ci_level: float = 0.95, family: str = "criterion",
                      correction: str = "holm", alpha: float = 0.05) -> pd.DataFrame:
    """Every pair of systems per criterion: the mean over contexts rated for both of the difference of item
    means a - b (as ``significance.compare_pairs``'s ``mean_diff``), with the interval of ``target`` by
    ``method`` and the t-test of "no difference" (module docstring), p corrected over ``family`` by
    ``correction`` as compare_pairs corrects.

    Returns
    -------
    pairs : pandas.DataFrame
        One row per criterion and pair, systems in sorted order: ``criterion``, ``system_a``, ``system_b``,
        ``n_pairs`` (contexts rated for both), ``mean_diff``, ``se``, ``df``, ``ci_low``, ``ci_high``, ``t``, ``p``,
        ``p_adj``, ``significant`` (p_adj < alpha), ``n_raters``, ``target``, ``method``, ``correction``,
        ``family``, ``note`` (why a pair has no test, or components left out).

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> ratings = tidy_from_export(simulate_study(n_contexts=20, n_random_clickers=0, n_straight_liners=0,
    ...                                          seed=1).export)
    >>> pairs = generalized_pairs(ratings, target="both", criteria=["empathy"])
    >>> print(pairs[["system_a", "system_b", "mean_diff", "ci_low", "ci_high", "p_adj"]].round(3).to_string(
    ...     index=False))
    system_a system_b  mean_diff  ci_low  ci_high  p_adj
    baseline     gold     -1.617  -2.062   -1.172  0.000
    baseline     moel     -0.900  -1.404   -0.396  0.001
        gold     moel      0.717   0.348    1.085  0.001
    """
    check_target(target)
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    require_columns(ratings, ("item", "context", "system", "annotator", "criterion", "score", "is_control"),
                    what="generalized_pairs")
    criteria = list(criteria) if criteria is not None else sorted(ratings["criterion"].unique())
    rows = []
    for criterion in criteria:
        coded = _Criterion(ratings, criterion, need_model=method == "crossed", target=target)
        for system_a, system_b in itertools.combinations(sorted(coded.data["system"].unique()), 2):
            weighted = coded.weighted([(system_a, 1.0), (system_b, -1.0)])
            n_pairs = int(np.unique(weighted.context).size)
            row = {"criterion": criterion, "system_a": system_a, "system_b": system_b, "n_pairs": n_pairs,
                   "n_raters": int(np.unique(weighted.rater).size), "target": target, "method": method,
                   "note": coded.note}
            if n_pairs < 2:
                row.update(mean_diff=weighted.estimate if n_pairs else np.nan, p=np.nan,
                           note="fewer than two contexts rated for both systems")
            else:
                result = generalized_interval(weighted, target=target, method=method, variances=coded.variances,
                                              ci_level=ci_level)
                row.update(mean_diff=result["estimate"], se=result["se"], df=result["df"], ci_low=result["ci_low"],
                           ci_high=result["ci_high"], t=result["t"], p=result["p"])
            rows.append(row)
    table = pd.DataFrame(rows).reindex(columns=list(PAIR_COLUMNS))
    if table.empty:
        return table
    groups = table["criterion"] if family == "criterion" else pd.Series("study", index=table.index)
    table["p_adj"] = adjust_by_family(table["p"].astype(float), groups, method=correction)
    table["significant"] = table["p_adj"] < alpha
    table["correction"] = correction
    table["family"] = family
    return table
