"""Study kinds as the tasks room knows them: what a study file of the kind may say, how a study of it is designed
and written (what each assignment holds), how simulated raters answer it, what a crowd job of it lists and checks,
and which page of the task UI shows it; in one registry.

The shared code (the study-file parser in study_file.py, study creation in study_create.py, the simulated crowd in
simulate.py, the crowd jobs in crowd/) asks the study's kind part, a subclass of `TaskKind` registered by
tasks/kinds/registered.py, and never branches on a kind's name. A subclass sets every attribute and overrides
every method; the base raises NotImplementedError naming the kind and the part, and tests/test_kinds_complete.py
fails, naming them, when one is missing.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from empeval.server.errors import BadInput
from empeval.server.store.kinds import StudySetup, UnknownStudyKind

if TYPE_CHECKING:
    import random

    from sqlalchemy import Engine
    from sqlalchemy.orm import Session

    from empeval.server.store.models import Study
    from empeval.server.store.qualification import GoldItem, GoldRow
    from empeval.server.store.study_config import StudyConfig
    from empeval.server.store.study_parts import Criterion, Design
    from empeval.tasks.crowd.contract import Control
    from empeval.tasks.decisions_file import DecisionTerms
    from empeval.tasks.kind_parts import ChosenContexts, StudyFileParts, StudyFileReader, StudySummary
    from empeval.tasks.simulate import CrowdModel, Rater

# What a simulated rater sends for one assignment: (rater, her random stream, the assignment's payload) -> the
# submission body without its submission id.
Answer = Callable[["Rater", "random.Random", dict], dict]


class TaskKind:
    """A study kind's part in the tasks room."""

    # The kind, and its store setup (the class the study file's fields are parsed into).
    name: ClassVar[str]
    setup: ClassVar[type[StudySetup]]
    # The fields of the shared study-file sections that only this kind reads ({"design": {"ties", ...}}), and the
    # top-level sections only it has ({"scale"}); any other kind's field in a study of this kind is refused.
    fields: ClassVar[dict[str, frozenset[str]]]
    sections: ClassVar[frozenset[str]] = frozenset()
    # What to tell the author of a study of this kind who used a field of another kind, by the field's path, where
    # "is for <kind> studies only" would not say enough ({"scale": "a pairwise study has no scale: ..."}).
    foreign_hints: ClassVar[dict[str, str]] = {}
    # What a crowd job's listing and preview page say (title, description, tags), instead of the Likert defaults
    # of the crowd contract.
    listing: ClassVar[dict[str, Any]]
    # The page of the task UI that shows the kind: its name in tasks/webapp/src/kinds/index.js.
    ui_page: ClassVar[str]
    # Whether the kind's systems answer live while raters work (the backend serves them: a chat study) rather than
    # with responses stored beforehand: creating a study then needs no stored response, only the prompts (each
    # dialogue's first turn) and the systems configured (`check_live_systems`).
    live_systems: ClassVar[bool] = False
    # Whether the kind finds the contexts it is made over itself (`study_contexts`: an ACUTE study's are the prompts of
    # its chat study's finished conversations) rather than among the split's: creating a study then needs no stored
    # response, and a study file may give no [contexts] count or ids (every context the kind finds).
    own_contexts: ClassVar[bool] = False
    # The hooks below with a default most kinds keep (tests/test_kinds_complete.py does not ask for them).
    optional_parts: ClassVar[frozenset[str]] = frozenset({"check_live_systems", "criteria_asked", "linked_study",
                                                          "study_contexts", "qualification_items",
                                                          "qualification_rows", "decision_terms", "write_drawn"})

    # --- the study file ---------------------------------------------------------------------------------------
    def parse(self, reader: StudyFileReader, data: dict[str, Any], parts: StudyFileParts) -> tuple[StudySetup,
                                                                                                  Design]:
        """The kind's setup from the study file (`data`, the parsed TOML; `parts`, the shared parts already
        validated), and the design, which the kind may adjust (a pairwise study's even pair slots); StudyFileError,
        naming the field, for what is wrong."""
        raise self._missing("parse")

    def criteria_asked(self, setup: StudySetup) -> tuple[Criterion, ...]:
        """The criteria a study of this kind asks when its file lists no [[criteria]]: the setup's defaults, or the
        ones its file chose otherwise (an ACUTE study's question presets)."""
        return setup.default_criteria

    def linked_study(self, setup: StudySetup) -> str:
        """The study a study of this kind is linked to by its nature when its file names none in compare_with (an
        ACUTE study's chat study), or ""."""
        return ""

    def decision_terms(self, setup: StudySetup, systems: tuple[str, ...]) -> DecisionTerms | None:
        """What a study file's [decisions] table (tasks/decisions_file.py) may compare in a study of this kind, whose
        monitoring (server/annotation/decisions.py) reads its answers: the system pairs it judges and the unit of the
        margin; None for a kind whose answers no monitoring reads (its study file is refused the table)."""
        return None

    def qualification_items(self, reader: StudyFileReader, entries: list[Any], setup: StudySetup,
                            criteria: tuple[Criterion, ...], controls: tuple[str, ...]) -> tuple[GoldItem, ...]:
        """A kind with a qualification (tasks/qualification.py): the study file's [[qualification.items]] (`entries`,
        each checked to be a table) as gold items in the kind's terms, checked against the study's setup, criteria
        and controls; StudyFileError naming the item and the field. The kinds that do not override it have no
        qualification, and a study file of theirs with one is refused (has_qualification)."""
        raise self._missing("qualification_items")

    def qualification_rows(self, session: Session, spec: StudyConfig) -> list[GoldRow]:
        """For a kind with a qualification: what each gold item of `spec.qualification` shows and accepts, in order,
        as the study's creation writes them (in its transaction); StudySetupError when the store lacks what an item
        needs (an ACUTE item's conversations)."""
        raise self._missing("qualification_rows")

    # --- creating a study -------------------------------------------------------------------------------------
    def check_live_systems(self, spec: StudyConfig) -> None:
        """For a kind with `live_systems`: StudySetupError naming the first system the backend cannot serve."""
        if self.live_systems:
            raise self._missing("check_live_systems")

    def study_contexts(self, session: Session, spec: StudyConfig) -> dict[str, int]:
        """For a kind with `own_contexts`: the contexts a study of it may be made over, key (conv_id#n_turns) -> id;
        StudySetupError saying what is missing in the store."""
        if self.own_contexts:
            raise self._missing("study_contexts")
        return {}

    def system_role(self, spec: StudyConfig, system: str) -> str:
        """Where `system` sits in the study's design, for messages about it (" (compared in the pair a vs b)"), or ""
        when the kind has nothing to add to its name."""
        raise self._missing("system_role")

    def create(self, session: Session, spec: StudyConfig, study: Study, chosen: ChosenContexts) -> StudySummary:
        """Plan the study's assignments over the chosen contexts and write its units and placements (in the caller's
        transaction, `study` already flushed); StudySetupError when the store lacks what the design needs."""
        raise self._missing("create")

    def write_drawn(self, session: Session, study: Study, drawn: set[int]) -> int:
        """For a kind whose human share may be drawn actively (design.sampling = "active"; tasks.kinds.likert_active
        makes the draw): write the assignments of the `drawn` contexts' units, controls included, in the draw's
        transaction, so that the hand-out serves those contexts only; the number of assignments written. BadInput
        (nothing written) when the drawn contexts cannot hold the design."""
        raise self._missing("write_drawn")

    # --- simulated raters -------------------------------------------------------------------------------------
    def simulated_answers(self, engine: Engine, study: str, model: CrowdModel, seed: int) -> Answer:
        """How the simulated crowd answers an assignment of `study`: the hidden truth (which system wrote what)
        read from the store once, and the rater model of simulate.py applied to it."""
        raise self._missing("simulated_answers")

    # --- crowd jobs -------------------------------------------------------------------------------------------
    def crowd_controls(self, session: Session, assignment_id: int) -> tuple[list[int], list[Control]]:
        """The contexts of an assignment put on the crowd as one unit, and its controls as the crowd contract
        scores them (each with the rule that tells a careful worker's answer)."""
        raise self._missing("crowd_controls")

    def _missing(self, part: str) -> NotImplementedError:
        return NotImplementedError(f"study kind {self.name!r} supplies no {part!r} in the tasks room")


