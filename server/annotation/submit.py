"""Taking an assignment's ratings: validated in full, stored in one transaction, idempotent per submission id.

A payload is
    {"submission_id": "3f2c…", "comment": "optional",
     "ratings": [{"item_id": 12, "scores": {"empathy": 4, "relevance": 5, "fluency": 5}, "seconds": 9.5}, …]}
with exactly one entry per item of the assignment and one integer score within the study's scale per
criterion. Sending the same submission again (a retry, a double click) stores nothing twice and answers
the same; a different submission for an already submitted assignment is a conflict.

Cost, whatever the number of items (tests/annotation/test_statement_counts.py): two reads (the assignment with
its study, whether the rater may work and her provider, for a Prolific participant's completion code; then its
item ids), then a short write transaction of three
statements: one UPDATE that marks the assignment submitted only if it still may be (hers, not submitted, study
open, rater not revoked), one UPDATE of every item's time, one bulk INSERT of the ratings. Of two
submissions at once the database lets one UPDATE through: SQLite runs one write transaction at a time (BEGIN
IMMEDIATE), PostgreSQL makes the second wait for the first's row lock and then re-checks its WHERE.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Double, Engine, and_, case, exists, func, insert, literal, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from server.annotation.handout import ensure_may_work, refuse_unless_may_work, revoked_clause
from server.annotation.prolific import completion_after_submit
from server.annotation.submission_schema import (
    ENTRY_FIELDS,
    MAX_COMMENT,
    MAX_SECONDS,
    SUBMISSION_FIELDS,
    SUBMISSION_ID,
    SUBMISSION_ID_RULE,
    ExpectedRatings,
    json_integer,
    json_number,
)
from server.errors import BadInput, Conflict, NotFound
from server.store.engine import unit_of_work
from server.store.models import Annotator, Assignment, AssignmentItem, Rating, Study
from server.store.queries import STUDY_CLOSED, as_utc, now_utc
from server.store.storable import text_problem


class ItemRating(NamedTuple):
    scores: dict[str, int]
    seconds: float | None


class ValidSubmission(NamedTuple):
    submission_id: str
    ratings: dict[int, ItemRating]  # by item id, one per item of the assignment
    comment: str | None


def _refuse_unknown_fields(value: dict, fields: dict[str, bool], where: str) -> None:
    unknown = sorted(set(value) - set(fields), key=str)
    if unknown:
        raise BadInput(f"{where}unknown field {unknown[0]!r}; expected {', '.join(fields)}")


def validate_submission(payload: Any, expected: ExpectedRatings) -> ValidSubmission:
    """Check a submission body against the rules in server.annotation.submission_schema (which also generate its
    JSON schema); raises BadInput saying what was wrong and where."""
    if not isinstance(payload, dict):
        raise BadInput("body must be a JSON object with submission_id and ratings")
    _refuse_unknown_fields(payload, SUBMISSION_FIELDS, "")
    submission_id = payload.get("submission_id")
    if not isinstance(submission_id, str) or not SUBMISSION_ID.fullmatch(submission_id):
        raise BadInput(f"submission_id must be {SUBMISSION_ID_RULE}")
    comment = payload.get("comment")
    if comment is not None and (not isinstance(comment, str) or len(comment) > MAX_COMMENT):
        raise BadInput(f"comment must be a string of at most {MAX_COMMENT} characters")
    if comment is not None and (problem := text_problem(comment)):
        raise BadInput(f"comment {problem}")
    ratings = payload.get("ratings")
    if not isinstance(ratings, list):
        raise BadInput("ratings must be a list with one entry per item of the assignment")
    criteria, low, high = expected.criteria, expected.low, expected.high
    by_item: dict[int, ItemRating] = {}
    for i, entry in enumerate(ratings):
        where = f"ratings[{i}]"
        if not isinstance(entry, dict):
            raise BadInput(f"{where} must be an object with item_id and scores")
        _refuse_unknown_fields(entry, ENTRY_FIELDS, f"{where}: ")
        item_id = json_integer(entry.get("item_id"))
        if item_id is None:
            raise BadInput(f"{where}.item_id must be an integer")
        if item_id not in expected.item_ids:
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
        checked: dict[str, int] = {}
        for criterion in criteria:
            score = json_integer(scores[criterion])
            if score is None or not low <= score <= high:
                raise BadInput(f"{where}: {criterion} score {scores[criterion]!r} for item {item_id} must be an "
                               f"integer from {low} to {high}")
            checked[criterion] = score
        seconds = entry.get("seconds")
        if seconds is not None:
            seconds = json_number(seconds)
            if seconds is None or not 0 <= seconds <= MAX_SECONDS:
                raise BadInput(f"{where}.seconds must be a number from 0 to {MAX_SECONDS}")
        by_item[item_id] = ItemRating(checked, seconds)
    missing_items = [item for item in expected.item_ids if item not in by_item]
    if missing_items:
        raise BadInput(f"item {missing_items[0]} of this assignment has no rating "
                       f"({len(missing_items)} of {len(expected.item_ids)} items missing)")
    return ValidSubmission(submission_id, by_item, comment)


def _receipt(assignment_id: int, submission_id: str | None, late: bool, submitted_at: datetime | None,
             n_ratings: int) -> dict[str, Any]:
    moment = as_utc(submitted_at)
    return {"status": "stored", "assignment_id": assignment_id, "submission_id": submission_id, "ratings": n_ratings,
            "late": bool(late), "submitted_at": moment.isoformat() if moment is not None else None}


def _already_submitted(session: Session, assignment: Assignment, submission_id: object) -> dict[str, Any]:
    if assignment.submission_id == submission_id:
        count = session.scalar(select(func.count()).select_from(Rating).where(Rating.assignment_id == assignment.id))
        return _receipt(assignment.id, assignment.submission_id, assignment.late, assignment.submitted_at, count or 0)
    raise Conflict(f"assignment {assignment.id} was already submitted (with another submission id)")


def _own_assignment(session: Session, assignment_id: int, annotator_id: int, study: str | None) -> Assignment:
    """The assignment if it is this annotator's (and of `study`, when given). One NotFound, with one message,
    for an id that does not exist, is someone else's or is of another study: ids reveal nothing."""
    assignment = session.get(Assignment, assignment_id)
    if (assignment is None or assignment.annotator_id != annotator_id
            or (study is not None and session.get_one(Study, assignment.study_id).name != study)):
        raise NotFound(f"you have no assignment {assignment_id}")
    return assignment


