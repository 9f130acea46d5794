"""Taking an assignment's answers, whatever the kind of study: validated in full, stored in one transaction,
idempotent per submission id.

One lifecycle for every kind: the assignment must be the annotator's (and of the study her invite is for), her
study open and she not revoked; a body is the envelope of submission_schema with the kind's entries, which the
study's kind part (kinds.AnnotationKind) checks and stores. Sending the same submission again (a retry, a double
click) stores nothing twice and answers the same receipt; a different submission for an already submitted
assignment is a conflict; a submission after the deadline is kept and flagged late; a Prolific participant's
receipt carries her completion code.

Cost, whatever the number of units (tests/annotation/test_statement_counts.py): two reads (the assignment with
its study, whether the rater may work and her provider, for a Prolific participant's completion code; then its
unit ids), then a short write transaction of three statements: one UPDATE that marks the assignment submitted
only if it still may be (hers, not submitted, study open, rater not revoked), one UPDATE of every unit's time,
one bulk INSERT of the answers (and one of the comments on single units, only when it carries some:
server/annotation/item_comments.py). Of two submissions at once the database lets one UPDATE through: SQLite runs
one write transaction at a time (BEGIN IMMEDIATE), PostgreSQL makes the second wait for the first's row lock and then
re-checks its WHERE. The statements are prepared once (server.annotation.hot_sql) and run on a Core connection,
the times and the answers each as one statement for all the rows (hot_sql.run_rows): no ORM object loaded, no
statement built per call. On SQLite the write transaction is a unit of a group commit (store.group_commit):
submissions and claims of a process's threads that meet at the write lock share one transaction, each under its own
savepoint and seeing those before it, and one commit; a receipt is answered only once that commit is done.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection, Engine, Row, select
from sqlalchemy.exc import IntegrityError

from empeval.server.annotation import hot_sql
from empeval.server.annotation.handout import refuse_unless_may_work
from empeval.server.annotation.hot_sql import Executor
from empeval.server.annotation.item_comments import comments_of, refuse_unless_taken, store_comments
from empeval.server.annotation.kinds import AnnotationKind, annotation_kind, annotation_kinds
from empeval.server.annotation.prolific import completion_after_submit
from empeval.server.annotation.submission_schema import validate_envelope
from empeval.server.errors import BadInput, Conflict, NotFound
from empeval.server.store.group_commit import run_write_unit
from empeval.server.store.kinds import setup_class
from empeval.server.store.models import Assignment
from empeval.server.store.queries import as_utc, now_utc
from empeval.server.store.statuses import AssignmentStatus


class ValidSubmission(NamedTuple):
    submission_id: str
    answers: Any  # what the kind's `validate` returned: one answer per unit of the assignment
    comment: str | None


def validate_submission(payload: Any, kind: AnnotationKind, expected: Any) -> ValidSubmission:
    """A submission body checked in full: its envelope (submission_schema) and the kind's entries against
    `expected` (what this assignment holds); BadInput saying what was wrong and where."""
    envelope = validate_envelope(payload, kind)
    return ValidSubmission(envelope.submission_id, kind.validate(envelope.entries, expected), envelope.comment)


def refuse_another_kinds_body(payload: Any, kind: AnnotationKind, assignment_id: int, study: str) -> None:
    """BadInput saying which kind the assignment is of, and what to send, when the body lists its answers under
    another kind's key and not under this kind's (a page or a script sending the wrong kind's body)."""
    if not isinstance(payload, dict) or kind.entries in payload:
        return
    if any(other.entries in payload for other in annotation_kinds() if other.entries != kind.entries):
        raise BadInput(f"assignment {assignment_id} is of the {setup_class(kind.name).label} study {study!r}: send "
                       f"{kind.entries}")


def _receipt(kind: AnnotationKind, assignment_id: int, submission_id: str | None, late: bool,
             submitted_at: datetime | None, n_stored: int) -> dict[str, Any]:
    """A stored submission's receipt: how many answers were stored, under the kind's word for them."""
    moment = as_utc(submitted_at)
    return {"status": "stored", "assignment_id": assignment_id, "submission_id": submission_id,
            kind.counted: n_stored, "late": bool(late),
            "submitted_at": moment.isoformat() if moment is not None else None}


def _already_submitted(connection: Executor, kind: AnnotationKind, assignment_id: int, stored: Row[Any],
                       submission_id: object) -> dict[str, Any]:
    """The receipt of a submission stored already (`stored`: the assignment's row as ASSIGNMENT_FOR_SUBMIT reads
    it), when `submission_id` is the one stored; else Conflict."""
    if stored.submission_id == submission_id:
        n_stored = hot_sql.run(connection, hot_sql.kind_statements(kind).count_answers,
                               {"assignment": assignment_id}).scalar()
        return _receipt(kind, assignment_id, stored.submission_id, stored.late,
                        hot_sql.read_moment(stored.submitted_at), n_stored or 0)
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


def _mark_or_answer(connection: Executor, kind: AnnotationKind, assignment_id: int, annotator_id: int,
                    submission: ValidSubmission, study: str | None, now: datetime) -> bool | dict[str, Any]:
    """Mark the assignment submitted (_mark_submitted) and return whether it was late; when nothing was updated
    (submitted, closed or revoked meanwhile) say which: the receipt of the same submission stored already, else
    Forbidden or Conflict."""
    late = _mark_submitted(connection, assignment_id, annotator_id, submission, now)
    if late is not None:
        return late
    row = _own_assignment(connection, assignment_id, annotator_id, study)
    if row.status == AssignmentStatus.SUBMITTED:
        return _already_submitted(connection, kind, assignment_id, row, submission.submission_id)
    refuse_unless_may_work(_study_of(row), bool(row.revoked))
    raise Conflict(f"assignment {assignment_id} cannot be submitted now ({row.status}): try again")


def _item_comments(config: Any, kind: AnnotationKind, submission: ValidSubmission) -> dict[int, str]:
    """The submission's comments on single units (server/annotation/item_comments.py), unit id -> text; BadInput
    when it has some and the study takes none. Empty for every submission without them."""
    comments = comments_of(submission.answers)
    refuse_unless_taken(config, comments, kind.entries)
    return comments


def refuse_if_used_elsewhere(connection: Connection, submission_id: str) -> None:
    """Raise Conflict when an assignment holds `submission_id` already: after the database refused a submission,
    whether that was its id, which is unique across assignments (a client reusing one is told so, not given a
    500). Reads on `connection`, whose write transaction has been rolled back."""
    holder = select(Assignment.id).where(Assignment.submission_id == submission_id)
    if connection.scalar(holder) is not None:
        raise Conflict(f"submission id {submission_id!r} was already used for another assignment; send a new one") \
            from None


def submit_assignment(engine: Engine, assignment_id: int, annotator_id: int, payload: Any,
                      *, study: str | None = None, now: datetime | None = None) -> dict[str, Any]:
    """Validate and store a submission; returns the receipt (the kind's count of what was stored: `ratings`,
    `choices`, ...). Raises BadInput subclasses (4xx).

    `study` is the study the caller's invite is for: an assignment of another study is NotFound, as is one of
    another annotator or one that does not exist. A closed study or a revoked annotator is Forbidden
    (handout.refuse_unless_may_work), checked again in the storing UPDATE; sending a submission that is stored
    already still gets its receipt."""
    now = now or now_utc()
    with engine.connect() as connection:
        row = _own_assignment(connection, assignment_id, annotator_id, study)
        study_row = _study_of(row)
        config = study_row.config
        kind = annotation_kind(config.kind)
        # A Prolific participant's receipt carries the completion code (after a valid submit only: it is added to
        # receipts, and every refusal raises).
        completion = completion_after_submit(config.recruitment, row.provider)
        if row.status == AssignmentStatus.SUBMITTED:
            return {**_already_submitted(connection, kind, assignment_id, row,
                                         payload.get("submission_id") if isinstance(payload, dict) else None),
                    **completion}
        refuse_unless_may_work(study_row, bool(row.revoked))
        refuse_another_kinds_body(payload, kind, assignment_id, row.name)
        submission = validate_submission(payload, kind, kind.expected(connection, assignment_id, config))
        item_comments = _item_comments(config, kind, submission)

        def store_unit(writer: Connection) -> dict[str, Any]:
            # A unit of a group commit (store.group_commit): it may share its transaction (after the writes before
            # it, whose effects it sees) and its commit with other requests'; its receipt is answered once committed.
            late = _mark_or_answer(writer, kind, assignment_id, annotator_id, submission, study, now)
            if isinstance(late, dict):  # the receipt of this submission, stored already
                return {**late, **completion}
            stored = kind.store(writer, assignment_id, annotator_id, submission.submission_id, submission.answers,
                                now)
            store_comments(writer, assignment_id, item_comments, now)  # nothing when there are none
            return {**_receipt(kind, assignment_id, submission.submission_id, late, now, stored), **completion}

        try:
            return run_write_unit(connection, store_unit)  # the same connection: one taken from the pool per submit
        except IntegrityError:
            # A concurrent identical submission won the race: answer as for a retry (the write transaction was
            # rolled back; what follows reads on the same connection). Otherwise a submission id is unique across
            # assignments, and a client that reuses one is told so (not a 500); anything else the database refuses
            # is raised.
            row = _own_assignment(connection, assignment_id, annotator_id, study)
            if row.status == AssignmentStatus.SUBMITTED:
                return {**_already_submitted(connection, kind, assignment_id, row, submission.submission_id),
                        **completion}
            refuse_if_used_elsewhere(connection, submission.submission_id)
            raise
