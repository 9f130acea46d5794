"""A chat study's live turns: taking the rater's utterance, recording the system's reply (or its failure), ending a
conversation.

The model is called between two short write transactions, never inside one (a reply can take seconds; SQLite has
one writer): `begin_turn` stores the rater's utterance and says what to ask the system, the caller (the web room,
which may reach the backend) asks it, and `record_reply` stores the reply or marks the conversation model-failed.
Every promise is kept by the store's keys, not by timing:
- one utterance per index (chat_turn's unique key): a resend of the same text, a reload, a second tab sending
  the same turn are all answered from what is stored; a second tab sending a *different* text at an index that is
  taken gets 409;
- a reply is recorded once: of two requests that both asked the model (two tabs resending the same turn), the
  second's INSERT fails on the key and it answers with the first's reply;
- an acknowledged turn is committed before it is acknowledged: kill -9 at any moment loses only what no one was
  told was stored; a rater utterance stored without a reply (the server died while the model worked) is answered
  when the page resends it (the payload shows it as the last turn).
A turn is taken only on an assignment that is hers, active and not past its deadline, in an open study she may
work in, on a conversation neither ended nor failed, within the study's utterance bounds.
"""
from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from empeval.server.annotation import hot_sql
from empeval.server.annotation.handout import refuse_unless_may_work
from empeval.server.errors import BadInput, Conflict, NotFound
from empeval.server.store.engine import write_transaction
from empeval.server.store.kinds.chat import MAX_CHARS, ChatSetup
from empeval.server.store.queries import now_utc
from empeval.server.store.statuses import AssignmentStatus
from empeval.server.store.storable import text_problem

FAILED_MESSAGE = ("Your partner could not answer just now, so this conversation has ended. This is not your fault "
                  "and you will not be penalised: please go on with the next one.")
# C0 and C1 control characters other than tab and newline: nothing a person types into a chat box.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

# The assignment with its study and whether she may work (hot_sql's revocation rule, the one `next` and `submit`
# read), and the conversation at the position asked.
CONVERSATION = hot_sql.statement(
    "SELECT assignment.annotator_id, assignment.status, assignment.expires_at, study.id AS study_id, study.name, "
    "study.status AS study_status, CAST(study.config AS TEXT) AS config, "
    + hot_sql.revoked_sql("study.id") + " AS revoked, "
    "placed.conversation_id, placed.ended_at, placed.failed, conversation.system "
    "FROM assignment JOIN study ON study.id = assignment.study_id "
    "LEFT OUTER JOIN assignment_conversation AS placed ON placed.assignment_id = assignment.id "
    "AND placed.position = :position "
    "LEFT OUTER JOIN chat_conversation AS conversation ON conversation.id = placed.conversation_id "
    "WHERE assignment.id = :assignment")
TURNS = hot_sql.statement(
    "SELECT idx, speaker, text FROM chat_turn WHERE assignment_id = :assignment AND conversation_id = :conversation "
    "ORDER BY idx")
INSERT_RATER_TURN = hot_sql.statement(
    "INSERT INTO chat_turn (assignment_id, conversation_id, idx, speaker, text, created_at) "
    "VALUES (:assignment, :conversation, :idx, 'rater', :text, :now)")
INSERT_SYSTEM_TURN = hot_sql.statement(
    "INSERT INTO chat_turn (assignment_id, conversation_id, idx, speaker, text, created_at, system, version, "
    "parameters, latency_ms, context_sent) VALUES (:assignment, :conversation, :idx, 'system', :text, :now, "
    ":system, :version, :parameters, :latency, :context)")
# Marked failed only while it has no reply at that index and is not ended (a reply another request stored wins).
MARK_FAILED = hot_sql.statement(
    "UPDATE assignment_conversation SET failed = :true, failure = :failure "
    "WHERE assignment_id = :assignment AND conversation_id = :conversation AND ended_at IS NULL AND NOT failed "
    "AND NOT EXISTS (SELECT 1 FROM chat_turn WHERE chat_turn.assignment_id = :assignment "
    "AND chat_turn.conversation_id = :conversation AND chat_turn.idx = :idx)")
