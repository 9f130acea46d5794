"""A rater's qualification in a study (issue 30; ACUTE-Eval's onboarding): what she is shown, her answers taken one
at a time with the feedback of each, and her outcome, one per rater and study.

A study whose file has a [qualification] (tasks/qualification.py) holds its gold items in `qualification_item`
(server/store/qualification_tables.py): what each shows (panels of text, in the kind's terms) and the answers
counted right per criterion. A rater answers them in order, one request per item; each answer is checked against
what a question of the study's kind offers (AnnotationKind.qualification_choices), stored with whether it was right,
and answered with the item's feedback and the answers that were right. Once every item of an attempt is answered
the attempt is decided: she passes with at least `min_correct` items right (an item is right when every question of
it is), fails when that was her last attempt, and otherwise starts the next attempt (the same items again). The
outcome is written in the transaction of the answer that decides it, and never changes.

What the database keeps, whatever the page does: one answer per (rater, item, attempt), so an answer sent again stores
nothing twice (the same answer gets the same reply; another answer is a conflict); one outcome per (study, rater);
and the hand-out's claim (hot_sql.qualified_sql) hands real work only to a rater whose outcome is `passed`. One
rater's answers take turns (her annotator row is locked first, as her claims are), so two tabs cannot decide one
attempt twice. A Prolific participant who fails is given the study's screened-out (or failed-checks) completion code
(prolific.completion_after_failure), here and whenever she opens the study link again.

The state she is shown (`qualification_state`):
    {"required": true, "status": <pending, passed or failed>, "attempt": 1, "attempts": 1, "min_correct": 3,
     "intro": "...", "kind": "likert", "study": {"name", "title", "instructions"},
     "criteria": [{"key", "label", "question"}], "choices": [{"value", "label"}],
     "items": [{"position": 0, "panels": [{"title", "note", "turns": [{"role", "text", "label"}]}]}],
     "answered": [<the reply to each answer of the current attempt, as below>], "correct": 2,
     "completion": {"code", "url", "outcome"}  (a failed Prolific participant only)}
or {"required": false} for a study without a qualification. An answer, `POST /api/annotate/qualification/answers`:
    {"item": 0, "attempt": 1, "answer": {"empathy": 2, "relevance": 3, "fluency": 5}}
is replied to with {"item", "attempt", "answer", "correct", "right": {criterion: [values counted right]},
"feedback", "state": <the state after it>}.
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Engine, case, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from empeval.server.annotation.handout import ensure_may_work
from empeval.server.annotation.kinds import GoldChoice, annotation_kind
from empeval.server.annotation.prolific import completion_after_failure
from empeval.server.annotation.submission_schema import closed_object, json_integer, refuse_unknown_fields
from empeval.server.errors import BadInput, Conflict
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Annotator, Study
from empeval.server.store.qualification import MAX_ATTEMPTS, MAX_GOLD_ITEMS
from empeval.server.store.qualification_tables import QualificationAnswer, QualificationItem, QualificationOutcome
from empeval.server.store.queries import now_utc, study_by_name
from empeval.server.store.statuses import QualificationStatus

BODY_FIELDS = {"item": True, "attempt": True, "answer": True}
# The title of the page when the study file gives none.
DEFAULT_TITLE = "Before the study: a few practice items"


class GoldAnswer(NamedTuple):
    """An answer body, checked: the item's position, the attempt it answers, one value per criterion."""

    position: int
    attempt: int
    answer: dict[str, int | str]


class _Gold(NamedTuple):
    """A gold item as the store holds it."""

    id: int
    position: int
    panels: list[dict[str, Any]]
    accepted: dict[str, list[int | str]]
    feedback: str


