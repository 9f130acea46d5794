"""Taking an assignment's ratings: validated in full, stored in one transaction, idempotent per submission id.

A payload is
    {"submission_id": "3f2c…", "comment": "optional",
     "ratings": [{"item_id": 12, "scores": {"empathy": 4, "relevance": 5, "fluency": 5}, "seconds": 9.5}, …]}
with exactly one entry per item of the assignment and one integer score within the study's scale per
criterion. Sending the same submission again (a retry, a double click) stores nothing twice and answers
the same; a different submission for an already submitted assignment is a conflict.
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from server.errors import BadInput, Conflict, Forbidden, NotFound
from server.store.engine import unit_of_work
from server.store.models import Assignment, AssignmentItem, Rating, Study
from server.store.queries import as_utc, now_utc

SUBMISSION_ID = re.compile(r"^[A-Za-z0-9_.:-]{8,100}$")
MAX_COMMENT = 2000
MAX_SECONDS = 24 * 3600


def _validate(payload: Any, item_ids: list[int], criteria: list[str], low: int, high: int) -> tuple[str, dict, str | None]:
    if not isinstance(payload, dict):
        raise BadInput("body must be a JSON object with submission_id and ratings")
    unknown = sorted(set(payload) - {"submission_id", "ratings", "comment"})
    if unknown:
        raise BadInput(f"unknown field {unknown[0]!r}; expected submission_id, ratings, comment")
    submission_id = payload.get("submission_id")
    if not isinstance(submission_id, str) or not SUBMISSION_ID.match(submission_id):
        raise BadInput("submission_id must be a string of 8-100 letters, digits, '_', '.', ':' or '-'")
    comment = payload.get("comment")
    if comment is not None and (not isinstance(comment, str) or len(comment) > MAX_COMMENT):
        raise BadInput(f"comment must be a string of at most {MAX_COMMENT} characters")
    ratings = payload.get("ratings")
    if not isinstance(ratings, list):
        raise BadInput("ratings must be a list with one entry per item of the assignment")
    expected = set(item_ids)
    by_item: dict[int, dict] = {}
    for i, entry in enumerate(ratings):
        where = f"ratings[{i}]"
        if not isinstance(entry, dict):
            raise BadInput(f"{where} must be an object with item_id and scores")
        item_id = entry.get("item_id")
        if isinstance(item_id, bool) or not isinstance(item_id, int):
            raise BadInput(f"{where}.item_id must be an integer")
        if item_id not in expected:
            raise BadInput(f"{where}: item {item_id} is not part of this assignment")
        if item_id in by_item:
            raise BadInput(f"{where}: item {item_id} is rated twice")
        scores = entry.get("scores")
        if not isinstance(scores, dict):
            raise BadInput(f"{where}.scores must be an object with one score per criterion")
        missing = [c for c in criteria if c not in scores]
        if missing:
            raise BadInput(f"{where}: item {item_id} has no score for {missing[0]!r}")
        extra = sorted(set(scores) - set(criteria))
        if extra:
            raise BadInput(f"{where}: unknown criterion {extra[0]!r}; expected {', '.join(criteria)}")
        for criterion in criteria:
            score = scores[criterion]
            if isinstance(score, bool) or not isinstance(score, int) or not low <= score <= high:
                raise BadInput(f"{where}: {criterion} score {score!r} for item {item_id} must be an "
                                      f"integer from {low} to {high}")
        seconds = entry.get("seconds")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                    or not 0 <= seconds <= MAX_SECONDS):
            raise BadInput(f"{where}.seconds must be a number from 0 to {MAX_SECONDS}")
        by_item[item_id] = {"scores": scores, "seconds": seconds}
    missing_items = sorted(expected - set(by_item))
    if missing_items:
        raise BadInput(f"item {missing_items[0]} of this assignment has no rating "
                              f"({len(missing_items)} of {len(expected)} items missing)")
    return submission_id, by_item, comment


def _receipt(assignment: Assignment, n_ratings: int) -> dict[str, Any]:
    return {"status": "stored", "assignment_id": assignment.id, "submission_id": assignment.submission_id,
            "ratings": n_ratings, "late": assignment.late,
            "submitted_at": as_utc(assignment.submitted_at).isoformat()}


def _already_submitted(session: Session, assignment: Assignment, submission_id: str) -> dict[str, Any]:
    if assignment.submission_id == submission_id:
        count = len(session.scalars(select(Rating.id).where(Rating.assignment_id == assignment.id)).all())
        return _receipt(assignment, count)
    raise Conflict(f"assignment {assignment.id} was already submitted (with another submission id)")


def submit_assignment(engine: Engine, assignment_id: int, annotator_id: int, payload: Any,
                      *, now: datetime | None = None) -> dict[str, Any]:
    """Validate and store a submission; returns the receipt. Raises BadInput subclasses (4xx)."""
    now = now or now_utc()
    with Session(engine) as session:
        assignment = session.get(Assignment, assignment_id)
        if assignment is None:
            raise NotFound(f"no assignment {assignment_id}")
        if assignment.annotator_id != annotator_id:
            raise Forbidden(f"assignment {assignment_id} is not yours")
        if assignment.status == "submitted":
            return _already_submitted(session, assignment, payload.get("submission_id") if isinstance(payload, dict) else None)
        config = session.get(Study, assignment.study_id).config
        item_ids = list(session.scalars(select(AssignmentItem.item_id).where(AssignmentItem.assignment_id == assignment_id)))
    submission_id, by_item, comment = _validate(payload, item_ids, list(config.criterion_keys), config.scale.min,
                                                config.scale.max)

    try:
        with unit_of_work(engine) as session:
            assignment = session.get(Assignment, assignment_id, with_for_update=True)
            if assignment.status == "submitted":
                return _already_submitted(session, assignment, submission_id)
            late = assignment.status == "expired" or (assignment.expires_at is not None and as_utc(assignment.expires_at) < now)
            assignment.status, assignment.submission_id = "submitted", submission_id
            assignment.submitted_at, assignment.late, assignment.comment = now, late, comment or None
            for link in session.scalars(select(AssignmentItem).where(AssignmentItem.assignment_id == assignment_id)):
                link.seconds_on_item = by_item[link.item_id]["seconds"]
            session.add_all(
                Rating(assignment_id=assignment_id, item_id=item_id, annotator_id=annotator_id, criterion=criterion,
                       score=score, submitted_at=now, submission_id=submission_id)
                for item_id, entry in by_item.items() for criterion, score in entry["scores"].items()
            )
            session.flush()
            return _receipt(assignment, sum(len(e["scores"]) for e in by_item.values()))
    except IntegrityError:
        # A concurrent identical submission won the race: answer as for a retry.
        with Session(engine) as session:
            assignment = session.get(Assignment, assignment_id)
            if assignment.status == "submitted":
                return _already_submitted(session, assignment, submission_id)
            raise
