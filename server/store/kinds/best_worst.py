"""The best-worst scaling kind in the store: its setup and its tables.

A best-worst scaling (BWS) study shows one context with the responses of `tuple_size` systems (a tuple, 4 by
default) and asks, per criterion, which response is the best and which the worst (Louviere, Flynn & Marley 2015;
Kiritchenko & Mohammad, ACL 2017, who showed that it gives more reliable scores than rating scales for as many
annotations). One answer about a 4-tuple says 5 of its 6 pairwise comparisons, so it ranks systems with fewer
paid answers than an A/B study. Its setup holds the tuple size and k, the distinct annotators per tuple.

Its tables: `tuple_item` (one tuple of one context; a control tuple holds one control response, built to be the
worst on `control_target`), `tuple_member` (which response is at which slot of a tuple: every member answers the
tuple's own context, by the composite foreign keys), `assignment_tuple` (a placement: position, and the order its
members are shown in, `shown_order`, a string of slots such as "2031": the response shown first is slot 2's) and
`best_worst_choice` (one answer per tuple, annotator and criterion: the slots chosen best and worst, which must
differ and must be members of the tuple, by a check and two composite foreign keys; made about a placement of that
very assignment). Stored under the study JSON's `best_worst` key.

>>> setup = BestWorstSetup(judgments_per_tuple=2, tuple_size=3)
>>> BestWorstSetup.from_stored(ConfigReader("bws"), setup.stored()) == setup
True
>>> setup.stored()
{'best_worst': {'judgments_per_tuple': 2, 'tuple_size': 3}}
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import Boolean, CheckConstraint, ForeignKey, ForeignKeyConstraint, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from empeval.server.store.kinds import StudySetup, register
from empeval.server.store.models import Annotator, Assignment, Base, Context, Study, utcnow
from empeval.server.store.study_parts import DEFAULT_CRITERIA, ConfigReader, Criterion

# The fewest and the most responses a tuple may hold: a "tuple" of two is an A/B pair (a pairwise study), and
# past six a rater no longer holds every response in mind (Kiritchenko & Mohammad use 4).
MIN_TUPLE_SIZE, MAX_TUPLE_SIZE = 3, 6

# Rashkin et al.'s questions asked as best and worst: the task page shows the question, then a row "Best" and a
# row "Worst" of response letters. The definitions are the Likert ones.
DEFAULT_BEST_WORST_CRITERIA = (
    Criterion("empathy", "Empathy",
              "Which response shows the most understanding of the feelings of the person talking about their "
              "experience, and which the least?", DEFAULT_CRITERIA[0].definition),
    Criterion("relevance", "Relevance",
              "Which response is the most appropriate to the conversation and on-topic, and which the least?",
              DEFAULT_CRITERIA[1].definition),
    Criterion("fluency", "Fluency",
              "Which response is the easiest to understand, with the most accurate language, and which the "
              "hardest?", DEFAULT_CRITERIA[2].definition),
)


@register
@dataclass(frozen=True)
class BestWorstSetup(StudySetup):
    """What only a best-worst scaling study has: `tuple_size` responses per tuple and `judgments_per_tuple` (k)
    distinct annotators per tuple."""

    kind: ClassVar[str] = "best_worst"
    label: ClassVar[str] = "best-worst scaling"
    default_criteria: ClassVar[tuple[Criterion, ...]] = DEFAULT_BEST_WORST_CRITERIA

    judgments_per_tuple: int = 3
    tuple_size: int = 4

    @classmethod
    def from_stored(cls, reader: ConfigReader, stored: dict[str, Any]) -> BestWorstSetup:
        setup = reader.mapping(stored.get("best_worst", {}), "best_worst")
        defaults = cls()
        return cls(judgments_per_tuple=reader.integer(setup, "judgments_per_tuple", "best_worst.judgments_per_tuple",
                                                      defaults.judgments_per_tuple),
                   tuple_size=reader.integer(setup, "tuple_size", "best_worst.tuple_size", defaults.tuple_size))

    def stored(self) -> dict[str, Any]:
        return {"best_worst": {"judgments_per_tuple": self.judgments_per_tuple, "tuple_size": self.tuple_size}}


class TupleItem(Base):
    """A tuple of responses to one context, judged best and worst in a best-worst scaling study; its members are
    rows of `tuple_member`. A control tuple holds one control response (at `control_slot`), built to be the worst
    on `control_target` (the one criterion it is scored on)."""

    __tablename__ = "tuple_item"
    __table_args__ = (
        CheckConstraint("(is_control AND control_target IS NOT NULL AND control_slot IS NOT NULL) OR "
                        "(NOT is_control AND control_target IS NULL AND control_slot IS NULL)",
                        name="control_has_target_and_slot"),
        # What the members' composite foreign key points at: a member's context is its tuple's.
        UniqueConstraint("id", "context_id", name="uq_tuple_item_id_context_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id", ondelete="CASCADE"), index=True)
    context_id: Mapped[int] = mapped_column(ForeignKey("context.id", ondelete="RESTRICT"), index=True)
    is_control: Mapped[bool] = mapped_column(Boolean, default=False)
    control_target: Mapped[str | None] = mapped_column(String(32))
    control_slot: Mapped[int | None]
    design: Mapped[dict[str, Any]] = mapped_column(default=dict)

    study: Mapped[Study] = relationship()
    context: Mapped[Context] = relationship()


class TupleMember(Base):
    """The response at one slot of a tuple (slots 0, 1, ... in the order the design listed the systems). Both
    composite foreign keys go through `context_id`: the response answers the tuple's context, never another's."""

    __tablename__ = "tuple_member"
    __table_args__ = (
        UniqueConstraint("tuple_item_id", "response_id"),
        CheckConstraint(f"slot >= 0 AND slot < {MAX_TUPLE_SIZE}", name="slot_in_range"),
        ForeignKeyConstraint(["tuple_item_id", "context_id"], ["tuple_item.id", "tuple_item.context_id"],
                             ondelete="CASCADE"),
        ForeignKeyConstraint(["response_id", "context_id"], ["response.id", "response.context_id"],
                             ondelete="RESTRICT"),
    )

    tuple_item_id: Mapped[int] = mapped_column(primary_key=True)
    slot: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    response_id: Mapped[int]
    context_id: Mapped[int]


class AssignmentTuple(Base):
    """Which tuple sits at which position of an assignment, and the order its members are shown in (`shown_order`:
    one digit per slot, the slot shown first first), as the design rotated it. An expiry copy keeps it."""

    __tablename__ = "assignment_tuple"
    __table_args__ = (
        UniqueConstraint("assignment_id", "tuple_item_id"),
        UniqueConstraint("assignment_id", "position"),
        CheckConstraint("position >= 0", name="position_nonnegative"),
        CheckConstraint(f"length(shown_order) BETWEEN {MIN_TUPLE_SIZE} AND {MAX_TUPLE_SIZE}",
                        name="shown_order_length"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignment.id", ondelete="CASCADE"))
    tuple_item_id: Mapped[int] = mapped_column(ForeignKey("tuple_item.id", ondelete="CASCADE"), index=True)
    position: Mapped[int]
    shown_order: Mapped[str] = mapped_column(String(MAX_TUPLE_SIZE))
    seconds_on_item: Mapped[float | None]

    assignment: Mapped[Assignment] = relationship()
    tuple_item: Mapped[TupleItem] = relationship()


class BestWorstChoice(Base):
    """One answer on one criterion about one tuple by one annotator: the slot she chose as the best and the slot
    she chose as the worst. They differ (a check), both are members of the tuple (composite foreign keys into
    `tuple_member`) and the placement is in this very assignment (a composite foreign key into
    `assignment_tuple`); as for ratings and choices, one answer per (assignment, tuple, criterion) and one per
    (tuple, annotator, criterion) even across assignments."""

    __tablename__ = "best_worst_choice"
    __table_args__ = (
        UniqueConstraint("assignment_id", "tuple_item_id", "criterion"),
        UniqueConstraint("tuple_item_id", "annotator_id", "criterion"),
        CheckConstraint("best_slot <> worst_slot", name="best_is_not_worst"),
        ForeignKeyConstraint(["assignment_id", "tuple_item_id"],
                             ["assignment_tuple.assignment_id", "assignment_tuple.tuple_item_id"],
                             ondelete="CASCADE"),
        ForeignKeyConstraint(["tuple_item_id", "best_slot"], ["tuple_member.tuple_item_id", "tuple_member.slot"],
                             ondelete="CASCADE", name="fk_best_worst_choice_best_member"),
        ForeignKeyConstraint(["tuple_item_id", "worst_slot"], ["tuple_member.tuple_item_id", "tuple_member.slot"],
                             ondelete="CASCADE", name="fk_best_worst_choice_worst_member"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignment.id", ondelete="CASCADE"))
    # No index of its own: the unique key (tuple_item_id, annotator_id, criterion) leads with it.
    tuple_item_id: Mapped[int] = mapped_column(ForeignKey("tuple_item.id", ondelete="CASCADE"))
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotator.id"), index=True)
    criterion: Mapped[str] = mapped_column(String(32))
    best_slot: Mapped[int]
    worst_slot: Mapped[int]
    submitted_at: Mapped[datetime] = mapped_column(default=utcnow)
    submission_id: Mapped[str] = mapped_column(String(100))

    assignment: Mapped[Assignment] = relationship()
    tuple_item: Mapped[TupleItem] = relationship()
    annotator: Mapped[Annotator] = relationship()


BestWorstSetup.tables = (TupleItem, TupleMember, AssignmentTuple, BestWorstChoice)
