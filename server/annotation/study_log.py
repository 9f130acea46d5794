"""A study's log: what the researcher did to the study (for now: participants withdrawn), when, and what changed.

Entries record counts and ids, never a participant's name: the log outlives the data it says was removed.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.server.store.models import StudyLogEntry
from empeval.server.store.queries import as_utc, study_by_name

WITHDRAWAL = "withdrawal"


class LogEntry(NamedTuple):
    at: datetime
    event: str
    annotator_id: int | None
    detail: dict[str, Any]


def add_entry(session: Session, study_id: int, event: str, *, annotator_id: int | None, at: datetime,
              detail: dict[str, Any]) -> None:
    """Append one entry to the study's log, in the caller's transaction (so it commits with what it records)."""
    session.add(StudyLogEntry(study_id=study_id, event=event, annotator_id=annotator_id, at=at, detail=detail))


def study_log(engine: Engine, study: str) -> list[LogEntry]:
    """The study's log, oldest entry first (NotFound when there is no such study)."""
    with Session(engine) as session:
        study_id = study_by_name(session, study).id
        rows = session.scalars(select(StudyLogEntry).where(StudyLogEntry.study_id == study_id)
                               .order_by(StudyLogEntry.at, StudyLogEntry.id)).all()
        return [LogEntry(as_utc(row.at), row.event, row.annotator_id, dict(row.detail)) for row in rows]