def read_answer_body(body: Any) -> GoldAnswer:
    """The body's shape, checked before anything is read of the study: an object with `item` (a gold item's position),
    `attempt` (1, 2, ...) and `answer` (an object of criterion -> value); BadInput naming the field otherwise. Whether
    the item, attempt and values fit the study is checked by `answer_gold_item`."""
    if not isinstance(body, dict):
        raise BadInput("the body must be a JSON object with item, attempt and answer")
    refuse_unknown_fields(body, BODY_FIELDS, "")
    for field in BODY_FIELDS:
        if field not in body:
            raise BadInput(f"{field} is required: send item (the practice item's position), attempt and answer")
    position, attempt = json_integer(body["item"]), json_integer(body["attempt"])
    if position is None or not 0 <= position < MAX_GOLD_ITEMS:
        raise BadInput(f"item must be the practice item's position, an integer from 0 to {MAX_GOLD_ITEMS - 1}")
    if attempt is None or not 1 <= attempt <= MAX_ATTEMPTS:
        raise BadInput(f"attempt must be an integer from 1 to {MAX_ATTEMPTS}")
    answer = body["answer"]
    if not isinstance(answer, dict) or not answer:
        raise BadInput("answer must be an object with one answer per question, e.g. {\"empathy\": 2}")
    values: dict[str, int | str] = {}
    for key, value in answer.items():
        number = json_integer(value)
        if number is not None:
            values[key] = number
        elif isinstance(value, str):
            values[key] = value
        else:
            raise BadInput(f"answer: the answer to {key!r} must be one of the choices offered, got {value!r}"[:300])
    return GoldAnswer(position, attempt, values)


def answer_body_schema() -> dict[str, Any]:
    """The JSON schema of an answer body, from the declarations read_answer_body checks it with (BODY_FIELDS,
    MAX_GOLD_ITEMS, MAX_ATTEMPTS): what the OpenAPI document serves; tests/annotation/test_qualification_schema.py
    fails when one changes without the other."""
    return closed_object(BODY_FIELDS, {
        "item": {"type": "integer", "minimum": 0, "maximum": MAX_GOLD_ITEMS - 1},
        "attempt": {"type": "integer", "minimum": 1, "maximum": MAX_ATTEMPTS},
        "answer": {"type": "object", "minProperties": 1,
                   "additionalProperties": {"oneOf": [{"type": "integer"}, {"type": "string"}]}}})


def _golds(session: Session, study_id: int) -> list[_Gold]:
    return [_Gold(*row) for row in session.execute(
        select(QualificationItem.id, QualificationItem.position, QualificationItem.panels, QualificationItem.accepted,
               QualificationItem.feedback).where(QualificationItem.study_id == study_id)
        .order_by(QualificationItem.position))]


def _checked_answer(answer: dict[str, int | str], criteria: tuple[str, ...], choices: tuple[GoldChoice, ...],
                    position: int) -> dict[str, int | str]:
    """The answer with one offered value per criterion of the study; BadInput naming the item and the criterion."""
    unknown = sorted((key for key in answer if key not in criteria), key=str)
    if unknown:
        raise BadInput(f"item {position}: {unknown[0]!r} is not a question of the study; expected "
                       f"{', '.join(criteria)}"[:400])
    missing = [key for key in criteria if key not in answer]
    if missing:
        raise BadInput(f"item {position}: no answer to {missing[0]!r}; answer every question")
    offered = [choice.value for choice in choices]
    for key in criteria:
        value = answer[key]
        if value not in offered or isinstance(value, bool):
            raise BadInput(f"item {position}: {value!r} is not an answer to {key!r}; the choices are "
                           f"{', '.join(map(str, offered))}"[:400])
    return {key: answer[key] for key in criteria}


def _is_right(answer: dict[str, Any], accepted: dict[str, list[Any]]) -> bool:
    """Every question answered with a value counted right."""
    return all(answer.get(criterion) in values for criterion, values in accepted.items())


def _reply(gold: _Gold, attempt: int, answer: dict[str, Any], correct: bool) -> dict[str, Any]:
    return {"item": gold.position, "attempt": attempt, "answer": answer, "correct": correct,
            "right": {criterion: list(values) for criterion, values in gold.accepted.items()},
            "feedback": gold.feedback}


