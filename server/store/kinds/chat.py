"""The chat kind in the store: its setup and its tables.

A chat study puts a rater in front of a live system, as ParlAI's model-chat task does and as EmpatheticDialogues
was collected (Rashkin et al., ACL 2019): she is given an ED prompt (an emotion and a situation) and plays the
speaker; a system the backend serves plays the listener. After each of the system's turns she ticks what it did
(per-turn questions, ParlAI's turn annotations adapted to empathy) and when the conversation ends she rates it on
the study's criteria, on the Likert kind's scale and wording.

An assignment is a session: one conversation with each partner of the study (its systems and its controls, the
known-bad partners), each on a different prompt. Its setup holds k (conversations per partner), how many sessions
one rater may take (1: she talks to each system at most once), the conversation's bounds in utterances (both
sides counted; ED's have 4 to 8), the longest utterance she may type, the per-turn questions, and how a reply is
served (timeout, retries, and the least time before a reply is shown, so that no system is told apart by its
speed).

Its tables: `chat_conversation` (a unit: one prompt talked about with one partner), `assignment_conversation`
(a placement: position, and the state of that conversation in that assignment: ended, or failed because the
model did not answer), `chat_turn` (every acknowledged utterance, the system's with its provenance: version,
parameters, latency and the exact context sent), `chat_turn_annotation` (the questions she ticked about one of
the system's turns) and `chat_rating` (one score per conversation, annotator and criterion). Stored under the study
JSON's `chat` key.

>>> setup = ChatSetup(conversations_per_system=4, turn_questions=(TurnQuestion("kind", "Was kind"),))
>>> ChatSetup.from_stored(ConfigReader("c"), setup.stored()) == setup
True
>>> [q.key for q in setup.questions_shown]
['kind', 'none']
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from empeval.server.store.kinds import StudySetup, register
from empeval.server.store.models import Annotator, Assignment, Base, Context, Study, utcnow
from empeval.server.store.study_parts import DEFAULT_CRITERIA, ConfigReader, Criterion

# What a rater may answer about a turn when none of the study's questions applies: always offered, and alone.
NONE_OF_THESE = "none"


@dataclass(frozen=True)
class TurnQuestion:
    """One box a rater may tick about a system's turn: its key (what the export names) and its label."""

    key: str
    label: str


# ParlAI model-chat's turn annotations (made sense, off-topic / ignored, repetitive, poor grammar), with the
# empathy question of Rashkin et al. first.
DEFAULT_TURN_QUESTIONS = (
    TurnQuestion("empathetic", "Showed understanding of how I feel"),
    TurnQuestion("made_sense", "Made sense in the conversation"),
    TurnQuestion("off_topic", "Off-topic or ignored what I said"),
    TurnQuestion("repetitive", "Repeated itself"),
    TurnQuestion("not_fluent", "Hard to understand or ungrammatical"),
)

# The conversation's criteria are the Likert kind's, asked of the whole conversation.
DEFAULT_CHAT_CRITERIA = tuple(
    Criterion(c.key, c.label, q, c.definition) for c, q in zip(DEFAULT_CRITERIA, (
        "Did your partner show understanding of your feelings in this conversation?",
        "Were your partner's replies appropriate to the conversation and on-topic?",
        "Could you understand your partner's replies, and was their language accurate?"), strict=True))

# Bounds the study-file parser enforces (tasks/kinds/chat.py); the store's checks repeat the hard ones.
MIN_UTTERANCES, MAX_UTTERANCES = 2, 40
MAX_CHARS = 2000


