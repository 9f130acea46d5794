"""The chat report's tables, pure functions over the validated tables of analysis.kinds.chat.schema.

The unit is the conversation (one placement, ``(assignment_id, conversation_id)``): one rater talked with one
system about one prompt and rated the whole conversation once per criterion, so a conversation's score on a
criterion is one rating. Systems are rated on *different* conversations (each prompt once per system, in
different sessions, usually by different raters), so the comparisons are unpaired:

- Means: per criterion and system, the mean score over its conversations with a Student t-interval
  (mean +- t(n-1) s / sqrt(n)); a t-interval rather than a bootstrap because a percentile bootstrap of a few
  conversations on a 1-5 scale is too narrow.
- Tests: per criterion and pair of systems, Welch's unequal-variance t-test (Welch 1947; scipy's ttest_ind with
  equal_var=False) and the Mann-Whitney U test (Mann & Whitney 1947; scipy's mannwhitneyu, two-sided, its default
  method: exact for small samples without ties, else the normal approximation with tie and continuity
  correction), with the rank-biserial correlation r = 2 U_a / (n_a n_b) - 1 = 1 - 2 U_b / (n_a n_b) (Kerby 2014's
  simple difference formula: the share of the (a, b) pairs of conversations a won minus the share b won, ties
  counted half), positive when system_a's conversations score higher, as ``mean_diff = mean_a - mean_b`` is.
  Each test's p-values are Holm-adjusted (Holm 1979) over the whole family of pairs x criteria.
- Mixed model: ``score ~ system + (1 | rater) + (1 | prompt)``, crossed random intercepts for the rater and the
  prompt (``context_id``), the Likert report's model (analysis.stats.rater_aware.mixed_model_pairs over
  analysis.stats.crossed: moment estimates refined to REML on small designs, GLS fixed effects, a Wald test per
  pair), Holm-adjusted over pairs x criteria; a table that says why when it cannot be fitted.
- Per-turn annotations: per system and question, the share of its annotated turns the raters ticked, with
  Wilson score intervals (Wilson 1927; statsmodels' proportion_confint).
- Length, latency and failures: per system, the conversations claimed, ended, failed (the model did not answer)
  and still open, the failure rate among the finished ones (Wilson interval), the ended conversations' length in
  utterances, and the system's latency (per system turn).
- Controls: every partner's means, controls beside the real systems; per control conversation, whether its rater
  scored it high (>= the scale's maximum - 1 on the control's target criterion, or on every criterion when it has
  none); the raters who did are flagged.

Control partners are left out of every comparison (means, tests, mixed model) and shown in their own tables.
"""
from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from empeval.analysis.report.tables import criteria_in_order
from empeval.analysis.stats.significance import adjust_pvalues

CONVERSATION = ("assignment_id", "conversation_id")
#: The random intercepts of the mixed model: the rater and the prompt.
RANDOM_EFFECTS = ("annotator", "context_id")
MEANS_COLUMNS = ("criterion", "system", "is_control", "control_target", "conversations", "mean", "sd", "ci_low",
                 "ci_high")
TEST_COLUMNS = ("criterion", "system_a", "system_b", "n_a", "n_b", "mean_a", "mean_b", "mean_diff", "welch_t",
                "welch_df", "p_welch", "p_welch_adj", "mw_u", "p_mw", "p_mw_adj", "rank_biserial", "note")
MIXED_COLUMNS = ("criterion", "system_a", "system_b", "lmm_diff", "lmm_se", "lmm_z", "lmm_p", "lmm_p_adj",
                 "conversations", "raters", "prompts", "note")
RATE_COLUMNS = ("system", "is_control", "question", "turns", "checked", "rate", "ci_low", "ci_high")
LENGTH_COLUMNS = ("system", "is_control", "conversations", "ended", "failed", "open", "failure_rate",
                  "failure_ci_low", "failure_ci_high", "utterances_mean", "utterances_median", "system_turns",
                  "latency_mean_ms", "latency_median_ms", "latency_p90_ms")
FAILURE_COLUMNS = ("system", "failure", "conversations")
CHECK_COLUMNS = ("annotator", "assignment_id", "conversation_id", "system", "control_target", "scores", "threshold",
                 "high")
#: The scale a report assumes when the study's meta does not give one (an export file).
DEFAULT_SCALE = (1, 5)


