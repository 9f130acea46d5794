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
IMMEDIATE), PostgreSQL makes the second wait for the first's row lock and then re-checks its WHERE. The statements
are prepared once (server.annotation.hot_sql) and run on a Core connection, the item times and the ratings each as
one statement for all the rows (hot_sql.run_rows): no ORM object loaded, no statement built per call.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection, Engine, Row, select
from sqlalchemy.exc import IntegrityError

from empeval.server.annotation import hot_sql
from empeval.server.annotation.handout import refuse_unless_may_work
from empeval.server.annotation.hot_sql import Executor
from empeval.server.annotation.prolific import completion_after_submit
from empeval.server.annotation.submission_schema import (
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
from empeval.server.errors import BadInput, Conflict, NotFound
from empeval.server.store.engine import write_transaction
from empeval.server.store.models import Assignment
from empeval.server.store.queries import as_utc, now_utc
from empeval.server.store.statuses import AssignmentStatus
from empeval.server.store.storable import text_problem


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
             n_stored: int, *, counted: str = "ratings") -> dict[str, Any]:
    """A stored submission's receipt; `counted` names what `n_stored` counts ("ratings"; "choices" for A/B)."""
    moment = as_utc(submitted_at)
    return {"status": "stored", "assignment_id": assignment_id, "submission_id": submission_id, counted: n_stored,
            "late": bool(late), "submitted_at": moment.isoformat() if moment is not None else None}


def _already_submitted(connection: Executor, assignment_id: int, stored: Row[Any], submission_id: object, *,
                       count: hot_sql.ByDialect = hot_sql.COUNT_RATINGS, counted: str = "ratings") -> dict[str, Any]:
    """The receipt of a submission stored already (`stored`: the assignment's row as ASSIGNMENT_FOR_SUBMIT reads
    it), when `submission_id` is the one stored, with what `count` counts (ratings; an A/B study's choices);
    else Conflict."""
    if stored.submission_id == submission_id:
        n_stored = hot_sql.run(connection, count, {"assignment": assignment_id}).scalar()
        return _receipt(assignment_id, stored.submission_id, stored.late, hot_sql.read_moment(stored.submitted_at),
                        n_stored or 0, counted=counted)
    raise Conflict(f"assignment {assignment_id} was already submitted (with another submission id)")


def _own_assignment(connection: Executor, assignment_id: int, annotator_id: int, study: str | None) -> Row[Any]:
    """The assignment with its study, whether she may work and her provider (a row of ASSIGNMENT_FOR_SUBMIT), if it
    is this annotator's (and of `study`, when given). One NotFound, with one message, for an id that does not
    exist, is someone else's or is of another study: ids reveal nothing."""
    row = hot_sql.run(connection, hot_sql.ASSIGNMENT_FOR_SUBMIT,
                      {"assignment": assignment_id, "annotator": annotator_id}).first()
    if row is None or row.annotator_id != annotator_id or (study is not None and row.name != study):
        raise NotFound(f"you have no assignment {assignment_id}")
    return row


def _study_of(row: Row[Any]) -> hot_sql.StudyView:
    return hot_sql.study_view(row.study_id, row.name, row.study_status, row.config)


def _mark_submitted(connection: Executor, assignment_id: int, annotator_id: int, submission: ValidSubmission,
                    now: datetime) -> bool | None:
    """Mark the assignment submitted, in one UPDATE that does so only if it still may be: hers, not submitted yet,
    its study not closed, she not revoked. Late when it had expired or its deadline has passed. Returns whether it
    was late, or None when nothing was updated."""
    late = hot_sql.run(connection, hot_sql.MARK_SUBMITTED, {
        "assignment": assignment_id, "annotator": annotator_id, "submission": submission.submission_id,
        "now": hot_sql.moment(connection, now), "comment": submission.comment or None,  # an empty one is none
    }).scalar()
    return None if late is None else bool(late)


def _mark_or_answer(connection: Executor, assignment_id: int, annotator_id: int, marking: ValidSubmission,
                    study: str | None, now: datetime, *, count: hot_sql.ByDialect = hot_sql.COUNT_RATINGS,
                    counted: str = "ratings") -> bool | dict[str, Any]:
    """Mark the assignment submitted (_mark_submitted) and return whether it was late; when nothing was updated
    (submitted, closed or revoked meanwhile) say which: the receipt of the same submission stored already (see
    _already_submitted for `count` and `counted`), else Forbidden or Conflict."""
    late = _mark_submitted(connection, assignment_id, annotator_id, marking, now)
    if late is not None:
        return late
    row = _own_assignment(connection, assignment_id, annotator_id, study)
    if row.status == AssignmentStatus.SUBMITTED:
        return _already_submitted(connection, assignment_id, row, marking.submission_id, count=count,
                                  counted=counted)
    refuse_unless_may_work(_study_of(row), bool(row.revoked))
    raise Conflict(f"assignment {assignment_id} cannot be submitted now ({row.status}): try again")


