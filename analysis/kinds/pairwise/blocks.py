"""The report's pairwise (A/B) section as document blocks (analysis.report.document), from ``pairwise_tables``.

``pairwise_blocks(tables)`` returns the headings, tables and captions in the order a reader needs them: the
papers' Win / Lose / Tie table with the per-context decision, the linked Likert study beside it (when there is
one), the ranking, agreement on the choices, position bias and the control pairs. The report adds them to its
document (``document.add(*pairwise_blocks(tables))``), which writes Markdown and HTML from the same blocks.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from empeval.analysis.kinds.pairwise.tables import PairwiseTables
from empeval.analysis.report.document import Block, Heading, Paragraph, Table

AGREEMENT_CAPTION = (
    "Agreement on the choices, per criterion, with each choice mapped to the system chosen (or tie), never to "
    "the screen side; a unit is one pair on one context. Fleiss' kappa uses the units with the most common "
    "number of judgments; Krippendorff's alpha (nominal) every unit with two or more. In brackets: 95% percentile "
    "bootstrap interval over units. Control pairs left out."
)

CONTROLS_CAPTION = (
    "Control pairs: a real response beside a control built to lose on one criterion, scored on that criterion "
    "only (passed: the real response chosen; a tie or the control fails). Kept out of every comparison above."
)

LIKERT_CAPTION = (
    "The linked Likert study beside the A/B judgments: mean Likert score of each system (mean of item means, "
    "controls left out) and their difference, next to the A/B shares; 'same direction' says whether both "
    "protocols favour the same system."
)


def pairwise_blocks(tables: PairwiseTables, *, title: str = "Pairwise A/B evaluation") -> list[Block]:
    """Document blocks of the pairwise section, tables formatted as text (percentages with one decimal,
    p-values with three or "< 0.001", intervals in brackets).

    Returns
    -------
    blocks : list of analysis.report.document blocks
        A heading, then for each table a Table with its caption (and a short paragraph when the study has no
        judgments to compare).

    Examples
    --------
    >>> from empeval.analysis.report.document import Document, to_markdown
    >>> from empeval.analysis.kinds.pairwise.tables import pairwise_tables
    >>> from empeval.analysis.simulate.pairwise import simulate_pairwise_study
    >>> tables = pairwise_tables(simulate_pairwise_study(n_contexts=8, anchor="moel", seed=1).judgments,
    ...                          focus="moel", n_boot=20)
    >>> text = to_markdown(Document("demo", pairwise_blocks(tables)))
    >>> "| empathy | moel vs gold |" in text, "Win %" in text, "sign test" in text
    (True, True, True)
    """
    blocks: list[Block] = [Heading(title, level=2)]
    if tables.ab.empty:
        blocks.append(Paragraph("No judgments of real pairs to compare yet."))
        return blocks
    blocks.append(Table(ab_display(tables.ab), caption=tables.ab_caption))
    if tables.likert is not None and not tables.likert.empty:
        blocks.append(Table(_likert_display(tables.likert), caption=LIKERT_CAPTION))
    if tables.ranking is not None and not tables.ranking.empty:
        blocks.append(Table(_ranking_display(tables.ranking), caption=tables.ranking_caption))
    blocks.append(Table(_agreement_display(tables.agreement), caption=AGREEMENT_CAPTION))
    blocks.append(Table(_position_display(tables.position), caption=tables.position_caption))
    if not tables.controls.empty:
        blocks.append(Table(_controls_display(tables.controls), caption=CONTROLS_CAPTION))
    return blocks


def ab_display(ab: pd.DataFrame) -> pd.DataFrame:
    """The papers' A/B table as text: per criterion and pair, Win / Lose / Tie % of the judgments, the
    contexts won / lost / even and the adjusted p of the per-context sign test.

    Returns
    -------
    table : pandas.DataFrame
        Columns ``Criterion``, ``Pair``, ``Win %``, ``Lose %``, ``Tie %``, ``judgments``,
        ``contexts (won / lost / even)``, ``p adj.``, ``sig.``; every cell text.

    Examples
    --------
    >>> ab = pd.DataFrame([{"criterion": "empathy", "system_a": "moel", "system_b": "gold", "judgments": 8,
    ...                     "win_pct": 37.5, "lose_pct": 25.0, "tie_pct": 37.5, "contexts_won": 1,
    ...                     "contexts_lost": 1, "contexts_even": 2, "p_adj": 1.0, "significant": False}])
    >>> ab_display(ab).iloc[0].tolist()
    ['empathy', 'moel vs gold', '37.5', '25.0', '37.5', '8', '1 / 1 / 2', '1.000', 'no']
    """
    rows = []
    for row in ab.itertuples(index=False):
        rows.append({
            "Criterion": row.criterion, "Pair": f"{row.system_a} vs {row.system_b}",
            "Win %": _fmt(row.win_pct, 1), "Lose %": _fmt(row.lose_pct, 1), "Tie %": _fmt(row.tie_pct, 1),
            "judgments": str(int(row.judgments)),
            "contexts (won / lost / even)": f"{row.contexts_won} / {row.contexts_lost} / {row.contexts_even}",
            # Every context even: the sign test is undefined (and outside the Holm family), said as such.
            "p adj.": "n/a (no decisive context)" if row.contexts_won + row.contexts_lost == 0 else _fmt_p(row.p_adj),
            "sig.": "yes" if row.significant else "no",
        })
    return pd.DataFrame(rows)


def _likert_display(likert: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for row in likert.itertuples(index=False):
        same = row.same_direction
        rows.append({
            "Criterion": row.criterion, "Pair": f"{row.system_a} vs {row.system_b}",
            "Likert a": _fmt(row.likert_mean_a), "Likert b": _fmt(row.likert_mean_b),
            "Δ Likert (a−b)": _fmt(row.likert_diff), "A/B win %": _fmt(row.win_pct, 1),
            "A/B lose %": _fmt(row.lose_pct, 1), "A/B tie %": _fmt(row.tie_pct, 1),
            "same direction": "n/a" if same is None or same is pd.NA else ("yes" if same else "no"),
        })
    return pd.DataFrame(rows)


def _ranking_display(ranking: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for row in ranking.itertuples(index=False):
        rows.append({
            "Criterion": row.criterion, "Rank": "n/a" if pd.isna(row.rank) else str(int(row.rank)),
            "System": row.system, "log strength": _fmt(row.strength) + _interval(row.ci_low, row.ci_high),
            "wins / losses / ties": f"{row.wins} / {row.losses} / {row.ties}",
            "model": "Davidson (ties)" if row.model == "davidson" else "Bradley-Terry",
            "tie parameter": _fmt(row.tie_parameter),
        })
    return pd.DataFrame(rows)


def _agreement_display(agreement: pd.DataFrame) -> pd.DataFrame:
    labels = {"fleiss_kappa": "Fleiss' kappa", "krippendorff_alpha": "Krippendorff's alpha (nominal)"}
    rows = []
    for row in agreement.itertuples(index=False):
        interval = _interval(row.ci_low, row.ci_high) if hasattr(row, "ci_low") else ""
        rows.append({"Criterion": row.criterion, "Coefficient": labels.get(row.coefficient, row.coefficient),
                     "estimate": _fmt(row.estimate) + interval, "units": str(int(row.units)),
                     "judgments": str(int(row.judgments))})
    return pd.DataFrame(rows)


def _position_display(position: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for row in position.itertuples(index=False):
        rows.append({"Criterion": row.criterion, "decisive choices": str(int(row.decisive)),
                     "left (A)": str(int(row.left)),
                     "share left": _fmt(row.share_left) + _interval(row.ci_low, row.ci_high),
                     "p": _fmt_p(row.p)})
    return pd.DataFrame(rows)


def _controls_display(controls: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for row in controls.itertuples(index=False):
        rows.append({"Annotator": row.annotator, "controls": str(row.controls), "passed": str(row.passed),
                     "tied": str(row.tied), "control chosen": str(row.failed), "pass rate": _fmt(row.pass_rate)})
    return pd.DataFrame(rows)


def side_by_side_blocks(ab: pd.DataFrame, agreement: pd.DataFrame, *, criteria: Sequence[str],
                        systems: Sequence[str]) -> list[Block]:
    """The A/B table and Krippendorff's alpha with all raters and without the flagged ones (``ab`` and ``agreement``
    stacked with a first column ``raters``, ALL_RATERS then EXCLUDING_FLAGGED of analysis.stats.exclusions), one row
    per criterion and pair in the report's order (``criteria``, then pairs by the places of their systems in
    ``systems``).

    Returns
    -------
    blocks : list of analysis.report.document blocks
        A heading, the A/B table's shares, adjusted p and decision in both columns, and alpha with its interval
        in both columns.

    Examples
    --------
    >>> from empeval.analysis.stats.exclusions import ALL_RATERS, EXCLUDING_FLAGGED
    >>> ab = pd.DataFrame([{"raters": who, "criterion": "empathy", "system_a": "moel", "system_b": "gold",
    ...                     "win_pct": win, "lose_pct": 50.0, "tie_pct": 50.0 - win, "contexts_won": 3,
    ...                     "contexts_lost": 1, "p_adj": p, "significant": p < 0.05}
    ...                    for who, win, p in ((ALL_RATERS, 40.0, 0.2), (EXCLUDING_FLAGGED, 45.0, 0.01))])
    >>> alpha = pd.DataFrame([{"raters": who, "criterion": "empathy", "coefficient": "krippendorff_alpha",
    ...                        "estimate": a, "ci_low": a - 0.1, "ci_high": a + 0.1}
    ...                       for who, a in ((ALL_RATERS, 0.3), (EXCLUDING_FLAGGED, 0.5))])
    >>> blocks = side_by_side_blocks(ab, alpha, criteria=["empathy"], systems=["moel", "gold"])
    >>> blocks[1].frame.iloc[0].tolist()
    ['empathy', 'moel vs gold', '40.0 / 50.0 / 10.0', '0.200', '45.0 / 50.0 / 5.0', '0.010', 'no → yes']
    >>> blocks[2].frame.iloc[0].tolist()
    ['empathy', '0.30 [0.20, 0.40]', '0.50 [0.40, 0.60]']
    """
    from empeval.analysis.report.systems import in_system_order
    from empeval.analysis.report.tables import in_criterion_order
    from empeval.analysis.stats.exclusions import ALL_RATERS, EXCLUDING_FLAGGED

    keys = ["criterion", "system_a", "system_b"]
    everyone = ab.loc[ab["raters"] == ALL_RATERS].drop(columns="raters")
    kept = ab.loc[ab["raters"] == EXCLUDING_FLAGGED].drop(columns="raters")
    merged = everyone.merge(kept, on=keys, how="outer", suffixes=("_all", "_kept"))
    merged = in_system_order(in_criterion_order(merged, list(criteria)), systems, tuple(keys))

    def shares(row: Any, side: str) -> str:
        return " / ".join(_fmt(getattr(row, f"{share}_{side}"), 1) for share in ("win_pct", "lose_pct", "tie_pct"))

    def significant(value: Any) -> str:
        return "n/a" if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)) else (
            "yes" if value else "no")

    rows = [{"Criterion": row.criterion, "Pair": f"{row.system_a} vs {row.system_b}",
             "win / lose / tie %, all": shares(row, "all"), "p adj., all": _fmt_p(row.p_adj_all),
             "win / lose / tie %, excluding flagged": shares(row, "kept"), "p adj., excluding flagged":
             _fmt_p(row.p_adj_kept), "sig. (all → excluding)":
             f"{significant(row.significant_all)} → {significant(row.significant_kept)}"}
            for row in merged.itertuples(index=False)]
    alphas = agreement.loc[agreement["coefficient"] == "krippendorff_alpha"]
    alpha_rows = []
    for criterion in [c for c in criteria if c in set(alphas["criterion"])]:
        part = alphas.loc[alphas["criterion"] == criterion]
        cells = {r.raters: _fmt(r.estimate) + _interval(r.ci_low, r.ci_high) for r in part.itertuples()}
        alpha_rows.append({"Criterion": criterion, "alpha (nominal), all": cells.get(ALL_RATERS, "n/a"),
                           "alpha (nominal), excluding flagged": cells.get(EXCLUDING_FLAGGED, "n/a")})
    return [Heading("With and without the flagged annotators", level=3),
            Table(pd.DataFrame(rows), caption=("The A/B table with all annotators and without the flagged ones: "
                                               "win / lose / tie % of the judgments and the sign test's adjusted p.")),
            Table(pd.DataFrame(alpha_rows), caption=("Krippendorff's alpha (nominal) on the choices with all "
                                                     "annotators and without the flagged ones, 95% bootstrap "
                                                     "intervals over units."))]


def _fmt(value, digits: int = 2) -> str:
    if value is None or value is pd.NA or not np.isfinite(float(value)):
        return "n/a"
    return f"{float(value):.{digits}f}"


def _fmt_p(value) -> str:
    if value is None or value is pd.NA or not np.isfinite(float(value)):
        return "n/a"
    return "< 0.001" if value < 0.001 else f"{float(value):.3f}"


def _interval(low, high, digits: int = 2) -> str:
    if any(v is None or v is pd.NA or not np.isfinite(float(v)) for v in (low, high)):
        return ""
    return f" [{float(low):.{digits}f}, {float(high):.{digits}f}]"
