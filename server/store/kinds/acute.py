"""The ACUTE-Eval kind in the store: its setup and its tables.

ACUTE-Eval (Li, Weston & Roller, 2019, "ACUTE-EVAL: Improved Dialogue Evaluation with Optimized Questions and
Multi-turn Comparisons"): a third-party rater reads two whole conversations side by side and answers each question
by picking the speaker's partner on the left or the one on the right, with a short justification. Here the
conversations are a chat study's (server/store/kinds/chat.py): talks between a rater and a system that ended and
were submitted, two different partners per pair, on the same prompt wherever the chat study has such a pair (it
crosses prompts with partners, so it usually does). A control pair puts a real system's conversation beside a
control partner's, which a careful rater judges in favour of the real system on the control's target.

Its setup: the chat study (by name; the study's `compare_with` names it as well, so the hand-out's seen rule and
the report link the two), k (distinct raters per pair of conversations), whether a pair must share its prompt, the
question presets the study asks (its criteria) and the bounds of a justification. Its tables: `acute_pair` (a unit:
two conversations, each a placement of the chat study, `assignment_conversation`, stored once whatever the sides,
the lower placement id as 'a', with their prompts, which the seen rule records), `assignment_acute_pair` (a
placement: position and the side shown on the left) and `acute_choice` (one answer per pair, annotator and
question: the screen side chosen and why). Stored under the study JSON's `acute` key.

>>> setup = AcuteSetup(chat_study="talk", questions=("empathy", "human"))
>>> [c.key for c in setup.asked()], setup.judgments_per_pair, setup.min_justification
(['empathy', 'human'], 3, 10)
>>> AcuteSetup.from_stored(ConfigReader("acute"), setup.stored()) == setup
True
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import Boolean, CheckConstraint, ForeignKey, ForeignKeyConstraint, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from empeval.server.store.kinds import StudySetup, register
from empeval.server.store.models import Annotator, Assignment, Base, Study, utcnow
from empeval.server.store.study_parts import DEFAULT_CRITERIA, ConfigReader, Criterion

# ACUTE-Eval's questions adapted to empathy (the first two, asked by default), and two of its own as the paper words
# them (engagingness and humanness), each a preset a study file may choose by key.
QUESTION_PRESETS: dict[str, Criterion] = {
    "empathy": Criterion("empathy", "Empathy", "Which listener understood the speaker's feelings better?",
                         DEFAULT_CRITERIA[0].definition),
    "talk_to": Criterion("talk_to", "Talk to", "Who would you rather talk to about something that upset you?",
                         "Which listener you would choose to confide in: someone who listens, understands and "
                         "answers with care."),
    "engaging": Criterion("engaging", "Engagingness", "Who would you prefer to talk to for a long conversation?",
                          "ACUTE-Eval's engagingness question (Li et al. 2019)."),
    "human": Criterion("human", "Humanness", "Which speaker sounds more human?",
                       "ACUTE-Eval's humanness question (Li et al. 2019), asked of the listeners."),
}
DEFAULT_QUESTIONS = ("empathy", "talk_to")
DEFAULT_ACUTE_CRITERIA = tuple(QUESTION_PRESETS[key] for key in DEFAULT_QUESTIONS)
# The bounds of a justification a study file may set (tasks/kinds/acute.py); the store's check keeps "not empty".
MIN_JUSTIFICATION, MAX_JUSTIFICATION = 10, 500
JUSTIFICATION_LIMIT = 2000


@register
@dataclass(frozen=True)
class AcuteSetup(StudySetup):
    """What only an ACUTE-Eval study has (see the module docstring). `questions` are the preset keys it asks when its
    study file gives no [[criteria]] of its own."""

    kind: ClassVar[str] = "acute"
    label: ClassVar[str] = "ACUTE-Eval (conversation pairs)"
    default_criteria: ClassVar[tuple[Criterion, ...]] = DEFAULT_ACUTE_CRITERIA

    chat_study: str = ""
    judgments_per_pair: int = 3
    same_prompt_only: bool = False
    questions: tuple[str, ...] = DEFAULT_QUESTIONS
    min_justification: int = MIN_JUSTIFICATION
    max_justification: int = MAX_JUSTIFICATION

    def asked(self) -> tuple[Criterion, ...]:
        """The criteria of the chosen presets, in the order chosen (unknown keys left out)."""
        return tuple(QUESTION_PRESETS[key] for key in self.questions if key in QUESTION_PRESETS)

    @classmethod
    def from_stored(cls, reader: ConfigReader, stored: dict[str, Any]) -> AcuteSetup:
        setup = reader.mapping(stored.get("acute", {}), "acute")
        d = cls()
        return cls(
            chat_study=reader.text(setup, "chat_study", "acute.chat_study", d.chat_study),
            judgments_per_pair=reader.integer(setup, "judgments_per_pair", "acute.judgments_per_pair",
                                              d.judgments_per_pair),
            same_prompt_only=reader.boolean(setup, "same_prompt_only", "acute.same_prompt_only", d.same_prompt_only),
            questions=reader.texts(setup, "questions", "acute.questions", d.questions),
            min_justification=reader.integer(setup, "min_justification", "acute.min_justification",
                                             d.min_justification),
            max_justification=reader.integer(setup, "max_justification", "acute.max_justification",
                                             d.max_justification))

    def stored(self) -> dict[str, Any]:
        return {"acute": {"chat_study": self.chat_study, "judgments_per_pair": self.judgments_per_pair,
                          "same_prompt_only": self.same_prompt_only, "questions": list(self.questions),
                          "min_justification": self.min_justification,
                          "max_justification": self.max_justification}}


class AcutePair(Base):
    """Two conversations of a chat study compared in an ACUTE-Eval study: each a placement of the chat study
    (`assignment_conversation`: one talk of one rater with one partner), the lower id as 'a', with the prompt each was
    about (the contexts the hand-out records as seen; the same one when the pair shares its prompt). Which of the two
    a rater sees on the left is logged per placement (AssignmentAcutePair.shown_left). A control pair holds a control
    partner's conversation on `control_side`, built to lose on `control_target`."""

    __tablename__ = "acute_pair"
    __table_args__ = (
        UniqueConstraint("study_id", "conversation_a_id", "conversation_b_id"),
        CheckConstraint("conversation_a_id < conversation_b_id", name="conversations_ordered"),
        CheckConstraint("control_side IN ('a', 'b')", name="control_side_known"),
        CheckConstraint("(is_control AND control_target IS NOT NULL AND control_side IS NOT NULL) OR "
                        "(NOT is_control AND control_target IS NULL AND control_side IS NULL)",
                        name="control_has_target_and_side"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id", ondelete="CASCADE"), index=True)
    conversation_a_id: Mapped[int] = mapped_column(ForeignKey("assignment_conversation.id", ondelete="RESTRICT"),
                                                   index=True)
    conversation_b_id: Mapped[int] = mapped_column(ForeignKey("assignment_conversation.id", ondelete="RESTRICT"),
                                                   index=True)
    context_a_id: Mapped[int] = mapped_column(ForeignKey("context.id", ondelete="RESTRICT"))
    context_b_id: Mapped[int] = mapped_column(ForeignKey("context.id", ondelete="RESTRICT"))
    is_control: Mapped[bool] = mapped_column(Boolean, default=False)
    control_target: Mapped[str | None] = mapped_column(String(32))
    control_side: Mapped[str | None] = mapped_column(String(1))
    design: Mapped[dict[str, Any]] = mapped_column(default=dict)

    study: Mapped[Study] = relationship()


class AssignmentAcutePair(Base):
    """Which pair of conversations sits at which position of an assignment, and which of them is shown on the left:
    'a' or 'b', as the design balanced it. An expiry copy keeps the side."""

    __tablename__ = "assignment_acute_pair"
    __table_args__ = (
        UniqueConstraint("assignment_id", "acute_pair_id"),
        UniqueConstraint("assignment_id", "position"),
        CheckConstraint("position >= 0", name="position_nonnegative"),
        CheckConstraint("shown_left IN ('a', 'b')", name="shown_left_known"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignment.id", ondelete="CASCADE"))
    acute_pair_id: Mapped[int] = mapped_column(ForeignKey("acute_pair.id", ondelete="CASCADE"), index=True)
    position: Mapped[int]
    shown_left: Mapped[str] = mapped_column(String(1))
    seconds_on_item: Mapped[float | None]

    assignment: Mapped[Assignment] = relationship()
    acute_pair: Mapped[AcutePair] = relationship()


class AcuteChoice(Base):
    """One answer to one question about one pair of conversations by one annotator: the screen side whose partner she
    picked ('left' or 'right'; ACUTE-Eval has no tie) and her justification. As for the A/B kind's choices, one per
    (assignment, pair, question) and one per (pair, annotator, question) even across assignments; the composite
    foreign key ties it to a placement of this very assignment. The justification's bounds are the study's, checked
    on submission; the store refuses an empty one."""

    __tablename__ = "acute_choice"
    __table_args__ = (
        UniqueConstraint("assignment_id", "acute_pair_id", "criterion"),
        UniqueConstraint("acute_pair_id", "annotator_id", "criterion"),
        CheckConstraint("choice IN ('left', 'right')", name="choice_known"),
        CheckConstraint("length(justification) > 0", name="justification_given"),
        ForeignKeyConstraint(["assignment_id", "acute_pair_id"],
                             ["assignment_acute_pair.assignment_id", "assignment_acute_pair.acute_pair_id"],
                             ondelete="CASCADE"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignment.id", ondelete="CASCADE"))
    # No index of their own, as for the A/B kind's choices (migration 0009).
    acute_pair_id: Mapped[int] = mapped_column(ForeignKey("acute_pair.id", ondelete="CASCADE"))
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotator.id"), index=True)
    criterion: Mapped[str] = mapped_column(String(32))
    choice: Mapped[str] = mapped_column(String(5))
    justification: Mapped[str] = mapped_column(Text)
    submitted_at: Mapped[datetime] = mapped_column(default=utcnow)
    submission_id: Mapped[str] = mapped_column(String(100))

    assignment: Mapped[Assignment] = relationship()
    annotator: Mapped[Annotator] = relationship()


AcuteSetup.tables = (AcutePair, AssignmentAcutePair, AcuteChoice)
