"""Planning a model-assisted study: how many contexts people must rate for a target CI half-width on a
system mean, with a judge of a given correlation to the labels, beside the human-only figure.

The PPI++ variance of a mean (Angelopoulos, Duchi and Zrnic 2023) with n human-rated contexts, N contexts
scored by the judge alone, label SD sigma, judge SD tau and judge-label correlation rho is, for a weight
lambda,

    V(lambda) = lambda^2 tau^2 / N + (sigma^2 - 2 lambda rho sigma tau + lambda^2 tau^2) / n.

Setting dV/dlambda = 0 gives lambda* = (rho sigma / tau) * N / (n + N), and

    V* = (sigma^2 / n) * (1 - rho^2 * N / (n + N)),

the human-only variance sigma^2 / n shrunk by rho^2 times the share of contexts the judge scores alone (the
judge's own scale drops out, which is why a shifted or compressed judge loses nothing). With M = n + N
contexts in all and a target half-width h at confidence level 1 - alpha (z = z_{1 - alpha/2}), solving
z^2 V* = h^2 for n:

    human-only:   n_0 = z^2 sigma^2 / h^2
    with a judge: n   = z^2 sigma^2 (1 - rho^2) / (h^2 - z^2 sigma^2 rho^2 / M)   (M unbounded: n_0 (1 - rho^2)),

feasible only when h^2 > z^2 sigma^2 rho^2 / M (and n < M): the judge-only term caps what a finite pool of
contexts can give. These are large-sample figures (lambda known); the estimated lambda costs a little at small
n, which the simulation check in the tests bounds.

sigma is the SD of the item labels (means of k ratings) within a system; from the design model of
``analysis.stats.power`` (``Components``) it is sqrt(context_sd^2 + response_sd^2 + (rater_sd^2 + noise_sd^2) / k),
before rounding to the scale. Measure it in a pilot (the SD of the item means) when one exists.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from empeval.analysis.stats.power import Components

#: The design model's typical components (``empeval.analysis.stats.power.Components()``).
DEFAULT_COMPONENTS = Components()

PLAN_COLUMNS = (
    "judge_correlation", "half_width", "label_sd", "n_contexts", "contexts_human_only", "contexts_with_judge",
    "ratings_human_only", "ratings_with_judge", "saving", "note",
)


def label_sd_from_components(components: Components = DEFAULT_COMPONENTS, *, raters_per_item: int = 3) -> float:
    """SD of the item labels (mean of ``raters_per_item`` ratings) within a system under the design model:
    sqrt(context_sd^2 + response_sd^2 + (rater_sd^2 + noise_sd^2) / k), ignoring rounding to the scale.

    Returns
    -------
    sd : float

    Examples
    --------
    >>> round(label_sd_from_components(Components(), raters_per_item=3), 4)
    0.7837
    """
    c = components
    if raters_per_item < 1:
        raise ValueError(f"raters_per_item must be at least 1, got {raters_per_item!r}")
    return math.sqrt(c.context_sd**2 + c.response_sd**2 + (c.rater_sd**2 + c.noise_sd**2) / raters_per_item)


def ppi_half_width(
    n_human: int,
    *,
    judge_correlation: float,
    label_sd: float,
    n_contexts: int | None = None,
    ci_level: float = 0.95,
) -> float:
    """Large-sample half-width of the PPI++ interval for a mean with ``n_human`` human-rated contexts out of
    ``n_contexts`` (None: unbounded), z * sqrt(V*) with V* of the module docstring.

    Returns
    -------
    half_width : float

    Examples
    --------
    No judge (rho = 0) gives the human-only half-width, z sigma / sqrt(n):

    >>> round(ppi_half_width(100, judge_correlation=0.0, label_sd=0.8), 4)
    0.1568
    >>> round(ppi_half_width(100, judge_correlation=0.7, label_sd=0.8, n_contexts=500), 4)
    0.1223
    """
    _check(judge_correlation, label_sd, ci_level)
    if n_human < 1:
        raise ValueError(f"n_human must be at least 1, got {n_human!r}")
    judge_only_share = 1.0 if n_contexts is None else (n_contexts - n_human) / n_contexts
    if judge_only_share < 0:
        raise ValueError(f"n_human={n_human} exceeds n_contexts={n_contexts}")
    z = stats.norm.ppf((1 + ci_level) / 2)
    return float(z * label_sd * math.sqrt((1 - judge_correlation**2 * judge_only_share) / n_human))


def human_ratings_needed(
    judge_correlation: float | list[float],
    *,
    half_width: float,
    label_sd: float | None = None,
    components: Components = DEFAULT_COMPONENTS,
    raters_per_item: int = 3,
    n_systems: int = 1,
    n_contexts: int | None = None,
    ci_level: float = 0.95,
) -> pd.DataFrame:
    """Human-rated contexts (and ratings) needed for a CI half-width ``half_width`` on a system mean, with a
    judge of correlation ``judge_correlation`` to the labels (one figure or several), beside the human-only
    figure; formulas in the module docstring.

    ``label_sd`` is the SD of the item labels within a system (from a pilot); None derives it from
    ``components`` and ``raters_per_item`` (``label_sd_from_components``). ``n_contexts`` is the number of
    contexts the judge can score (None: as many as needed). Ratings count ``raters_per_item`` ratings of each
    of ``n_systems`` responses per rated context.

    Returns
    -------
    plan : pandas.DataFrame
        One row per judge correlation:

        * ``judge_correlation``, ``half_width``, ``label_sd``, ``n_contexts`` (NaN: unbounded)
        * ``contexts_human_only``, ``contexts_with_judge``: human-rated contexts needed (NaN if infeasible)
        * ``ratings_human_only``, ``ratings_with_judge``: the same in ratings
        * ``saving``: the share of human ratings the judge saves
        * ``note``: why a figure is infeasible, else ""

    Examples
    --------
    >>> plan = human_ratings_needed([0.0, 0.5, 0.7, 0.9], half_width=0.1, label_sd=0.8, n_systems=3)
    >>> print(plan[["judge_correlation", "contexts_human_only", "contexts_with_judge", "ratings_with_judge",
    ...             "saving"]].round(2).to_string(index=False))
     judge_correlation  contexts_human_only  contexts_with_judge  ratings_with_judge  saving
                   0.0                  246                  246                2214    0.00
                   0.5                  246                  185                1665    0.25
                   0.7                  246                  126                1134    0.49
                   0.9                  246                   47                 423    0.81
    """
    correlations = [float(judge_correlation)] if isinstance(judge_correlation, (int, float)) else [
        float(rho) for rho in judge_correlation]
    sd = label_sd if label_sd is not None else label_sd_from_components(components, raters_per_item=raters_per_item)
    if not half_width > 0:
        raise ValueError(f"half_width must be positive, got {half_width!r}")
    if n_contexts is not None and n_contexts < 2:
        raise ValueError(f"n_contexts must be at least 2 (or None for unbounded), got {n_contexts!r}")
    if raters_per_item < 1 or n_systems < 1:
        raise ValueError("raters_per_item and n_systems must be at least 1")
    z = stats.norm.ppf((1 + ci_level) / 2)
    per_context = raters_per_item * n_systems
    rows = []
    for rho in correlations:
        _check(rho, sd, ci_level)
        human_only = math.ceil(z**2 * sd**2 / half_width**2)
        rest = half_width**2 - (0.0 if n_contexts is None else z**2 * sd**2 * rho**2 / n_contexts)
        note = ""
        with_judge: float = math.ceil(z**2 * sd**2 * (1 - rho**2) / rest) if rest > 0 else np.nan
        if rest <= 0:
            note = (f"no number of human ratings reaches half_width={half_width} with the judge on "
                    f"n_contexts={n_contexts}: score more contexts")
        elif n_contexts is not None and with_judge >= n_contexts:
            with_judge, note = np.nan, f"needs every one of the n_contexts={n_contexts} contexts rated"
        human_only_value: float = human_only
        if n_contexts is not None and human_only > n_contexts:
            human_only_value = np.nan
            note = note or f"the human-only study needs more than n_contexts={n_contexts} contexts"
        rows.append({
            "judge_correlation": float(rho), "half_width": float(half_width), "label_sd": float(sd),
            "n_contexts": np.nan if n_contexts is None else n_contexts,
            "contexts_human_only": human_only_value, "contexts_with_judge": with_judge,
            "ratings_human_only": human_only_value * per_context, "ratings_with_judge": with_judge * per_context,
            "saving": 1 - with_judge / human_only, "note": note,
        })
    plan = pd.DataFrame(rows, columns=list(PLAN_COLUMNS))
    for column in ("contexts_human_only", "contexts_with_judge", "ratings_human_only", "ratings_with_judge"):
        plan[column] = plan[column].astype("Int64") if plan[column].notna().all() else plan[column]
    return plan


def _check(judge_correlation: float, label_sd: float, ci_level: float) -> None:
    if not -1 <= judge_correlation <= 1:
        raise ValueError(f"judge_correlation must be in [-1, 1], got {judge_correlation!r}")
    if not label_sd > 0:
        raise ValueError(f"label_sd must be positive, got {label_sd!r}")
    if not 0 < ci_level < 1:
        raise ValueError(f"ci_level must be strictly between 0 and 1, got {ci_level!r}")