def _state(session: Session, study: Study, annotator_id: int, provider: str | None) -> dict[str, Any]:
    """The rater's qualification as the page shows it (see the module docstring)."""
    config = study.config
    golds = _golds(session, study.id)
    if not golds or config.qualification is None:
        return {"required": False}
    rule = config.qualification
    kind = annotation_kind(config.kind)
    outcome = session.execute(select(QualificationOutcome.status, QualificationOutcome.attempt)
                              .where(QualificationOutcome.study_id == study.id,
                                     QualificationOutcome.annotator_id == annotator_id)).first()
    answers = session.execute(select(QualificationAnswer.item_id, QualificationAnswer.attempt,
                                     QualificationAnswer.answer, QualificationAnswer.correct)
                              .where(QualificationAnswer.study_id == study.id,
                                     QualificationAnswer.annotator_id == annotator_id)).all()
    status, attempt = _progress(outcome, answers, len(golds))
    by_id = {gold.id: gold for gold in golds}
    answered = sorted((_reply(by_id[item_id], attempt, answer, correct)
                       for item_id, made, answer, correct in answers if made == attempt), key=lambda r: r["item"])
    state: dict[str, Any] = {
        "required": True, "status": str(status), "attempt": attempt, "attempts": rule.attempts,
        "min_correct": rule.min_correct, "intro": rule.intro, "kind": config.kind,
        "study": {"name": study.name, "title": config.title or DEFAULT_TITLE, "instructions": config.instructions},
        "criteria": [{"key": c.key, "label": c.label, "question": c.question} for c in config.criteria],
        "choices": [{"value": choice.value, "label": choice.label} for choice in kind.qualification_choices(config)],
        "items": [{"position": gold.position, "panels": gold.panels} for gold in golds],
        "answered": answered, "correct": sum(1 for reply in answered if reply["correct"])}
    if status == QualificationStatus.FAILED:
        state.update(completion_after_failure(config.recruitment, provider, rule.code_on_failure))
    return state


def _progress(outcome: Any, answers: Sequence[Any], n_items: int) -> tuple[QualificationStatus, int]:
    """Her status and the attempt she is on (or that decided it): an attempt whose every item is answered and that
    decided nothing was failed with attempts left, so she is on the next one."""
    if outcome is not None:
        return QualificationStatus(outcome.status), outcome.attempt
    per_attempt: dict[int, int] = {}
    for _, attempt, _, _ in answers:
        per_attempt[attempt] = per_attempt.get(attempt, 0) + 1
    last = max(per_attempt, default=1)
    return QualificationStatus.PENDING, last + 1 if per_attempt.get(last, 0) >= n_items else last


def _provider(session: Session, annotator_id: int) -> str | None:
    return session.scalar(select(Annotator.provider).where(Annotator.id == annotator_id))


def qualification_state(engine: Engine, study_name: str, annotator_id: int) -> dict[str, Any]:
    """What the page shows of her qualification in the study (see the module docstring); NotFound for an unknown
    study, StudyClosed or AccessRevoked when she may not work there."""
    with Session(engine) as session:
        study = study_by_name(session, study_name)
        ensure_may_work(session, study, annotator_id)
        return _state(session, study, annotator_id, _provider(session, annotator_id))


def answer_gold_item(engine: Engine, study_name: str, annotator_id: int, body: Any, *,
                     now: datetime | None = None) -> dict[str, Any]:
    """Take her answer to one gold item (see the module docstring): checked in full, stored with whether it was right,
    the attempt decided once its every item is answered; replied to with the item's feedback, the answers counted
    right and her state after it. BadInput for a body that does not fit the study; Conflict for an item answered
    already with another answer, an attempt that is over or has not begun, or a qualification decided already."""
    given = read_answer_body(body)
    now = now or now_utc()
    for _ in range(2):  # a concurrent identical answer may win the insert: the second pass reads it back
        try:
            return _answer(engine, study_name, annotator_id, given, now)
        except IntegrityError:
            continue
    raise Conflict("your answer could not be stored because another one was being stored at the same time: send it "
                   "again")


