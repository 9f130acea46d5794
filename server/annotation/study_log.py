"""A study's log: what the researcher did to the study (participants withdrawn; answers that left the store in an
export or a report), when, and what changed.

Entries record counts and ids, never a participant's name: the log outlives the data it says was removed. An export
or report entry lists the ids of the raters whose answers it held, so that withdrawing one later can name the files
written before that still carry her answers (server/annotation/withdraw.py).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Assignment, StudyLogEntry
from empeval.server.store.queries import as_utc, now_utc, study_by_name
from empeval.server.store.statuses import AssignmentStatus

WITHDRAWAL = "withdrawal"
EXPORT = "export"
REPORT = "report"
#: An active draw of a Likert or A/B study (tasks.kinds.likert_active); a two-phase design's burn-in entry has phase
#: 1 and its contexts in ``drawn``, its phase-2 entry phase 2 and its own.
ACTIVE_DRAW = "active-draw"
RELEASES = (EXPORT, REPORT)  # the events by which answers left the store


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


def record_release(engine: Engine, study: str, event: str, *, where: str, at: datetime | None = None) -> int:
    """Log that `study`'s answers left the store (`event` EXPORT or REPORT; `where`: the file or folder, or how it
    was sent), with the ids of the raters whose submitted work it held. Returns how many raters that is."""
    if event not in RELEASES:
        raise ValueError(f"event must be one of {', '.join(RELEASES)}, got {event!r}")
    with unit_of_work(engine) as session:
        study_id = study_by_name(session, study).id
        raters = sorted(rater for rater in session.scalars(select(Assignment.annotator_id).distinct().where(
            Assignment.study_id == study_id, Assignment.status == AssignmentStatus.SUBMITTED)) if rater is not None)
        add_entry(session, study_id, event, annotator_id=None, at=at or now_utc(),
                  detail={"where": where, "annotator_ids": raters})
        return len(raters)


def releases_holding(session: Session, study_id: int, annotator_id: int) -> list[LogEntry]:
    """The exports and reports of the study logged as holding this rater's answers, oldest first."""
    rows = session.scalars(select(StudyLogEntry).where(StudyLogEntry.study_id == study_id,
                                                       StudyLogEntry.event.in_(RELEASES))
                           .order_by(StudyLogEntry.at, StudyLogEntry.id)).all()
    return [LogEntry(as_utc(row.at), row.event, row.annotator_id, dict(row.detail)) for row in rows
            if annotator_id in (row.detail or {}).get("annotator_ids", ())]
