"""A pairwise (A/B) study's choices as the judgment table: one row per judgment and criterion, in the columns of
the contract analysis.pairwise_schema defines (JUDGMENT_COLUMNS, imported from there: defined once).

Each stored choice is a screen side ('left', 'right' or 'tie'); the row names both systems as they were shown
(the placement's `shown_left` says which response of the pair was on the left, labelled A) and the system
preferred, so the analysis compares systems, never screen positions, except in its position-bias check.
"""
from __future__ import annotations

import csv
import io
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, aliased

from empeval.analysis.pairwise_schema import JUDGMENT_COLUMNS
from empeval.server.store.models import Annotator, Assignment, AssignmentPair, Choice, PairItem, Response, System
from empeval.server.store.queries import study_by_name

TIE = "tie"
PAIR_SEPARATOR = "|"

_RESPONSE_A, _RESPONSE_B = aliased(Response, name="response_a"), aliased(Response, name="response_b")
_SYSTEM_A, _SYSTEM_B = aliased(System, name="system_a"), aliased(System, name="system_b")


def is_pairwise_study(engine: Engine, study_name: str) -> bool:
    """Whether the study called `study_name` is a pairwise one (NotFound when there is no such study)."""
    with Session(engine) as session:
        return study_by_name(session, study_name).config.is_pairwise


def pairwise_export_rows(engine: Engine, study_name: str) -> list[dict[str, Any]]:
    """Every choice of the study as a judgment-table row, ordered by assignment, position and criterion."""
    with Session(engine) as session:
        study = study_by_name(session, study_name)
        rows = session.execute(
            select(Choice.assignment_id, Annotator.pseudonym, PairItem.context_id, Choice.criterion, Choice.choice,
                   AssignmentPair.shown_left, _SYSTEM_A.name, _SYSTEM_B.name, AssignmentPair.position,
                   PairItem.is_control, PairItem.control_target, Assignment.late)
            .join(AssignmentPair, (AssignmentPair.assignment_id == Choice.assignment_id)
                  & (AssignmentPair.pair_item_id == Choice.pair_item_id))
            .join(PairItem, PairItem.id == Choice.pair_item_id)
            .join(_RESPONSE_A, _RESPONSE_A.id == PairItem.response_a_id)
            .join(_SYSTEM_A, _SYSTEM_A.id == _RESPONSE_A.system_id)
            .join(_RESPONSE_B, _RESPONSE_B.id == PairItem.response_b_id)
            .join(_SYSTEM_B, _SYSTEM_B.id == _RESPONSE_B.system_id)
            .join(Annotator, Annotator.id == Choice.annotator_id)
            .join(Assignment, Assignment.id == Choice.assignment_id)
            .where(PairItem.study_id == study.id)
            .order_by(Choice.assignment_id, AssignmentPair.position, Choice.criterion)
        ).all()
        table = []
        for (assignment_id, pseudonym, context_id, criterion, side, shown_left, system_a, system_b, position,
             is_control, control_target, late) in rows:
            left, right = (system_a, system_b) if shown_left == "a" else (system_b, system_a)
            preferred = {"left": left, "right": right}.get(side, TIE)
            table.append({
                "study": study.name, "assignment_id": assignment_id, "annotator": pseudonym,
                "context_id": context_id, "criterion": criterion,
                "pair": PAIR_SEPARATOR.join(sorted((system_a, system_b))),
                "system_left": left, "system_right": right, "choice": side, "preferred": preferred,
                "position": position, "is_control": bool(is_control),
                "control_target": control_target if is_control else None, "late": bool(late),
            })
        return table


def judgments_to_csv(rows: list[dict[str, Any]]) -> str:
    """The judgment table as CSV: the contract's columns in order, booleans as true/false, empty for None."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=JUDGMENT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else str(v).lower() if isinstance(v, bool) else v)
                         for k, v in row.items()})
    return out.getvalue()
