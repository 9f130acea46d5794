"""Pairwise preference (A/B) tests: win / tie / loss rates with exact binomial tests and Holm correction.

Input: one row per judgement with columns ``system_a``, ``system_b`` and ``preferred`` (the name of the
preferred system, or "tie"), and optionally ``criterion``. The order in which a pair was shown does not
matter: (A, B) and (B, A) judgements are pooled, and each pair is reported with its systems in sorted order.

Every judgement counts as an independent trial here. For a pairwise study collected by empeval (several
judgements per context, several per rater) that overstates the evidence: its report decides by the
per-context sign test of ``analysis/kinds/pairwise/tables.py`` (``sign_tests``, ``ab_table``), and ``preference_tests``
stays for judgements that are independent (one per context) or for description.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from empeval.analysis.stats.significance import adjust_by_family

TIE = "tie"
TIE_HANDLING = ("exclude", "split", "as_loss")


def preference_tests(
    judgements: pd.DataFrame,
    *,
    ties: str = "exclude",
    correction: str = "holm",
    family: str = "criterion",
    alpha: float = 0.05,
    ci_level: float = 0.95,
) -> pd.DataFrame:
    """Per criterion and pair (a, b): counts and rates of a wins, ties, b wins; a two-sided exact binomial
    test of H0 "a and b are preferred equally often" (scipy ``binomtest``, p = 0.5); a Clopper-Pearson CI of
    a's share of the decisive judgements; p-values corrected over the pairs of a criterion ("criterion") or
    of all criteria ("study").

    ``ties``: "exclude" (default) tests the decisive judgements only; "split" gives half of the ties to each
    side (an odd tie is dropped, since the test needs whole counts); "as_loss" counts ties against system_a,
    the conservative choice when a is the new system.

    Returns
    -------
    tests : pandas.DataFrame
        One row per criterion and pair, systems in sorted order (empty without judgements):

        * ``criterion``, ``system_a``, ``system_b``
        * ``n``: judgements of the pair; ``wins_a``, ``ties``, ``wins_b``: how they fell
        * ``win_rate_a``, ``tie_rate``, ``win_rate_b``: the same as shares of ``n``
        * ``n_tested``, ``k_tested``: trials and successes for a that the test used (after ``ties``)
        * ``share_a``: k_tested / n_tested; ``share_ci_low``, ``share_ci_high``: its Clopper-Pearson CI
          at ``ci_level``
        * ``p``: the exact two-sided binomial p; ``p_adj``: corrected over the family
        * ``significant``: ``p_adj < alpha``
        * ``ties_handling``, ``correction``: as passed

    Examples
    --------
    20 judgements of gold against moel, shown in either order; R's ``binom.test(15, 18)`` gives
    p = 0.007538 and the 95% CI 0.5858-0.9642.

    >>> import pandas as pd
    >>> judgements = pd.DataFrame({
    ...     "system_a": ["gold"] * 12 + ["moel"] * 8, "system_b": ["moel"] * 12 + ["gold"] * 8,
    ...     "preferred": ["gold"] * 9 + ["moel"] * 2 + ["tie"] + ["gold"] * 6 + ["moel"] + ["tie"]})
    >>> tests = preference_tests(judgements)
    >>> columns = ["system_a", "system_b", "wins_a", "ties", "wins_b", "share_ci_low", "share_ci_high", "p"]
    >>> print(tests[columns].round(4).to_string(index=False))
    system_a system_b  wins_a  ties  wins_b  share_ci_low  share_ci_high      p
        gold     moel      15     2       3        0.5858         0.9642 0.0075
    >>> preference_tests(judgements, ties="split")[["n_tested", "k_tested"]].values.tolist()
    [[20, 16]]
    """
    if ties not in TIE_HANDLING:
        raise ValueError(f"ties must be one of {TIE_HANDLING}, got {ties!r}")
    missing = [c for c in ("system_a", "system_b", "preferred") if c not in judgements.columns]
    if missing:
        raise ValueError(f"preference judgements need column(s) {missing}: system_a, system_b, preferred")
    data = judgements.copy()
    if "criterion" not in data.columns:
        data["criterion"] = "preference"
    preferred = data["preferred"].astype(str).str.strip()
    valid = (preferred == data["system_a"]) | (preferred == data["system_b"]) | (preferred.str.lower() == TIE)
    if not valid.all():
        bad = int(np.flatnonzero(~valid.to_numpy())[0])
        raise ValueError(f"row {bad + 1}: preferred is {preferred.iloc[bad]!r}, which is neither of "
                         f"{data['system_a'].iloc[bad]!r}, {data['system_b'].iloc[bad]!r} nor 'tie'")
    first = np.minimum(data["system_a"].astype(str), data["system_b"].astype(str))
    second = np.maximum(data["system_a"].astype(str), data["system_b"].astype(str))
    data = data.assign(first=first, second=second, choice=preferred.where(preferred.str.lower() != TIE, TIE))

    rows = []
    for (criterion, a, b), part in data.groupby(["criterion", "first", "second"], sort=True):
        wins_a = int((part["choice"] == a).sum())
        wins_b = int((part["choice"] == b).sum())
        n_ties = int((part["choice"] == TIE).sum())
        n = wins_a + wins_b + n_ties
        k, trials = _tested_counts(wins_a, wins_b, n_ties, ties)
        row = {"criterion": criterion, "system_a": a, "system_b": b, "n": n, "wins_a": wins_a, "ties": n_ties,
               "wins_b": wins_b, "win_rate_a": wins_a / n, "tie_rate": n_ties / n, "win_rate_b": wins_b / n,
               "n_tested": trials, "k_tested": k}
        if trials > 0:
            test = stats.binomtest(k, trials, p=0.5, alternative="two-sided")
            interval = test.proportion_ci(confidence_level=ci_level, method="exact")
            row.update(share_a=k / trials, share_ci_low=float(interval.low), share_ci_high=float(interval.high),
                       p=float(test.pvalue))
        else:
            row.update(share_a=np.nan, share_ci_low=np.nan, share_ci_high=np.nan, p=np.nan)
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    families = table["criterion"] if family == "criterion" else pd.Series("study", index=table.index)
    table["p_adj"] = adjust_by_family(table["p"], families, method=correction)
    table["significant"] = table["p_adj"] < alpha
    table["ties_handling"] = ties
    table["correction"] = correction
    return table


def _tested_counts(wins_a: int, wins_b: int, n_ties: int, ties: str) -> tuple[int, int]:
    if ties == "exclude":
        return wins_a, wins_a + wins_b
    if ties == "split":
        half = n_ties // 2
        return wins_a + half, wins_a + wins_b + 2 * half
    return wins_a, wins_a + wins_b + n_ties  # as_loss