MARK_ENDED = hot_sql.statement(
    "UPDATE assignment_conversation SET ended_at = :now WHERE assignment_id = :assignment "
    "AND conversation_id = :conversation AND ended_at IS NULL AND NOT failed")


class Conversation(NamedTuple):
    """A conversation of an assignment as a turn request finds it."""

    assignment_id: int
    conversation_id: int
    position: int
    system: str
    setup: ChatSetup
    turns: list[tuple[int, str, str]]  # (index, speaker, text) in order
    ended: bool
    failed: bool


class Pending(NamedTuple):
    """What the caller must ask the system for (`reply` None), or the reply already stored (a resend): the
    conversation, the index the reply takes, and the turns the system is sent (the rater's as the speaker's)."""

    conversation: Conversation
    reply_index: int
    history: list[tuple[str, str]]  # (role, text): role 'speaker' (the rater) or 'listener' (the system)
    reply: str | None


class TurnResult(NamedTuple):
    """What the page is told: the partner's reply and where the conversation stands, or that it failed."""

    index: int  # type: ignore[assignment]  # the reply's index (shadows tuple.index, never called on it)
    text: str | None
    utterances: int
    can_end: bool
    must_end: bool
    failed: bool

    def as_json(self) -> dict[str, Any]:
        if self.failed:
            return {"failed": True, "message": FAILED_MESSAGE}
        return {"index": self.index, "text": self.text, "utterances": self.utterances, "can_end": self.can_end,
                "must_end": self.must_end}


def _conversation(connection: Any, assignment_id: int, position: int, annotator_id: int, study_name: str,
                  now: datetime) -> Conversation:
    """The conversation at `position` of the assignment, if the annotator may talk in it now: NotFound when the
    assignment is not hers in her study, Forbidden when the study is closed or she is revoked, BadInput when it is
    not a chat study's, Conflict when it is no longer active."""
    row = hot_sql.run(connection, CONVERSATION, {"assignment": assignment_id, "position": position,
                                                  "annotator": annotator_id}).first()
    if row is None or row.annotator_id != annotator_id or row.name != study_name:
        raise NotFound(f"no assignment {assignment_id} of yours in study {study_name!r}")
    study = hot_sql.study_view(row.study_id, row.name, row.study_status, row.config)
    refuse_unless_may_work(study, bool(row.revoked))
    setup = study.config.setup
    if not isinstance(setup, ChatSetup):
        raise BadInput(f"assignment {assignment_id} is of the {study.config.setup.label} study {study.name!r}: it "
                       "has no conversations")
    if row.conversation_id is None:
        raise NotFound(f"assignment {assignment_id} has no conversation at position {position}")
    if row.status == AssignmentStatus.SUBMITTED:
        raise Conflict(f"assignment {assignment_id} was submitted: its conversations are over")
    expires_at = hot_sql.read_moment(row.expires_at)
    if row.status != AssignmentStatus.ASSIGNED or (expires_at is not None and expires_at.replace(tzinfo=None) <
                                                   now.replace(tzinfo=None)):
        raise Conflict(f"assignment {assignment_id} is no longer yours to work on (its time ran out): reload the "
                       "page for a new one")
    turns = [(row_.idx, row_.speaker, row_.text) for row_ in hot_sql.run(
        connection, TURNS, {"assignment": assignment_id, "conversation": row.conversation_id})]
    return Conversation(assignment_id, row.conversation_id, position, row.system, setup, turns,
                        row.ended_at is not None, bool(row.failed))


