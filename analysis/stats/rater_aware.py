"""Rater-aware checks of the system comparison: does the conclusion survive who rated what?

Averaging annotators within an item treats every annotator alike. When annotators differ in leniency and do
not all see every system equally often, an ordering can come from the raters rather than the systems. Two
checks, each compared with the item-level Wilcoxon result of ``empeval.analysis.stats.significance.compare_pairs``:

- a linear mixed model ``score ~ system`` with crossed random intercepts for annotator and item (Baayen,
  Davidson & Bates 2008): variance components by Gao & Owen's (2017) method of moments, fixed effects by
  generalised least squares (Ghosh, Hastie & Owen 2022; ``empeval.analysis.stats.crossed``, linear in the number of
  ratings; statsmodels' dense REML MixedLM on request); each pair is a Wald test of the difference of its
  two fixed effects;
- per-annotator z-scored scores (each annotator's ratings on a criterion centred on their mean and divided by
  their SD), then the same item-level Wilcoxon tests on the z-scores.

A pair is flagged when its order (the sign of the difference) or its significance after correction differs
from the raw result.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
from scipy import stats

from empeval.analysis.kinds.likert.load import require_columns
from empeval.analysis.stats.crossed import fit_crossed
from empeval.analysis.stats.significance import adjust_by_family, compare_pairs
from empeval.analysis.stats.threads import blas_single_threaded, single_threaded_blas

_EPS = 1e-9


@blas_single_threaded
def mixed_model_pairs(
    ratings: pd.DataFrame,
    *,
    criterion: str,
    random_effects: tuple[str, ...] = ("annotator", "item"),
    reml: bool = True,
    method: str = "moments",
) -> pd.DataFrame:
    """Pairwise system differences from the mixed model ``score ~ system + (1|annotator) + (1|item)`` on one
    criterion (non-control ratings). ``random_effects`` names the columns with crossed random intercepts
    (add "context" to let contexts share an intercept too).

    ``method``: "moments" (default) estimates the variance components by Gao & Owen's (2017) method of
    moments and the fixed effects by generalised least squares (Ghosh, Hastie & Owen 2022), in time linear
    in the number of ratings (``analysis.stats.crossed``); on balanced designs it equals REML. "statsmodels" fits
    by REML (or ML with ``reml=False``) with statsmodels' dense MixedLM (crossed intercepts as variance
    components of one group; Baayen, Davidson & Bates 2008), whose time grows as n^2 or faster. ``reml``
    applies to "statsmodels" only.

    Returns
    -------
    pairs : pandas.DataFrame
        One row per pair (a, b) of systems, in sorted order:

        * ``criterion``, ``system_a``, ``system_b``
        * ``lmm_diff``: the difference of fixed effects a - b; ``lmm_se``: its standard error
        * ``lmm_z``, ``lmm_p``: the Wald z and its two-sided p (uncorrected)
        * ``lmm_note``: convergence or boundary warnings, or why the fit failed (then NaN estimates)

    Examples
    --------
    >>> from empeval.analysis import exclude_annotators, simulate_study, tidy_from_export
    >>> study = simulate_study(n_contexts=20, seed=1)
    >>> ratings = exclude_annotators(tidy_from_export(study.export), study.spammers)
    >>> pairs = mixed_model_pairs(ratings, criterion="empathy")
    >>> print(pairs[["system_a", "system_b", "lmm_diff", "lmm_se", "lmm_p"]].round(2).to_string(index=False))
    system_a system_b  lmm_diff  lmm_se  lmm_p
    baseline     gold     -1.14    0.20   0.00
    baseline     moel     -0.66    0.20   0.00
        gold     moel      0.47    0.19   0.01
    """
    if method not in ("moments", "statsmodels"):
        raise ValueError(f"method must be 'moments' or 'statsmodels', got {method!r}")
    require_columns(ratings, ("system", "criterion", "score", "is_control", *random_effects), what="mixed_model_pairs")
    data = ratings.loc[(ratings["criterion"] == criterion) & ~ratings["is_control"].astype(bool)]
    systems = sorted(data["system"].unique())
    pairs = list(itertools.combinations(systems, 2))
    if method == "moments":
        return _moment_pairs(data, criterion, systems, pairs, random_effects)
    import statsmodels.formula.api as smf  # deferred: statsmodels' formula stack is slow to import

    frame = pd.DataFrame({"score": data["score"].to_numpy(dtype=float)})
    # Plain codes keep patsy away from whatever characters system or worker names contain.
    frame["system"] = pd.Categorical(data["system"].to_numpy(), categories=systems).codes
    for column in random_effects:
        frame[column] = pd.factorize(data[column])[0]
    frame["whole_study"] = 0
    note = ""
    try:
        with warnings.catch_warnings(record=True) as caught, single_threaded_blas():
            warnings.simplefilter("always")
            model = smf.mixedlm(
                "score ~ C(system)", frame, groups="whole_study", re_formula="0",
                vc_formula={column: f"0 + C({column})" for column in random_effects},
            )
            fit = model.fit(reml=reml)
        messages = sorted({str(w.message).split(".")[0] for w in caught if "converge" in str(w.message).lower()
                           or "boundary" in str(w.message).lower()})
        if not fit.converged:
            messages.insert(0, "did not converge")
        note = "; ".join(messages)
    except (np.linalg.LinAlgError, ValueError) as err:
        failed = {"lmm_diff": np.nan, "lmm_se": np.nan, "lmm_z": np.nan, "lmm_p": np.nan,
                  "lmm_note": f"mixed model failed: {err}"}
        return pd.DataFrame([{"criterion": criterion, "system_a": a, "system_b": b, **failed} for a, b in pairs])
    names = list(fit.fe_params.index)
    covariance = fit.cov_params().loc[names, names].to_numpy()
    effects = fit.fe_params.to_numpy()
    position = {code: names.index(f"C(system)[T.{code}]") for code in range(1, len(systems))}
    rows = []
    for a, b in pairs:
        contrast = np.zeros(len(names))
        code_a, code_b = systems.index(a), systems.index(b)
        if code_a in position:
            contrast[position[code_a]] += 1.0
        if code_b in position:
            contrast[position[code_b]] -= 1.0
        diff = float(contrast @ effects)
        se = float(np.sqrt(contrast @ covariance @ contrast))
        z = diff / se if se > 0 else np.nan
        rows.append({"criterion": criterion, "system_a": a, "system_b": b, "lmm_diff": diff, "lmm_se": se, "lmm_z": z,
                     "lmm_p": float(2 * stats.norm.sf(abs(z))) if np.isfinite(z) else np.nan, "lmm_note": note})
    return pd.DataFrame(rows)


def _moment_pairs(data: pd.DataFrame, criterion: str, systems: list[str], pairs: list[tuple[str, str]],
                  random_effects: tuple[str, ...]) -> pd.DataFrame:
    system_codes = pd.Categorical(data["system"].to_numpy(), categories=systems).codes
    design = np.zeros((len(data), len(systems)))
    design[:, 0] = 1.0  # intercept, then treatment contrasts against the first system, as C(system) codes it
    rows_with = np.flatnonzero(system_codes > 0)
    design[rows_with, system_codes[rows_with]] = 1.0
    factors = {column: pd.factorize(data[column])[0] for column in random_effects}
    try:
        if len(data) <= len(systems):
            raise ValueError(f"{len(data)} ratings cannot estimate {len(systems)} system effects and the variances")
        fit = fit_crossed(data["score"].to_numpy(dtype=float), design, factors)
    except (np.linalg.LinAlgError, ValueError) as err:
        failed = {"lmm_diff": np.nan, "lmm_se": np.nan, "lmm_z": np.nan, "lmm_p": np.nan,
                  "lmm_note": f"mixed model failed: {err}"}
        return pd.DataFrame([{"criterion": criterion, "system_a": a, "system_b": b, **failed} for a, b in pairs])
    rows = []
    for a, b in pairs:
        contrast = np.zeros(len(systems))
        code_a, code_b = systems.index(a), systems.index(b)
        if code_a > 0:
            contrast[code_a] += 1.0
        if code_b > 0:
            contrast[code_b] -= 1.0
        diff = float(contrast @ fit.fe_params)
        se = float(np.sqrt(max(contrast @ fit.cov_params @ contrast, 0.0)))
        z = diff / se if se > 0 else np.nan
        rows.append({"criterion": criterion, "system_a": a, "system_b": b, "lmm_diff": diff, "lmm_se": se, "lmm_z": z,
                     "lmm_p": float(2 * stats.norm.sf(abs(z))) if np.isfinite(z) else np.nan, "lmm_note": fit.note})
    return pd.DataFrame(rows)


def zscore_by_annotator(ratings: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Non-control ratings with ``score`` replaced by the annotator's z-score on that criterion (ddof = 1).

    Annotators with fewer than two ratings or no variation on a criterion have no z-score there and are
    dropped from it; their names are returned beside the table.

    Returns
    -------
    zscored : pandas.DataFrame
        The non-control ratings that have a z-score, same columns, ``score`` as a float z-score.
    dropped : list of str
        Annotators left out on at least one criterion (sorted).

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> study = simulate_study(n_contexts=20, seed=1)
    >>> zscored, dropped = zscore_by_annotator(tidy_from_export(study.export))
    >>> dropped, study.spammers["worker-05"]
    (['worker-05'], 'straight')
    >>> bool(zscored.groupby(["annotator", "criterion"])["score"].mean().abs().max() < 1e-12)
    True
    """
    data = ratings.loc[~ratings["is_control"].astype(bool)].copy()
    grouped = data.groupby(["annotator", "criterion"])["score"]
    centre = grouped.transform("mean")
    spread = grouped.transform("std")  # ddof = 1
    usable = spread > 0
    dropped = sorted(data.loc[~usable, "annotator"].unique())
    data = data.loc[usable].copy()
    data["score"] = (data["score"] - centre[usable]) / spread[usable]
    return data, dropped


