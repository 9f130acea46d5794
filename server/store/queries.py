"""Small queries and conversions every room above the store shares: a study by name, assignment counts, an
annotator's active assignment, and UTC times (SQLite hands back naive datetimes)."""
from __future__ import annotations

from datetime import UTC, datetime
from typing import overload

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.errors import NotFound
from empeval.server.store.models import Assignment, Study
from empeval.server.store.statuses import AssignmentStatus


def now_utc() -> datetime:
    return datetime.now(UTC)


@overload
def as_utc(moment: datetime) -> datetime: ...
@overload
def as_utc(moment: None) -> None: ...
def as_utc(moment: datetime | None) -> datetime | None:
    """The moment as an aware UTC datetime (SQLite stores naive UTC)."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def iso_utc(moment: datetime | None) -> str | None:
    """The moment as ISO-8601 in UTC, or None."""
    return None if moment is None else as_utc(moment).isoformat()


def study_by_name(session: Session, name: str) -> Study:
    """The study called `name`, or NotFound."""
    study = session.scalar(select(Study).where(Study.name == name))
    if study is None:
        raise NotFound(f"no study named {name!r}")
    return study


def assignment_counts(session: Session, study_id: int) -> dict[str, int]:
    """Assignments of a study per status (open, assigned, submitted, expired), zeros included."""
    counts = dict(session.execute(select(Assignment.status, func.count()).where(Assignment.study_id == study_id)
                                  .group_by(Assignment.status)).all())
    return {status.value: counts.get(status, 0) for status in AssignmentStatus}


def active_assignment(session: Session, study_id: int, annotator_id: int) -> int | None:
    """The id of the annotator's active assignment in the study (the schema allows at most one), or None."""
    return session.scalar(select(Assignment.id).where(Assignment.study_id == study_id,
                                                      Assignment.annotator_id == annotator_id,
                                                      Assignment.status == AssignmentStatus.ASSIGNED))