@register
@dataclass(frozen=True)
class ChatSetup(StudySetup):
    """What only a chat study has (see the module docstring)."""

    kind: ClassVar[str] = "chat"
    label: ClassVar[str] = "chat (live conversations)"
    default_criteria: ClassVar[tuple[Criterion, ...]] = DEFAULT_CHAT_CRITERIA

    conversations_per_system: int = 6
    sessions_per_rater: int = 1
    min_utterances: int = 4
    max_utterances: int = 8
    max_chars: int = 500
    turn_questions: tuple[TurnQuestion, ...] = DEFAULT_TURN_QUESTIONS
    turn_timeout_seconds: float = 20.0
    turn_retries: int = 1
    min_reply_seconds: float = 1.5
    scale_labels: tuple[str, ...] = ("1 - Not at all", "2 - Slightly", "3 - Moderately", "4 - Mostly",
                                     "5 - Completely")
    # The backend configuration the partners are served from (an absolute path; "" for the built-in systems.toml):
    # what lets a study talk to the researcher's own http model.
    systems_config: str = ""

    @property
    def questions_shown(self) -> tuple[TurnQuestion, ...]:
        """The study's turn questions and, last, "None of these"."""
        return (*self.turn_questions, TurnQuestion(NONE_OF_THESE, "None of these"))

    @property
    def scale_max(self) -> int:
        return len(self.scale_labels)

    @classmethod
    def from_stored(cls, reader: ConfigReader, stored: dict[str, Any]) -> ChatSetup:
        setup = reader.mapping(stored.get("chat", {}), "chat")
        d = cls()
        raw = setup.get("turn_questions")
        questions = d.turn_questions
        if raw is not None:
            if not isinstance(raw, list):
                raise reader.fail("chat.turn_questions", f"expected a list, got {raw!r}")
            tables = [reader.mapping(q, f"chat.turn_questions[{i}]") for i, q in enumerate(raw)]
            questions = tuple(TurnQuestion(reader.text(q, "key", f"chat.turn_questions[{i}].key", ""),
                                           reader.text(q, "label", f"chat.turn_questions[{i}].label", ""))
                              for i, q in enumerate(tables))
        return cls(
            conversations_per_system=reader.integer(setup, "conversations_per_system",
                                                    "chat.conversations_per_system", d.conversations_per_system),
            sessions_per_rater=reader.integer(setup, "sessions_per_rater", "chat.sessions_per_rater",
                                              d.sessions_per_rater),
            min_utterances=reader.integer(setup, "min_utterances", "chat.min_utterances", d.min_utterances),
            max_utterances=reader.integer(setup, "max_utterances", "chat.max_utterances", d.max_utterances),
            max_chars=reader.integer(setup, "max_chars", "chat.max_chars", d.max_chars),
            turn_questions=questions,
            turn_timeout_seconds=reader.number(setup, "turn_timeout_seconds", "chat.turn_timeout_seconds",
                                               d.turn_timeout_seconds),
            turn_retries=reader.integer(setup, "turn_retries", "chat.turn_retries", d.turn_retries),
            min_reply_seconds=reader.number(setup, "min_reply_seconds", "chat.min_reply_seconds",
                                            d.min_reply_seconds),
            scale_labels=reader.texts(setup, "scale_labels", "chat.scale_labels", d.scale_labels),
            systems_config=reader.text(setup, "systems_config", "chat.systems_config", d.systems_config))

    def stored(self) -> dict[str, Any]:
        return {"chat": {
            "conversations_per_system": self.conversations_per_system,
            "sessions_per_rater": self.sessions_per_rater, "min_utterances": self.min_utterances,
            "max_utterances": self.max_utterances, "max_chars": self.max_chars,
            "turn_questions": [{"key": q.key, "label": q.label} for q in self.turn_questions],
            "turn_timeout_seconds": self.turn_timeout_seconds, "turn_retries": self.turn_retries,
            "min_reply_seconds": self.min_reply_seconds, "scale_labels": list(self.scale_labels),
            "systems_config": self.systems_config}}