def real_ratings(ratings: pd.DataFrame) -> pd.DataFrame:
    """The ratings of conversations with real systems (controls left out).

    Returns
    -------
    ratings : pandas.DataFrame
        The rows of `ratings` whose ``is_control`` is false, re-indexed.

    Examples
    --------
    >>> real_ratings(pd.DataFrame({"system": ["a", "c"], "is_control": [False, True]}))["system"].tolist()
    ['a']
    """
    return ratings.loc[~ratings["is_control"].astype(bool)].reset_index(drop=True)


def t_interval(values: np.ndarray, *, level: float = 0.95) -> tuple[float, float, float, float]:
    """The mean, the standard deviation (ddof 1) and the Student t-interval of the mean,
    mean +- t_{n-1, (1+level)/2} s / sqrt(n); NaN sd and interval for fewer than two values.

    Returns
    -------
    mean, sd, low, high : float

    Examples
    --------
    >>> [round(v, 3) for v in t_interval(np.array([2.0, 4.0, 3.0, 5.0]))]
    [3.5, 1.291, 1.446, 5.554]
    """
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return (float("nan"),) * 4
    mean = float(values.mean())
    if values.size < 2:
        return mean, float("nan"), float("nan"), float("nan")
    sd = float(values.std(ddof=1))
    half = float(stats.t.ppf((1 + level) / 2, values.size - 1) * sd / np.sqrt(values.size))
    return mean, sd, mean - half, mean + half


