"""The report's tables as a reviewer reads them: the analysis frames (``compare``, ``agreement``,
``rater_aware``) turned into text cells, criteria in the study's order, intervals as ``[low, high]``.

Presentation only: the frames written to ``tables/*.csv`` are the analysis functions' own, unchanged. Cells
may carry ``**bold**`` and ``SIGNIFICANCE_MARK``, which ``analysis.report.document`` and
``analysis.report.latex`` render.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from empeval.analysis.report.systems import in_system_order
from empeval.analysis.stats.agreement import ALL_SYSTEMS, COEFFICIENT_LABELS

SIGNIFICANCE_MARK = "†"


def criteria_in_order(present: Iterable[str], declared: Sequence[str] | None = None) -> list[str]:
    """The criteria of ``present`` in the study's order: those ``declared`` (the study file's order) first,
    then any others in sorted order. Declared criteria with no ratings are left out.

    >>> criteria_in_order(["empathy", "fluency", "relevance"], ["empathy", "relevance", "fluency"])
    ['empathy', 'relevance', 'fluency']
    >>> criteria_in_order(["style", "fluency", "empathy"], ["empathy", "relevance", "fluency"])
    ['empathy', 'fluency', 'style']
    """
    present = list(dict.fromkeys(str(c) for c in present))
    ordered = [c for c in dict.fromkeys(declared or ()) if c in present]
    return ordered + sorted(c for c in present if c not in ordered)


def in_criterion_order(frame: pd.DataFrame, criteria: Sequence[str]) -> pd.DataFrame:
    """``frame``'s rows with its ``criterion`` column in the order ``criteria`` (a stable sort: rows of one
    criterion keep their order)."""
    rank = {c: i for i, c in enumerate(criteria)}
    keys = frame["criterion"].map(lambda c: rank.get(c, len(rank)))
    return frame.iloc[np.argsort(keys.to_numpy(), kind="stable")].reset_index(drop=True)


def fmt(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def fmt_p(value) -> str:
    if value is None or not np.isfinite(value):
        return "n/a"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def interval(low, high, digits: int = 2) -> str:
    """`` [low, high]``, or "" when either end is undefined."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return ""
    return f" [{low:.{digits}f}, {high:.{digits}f}]"


def significant(pairs: pd.DataFrame, criterion: str, one: str, other: str, alpha: float) -> bool:
    """Whether the pair (one, other), in either order, differs on ``criterion`` after correction."""
    match = pairs.loc[(pairs["criterion"] == criterion)
                      & (((pairs["system_a"] == one) & (pairs["system_b"] == other))
                         | ((pairs["system_a"] == other) & (pairs["system_b"] == one)))]
    return bool(not match.empty and match["p_adj"].iloc[0] < alpha)


def _span(values: pd.Series) -> str:
    low, high = int(values.min()), int(values.max())
    return str(low) if low == high else f"{low}–{high}"


def paper_table(
    means: pd.DataFrame, pairs: pd.DataFrame, *, alpha: float = 0.05, criteria: Sequence[str] | None = None,
    systems: Sequence[str] | None = None,
) -> pd.DataFrame:
    """System x criterion table of "mean [CI low, CI high]", the best system per criterion in bold and
    SIGNIFICANCE_MARK on systems significantly different from that best system (corrected p < alpha).

    Columns: System; n (responses rated, with the ratings per criterion in parentheses, as ranges when the
    criteria differ); then one column per criterion in ``criteria`` order (the study's; sorted by default). Rows
    in ``systems`` order (the report's one order, analysis.report.systems); systems it leaves out follow by name.
    """
    criteria = criteria_in_order(means["criterion"].unique(), criteria)
    present = set(means["system"].unique())
    systems = [s for s in systems or () if s in present] + sorted(present - set(systems or ()))
    best = {c: means.loc[means["criterion"] == c].sort_values("mean", ascending=False)["system"].iloc[0]
            for c in criteria}
    rows = []
    for system in systems:
        own = means.loc[means["system"] == system]
        row = {"System": system, "n": f"{_span(own['n_items'])} ({_span(own['n_ratings'])})"}
        for criterion in criteria:
            match = own.loc[own["criterion"] == criterion]
            if match.empty:
                row[criterion.capitalize()] = "–"
                continue
            entry = match.iloc[0]
            text = fmt(entry["mean"]) + interval(entry["ci_low"], entry["ci_high"])
            if system == best[criterion]:
                text = f"**{text}**"
            elif significant(pairs, criterion, system, best[criterion], alpha):
                text += f" {SIGNIFICANCE_MARK}"
            row[criterion.capitalize()] = text
        rows.append(row)
    return pd.DataFrame(rows)


def rankings(means: pd.DataFrame, pairs: pd.DataFrame, *, alpha: float = 0.05,
             criteria: Sequence[str] | None = None) -> dict[str, str]:
    """Per criterion (in ``criteria`` order), systems from best to worst mean, joined by '>' where neighbours
    differ significantly and '~' where they do not, e.g. "gold (3.92) > moel (3.44) ~ baseline (3.30)"."""
    result = {}
    for criterion in criteria_in_order(means["criterion"].unique(), criteria):
        ordered = means.loc[means["criterion"] == criterion].sort_values("mean", ascending=False)
        text = ""
        previous = None
        for entry in ordered.itertuples(index=False):
            if previous is not None:
                text += " > " if significant(pairs, criterion, previous, entry.system, alpha) else " ~ "
            text += f"{entry.system} ({entry.mean:.2f})"
            previous = entry.system
        result[criterion] = text
    return result


