"""Study kinds as the annotation room knows them: what a claim hands out, how a submission is checked and stored,
the export, and what the dashboard reads, for each kind, in one registry.

The shared code (the hand-out's claim and expiry in handout.py, the submission lifecycle in submission.py, the
export, the dashboard's readers) never branches on a kind: it asks the study's kind part, a subclass of
`AnnotationKind` registered here by server/annotation/kinds/registered.py. A kind's part names its tables as SQL
text (the hot path's statements are built from them once per kind, see hot_sql) and supplies the functions
below; tests/test_kinds_complete.py fails, naming the kind and the part, when one is missing.

Every kind's placements are rows of one table per kind, `(assignment_id, <item column>, position,
seconds_on_item, ...)`: an assignment holds its units (items, pairs, tuples) at positions, and the page measures
the seconds spent on each.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from empeval.server.errors import BadInput
from empeval.server.store.kinds import UnknownStudyKind
from empeval.server.store.models import Study
from empeval.server.store.study_config import StudyConfig

if TYPE_CHECKING:
    from empeval.server.annotation.decision_state import DecisionLook


@dataclass
class BrowsedItem:
    """One unit (an item, a pair, a tuple) as the dashboard's item browser shows it: its conversation, each
    response with the system that wrote it (for the researcher's eyes only: raters never see it), and per
    annotator and assignment her answer on each criterion (a score; the system preferred, or "tie"; ...) and the
    comment she left on that assignment (None when none)."""

    item_id: int
    context_id: int
    context: list[dict[str, str]]
    responses: list[tuple[str, str]]  # (system, text), in the order the kind shows them
    is_control: bool
    control_target: str | None
    ratings: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ItemPage:
    page: int
    pages: int
    total: int
    items: list[BrowsedItem]
    rated_only: bool = False


class GoldChoice(NamedTuple):
    """One answer a question of a gold item offers (AnnotationKind.qualification_choices): the value an answer sends
    and stores, and the words the page shows it in."""

    value: int | str
    label: str


class AnnotationKind:
    """A study kind's part in the annotation room. Class attributes name its tables and words; the methods are
    what the shared code calls. A subclass sets every attribute and overrides every method (the base raises
    NotImplementedError naming the kind and the part)."""

    # The kind, as its store setup names it.
    name: ClassVar[str]
    # Words: a unit and its plural ("pair", "pairs"), what an answer to it is called on the dashboard ("judged"),
    # what a submission body lists its answers under ("judgments"), what a receipt counts ("choices") and what
    # the dashboard counts per annotator ("judgments").
    unit: ClassVar[str]
    units: ClassVar[str]
    answered: ClassVar[str]
    entries: ClassVar[str]
    counted: ClassVar[str]
    per_annotator: ClassVar[str]
    # Its tables as SQL names: the placements (assignment_id, <item column>, position, seconds_on_item, and the
    # placement columns an expiry copy keeps), the units and the answers (one row per unit, annotator, criterion).
    placement_table: ClassVar[str]
    item_column: ClassVar[str]
    placement_columns: ClassVar[tuple[str, ...]]
    item_table: ClassVar[str]
    answer_table: ClassVar[str]
    # SQL for the contexts an assignment holds (what the seen-context rule reads and writes): the FROM clause that
    # joins its placements to their contexts, the placements' assignment column and the context column.
    contexts_from: ClassVar[str]
    contexts_assignment: ClassVar[str]
    context_column: ClassVar[str]
    # The receipt, the export and the hand-out name what they count by these; the export's columns in order.
    export_columns: ClassVar[tuple[str, ...]]
    # The hooks with a default most kinds keep (tests/test_kinds_complete.py does not ask for them).
    optional_parts: ClassVar[frozenset[str]] = frozenset({"claims_per_annotator", "forget_unsubmitted",
                                                          "extra_exports", "qualification_choices",
                                                          "decision_look"})

    # --- what a claim hands out -------------------------------------------------------------------------------
    def payload(self, executor: Any, study: Any, assignment_id: int, status: str,
                expires_at: datetime | None) -> dict[str, Any]:
        """What the task page shows of the assignment: text only, never a system's name or which unit is a
        control; the items read in one statement on `executor`."""
        raise self._missing("payload")

    def claims_per_annotator(self, config: StudyConfig) -> int | None:
        """The most assignments of the study one annotator may ever claim (a chat study's sessions per rater: she
        talks to each system at most once), or None for no bound beyond the study's other rules. Kept by the claim's
        own statement (hot_sql), which counts her assignments while her claims take turns."""
        return None

    def forget_unsubmitted(self, session: Session, assignment_id: int) -> None:
        """Remove what the kind keeps of an assignment's work before it is submitted (a chat's turns), when its
        claim is released and it goes back to the pool as it was. Kinds that keep nothing before the submission
        have nothing to do."""

    def qualification_choices(self, config: StudyConfig) -> tuple[GoldChoice, ...]:
        """A kind with a qualification (TaskKind.qualification_items): the answers each question of a gold item offers,
        in the order shown and in the words of the kind's own page (a Likert study's scale points; A, B and a tie; the
        two listeners): what the qualification page offers and what an answer is checked against
        (server/annotation/qualification.py)."""
        raise self._missing("qualification_choices")

    # --- a submission -----------------------------------------------------------------------------------------
    def expected(self, executor: Any, assignment_id: int, config: StudyConfig) -> Any:
        """What this assignment's submission must hold (its unit ids in order, the criteria, the answers allowed):
        read in one statement."""
        raise self._missing("expected")

    def validate(self, entries: Any, expected: Any) -> Any:
        """The submission's entries (the list under `entries`) checked against `expected`; BadInput saying what was
        wrong, naming the entry, the unit and the criterion. Returns what `store` writes."""
        raise self._missing("validate")

    def store(self, executor: Any, assignment_id: int, annotator_id: int, submission_id: str, answers: Any,
              now: datetime) -> int:
        """Write the answers and the seconds on each unit (in the caller's write transaction); how many answers
        (rows of the answer table) were stored."""
        raise self._missing("store")

    def entries_schema(self, expected: Any | None = None) -> dict[str, Any]:
        """The JSON schema of the entries list, from the same declarations `validate` reads: for one assignment
        when `expected` is given, else the generic one of the OpenAPI document."""
        raise self._missing("entries_schema")

    # --- the export -------------------------------------------------------------------------------------------
    def export_rows(self, engine: Engine, study: str) -> list[dict[str, Any]]:
        """Every answer of the study as the kind's tidy table (its columns: `export_columns`), in assignment and
        position order."""
        raise self._missing("export_rows")

    def extra_exports(self, engine: Engine, study: str) -> dict[str, tuple[tuple[str, ...], list[dict[str, Any]]]]:
        """The kind's further tidy tables beside its export (a chat study's conversations, turns and turn
        annotations): name -> (columns, rows). Most kinds have one table and none further."""
        return {}

    def report_meta(self, config: StudyConfig) -> dict[str, Any]:
        """What the kind's report needs of the study's configuration beyond what every study has (k, ties, the
        anchor, ...), as the analysis part of the kind reads it (ReportRequest.meta)."""
        raise self._missing("report_meta")

    # --- the dashboard ----------------------------------------------------------------------------------------
    def progress(self, session: Session, study: Study) -> dict[str, Any]:
        """What the dashboard counts beside the assignments: answers in all and per annotator, units covered, k,
        and whatever the kind adds (alpha so far for Likert); counted in SQL, not from the export. Among its keys,
        `summary` (a sentence for the pages) and `per_annotator` (pseudonym -> count of `per_annotator` words)."""
        raise self._missing("progress")

    def item_page(self, session: Session, study: Study, page: int, per_page: int, rated_only: bool) -> ItemPage:
        """A page of the study's units for the item browser (`rated_only`: those answered at least once)."""
        raise self._missing("item_page")

    def decision_look(self) -> DecisionLook | None:
        """How a look at a study's pre-registered [decisions] reads this kind's answers
        (server/annotation/decisions.py); None for a kind whose decisions are not computed (its study file is
        refused the table: tasks/decisions_file.py)."""
        return None

    def _missing(self, part: str) -> NotImplementedError:
        return NotImplementedError(f"study kind {self.name!r} supplies no {part!r} in the annotation room")


_KINDS: dict[str, AnnotationKind] = {}
Kind = TypeVar("Kind", bound=type[AnnotationKind])


def register(kind: Kind) -> Kind:
    """Register a kind's annotation part (a class decorator; one instance is kept)."""
    if kind.name in _KINDS and type(_KINDS[kind.name]) is not kind:
        raise ValueError(f"study kind {kind.name!r} has two annotation parts")
    _KINDS[kind.name] = kind()
    return kind


def annotation_kind(name: str, *, unknown: Callable[[str], BadInput] | None = None) -> AnnotationKind:
    """The annotation part of the kind `name`; UnknownStudyKind listing the registered kinds when there is none."""
    found = _KINDS.get(name)
    if found is None:
        message = f"unknown study kind {name!r}; the registered kinds are {', '.join(map(repr, _KINDS))}"
        raise (unknown or UnknownStudyKind)(message)
    return found


def annotation_kinds() -> tuple[AnnotationKind, ...]:
    """Every registered kind's annotation part."""
    return tuple(_KINDS.values())
