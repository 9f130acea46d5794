"""The Likert kind in the store: its setup and its tables.

A Likert study (Rashkin et al., ACL 2019) shows one response to a dialogue context and asks for a score on each
criterion on a scale (1-5 by default). Its setup holds how many distinct annotators rate each response (k), the
scale, and for model-assisted evaluation the share of contexts people rate (judges score every item). Its tables:
`study_item` (a response as rated in one study; controls flagged with the criterion they are built to fail),
`study_context` (which contexts people rate under a human share), `assignment_item` (which item sits at which
position of an assignment) and `rating` (one score per item, annotator and criterion, never twice). Stored as
studies always were: `design.ratings_per_response`, `design.human_share(_seed)`, `design.sampling` (kept only when
"active") and `scale` in the study's JSON.

>>> setup = LikertSetup(ratings_per_response=2, scale=Scale(min=1, max=7, labels=tuple("1234567")))
>>> LikertSetup.from_stored(ConfigReader("s"), setup.stored()) == setup
True
>>> setup.stored()["design"]
{'ratings_per_response': 2}
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import Boolean, CheckConstraint, CompoundSelect, ForeignKey, Select, String, UniqueConstraint, select
from sqlalchemy.orm import Mapped, mapped_column, relationship

from empeval.server.store.kinds import HumanShareDesign, StudySetup, register
from empeval.server.store.models import Annotator, Assignment, Base, Response, Study, utcnow
from empeval.server.store.study_parts import (  # noqa: F401 - the sampling names, where they were first
    ACTIVE_SAMPLING,
    DEFAULT_CRITERIA,
    SAMPLINGS,
    UNIFORM_SAMPLING,
    ConfigReader,
    Criterion,
)

DEFAULT_SCALE_LABELS = ("1 - Not at all", "2 - Slightly", "3 - Moderately", "4 - Mostly", "5 - Completely")



@dataclass(frozen=True)
class Scale:
    min: int = 1
    max: int = 5
    labels: tuple[str, ...] = DEFAULT_SCALE_LABELS


@register
@dataclass(frozen=True)
class LikertSetup(HumanShareDesign, StudySetup):
    """What only a Likert study has: k distinct annotators per response, the scale, and optionally the human share
    of model-assisted evaluation (people rate a seeded uniform sample of `human_share` of the contexts, every
    system's response on each; judges score all items; None = people rate every context). With `sampling`
    "active" the share is the expected share of an active draw made after the judges scored every item."""

    kind: ClassVar[str] = "likert"
    label: ClassVar[str] = "Likert"
    default_criteria: ClassVar[tuple[Criterion, ...]] = DEFAULT_CRITERIA
    judged: ClassVar[bool] = True

    @classmethod
    def judged_responses(cls, study_id: int) -> Select | CompoundSelect:
        """The responses of the study's real items."""
        return select(StudyItem.response_id).where(StudyItem.study_id == study_id, StudyItem.is_control.is_(False))

    ratings_per_response: int = 3  # k distinct annotators per response
    scale: Scale = field(default_factory=Scale)
    human_share: float | None = None
    human_share_seed: int | None = None  # the sample's seed (the study file's default: the study's seed)
    sampling: str = UNIFORM_SAMPLING  # how the human share is drawn: one of SAMPLINGS

    @classmethod
    def from_stored(cls, reader: ConfigReader, stored: dict[str, Any]) -> LikertSetup:
        design = reader.mapping(stored.get("design", {}), "design")
        scale = reader.mapping(stored.get("scale", {}), "scale")
        defaults, default_scale = cls(), Scale()
        # Read as stored, as the other fields are: the study file's parser (tasks.kinds.likert) checks the value.
        sampling = reader.text(design, "sampling", "design.sampling", UNIFORM_SAMPLING)
        return cls(
            ratings_per_response=reader.integer(design, "ratings_per_response", "design.ratings_per_response",
                                                defaults.ratings_per_response),
            scale=Scale(min=reader.integer(scale, "min", "scale.min", default_scale.min),
                        max=reader.integer(scale, "max", "scale.max", default_scale.max),
                        labels=reader.texts(scale, "labels", "scale.labels", default_scale.labels)),
            human_share=reader.number(design, "human_share", "design.human_share", None),
            human_share_seed=reader.integer(design, "human_share_seed", "design.human_share_seed", None),
            sampling=sampling)

    def stored(self) -> dict[str, Any]:
        design: dict[str, Any] = {"ratings_per_response": self.ratings_per_response}
        # Left out while None, as before model-assisted evaluation existed; each kept when set, so nothing is lost.
        if self.human_share is not None:
            design["human_share"] = self.human_share
        if self.human_share_seed is not None:
            design["human_share_seed"] = self.human_share_seed
        if self.sampling != UNIFORM_SAMPLING:
            design["sampling"] = self.sampling
        scale = {"min": self.scale.min, "max": self.scale.max, "labels": list(self.scale.labels)}
        return {"design": design, "scale": scale}


class StudyItem(Base):
    """A response as a rater sees it in one study; controls are flagged with the criterion they target."""

    __tablename__ = "study_item"
    __table_args__ = (
        UniqueConstraint("study_id", "response_id"),
        CheckConstraint("NOT is_control OR control_target IS NOT NULL", name="control_has_target"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id", ondelete="CASCADE"))
    response_id: Mapped[int] = mapped_column(ForeignKey("response.id", ondelete="RESTRICT"))
    is_control: Mapped[bool] = mapped_column(Boolean, default=False)
    control_target: Mapped[str | None] = mapped_column(String(32))
    design: Mapped[dict[str, Any]] = mapped_column(default=dict)

    study: Mapped[Study] = relationship()
    response: Mapped[Response] = relationship()


class StudyContext(Base):
    """A context of a Likert study, and whether people rate it: `human_rated` is false for a context of the
    model-assisted design (LikertSetup.human_share) that only the judges score, so the analysis can tell the
    human-rated-by-design contexts from the judge-only ones (whether or not ratings came in) and a reviewer can
    check the seeded draw (the share and its seed are in the study's configuration). Written with the study
    (migration 0008); studies created before have no rows."""

    __tablename__ = "study_context"

    study_id: Mapped[int] = mapped_column(ForeignKey("study.id", ondelete="CASCADE"), primary_key=True)
    context_id: Mapped[int] = mapped_column(ForeignKey("context.id", ondelete="RESTRICT"), primary_key=True,
                                            index=True)
    human_rated: Mapped[bool] = mapped_column(Boolean)
    # The probability with which the design drew this context for human rating, recorded at the draw (active
    # sampling; migration 0014): the estimator weights a human-rated context by its inverse. NULL for a uniform
    # fixed-size sample.
    inclusion_probability: Mapped[float | None]


class AssignmentItem(Base):
    """Which item sits at which position of an assignment (kept for order-effect analysis)."""

    __tablename__ = "assignment_item"
    __table_args__ = (
        UniqueConstraint("assignment_id", "item_id"),
        UniqueConstraint("assignment_id", "position"),
        CheckConstraint("position >= 0", name="position_nonnegative"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignment.id", ondelete="CASCADE"))
    item_id: Mapped[int] = mapped_column(ForeignKey("study_item.id", ondelete="CASCADE"), index=True)
    position: Mapped[int]
    seconds_on_item: Mapped[float | None]

    assignment: Mapped[Assignment] = relationship()
    item: Mapped[StudyItem] = relationship()


class Rating(Base):
    """One score on one criterion for one item by one annotator.

    Two constraints make double counting impossible: one rating per (assignment, item, criterion), and
    one per (item, annotator, criterion) even across assignments.
    """

    __tablename__ = "rating"
    __table_args__ = (
        UniqueConstraint("assignment_id", "item_id", "criterion"),
        UniqueConstraint("item_id", "annotator_id", "criterion"),
        CheckConstraint("score >= 0", name="score_nonnegative"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignment.id", ondelete="CASCADE"))
    # item_id and submission_id have no index of their own: the unique key (item_id, annotator_id, criterion)
    # serves lookups by item, no query looks a rating up by submission id, and every index is written 30 times
    # per submission (migration 0009).
    item_id: Mapped[int] = mapped_column(ForeignKey("study_item.id", ondelete="CASCADE"))
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotator.id"), index=True)
    criterion: Mapped[str] = mapped_column(String(32))
    score: Mapped[int]
    submitted_at: Mapped[datetime] = mapped_column(default=utcnow)
    submission_id: Mapped[str] = mapped_column(String(100))

    assignment: Mapped[Assignment] = relationship()
    item: Mapped[StudyItem] = relationship()
    annotator: Mapped[Annotator] = relationship()


LikertSetup.tables = (StudyItem, StudyContext, AssignmentItem, Rating)