def _mark_submitted(session: Session, assignment_id: int, annotator_id: int, submission: ValidSubmission,
                    now: datetime) -> bool | None:
    """Mark the assignment submitted, in one UPDATE that does so only if it still may be: hers, not submitted yet,
    its study not closed, she not revoked. Late when it had expired or its deadline has passed. Returns whether it
    was late, or None when nothing was updated."""
    late = session.scalar(
        update(Assignment)
        .where(Assignment.id == assignment_id, Assignment.annotator_id == annotator_id,
               Assignment.status != "submitted",
               exists().where(Study.id == Assignment.study_id, Study.status != STUDY_CLOSED),
               ~revoked_clause(Assignment.study_id, annotator_id))
        .values(status="submitted", submission_id=submission.submission_id, submitted_at=now,
                comment=submission.comment or None,  # an empty comment is no comment
                late=or_(Assignment.status == "expired",
                         and_(Assignment.expires_at.is_not(None), Assignment.expires_at < now)))
        .returning(Assignment.late).execution_options(synchronize_session=False)
    )
    return None if late is None else bool(late)


def _store_ratings(session: Session, assignment_id: int, annotator_id: int, submission: ValidSubmission,
                   now: datetime) -> int:
    """The time on each item (one UPDATE) and every rating (one bulk INSERT).
    Returns how many ratings were stored."""
    timed = [(item_id, rating.seconds) for item_id, rating in submission.ratings.items() if rating.seconds is not None]
    if timed:  # a claimed assignment's items have no time yet: items sent without one stay so
        session.execute(
            update(AssignmentItem).where(AssignmentItem.assignment_id == assignment_id,
                                         AssignmentItem.item_id.in_([item_id for item_id, _ in timed]))
            .values(seconds_on_item=case(*((AssignmentItem.item_id == item_id, literal(seconds, Double))
                                           for item_id, seconds in timed)))
            .execution_options(synchronize_session=False))
    rows = [{"assignment_id": assignment_id, "item_id": item_id, "annotator_id": annotator_id, "criterion": criterion,
             "score": score, "submitted_at": now, "submission_id": submission.submission_id}
            for item_id, rating in submission.ratings.items() for criterion, score in rating.scores.items()]
    # One INSERT with a list of parameter sets: SQLAlchemy's bulk path (executemany on SQLite, batches of
    # multi-row VALUES on PostgreSQL), compiled once and cached; a VALUES clause built per call is compiled per call.
    session.execute(insert(Rating), rows)
    return len(rows)


