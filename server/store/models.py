"""The SQL schema every kind of study shares: what empeval stores, with the constraints that keep it honest.

Every uniqueness rule that prevents double counting lives in the schema, not only in Python: a dialogue is
imported once per dataset, a system produces one response per context, a submission id is stored once, an
annotator holds at most one active assignment per study, and is shown a context at most once per study. What a
study of one kind shows and stores (a Likert study's items and ratings, an A/B study's pairs and choices, ...)
lives in that kind's own tables, declared on the same `Base` in server/store/kinds/ with the rules of that kind
(one answer per unit, annotator and criterion, made about a placement of that very assignment).
"""
from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    Enum,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from empeval.server.store.statuses import AssignmentStatus, StudyStatus, sql_values
from empeval.server.store.study_config import StudyConfig

# Named constraints, so Alembic migrations (and SQLite batch mode) can refer to them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


def status_type(statuses: type[StrEnum]) -> Enum:
    """A status column's type: the enum's values stored as text (VARCHAR(20), as the column always was; the
    table's CHECK constraint lists the values), read back as the enum."""
    return Enum(statuses, native_enum=False, create_constraint=False, length=20, validate_strings=True,
                values_callable=lambda members: [member.value for member in members])


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, datetime: DateTime(timezone=True)}


class Dataset(Base):
    """A source of dialogues: EmpatheticDialogues, or a researcher's own JSONL."""

    __tablename__ = "dataset"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    source: Mapped[str] = mapped_column(Text, default="")
    license: Mapped[str] = mapped_column(String(100), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    dialogues: Mapped[list[Dialogue]] = relationship(back_populates="dataset")


class Dialogue(Base):
    """One conversation (for ED: one conv_id), with its emotion label and situation."""

    __tablename__ = "dialogue"
    __table_args__ = (
        UniqueConstraint("dataset_id", "conv_id"),
        Index("ix_dialogue_dataset_split", "dataset_id", "split"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("dataset.id", ondelete="CASCADE"))
    conv_id: Mapped[str] = mapped_column(String(200))
    split: Mapped[str] = mapped_column(String(20))
    emotion: Mapped[str | None] = mapped_column(String(50))
    situation: Mapped[str | None] = mapped_column(Text)
    # SHA-256 of the imported content: re-importing the same dialogue is a no-op, a changed one an error.
    content_hash: Mapped[str] = mapped_column(String(64))

    dataset: Mapped[Dataset] = relationship(back_populates="dialogues")
    turns: Mapped[list[Turn]] = relationship(
        back_populates="dialogue", order_by="Turn.idx", cascade="all, delete-orphan"
    )
    contexts: Mapped[list[Context]] = relationship(
        back_populates="dialogue", order_by="Context.n_turns", cascade="all, delete-orphan"
    )


class Turn(Base):
    """One utterance. `idx` is 1-based (ED's utterance_idx); role is 'speaker' or 'listener'."""

    __tablename__ = "turn"
    __table_args__ = (
        UniqueConstraint("dialogue_id", "idx"),
        CheckConstraint("idx >= 1", name="idx_positive"),
        CheckConstraint("role IN ('speaker', 'listener')", name="role_known"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    dialogue_id: Mapped[int] = mapped_column(ForeignKey("dialogue.id", ondelete="CASCADE"))
    idx: Mapped[int]
    role: Mapped[str] = mapped_column(String(10))
    text: Mapped[str] = mapped_column(Text)

    dialogue: Mapped[Dialogue] = relationship(back_populates="turns")


class Context(Base):
    """A dialogue prefix that ends right before a listener turn: the unit that gets a response.

    `n_turns` is the prefix length (the turns with idx <= n_turns); `reference_turn_id` is the listener
    turn that followed in the data (the gold response).
    """

    __tablename__ = "context"
    __table_args__ = (
        UniqueConstraint("dialogue_id", "n_turns"),
        CheckConstraint("n_turns >= 1", name="n_turns_positive"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    dialogue_id: Mapped[int] = mapped_column(ForeignKey("dialogue.id", ondelete="CASCADE"))
    n_turns: Mapped[int]
    reference_turn_id: Mapped[int] = mapped_column(ForeignKey("turn.id", ondelete="CASCADE"), unique=True)

    dialogue: Mapped[Dialogue] = relationship(back_populates="contexts")
    reference_turn: Mapped[Turn] = relationship()


class System(Base):
    """A dialogue system (or a control) at one version with its parameters."""

    __tablename__ = "system"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    kind: Mapped[str] = mapped_column(String(50))
    version: Mapped[str] = mapped_column(String(200))
    parameters: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Response(Base):
    """What one system said for one context, with provenance (how it was produced)."""

    __tablename__ = "response"
    __table_args__ = (UniqueConstraint("context_id", "system_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    context_id: Mapped[int] = mapped_column(ForeignKey("context.id", ondelete="CASCADE"))
    system_id: Mapped[int] = mapped_column(ForeignKey("system.id", ondelete="CASCADE"), index=True)
    text: Mapped[str] = mapped_column(Text)
    provenance: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    latency_ms: Mapped[float | None]

    context: Mapped[Context] = relationship()
    system: Mapped[System] = relationship()


# (id, context_id) is unique because id is: declared so that a pair item can point at a response *and* its
# context with one composite foreign key, which makes both responses of a pair answer the same context.
Index("uq_response_id_context_id", Response.id, Response.context_id, unique=True)


class Study(Base):
    """A human evaluation: its configuration (criteria, scale, k, ...) and the seed of its design.

    `status` is open while it takes ratings and closed once the researcher has closed it (`empeval study
    close`): a closed study hands out nothing and takes no submission.
    """

    __tablename__ = "study"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    # The configuration as stored: private to the store; everyone else reads the typed `config`.
    _config_json: Mapped[dict[str, Any]] = mapped_column("config", default=dict)
    seed: Mapped[int] = mapped_column(Integer, default=0)
    # Checked on every write by the enum type, not by a CHECK constraint: adding one on SQLite means recreating the
    # table (Alembic's batch mode), and dropping `study` with foreign keys on deletes every row that cascades from it
    # (measured: a study's assignments vanished in tests/store/test_migration_0003.py).
    status: Mapped[StudyStatus] = mapped_column(status_type(StudyStatus), default=StudyStatus.DRAFT)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Set when an open study stops handing out new work (design.stop_when_decided; migration 0014): assignments
    # already started may still be submitted. NULL while it hands out work.
    claims_closed_at: Mapped[datetime | None]
    claims_closed_reason: Mapped[str | None] = mapped_column(Text)


    @property
    def config(self) -> StudyConfig:
        """The typed configuration (StudyConfigError, naming this study and the key, if the row is invalid)."""
        return StudyConfig.from_json(self._config_json, study=self.name)

    @config.setter
    def config(self, value: StudyConfig) -> None:
        self._config_json = value.to_json()


class Annotator(Base):
    """A rater. `pseudonym` is never a raw crowd-platform worker id (those are hashed before storage)."""

    __tablename__ = "annotator"
    __table_args__ = (UniqueConstraint("provider", "pseudonym"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    provider: Mapped[str] = mapped_column(String(30))
    pseudonym: Mapped[str] = mapped_column(String(100))
    display_name: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Revoked in every study (`empeval annotators revoke NAME`): no new assignment, no submission.
    revoked_at: Mapped[datetime | None]


class StudyRevocation(Base):
    """An annotator revoked in one study only (`empeval annotators revoke NAME --study S`)."""

    __tablename__ = "study_revocation"

    study_id: Mapped[int] = mapped_column(ForeignKey("study.id", ondelete="CASCADE"), primary_key=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotator.id", ondelete="CASCADE"), primary_key=True)
    revoked_at: Mapped[datetime] = mapped_column(default=utcnow)


class StudyLogEntry(Base):
    """One event of a study's log: what the researcher did to it (a participant withdrawn with `empeval annotators
    forget`), when, and what it changed, in counts (`detail`); never a participant's name."""

    __tablename__ = "study_log"

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id", ondelete="CASCADE"), index=True)
    at: Mapped[datetime] = mapped_column(default=utcnow)
    event: Mapped[str] = mapped_column(String(40))
    annotator_id: Mapped[int | None] = mapped_column(ForeignKey("annotator.id"), index=True)
    detail: Mapped[dict[str, Any]] = mapped_column(default=dict)


class Assignment(Base):
    """A batch of study items handed to one annotator. One submission id per assignment, stored once."""

    __tablename__ = "assignment"
    __table_args__ = (
        CheckConstraint(f"status IN ({sql_values(AssignmentStatus)})", name="status_known"),
        # One active assignment per (study, annotator): of two claims at once by the same person (two
        # browser tabs) the second fails here, whatever Python thought it had checked.
        Index("uq_assignment_active_per_annotator", "study_id", "annotator_id", unique=True,
              sqlite_where=text(f"status = '{AssignmentStatus.ASSIGNED}'"),
              postgresql_where=text(f"status = '{AssignmentStatus.ASSIGNED}'")),
        # Hand-out reads by index, whatever the size of the study: the first open assignment in design order,
        # an annotator's assignments by status, the active ones past their deadline (migration 0004).
        Index("ix_assignment_study_status_order", "study_id", "status", "design_index", "id"),
        Index("ix_assignment_study_annotator_status", "study_id", "annotator_id", "status"),
        Index("ix_assignment_study_status_expires", "study_id", "status", "expires_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    # No index of its own: the composite indexes above lead with study_id (migration 0009).
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id", ondelete="CASCADE"))
    annotator_id: Mapped[int | None] = mapped_column(ForeignKey("annotator.id"), index=True)
    status: Mapped[AssignmentStatus] = mapped_column(status_type(AssignmentStatus), default=AssignmentStatus.OPEN)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    expires_at: Mapped[datetime | None]
    submitted_at: Mapped[datetime | None]
    submission_id: Mapped[str | None] = mapped_column(String(100), unique=True)
    # Design metadata: which round of k it belongs to and its place in hand-out order.
    round: Mapped[int] = mapped_column(Integer, default=0)
    design_index: Mapped[int] = mapped_column(Integer, default=0)
    # When an assignment expires, a copy with the same items goes back to the pool; it points here.
    replaces_id: Mapped[int | None] = mapped_column(ForeignKey("assignment.id"))
    # Submitted after it had expired: the ratings are kept but flagged for the analysis.
    late: Mapped[bool] = mapped_column(Boolean, default=False)
    comment: Mapped[str | None] = mapped_column(Text)

    annotator: Mapped[Annotator | None] = relationship()


class SeenContext(Base):
    """A context an annotator has been shown in a study, written in the transaction that claims the assignment
    showing it. The unique key is the design's promise (nobody rates a context twice in a study, so a response's
    k ratings come from k people) kept by the database. Expiry keeps the row (she did see the context);
    only undoing a claim whose work was never stored (`handout.release`) removes it."""

    __tablename__ = "seen_context"
    __table_args__ = (UniqueConstraint("study_id", "annotator_id", "context_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id", ondelete="CASCADE"))
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotator.id", ondelete="CASCADE"))
    context_id: Mapped[int] = mapped_column(ForeignKey("context.id", ondelete="CASCADE"), index=True)
    # The assignment whose claim showed the context.
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignment.id", ondelete="CASCADE"), index=True)
    seen_at: Mapped[datetime] = mapped_column(default=utcnow)


class JudgeScore(Base):
    """One automatic judge's score of one response on one criterion, with provenance: the judge's name, kind
    and version, the hash of the rubric prompt (http-judge) or of the fitted models (learned-judge), the raw
    output, the latency. A failure is a row with no score and the error (never a score), so a re-run retries
    the failures only; one row per (response, criterion, judge, judge version)."""

    __tablename__ = "judge_score"
    __table_args__ = (
        UniqueConstraint("response_id", "criterion", "judge", "judge_version"),
        CheckConstraint("(score IS NULL) <> (error IS NULL)", name="score_or_error"),
        Index("ix_judge_score_judge", "judge", "judge_version"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    response_id: Mapped[int] = mapped_column(ForeignKey("response.id", ondelete="CASCADE"))
    criterion: Mapped[str] = mapped_column(String(32))
    judge: Mapped[str] = mapped_column(String(100))
    judge_kind: Mapped[str] = mapped_column(String(50))
    judge_version: Mapped[str] = mapped_column(String(200))
    prompt_hash: Mapped[str] = mapped_column(String(64))
    score: Mapped[float | None]
    raw_output: Mapped[str | None] = mapped_column(Text)
    latency_ms: Mapped[float | None]
    error: Mapped[str | None] = mapped_column(Text)
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    response: Mapped[Response] = relationship()


class AppSetting(Base):
    """Small pieces of installation state kept with the data (e.g. the key that signs invite links)."""

    __tablename__ = "app_setting"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
