"""A study's ratings as a tidy long table: one row per rating, in the columns of analysis.export_schema (the
contract analysis reads, defined there once)."""
from __future__ import annotations

import csv
import io
import json
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.analysis.export_schema import EXPORT_COLUMNS
from empeval.server.store.models import (
    Annotator,
    Assignment,
    AssignmentItem,
    Rating,
    Response,
    StudyItem,
    System,
)
from empeval.server.store.queries import iso_utc, study_by_name


def export_rows(engine: Engine, study_name: str) -> list[dict[str, Any]]:
    """Every rating of the study with its item, context, system, annotator pseudonym, position, times, and the
    comment the annotator left on the assignment (on each of its rows)."""
    with Session(engine) as session:
        study = study_by_name(session, study_name)
        rows = session.execute(
            select(Rating, StudyItem, Response.context_id, System.name, Annotator.pseudonym, AssignmentItem.position,
                   AssignmentItem.seconds_on_item, Assignment.started_at, Assignment.late, Assignment.comment)
            .join(StudyItem, StudyItem.id == Rating.item_id)
            .join(Response, Response.id == StudyItem.response_id)
            .join(System, System.id == Response.system_id)
            .join(Annotator, Annotator.id == Rating.annotator_id)
            .join(Assignment, Assignment.id == Rating.assignment_id)
            .join(AssignmentItem, (AssignmentItem.assignment_id == Rating.assignment_id)
                  & (AssignmentItem.item_id == Rating.item_id))
            .where(StudyItem.study_id == study.id)
            .order_by(Rating.assignment_id, AssignmentItem.position, Rating.criterion)
        ).all()
        return [
            {"study": study.name, "item_id": item.id, "context_id": context_id, "system": system,
             "annotator": pseudonym, "criterion": rating.criterion, "score": rating.score, "position": position,
             "is_control": item.is_control, "control_kind": system if item.is_control else None,
             "control_target": item.control_target, "assignment_id": rating.assignment_id,
             "started_at": iso_utc(started_at), "submitted_at": iso_utc(rating.submitted_at),
             "seconds_on_item": seconds, "late": late, "comment": comment or None}
            for rating, item, context_id, system, pseudonym, position, seconds, started_at, late, comment in rows
        ]


def rows_to_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=EXPORT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else str(v).lower() if isinstance(v, bool) else v)
                         for k, v in row.items()})
    return out.getvalue()


def rows_to_jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