def submit_assignment(engine: Engine, assignment_id: int, annotator_id: int, payload: Any,
                      *, study: str | None = None, now: datetime | None = None) -> dict[str, Any]:
    """Validate and store a submission; returns the receipt. Raises BadInput subclasses (4xx).

    `study` is the study the caller's invite is for: an assignment of another study is NotFound, as is one of
    another annotator or one that does not exist. A closed study or a revoked annotator is Forbidden
    (handout.ensure_may_work), checked again in the storing UPDATE; sending a submission that is stored
    already still gets its receipt."""
    now = now or now_utc()
    with Session(engine) as session:
        row = session.execute(select(Assignment, Study, revoked_clause(Study.id, annotator_id), Annotator.provider)
                              .join(Study, Study.id == Assignment.study_id)
                              .outerjoin(Annotator, Annotator.id == Assignment.annotator_id)
                              .where(Assignment.id == assignment_id)).first()
        if row is None or row[0].annotator_id != annotator_id or (study is not None and row[1].name != study):
            raise NotFound(f"you have no assignment {assignment_id}")
        assignment, study_row, revoked, provider = row
        # A Prolific participant's receipt carries the completion code (after a valid submit only: it is added to
        # receipts, and every refusal raises).
        completion = completion_after_submit(study_row.config.recruitment, provider)
        if study_row.config.is_pairwise:  # choices between two responses, not ratings: its own rules
            from server.annotation.pairwise_submit import submit_pairwise  # (it imports this module's helpers)

            session.close()
            return {**submit_pairwise(engine, assignment_id, annotator_id, payload, study=study, now=now), **completion}
        if assignment.status == "submitted":
            return {**_already_submitted(session, assignment,
                                         payload.get("submission_id") if isinstance(payload, dict) else None),
                    **completion}
        refuse_unless_may_work(study_row, bool(revoked))
        config = study_row.config
        item_ids = session.scalars(select(AssignmentItem.item_id)
                                   .where(AssignmentItem.assignment_id == assignment_id)
                                   .order_by(AssignmentItem.position)).all()
    expected = ExpectedRatings(item_ids=tuple(item_ids), criteria=tuple(config.criterion_keys),
                               low=config.scale.min, high=config.scale.max)
    submission = validate_submission(payload, expected)

    try:
        with unit_of_work(engine) as session:
            late = _mark_submitted(session, assignment_id, annotator_id, submission, now)
            if late is None:  # submitted, closed or revoked meanwhile: say which
                assignment = _own_assignment(session, assignment_id, annotator_id, study)
                if assignment.status == "submitted":
                    return {**_already_submitted(session, assignment, submission.submission_id), **completion}
                ensure_may_work(session, session.get_one(Study, assignment.study_id), annotator_id)
                raise Conflict(f"assignment {assignment_id} cannot be submitted now ({assignment.status}): try again")
            stored = _store_ratings(session, assignment_id, annotator_id, submission, now)
            return {**_receipt(assignment_id, submission.submission_id, late, now, stored), **completion}
    except IntegrityError:
        # Not a second submission of this assignment (the UPDATE above lets one through, the other is answered
        # by its fallback): a submission id is unique across assignments, and a client that reuses one is told
        # so (not a 500); anything else the database refuses is raised.
        with Session(engine) as session:
            holder = select(Assignment.id).where(Assignment.submission_id == submission.submission_id)
            if session.scalar(holder) is not None:
                raise Conflict(f"submission id {submission.submission_id!r} was already used for another "
                               f"assignment; send a new one") from None
            raise