def conversation_means(ratings: pd.DataFrame, *, criteria: Sequence[str] | None = None,
                       include_controls: bool = False, ci_level: float = 0.95) -> pd.DataFrame:
    """Per criterion and system, the mean of its conversations' scores with a Student t-interval over
    conversations (``t_interval``); controls left out unless `include_controls` (then after the real systems).

    Returns
    -------
    means : pandas.DataFrame
        Columns ``MEANS_COLUMNS``; criteria in the order of `criteria` (others after, sorted), then real systems
        by name, then controls; ``control_target`` is a control's target criterion ("" for every criterion),
        None for a real system.

    Examples
    --------
    >>> ratings = pd.DataFrame({"criterion": "empathy", "system": ["a", "a", "b"], "is_control": False,
    ...                         "control_target": None, "score": [4, 5, 2]})
    >>> conversation_means(ratings)[["system", "conversations", "mean"]].values.tolist()
    [['a', 2, 4.5], ['b', 1, 2.0]]
    """
    data = ratings if include_controls else real_ratings(ratings)
    rows = []
    for criterion in criteria_in_order(data["criterion"].unique(), criteria):
        part = data.loc[data["criterion"] == criterion]
        for (is_control, system), group in part.groupby([part["is_control"].astype(bool), "system"], sort=True):
            mean, sd, low, high = t_interval(group["score"].to_numpy(dtype=float), level=ci_level)
            target = (group["control_target"].fillna("").iloc[0] or "") if is_control else None
            rows.append({"criterion": criterion, "system": system, "is_control": bool(is_control),
                         "control_target": target, "conversations": len(group), "mean": mean, "sd": sd,
                         "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows, columns=list(MEANS_COLUMNS))


def rank_biserial(u_a: float, n_a: int, n_b: int) -> float:
    """The rank-biserial correlation of a Mann-Whitney U (Kerby 2014): r = 2 U_a / (n_a n_b) - 1, where U_a counts
    the pairs (one of a's values, one of b's) that a's value wins, ties counted half (scipy's statistic for its
    first sample); equal to 1 - 2 U_b / (n_a n_b). +1: every value of a beats every value of b.

    Returns
    -------
    r : float
        In [-1, 1]; NaN when a sample is empty.

    Examples
    --------
    >>> rank_biserial(6.0, 3, 2)
    1.0
    >>> rank_biserial(1.5, 2, 2)
    -0.25
    """
    if n_a < 1 or n_b < 1:
        return float("nan")
    return 2.0 * u_a / (n_a * n_b) - 1.0


def welch_test(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float, str]:
    """Welch's unequal-variance t-test of two samples (scipy.stats.ttest_ind, equal_var=False), two-sided.

    Returns
    -------
    t, df, p : float
        NaN when undefined: fewer than two values in a sample, or no variation in either.
    note : str
        Why the test is undefined ("" when it is not).

    Examples
    --------
    >>> t, df, p, note = welch_test(np.array([3.0, 4, 5]), np.array([1.0, 2, 2, 3]))
    >>> round(t, 3), round(p, 3), note
    (2.828, 0.049, '')
    >>> welch_test(np.array([3.0, 3]), np.array([3.0, 3]))[3]
    'Welch: no variation within either system'
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if min(a.size, b.size) < 2:
        return float("nan"), float("nan"), float("nan"), "Welch: fewer than 2 conversations of a system"
    if a.var() == 0 and b.var() == 0:
        return float("nan"), float("nan"), float("nan"), "Welch: no variation within either system"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy's precision warning for a constant sample
        result = stats.ttest_ind(a, b, equal_var=False)
    return float(result.statistic), float(result.df), float(result.pvalue), ""


def mann_whitney(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """The two-sided Mann-Whitney U test of two samples (scipy.stats.mannwhitneyu, its default method) and the
    rank-biserial r (``rank_biserial``).

    Returns
    -------
    u_a, p, r : float
        U of the first sample, its p-value and r; NaN when a sample is empty.

    Examples
    --------
    >>> u, p, r = mann_whitney(np.array([3.0, 4, 5]), np.array([1.0, 2]))
    >>> u, round(p, 3), r
    (6.0, 0.2, 1.0)
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if min(a.size, b.size) < 1:
        return float("nan"), float("nan"), float("nan")
    result = stats.mannwhitneyu(a, b, alternative="two-sided")
    u_a = float(result.statistic)
    return u_a, float(result.pvalue), rank_biserial(u_a, a.size, b.size)


def unpaired_tests(ratings: pd.DataFrame, *, criteria: Sequence[str] | None = None,
                   correction: str = "holm") -> pd.DataFrame:
    """Per criterion and pair of real systems (a < b by name), Welch's t-test and the Mann-Whitney U test of their
    conversations' scores, the rank-biserial r, and each test's p-values adjusted (`correction`, Holm by default,
    analysis.stats.significance.adjust_pvalues) over all the pairs x criteria.

    Returns
    -------
    tests : pandas.DataFrame
        Columns ``TEST_COLUMNS``: ``n_a``, ``n_b`` conversations; ``mean_diff = mean_a - mean_b``; ``welch_t``,
        ``welch_df``, ``p_welch`` and ``p_welch_adj``; ``mw_u`` (U of system_a), ``p_mw`` and ``p_mw_adj``;
        ``rank_biserial`` (positive when a scores higher); ``note``: why a test is undefined. No rows with fewer
        than two systems.

    Examples
    --------
    >>> ratings = pd.DataFrame({"criterion": "empathy", "system": ["a"] * 3 + ["b"] * 3, "is_control": False,
    ...                         "score": [4, 5, 4, 2, 3, 2]})
    >>> tests = unpaired_tests(ratings)
    >>> tests[["system_a", "system_b", "mean_diff", "mw_u", "rank_biserial"]].round(3).values.tolist()
    [['a', 'b', 2.0, 9.0, 1.0]]
    """
    data = real_ratings(ratings)
    rows = []
    for criterion in criteria_in_order(data["criterion"].unique(), criteria):
        part = data.loc[data["criterion"] == criterion]
        scores = {system: group["score"].to_numpy(dtype=float) for system, group in part.groupby("system")}
        for system_a, system_b in itertools.combinations(sorted(scores), 2):
            a, b = scores[system_a], scores[system_b]
            t, df, p_t, note = welch_test(a, b)
            u, p_u, r = mann_whitney(a, b)
            rows.append({"criterion": criterion, "system_a": system_a, "system_b": system_b, "n_a": a.size,
                         "n_b": b.size, "mean_a": float(a.mean()), "mean_b": float(b.mean()),
                         "mean_diff": float(a.mean() - b.mean()), "welch_t": t, "welch_df": df, "p_welch": p_t,
                         "mw_u": u, "p_mw": p_u, "rank_biserial": r, "note": note})
    tests = pd.DataFrame(rows, columns=[c for c in TEST_COLUMNS if c not in ("p_welch_adj", "p_mw_adj")])
    tests["p_welch_adj"] = adjust_pvalues(tests["p_welch"].to_numpy(dtype=float), method=correction)
    tests["p_mw_adj"] = adjust_pvalues(tests["p_mw"].to_numpy(dtype=float), method=correction)
    return tests[list(TEST_COLUMNS)]


def why_no_mixed_model(part: pd.DataFrame) -> str:
    """Why the mixed model cannot be fitted to one criterion's real ratings ("" when it can be tried): no ratings,
    one system, one rater, one prompt.

    Returns
    -------
    reason : str

    Examples
    --------
    >>> why_no_mixed_model(pd.DataFrame({"system": ["a", "b"], "annotator": ["r1", "r1"], "context_id": [1, 2]}))
    'one rater (r1): her intercept cannot be told from the systems and the residual'
    """
    if part.empty:
        return "no ratings of real systems"
    systems = sorted(part["system"].unique())
    if len(systems) < 2:
        return f"one system ({systems[0]}): nothing to compare"
    raters = sorted(part["annotator"].unique())
    if len(raters) < 2:
        return f"one rater ({raters[0]}): her intercept cannot be told from the systems and the residual"
    if part["context_id"].nunique() < 2:
        return "one prompt: its intercept cannot be told from the systems and the residual"
    return ""


def mixed_model_table(ratings: pd.DataFrame, *, criteria: Sequence[str] | None = None,
                      correction: str = "holm") -> pd.DataFrame:
    """Per criterion and pair of real systems, the difference of their fixed effects in the linear mixed model
    ``score ~ system + (1 | annotator) + (1 | context_id)`` (crossed random intercepts for rater and prompt; the
    Likert report's model, analysis.stats.rater_aware.mixed_model_pairs with the moment estimator of
    analysis.stats.crossed, refined to REML on small designs), its Wald test, and the p-values adjusted
    (`correction`) over all the pairs x criteria. Never raises for a design it cannot fit: one row per criterion
    saying why (``why_no_mixed_model``), or the fitting's own message, with NaN estimates.

    Returns
    -------
    mixed : pandas.DataFrame
        Columns ``MIXED_COLUMNS``: ``lmm_diff`` (a - b), ``lmm_se``, ``lmm_z``, ``lmm_p``, ``lmm_p_adj``; the
        conversations, raters and prompts the criterion's fit used; ``note`` (why not fitted, or the fit's
        boundary or convergence notes).

    Examples
    --------
    >>> ratings = pd.DataFrame({"criterion": "empathy", "system": ["a", "b"], "is_control": False,
    ...                         "annotator": "r1", "context_id": [1, 2], "score": [4, 2]})
    >>> mixed_model_table(ratings)[["system_a", "system_b", "lmm_p", "note"]].values.tolist()  # doctest: +ELLIPSIS
    [['a', '', nan, 'one rater (r1): ...']]
    """
    from empeval.analysis.stats.rater_aware import mixed_model_pairs

    data = real_ratings(ratings)
    frames = []
    for criterion in criteria_in_order(data["criterion"].unique(), criteria):
        part = data.loc[data["criterion"] == criterion]
        counts = {"conversations": len(part), "raters": part["annotator"].nunique(),
                  "prompts": part["context_id"].nunique()}
        why = why_no_mixed_model(part)
        if why:
            systems = sorted(part["system"].unique())
            frames.append(pd.DataFrame([{"criterion": criterion, "system_a": systems[0] if systems else "",
                                         "system_b": "", "lmm_diff": np.nan, "lmm_se": np.nan, "lmm_z": np.nan,
                                         "lmm_p": np.nan, **counts, "note": why}]))
            continue
        with warnings.catch_warnings():
            # The REML optimiser steps through infinite likelihoods on a degenerate design (inf - inf in its
            # finite differences); the fit then says what went wrong in its note.
            warnings.simplefilter("ignore", RuntimeWarning)
            pairs = mixed_model_pairs(part, criterion=criterion, random_effects=RANDOM_EFFECTS)
        frames.append(pairs.rename(columns={"lmm_note": "note"}).assign(**counts))
    if not frames:
        return pd.DataFrame(columns=list(MIXED_COLUMNS))
    table = pd.concat(frames, ignore_index=True)
    table["lmm_p_adj"] = adjust_pvalues(table["lmm_p"].to_numpy(dtype=float), method=correction)
    table["note"] = table["note"].fillna("")
    return table[list(MIXED_COLUMNS)]


def wilson_interval(successes: int, n: int, *, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (Wilson 1927), statsmodels' proportion_confint(method="wilson").

    Returns
    -------
    low, high : float
        NaN for n = 0.

    Examples
    --------
    >>> [round(v, 4) for v in wilson_interval(5, 10)]
    [0.2366, 0.7634]
    """
    if n < 1:
        return float("nan"), float("nan")
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(successes, n, alpha=1 - level, method="wilson")
    return float(low), float(high)


def annotation_rates(annotations: pd.DataFrame, *, questions: Sequence[str] | None = None,
                     ci_level: float = 0.95) -> pd.DataFrame:
    """Per system and per-turn question, the share of the system's annotated turns on which the raters ticked it,
    with a Wilson interval (``wilson_interval``); real systems first, then controls.

    Returns
    -------
    rates : pandas.DataFrame
        Columns ``RATE_COLUMNS``: ``turns`` (annotated turns), ``checked`` (ticked), ``rate``; questions in the
        order of `questions` (the study's), others after, sorted.

    Examples
    --------
    >>> annotations = pd.DataFrame({"system": "a", "is_control": False, "question": "empathetic",
    ...                             "checked": [True, False, False, False]})
    >>> annotation_rates(annotations)[["question", "turns", "checked", "rate"]].values.tolist()
    [['empathetic', 4, 1, 0.25]]
    """
    order = criteria_in_order(annotations["question"].unique(), questions)
    rank = {question: i for i, question in enumerate(order)}
    rows = []
    for (is_control, system, question), group in annotations.groupby(
            [annotations["is_control"].astype(bool), "system", "question"], sort=True):
        n, ticked = len(group), int(group["checked"].astype(bool).sum())
        low, high = wilson_interval(ticked, n, level=ci_level)
        rows.append({"system": system, "is_control": bool(is_control), "question": question, "turns": n,
                     "checked": ticked, "rate": ticked / n, "ci_low": low, "ci_high": high})
    rates = pd.DataFrame(rows, columns=list(RATE_COLUMNS))
    keys = list(zip(rates["is_control"], rates["system"], rates["question"].map(rank), strict=True))
    return rates.iloc[sorted(range(len(rates)), key=keys.__getitem__)].reset_index(drop=True)


def length_latency(conversations: pd.DataFrame, *, turns: pd.DataFrame | None = None,
                   ci_level: float = 0.95) -> pd.DataFrame:
    """Per partner, its conversations' states, model failures, length and latency, from the conversations table
    (and the turns table, for the latency's median and 90th percentile over system turns).

    The failure rate is failed / (ended + failed): among the conversations that came to an end (open ones, never
    ended, may yet fail), with a Wilson interval. The length is over ended conversations (a failed one is cut
    short). The mean latency is per system turn: each conversation's mean_latency_ms weighted by its system turns.

    Returns
    -------
    length : pandas.DataFrame
        Columns ``LENGTH_COLUMNS``, real systems first (by name), then controls; NaN where nothing was measured.

    Examples
    --------
    >>> conversations = pd.DataFrame({"system": "a", "is_control": False, "state": ["ended", "ended", "failed"],
    ...                               "utterances": [6, 8, 1], "system_turns": [3, 4, 0],
    ...                               "mean_latency_ms": [100.0, 200.0, float("nan")]})
    >>> row = length_latency(conversations).iloc[0]
    >>> int(row["failed"]), round(float(row["failure_rate"]), 3), float(row["utterances_mean"]), round(
    ...     float(row["latency_mean_ms"]), 1)
    (1, 0.333, 7.0, 157.1)
    """
    system_turns = None
    if turns is not None:
        said = turns.loc[(turns["speaker"] == "system") & turns["latency_ms"].notna()]
        system_turns = said.groupby("system")["latency_ms"]
    rows = []
    for (is_control, system), group in conversations.groupby(
            [conversations["is_control"].astype(bool), "system"], sort=True):
        states = group["state"].value_counts()
        ended, failed = int(states.get("ended", 0)), int(states.get("failed", 0))
        finished = ended + failed
        low, high = wilson_interval(failed, finished, level=ci_level)
        lengths = group.loc[group["state"] == "ended", "utterances"].to_numpy(dtype=float)
        timed = group.loc[(group["system_turns"] > 0) & group["mean_latency_ms"].notna()]
        weights = timed["system_turns"].to_numpy(dtype=float)
        latencies = (system_turns.get_group(system).to_numpy(dtype=float)
                     if system_turns is not None and system in system_turns.groups else np.array([]))
        rows.append({
            "system": system, "is_control": bool(is_control), "conversations": len(group), "ended": ended,
            "failed": failed, "open": int(states.get("open", 0)),
            "failure_rate": failed / finished if finished else np.nan, "failure_ci_low": low, "failure_ci_high": high,
            "utterances_mean": float(lengths.mean()) if lengths.size else np.nan,
            "utterances_median": float(np.median(lengths)) if lengths.size else np.nan,
            "system_turns": int(group["system_turns"].sum()),
            "latency_mean_ms": (float(np.average(timed["mean_latency_ms"], weights=weights)) if weights.sum() > 0
                                else np.nan),
            "latency_median_ms": float(np.median(latencies)) if latencies.size else np.nan,
            "latency_p90_ms": float(np.quantile(latencies, 0.9)) if latencies.size else np.nan})
    return pd.DataFrame(rows, columns=list(LENGTH_COLUMNS))


def failure_reasons(conversations: pd.DataFrame) -> pd.DataFrame:
    """Per partner, the reasons its failed conversations give (the model did not answer: a timeout, an error),
    most frequent first.

    Returns
    -------
    failures : pandas.DataFrame
        Columns ``FAILURE_COLUMNS``; an empty reason reads "(no reason recorded)".

    Examples
    --------
    >>> conversations = pd.DataFrame({"system": ["a", "a", "b"], "state": ["failed", "failed", "ended"],
    ...                               "failure": ["timeout", "timeout", None]})
    >>> failure_reasons(conversations).values.tolist()
    [['a', 'timeout', 2]]
    """
    failed = conversations.loc[conversations["state"] == "failed"]
    reasons = failed["failure"].fillna("").replace("", "(no reason recorded)")
    counts = failed.assign(failure=reasons).groupby(["system", "failure"]).size().rename("conversations")
    counts = counts.reset_index().sort_values(["system", "conversations", "failure"], ascending=[True, False, True],
                                              kind="stable", ignore_index=True)
    return counts[list(FAILURE_COLUMNS)]


def control_checks(ratings: pd.DataFrame, *, scale: tuple[int, int] = DEFAULT_SCALE) -> pd.DataFrame:
    """Per rated control conversation, whether its rater scored it high: at least the scale's maximum - 1 on the
    control's target criterion, or on every criterion rated when the control has no target (a control built to
    fail everything, such as a generic partner, may still be fluent: one high score alone does not count then).

    Returns
    -------
    checks : pandas.DataFrame
        Columns ``CHECK_COLUMNS``: ``scores`` the criteria checked and their scores ("empathy 5"),
        ``threshold`` the least high score, ``high``; sorted by rater.

    Examples
    --------
    >>> ratings = pd.DataFrame({"annotator": "r1", "assignment_id": 1, "conversation_id": 9, "system": "bad",
    ...                         "is_control": True, "control_target": "empathy", "criterion": ["empathy", "fluency"],
    ...                         "score": [5, 5]})
    >>> control_checks(ratings)[["annotator", "scores", "high"]].values.tolist()
    [['r1', 'empathy 5', True]]
    """
    threshold = int(scale[1]) - 1
    controls = ratings.loc[ratings["is_control"].astype(bool)]
    rows = []
    for (assignment, conversation), part in controls.groupby(list(CONVERSATION), sort=True):
        target = part["control_target"].fillna("").iloc[0] or ""
        checked = part.loc[part["criterion"] == target] if target else part
        rows.append({"annotator": part["annotator"].iloc[0], "assignment_id": assignment,
                     "conversation_id": conversation, "system": part["system"].iloc[0], "control_target": target,
                     "scores": ", ".join(f"{c} {s}" for c, s in zip(checked["criterion"], checked["score"],
                                                                     strict=True)),
                     "threshold": threshold,
                     "high": bool(len(checked)) and bool((checked["score"] >= threshold).all())})
    checks = pd.DataFrame(rows, columns=list(CHECK_COLUMNS))
    return checks.sort_values(["annotator", "assignment_id", "conversation_id"], kind="stable", ignore_index=True)


def flagged_by_controls(checks: pd.DataFrame) -> list[str]:
    """The raters who scored at least one control conversation high (``control_checks``), sorted.

    Returns
    -------
    raters : list of str

    Examples
    --------
    >>> flagged_by_controls(pd.DataFrame({"annotator": ["r2", "r1", "r2"], "high": [True, False, True]}))
    ['r2']
    """
    return sorted(set(checks.loc[checks["high"].astype(bool), "annotator"]))


@dataclass
class ChatTables:
    """Every table of a chat report; None where the table it is computed from was not given."""

    ratings: pd.DataFrame  # the ratings analysed (late ones and flagged raters left out as asked)
    means: pd.DataFrame
    tests: pd.DataFrame
    mixed: pd.DataFrame
    controls: pd.DataFrame  # every partner's means, controls beside the real systems, from every rater
    checks: pd.DataFrame
    flagged: list[str]
    excluded: list[str]
    rates: pd.DataFrame | None = None
    length: pd.DataFrame | None = None
    failures: pd.DataFrame | None = None
    dropped: dict[str, int] = field(default_factory=dict)  # ratings left out: "late", "flagged"


def chat_tables(ratings: pd.DataFrame, *, conversations: pd.DataFrame | None = None,
                turns: pd.DataFrame | None = None, turn_annotations: pd.DataFrame | None = None,
                criteria: Sequence[str] | None = None, questions: Sequence[str] | None = None,
                scale: tuple[int, int] = DEFAULT_SCALE, include_late: bool = True, exclude_flagged: bool = True,
                correction: str = "holm", ci_level: float = 0.95) -> ChatTables:
    """Every table of the chat report from the validated tables (analysis.kinds.chat.schema): late answers left out
    of every table unless `include_late`; the raters the controls flag (``control_checks``) left out of the
    comparisons and the annotation rates when `exclude_flagged` (the control tables keep everyone, and length,
    latency and failures, which the systems do, keep every conversation).

    Returns
    -------
    tables : ChatTables

    Examples
    --------
    >>> ratings = pd.DataFrame({"assignment_id": [1, 2], "conversation_id": [1, 2], "annotator": ["r1", "r2"],
    ...                         "context_id": [1, 2], "criterion": "empathy", "system": ["a", "b"],
    ...                         "is_control": False, "control_target": None, "score": [4, 2], "late": False})
    >>> chat_tables(ratings).means[["system", "mean"]].values.tolist()
    [['a', 4.0], ['b', 2.0]]
    """
    late_assignments: set = set()
    if not include_late:
        late_assignments = set(ratings.loc[ratings["late"].astype(bool), "assignment_id"])
        if conversations is not None:
            late_assignments |= set(conversations.loc[conversations["late"].astype(bool), "assignment_id"])
    timely = _without(ratings, late_assignments)
    checks = control_checks(timely, scale=scale)
    flagged = flagged_by_controls(checks)
    excluded = flagged if exclude_flagged else []
    analysed = timely.loc[~timely["annotator"].isin(excluded)].reset_index(drop=True)
    rates = None
    if turn_annotations is not None:
        annotated = _without(turn_annotations, late_assignments)
        rates = annotation_rates(annotated.loc[~annotated["annotator"].isin(excluded)], questions=questions,
                                 ci_level=ci_level)
    length = failures = None
    if conversations is not None:
        kept = _without(conversations, late_assignments)
        length = length_latency(kept, turns=None if turns is None else _without(turns, late_assignments),
                                ci_level=ci_level)
        failures = failure_reasons(kept)
    return ChatTables(
        ratings=analysed, means=conversation_means(analysed, criteria=criteria, ci_level=ci_level),
        tests=unpaired_tests(analysed, criteria=criteria, correction=correction),
        mixed=mixed_model_table(analysed, criteria=criteria, correction=correction),
        controls=conversation_means(timely, criteria=criteria, include_controls=True, ci_level=ci_level),
        checks=checks, flagged=flagged, excluded=excluded, rates=rates, length=length, failures=failures,
        dropped={"late": len(ratings) - len(timely), "flagged": len(timely) - len(analysed)})


def _without(table: pd.DataFrame, assignments: set) -> pd.DataFrame:
    """`table` without the rows of `assignments`."""
    if not assignments:
        return table.reset_index(drop=True)
    return table.loc[~table["assignment_id"].isin(assignments)].reset_index(drop=True)
