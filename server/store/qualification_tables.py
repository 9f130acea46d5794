"""The tables of a study's qualification (server/store/qualification.py): its gold items as written when the study was
created, each rater's answers to them, and one outcome per rater and study.

- `qualification_item`: what one gold item shows (panels of text: the conversation and the response(s), or the two
  conversations of an ACUTE pair; never a system's name), what counts as right per criterion (`accepted`) and the
  feedback shown after an answer; one per position of the study.
- `qualification_answer`: one rater's answer to one gold item in one of her attempts (1, 2, ...: the goes through the
  items the pass rule allows), whether it was right, and when; one per (rater, item, attempt), so an answer sent
  again stores nothing twice. The composite foreign key ties it to an item of its very study.
- `qualification_outcome`: the decision, once she has answered every item of an attempt: `passed`, or `failed` when
  no attempt is left; one per (study, rater), never changed once written. The hand-out's claim (server/annotation/
  hot_sql.py) reads it: in a study with gold items, a rater without a `passed` row is handed no real work, whatever
  the page does.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, CheckConstraint, ForeignKey, ForeignKeyConstraint, Index, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from empeval.server.store.models import Base, status_type, utcnow
from empeval.server.store.statuses import DECIDED, QualificationStatus


class QualificationItem(Base):
    """One gold item of a study's qualification as the page shows it and as its answers are scored: `panels`, a list
    of {"title", "turns": [{"role": "speaker" | "listener", "text", "label"}]} (text only); `accepted`, criterion ->
    the answers counted right; `feedback`, shown after an answer."""

    __tablename__ = "qualification_item"
    __table_args__ = (
        UniqueConstraint("study_id", "position"),
        # (study_id, id) is unique because id is: declared so that an answer's composite foreign key names both.
        UniqueConstraint("study_id", "id"),
        CheckConstraint("position >= 0", name="position_nonnegative"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id", ondelete="CASCADE"))
    position: Mapped[int]
    panels: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    accepted: Mapped[dict[str, Any]]
    feedback: Mapped[str] = mapped_column(Text, default="")


class QualificationAnswer(Base):
    """A rater's answer to a gold item in one attempt: the answer per criterion as sent (validated) and whether every
    one of them was among those accepted."""

    __tablename__ = "qualification_answer"
    __table_args__ = (
        UniqueConstraint("annotator_id", "item_id", "attempt"),
        CheckConstraint("attempt >= 1", name="attempt_positive"),
        ForeignKeyConstraint(["study_id", "item_id"], ["qualification_item.study_id", "qualification_item.id"],
                             ondelete="CASCADE"),
        # Her answers in a study, attempt by attempt: what reading her qualification's state walks.
        Index("ix_qualification_answer_study_annotator", "study_id", "annotator_id", "attempt"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id", ondelete="CASCADE"))
    item_id: Mapped[int] = mapped_column(ForeignKey("qualification_item.id", ondelete="CASCADE"), index=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotator.id", ondelete="CASCADE"))
    attempt: Mapped[int]
    answer: Mapped[dict[str, Any]]
    correct: Mapped[bool] = mapped_column(Boolean)
    answered_at: Mapped[datetime] = mapped_column(default=utcnow)


class QualificationOutcome(Base):
    """Whether a rater passed a study's qualification: written once, when an attempt decides it (passed, or failed
    with no attempt left), with the attempt that decided it and its count of right answers."""

    __tablename__ = "qualification_outcome"
    __table_args__ = (
        UniqueConstraint("study_id", "annotator_id"),
        CheckConstraint(f"status IN ({', '.join(repr(status.value) for status in DECIDED)})", name="status_decided"),
        CheckConstraint("attempt >= 1 AND correct >= 0 AND correct <= items", name="counts_consistent"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id", ondelete="CASCADE"))
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotator.id", ondelete="CASCADE"), index=True)
    status: Mapped[QualificationStatus] = mapped_column(status_type(QualificationStatus))
    attempt: Mapped[int]
    correct: Mapped[int]
    items: Mapped[int]
    decided_at: Mapped[datetime] = mapped_column(default=utcnow)