def wilcoxon_variants(pairs: pd.DataFrame) -> str:
    """The Wilcoxon variants of ``pairs`` in words, for a caption: the one variant of every pair, or each
    variant with the pairs it was used for."""
    methods = pairs["wilcoxon_method"].fillna("undefined").astype(str)
    counts = methods.value_counts()
    if counts.size == 1:
        return f"{counts.index[0]} for every pair"
    main = counts.index[0]
    others = [f"{method} for " + ", ".join(f"{p.criterion} {p.system_a} vs {p.system_b}"
                                           for p in pairs.loc[methods == method].itertuples())
              for method in counts.index[1:]]
    return "; ".join(others) + f"; {main} for the other {_plural(int(counts.iloc[0]), 'pair')}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word if n == 1 else word + 's'}"


def pairs_table(pairs: pd.DataFrame, criteria: Sequence[str] | None = None,
                systems: Sequence[str] | None = None) -> pd.DataFrame:
    """The pairwise tests narrowed to what a reviewer reads: pair, n, difference, corrected p, both effect
    sizes with their CIs, significance. The test variant goes in the caption (``wilcoxon_variants``); raw p,
    W+ and the paired t-test stay in tables/pairwise_tests.csv. Rows by criterion (``criteria`` order), then by
    the places of the pair's systems in ``systems``. Pairs with intervals of the difference (``diff_ci_low``,
    ``diff_ci_high``: the intervals for new raters of ``empeval report --generalize``) show them after Δ."""
    rows = []
    with_intervals = {"diff_ci_low", "diff_ci_high"} <= set(pairs.columns)
    ordered = in_criterion_order(pairs, criteria) if criteria is not None and not pairs.empty else pairs
    if systems is not None:
        ordered = in_system_order(ordered, systems, ("criterion", "system_a", "system_b"))
    for p in ordered.itertuples(index=False):
        rows.append({
            "Criterion": p.criterion, "Pair (a vs b)": f"{p.system_a} vs {p.system_b}", "n": fmt(p.n_pairs, 0),
            "Δ mean (a−b)": fmt(p.mean_diff) + (interval(p.diff_ci_low, p.diff_ci_high) if with_intervals else ""),
            "p adj.": fmt_p(p.p_adj),
            "r (rank-biserial)": fmt(p.rank_biserial) + interval(p.rb_ci_low, p.rb_ci_high),
            "d_z": fmt(p.d_z) + interval(p.dz_ci_low, p.dz_ci_high),
            "sig.": "yes" if p.significant is True or p.significant == 1 else "no",
        })
    return pd.DataFrame(rows)


def friedman_table(friedman: pd.DataFrame, criteria: Sequence[str] | None = None) -> pd.DataFrame:
    rows = []
    ordered = in_criterion_order(friedman, criteria) if criteria is not None and not friedman.empty else friedman
    for f in ordered.itertuples(index=False):
        rows.append({"Criterion": f.criterion, "contexts": str(f.n_blocks), "systems": str(f.n_systems),
                     "χ²": fmt(f.statistic), "p": fmt_p(f.p), "Kendall's W": fmt(f.kendalls_w), "note": f.note})
    return pd.DataFrame(rows)


def agreement_table(agreement: pd.DataFrame, criteria: Sequence[str] | None = None) -> pd.DataFrame:
    """Coefficient x criterion: each pooled coefficient (all systems) with its CI."""
    pooled = agreement.loc[agreement["system"] == ALL_SYSTEMS]
    rows = []
    for key, label in COEFFICIENT_LABELS.items():
        if not (pooled["coefficient"] == key).any():  # a coefficient this design has no row for (two raters' kappa)
            continue
        row = {"Coefficient": label}
        for criterion in criteria_in_order(pooled["criterion"].unique(), criteria):
            entry = pooled.loc[(pooled["criterion"] == criterion) & (pooled["coefficient"] == key)]
            if entry.empty:
                continue
            entry = entry.iloc[0]
            row[criterion.capitalize()] = fmt(entry["estimate"]) + interval(entry["ci_low"], entry["ci_high"])
        rows.append(row)
    return pd.DataFrame(rows)


def rater_check_table(check: pd.DataFrame, criteria: Sequence[str] | None = None,
                      systems: Sequence[str] | None = None) -> pd.DataFrame:
    """The rater-aware check beside the item-level tests; "disagreement" says where a check differs from
    them in order or significance. Rows ordered as pairs_table orders them."""
    rows = []
    ordered = in_criterion_order(check, criteria) if criteria is not None and not check.empty else check
    if systems is not None:
        ordered = in_system_order(ordered, systems, ("criterion", "system_a", "system_b"))
    for c in ordered.itertuples(index=False):
        rows.append({"Criterion": c.criterion, "Pair (a vs b)": f"{c.system_a} vs {c.system_b}",
                     "Δ mean": fmt(c.mean_diff), "p adj.": fmt_p(c.p_adj), "LMM Δ": fmt(c.lmm_diff),
                     "LMM p adj.": fmt_p(c.lmm_p_adj), "z Δ": fmt(c.z_diff), "z p adj.": fmt_p(c.z_p_adj),
                     "disagreement": c.reason or "none"})
    return pd.DataFrame(rows)
