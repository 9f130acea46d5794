"""The table of per-item comments (`design.item_comments`): what a rater wrote in the optional box under one item
of an assignment, sent with the submission (server/annotation/item_comments.py).

- `item_comment`: one row per (assignment, item) at most, the item being the kind's unit as the submission names it
  (a Likert `study_item`, an A/B `pair_item`: `item_id` is not a foreign key, since it names a row of either table);
  deleted with its assignment (ON DELETE CASCADE) and by `annotators forget` (server/annotation/withdraw.py). The
  assignment's own comment stays on `assignment.comment`.
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from empeval.server.store.models import Base, utcnow


class ItemComment(Base):
    """A rater's comment on one item of one assignment, as submitted (never empty)."""

    __tablename__ = "item_comment"
    __table_args__ = (UniqueConstraint("assignment_id", "item_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignment.id", ondelete="CASCADE"))
    item_id: Mapped[int]
    comment: Mapped[str] = mapped_column(Text)
    submitted_at: Mapped[datetime] = mapped_column(default=utcnow)
