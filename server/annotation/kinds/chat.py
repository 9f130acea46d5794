"""The chat kind in the annotation room: what its claim hands out, its submissions (turn ticks and conversation
ratings), its export (four tidy tables) and what the dashboard reads of it. The live turns themselves are
chat_turns.py's.

The payload shows, per conversation of the session, the prompt (the ED dialogue's emotion and situation), the
turns stored so far (the rater's and her partner's, as text) and whether the conversation is open, ended or
failed: never the system's name, which conversation is a control, or any latency.

A submission lists its answers under "conversations":
    {"submission_id": "3f2c…", "comment": "optional",
     "conversations": [{"item_id": 12, "ratings": {"empathy": 4, ...}, "turns": {"1": ["empathetic"], "3": ["none"]},
                        "seconds": 95.2}, …]}
with exactly one entry per conversation of the assignment. An ended conversation needs a score on every criterion
and, for each of the partner's turns, at least one ticked question ("none" alone: none of them). A model-failed one
needs no ratings (and takes none); an open one cannot be submitted.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Any, ClassVar, NamedTuple

from sqlalchemy import Engine, case, delete, distinct, exists, func, select, update
from sqlalchemy.orm import Session

from empeval.analysis.kinds.chat.schema import (
    CHAT_COLUMNS,
    CONVERSATION_COLUMNS,
    TURN_ANNOTATION_COLUMNS,
    TURN_COLUMNS,
)
from empeval.server.annotation import hot_sql
from empeval.server.annotation.item_browser import page_bounds, with_comments
from empeval.server.annotation.kinds import AnnotationKind, BrowsedItem, ItemPage, register
from empeval.server.annotation.kinds.chat_turns import FAILED_MESSAGE
from empeval.server.annotation.submission_schema import (
    entries_schema,
    entry_item,
    entry_seconds,
    json_integer,
    refuse_missing_units,
)
from empeval.server.errors import BadInput
from empeval.server.store.kinds.chat import (
    NONE_OF_THESE,
    AssignmentConversation,
    ChatConversation,
    ChatRating,
    ChatSetup,
    ChatTurn,
    ChatTurnAnnotation,
)
from empeval.server.store.models import Annotator, Assignment, Context, Dialogue, Study
from empeval.server.store.queries import iso_utc, study_by_name
from empeval.server.store.statuses import AssignmentStatus
from empeval.server.store.study_config import StudyConfig

DEFAULT_TITLE = "Talk with a partner about a feeling, then rate the conversation"
ENTRY_FIELDS = {"item_id": True, "ratings": False, "turns": False, "seconds": False}
OPEN, ENDED, FAILED = "open", "ended", "failed"

# The conversations in position order with their prompts (part 0) and their stored turns (part 1, in order).
CONVERSATIONS = hot_sql.statement(
    "SELECT placed.position, placed.conversation_id, placed.ended_at, placed.failed, dialogue.emotion, "
    "dialogue.situation, turn.idx, turn.speaker, turn.text FROM assignment_conversation AS placed "
    "JOIN chat_conversation AS conversation ON conversation.id = placed.conversation_id "
    "JOIN context ON context.id = conversation.context_id JOIN dialogue ON dialogue.id = context.dialogue_id "
    "LEFT OUTER JOIN chat_turn AS turn ON turn.assignment_id = placed.assignment_id "
    "AND turn.conversation_id = placed.conversation_id "
    "WHERE placed.assignment_id = :assignment ORDER BY placed.position, turn.idx")
# What a submission is checked against: each conversation's state and its partner's turns.
PLACEMENTS = hot_sql.statement(
    "SELECT placed.conversation_id, placed.ended_at, placed.failed, turn.idx FROM assignment_conversation AS placed "
    "LEFT OUTER JOIN chat_turn AS turn ON turn.assignment_id = placed.assignment_id "
    "AND turn.conversation_id = placed.conversation_id AND turn.speaker = 'system' "
    "WHERE placed.assignment_id = :assignment ORDER BY placed.position, turn.idx")
INSERT_RATINGS = hot_sql.rows_statement(
    "INSERT INTO chat_rating (assignment_id, conversation_id, annotator_id, criterion, score, submitted_at, "
    "submission_id) VALUES (:assignment, :item, :annotator, :criterion, :score, :now, :submission)",
    "INSERT INTO chat_rating (assignment_id, conversation_id, annotator_id, criterion, score, submitted_at, "
    "submission_id) SELECT :assignment, given.item, :annotator, given.criterion, given.score, :now, :submission "
    "FROM unnest(:item::integer[], :criterion::varchar[], :score::integer[]) AS given(item, criterion, score)")
INSERT_TICKS = hot_sql.rows_statement(
    "INSERT INTO chat_turn_annotation (assignment_id, conversation_id, idx, annotator_id, question, submitted_at, "
    "submission_id) VALUES (:assignment, :item, :idx, :annotator, :question, :now, :submission)",
    "INSERT INTO chat_turn_annotation (assignment_id, conversation_id, idx, annotator_id, question, submitted_at, "
    "submission_id) SELECT :assignment, given.item, given.idx, :annotator, given.question, :now, :submission "
    "FROM unnest(:item::integer[], :idx::integer[], :question::varchar[]) AS given(item, idx, question)")


class ExpectedTalk(NamedTuple):
    """What one session's submission must contain: one entry per conversation (in position order), its state
    (open, ended, failed) and its partner's turn indexes; the criteria, the top of the scale and the questions."""

    item_ids: tuple[int, ...]
    states: dict[int, str]
    system_turns: dict[int, tuple[int, ...]]
    criteria: tuple[str, ...]
    scale_max: int
    questions: tuple[str, ...]


