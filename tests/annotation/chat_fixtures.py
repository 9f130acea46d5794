"""A chat study on the bundled sample for the chat page's browser tests: made the normal way (a study file, TOML,
`kind = "chat"`, read by load_study_file and created by create_study), its partners two cheap systems of the
built-in backend configuration served live by the app, a rater's invite, the app served on 127.0.0.1 (its live
reply service closed afterwards), a partner that is down, and what SQL holds of her session (the turns, the boxes
she ticked, her ratings) to check the page against."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.backend.live import LiveReplies, LiveReply
from empeval.server.store import make_engine
from empeval.server.store.kinds.chat import (
    AssignmentConversation,
    ChatConversation,
    ChatRating,
    ChatTurn,
    ChatTurnAnnotation,
)
from empeval.server.store.models import Assignment, Study
from empeval.server.web.backend_api import registry
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import load_study_file
from empeval.wiring import make_app
from tests.browser import live_server

CHAT_STUDY = "chat-page"
# The partners: real systems of server/backend/systems.toml that cost nothing to run. A session holds one
# conversation with each.
CHAT_SYSTEMS = ("control-generic",)
CHAT_CONTROLS = ("control-scrambled",)
CHAT_PARTNERS = CHAT_SYSTEMS + CHAT_CONTROLS
CHAT_CRITERIA = ("empathy", "relevance", "fluency")
MIN_UTTERANCES, MAX_UTTERANCES = 4, 6
MAX_CHARS = 300
TURN_QUESTIONS = ("empathetic", "made_sense", "off_topic", "repetitive", "not_fluent", "none")

STUDY_FILE = f"""\
name = "{CHAT_STUDY}"
kind = "chat"
title = "Talk about a feeling"
seed = 11

[systems]
names = {list(CHAT_SYSTEMS)!r}
controls = {list(CHAT_CONTROLS)!r}

[contexts]
split = "test"
count = 4

[chat]
conversations_per_system = 2
sessions_per_rater = 1
min_utterances = {MIN_UTTERANCES}
max_utterances = {MAX_UTTERANCES}
max_chars = {MAX_CHARS}
turn_timeout_seconds = 20
turn_retries = 1
min_reply_seconds = 0
""".replace("'", '"')


def write_study_file(folder: Path) -> Path:
    path = folder / f"{CHAT_STUDY}.toml"
    path.write_text(STUDY_FILE, encoding="utf-8")
    return path


def chat_store(tmp_path: Path, sample_templates, raters=("rita",)):
    """A SQLite copy of the sample store (tests/conftest.py SampleTemplates) holding the chat study made from its
    study file: (engine, {rater: invite token})."""
    url = f"sqlite:///{tmp_path / 'chat-page.db'}"
    sample_templates.fill(url)
    engine = make_engine(url)
    create_study(engine, load_study_file(write_study_file(tmp_path)))
    return engine, {rater: invite(engine, rater, CHAT_STUDY)[1] for rater in raters}


class PartnerDown:
    """The app's live reply service with one partner down: each of its turns fails as a model that never answers
    fails in LiveReplies (no text, the reason for the researcher); the other partners answer through the real
    service, made at the first turn as the app makes its own."""

    def __init__(self, down: str):
        self.down = down
        self.real: LiveReplies | None = None
        self.lock = threading.Lock()

    def reply(self, system: str, context: Any, *, timeout: float, retries: int) -> LiveReply:
        if system == self.down:
            return LiveReply(system, None, f"no answer within {timeout:g} s", {"system": system, "latency_ms": None,
                             "attempts": retries + 1}, timeout * 1000 * (retries + 1), retries + 1)
        with self.lock:
            if self.real is None:
                self.real = LiveReplies(registry())
        return self.real.reply(system, context, timeout=timeout, retries=retries)

    def close(self) -> list[str]:
        return self.real.close() if self.real is not None else []


@contextmanager
def chat_serving(engine, live: PartnerDown | None = None) -> Iterator[str]:
    """The app on `engine` at a 127.0.0.1 address (with `live` as its live reply service, where given); its live
    reply service's threads are stopped and the engine is disposed of afterwards."""
    app = make_app(str(engine.url))
    if live is not None:
        app.extensions["empeval.live"] = live
    try:
        with live_server(app) as base:
            yield base
    finally:
        service = app.extensions.get("empeval.live")
        if service is not None:
            assert service.close() == [], "a live reply thread is stuck"
        engine.dispose()


@dataclass(frozen=True)
class StoredConversation:
    """One conversation placement of an assignment as SQL holds it."""

    conversation_id: int
    position: int
    system: str
    ended: bool
    failed: bool
    turns: tuple[tuple[int, str, str], ...]  # (index, speaker, text) in order
    ticks: dict[int, frozenset[str]]  # system turn index -> the questions ticked (submitted only)
    ratings: dict[str, int]  # criterion -> score (submitted only)


def assignment_of(engine, rater_assignment_status: str | None = None) -> int:
    """The id of the chat study's one assignment that was handed out (or has the given status)."""
    with Session(engine) as session:
        query = (select(Assignment.id).join(Study, Study.id == Assignment.study_id)
                 .where(Study.name == CHAT_STUDY))
        if rater_assignment_status is not None:
            query = query.where(Assignment.status == rater_assignment_status)
        else:
            query = query.where(Assignment.annotator_id.is_not(None))
        ids = session.scalars(query.order_by(Assignment.id)).all()
    assert len(ids) == 1, f"expected one such assignment, found {ids}"
    return ids[0]


def stored_session(engine, assignment_id: int) -> list[StoredConversation]:
    """The assignment's conversations in position order, with their turns, ticks and ratings."""
    with Session(engine) as session:
        placed = session.execute(
            select(AssignmentConversation.conversation_id, AssignmentConversation.position, ChatConversation.system,
                   AssignmentConversation.ended_at, AssignmentConversation.failed)
            .join(ChatConversation, ChatConversation.id == AssignmentConversation.conversation_id)
            .where(AssignmentConversation.assignment_id == assignment_id)
            .order_by(AssignmentConversation.position)).all()
        turns = session.execute(
            select(ChatTurn.conversation_id, ChatTurn.idx, ChatTurn.speaker, ChatTurn.text)
            .where(ChatTurn.assignment_id == assignment_id).order_by(ChatTurn.idx)).all()
        ticks = session.execute(
            select(ChatTurnAnnotation.conversation_id, ChatTurnAnnotation.idx, ChatTurnAnnotation.question)
            .where(ChatTurnAnnotation.assignment_id == assignment_id)).all()
        ratings = session.execute(
            select(ChatRating.conversation_id, ChatRating.criterion, ChatRating.score)
            .where(ChatRating.assignment_id == assignment_id)).all()
    result = []
    for conversation, position, system, ended_at, failed in placed:
        ticked: dict[int, set[str]] = {}
        for c, idx, question in ticks:
            if c == conversation:
                ticked.setdefault(idx, set()).add(question)
        result.append(StoredConversation(
            conversation_id=conversation, position=position, system=system, ended=ended_at is not None,
            failed=bool(failed), turns=tuple((i, s, t) for c, i, s, t in turns if c == conversation),
            ticks={idx: frozenset(q) for idx, q in ticked.items()},
            ratings={criterion: score for c, criterion, score in ratings if c == conversation}))
    return result
