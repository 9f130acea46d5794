"""The report's pairwise (A/B) section as document blocks (analysis.report.document), from ``pairwise_tables``.

``pairwise_blocks(tables)`` returns the headings, tables and captions in the order a reader needs them: the
papers' Win / Lose / Tie table with the per-context decision, the linked Likert study beside it (when there is
one), the ranking, agreement on the choices, position bias and the control pairs. The report adds them to its
document (``document.add(*pairwise_blocks(tables))``), which writes Markdown and HTML from the same blocks.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from empeval.analysis.kinds.pairwise.tables import PairwiseTables
from empeval.analysis.report.document import Block, Heading, Paragraph, Table

AGREEMENT_CAPTION = (
    "Agreement on the choices, per criterion, with each choice mapped to the system chosen (or tie), never to "
    "the screen side; a unit is one pair on one context. Fleiss' kappa uses the units with the most common "
    "number of judgments; Krippendorff's alpha (nominal) every unit with two or more. Control pairs left out."
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
        rows.append({"Criterion": row.criterion, "Coefficient": labels.get(row.coefficient, row.coefficient),
                     "estimate": _fmt(row.estimate), "units": str(int(row.units)),
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
