"""Pairwise A/B studies: the papers' Win / Lose / Tie table, a per-context sign test, agreement on the
choices, position bias and control pairs.

Input: the judgment table of ``empeval.analysis.kinds.pairwise.schema`` (one row per judgment and criterion). Every
comparison of systems uses ``preferred`` (the system chosen, or tie), never the screen side; the screen side
(``choice``) serves the position-bias check only. Control pairs (one side built to lose on one criterion)
are scored against their known answer in ``control_scores`` and left out of everything else.

Why the test is per context: the k judgments of one context (and those of one rater) are not independent,
so counting judgments as trials would overstate the evidence. Each context therefore counts once, for the
system with more wins among its judgments (net wins); contexts with net zero (all ties, or as many wins as
losses) are left out; the exact two-sided sign test (a binomial test with p = 1/2, Dixon & Mood 1946) runs
over the remaining contexts, and Holm (1979) adjusts the p-values over the pairs of each criterion.
``pairwise_tables`` returns every table the report needs.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats

from empeval.analysis.kinds.pairwise.schema import PAIR_SEPARATOR, TIE, validate_judgments
from empeval.analysis.stats.significance import adjust_by_family

SIGN_TEST_CAPTION = (
    "Win / Lose / Tie: shares of all judgments of the pair, from the first system's side (descriptive only). "
    "Test: per context, because judgments of one context are not independent; each context counts once, for "
    "the system with more wins among its judgments; contexts with as many wins as losses (all-tie contexts "
    "included) are left out; exact two-sided sign test over the remaining contexts; p adjusted by Holm over the "
    "pairs of each criterion. Control pairs are left out."
)

POSITION_BIAS_CAPTION = (
    "Position bias: share of the non-tie choices that went to the left (A) response, with its exact "
    "Clopper-Pearson interval and an exact two-sided binomial test of 1/2; over all criteria, each shown pair "
    "counts once, for the side most of its criteria chose; control pairs left out. Left/right order is "
    "counterbalanced, so a share away from 1/2 is a preference for a screen side, not a system."
)


def oriented(judgments: pd.DataFrame, *, focus: str | None = None) -> pd.DataFrame:
    """Non-control judgments with each pair oriented: ``system_a`` is ``focus`` when the pair includes it (the
    papers' "ours"), else the first of the pair in sorted order; ``outcome`` is +1 when system_a is preferred,
    -1 when system_b is, 0 for a tie.

    Returns
    -------
    judgments : pandas.DataFrame
        The validated non-control judgments plus ``system_a``, ``system_b`` and ``outcome`` (int).

    Examples
    --------
    >>> from empeval.analysis.kinds.pairwise.schema import judgment_rows
    >>> table = oriented(pd.DataFrame(judgment_rows([(1, "gold", "moel", "left"), (2, "moel", "gold", "tie")])),
    ...                  focus="moel")
    >>> table[["system_a", "system_b", "preferred", "outcome"]].values.tolist()
    [['moel', 'gold', 'gold', -1], ['moel', 'gold', 'tie', 0]]
    """
    table = validate_judgments(judgments)
    table = table.loc[~table["is_control"]].reset_index(drop=True)
    sides = table["pair"].str.split(PAIR_SEPARATOR, n=1, expand=True) if len(table) else pd.DataFrame(
        {0: pd.Series(dtype=object), 1: pd.Series(dtype=object)})
    swap = (sides[1] == focus).to_numpy() if focus is not None else np.zeros(len(table), dtype=bool)
    table["system_a"] = np.where(swap, sides[1], sides[0])
    table["system_b"] = np.where(swap, sides[0], sides[1])
    outcome = np.where(table["preferred"] == table["system_a"], 1, np.where(table["preferred"] == TIE, 0, -1))
    table["outcome"] = outcome.astype(int)
    return table


def ab_counts(judgments: pd.DataFrame, *, focus: str | None = None) -> pd.DataFrame:
    """The papers' A/B table as description: per criterion and pair, how the judgments fell, from
    ``system_a``'s side (see ``oriented`` for which system that is).

    Returns
    -------
    counts : pandas.DataFrame
        One row per criterion and pair:

        * ``criterion``, ``system_a``, ``system_b``
        * ``judgments``: non-control judgments of the pair; ``wins``, ``losses``, ``ties``: how they fell for a
        * ``win_pct``, ``lose_pct``, ``tie_pct``: the same as percentages of ``judgments``
        * ``contexts``, ``annotators``: distinct contexts and annotators behind them

    Examples
    --------
    >>> from empeval.analysis.kinds.pairwise.schema import judgment_rows
    >>> rows = judgment_rows([(1, "gold", "moel", "left", "ann-1"), (1, "moel", "gold", "left", "ann-2"),
    ...                      (2, "gold", "moel", "tie")])
    >>> print(ab_counts(pd.DataFrame(rows))[["system_a", "wins", "losses", "ties", "win_pct"]].round(1)
    ...       .to_string(index=False))
    system_a  wins  losses  ties  win_pct
        gold     1       1     1     33.3
    """
    table = oriented(judgments, focus=focus)
    keys = ["criterion", "system_a", "system_b"]
    if table.empty:
        return pd.DataFrame(columns=[*keys, "judgments", "wins", "losses", "ties", "win_pct", "lose_pct", "tie_pct",
                                     "contexts", "annotators"])
    grouped = table.groupby(keys, sort=True)
    counts = grouped.agg(judgments=("outcome", "size"), wins=("outcome", lambda o: int((o > 0).sum())),
                         losses=("outcome", lambda o: int((o < 0).sum())),
                         ties=("outcome", lambda o: int((o == 0).sum())),
                         contexts=("context_id", "nunique"), annotators=("annotator", "nunique")).reset_index()
    for share, column in (("win_pct", "wins"), ("lose_pct", "losses"), ("tie_pct", "ties")):
        counts[share] = 100.0 * counts[column] / counts["judgments"]
    return counts[[*keys, "judgments", "wins", "losses", "ties", "win_pct", "lose_pct", "tie_pct", "contexts",
                   "annotators"]]


def context_net_wins(judgments: pd.DataFrame, *, focus: str | None = None) -> pd.DataFrame:
    """Net wins of ``system_a`` per criterion, pair and context: its wins minus its losses over all judgments
    of that context (ties count zero).

    Returns
    -------
    net : pandas.DataFrame
        Columns ``criterion``, ``system_a``, ``system_b``, ``context_id``, ``judgments``, ``net_wins`` (int).

    Examples
    --------
    >>> from empeval.analysis.kinds.pairwise.schema import judgment_rows
    >>> rows = judgment_rows([(1, "gold", "moel", "left", "ann-1"), (1, "moel", "gold", "tie", "ann-2"),
    ...                      (2, "gold", "moel", "right")])
    >>> context_net_wins(pd.DataFrame(rows))[["context_id", "judgments", "net_wins"]].values.tolist()
    [[1, 2, 1], [2, 1, -1]]
    """
    table = oriented(judgments, focus=focus)
    keys = ["criterion", "system_a", "system_b", "context_id"]
    return (table.groupby(keys, sort=True)["outcome"].agg(judgments="size", net_wins="sum").reset_index()
            .astype({"judgments": int, "net_wins": int}))


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided sign test: the binomial test of ``wins`` successes in ``wins + losses`` trials against
    p = 1/2 (scipy's ``binomtest``); NaN without trials (no context was decisive: the test is undefined, and an
    undefined test leaves the family that ``adjust_pvalues`` corrects over, rather than counting as p = 1 and
    making the others' adjustment stricter).

    Returns
    -------
    p : float
        The two-sided p-value: twice the smaller tail, at most 1.

    Examples
    --------
    9 wins and 1 loss: P(X >= 9) = (10 + 1) / 2**10, twice that is 22/1024.

    >>> sign_test(9, 1) == 22 / 1024
    True
    >>> sign_test(0, 0)
    nan
    """
    if wins < 0 or losses < 0:
        raise ValueError(f"wins and losses must be counts (>= 0), got {wins} and {losses}")
    if wins + losses == 0:
        return float("nan")
    return float(stats.binomtest(wins, wins + losses, p=0.5, alternative="two-sided").pvalue)


def sign_tests(judgments: pd.DataFrame, *, focus: str | None = None, correction: str = "holm",
               alpha: float = 0.05) -> pd.DataFrame:
    """The decision of the A/B table: per criterion and pair, contexts won, lost and even by net wins
    (``context_net_wins``), the exact two-sided sign test over the won and lost contexts (``sign_test``), and
    the p-values adjusted over the pairs of each criterion (``correction``, Holm by default, with
    ``analysis.stats.significance.adjust_by_family``). See ``SIGN_TEST_CAPTION`` for the rule as the report states it.

    Returns
    -------
    tests : pandas.DataFrame
        One row per criterion and pair:

        * ``criterion``, ``system_a``, ``system_b``
        * ``contexts``: contexts judged; ``contexts_won``, ``contexts_lost``: with net wins above / below zero
          for system_a; ``contexts_even``: net zero, left out of the test
        * ``p``: exact two-sided sign test (NaN when every context was even: undefined, outside the family);
          ``p_adj``: adjusted within the criterion; ``significant``: ``p_adj < alpha``

    Examples
    --------
    >>> from empeval.analysis.kinds.pairwise.schema import judgment_rows
    >>> rows = judgment_rows([(c, "gold", "moel", "left") for c in range(9)] + [(9, "gold", "moel", "right"),
    ...                      (10, "gold", "moel", "tie")])
    >>> print(sign_tests(pd.DataFrame(rows)).drop(columns="criterion").round(4).to_string(index=False))
    system_a system_b  contexts  contexts_won  contexts_lost  contexts_even      p  p_adj  significant
        gold     moel        11             9              1              1 0.0215 0.0215         True
    """
    net = context_net_wins(judgments, focus=focus)
    keys = ["criterion", "system_a", "system_b"]
    columns = [*keys, "contexts", "contexts_won", "contexts_lost", "contexts_even", "p", "p_adj", "significant"]
    if net.empty:
        return pd.DataFrame(columns=columns)
    tests = net.groupby(keys, sort=True)["net_wins"].agg(
        contexts="size", contexts_won=lambda n: int((n > 0).sum()), contexts_lost=lambda n: int((n < 0).sum()),
        contexts_even=lambda n: int((n == 0).sum())).reset_index()
    tests["p"] = [sign_test(w, lost) for w, lost in zip(tests["contexts_won"], tests["contexts_lost"], strict=True)]
    tests["p_adj"] = adjust_by_family(tests["p"], tests["criterion"], method=correction)
    tests["significant"] = tests["p_adj"] < alpha
    return tests[columns]


def ab_table(judgments: pd.DataFrame, *, focus: str | None = None, correction: str = "holm",
             alpha: float = 0.05) -> pd.DataFrame:
    """The report's A/B table: ``ab_counts`` (Win / Lose / Tie % of judgments, description) beside
    ``sign_tests`` (the per-context decision), one row per criterion and pair.

    Returns
    -------
    table : pandas.DataFrame
        The columns of ``ab_counts`` followed by ``contexts_won``, ``contexts_lost``, ``contexts_even``,
        ``p``, ``p_adj``, ``significant`` of ``sign_tests``.

    Examples
    --------
    >>> from empeval.analysis.kinds.pairwise.schema import judgment_rows
    >>> rows = judgment_rows([(1, "gold", "moel", "left"), (2, "moel", "gold", "left")])
    >>> print(ab_table(pd.DataFrame(rows), focus="moel")[["system_a", "win_pct", "lose_pct", "contexts_won", "p"]]
    ...       .to_string(index=False))
    system_a  win_pct  lose_pct  contexts_won   p
        moel     50.0      50.0             1 1.0
    """
    counts = ab_counts(judgments, focus=focus)
    tests = sign_tests(judgments, focus=focus, correction=correction, alpha=alpha)
    keys = ["criterion", "system_a", "system_b"]
    return counts.merge(tests.drop(columns="contexts"), on=keys, how="left")


def choice_agreement(judgments: pd.DataFrame, *, n_boot: int = 1000, ci_level: float = 0.95,
                     seed: int = 0) -> pd.DataFrame:
    """Agreement of the annotators on the choices, per criterion, with the choices mapped to systems (first
    system of the pair, second system, tie; never screen sides): Fleiss' kappa (Fleiss 1971; statsmodels'
    ``fleiss_kappa``) and Krippendorff's alpha, nominal (Krippendorff 2011; the ``krippendorff`` package), each
    with a percentile bootstrap CI over units (``n_boot`` resamples of the units, seeded), computed as the Likert
    report computes its agreement CIs (``analysis.stats.coefficients`` over ``analysis.stats.bootstrap`` weights).

    The unit is one pair on one context. Fleiss' kappa needs the same number of ratings per unit: it uses the
    units with the most common number of ratings (at least two) and says how many; alpha uses every unit
    with two or more ratings. Control pairs are left out.

    Returns
    -------
    agreement : pandas.DataFrame
        One row per criterion and coefficient (``fleiss_kappa``, ``krippendorff_alpha``): ``criterion``,
        ``coefficient``, ``estimate`` (NaN when undefined), ``ci_low``, ``ci_high`` (the percentile interval at
        ``ci_level``; NaN when undefined), ``units`` (units used), ``ratings_per_unit`` (Fleiss only),
        ``judgments`` (judgments used).

    Examples
    --------
    Three units, three raters each, choices "gold", "gold", "tie" / "moel" x 3 / "gold" x 3. By hand: Fleiss'
    observed agreement (1/3 + 1 + 1) / 3 = 63/81, chance 25/81 + 9/81 + 1/81 = 35/81, kappa = 28/46 = 0.6087;
    Krippendorff's coincidences o(gold, tie) = o(tie, gold) = 1 of n = 9 values with n_gold = 5, n_moel = 3,
    n_tie = 1, so D_o = 2/9, D_e = (81 - 25 - 9 - 1) / 72 = 46/72 and alpha = 1 - 16/46 = 0.6522.

    >>> from empeval.analysis.kinds.pairwise.schema import judgment_rows
    >>> choices = [("gold", "gold", "tie"), ("moel", "moel", "moel"), ("gold", "gold", "gold")]
    >>> side = {"gold": "left", "moel": "right", "tie": "tie"}
    >>> rows = [row for unit, picks in enumerate(choices) for rater, pick in enumerate(picks)
    ...         for row in judgment_rows([(unit, "gold", "moel", side[pick])], annotator=f"r{rater}")]
    >>> agreement = choice_agreement(pd.DataFrame(rows), n_boot=200)
    >>> print(agreement[["coefficient", "estimate", "units"]].round(4).to_string(index=False))
           coefficient  estimate  units
          fleiss_kappa    0.6087      3
    krippendorff_alpha    0.6522      3
    >>> bool((agreement["ci_low"] <= agreement["estimate"]).all() and (agreement["ci_high"] <= 1).all())
    True
    """
    from empeval.analysis.stats import coefficients
    from empeval.analysis.stats.bootstrap import percentile_interval, resample_weights

    table = validate_judgments(judgments)
    table = table.loc[~table["is_control"]].copy()
    first = table["pair"].str.split(PAIR_SEPARATOR, n=1).str[0]
    # Categories by system, not side: 0 = the first system of the pair, 1 = the second, 2 = tie.
    table["category"] = np.where(table["preferred"] == TIE, 2, np.where(table["preferred"] == first, 0, 1))
    table["unit"] = table["pair"] + "@" + table["context_id"].astype(str)
    categories = np.array([0.0, 1.0, 2.0])

    def interval(statistic, counts: np.ndarray) -> tuple[float, float]:
        boot = statistic(counts, resample_weights(counts.shape[0], n_boot=n_boot, seed=seed))
        low, high, _ = percentile_interval(boot, level=ci_level)
        return low, high

    rows = []
    for criterion, part in table.groupby("criterion", sort=True):
        counts = pd.crosstab(part["unit"], part["category"]).reindex(columns=[0, 1, 2], fill_value=0)
        per_unit = counts.sum(axis=1)
        shared = per_unit[per_unit >= 2]
        kappa = low = high = np.nan
        if shared.empty:
            units, raters = 0, np.nan
        else:
            raters = int(shared.value_counts().sort_index(ascending=False).idxmax())
            complete = counts.loc[per_unit == raters].to_numpy(dtype=float)
            units = len(complete)
            # One category throughout: chance agreement is 1 and kappa undefined (0/0); say NaN, not a warning.
            varied = np.count_nonzero(complete.sum(axis=0)) > 1
            if units >= 2 and varied:
                kappa = float(coefficients.fleiss_kappa(complete))
                low, high = interval(lambda c, w: coefficients.fleiss_kappa(c, unit_weights=w), complete)
        rows.append({"criterion": criterion, "coefficient": "fleiss_kappa", "estimate": kappa, "ci_low": low,
                     "ci_high": high, "units": units, "ratings_per_unit": raters,
                     "judgments": int(units * raters) if units else 0})
        pairable = counts.loc[per_unit >= 2].to_numpy(dtype=float)
        alpha = low = high = np.nan
        # Every pairable judgment the same: no variation to agree on, alpha is undefined (NaN).
        if pairable.size and np.count_nonzero(pairable.sum(axis=0)) > 1:
            alpha = float(coefficients.krippendorff_alpha(pairable, categories, level="nominal"))
            low, high = interval(lambda c, w: coefficients.krippendorff_alpha(c, categories, level="nominal",
                                                                              unit_weights=w), pairable)
        rows.append({"criterion": criterion, "coefficient": "krippendorff_alpha", "estimate": alpha, "ci_low": low,
                     "ci_high": high, "units": int(pairable.shape[0]), "ratings_per_unit": np.nan,
                     "judgments": int(pairable.sum())})
    return pd.DataFrame(rows, columns=["criterion", "coefficient", "estimate", "ci_low", "ci_high", "units",
                                       "ratings_per_unit", "judgments"])


def position_bias(judgments: pd.DataFrame, *, ci_level: float = 0.95) -> pd.DataFrame:
    """Preference for a screen side: per criterion, the share of the non-tie choices that went to the left
    response, its exact Clopper-Pearson CI and the exact two-sided binomial test of 1/2 (scipy's
    ``binomtest``); control pairs left out. See ``POSITION_BIAS_CAPTION``.

    The "all" row pools the criteria without counting a shown pair more than once (one rater judges all
    criteria of a pair at once, so those choices are not independent): a shown pair counts as a left choice
    when more of its criteria went left than right, as a right one when fewer, and not at all when as many.

    Returns
    -------
    bias : pandas.DataFrame
        One row per criterion, then "all": ``criterion``, ``decisive`` (non-tie choices; for "all", shown
        pairs leaning to a side), ``left``, ``share_left``, ``ci_low``, ``ci_high``, ``p``.

    Examples
    --------
    >>> from empeval.analysis.kinds.pairwise.schema import judgment_rows
    >>> rows = judgment_rows([(c, "gold", "moel", "left" if c < 8 else "right") for c in range(10)])
    >>> print(position_bias(pd.DataFrame(rows)).round(4).to_string(index=False))
    criterion  decisive  left  share_left  ci_low  ci_high      p
      empathy        10     8         0.8  0.4439   0.9748 0.1094
          all        10     8         0.8  0.4439   0.9748 0.1094
    """
    table = validate_judgments(judgments)
    table = table.loc[~table["is_control"]]
    side = np.where(table["choice"] == "left", 1, np.where(table["choice"] == "right", -1, 0))
    lean = pd.Series(side, index=table.index).groupby(
        [table["study"], table["assignment_id"], table["context_id"], table["pair"]]).sum()
    per_pair = pd.DataFrame({"choice": np.where(lean > 0, "left", "right")})[lean.to_numpy() != 0]
    decisive = table.loc[table["choice"] != TIE]
    rows = []
    for criterion, part in [*decisive.groupby("criterion", sort=True), ("all", per_pair)]:
        n, left = len(part), int((part["choice"] == "left").sum())
        row = {"criterion": criterion, "decisive": n, "left": left, "share_left": np.nan, "ci_low": np.nan,
               "ci_high": np.nan, "p": np.nan}
        if n:
            test = stats.binomtest(left, n, p=0.5, alternative="two-sided")
            interval = test.proportion_ci(confidence_level=ci_level, method="exact")
            row.update(share_left=left / n, ci_low=float(interval.low), ci_high=float(interval.high),
                       p=float(test.pvalue))
        rows.append(row)
    return pd.DataFrame(rows)


def control_sides(judgments: pd.DataFrame, *, control_systems: set[str] | None = None) -> pd.Series:
    """The control system of each control row (None for other rows): the side named in ``control_systems``,
    by default the systems that appear only in control pairs.

    Returns
    -------
    control : pandas.Series
        Same index as the validated table; raises ValueError naming the row when a control pair has no side,
        or both sides, among the control systems.

    Examples
    --------
    >>> from empeval.analysis.kinds.pairwise.schema import judgment_rows
    >>> rows = judgment_rows([(1, "gold", "moel", "left")]) + judgment_rows(
    ...     [(2, "control-generic", "moel", "right")], is_control=True, control_target="empathy")
    >>> control_sides(pd.DataFrame(rows)).tolist()
    [None, 'control-generic']
    """
    table = validate_judgments(judgments)
    if control_systems is None:
        real_pairs = table.loc[~table["is_control"]]
        real = set(real_pairs["system_left"]) | set(real_pairs["system_right"])
        control_systems = (set(table["system_left"]) | set(table["system_right"])) - real
    left = table["system_left"].isin(control_systems)
    right = table["system_right"].isin(control_systems)
    bad = table["is_control"] & (left == right)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(f"judgments: row {row + 1} is a control pair ({table['pair'].iloc[row]!r}) but "
                         f"{'both' if left.iloc[row] else 'neither'} of its sides is a control system "
                         f"({sorted(control_systems)}); pass control_systems= with the study's controls")
    control = np.where(left, table["system_left"], table["system_right"])
    return pd.Series(np.where(table["is_control"], control, None), index=table.index, dtype=object)


def control_scores(judgments: pd.DataFrame, *, control_systems: set[str] | None = None) -> pd.DataFrame:
    """Rater quality from control pairs: a control pair puts a real response beside a control built to lose on
    one criterion, so on that criterion (``control_target``) the right answer is the real response. Each
    annotator's control judgments on their target criterion are scored: passed when the real response was
    preferred; a tie or the control fails. Judgments of control pairs on other criteria are not scored (the
    control may well win those). Which side is the control: see ``control_sides``.

    Returns
    -------
    scores : pandas.DataFrame
        One row per annotator with control judgments: ``annotator``, ``controls``, ``passed``, ``tied``,
        ``failed`` (the control preferred), ``pass_rate``.

    Examples
    --------
    >>> from empeval.analysis.kinds.pairwise.schema import judgment_rows
    >>> rows = judgment_rows([(1, "control-generic", "moel", "right"), (2, "moel", "control-generic", "tie")],
    ...                      is_control=True, control_target="empathy", criteria=("empathy", "fluency"))
    >>> rows += judgment_rows([(3, "moel", "gold", "left")])  # moel is a real system: it has real pairs
    >>> print(control_scores(pd.DataFrame(rows)).to_string(index=False))
    annotator  controls  passed  tied  failed  pass_rate
        ann-1         2       1     1       0        0.5
    """
    table = validate_judgments(judgments)
    table["control_system"] = control_sides(table, control_systems=control_systems)
    scored = table.loc[table["is_control"] & (table["criterion"] == table["control_target"])]
    columns = ["annotator", "controls", "passed", "tied", "failed", "pass_rate"]
    if scored.empty:
        return pd.DataFrame(columns=columns)
    real = np.where(scored["system_left"] == scored["control_system"], scored["system_right"], scored["system_left"])
    outcome = pd.DataFrame({"annotator": scored["annotator"], "passed": scored["preferred"].to_numpy() == real,
                            "tied": scored["preferred"] == TIE,
                            "failed": scored["preferred"] == scored["control_system"]})
    scores = outcome.groupby("annotator", sort=True).agg(controls=("passed", "size"), passed=("passed", "sum"),
                                                          tied=("tied", "sum"), failed=("failed", "sum")).reset_index()
    scores["pass_rate"] = scores["passed"] / scores["controls"]
    return scores[columns].astype({"controls": int, "passed": int, "tied": int, "failed": int})


def likert_beside_ab(ratings: pd.DataFrame, judgments: pd.DataFrame, *, focus: str | None = None) -> pd.DataFrame:
    """A linked Likert study beside the A/B study (``compare_with``): per criterion and A/B pair, the two
    systems' Likert means (the mean of their item means, controls left out) and their difference, next to the
    A/B Win / Lose / Tie shares, and whether the two protocols point the same way.

    ``ratings`` is the Likert study's tidy table (``analysis.kinds.likert.load``); ``judgments`` the A/B study's
    judgment
    table. A pair whose systems the Likert study did not rate gets NaN Likert columns.

    Returns
    -------
    side_by_side : pandas.DataFrame
        One row per criterion and pair: ``criterion``, ``system_a``, ``system_b``, ``likert_mean_a``,
        ``likert_mean_b``, ``likert_diff`` (a - b), ``likert_contexts`` (contexts rated for both),
        ``win_pct``, ``lose_pct``, ``tie_pct`` (of the A/B judgments, a's side), ``same_direction``
        (the Likert difference and wins - losses have the same sign; None when either is zero or missing).

    Examples
    --------
    >>> from empeval.analysis.kinds.pairwise.schema import judgment_rows
    >>> ratings = pd.DataFrame({"item": ["1:gold", "1:moel", "2:gold", "2:moel"], "context": ["1", "1", "2", "2"],
    ...                         "system": ["gold", "moel", "gold", "moel"], "criterion": "empathy",
    ...                         "score": [5, 3, 4, 4], "is_control": False})
    >>> ab = pd.DataFrame(judgment_rows([(1, "moel", "gold", "right"), (2, "gold", "moel", "tie")]))
    >>> table = likert_beside_ab(ratings, ab, focus="moel")
    >>> table[["system_a", "likert_diff", "win_pct", "lose_pct", "same_direction"]].values.tolist()
    [['moel', -1.0, 0.0, 50.0, True]]
    """
    missing = [c for c in ("item", "context", "system", "criterion", "score", "is_control") if c not in ratings]
    if missing:
        raise ValueError(f"likert_beside_ab needs column(s) {missing} in the Likert ratings; build them with "
                         "empeval.analysis.kinds.likert.load.tidy_from_export")
    counts = ab_counts(judgments, focus=focus)
    real = ratings.loc[~ratings["is_control"].astype(bool)]
    items = real.groupby(["criterion", "system", "context", "item"], as_index=False)["score"].mean()
    means = items.groupby(["criterion", "system"])["score"].mean()
    contexts = items.groupby(["criterion", "system"])["context"].agg(lambda c: set(map(str, c)))
    rows = []
    for row in counts.itertuples(index=False):
        a_key, b_key = (row.criterion, row.system_a), (row.criterion, row.system_b)
        mean_a, mean_b = means.get(a_key, np.nan), means.get(b_key, np.nan)
        shared = len(contexts[a_key] & contexts[b_key]) if a_key in contexts and b_key in contexts else 0
        difference = mean_a - mean_b
        votes = row.wins - row.losses
        same = None if not np.isfinite(difference) or difference == 0 or votes == 0 else \
            bool(np.sign(difference) == np.sign(votes))
        rows.append({"criterion": row.criterion, "system_a": row.system_a, "system_b": row.system_b,
                     "likert_mean_a": mean_a, "likert_mean_b": mean_b, "likert_diff": difference,
                     "likert_contexts": shared, "win_pct": row.win_pct, "lose_pct": row.lose_pct,
                     "tie_pct": row.tie_pct, "same_direction": same})
    return pd.DataFrame(rows, columns=["criterion", "system_a", "system_b", "likert_mean_a", "likert_mean_b",
                                       "likert_diff", "likert_contexts", "win_pct", "lose_pct", "tie_pct",
                                       "same_direction"])


@dataclass
class PairwiseTables:
    """Every table of the report's pairwise section, with the captions that state its rules."""

    ab: pd.DataFrame
    agreement: pd.DataFrame
    position: pd.DataFrame
    controls: pd.DataFrame
    ranking: pd.DataFrame | None
    likert: pd.DataFrame | None = None
    ab_caption: str = SIGN_TEST_CAPTION
    position_caption: str = POSITION_BIAS_CAPTION
    ranking_caption: str = ""


def in_report_order(tables: PairwiseTables, *, criteria: Sequence[str] | None = None,
                    systems: Sequence[str] | None = None) -> PairwiseTables:
    """``tables`` with every table's rows in the report's one order: criteria in ``criteria`` order (the study
    file's; others by name, position bias's pooled "all" row last), then pairs by the places of their systems in
    ``systems`` (the study file's order, analysis.report.systems); the ranking keeps its ranks within a criterion.

    Returns
    -------
    tables : PairwiseTables
        A copy of ``tables`` with the rows of ``ab``, ``agreement``, ``position``, ``ranking`` and ``likert``
        reordered (``controls``, one row per annotator, as it was); the captions unchanged.

    Examples
    --------
    >>> ab = pd.DataFrame({"criterion": ["empathy", "fluency", "fluency"], "system_a": "moel",
    ...                    "system_b": ["gold", "mime", "gold"]})
    >>> tables = PairwiseTables(ab=ab, agreement=ab[["criterion"]], position=ab[["criterion"]].iloc[:0],
    ...                         controls=pd.DataFrame(), ranking=None)
    >>> in_report_order(tables, criteria=["fluency", "empathy"], systems=["moel", "mime", "gold"]).ab.values.tolist()
    [['fluency', 'moel', 'mime'], ['fluency', 'moel', 'gold'], ['empathy', 'moel', 'gold']]
    """
    from empeval.analysis.report.systems import in_system_order
    from empeval.analysis.report.tables import criteria_in_order, in_criterion_order

    present = set().union(*(set(frame["criterion"]) for frame in (tables.ab, tables.agreement, tables.position,
                                                                  tables.likert, tables.ranking)
                            if frame is not None and "criterion" in frame.columns))
    order = criteria_in_order(sorted(str(c) for c in present - {"all"}), criteria)

    def ordered(frame: pd.DataFrame | None, columns: tuple[str, ...] = ()) -> pd.DataFrame | None:
        if frame is None or frame.empty or "criterion" not in frame.columns:
            return frame
        frame = in_criterion_order(frame, order)
        return in_system_order(frame, systems, ("criterion", *columns)) if systems is not None and columns else frame

    return replace(tables, ab=ordered(tables.ab, ("system_a", "system_b")), agreement=ordered(tables.agreement),
                   position=ordered(tables.position), ranking=ordered(tables.ranking),
                   likert=ordered(tables.likert, ("system_a", "system_b")))


def pairwise_tables(judgments: pd.DataFrame, *, focus: str | None = None, include_late: bool = True,
                    correction: str = "holm", alpha: float = 0.05, control_systems: set[str] | None = None,
                    n_boot: int = 1000, ci_level: float = 0.95, seed: int = 0,
                    likert: pd.DataFrame | None = None) -> PairwiseTables:
    """All the pairwise tables of a study from its judgment table: ``ab_table`` (with ``focus`` as "ours"),
    ``choice_agreement``, ``position_bias``, ``control_scores`` and, with more than two systems,
    ``empeval.analysis.stats.bradley_terry.ranking`` (Davidson's ties when the study has ties) with ``n_boot`` bootstrap
    resamples of contexts. ``include_late=False`` drops judgments submitted after their assignment expired.
    ``likert``: the tidy ratings of a linked Likert study (``compare_with``), shown beside the A/B table by
    ``likert_beside_ab``.

    Returns
    -------
    tables : PairwiseTables
        ``ab``, ``agreement``, ``position``, ``controls``, ``ranking`` (None with two systems), ``likert``
        (None without a linked Likert study) and the captions ``ab_caption``, ``position_caption``, ``ranking_caption``.

    Examples
    --------
    >>> from empeval.analysis.simulate.pairwise import simulate_pairwise_study
    >>> study = simulate_pairwise_study(n_contexts=12, anchor="moel", k=2, seed=3)
    >>> tables = pairwise_tables(study.judgments, focus="moel", n_boot=50)
    >>> sorted(set(tables.ab["system_b"])), tables.ranking is not None
    (['baseline', 'gold'], True)
    """
    from empeval.analysis.stats.bradley_terry import RANKING_CAPTION, ranking

    table = validate_judgments(judgments)
    if not include_late:
        table = table.loc[~table["late"]].reset_index(drop=True)
    real = table.loc[~table["is_control"]]
    systems = set(real["system_left"]) | set(real["system_right"])
    ranked = (ranking(table, n_boot=n_boot, ci_level=ci_level, seed=seed) if len(systems) > 2 else None)
    return PairwiseTables(
        ab=ab_table(table, focus=focus, correction=correction, alpha=alpha),
        agreement=choice_agreement(table, n_boot=n_boot, ci_level=ci_level, seed=seed),
        position=position_bias(table, ci_level=ci_level),
        controls=control_scores(table, control_systems=control_systems),
        ranking=ranked,
        likert=None if likert is None else likert_beside_ab(likert, table, focus=focus),
        ranking_caption=RANKING_CAPTION if ranked is not None else "",
    )
