"""Taking a pairwise (A/B) assignment's choices: validated in full, stored in one transaction, idempotent per
submission id, under the same rules as a Likert submission (server.annotation.submit, whose helpers this uses).

A payload is
    {"submission_id": "3f2c…", "comment": "optional",
     "judgments": [{"item_id": 12, "choices": {"empathy": "A", "relevance": "T", "fluency": "B"},
                    "seconds": 9.5}, …]}
with exactly one entry per pair of the assignment (`item_id` is the pair item the payload listed) and one choice
per criterion of the study: "A" (the response shown on the left), "B" (the one on the right) or "T" (a tie, only
when the study allows ties). They are stored as the screen side, 'left' / 'right' / 'tie', in `choice`; which
system that means follows from the placement's `shown_left`, in the export. Sending the same submission again (a
retry, a double click) stores nothing twice and answers the same; a different submission for an already submitted
assignment is a conflict. A submission after the deadline is kept and flagged late.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection, Engine, Row
from sqlalchemy.exc import IntegrityError

from empeval.server.annotation import hot_sql, submit
from empeval.server.annotation.handout import refuse_unless_may_work
from empeval.server.annotation.hot_sql import Executor
from empeval.server.annotation.submission_schema import (
    MAX_COMMENT,
    MAX_SECONDS,
    STORABLE_TEXT_PATTERN,
    STORABLE_TEXT_RULE,
    SUBMISSION_ID,
    SUBMISSION_ID_PATTERN,
    SUBMISSION_ID_RULE,
    _closed_object,
    json_integer,
    json_number,
)
from empeval.server.annotation.submit import (
    ValidSubmission,
    _mark_or_answer,
    _own_assignment,
    _refuse_unknown_fields,
    _study_of,
    refuse_if_used_elsewhere,
)
from empeval.server.errors import BadInput
from empeval.server.store.engine import write_transaction
from empeval.server.store.queries import now_utc
from empeval.server.store.statuses import AssignmentStatus
from empeval.server.store.storable import text_problem

# Field name -> required. A field not listed is refused, so a misspelt "coment" is not silently dropped.
PAIRWISE_SUBMISSION_FIELDS = {"submission_id": True, "judgments": True, "comment": False}
JUDGMENT_FIELDS = {"item_id": True, "choices": True, "seconds": False}
# What the rater answers (the labels on screen) -> what is stored (the screen side).
SIDES = {"A": "left", "B": "right", "T": "tie"}
TIE = "T"


class ExpectedChoices(NamedTuple):
    """What one pairwise assignment's submission must contain: one entry per pair item, one choice per
    criterion, a tie only when `ties`."""

    item_ids: tuple[int, ...]
    criteria: tuple[str, ...]
    ties: bool


class PairJudgment(NamedTuple):
    sides: dict[str, str]  # criterion -> 'left' | 'right' | 'tie'
    seconds: float | None


class ValidPairwiseSubmission(NamedTuple):
    submission_id: str
    judgments: dict[int, PairJudgment]  # by pair item id, one per pair of the assignment
    comment: str | None


def validate_pairwise_submission(payload: Any, expected: ExpectedChoices) -> ValidPairwiseSubmission:
    """Check a pairwise submission body; raises BadInput saying what was wrong, naming the entry, the item and
    the criterion."""
    if not isinstance(payload, dict):
        raise BadInput("body must be a JSON object with submission_id and judgments")
    _refuse_unknown_fields(payload, PAIRWISE_SUBMISSION_FIELDS, "")
    submission_id = payload.get("submission_id")
    if not isinstance(submission_id, str) or not SUBMISSION_ID.fullmatch(submission_id):
        raise BadInput(f"submission_id must be {SUBMISSION_ID_RULE}")
    comment = payload.get("comment")
    if comment is not None and (not isinstance(comment, str) or len(comment) > MAX_COMMENT):
        raise BadInput(f"comment must be a string of at most {MAX_COMMENT} characters")
    if comment is not None and (problem := text_problem(comment)):
        raise BadInput(f"comment {problem}")
    judgments = payload.get("judgments")
    if not isinstance(judgments, list):
        raise BadInput("judgments must be a list with one entry per pair of the assignment")
    allowed = "A, B or T (tie)" if expected.ties else "A or B (this study allows no tie)"
    by_item: dict[int, PairJudgment] = {}
    for i, entry in enumerate(judgments):
        where = f"judgments[{i}]"
        if not isinstance(entry, dict):
            raise BadInput(f"{where} must be an object with item_id and choices")
        _refuse_unknown_fields(entry, JUDGMENT_FIELDS, f"{where}: ")
        item_id = json_integer(entry.get("item_id"))
        if item_id is None:
            raise BadInput(f"{where}.item_id must be an integer")
        if item_id not in expected.item_ids:
            raise BadInput(f"{where}: item {item_id} is not part of this assignment")
        if item_id in by_item:
            raise BadInput(f"{where}: item {item_id} is judged twice")
        choices = entry.get("choices")
        if not isinstance(choices, dict):
            raise BadInput(f"{where}.choices must be an object with one choice per criterion")
        missing = [c for c in expected.criteria if c not in choices]
        if missing:
            raise BadInput(f"{where}: item {item_id} has no choice for {missing[0]!r}")
        extra = sorted(set(choices) - set(expected.criteria), key=str)
        if extra:
            raise BadInput(f"{where}: unknown criterion {extra[0]!r} for item {item_id}; "
                           f"expected {', '.join(expected.criteria)}")
        sides: dict[str, str] = {}
        for criterion in expected.criteria:
            answer = choices[criterion]
            # isinstance first: a boolean or a number is no answer, and an unhashable value must not reach SIDES.
            if not isinstance(answer, str) or answer not in SIDES:
                raise BadInput(f"{where}: {criterion} choice {answer!r} for item {item_id} must be {allowed}")
            if answer == TIE and not expected.ties:
                raise BadInput(f"{where}: {criterion} choice 'T' (tie) for item {item_id} is not allowed in this "
                               f"study; choose A or B")
            sides[criterion] = SIDES[answer]
        seconds = entry.get("seconds")
        if seconds is not None:
            seconds = json_number(seconds)
            if seconds is None or not 0 <= seconds <= MAX_SECONDS:
                raise BadInput(f"{where}.seconds must be a number from 0 to {MAX_SECONDS}")
        by_item[item_id] = PairJudgment(sides, seconds)
    missing_items = [item for item in expected.item_ids if item not in by_item]
    if missing_items:
        raise BadInput(f"item {missing_items[0]} of this assignment has no judgment "
                       f"({len(missing_items)} of {len(expected.item_ids)} pairs missing)")
    return ValidPairwiseSubmission(submission_id, by_item, comment)


def pairwise_submission_schema(expected: ExpectedChoices | None = None) -> dict[str, Any]:
    """The JSON schema (draft 2020-12) of a pairwise submission body, from the same declarations the validator
    reads (tests/annotation/test_pairwise_submit.py fails when the two disagree): for one assignment when `expected`
    is given, else the generic one (any pair ids and criteria, answers A, B or T)."""
    answers = list(SIDES) if expected is None or expected.ties else [a for a in SIDES if a != TIE]
    answer = {"enum": answers, "description": "A (the response shown left), B (right) or T (tie, if the study "
                                              "allows ties)"}
    if expected is None:
        item_id: dict[str, Any] = {"type": "integer", "description": "a pair of this assignment"}
        choices: dict[str, Any] = {"type": "object", "additionalProperties": answer,
                                   "description": "one answer per criterion of the study (the assignment says which)"}
    else:
        item_id = {"enum": list(expected.item_ids)}
        choices = {"type": "object", "required": list(expected.criteria), "additionalProperties": False,
                   "properties": {criterion: answer for criterion in expected.criteria}}
    entry = _closed_object(JUDGMENT_FIELDS, {
        "item_id": item_id,
        "choices": choices,
        "seconds": {"type": ["number", "null"], "minimum": 0, "maximum": MAX_SECONDS,
                    "description": "seconds spent on the pair"},
    })
    judgments: dict[str, Any] = {"type": "array", "items": entry,
                                 "description": "exactly one entry per pair of the assignment"}
    if expected is not None:
        judgments.update(minItems=len(expected.item_ids), maxItems=len(expected.item_ids))
        judgments["allOf"] = [{"contains": {"required": ["item_id"], "properties": {"item_id": {"const": item}}},
                               "minContains": 1, "maxContains": 1}
                              for item in expected.item_ids]
    return _closed_object(PAIRWISE_SUBMISSION_FIELDS, {
        "submission_id": {"type": "string", "pattern": SUBMISSION_ID_PATTERN,
                          "description": f"{SUBMISSION_ID_RULE}, the same for every retry of one submission"},
        "comment": {"type": ["string", "null"], "maxLength": MAX_COMMENT, "pattern": STORABLE_TEXT_PATTERN,
                    "description": STORABLE_TEXT_RULE},
        "judgments": judgments,
    })


def _receipt(assignment_id: int, submission_id: str | None, late: bool, submitted_at: datetime | None,
             n_choices: int) -> dict[str, Any]:
    return submit._receipt(assignment_id, submission_id, late, submitted_at, n_choices, counted="choices")


def _already_submitted(connection: Executor, assignment_id: int, stored: Row[Any],
                       submission_id: object) -> dict[str, Any]:
    """submit._already_submitted, counting the choices stored."""
    return submit._already_submitted(connection, assignment_id, stored, submission_id,
                                     count=hot_sql.COUNT_CHOICES, counted="choices")


def _store_choices(connection: Executor, assignment_id: int, annotator_id: int,
                   submission: ValidPairwiseSubmission, now: datetime) -> int:
    """The time on each pair (one UPDATE) and every choice (one INSERT), each one statement for all the rows
    (hot_sql.run_rows). Returns how many choices were stored."""
    timed = [{"item": item_id, "seconds": j.seconds}
             for item_id, j in submission.judgments.items() if j.seconds is not None]
    if timed:
        hot_sql.run_rows(connection, hot_sql.TIME_ON_PAIR, {"assignment": assignment_id}, timed)
    rows = [{"item": item_id, "criterion": criterion, "choice": side}
            for item_id, judgment in submission.judgments.items() for criterion, side in judgment.sides.items()]
    hot_sql.run_rows(connection, hot_sql.INSERT_CHOICES, {
        "assignment": assignment_id, "annotator": annotator_id, "now": hot_sql.moment(connection, now),
        "submission": submission.submission_id}, rows)
    return len(rows)


def submit_pairwise(engine: Engine, assignment_id: int, annotator_id: int, payload: Any,
                    *, study: str | None = None, now: datetime | None = None) -> dict[str, Any]:
    """Validate and store a pairwise submission; returns the receipt (`choices`: how many were stored). Raises
    BadInput subclasses (4xx), as submit.submit_assignment does and under its rules: an assignment of another
    annotator or study, or none, is NotFound; a closed study or a revoked annotator Forbidden, checked again in
    the storing UPDATE; the same submission again gets its receipt, another one a Conflict."""
    now = now or now_utc()
    with engine.connect() as connection:
        row = _own_assignment(connection, assignment_id, annotator_id, study)
        return store_pairwise(connection, row, assignment_id, annotator_id, payload, study=study, now=now)


def store_pairwise(connection: Connection, row: Row[Any], assignment_id: int, annotator_id: int, payload: Any,
                   *, study: str | None, now: datetime) -> dict[str, Any]:
    """submit_pairwise on a connection the caller holds, `row` being what submit._own_assignment read of the
    assignment on it: submit.submit_assignment hands an A/B study's submission over here, so that the request
    takes one connection from the pool and reads the assignment once."""
    study_row = _study_of(row)
    config = study_row.config
    if not config.is_pairwise:
        raise BadInput(f"assignment {assignment_id} is of the Likert study {study_row.name!r}: send ratings")
    if row.status == AssignmentStatus.SUBMITTED:
        return _already_submitted(connection, assignment_id, row,
                                  payload.get("submission_id") if isinstance(payload, dict) else None)
    refuse_unless_may_work(study_row, bool(row.revoked))
    item_ids = hot_sql.run(connection, hot_sql.PAIR_ITEM_IDS, {"assignment": assignment_id}).scalars().all()
    expected = ExpectedChoices(item_ids=tuple(item_ids), criteria=tuple(config.criterion_keys),
                               ties=config.pairwise is None or config.pairwise.ties)
    submission = validate_pairwise_submission(payload, expected)
    # The marking UPDATE reads only the id and the comment of a submission.
    marking = ValidSubmission(submission.submission_id, {}, submission.comment)

    try:
        with write_transaction(connection):  # the same connection: one taken from the pool per submit
            late = _mark_or_answer(connection, assignment_id, annotator_id, marking, study, now,
                                   count=hot_sql.COUNT_CHOICES, counted="choices")
            if isinstance(late, dict):  # the receipt of this submission, stored already
                return late
            stored = _store_choices(connection, assignment_id, annotator_id, submission, now)
            return _receipt(assignment_id, submission.submission_id, late, now, stored)
    except IntegrityError:
        # A concurrent identical submission won the race: answer as for a retry (the write transaction was
        # rolled back; what follows reads on the same connection).
        row = _own_assignment(connection, assignment_id, annotator_id, study)
        if row.status == AssignmentStatus.SUBMITTED:
            return _already_submitted(connection, assignment_id, row, submission.submission_id)
        refuse_if_used_elsewhere(connection, submission.submission_id)
        raise