def checked_text(payload: Any, max_chars: int) -> tuple[int, str]:
    """The turn request's index and text: a JSON object with exactly `index` (a non-negative even integer: the
    rater speaks at 0, 2, 4, ...) and `text` (1 to `max_chars` characters once trimmed, no control characters,
    storable); BadInput saying what was wrong."""
    if not isinstance(payload, dict):
        raise BadInput('send the turn as a JSON object: {"index": 0, "text": "..."}')
    unknown = sorted(set(payload) - {"index", "text"}, key=str)
    if unknown:
        raise BadInput(f"unknown field {unknown[0]!r}; a turn has only index and text")
    index = payload.get("index")
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise BadInput(f"index must be a non-negative integer, got {index!r}")
    if index % 2:
        raise BadInput(f"index {index} is your partner's turn: yours are 0, 2, 4, ...")
    text = payload.get("text")
    if not isinstance(text, str):
        raise BadInput(f"text must be a string, got {type(text).__name__}")
    text = text.strip()
    if not text:
        raise BadInput("text is empty: write a message before sending")
    if len(text) > max_chars:
        raise BadInput(f"text is {len(text):,} characters long; at most {max_chars} are allowed")
    if problem := text_problem(text):
        raise BadInput(f"text {problem}")
    if found := _CONTROL.search(text):
        raise BadInput(f"text contains a control character ({ascii(found.group())} at position {found.start()})")
    return index, text


def _state(conversation: Conversation, utterances: int, index: int, text: str | None) -> TurnResult:
    setup = conversation.setup
    return TurnResult(index, text, utterances, can_end=utterances >= setup.min_utterances,
                      must_end=utterances + 1 >= setup.max_utterances, failed=False)


def begin_turn(engine: Engine, assignment_id: int, position: int, annotator_id: int, study_name: str,
               payload: Any, *, now: datetime | None = None) -> Pending:
    """Store the rater's utterance (or recognise its resend) and say what the system must answer: Pending with
    `reply` set when the reply is stored already. See the module docstring for the rules; 409 (Conflict) for a turn
    out of order, after the end, beyond the study's length, or different from the one stored at its index."""
    now = now or now_utc()
    index, text = checked_text(payload, MAX_CHARS)  # the body first: a hostile one costs no read
    with engine.connect() as connection:
        conversation = _conversation(connection, assignment_id, position, annotator_id, study_name, now)
        if len(text) > conversation.setup.max_chars:
            raise BadInput(f"text is {len(text):,} characters long; at most {conversation.setup.max_chars} are "
                           "allowed")
        for _ in range(2):  # a second tab's INSERT of the same index: read again and answer as a resend
            if conversation.failed:
                raise Conflict("this conversation has ended because your partner could not answer; go on with the "
                               "next one")
            stored = {idx: (speaker, said) for idx, speaker, said in conversation.turns}
            if index in stored:
                if stored[index][1] != text:
                    raise Conflict(f"turn {index} was already sent with another text (from another tab?): reload "
                                   "the page to see the conversation as it is stored")
                reply = stored.get(index + 1)
                return Pending(conversation, index + 1, _history(conversation.turns, index),
                               reply[1] if reply else None)
            if conversation.ended:
                raise Conflict("you have ended this conversation: rate it, or go on with the next one")
            if index != len(conversation.turns):
                raise Conflict(f"turn {index} is out of order: the conversation has {len(conversation.turns)} "
                               f"utterances, so the next of yours is {len(conversation.turns)}; reload the page")
            if index + 1 >= conversation.setup.max_utterances:
                raise Conflict(f"the conversation has reached its {conversation.setup.max_utterances} utterances: "
                               "end it and rate it")
            try:
                with write_transaction(connection):
                    hot_sql.run(connection, INSERT_RATER_TURN, {
                        "assignment": assignment_id, "conversation": conversation.conversation_id, "idx": index,
                        "text": text, "now": hot_sql.moment(connection, now)})
            except IntegrityError:
                conversation = _conversation(connection, assignment_id, position, annotator_id, study_name, now)
                continue
            turns = [*conversation.turns, (index, "rater", text)]
            return Pending(conversation._replace(turns=turns), index + 1, _history(turns, index), None)
    raise Conflict(f"turn {index} changed while it was being stored: reload the page")


