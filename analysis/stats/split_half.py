"""Split-half reliability: how well two disjoint halves of the annotators agree on the scores they give the same
responses, the reliability measure Kiritchenko & Mohammad (ACL 2017, "Best-Worst Scaling More Reliable than
Rating Scales") compare best-worst scaling and rating scales with.

For each unit (a tuple of a best-worst study, a rated item of a Likert study) its judgments are split at random
into two halves (of sizes floor(n/2) and ceil(n/2)); each response gets a score from each half separately (its
mean rating; or, best-worst, the number of times it was picked best minus worst over the judgments of its tuple),
and the two sets of scores are correlated over the responses (Spearman and Pearson). This is repeated over
`n_splits` random splits and the correlations averaged, as K&M do (100 splits). A correlation of two halves
measures the reliability of half the judgments; the Spearman-Brown prophecy formula (Spearman 1910, Brown 1910)

    r_full = 2 r_half / (1 + r_half)

estimates that of all of them, reported beside it. Units with fewer than two judgments have no halves and are
left out.

The input is a table of contributions, so that the two kinds of study share one implementation: one row per
(judgment, response) that the judgment scores, with the judgment's unit, the judgment's id, the response and the
value it adds (a rating; +1 best, -1 worst, 0 for the other members of a best-worst tuple).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

SPLIT_HALF_COLUMNS = ("responses", "units", "judgments", "splits", "spearman", "spearman_brown", "pearson",
                      "pearson_brown")


def spearman_brown(r: float | np.ndarray, factor: float = 2.0) -> float | np.ndarray:
    """The Spearman-Brown prophecy: the reliability of a measure `factor` times as long as one of reliability `r`,
    factor * r / (1 + (factor - 1) * r) (Spearman 1910; Brown 1910).

    Returns
    -------
    reliability : float or numpy.ndarray
        The stepped-up reliability, of the shape of `r`.

    Examples
    --------
    >>> round(spearman_brown(0.5), 4), round(spearman_brown(0.6, factor=3), 4)
    (0.6667, 0.8182)
    """
    return factor * r / (1 + (factor - 1) * r)


def split_half(contributions: pd.DataFrame, *, n_splits: int = 100, seed: int = 0) -> dict[str, float]:
    """Split-half reliability of the scores `contributions` give (see the module docstring): columns ``unit``,
    ``judgment``, ``response`` and ``value``; every row of one judgment has the same unit, and every response
    belongs to one unit. A response's score in a half is the sum of its values over the half's judgments of its
    unit divided by their number.

    Returns
    -------
    reliability : dict
        ``responses`` and ``units`` used (those with two judgments or more), ``judgments``, ``splits``, and the mean
        over the splits of the Spearman and Pearson correlations of the two halves' scores with their
        Spearman-Brown corrected values (``spearman_brown``, ``pearson_brown``); NaN when fewer than three
        responses are scored or a half has no variation in every split.

    Examples
    --------
    Two raters who agree on every item give two identical halves; raters who pick at random, uncorrelated ones:

    >>> rows = [{"unit": i, "judgment": f"{i}-{rater}", "response": i, "value": float(i % 5)}
    ...         for i in range(20) for rater in range(2)]
    >>> split_half(pd.DataFrame(rows), n_splits=5)["spearman"]
    1.0
    >>> rng = np.random.default_rng(0)
    >>> noise = [{"unit": i, "judgment": f"{i}-{rater}", "response": i, "value": rng.normal()}
    ...          for i in range(400) for rater in range(4)]
    >>> abs(split_half(pd.DataFrame(noise), n_splits=20)["spearman"]) < 0.1
    True
    """
    if n_splits < 1:
        raise ValueError(f"n_splits must be at least 1, got {n_splits}")
    missing = [c for c in ("unit", "judgment", "response", "value") if c not in contributions.columns]
    if missing:
        raise ValueError(f"split_half needs column(s) {', '.join(missing)}")
    judgment_unit = contributions.drop_duplicates("judgment").set_index("judgment")["unit"]
    per_unit = judgment_unit.groupby(judgment_unit, sort=False).transform("size")
    kept_judgments = per_unit.index[per_unit.to_numpy() >= 2]
    table = contributions.loc[contributions["judgment"].isin(kept_judgments)]
    judgment_codes, judgments = pd.factorize(table["judgment"])
    response_codes, responses = pd.factorize(table["response"])
    n_judgments, n_responses = len(judgments), len(responses)
    result = {"responses": n_responses, "units": int(table["unit"].nunique()), "judgments": n_judgments,
              "splits": n_splits, "spearman": float("nan"), "spearman_brown": float("nan"),
              "pearson": float("nan"), "pearson_brown": float("nan")}
    if n_responses < 3:
        return result
    unit_of_judgment = pd.factorize(judgment_unit.loc[judgments])[0]
    unit_of_response = unit_of_judgment[
        pd.Series(judgment_codes).groupby(response_codes).first().sort_index().to_numpy()]
    values = table["value"].to_numpy(dtype=float)
    rng = np.random.default_rng(seed)
    spearman, pearson = [], []
    for _ in range(n_splits):
        # A random rank of each judgment within its unit; the lower half (floor(n/2)) goes to half 0.
        key = rng.random(n_judgments)
        order = np.lexsort((key, unit_of_judgment))
        rank = np.empty(n_judgments, dtype=int)
        starts = np.r_[0, np.flatnonzero(np.diff(unit_of_judgment[order])) + 1]
        sizes = np.diff(np.r_[starts, n_judgments])
        rank[order] = np.arange(n_judgments) - np.repeat(starts, sizes)
        unit_size = np.bincount(unit_of_judgment)
        half = (rank >= unit_size[unit_of_judgment] // 2).astype(int)
        counts = np.zeros((2, unit_size.size))
        np.add.at(counts, (half, unit_of_judgment), 1.0)
        sums = np.zeros((2, n_responses))
        np.add.at(sums, (half[judgment_codes], response_codes), values)
        scores = sums / counts[:, unit_of_response]
        if np.ptp(scores[0]) == 0 or np.ptp(scores[1]) == 0:
            continue
        spearman.append(stats.spearmanr(scores[0], scores[1]).statistic)
        pearson.append(float(np.corrcoef(scores[0], scores[1])[0, 1]))
    if spearman:
        result.update(spearman=float(np.mean(spearman)), pearson=float(np.mean(pearson)))
        result.update(spearman_brown=float(spearman_brown(result["spearman"])),
                      pearson_brown=float(spearman_brown(result["pearson"])))
    return result
