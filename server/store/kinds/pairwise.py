"""The pairwise (A/B) kind in the store: its setup and its tables.

A pairwise study shows one context with the responses of two systems side by side and asks, per criterion, which is
better (or a tie), as the A/B tests of MoEL (Lin et al., 2019) and MIME (Majumder et al., 2020) do. Its setup holds the
pairs of systems compared, the anchor ("ours") when the study file named one, whether ties are allowed, k, the distinct
annotators per (context, pair), and optionally a human share (model-assisted decisions: people judge a seeded sample of
the contexts, or with `sampling` "active" a sample drawn later with probabilities from the judges of differences'
disagreement, a judge of differences every context's pairs; the sample, and an active draw's probabilities, are recorded
per context in `study_context`, as a Likert study's are). Its tables: `pair_item` (two responses to one context, stored
once whatever the sides), `assignment_pair` (a placement: position and the side shown on the left) and `choice` (one
answer per pair, annotator and criterion, made about a placement of that very assignment). Stored under the study JSON's
`pairwise` key.

>>> setup = PairwiseSetup(pairs=(Pair("moel", "gold"),), anchor="moel")
>>> setup.pairs[0].label, setup.judgments_per_pair, setup.ties
('gold|moel', 3, True)
>>> PairwiseSetup.from_stored(ConfigReader("ab"), setup.stored()) == setup
True
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    CompoundSelect,
    ForeignKey,
    ForeignKeyConstraint,
    Select,
    String,
    UniqueConstraint,
    and_,
    case,
    or_,
    select,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from empeval.server.store.kinds import HumanShareDesign, StudySetup, register
from empeval.server.store.models import Annotator, Assignment, Base, Context, Response, Study, utcnow
from empeval.server.store.study_parts import (
    DEFAULT_CRITERIA,
    UNIFORM_SAMPLING,
    ConfigReader,
    Criterion,
)

# Rashkin et al.'s questions turned into a choice between responses A and B, as the A/B tests of MoEL and MIME put
# them: which response is better on the criterion, or a tie. The definitions are the Likert ones.
DEFAULT_PAIRWISE_CRITERIA = (
    Criterion("empathy", "Empathy",
              "Which response shows more understanding of the feelings of the person talking about their "
              "experience?", DEFAULT_CRITERIA[0].definition),
    Criterion("relevance", "Relevance",
              "Which response is more appropriate to the conversation and more on-topic?",
              DEFAULT_CRITERIA[1].definition),
    Criterion("fluency", "Fluency",
              "Which response is easier to understand, with more accurate language?",
              DEFAULT_CRITERIA[2].definition),
)


@dataclass(frozen=True)
class Pair:
    """Two systems compared in a pairwise study: `first` is the one whose wins are counted ("ours" in the
    papers' A/B tables, the anchor when one is given), `second` the one it is compared with."""

    first: str
    second: str

    @property
    def label(self) -> str:
        """The pair as the judgment table names it: both systems, sorted, joined by '|' (the same whichever
        system is "ours")."""
        return "|".join(sorted((self.first, self.second)))


@register
@dataclass(frozen=True)
class PairwiseSetup(HumanShareDesign, StudySetup):
    """What only a pairwise (A/B) study has.

    `pairs` is always the explicit list (the study file's `anchor` or all-pairs default is expanded when it is
    read); `judgments_per_pair` is k, the distinct annotators who judge each (context, pair); `ties` says
    whether a rater may answer "tie".
    """

    kind: ClassVar[str] = "pairwise"
    label: ClassVar[str] = "pairwise (A/B)"
    default_criteria: ClassVar[tuple[Criterion, ...]] = DEFAULT_PAIRWISE_CRITERIA
    judged: ClassVar[bool] = True  # a judge of differences compares its pairs

    @classmethod
    def judged_responses(cls, study_id: int) -> Select | CompoundSelect:
        """Both responses of each real pair item (with a human share, the pairs of every context)."""
        real = (PairItem.study_id == study_id, PairItem.is_control.is_(False))
        return select(PairItem.response_a_id).where(*real).union(select(PairItem.response_b_id).where(*real))

    @classmethod
    def compared_choices(cls, study_id: int) -> Select | None:
        """Each stored choice on a real pair item, +1.0 for the stored a, -1.0 for b, 0.0 for a tie: the screen
        side chosen turned into a response through the placement's shown_left."""
        a_chosen = or_(and_(Choice.choice == "left", AssignmentPair.shown_left == "a"),
                       and_(Choice.choice == "right", AssignmentPair.shown_left == "b"))
        value = case((Choice.choice == "tie", 0.0), (a_chosen, 1.0), else_=-1.0)
        return (select(Choice.criterion, PairItem.context_id, PairItem.response_a_id, PairItem.response_b_id, value)
                .join(AssignmentPair, (AssignmentPair.assignment_id == Choice.assignment_id)
                      & (AssignmentPair.pair_item_id == Choice.pair_item_id))
                .join(PairItem, PairItem.id == Choice.pair_item_id)
                .where(PairItem.study_id == study_id, PairItem.is_control.is_(False)))

    @classmethod
    def compared_pairs(cls, study_id: int) -> Select | None:
        """The real pair items, a the smaller response id as stored."""
        return (select(PairItem.context_id, PairItem.response_a_id, PairItem.response_b_id)
                .where(PairItem.study_id == study_id, PairItem.is_control.is_(False))
                .order_by(PairItem.context_id, PairItem.response_a_id, PairItem.response_b_id))

    pairs: tuple[Pair, ...] = ()
    anchor: str = ""  # the system every pair holds, when the study file named one
    ties: bool = True
    judgments_per_pair: int = 3
    # Model-assisted decisions: people judge the pairs of a seeded uniform sample of this share of the contexts, a
    # judge of differences compares the pairs of every context (None: people judge every context).
    human_share: float | None = None
    human_share_seed: int | None = None  # the sample's seed (the study file's default: the study's seed)
    # How the human share is drawn (study_parts.SAMPLINGS): "active" leaves the draw to `empeval study sample`
    # once judges of differences compared every context's pairs (tasks.kinds.likert_active).
    sampling: str = UNIFORM_SAMPLING

    @classmethod
    def from_stored(cls, reader: ConfigReader, stored: dict[str, Any]) -> PairwiseSetup:
        setup = reader.mapping(stored.get("pairwise", {}), "pairwise")
        raw_pairs = setup.get("pairs", [])
        if not isinstance(raw_pairs, list):
            raise reader.fail("pairwise.pairs", f"expected a list, got {raw_pairs!r}")
        pairs = []
        for i, entry in enumerate(raw_pairs):
            entry = reader.mapping(entry, f"pairwise.pairs[{i}]")
            pairs.append(Pair(first=reader.text(entry, "first", f"pairwise.pairs[{i}].first", ""),
                              second=reader.text(entry, "second", f"pairwise.pairs[{i}].second", "")))
        defaults = cls()
        return cls(
            pairs=tuple(pairs), anchor=reader.text(setup, "anchor", "pairwise.anchor", defaults.anchor),
            ties=reader.boolean(setup, "ties", "pairwise.ties", defaults.ties),
            judgments_per_pair=reader.integer(setup, "judgments_per_pair", "pairwise.judgments_per_pair",
                                              defaults.judgments_per_pair),
            human_share=reader.number(setup, "human_share", "pairwise.human_share", None),
            human_share_seed=reader.integer(setup, "human_share_seed", "pairwise.human_share_seed", None),
            sampling=reader.text(setup, "sampling", "pairwise.sampling", UNIFORM_SAMPLING))

    def stored(self) -> dict[str, Any]:
        stored: dict[str, Any] = {"pairs": [{"first": p.first, "second": p.second} for p in self.pairs],
                                  "anchor": self.anchor, "ties": self.ties,
                                  "judgments_per_pair": self.judgments_per_pair}
        if self.human_share is not None:  # a study without one is stored as before
            stored["human_share"] = self.human_share
        if self.human_share_seed is not None:
            stored["human_share_seed"] = self.human_share_seed
        if self.sampling != UNIFORM_SAMPLING:
            stored["sampling"] = self.sampling
        return {"pairwise": stored}


class PairItem(Base):
    """Two systems' responses to one context, compared in a pairwise (A/B) study.

    The pair is stored once, whatever the sides: `response_a_id` < `response_b_id`; which of the two a rater
    sees on the left is logged per placement (AssignmentPair.shown_left). Both composite foreign keys go
    through `context_id`, so both responses answer this context (the context the hand-out records as seen).
    A control pair holds a control system's response on `control_side`, built to lose on `control_target`
    (the one criterion it is scored on).
    """

    __tablename__ = "pair_item"
    __table_args__ = (
        UniqueConstraint("study_id", "response_a_id", "response_b_id"),
        CheckConstraint("response_a_id < response_b_id", name="responses_ordered"),
        CheckConstraint("control_side IN ('a', 'b')", name="control_side_known"),
        CheckConstraint("(is_control AND control_target IS NOT NULL AND control_side IS NOT NULL) OR "
                        "(NOT is_control AND control_target IS NULL AND control_side IS NULL)",
                        name="control_has_target_and_side"),
        ForeignKeyConstraint(["response_a_id", "context_id"], ["response.id", "response.context_id"],
                             ondelete="RESTRICT"),
        ForeignKeyConstraint(["response_b_id", "context_id"], ["response.id", "response.context_id"],
                             ondelete="RESTRICT"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id", ondelete="CASCADE"), index=True)
    context_id: Mapped[int] = mapped_column(ForeignKey("context.id", ondelete="RESTRICT"), index=True)
    response_a_id: Mapped[int]
    response_b_id: Mapped[int]
    is_control: Mapped[bool] = mapped_column(Boolean, default=False)
    control_target: Mapped[str | None] = mapped_column(String(32))
    control_side: Mapped[str | None] = mapped_column(String(1))
    design: Mapped[dict[str, Any]] = mapped_column(default=dict)

    study: Mapped[Study] = relationship()
    context: Mapped[Context] = relationship()
    response_a: Mapped[Response] = relationship(
        primaryjoin="Response.id == PairItem.response_a_id", foreign_keys="PairItem.response_a_id", viewonly=True)
    response_b: Mapped[Response] = relationship(
        primaryjoin="Response.id == PairItem.response_b_id", foreign_keys="PairItem.response_b_id", viewonly=True)


class AssignmentPair(Base):
    """Which pair item sits at which position of an assignment, and which of its responses is shown on the left
    (as A): 'a' or 'b', as the design counterbalanced it. An expiry copy must copy `shown_left` too."""

    __tablename__ = "assignment_pair"
    __table_args__ = (
        UniqueConstraint("assignment_id", "pair_item_id"),
        UniqueConstraint("assignment_id", "position"),
        CheckConstraint("position >= 0", name="position_nonnegative"),
        CheckConstraint("shown_left IN ('a', 'b')", name="shown_left_known"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignment.id", ondelete="CASCADE"))
    pair_item_id: Mapped[int] = mapped_column(ForeignKey("pair_item.id", ondelete="CASCADE"), index=True)
    position: Mapped[int]
    shown_left: Mapped[str] = mapped_column(String(1))
    seconds_on_item: Mapped[float | None]

    assignment: Mapped[Assignment] = relationship()
    pair_item: Mapped[PairItem] = relationship()


class Choice(Base):
    """One answer on one criterion about one pair item by one annotator: the side chosen as it was shown to
    her ('left' or 'right') or 'tie'. The system it means follows from the placement's `shown_left`; the
    composite foreign key makes sure that placement is in this very assignment. As for ratings, two keys make
    double counting impossible: one choice per (assignment, pair item, criterion) and one per (pair item,
    annotator, criterion) even across assignments. Whether the study allows ties is checked on submission."""

    __tablename__ = "choice"
    __table_args__ = (
        UniqueConstraint("assignment_id", "pair_item_id", "criterion"),
        UniqueConstraint("pair_item_id", "annotator_id", "criterion"),
        CheckConstraint("choice IN ('left', 'right', 'tie')", name="choice_known"),
        ForeignKeyConstraint(["assignment_id", "pair_item_id"],
                             ["assignment_pair.assignment_id", "assignment_pair.pair_item_id"], ondelete="CASCADE"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignment.id", ondelete="CASCADE"))
    # No index of their own, as for Rating (migration 0009).
    pair_item_id: Mapped[int] = mapped_column(ForeignKey("pair_item.id", ondelete="CASCADE"))
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotator.id"), index=True)
    criterion: Mapped[str] = mapped_column(String(32))
    choice: Mapped[str] = mapped_column(String(5))
    submitted_at: Mapped[datetime] = mapped_column(default=utcnow)
    submission_id: Mapped[str] = mapped_column(String(100))

    assignment: Mapped[Assignment] = relationship()
    pair_item: Mapped[PairItem] = relationship()
    annotator: Mapped[Annotator] = relationship()


PairwiseSetup.tables = (PairItem, AssignmentPair, Choice)