class ChatConversation(Base):
    """One prompt (a context of the ED test set: its dialogue's emotion and situation) to be talked about with
    one partner (a system, or a control built to fail `control_target`). The unit of a chat study."""

    __tablename__ = "chat_conversation"
    __table_args__ = (
        UniqueConstraint("study_id", "context_id", "system"),
        CheckConstraint("(is_control AND control_target IS NOT NULL) OR (NOT is_control AND control_target IS NULL)",
                        name="control_has_target"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id", ondelete="CASCADE"), index=True)
    context_id: Mapped[int] = mapped_column(ForeignKey("context.id", ondelete="RESTRICT"), index=True)
    system: Mapped[str] = mapped_column(String(100))
    is_control: Mapped[bool] = mapped_column(Boolean, default=False)
    control_target: Mapped[str | None] = mapped_column(String(32))
    design: Mapped[dict[str, Any]] = mapped_column(default=dict)

    study: Mapped[Study] = relationship()
    context: Mapped[Context] = relationship()


class AssignmentConversation(Base):
    """Which conversation sits at which position of a session (an assignment), and how it stands there: ended by
    the rater (`ended_at`), or failed because the model did not answer (`failed`, with the reason). An expiry copy
    copies the placement only: the copy's conversation starts afresh."""

    __tablename__ = "assignment_conversation"
    __table_args__ = (
        UniqueConstraint("assignment_id", "conversation_id"),
        UniqueConstraint("assignment_id", "position"),
        CheckConstraint("position >= 0", name="position_nonnegative"),
        CheckConstraint("NOT (failed AND ended_at IS NOT NULL)", name="failed_or_ended"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignment.id", ondelete="CASCADE"))
    conversation_id: Mapped[int] = mapped_column(ForeignKey("chat_conversation.id", ondelete="CASCADE"), index=True)
    position: Mapped[int]
    seconds_on_item: Mapped[float | None]
    ended_at: Mapped[datetime | None]
    failed: Mapped[bool] = mapped_column(Boolean, default=False)
    failure: Mapped[str | None] = mapped_column(Text)

    assignment: Mapped[Assignment] = relationship()
    conversation: Mapped[ChatConversation] = relationship()


class ChatTurn(Base):
    """One acknowledged utterance of a conversation in one assignment. Index 0, 2, 4, ... are the rater's (the
    speaker), 1, 3, 5, ... the system's (the listener), by a check; one utterance per index, so a resent turn or a
    second tab cannot store a turn twice. A system turn carries its provenance: the system, its version hash and
    decoding parameters, the latency, and the exact context it was sent."""

    __tablename__ = "chat_turn"
    __table_args__ = (
        UniqueConstraint("assignment_id", "conversation_id", "idx"),
        CheckConstraint("idx >= 0", name="idx_nonnegative"),
        CheckConstraint("(speaker = 'rater' AND idx % 2 = 0) OR (speaker = 'system' AND idx % 2 = 1)",
                        name="speakers_alternate"),
        CheckConstraint("speaker = 'rater' OR (system IS NOT NULL AND version IS NOT NULL)",
                        name="system_turn_has_provenance"),
        ForeignKeyConstraint(["assignment_id", "conversation_id"],
                             ["assignment_conversation.assignment_id", "assignment_conversation.conversation_id"],
                             ondelete="CASCADE"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignment.id", ondelete="CASCADE"))
    conversation_id: Mapped[int] = mapped_column(ForeignKey("chat_conversation.id", ondelete="CASCADE"), index=True)
    idx: Mapped[int] = mapped_column(Integer)
    speaker: Mapped[str] = mapped_column(String(6))
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    system: Mapped[str | None] = mapped_column(String(100))
    version: Mapped[str | None] = mapped_column(String(200))
    parameters: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    context_sent: Mapped[list[Any] | None] = mapped_column(JSON)


class ChatTurnAnnotation(Base):
    """A question the rater ticked about one of the system's turns (odd index): the turn must exist in this very
    assignment (a composite foreign key)."""

    __tablename__ = "chat_turn_annotation"
    __table_args__ = (
        UniqueConstraint("assignment_id", "conversation_id", "idx", "question"),
        CheckConstraint("idx % 2 = 1", name="system_turns_only"),
        ForeignKeyConstraint(["assignment_id", "conversation_id", "idx"],
                             ["chat_turn.assignment_id", "chat_turn.conversation_id", "chat_turn.idx"],
                             ondelete="CASCADE"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignment.id", ondelete="CASCADE"))
    conversation_id: Mapped[int] = mapped_column(ForeignKey("chat_conversation.id", ondelete="CASCADE"))
    idx: Mapped[int] = mapped_column(Integer)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotator.id"), index=True)
    question: Mapped[str] = mapped_column(String(32))
    submitted_at: Mapped[datetime] = mapped_column(default=utcnow)
    submission_id: Mapped[str] = mapped_column(String(100))


class ChatRating(Base):
    """One score on one criterion of a whole conversation by the rater who had it: one per (assignment,
    conversation, criterion), and one per (conversation, annotator, criterion) even across assignments; the
    placement is in this very assignment (a composite foreign key)."""

    __tablename__ = "chat_rating"
    __table_args__ = (
        UniqueConstraint("assignment_id", "conversation_id", "criterion"),
        UniqueConstraint("conversation_id", "annotator_id", "criterion"),
        CheckConstraint("score >= 1", name="score_positive"),
        ForeignKeyConstraint(["assignment_id", "conversation_id"],
                             ["assignment_conversation.assignment_id", "assignment_conversation.conversation_id"],
                             ondelete="CASCADE"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignment.id", ondelete="CASCADE"))
    conversation_id: Mapped[int] = mapped_column(ForeignKey("chat_conversation.id", ondelete="CASCADE"))
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotator.id"), index=True)
    criterion: Mapped[str] = mapped_column(String(32))
    score: Mapped[int]
    submitted_at: Mapped[datetime] = mapped_column(default=utcnow)
    submission_id: Mapped[str] = mapped_column(String(100))

    assignment: Mapped[Assignment] = relationship()
    annotator: Mapped[Annotator] = relationship()


ChatSetup.tables = (ChatConversation, AssignmentConversation, ChatTurn, ChatTurnAnnotation, ChatRating)
