"""Handing out assignments: the next one for an annotator, expiry of abandoned ones, closing a study.

Rules, each kept by the database and not by Python alone:
- an annotator holds at most one active ('assigned') assignment per study (a partial unique index on
  assignment); asking again, from a second tab for instance, resumes it;
- nobody is shown a context twice in a study (so a response's k ratings come from k distinct people): a claim
  writes one seen_context row per context of the assignment, unique per (study, annotator, context), in the
  claim's own transaction;
- each assignment goes to one annotator: a claim is an `UPDATE ... WHERE status = 'open'` (`claim`, also used
  when crowd work is ingested);
- assignments are handed out in design order (design_index).
The candidate is chosen in SQL (the first open assignment in design order holding no context the annotator has
seen) in the same transaction as the claim and its seen rows. One annotator's claims take turns (each first
locks her annotator row), so a second tab waits for the first and then resumes its assignment; should two
claims of hers still meet (crowd ingest, a direct `claim`), one fails on the index or on the seen key.
An assignment not submitted by its deadline expires and a copy with the same items goes back to the pool; the
rater keeps her seen rows (she did see those contexts). A closed study hands out nothing; a revoked annotator
gets nothing (both Forbidden, with a message saying so).
"""
from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    CursorResult,
    DateTime,
    Engine,
    Integer,
    Select,
    and_,
    delete,
    insert,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from server.errors import Conflict, Forbidden, NotFound
from server.store.engine import unit_of_work
from server.store.models import (
    ACTIVE,
    Annotator,
    Assignment,
    AssignmentItem,
    Context,
    Response,
    SeenContext,
    Study,
    StudyItem,
    StudyRevocation,
)
from server.store.queries import STUDY_CLOSED, active_assignment, assignment_counts, iso_utc, now_utc, study_by_name

# Each failed attempt means another claim committed (another annotator took the candidate, or this annotator's
# other tab claimed first), so the loop always makes progress; the bound only turns a bug into an error.
MAX_CLAIM_ATTEMPTS = 200


class StudyClosed(Forbidden):
    """The study was closed by the researcher: no assignment is handed out and no submission is taken."""


class AccessRevoked(Forbidden):
    """The researcher revoked this annotator, in this study or in all of them."""


def ensure_may_work(session: Session, study: Study, annotator_id: int) -> None:
    """Raise StudyClosed or AccessRevoked when this annotator may not take or submit work in this study."""
    if study.status == STUDY_CLOSED:
        raise StudyClosed(f"study {study.name!r} is closed and takes no more ratings. Thank you for your help!")
    revoked = session.scalar(select(Annotator.revoked_at).where(Annotator.id == annotator_id))
    if revoked is not None or session.get(StudyRevocation, (study.id, annotator_id)) is not None:
        raise AccessRevoked(f"your access to study {study.name!r} was revoked by the researcher; ask them if you "
                            f"think this is a mistake")


def _expire(session: Session, old: Assignment) -> bool:
    """Expire one active assignment and put a copy with the same items in the pool; False if it was no longer
    active (expired or submitted meanwhile)."""
    expired = session.execute(
        update(Assignment).where(Assignment.id == old.id, Assignment.status == ACTIVE).values(status="expired")
    )
    if not cast("CursorResult[Any]", expired).rowcount:
        return False
    copy = Assignment(study_id=old.study_id, status="open", round=old.round, design_index=old.design_index,
                      replaces_id=old.id)
    copy.items = [AssignmentItem(item_id=i.item_id, position=i.position) for i in old.items]
    session.add(copy)
    return True


def expire_overdue(session: Session, study_id: int, now: datetime) -> int:
    """Expire assigned-but-unsubmitted assignments past their deadline; put a copy of each in the pool. Returns
    how many this call expired."""
    overdue = session.scalars(
        select(Assignment).options(selectinload(Assignment.items))
        .where(Assignment.study_id == study_id, Assignment.status == ACTIVE, Assignment.expires_at < now)
        .with_for_update(skip_locked=True)
    ).all()
    count = sum(_expire(session, old) for old in overdue)
    session.flush()
    return count


def expire_active_of(session: Session, annotator_id: int, *, study_id: int | None = None) -> int:
    """Expire the annotator's active assignments (in one study, or in every study), each copied back to the pool:
    what revoking an annotator does to her work in progress. Returns how many were expired."""
    query = select(Assignment).options(selectinload(Assignment.items)).where(
        Assignment.annotator_id == annotator_id, Assignment.status == ACTIVE)
    if study_id is not None:
        query = query.where(Assignment.study_id == study_id)
    count = sum(_expire(session, old) for old in session.scalars(query.with_for_update()).all())
    session.flush()
    return count


