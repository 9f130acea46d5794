"""Handing out assignments: the next one for an annotator, and expiry of abandoned ones.

Rules: an annotator holds at most one active assignment per study (asking again resumes it); they never
get an assignment holding a context they have already seen in this study (so a response's k ratings come
from k distinct people); assignments are handed out in design order; a claim is an atomic
`UPDATE ... WHERE status = 'open'` (`claim`, also used when crowd work is ingested), so two annotators
asking at once never get the same assignment.
An assignment not submitted by its deadline expires and a copy with the same items goes back to the pool.
"""
from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, Engine, select, update
from sqlalchemy.orm import Session, selectinload

from server.errors import NotFound
from server.store.engine import unit_of_work
from server.store.models import (
    Assignment,
    AssignmentItem,
    Context,
    Response,
    Study,
    StudyItem,
)
from server.store.queries import iso_utc, now_utc, study_by_name

CLAIM_CHUNK = 50


def expire_overdue(session: Session, study_id: int, now: datetime) -> int:
    """Expire assigned-but-unsubmitted assignments past their deadline; put a copy of each in the pool."""
    overdue = session.scalars(
        select(Assignment).options(selectinload(Assignment.items))
        .where(Assignment.study_id == study_id, Assignment.status == "assigned", Assignment.expires_at < now)
        .with_for_update(skip_locked=True)
    ).all()
    for old in overdue:
        expired = session.execute(
            update(Assignment).where(Assignment.id == old.id, Assignment.status == "assigned")
            .values(status="expired")
        )
        if not cast("CursorResult[Any]", expired).rowcount:
            continue
        copy = Assignment(study_id=study_id, status="open", round=old.round, design_index=old.design_index,
                          replaces_id=old.id)
        copy.items = [AssignmentItem(item_id=i.item_id, position=i.position) for i in old.items]
        session.add(copy)
    session.flush()
    return len(overdue)


def _contexts_of(session: Session, assignment_ids: list[int]) -> dict[int, set[int]]:
    rows = session.execute(
        select(AssignmentItem.assignment_id, Response.context_id)
        .join(StudyItem, StudyItem.id == AssignmentItem.item_id)
        .join(Response, Response.id == StudyItem.response_id)
        .where(AssignmentItem.assignment_id.in_(assignment_ids))
    ).all()
    contexts: dict[int, set[int]] = {a: set() for a in assignment_ids}
    for assignment_id, context_id in rows:
        contexts[assignment_id].add(context_id)
    return contexts


def next_assignment(engine: Engine, study_name: str, annotator_id: int, *, now: datetime | None = None) -> int | None:
    """The id of the assignment this annotator should work on now (resumed or newly claimed), or None when
    nothing suitable is left."""
    now = now or now_utc()
    with unit_of_work(engine) as session:
        study = study_by_name(session, study_name)
        expire_overdue(session, study.id, now)
        active = session.scalar(
            select(Assignment.id).where(Assignment.study_id == study.id, Assignment.annotator_id == annotator_id,
                                        Assignment.status == "assigned")
        )
        if active is not None:
            return active
        mine = session.scalars(
            select(Assignment.id).where(Assignment.study_id == study.id, Assignment.annotator_id == annotator_id)
        ).all()
        seen = set().union(*_contexts_of(session, list(mine)).values()) if mine else set()
        open_ids = session.scalars(
            select(Assignment.id).where(Assignment.study_id == study.id, Assignment.status == "open")
            .order_by(Assignment.design_index, Assignment.id)
        ).all()
        minutes = study.config.design.assignment_minutes
    # Claim outside the read transaction, in design order, looking at a few candidates at a time (the
    # first chunk nearly always has one that fits); a lost race just moves on to the next candidate.
    for start in range(0, len(open_ids), CLAIM_CHUNK):
        chunk = list(open_ids[start:start + CLAIM_CHUNK])
        with Session(engine) as session:
            contexts = _contexts_of(session, chunk)
        for assignment_id in chunk:
            if contexts[assignment_id] & seen:
                continue
            with unit_of_work(engine) as session:
                if claim(session, assignment_id, annotator_id, now=now, minutes=minutes):
                    return assignment_id
    return None


def claim(session: Session, assignment_id: int, annotator_id: int, *, now: datetime, minutes: int | None) -> bool:
    """Give an open assignment to the annotator: one `UPDATE ... WHERE status = 'open'`, so of two claims at
    once exactly one wins. True when this call claimed it. The assignment expires `minutes` after `now`;
    None means no local deadline (crowd work is timed by the platform, not here)."""
    expires_at = None if minutes is None else now + timedelta(minutes=minutes)
    claimed = session.execute(
        update(Assignment).where(Assignment.id == assignment_id, Assignment.status == "open")
        .values(status="assigned", annotator_id=annotator_id, started_at=now, expires_at=expires_at)
    )
    return bool(cast("CursorResult[Any]", claimed).rowcount)


def release(session: Session, assignment_id: int, annotator_id: int) -> bool:
    """Undo a claim whose work was not stored: the assignment goes back to the pool as it was, if this
    annotator still holds it unsubmitted. True when it was released."""
    released = session.execute(
        update(Assignment).where(Assignment.id == assignment_id, Assignment.status == "assigned",
                                 Assignment.annotator_id == annotator_id)
        .values(status="open", annotator_id=None, started_at=None, expires_at=None)
    )
    return bool(cast("CursorResult[Any]", released).rowcount)


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