def refuse_if_used_elsewhere(connection: Connection, submission_id: str) -> None:
    """Raise Conflict when an assignment holds `submission_id` already: after the database refused a submission,
    whether that was its id, which is unique across assignments (a client reusing one is told so, not given a
    500). Reads on `connection`, whose write transaction has been rolled back."""
    holder = select(Assignment.id).where(Assignment.submission_id == submission_id)
    if connection.scalar(holder) is not None:
        raise Conflict(f"submission id {submission_id!r} was already used for another assignment; send a new one") \
            from None


def _store_ratings(connection: Executor, assignment_id: int, annotator_id: int, submission: ValidSubmission,
                   now: datetime) -> int:
    """The time on each item (one UPDATE) and every rating (one INSERT), each one statement for all the rows
    (hot_sql.run_rows). Returns how many ratings were stored."""
    timed = [{"item": item_id, "seconds": rating.seconds}
             for item_id, rating in submission.ratings.items() if rating.seconds is not None]
    if timed:  # a claimed assignment's items have no time yet: items sent without one stay so
        hot_sql.run_rows(connection, hot_sql.TIME_ON_ITEM, {"assignment": assignment_id}, timed)
    rows = [{"item": item_id, "criterion": criterion, "score": score}
            for item_id, rating in submission.ratings.items() for criterion, score in rating.scores.items()]
    hot_sql.run_rows(connection, hot_sql.INSERT_RATINGS, {
        "assignment": assignment_id, "annotator": annotator_id, "now": hot_sql.moment(connection, now),
        "submission": submission.submission_id}, rows)
    return len(rows)


def submit_assignment(engine: Engine, assignment_id: int, annotator_id: int, payload: Any,
                      *, study: str | None = None, now: datetime | None = None) -> dict[str, Any]:
    """Validate and store a submission; returns the receipt. Raises BadInput subclasses (4xx).

    `study` is the study the caller's invite is for: an assignment of another study is NotFound, as is one of
    another annotator or one that does not exist. A closed study or a revoked annotator is Forbidden
    (handout.refuse_unless_may_work), checked again in the storing UPDATE; sending a submission that is stored
    already still gets its receipt."""
    now = now or now_utc()
    with engine.connect() as connection:
        row = _own_assignment(connection, assignment_id, annotator_id, study)
        study_row = _study_of(row)
        config = study_row.config
        # A Prolific participant's receipt carries the completion code (after a valid submit only: it is added to
        # receipts, and every refusal raises).
        completion = completion_after_submit(config.recruitment, row.provider)
        if config.is_pairwise:  # choices between two responses, not ratings: its own rules
            from empeval.server.annotation.pairwise_submit import store_pairwise  # (it imports this module's helpers)

            return {**store_pairwise(connection, row, assignment_id, annotator_id, payload, study=study, now=now),
                    **completion}
        if row.status == AssignmentStatus.SUBMITTED:
            return {**_already_submitted(connection, assignment_id, row,
                                         payload.get("submission_id") if isinstance(payload, dict) else None),
                    **completion}
        refuse_unless_may_work(study_row, bool(row.revoked))
        item_ids = hot_sql.run(connection, hot_sql.ITEM_IDS, {"assignment": assignment_id}).scalars().all()
        expected = ExpectedRatings(item_ids=tuple(item_ids), criteria=tuple(config.criterion_keys),
                                   low=config.scale.min, high=config.scale.max)
        submission = validate_submission(payload, expected)
        try:
            with write_transaction(connection):  # the same connection: one taken from the pool per submit
                late = _mark_or_answer(connection, assignment_id, annotator_id, submission, study, now)
                if isinstance(late, dict):  # the receipt of this submission, stored already
                    return {**late, **completion}
                stored = _store_ratings(connection, assignment_id, annotator_id, submission, now)
                return {**_receipt(assignment_id, submission.submission_id, late, now, stored), **completion}
        except IntegrityError:
            # Not a second submission of this assignment (the UPDATE above lets one through, the other is answered
            # by its fallback): a submission id is unique across assignments, and a client that reuses one is told
            # so (not a 500); anything else the database refuses is raised.
            refuse_if_used_elsewhere(connection, submission.submission_id)
            raise