def _first_fitting(study_id: int, annotator_id: int) -> Select[int]:
    """The first open assignment of the study, in design order, holding no context this annotator has seen."""
    seen_in_it = (
        select(AssignmentItem.id)
        .join(StudyItem, StudyItem.id == AssignmentItem.item_id)
        .join(Response, Response.id == StudyItem.response_id)
        .join(SeenContext, and_(SeenContext.context_id == Response.context_id, SeenContext.study_id == study_id,
                                SeenContext.annotator_id == annotator_id))
        .where(AssignmentItem.assignment_id == Assignment.id)
    )
    return (select(Assignment.id)
            .where(Assignment.study_id == study_id, Assignment.status == "open", ~seen_in_it.exists())
            .order_by(Assignment.design_index, Assignment.id).limit(1))


def _take_turn(session: Session, annotator_id: int) -> None:
    """Make this annotator's claims take turns: a no-op UPDATE of her row, first in the claim's transaction. On
    PostgreSQL it is a row lock, held to commit; on SQLite it takes the database's write lock. Either way a second
    tab's claim waits here until the first has committed, and then sees its assignment. Without it, the second
    could look for an active assignment before the first committed, find every fitting candidate taken (or
    locked) by the first, and answer "nothing left"."""
    session.execute(update(Annotator).where(Annotator.id == annotator_id)
                    .values(display_name=Annotator.display_name))


def next_assignment(engine: Engine, study_name: str, annotator_id: int, *, now: datetime | None = None) -> int | None:
    """The id of the assignment this annotator should work on now (resumed or newly claimed), or None when
    nothing suitable is left. StudyClosed or AccessRevoked when she may not work on this study."""
    now = now or now_utc()
    with Session(engine) as session:
        study = study_by_name(session, study_name)
        ensure_may_work(session, study, annotator_id)
        study_id, minutes = study.id, study.config.design.assignment_minutes
        resumable = session.scalar(select(Assignment.id).where(
            Assignment.study_id == study_id, Assignment.annotator_id == annotator_id, Assignment.status == ACTIVE,
            or_(Assignment.expires_at.is_(None), Assignment.expires_at >= now)))
    if resumable is not None:  # resuming work that is not overdue needs no turn
        return resumable
    for _ in range(MAX_CLAIM_ATTEMPTS):
        try:
            with unit_of_work(engine) as session:
                _take_turn(session, annotator_id)
                # Expiry, the active check and the claim in one turn: another tab cannot be expiring her
                # assignment (and claiming the next) while this one reads it as still hers.
                expire_overdue(session, study_id, now)
                active = active_assignment(session, study_id, annotator_id)
                if active is not None:
                    return active
                # SKIP LOCKED (PostgreSQL): raters asking at once try different candidates instead of queueing
                # on the first one. SQLite has one writer at a time anyway and ignores it.
                candidate = session.scalar(_first_fitting(study_id, annotator_id)
                                           .with_for_update(skip_locked=True, of=Assignment))
                if candidate is None:
                    return None
                if claim(session, candidate, annotator_id, now=now, minutes=minutes):
                    return candidate
        except IntegrityError:
            # This annotator's concurrent claim committed first (one active assignment per study, one seen row
            # per context): the next attempt reads it back.
            continue
    raise Conflict(f"could not hand out an assignment of study {study_name!r} after {MAX_CLAIM_ATTEMPTS} "
                   f"attempts (very many claims at once): try again")


def claim(session: Session, assignment_id: int, annotator_id: int, *, now: datetime, minutes: int | None) -> bool:
    """Give an open assignment to the annotator: one `UPDATE ... WHERE status = 'open'`, so of two claims at
    once exactly one wins, and in the same transaction one seen_context row per context of the assignment.
    True when this call claimed it. The assignment expires `minutes` after `now`; None means no local deadline
    (crowd work is timed by the platform, not here).

    Raises IntegrityError, spoiling the caller's transaction, when the annotator already holds another active
    assignment of the study or has already seen one of its contexts there."""
    expires_at = None if minutes is None else now + timedelta(minutes=minutes)
    claimed = session.execute(
        update(Assignment).where(Assignment.id == assignment_id, Assignment.status == "open")
        .values(status=ACTIVE, annotator_id=annotator_id, started_at=now, expires_at=expires_at)
    )
    if not cast("CursorResult[Any]", claimed).rowcount:
        return False
    contexts = (
        select(Assignment.study_id, literal(annotator_id, Integer), Response.context_id, Assignment.id,
               literal(now, DateTime(timezone=True)))
        .join(AssignmentItem, AssignmentItem.assignment_id == Assignment.id)
        .join(StudyItem, StudyItem.id == AssignmentItem.item_id)
        .join(Response, Response.id == StudyItem.response_id)
        .where(Assignment.id == assignment_id)
        .distinct()
    )
    session.execute(insert(SeenContext).from_select(
        ["study_id", "annotator_id", "context_id", "assignment_id", "seen_at"], contexts))
    return True