_KINDS: dict[str, TaskKind] = {}
Kind = TypeVar("Kind", bound=type[TaskKind])


def register(kind: Kind) -> Kind:
    """Register a kind's tasks part (a class decorator; one instance is kept)."""
    if kind.name in _KINDS and type(_KINDS[kind.name]) is not kind:
        raise ValueError(f"study kind {kind.name!r} has two tasks parts")
    _KINDS[kind.name] = kind()
    return kind


def task_kind(name: str, *, unknown: Callable[[str], BadInput] | None = None) -> TaskKind:
    """The tasks part of the kind `name`; UnknownStudyKind (or what `unknown` makes of the message) listing the
    registered kinds when there is none."""
    found = _KINDS.get(name)
    if found is None:
        message = f"unknown study kind {name!r}; the registered kinds are {', '.join(map(repr, _KINDS))}"
        raise (unknown or UnknownStudyKind)(message)
    return found


def has_qualification(kind: TaskKind) -> bool:
    """Whether a kind says how its gold items are parsed and shown (it overrides TaskKind.qualification_items and
    qualification_rows): only then may its study files have a [qualification]."""
    own = type(kind)
    return (own.qualification_items is not TaskKind.qualification_items
            and own.qualification_rows is not TaskKind.qualification_rows)


def task_kinds() -> tuple[TaskKind, ...]:
    """Every registered kind's tasks part, in registration order."""
    return tuple(_KINDS.values())