def _history(turns: list[tuple[int, str, str]], up_to: int) -> list[tuple[str, str]]:
    """The turns up to index `up_to`, as the system is sent them: the rater speaks as the speaker."""
    return [("speaker" if speaker == "rater" else "listener", text) for idx, speaker, text in turns if idx <= up_to]


def record_reply(engine: Engine, pending: Pending, *, text: str | None, provenance: dict[str, Any],
                 failure: str | None, now: datetime | None = None) -> TurnResult:
    """Store the system's reply at `pending.reply_index` with its provenance (`provenance`: system, version,
    parameters, latency_ms), or, with `failure`, mark the conversation model-failed (its reason kept for the
    researcher, never shown to the rater). A reply stored meanwhile by another request wins over both."""
    now = now or now_utc()
    conversation = pending.conversation
    keys = {"assignment": conversation.assignment_id, "conversation": conversation.conversation_id,
            "idx": pending.reply_index}
    with engine.connect() as connection:
        try:
            with write_transaction(connection):
                if failure is not None or text is None:
                    hot_sql.run(connection, MARK_FAILED, {**keys, "failure": failure or "no reply", "true": True})
                else:
                    hot_sql.run(connection, INSERT_SYSTEM_TURN, {
                        **keys, "text": text, "now": hot_sql.moment(connection, now), "system": conversation.system,
                        "version": str(provenance.get("version") or "unknown"),
                        "parameters": _json(provenance.get("parameters") or {}),
                        "latency": provenance.get("latency_ms"),
                        "context": _json([{"role": role, "text": said} for role, said in pending.history])})
        except IntegrityError:
            pass  # another request stored this reply first: answer with it
        stored = {row.idx: row.text for row in hot_sql.run(connection, TURNS, {
            "assignment": conversation.assignment_id, "conversation": conversation.conversation_id})}
    if pending.reply_index in stored:
        return _state(conversation, len(stored), pending.reply_index, stored[pending.reply_index])
    return TurnResult(pending.reply_index, None, len(stored), False, False, failed=True)


def stored_reply(pending: Pending) -> TurnResult:
    """The answer to a resend whose reply is stored already."""
    # The stored turns may run past the reply resent (a turn resent late): count what is stored, at least the reply.
    utterances = max(len(pending.conversation.turns), pending.reply_index + 1)
    return _state(pending.conversation, utterances, pending.reply_index, pending.reply)


def end_conversation(engine: Engine, assignment_id: int, position: int, annotator_id: int, study_name: str,
                     *, now: datetime | None = None) -> dict[str, Any]:
    """End the conversation at `position` (idempotent): only once it holds at least the study's fewest utterances
    and the last is the partner's (Conflict otherwise, saying which)."""
    now = now or now_utc()
    with engine.connect() as connection:
        conversation = _conversation(connection, assignment_id, position, annotator_id, study_name, now)
        if conversation.failed:
            raise Conflict("this conversation has ended already because your partner could not answer")
        if conversation.ended:
            return {"state": "ended"}
        count = len(conversation.turns)
        if count < conversation.setup.min_utterances:
            raise Conflict(f"the conversation has {count} utterances; talk a little longer (at least "
                           f"{conversation.setup.min_utterances}) before ending it")
        if conversation.turns[-1][1] != "system":
            raise Conflict("wait for your partner's reply before ending the conversation")
        with write_transaction(connection):
            hot_sql.run(connection, MARK_ENDED, {"assignment": assignment_id,
                                                 "conversation": conversation.conversation_id,
                                                 "now": hot_sql.moment(connection, now)})
    return {"state": "ended"}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
