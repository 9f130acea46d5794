"""The dashboard's per-rater table and comment list: what each rater did in a study, how long it took her and what
that pays per hour; the comments raters left on their assignments."""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from statistics import median
from typing import NamedTuple

from sqlalchemy import Engine, column, or_, select, table
from sqlalchemy.orm import Session

from empeval.server.annotation.kinds import annotation_kind
from empeval.server.store.models import Annotator, Assignment, StudyRevocation
from empeval.server.store.queries import as_utc, study_by_name
from empeval.server.store.statuses import AssignmentStatus


class RaterRow(NamedTuple):
    pseudonym: str
    assignments: int  # submitted
    items: int  # units (items, pairs, tuples: as the kind hands out) of her submitted assignments
    median_seconds: float | None  # median seconds per item, where the page measured them
    hours: float  # measured: from being handed each submitted assignment to submitting it, summed
    hourly_pay: float | None  # pay per assignment x assignments / hours; None unpaid, or nothing measured
    revoked: bool


class RaterTable(NamedTuple):
    currency: str
    pay_per_assignment: float | None
    rows: list[RaterRow]


def rater_table(engine: Engine, study: str) -> RaterTable:
    """One row per rater with a submitted assignment in the study, by pseudonym: three statements.

    The effective hourly pay is what the study pays per assignment times her submitted assignments, divided by the
    hours measured between being handed each one and submitting it (the time a platform such as Prolific counts;
    reading instructions and pauses included, so it is the pay of the time she was held, a lower bound of the pay
    per hour of work)."""
    with Session(engine) as session:
        study_row = study_by_name(session, study)
        config = study_row.config
        revoked_here = select(StudyRevocation.annotator_id).where(StudyRevocation.study_id == study_row.id)
        done = session.execute(
            select(Annotator.pseudonym, Assignment.id, Assignment.started_at, Assignment.submitted_at,
                   or_(Annotator.revoked_at.is_not(None), Annotator.id.in_(revoked_here)))
            .join(Annotator, Annotator.id == Assignment.annotator_id)
            .where(Assignment.study_id == study_row.id, Assignment.status == AssignmentStatus.SUBMITTED)).all()
        kind = annotation_kind(config.kind)
        placement = table(kind.placement_table, column("assignment_id"), column("seconds_on_item"))
        seconds = session.execute(
            select(Annotator.pseudonym, placement.c.seconds_on_item)
            .join(Assignment, Assignment.id == placement.c.assignment_id)
            .join(Annotator, Annotator.id == Assignment.annotator_id)
            .where(Assignment.study_id == study_row.id, Assignment.status == AssignmentStatus.SUBMITTED)).all()
    pay = config.pay.per_assignment
    assignments: dict[str, int] = defaultdict(int)
    hours: dict[str, float] = defaultdict(float)
    revoked: dict[str, bool] = {}
    for pseudonym, _, started_at, submitted_at, is_revoked in done:
        assignments[pseudonym] += 1
        hours[pseudonym] += _hours(started_at, submitted_at)
        revoked[pseudonym] = bool(is_revoked)
    items: dict[str, int] = defaultdict(int)
    measured: dict[str, list[float]] = defaultdict(list)
    for pseudonym, item_seconds in seconds:
        items[pseudonym] += 1
        if item_seconds is not None:
            measured[pseudonym].append(item_seconds)
    rows = [RaterRow(p, assignments[p], items[p], median(measured[p]) if measured[p] else None, hours[p],
                     pay * assignments[p] / hours[p] if pay is not None and hours[p] > 0 else None, revoked[p])
            for p in sorted(assignments)]
    return RaterTable(config.pay.currency, pay, rows)


def _hours(started_at: datetime | None, submitted_at: datetime | None) -> float:
    """Hours from being handed an assignment to submitting it; 0 when either time is missing."""
    if started_at is None or submitted_at is None:
        return 0.0
    return max(0.0, (as_utc(submitted_at) - as_utc(started_at)).total_seconds() / 3600)


class Comment(NamedTuple):
    assignment_id: int
    annotator: str
    submitted_at: datetime | None
    comment: str


def study_comments(engine: Engine, study: str) -> list[Comment]:
    """Every comment a rater left on a submitted assignment of the study, oldest first: one statement."""
    with Session(engine) as session:
        study_id = study_by_name(session, study).id
        rows = session.execute(
            select(Assignment.id, Annotator.pseudonym, Assignment.submitted_at, Assignment.comment)
            .join(Annotator, Annotator.id == Assignment.annotator_id)
            .where(Assignment.study_id == study_id, Assignment.comment.is_not(None), Assignment.comment != "")
            .order_by(Assignment.submitted_at, Assignment.id)).all()
    return [Comment(assignment_id, pseudonym, as_utc(at), text or "") for assignment_id, pseudonym, at, text in rows]
