"""Model-assisted net preferences of an A/B study: PPI++ with a judge of differences as the predictor.

An A/B study with a human share (design.human_share) has people judge the pairs of a seeded sample of its contexts,
and a judge of differences (pairwise-http-judge) compare the pairs of every context. For one criterion and pair
(A, B), a context's label is its net preference for A, the mean over its judgments of +1 (A chosen), -1 (B chosen)
and 0 (a tie), and the judge's verdict on the pair (A's advantage in the judge's own steps) predicts it. The
estimate of A's mean net preference is PPI++'s for a mean (Angelopoulos, Duchi and Zrnic 2023), computed by
``analysis.stats.ppi.differences.ppi_difference_interval``: unbiased for every weight lambda, lambda tuned to the
narrowest interval (so the verdicts' units need not be a label's), and lambda = 0 is the human-only mean. The
p-values test no preference, Holm-corrected over the table's rows (every pair and criterion), as the A/B table's
sign tests are.

An actively sampled A/B study (design.sampling = "active": each context drawn for people with its own recorded
probability, ``design_sample``'s ``inclusion_probability``) gets the inverse-probability weighted PPI++ of
``analysis.stats.ppi.active.ipw_ppi_mean_interval`` over every context of the study instead (Zrnic and Candès,
ICML 2024, with the offset of the generalised regression estimator), and its human-only column is the weighted
(Hájek) mean. While a drawn context's judgments have not all come in, the judged ones are taken for a uniform
subsample of the drawn ones: each context's probability is scaled by the share judged
(``analysis.stats.ppi.active.observed_probabilities``), and the paragraph says how many are judged so far.

A pair's row says why it has no model-assisted numbers instead: no context only the judge compared (a study
without a human share), fewer than two contexts people judged, or the judge failed on contexts people judged (on
any context of an actively sampled study: its estimator needs every verdict).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from empeval.analysis.kinds.pairwise.schema import PAIR_SEPARATOR, TIE

# The estimators (scipy, statsmodels) are imported where the table is computed: the A/B decisions' look imports this
# module for ``oriented_verdicts`` when the annotation app starts, and must not pay for them there.

NET_PREFERENCE_COLUMNS = (
    "criterion", "system_a", "system_b", "n_human", "n_judge_only", "correlation", "human_diff", "human_ci_low",
    "human_ci_high", "ppi_diff", "ppi_ci_low", "ppi_ci_high", "lam", "p_ppi", "p_adj", "width_ratio",
    "effective_n_human", "note",
)


def context_net_preferences(judgments: pd.DataFrame, system_a: str, system_b: str, criterion: str) -> pd.Series:
    """Each context's net preference for `system_a` over `system_b` on `criterion`: the mean over its real (not
    control) judgments of the pair of +1 when `system_a` was chosen, -1 when `system_b` was, 0 for a tie; indexed by
    context id, sorted.

    Returns
    -------
    labels : pandas.Series

    Examples
    --------
    >>> judgments = pd.DataFrame({"context_id": [1, 1, 2], "criterion": "empathy", "pair": "a|b",
    ...                           "preferred": ["a", "tie", "b"], "is_control": False})
    >>> context_net_preferences(judgments, "b", "a", "empathy").to_dict()
    {1: -0.5, 2: 1.0}
    """
    pair = PAIR_SEPARATOR.join(sorted((system_a, system_b)))
    rows = judgments[(judgments["pair"] == pair) & (judgments["criterion"] == criterion) & ~judgments["is_control"]]
    value = np.where(rows["preferred"] == system_a, 1.0, np.where(rows["preferred"] == TIE, 0.0, -1.0))
    return pd.Series(value, index=rows["context_id"].to_numpy()).groupby(level=0).mean().sort_index()


def oriented_verdicts(pair_scores: pd.DataFrame, system_a: str, system_b: str, criterion: str) -> pd.Series:
    """A judge of differences' verdicts on the pair (`system_a`, `system_b`) and `criterion`, per context, as
    `system_a`'s advantage (a stored row names its pair in either order: negated when it names `system_b` first);
    failed verdicts (NaN) left out.

    Returns
    -------
    verdicts : pandas.Series

    Examples
    --------
    >>> scores = pd.DataFrame({"criterion": "empathy", "context_id": [1, 2, 3], "system_a": ["a", "a", "a"],
    ...                        "system_b": ["b", "b", "b"], "judge_diff": [1.0, -0.5, float("nan")]})
    >>> oriented_verdicts(scores, "b", "a", "empathy").to_dict()
    {1: -1.0, 2: 0.5}
    """
    rows = pair_scores[(pair_scores["criterion"] == criterion)
                       & (((pair_scores["system_a"] == system_a) & (pair_scores["system_b"] == system_b))
                          | ((pair_scores["system_a"] == system_b) & (pair_scores["system_b"] == system_a)))]
    rows = rows[rows["judge_diff"].notna()]
    sign = np.where(rows["system_a"] == system_a, 1.0, -1.0)
    return pd.Series(rows["judge_diff"].to_numpy(dtype=float) * sign,
                     index=rows["context_id"].to_numpy()).groupby(level=0).first().sort_index()


def model_assisted_net_preferences(judgments: pd.DataFrame, pair_scores: pd.DataFrame,
                                   design_sample: pd.DataFrame | None = None, *, focus: str | None = None,
                                   ci_level: float = 0.95) -> pd.DataFrame:
    """Per criterion and pair of the judgments (real pairs only), A's mean net preference over B, human-only and
    PPI++ with the judge of differences' verdicts (module docstring), A the `focus` system when the pair holds it,
    else the pair's first system in sorted order. The contexts only the judge compared are those the design leaves
    to it (`design_sample`: ``context_id``, ``sampled``), or without a design record those with a verdict and no
    judgment.

    Returns
    -------
    table : pandas.DataFrame
        NET_PREFERENCE_COLUMNS, one row per criterion and pair: ``n_human`` and ``n_judge_only`` contexts,
        ``correlation`` (Pearson's r of verdicts and labels where people judged), the human-only mean and interval,
        the PPI++ mean, interval and p-value (``p_adj``: Holm over the rows), ``lam``, ``width_ratio`` (PPI++ width
        over human-only width) and ``effective_n_human``; ``note`` says why a row has no PPI++ numbers (empty
        otherwise).

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> advantage = rng.normal(0.3, 1.0, 60)                      # sys-a's true advantage per context
    >>> judgments = pd.DataFrame({"context_id": np.repeat(np.arange(20), 2), "criterion": "empathy",
    ...     "pair": "sys-a|sys-b", "is_control": False,
    ...     "preferred": np.where(np.repeat(advantage[:20], 2) + rng.normal(0, 0.5, 40) > 0, "sys-a", "sys-b")})
    >>> verdicts = pd.DataFrame({"criterion": "empathy", "context_id": np.arange(60), "system_a": "sys-a",
    ...     "system_b": "sys-b", "judge_diff": np.clip(np.rint(2 * advantage), -2, 2)})
    >>> row = model_assisted_net_preferences(judgments, verdicts).iloc[0]
    >>> int(row["n_human"]), int(row["n_judge_only"]), row["note"]
    (20, 40, '')
    >>> bool(row["width_ratio"] < 1), bool(row["ppi_ci_low"] < row["ppi_diff"] < row["ppi_ci_high"])
    (True, True)
    """
    from scipy import stats

    from empeval.analysis.stats.ppi.active import is_actively_sampled
    from empeval.analysis.stats.ppi.differences import ppi_difference_interval
    from empeval.analysis.stats.ppi.tables import MIN_HUMAN_CONTEXTS
    from empeval.analysis.stats.significance import adjust_pvalues

    real = judgments[~judgments["is_control"]]
    if is_actively_sampled(design_sample):
        assert design_sample is not None
        table = _weighted_net_preferences(real, pair_scores, design_sample, focus=focus, ci_level=ci_level)
        table["p_adj"] = adjust_pvalues(table["p_ppi"].to_numpy(dtype=float)) if len(table) else []
        return table
    sampled = (dict(zip(design_sample["context_id"], design_sample["sampled"], strict=True))
               if design_sample is not None else None)
    rows = []
    for (criterion, pair), _ in real.groupby(["criterion", "pair"], sort=True):
        first, second = pair.split(PAIR_SEPARATOR)
        a, b = (second, first) if focus is not None and focus == second else (first, second)
        labels = context_net_preferences(real, a, b, criterion)
        verdicts = oriented_verdicts(pair_scores, a, b, criterion)
        judge_only = [c for c in verdicts.index if (not sampled.get(c, True) if sampled is not None
                                                    else c not in labels.index)]
        missing = [c for c in labels.index if c not in verdicts.index]
        row: dict = {"criterion": criterion, "system_a": a, "system_b": b, "n_human": len(labels),
                     "n_judge_only": len(judge_only), "note": ""}
        if not judge_only:
            row["note"] = "no context only the judge compared (a study with design.human_share has some)"
        elif len(labels) < MIN_HUMAN_CONTEXTS:
            row["note"] = f"people judged {len(labels)} context(s); PPI++ needs at least {MIN_HUMAN_CONTEXTS}"
        elif missing:
            row["note"] = f"the judge has no verdict on {len(missing)} of the {len(labels)} contexts people judged"
        else:
            row.update(ppi_difference_interval(labels.to_numpy(), verdicts.loc[labels.index].to_numpy(),
                                               verdicts.loc[judge_only].to_numpy(), ci_level=ci_level))
        if row["note"] and len(labels):  # the human-only mean and its normal interval, as beside PPI++
            y = labels.to_numpy()
            half = float(stats.norm.ppf(0.5 + ci_level / 2) * np.std(y, ddof=1) / np.sqrt(y.size)) if y.size > 1 \
                else np.nan
            row.update(human_diff=float(y.mean()), human_ci_low=float(y.mean()) - half,
                       human_ci_high=float(y.mean()) + half)
        rows.append(row)
    table = pd.DataFrame(rows).reindex(columns=list(NET_PREFERENCE_COLUMNS))
    table["p_adj"] = adjust_pvalues(table["p_ppi"].to_numpy(dtype=float)) if len(table) else []
    return table


def _weighted_net_preferences(real: pd.DataFrame, pair_scores: pd.DataFrame, design_sample: pd.DataFrame, *,
                               focus: str | None, ci_level: float) -> pd.DataFrame:
    """``model_assisted_net_preferences`` for an actively sampled study (module docstring): per criterion and pair
    the weighted PPI++ mean net preference over every context of ``design_sample``, each weighted by the inverse
    of its recorded ``inclusion_probability``."""
    from empeval.analysis.stats.ppi.active import ipw_ppi_mean_interval, observed_probabilities, probability_strata
    from empeval.analysis.stats.ppi.tables import MIN_HUMAN_CONTEXTS

    contexts = design_sample["context_id"].astype(str).to_numpy()  # the export's ids may be read back as text
    drawn_pi = design_sample["inclusion_probability"].to_numpy(dtype=float)
    drawn_by_design = design_sample["sampled"].fillna(False).to_numpy(dtype=bool)

    def by_context(values: pd.Series) -> np.ndarray:
        return values.set_axis(values.index.astype(str)).reindex(contexts).to_numpy(dtype=float)

    rows = []
    for (criterion, pair), _ in real.groupby(["criterion", "pair"], sort=True):
        first, second = pair.split(PAIR_SEPARATOR)
        a, b = (second, first) if focus is not None and focus == second else (first, second)
        y = by_context(context_net_preferences(real, a, b, criterion))
        f = by_context(oriented_verdicts(pair_scores, a, b, criterion))
        drawn = np.isfinite(y)
        pi, _ = observed_probabilities(drawn_pi, drawn, drawn_by_design)  # a study still running: module docstring
        row: dict = {"criterion": criterion, "system_a": a, "system_b": b, "n_human": int(drawn.sum()),
                     "n_judge_only": int((~drawn).sum()), "note": ""}
        if int(drawn.sum()) < MIN_HUMAN_CONTEXTS:
            row["note"] = f"people judged {int(drawn.sum())} context(s); PPI++ needs at least {MIN_HUMAN_CONTEXTS}"
        elif not np.isfinite(f).all():
            row["note"] = (f"the judge has no verdict on {int((~np.isfinite(f)).sum())} of the study's {f.size} "
                           "contexts (the weighted estimator needs every context's)")
        keys = ("human_mean", "human_ci_low", "human_ci_high", "ppi_mean", "ppi_ci_low", "ppi_ci_high", "ppi_p",
                "lam", "width_ratio", "effective_n_human")
        names = ("human_diff", "human_ci_low", "human_ci_high", "ppi_diff", "ppi_ci_low", "ppi_ci_high", "p_ppi",
                 "lam", "width_ratio", "effective_n_human")
        if not row["note"]:
            result = ipw_ppi_mean_interval(y, f, pi, ci_level=ci_level, strata=probability_strata(pi, y))
            row.update({name: result[key] for key, name in zip(keys, names, strict=True)})
            with np.errstate(invalid="ignore", divide="ignore"):
                row["correlation"] = (float(np.corrcoef(y[drawn], f[drawn])[0, 1])
                                      if y[drawn].std() > 0 and f[drawn].std() > 0 else np.nan)
        elif drawn.sum() >= MIN_HUMAN_CONTEXTS:  # the weighted human-only mean (lambda 0, no judge needed)
            result = ipw_ppi_mean_interval(y, np.zeros_like(y), pi, ci_level=ci_level, lam=0.0)
            row.update({name: result[key] for key, name in zip(keys[:3], names[:3], strict=True)})
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=list(NET_PREFERENCE_COLUMNS))


def model_assisted_section_blocks(table: pd.DataFrame, *, judge: str, design_sample: pd.DataFrame | None,
                                  ci_level: float = 0.95) -> list:
    """The report's model-assisted blocks for an A/B study: a heading, what was done (the judge, the share people
    judged, the estimator), the table (human-only and PPI++ net preferences, the judge-label correlation, the
    effective human contexts) and, for a row whose PPI++ interval came out wider than the human-only one, which to
    report (the human-only one: PPI++ cannot be narrower in expectation only when the judge adds nothing)."""
    from empeval.analysis.report.document import Heading, Paragraph, Table
    from empeval.analysis.stats.ppi.active import is_actively_sampled

    level = f"{ci_level:.0%}"
    share = ""
    if is_actively_sampled(design_sample):
        assert design_sample is not None
        people = int(design_sample["sampled"].sum())
        expected = float(design_sample["inclusion_probability"].sum())
        share = (f" People judged the pairs of an active sample, {people} of the study's {len(design_sample)} "
                 f"contexts ({expected:.1f} expected), each context drawn with its own probability, higher where the "
                 "judges of differences disagreed; every estimate weights a context by the inverse of its "
                 "probability (Zrnic and Candès 2024), and the human-only column is the weighted (Hájek) mean.")
        judged_so_far = int(table["n_human"].max()) if len(table) else 0
        if judged_so_far < people:
            share += (f" **Only {judged_so_far} of the {people} drawn contexts are judged so far**: the estimates "
                      "take them for a uniform subsample of the drawn ones (each probability scaled by the share "
                      "judged), which holds only if the others are missing at random (finish the study before "
                      "reporting).")
    elif design_sample is not None and len(design_sample):
        people = int(design_sample["sampled"].sum())
        share = (f" People judged the pairs of {people} of the study's {len(design_sample)} contexts"
                 + (" (its human share), the judge those of every context." if people < len(design_sample) else
                    ", all of them: with no context left to the judge alone, it cannot narrow the intervals."))
    blocks: list = [Heading("Model-assisted net preferences"), Paragraph(
        f"Judge of differences **{judge}** compared each pair of responses on every context.{share} "
        "A context's label is its net preference for A (the mean over its judgments of +1 for A, -1 for B, 0 for a "
        "tie); the judge's verdict predicts it, and prediction-powered inference (PPI++, Angelopoulos, Duchi and "
        "Zrnic 2023) corrects the judge's mean by the labels, unbiased whatever the judge's quality, with its weight "
        f"tuned to the narrowest interval. Intervals are {level}; p-values test no preference, Holm-corrected over "
        "the rows.")]
    shown = pd.DataFrame({
        "criterion": table["criterion"], "A vs B": table["system_a"] + " vs " + table["system_b"],
        "contexts (people / judge only)": [f"{int(h)} / {int(j)}" for h, j in zip(table["n_human"],
                                                                                   table["n_judge_only"], strict=True)],
        "r (judge, people)": [_number(x, "{:.2f}") for x in table["correlation"]],
        "human-only": [_interval(*r) for r in zip(table["human_diff"], table["human_ci_low"], table["human_ci_high"],
                                                   strict=True)],
        "model-assisted": [_interval(*r) if not note else f"n/a: {note}" for *r, note in zip(
            table["ppi_diff"], table["ppi_ci_low"], table["ppi_ci_high"], table["note"], strict=True)],
        "p adj.": [_number(x, "{:.3g}") for x in table["p_adj"]],
        "effective contexts": [_number(x, "{:.0f}") for x in table["effective_n_human"]],
    })
    blocks.append(Table(shown, caption="A's mean net preference over B per criterion, human-only and model-assisted."))
    wider = table[table["width_ratio"] > 1]
    if len(wider):
        names = "; ".join(f"{r.criterion} {r.system_a} vs {r.system_b}" for r in wider.itertuples())
        blocks.append(Paragraph(
            f"The model-assisted interval is wider than the human-only one for {names}: the judge predicts those "
            "choices too poorly to help, so report the human-only interval there."))
    return blocks


def _number(x, form: str) -> str:
    return "n/a" if x is None or not np.isfinite(x) else form.format(x)


def _interval(estimate, low, high) -> str:
    if estimate is None or not np.isfinite(estimate):
        return "n/a"
    if not (np.isfinite(low) and np.isfinite(high)):
        return f"{estimate:+.3f}"
    return f"{estimate:+.3f} [{low:+.3f}, {high:+.3f}]"