def _answer(engine: Engine, study_name: str, annotator_id: int, given: GoldAnswer, now: datetime) -> dict[str, Any]:
    with unit_of_work(engine) as session:
        # Her answers take turns, as her claims do (handout._take_turn): two tabs cannot decide one attempt twice.
        session.execute(update(Annotator).where(Annotator.id == annotator_id)
                        .values(display_name=Annotator.display_name))
        study = study_by_name(session, study_name)
        ensure_may_work(session, study, annotator_id)
        config, golds = study.config, _golds(session, study.id)
        if not golds or config.qualification is None:
            raise BadInput(f"study {study_name!r} has no qualification: ask for work (GET /api/annotate/next)")
        if given.position >= len(golds):
            raise BadInput(f"item {given.position}: the qualification has {len(golds)} practice items (0 to "
                           f"{len(golds) - 1})")
        gold = golds[given.position]
        answer = _checked_answer(given.answer, config.criterion_keys,
                                 annotation_kind(config.kind).qualification_choices(config), given.position)
        provider = _provider(session, annotator_id)
        stored = session.execute(select(QualificationAnswer.answer, QualificationAnswer.correct).where(
            QualificationAnswer.annotator_id == annotator_id, QualificationAnswer.item_id == gold.id,
            QualificationAnswer.attempt == given.attempt)).first()
        if stored is not None:  # sent again: the same answer gets the same reply, another one is refused
            if stored.answer != answer:
                raise Conflict(f"item {given.position} of attempt {given.attempt} was answered already, with another "
                               "answer; an answer cannot be changed")
            return {**_reply(gold, given.attempt, stored.answer, stored.correct),
                    "state": _state(session, study, annotator_id, provider)}
        state = _state(session, study, annotator_id, provider)
        if state["status"] != QualificationStatus.PENDING:
            raise Conflict(f"your qualification in study {study_name!r} is decided already ({state['status']})")
        if given.attempt != state["attempt"]:
            raise Conflict(f"attempt {given.attempt} is not the one under way: you are on attempt {state['attempt']} "
                           f"of {state['attempts']}" + (" (answer every item of it first)"
                                                        if given.attempt > state["attempt"] else ""))
        correct = _is_right(answer, gold.accepted)
        session.add(QualificationAnswer(study_id=study.id, item_id=gold.id, annotator_id=annotator_id,
                                        attempt=given.attempt, answer=answer, correct=correct, answered_at=now))
        session.flush()
        _decide(session, study.id, annotator_id, given.attempt, len(golds), config.qualification.min_correct,
                config.qualification.attempts, now)
        return {**_reply(gold, given.attempt, answer, correct),
                "state": _state(session, study, annotator_id, provider)}


def _decide(session: Session, study_id: int, annotator_id: int, attempt: int, n_items: int, min_correct: int,
            attempts: int, now: datetime) -> None:
    """Once every item of the attempt is answered: the outcome, passed with at least `min_correct` right, failed when
    it was her last attempt; nothing while items are left or another attempt is."""
    answered, right = session.execute(
        select(func.count(), func.coalesce(func.sum(case((QualificationAnswer.correct, 1), else_=0)), 0))
        .where(QualificationAnswer.study_id == study_id, QualificationAnswer.annotator_id == annotator_id,
               QualificationAnswer.attempt == attempt)).one()
    if answered < n_items:
        return
    if right >= min_correct:
        status = QualificationStatus.PASSED
    elif attempt >= attempts:
        status = QualificationStatus.FAILED
    else:
        return
    session.add(QualificationOutcome(study_id=study_id, annotator_id=annotator_id, status=status, attempt=attempt,
                                     correct=right, items=n_items, decided_at=now))
    session.flush()


class QualificationCounts(NamedTuple):
    """How a study's raters fared in its qualification: passed, failed, and started but undecided."""

    passed: int
    failed: int
    undecided: int


def qualification_meta(session: Session, study: Study) -> dict[str, Any]:
    """What a report says of the study's qualification (analysis.report.qualification): {"qualification": the pass
    rule and how many raters passed, failed or have not finished}; {} for a study without one."""
    rule, counts = study.config.qualification, qualification_counts(session, study.id)
    if rule is None or counts is None:
        return {}
    return {"qualification": {"items": len(rule.items), "min_correct": rule.min_correct, "attempts": rule.attempts,
                              **counts._asdict()}}


def qualification_counts(session: Session, study_id: int) -> QualificationCounts | None:
    """The study's raters by qualification outcome (None for a study without a qualification)."""
    if session.scalar(select(QualificationItem.id).where(QualificationItem.study_id == study_id).limit(1)) is None:
        return None
    decided = dict(session.execute(select(QualificationOutcome.status, func.count())
                                   .where(QualificationOutcome.study_id == study_id)
                                   .group_by(QualificationOutcome.status)).all())
    started = session.scalar(select(func.count(func.distinct(QualificationAnswer.annotator_id)))
                             .where(QualificationAnswer.study_id == study_id)) or 0
    passed = decided.get(QualificationStatus.PASSED, 0)
    failed = decided.get(QualificationStatus.FAILED, 0)
    return QualificationCounts(passed, failed, started - passed - failed)