@blas_single_threaded
def rater_aware_check(
    ratings: pd.DataFrame,
    *,
    raw: pd.DataFrame | None = None,
    alpha: float = 0.05,
    correction: str = "holm",
    family: str = "criterion",
    random_effects: tuple[str, ...] = ("annotator", "item"),
    n_boot: int = 2000,
    seed: int = 0,
    method: str = "moments",
) -> pd.DataFrame:
    """Compare the raw pairwise results with the mixed model and with z-scored ratings, per criterion and pair.

    ``raw`` is the output of ``compare_pairs`` on the same ratings (computed here when omitted). The LMM
    p-values are corrected with the same ``correction`` and ``family``; the z-score tests are
    ``compare_pairs`` on ``zscore_by_annotator``'s table.

    Returns
    -------
    check : pandas.DataFrame
        One row per criterion and pair of ``raw``:

        * ``criterion``, ``system_a``, ``system_b``
        * ``mean_diff``, ``p_adj``: the raw item-level result
        * ``lmm_diff``, ``lmm_se``, ``lmm_z``, ``lmm_p``, ``lmm_note``: see ``mixed_model_pairs``
        * ``lmm_p_adj``: ``lmm_p`` corrected over the family
        * ``z_diff``, ``z_p_adj``: mean difference and corrected Wilcoxon p on annotator-z-scored scores
        * ``order_changes``: either check reverses the sign of the difference
        * ``significance_changes``: either check gains or loses significance at ``alpha``
        * ``flagged``: order or significance changes
        * ``reason``: what changed, "; "-separated ("" when nothing did)
        * ``z_note``: annotators left out of the z-scores, if any

    Examples
    --------
    >>> from empeval.analysis import exclude_annotators, simulate_study, tidy_from_export
    >>> study = simulate_study(n_contexts=20, seed=1)
    >>> ratings = exclude_annotators(tidy_from_export(study.export), study.spammers)
    >>> from empeval.analysis import compare_pairs
    >>> check = rater_aware_check(ratings, raw=compare_pairs(ratings, criteria=["empathy"], n_boot=200))
    >>> columns = ["system_a", "system_b", "mean_diff", "p_adj", "lmm_diff", "z_p_adj", "flagged", "reason"]
    >>> print(check[columns].round(3).to_string(index=False))  # doctest: +NORMALIZE_WHITESPACE
    system_a system_b  mean_diff  p_adj  lmm_diff  z_p_adj  flagged                           reason
    baseline     gold     -1.083  0.002    -1.137    0.001    False
    baseline     moel     -0.600  0.019    -0.664    0.015    False
        gold     moel      0.483  0.029     0.473    0.145     True z-scored test loses significance
    """
    if raw is None:
        raw = compare_pairs(ratings, family=family, correction=correction, alpha=alpha, n_boot=n_boot, seed=seed)
    criteria = sorted(raw["criterion"].unique())
    lmm = pd.concat([mixed_model_pairs(ratings, criterion=c, random_effects=random_effects, method=method)
                     for c in criteria],
                    ignore_index=True)
    families = lmm["criterion"] if family == "criterion" else pd.Series("study", index=lmm.index)
    lmm["lmm_p_adj"] = adjust_by_family(lmm["lmm_p"], families, method=correction)

    zscored, dropped = zscore_by_annotator(ratings)
    # Only the z-scored differences and tests are kept: no bootstrap of their effect sizes (n_boot = 0).
    z = compare_pairs(zscored, criteria=criteria, family=family, correction=correction, alpha=alpha, n_boot=0,
                      seed=seed)
    z = z.rename(columns={"mean_diff": "z_diff", "p_adj": "z_p_adj"})
    z = z[["criterion", "system_a", "system_b", "z_diff", "z_p_adj"]]

    keys = ["criterion", "system_a", "system_b"]
    table = raw[keys + ["mean_diff", "p_adj"]].merge(lmm, on=keys, how="left").merge(z, on=keys, how="left")
    reasons = []
    for row in table.itertuples(index=False):
        parts = []
        raw_sign = _sign(row.mean_diff)
        if _sign(row.lmm_diff) != raw_sign:
            parts.append("mixed model reverses the order")
        if _sign(row.z_diff) != raw_sign:
            parts.append("z-scored means reverse the order")
        raw_significant = bool(row.p_adj < alpha)
        if np.isfinite(row.lmm_p_adj) and bool(row.lmm_p_adj < alpha) != raw_significant:
            parts.append("mixed model " + ("loses" if raw_significant else "gains") + " significance")
        if np.isfinite(row.z_p_adj) and bool(row.z_p_adj < alpha) != raw_significant:
            parts.append("z-scored test " + ("loses" if raw_significant else "gains") + " significance")
        reasons.append(parts)
    table["order_changes"] = [any("order" in p for p in parts) for parts in reasons]
    table["significance_changes"] = [any("significance" in p for p in parts) for parts in reasons]
    table["flagged"] = table["order_changes"] | table["significance_changes"]
    table["reason"] = ["; ".join(parts) for parts in reasons]
    table["lmm_note"] = table["lmm_note"].fillna("")
    table["z_note"] = (
        f"z-scores leave out {len(dropped)} annotator(s) with no variation: {', '.join(dropped)}" if dropped else ""
    )
    return table


def _sign(value: float) -> int:
    if value is None or not np.isfinite(value) or abs(value) < _EPS:
        return 0
    return 1 if value > 0 else -1