class TalkAnswer(NamedTuple):
    ratings: dict[str, int]
    ticks: list[tuple[int, str]]  # (turn index, question)
    seconds: float | None


def _setup(config: StudyConfig) -> ChatSetup:
    setup = config.setup
    assert isinstance(setup, ChatSetup), f"a chat study's setup is a ChatSetup, got {setup!r}"
    return setup


def _state(ended_at: Any, failed: Any) -> str:
    return FAILED if failed else ENDED if ended_at is not None else OPEN


def _ticks(value: Any, where: str, item_id: int, expected: ExpectedTalk, required: bool) -> list[tuple[int, str]]:
    """The ticked questions of an entry's `turns` (turn index as a string -> list of question keys)."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise BadInput(f"{where}.turns must be an object mapping each of your partner's turns (its index) to the "
                       "questions you ticked")
    allowed = expected.system_turns[item_id]
    ticks: list[tuple[int, str]] = []
    for key, keys in value.items():
        index = int(key) if isinstance(key, str) and key.isascii() and key.isdigit() and len(key) < 6 else None
        if index is None or index not in allowed:
            raise BadInput(f"{where}.turns: {key!r} is not one of your partner's turns in conversation {item_id} "
                           f"(those are {', '.join(map(str, allowed)) or 'none'})")
        if not isinstance(keys, list) or not keys:
            raise BadInput(f"{where}.turns[{key!r}] must list at least one question (\"{NONE_OF_THESE}\" alone: none "
                           "of them)")
        for question in keys:
            if not isinstance(question, str) or question not in expected.questions:
                raise BadInput(f"{where}.turns[{key!r}]: unknown question {question!r}; expected some of "
                               f"{', '.join(expected.questions)}")
        if len(set(keys)) != len(keys):
            raise BadInput(f"{where}.turns[{key!r}] lists a question twice")
        if NONE_OF_THESE in keys and len(keys) > 1:
            raise BadInput(f"{where}.turns[{key!r}]: \"{NONE_OF_THESE}\" cannot be ticked with other questions")
        ticks.extend((index, question) for question in keys)
    if required:
        missing = [index for index in allowed if str(index) not in value]
        if missing:
            raise BadInput(f"{where}: your partner's turn {missing[0]} in conversation {item_id} has no answer; "
                           "tick at least one box under each of its replies")
    return ticks


def validate_talks(entries: Any, expected: ExpectedTalk) -> dict[int, TalkAnswer]:
    """Check a chat submission's entries; BadInput naming the entry, the conversation, the criterion or the turn.
    Returns, per conversation, its ratings and ticks."""
    if not isinstance(entries, list):
        raise BadInput("conversations must be a list with one entry per conversation of the assignment")
    answers: dict[int, TalkAnswer] = {}
    taken: set[int] = set()
    for i, entry in enumerate(entries):
        where = f"conversations[{i}]"
        item_id = entry_item(entry, where, ENTRY_FIELDS, expected.item_ids, taken, verb="answered twice")
        state = expected.states[item_id]
        if state == OPEN:
            raise BadInput(f"{where}: conversation {item_id} is still open: end it before submitting")
        ratings = entry.get("ratings")
        if state == FAILED:
            if ratings not in (None, {}):
                raise BadInput(f"{where}: conversation {item_id} ended because the partner failed; it takes no "
                               "ratings")
            answers[item_id] = TalkAnswer({}, _ticks(entry.get("turns"), where, item_id, expected, False),
                                          entry_seconds(entry, where))
            continue
        if not isinstance(ratings, dict):
            raise BadInput(f"{where}.ratings must be an object with one score per criterion")
        missing = [c for c in expected.criteria if c not in ratings]
        if missing:
            raise BadInput(f"{where}: conversation {item_id} has no score for {missing[0]!r}")
        extra = sorted(set(ratings) - set(expected.criteria), key=str)
        if extra:
            raise BadInput(f"{where}: unknown criterion {extra[0]!r} for conversation {item_id}; expected "
                           f"{', '.join(expected.criteria)}")
        scores = {}
        for criterion in expected.criteria:
            score = json_integer(ratings[criterion])
            if score is None or not 1 <= score <= expected.scale_max:
                raise BadInput(f"{where}: {criterion} score {ratings[criterion]!r} for conversation {item_id} must be "
                               f"an integer from 1 to {expected.scale_max}")
            scores[criterion] = score
        answers[item_id] = TalkAnswer(scores, _ticks(entry.get("turns"), where, item_id, expected, True),
                                      entry_seconds(entry, where))
    refuse_missing_units(expected.item_ids, answers, what="entry", units="conversations")
    return answers


@register
class ChatAnnotation(AnnotationKind):
    name: ClassVar[str] = "chat"
    unit, units, answered = "conversation", "conversations", "rated"
    entries, counted, per_annotator = "conversations", "ratings", "conversations"
    placement_table, item_column = "assignment_conversation", "conversation_id"
    placement_columns = ("conversation_id", "position")  # an expiry copy starts each conversation afresh
    item_table, answer_table = "chat_conversation", "chat_rating"
    contexts_from = ("assignment_conversation JOIN chat_conversation "
                     "ON chat_conversation.id = assignment_conversation.conversation_id")
    contexts_assignment, context_column = "assignment_conversation.assignment_id", "chat_conversation.context_id"
    export_columns = CHAT_COLUMNS

    def claims_per_annotator(self, config: StudyConfig) -> int | None:
        return _setup(config).sessions_per_rater

    def forget_unsubmitted(self, session: Session, assignment_id: int) -> None:
        """A released session goes back to the pool as it was: its turns go, its conversations open again."""
        session.execute(delete(ChatTurn).where(ChatTurn.assignment_id == assignment_id))
        session.execute(update(AssignmentConversation).where(AssignmentConversation.assignment_id == assignment_id)
                        .values(ended_at=None, failed=False, failure=None, seconds_on_item=None))

    def payload(self, executor: Any, study: Any, assignment_id: int, status: str,
                expires_at: datetime | None) -> dict[str, Any]:
        config = study.config
        setup = _setup(config)
        items: list[dict[str, Any]] = []
        for row in hot_sql.run(executor, CONVERSATIONS, {"assignment": assignment_id}):
            position, conversation_id, ended_at, failed, emotion, situation, idx, speaker, text = tuple(row)
            if not items or items[-1]["position"] != position:
                state = _state(ended_at, failed)
                items.append({"item_id": conversation_id, "position": position,
                              "prompt": {"emotion": emotion or "", "situation": situation or ""}, "turns": [],
                              "state": state, "message": None})
                if state == FAILED:
                    items[-1]["message"] = FAILED_MESSAGE
            if idx is not None:
                items[-1]["turns"].append({"index": idx, "speaker": speaker, "text": text})
        return {
            "kind": self.name, "assignment_id": assignment_id, "status": status, "expires_at": iso_utc(expires_at),
            "study": {"name": study.name, "title": config.title or DEFAULT_TITLE, "instructions": config.instructions},
            "criteria": [asdict(c) for c in config.criteria],
            "scale": {"min": 1, "max": setup.scale_max, "labels": list(setup.scale_labels)},
            "chat": {"min_utterances": setup.min_utterances, "max_utterances": setup.max_utterances,
                     "max_chars": setup.max_chars,
                     "turn_questions": [{"key": q.key, "label": q.label} for q in setup.questions_shown]},
            "items": items,
        }

    def expected(self, executor: Any, assignment_id: int, config: StudyConfig) -> ExpectedTalk:
        setup = _setup(config)
        order: list[int] = []
        states: dict[int, str] = {}
        turns: dict[int, list[int]] = {}
        for row in hot_sql.run(executor, PLACEMENTS, {"assignment": assignment_id}):
            conversation_id, ended_at, failed, idx = tuple(row)
            if conversation_id not in states:
                order.append(conversation_id)
                states[conversation_id] = _state(ended_at, failed)
                turns[conversation_id] = []
            if idx is not None:
                turns[conversation_id].append(idx)
        return ExpectedTalk(tuple(order), states, {c: tuple(t) for c, t in turns.items()},
                            tuple(config.criterion_keys), setup.scale_max,
                            tuple(q.key for q in setup.questions_shown))

    def validate(self, entries: Any, expected: Any) -> dict[int, TalkAnswer]:
        return validate_talks(entries, expected)

    def store(self, executor: Any, assignment_id: int, annotator_id: int, submission_id: str, answers: Any,
              now: datetime) -> int:
        """The time on each conversation (one UPDATE), the ratings and the ticks (one INSERT each, for all rows)."""
        shared = {"assignment": assignment_id, "annotator": annotator_id, "now": hot_sql.moment(executor, now),
                  "submission": submission_id}
        timed = [{"item": item, "seconds": a.seconds} for item, a in answers.items() if a.seconds is not None]
        if timed:
            hot_sql.run_rows(executor, hot_sql.kind_statements(self).time_on_item, {"assignment": assignment_id}, timed)
        ratings = [{"item": item, "criterion": c, "score": s} for item, a in answers.items()
                   for c, s in a.ratings.items()]
        if ratings:
            hot_sql.run_rows(executor, INSERT_RATINGS, shared, ratings)
        ticks = [{"item": item, "idx": idx, "question": q} for item, a in answers.items() for idx, q in a.ticks]
        if ticks:
            hot_sql.run_rows(executor, INSERT_TICKS, shared, ticks)
        return len(ratings)

    def entries_schema(self, expected: Any | None = None) -> dict[str, Any]:
        questions = {"type": "array", "minItems": 1, "uniqueItems": True,
                     "items": {"type": "string"} if expected is None else {"enum": list(expected.questions)},
                     "description": f"the questions ticked about this turn (\"{NONE_OF_THESE}\" alone: none)"}
        turns = {"type": "object", "additionalProperties": questions,
                 "description": "your partner's turns (their index, as a string) -> the questions ticked"}
        top = 11 if expected is None else expected.scale_max
        ratings = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1, "maximum": top},
                   "description": "one score per criterion of the study (none for a conversation the partner "
                                  "failed)"}
        if expected is not None:
            ratings = {**ratings, "propertyNames": {"enum": list(expected.criteria)}}
        return entries_schema(ENTRY_FIELDS, {"ratings": ratings, "turns": turns},
                              None if expected is None else expected.item_ids, unit="conversation")

    # --- the export -------------------------------------------------------------------------------------------
    def export_rows(self, engine: Engine, study: str) -> list[dict[str, Any]]:
        """Every conversation rating of the study (the `chat` table), by assignment, position and criterion."""
        with Session(engine) as session:
            study_row = study_by_name(session, study)
            placed = _placed(session, study_row.id, study_row.name)
            rows = session.execute(
                select(ChatRating.assignment_id, ChatRating.conversation_id, ChatRating.criterion, ChatRating.score,
                       Annotator.pseudonym)
                .join(Annotator, Annotator.id == ChatRating.annotator_id)
                .join(ChatConversation, ChatConversation.id == ChatRating.conversation_id)
                .where(ChatConversation.study_id == study_row.id)
                .order_by(ChatRating.assignment_id, ChatRating.conversation_id, ChatRating.criterion)).all()
            table = []
            for assignment_id, conversation_id, criterion, score, pseudonym in rows:
                p = placed[assignment_id, conversation_id]
                table.append({"study": study_row.name, "assignment_id": assignment_id, "annotator": pseudonym,
                              "conversation_id": conversation_id, "context_id": p["context_id"],
                              "emotion": p["emotion"], "system": p["system"], "is_control": p["is_control"],
                              "control_target": p["control_target"], "position": p["position"],
                              "criterion": criterion, "score": score, "utterances": p["utterances"],
                              "late": p["late"]})
            table.sort(key=lambda r: (r["assignment_id"], r["position"], r["criterion"]))
            return table

    def extra_exports(self, engine: Engine, study: str) -> dict[str, tuple[tuple[str, ...], list[dict[str, Any]]]]:
        """The chat study's further tidy tables: `conversations`, `turns` and `turn_annotations` (name -> (columns,
        rows)); see analysis.kinds.chat.schema."""
        with Session(engine) as session:
            study_row = study_by_name(session, study)
            placed = _placed(session, study_row.id, study_row.name)
            conversations = [{key: p[key] for key in CONVERSATION_COLUMNS} for p in placed.values()]
            turn_rows = session.execute(
                select(ChatTurn).join(ChatConversation, ChatConversation.id == ChatTurn.conversation_id)
                .where(ChatConversation.study_id == study_row.id)
                .order_by(ChatTurn.assignment_id, ChatTurn.conversation_id, ChatTurn.idx)).scalars().all()
            turns = []
            for t in turn_rows:
                p = placed.get((t.assignment_id, t.conversation_id))
                if p is None:
                    continue
                turns.append({"study": study_row.name, "assignment_id": t.assignment_id, "annotator": p["annotator"],
                              "conversation_id": t.conversation_id, "system": p["system"], "index": t.idx,
                              "speaker": t.speaker, "text": t.text, "created_at": iso_utc(t.created_at),
                              "latency_ms": t.latency_ms, "version": t.version,
                              "parameters": None if t.parameters is None else json.dumps(t.parameters,
                                                                                         sort_keys=True),
                              "context_sent": None if t.context_sent is None else json.dumps(t.context_sent,
                                                                                             ensure_ascii=False)})
            ticked = {(a, c, i, q) for a, c, i, q in session.execute(
                select(ChatTurnAnnotation.assignment_id, ChatTurnAnnotation.conversation_id, ChatTurnAnnotation.idx,
                       ChatTurnAnnotation.question)
                .join(ChatConversation, ChatConversation.id == ChatTurnAnnotation.conversation_id)
                .where(ChatConversation.study_id == study_row.id))}
            annotated = sorted({(a, c, i) for a, c, i, _ in ticked})
            questions = [q.key for q in _setup(study_row.config).questions_shown]
            annotations = []
            for assignment_id, conversation_id, idx in annotated:
                p = placed[assignment_id, conversation_id]
                for question in questions:
                    annotations.append({"study": study_row.name, "assignment_id": assignment_id,
                                        "annotator": p["annotator"], "conversation_id": conversation_id,
                                        "system": p["system"], "is_control": p["is_control"], "index": idx,
                                        "question": question,
                                        "checked": (assignment_id, conversation_id, idx, question) in ticked})
        return {"conversations": (CONVERSATION_COLUMNS, conversations), "turns": (TURN_COLUMNS, turns),
                "turn_annotations": (TURN_ANNOTATION_COLUMNS, annotations)}

    def report_meta(self, config: StudyConfig) -> dict[str, Any]:
        setup = _setup(config)
        return {"k": setup.conversations_per_system, "scale": {"min": 1, "max": setup.scale_max},
                "min_utterances": setup.min_utterances, "max_utterances": setup.max_utterances,
                "turn_questions": [q.key for q in setup.questions_shown],
                "controls": list(config.controls)}

    # --- the dashboard ----------------------------------------------------------------------------------------
    def progress(self, session: Session, study: Study) -> dict[str, Any]:
        """Conversations rated, ratings, conversations per annotator, and model failures: three statements."""
        of_study = ChatRating.conversation_id.in_(select(ChatConversation.id)
                                                  .where(ChatConversation.study_id == study.id))
        ratings, rated = session.execute(select(func.count(), func.count(distinct(ChatRating.conversation_id)))
                                         .where(of_study)).one()
        per_annotator = dict(session.execute(
            select(Annotator.pseudonym, func.count(distinct(ChatRating.conversation_id)))
            .join(ChatRating, ChatRating.annotator_id == Annotator.id)
            .where(of_study).group_by(Annotator.pseudonym).order_by(Annotator.pseudonym)).all())
        failed = session.scalar(
            select(func.count()).select_from(AssignmentConversation)
            .join(ChatConversation, ChatConversation.id == AssignmentConversation.conversation_id)
            .where(ChatConversation.study_id == study.id, AssignmentConversation.failed)) or 0
        setup = _setup(study.config)
        return {"conversations_rated": rated, "ratings": ratings, "model_failures": failed,
                "conversations_per_annotator": per_annotator,
                "conversations_per_system": setup.conversations_per_system,
                "summary": f"chat study: {rated} conversations rated ({ratings} ratings), {failed} ended by a model "
                           f"failure; {setup.conversations_per_system} conversations per partner planned",
                "per_annotator": per_annotator}

    def item_page(self, session: Session, study: Study, page: int, per_page: int, rated_only: bool) -> ItemPage:
        """Conversations as the researcher browses them: the prompt as the context, the talk as the responses
        (speaker: "rater", or the system's name), and each rating."""
        shown = [ChatConversation.study_id == study.id]
        if rated_only:
            shown.append(exists().where(ChatRating.conversation_id == ChatConversation.id))
        total = session.scalar(select(func.count()).select_from(ChatConversation).where(*shown)) or 0
        pages = page_bounds(total, page, per_page)
        rows = session.execute(
            select(ChatConversation.id, ChatConversation.context_id, ChatConversation.is_control,
                   ChatConversation.control_target, ChatConversation.system, Dialogue.emotion, Dialogue.situation)
            .join(Context, Context.id == ChatConversation.context_id)
            .join(Dialogue, Dialogue.id == Context.dialogue_id)
            .where(*shown).order_by(ChatConversation.context_id, ChatConversation.id).limit(per_page)
            .offset((page - 1) * per_page)).all()
        items = {row[0]: BrowsedItem(row[0], row[1], [{"role": "prompt", "text": f"{row[5]}: {row[6]}"}], [],
                                     bool(row[2]), row[3]) for row in rows}
        systems = {row[0]: row[4] for row in rows}
        for conversation_id, speaker, text in session.execute(
                select(ChatTurn.conversation_id, ChatTurn.speaker, ChatTurn.text)
                .join(Assignment, Assignment.id == ChatTurn.assignment_id)
                .where(ChatTurn.conversation_id.in_(items), Assignment.status == AssignmentStatus.SUBMITTED)
                .order_by(ChatTurn.conversation_id, ChatTurn.idx)):
            items[conversation_id].responses.append(
                (systems[conversation_id] if speaker == "system" else "rater", text))
        answers: dict[tuple[int, int, str], dict[str, Any]] = {}
        for conversation_id, assignment_id, pseudonym, criterion, score in session.execute(
                select(ChatRating.conversation_id, ChatRating.assignment_id, Annotator.pseudonym,
                       ChatRating.criterion, ChatRating.score)
                .join(Annotator, Annotator.id == ChatRating.annotator_id)
                .where(ChatRating.conversation_id.in_(items))
                .order_by(ChatRating.conversation_id, Annotator.pseudonym, ChatRating.criterion)):
            answers.setdefault((conversation_id, assignment_id, pseudonym), {})[criterion] = score
        for (conversation_id, assignment_id, pseudonym), scores in answers.items():
            items[conversation_id].ratings.append({"annotator": pseudonym, "assignment_id": assignment_id,
                                                   "scores": scores})
        return with_comments(session, ItemPage(page, pages, total, list(items.values()), rated_only))


def _placed(session: Session, study_id: int, study: str) -> dict[tuple[int, int], dict[str, Any]]:
    """Every conversation placement of a claimed assignment of the study, with what the tables say of it:
    (assignment, conversation) -> the `conversations` table's row (plus annotator pseudonym, control target and
    emotion), in assignment and position order."""
    rows = session.execute(
        select(AssignmentConversation.assignment_id, AssignmentConversation.conversation_id,
               AssignmentConversation.position, AssignmentConversation.ended_at, AssignmentConversation.failed,
               AssignmentConversation.failure, ChatConversation.context_id, ChatConversation.system,
               ChatConversation.is_control, ChatConversation.control_target, Dialogue.emotion, Annotator.pseudonym,
               Assignment.status, Assignment.late)
        .join(ChatConversation, ChatConversation.id == AssignmentConversation.conversation_id)
        .join(Context, Context.id == ChatConversation.context_id)
        .join(Dialogue, Dialogue.id == Context.dialogue_id)
        .join(Assignment, Assignment.id == AssignmentConversation.assignment_id)
        .join(Annotator, Annotator.id == Assignment.annotator_id)
        .where(ChatConversation.study_id == study_id)
        .order_by(AssignmentConversation.assignment_id, AssignmentConversation.position)).all()
    counts = {(a, c): (n, s, lat) for a, c, n, s, lat in session.execute(
        select(ChatTurn.assignment_id, ChatTurn.conversation_id, func.count(),
               func.sum(case((ChatTurn.speaker == "system", 1), else_=0)),
               func.avg(ChatTurn.latency_ms))
        .join(ChatConversation, ChatConversation.id == ChatTurn.conversation_id)
        .where(ChatConversation.study_id == study_id)
        .group_by(ChatTurn.assignment_id, ChatTurn.conversation_id))}
    placed = {}
    for (assignment_id, conversation_id, position, ended_at, failed, failure, context_id, system, is_control,
         control_target, emotion, pseudonym, status, late) in rows:
        utterances, system_turns, latency = counts.get((assignment_id, conversation_id), (0, 0, None))
        done = status == AssignmentStatus.SUBMITTED
        placed[assignment_id, conversation_id] = {
            "study": study, "assignment_id": assignment_id, "annotator": pseudonym,
            "conversation_id": conversation_id, "context_id": context_id, "emotion": emotion or "", "system": system,
            "is_control": bool(is_control), "control_target": control_target, "position": position,
            "state": _state(ended_at, failed), "utterances": int(utterances), "system_turns": int(system_turns or 0),
            "mean_latency_ms": None if latency is None else round(float(latency), 3), "failure": failure,
            "submitted": done, "late": bool(late)}
    return placed