def contexts_seen_before(session: Session, assignment_id: int, annotator_id: int) -> list[tuple[int, int]]:
    """(context id, assignment id) for each context of this assignment that the annotator was shown in another
    assignment of its study: claiming it would fail on the seen key. Empty when she may take it."""
    return [(context_id, seen_in) for context_id, seen_in in session.execute(
        select(SeenContext.context_id, SeenContext.assignment_id).distinct()
        .join(Response, Response.context_id == SeenContext.context_id)
        .join(StudyItem, and_(StudyItem.response_id == Response.id, StudyItem.study_id == SeenContext.study_id))
        .join(AssignmentItem, AssignmentItem.item_id == StudyItem.id)
        .where(AssignmentItem.assignment_id == assignment_id, SeenContext.annotator_id == annotator_id,
               SeenContext.assignment_id != assignment_id)
        .order_by(SeenContext.context_id)
    ).all()]


def release(session: Session, assignment_id: int, annotator_id: int) -> bool:
    """Undo a claim whose work was not stored: the assignment goes back to the pool as it was, if this
    annotator still holds it unsubmitted, and the seen rows its claim wrote go with it. True when it was
    released."""
    released = session.execute(
        update(Assignment).where(Assignment.id == assignment_id, Assignment.status == ACTIVE,
                                 Assignment.annotator_id == annotator_id)
        .values(status="open", annotator_id=None, started_at=None, expires_at=None)
    )
    if not cast("CursorResult[Any]", released).rowcount:
        return False
    session.execute(delete(SeenContext).where(SeenContext.assignment_id == assignment_id,
                                              SeenContext.annotator_id == annotator_id))
    return True


class Closing(NamedTuple):
    was_open: bool  # False when the study was closed already
    counts: dict[str, int]  # its assignments by status once closed


def close_study(engine: Engine, name: str) -> Closing:
    """Close the study: from now on it hands out nothing and takes no submission (StudyClosed). Assignments in
    progress stay as they are, so `study status` shows how many were left unfinished."""
    with unit_of_work(engine) as session:
        study = study_by_name(session, name)
        was_open = study.status != STUDY_CLOSED
        study.status = STUDY_CLOSED
        return Closing(was_open, assignment_counts(session, study.id))


def assignment_payload(engine: Engine, assignment_id: int) -> dict[str, Any]:
    """What the task UI needs to show an assignment. System names and control flags are not included."""
    with Session(engine) as session:
        assignment = session.get(Assignment, assignment_id)
        if assignment is None:
            raise NotFound(f"no assignment {assignment_id}")
        study = session.get_one(Study, assignment.study_id)
        rows = session.execute(
            select(AssignmentItem.position, StudyItem.id, Response.text, Context)
            .join(StudyItem, StudyItem.id == AssignmentItem.item_id)
            .join(Response, Response.id == StudyItem.response_id)
            .join(Context, Context.id == Response.context_id)
            .where(AssignmentItem.assignment_id == assignment_id)
            .order_by(AssignmentItem.position)
            .options(selectinload(Context.dialogue))
        ).all()
        items = []
        for position, item_id, text, context in rows:
            turns = [t for t in context.dialogue.turns if t.idx <= context.n_turns]
            items.append({"item_id": item_id, "position": position, "response": text,
                          "context": [{"role": t.role, "text": t.text} for t in turns]})
        config = study.config
        return {
            "assignment_id": assignment.id,
            "status": assignment.status,
            "expires_at": iso_utc(assignment.expires_at),
            "study": {"name": study.name, "title": config.title or "Rate responses in conversations",
                      "instructions": config.instructions},
            "criteria": [asdict(c) for c in config.criteria],
            "scale": {**asdict(config.scale), "labels": list(config.scale.labels)},
            "items": items,
        }
