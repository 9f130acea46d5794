"""Study kinds as the store knows them: each kind's typed setup and its tables, in one registry.

A study kind (Likert, pairwise A/B, best-worst scaling, ...) is a unit across the rooms (docs/architecture.md): in
each room it supplies the part that room needs and registers it there. The store's part is a `StudySetup`
subclass, a frozen dataclass of what only a study of that kind is configured with, which names the kind, says
how it is stored in and read from the study row's JSON, and lists the tables the kind owns (their migration is
an ordinary file of server/store/migrations). A study's configuration holds exactly one setup
(study_config.StudyConfig.setup). The kinds register themselves when server/store/kinds/registered.py imports
them; the registry refuses an unknown kind by listing the registered ones, as Potato's schema registry does.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from sqlalchemy import CompoundSelect, Select

from empeval.server.errors import BadInput
from empeval.server.store.study_parts import ACTIVE_SAMPLING, ConfigReader, Criterion

# A study file or a stored configuration that names no kind is a Likert study (the protocol of Rashkin et al.).
DEFAULT_KIND = "likert"


class UnknownStudyKind(BadInput):
    """A kind no module registered: the message lists those that are."""


class StudySetup:
    """What only a study of one kind is configured with. Subclasses are frozen dataclasses that set the class
    attributes below and implement `from_stored` and `stored`; `register` adds them to the registry.

    - `kind`: the name a study file gives (`kind = "pairwise"`), unique among kinds;
    - `label`: the kind in a researcher's words ("pairwise (A/B)"), for messages and the dashboard;
    - `default_criteria`: the questions asked when a study file lists none, worded for this kind's task;
    - `tables`: the ORM classes of the tables this kind owns (its items, placements and answers);
    - `judged`: whether judges take part in this kind's model-assisted evaluation (a human share, judges' scores of
      its responses or a judge of differences' verdicts on its pairs); such a kind implements `judged_responses`
      and, when its people compare two responses, `compared_pairs`.
    """

    kind: ClassVar[str]
    label: ClassVar[str]
    default_criteria: ClassVar[tuple[Criterion, ...]]
    tables: ClassVar[tuple[type, ...]] = ()
    judged: ClassVar[bool] = False
    # Hooks with a default a kind may keep (tests/test_kinds_complete.py): only the judged kinds supply them.
    optional_parts: ClassVar[frozenset[str]] = frozenset({"judged_responses", "compared_pairs", "compared_choices"})

    @classmethod
    def judged_responses(cls, study_id: int) -> Select | CompoundSelect:
        """The responses of study `study_id` a judge sees (controls left out): a SELECT of one column of response
        ids, for an IN clause."""
        raise NotImplementedError(f"judges do not judge {cls.label} studies")

    @classmethod
    def compared_pairs(cls, study_id: int) -> Select | None:
        """The pairs of responses people compare in study `study_id` (controls left out): a SELECT of (context id,
        response a id, response b id), a the smaller id; None when people rate responses one at a time (a judge of
        differences then compares every pair of responses to one context)."""
        return None

    @classmethod
    def compared_choices(cls, study_id: int) -> Select | None:
        """People's choices between the pairs of `compared_pairs` (controls left out): a SELECT of (criterion,
        context id, response a id, response b id, value), value 1.0 when response a was chosen, -1.0 when b was, 0.0
        for a tie, whichever side each was shown on; None for a kind without such pairs."""
        return None

    @property
    def actively_sampled(self) -> bool:
        """Whether people rate an active sample (design.sampling = "active"): contexts drawn with recorded
        probabilities, which every estimate and look then weights by. False for a kind without a human share."""
        return False

    @property
    def human_share_and_seed(self) -> tuple[float | None, int | None]:
        """The model-assisted design's share of the contexts people rate and the seed of its draw (design.human_share,
        design.human_share_seed); (None, None) when people rate every context, or for a kind without a share."""
        return None, None

    @classmethod
    def from_stored(cls, reader: ConfigReader, stored: dict[str, Any]) -> StudySetup:
        """The setup from a stored configuration (the whole JSON object of the study row): keys it lacks take their
        defaults, a value of the wrong type raises the reader's StudyConfigError."""
        raise NotImplementedError(f"study kind {cls.kind!r} does not say how its setup is read from the store")

    def stored(self) -> dict[str, Any]:
        """What this setup adds to the stored JSON object: top-level keys, merged into those every study has (a
        key both hold, such as "design", is merged one level down)."""
        raise NotImplementedError(f"study kind {self.kind!r} does not say how its setup is stored")


class HumanShareDesign:
    """The model-assisted design a setup declares as fields (`human_share`, `human_share_seed`, `sampling`), answering
    StudySetup's questions about it; the Likert and the A/B setups both have one. Put it before StudySetup in the
    bases so that its answers are the ones taken."""

    human_share: float | None
    human_share_seed: int | None
    sampling: str

    @property
    def actively_sampled(self) -> bool:
        return self.sampling == ACTIVE_SAMPLING

    @property
    def human_share_and_seed(self) -> tuple[float | None, int | None]:
        return self.human_share, self.human_share_seed


_SETUPS: dict[str, type[StudySetup]] = {}
Setup = TypeVar("Setup", bound=type[StudySetup])


def register(setup: Setup) -> Setup:
    """Register a kind's setup class (use as a class decorator); a second kind with the same name is an error."""
    if setup.kind in _SETUPS and _SETUPS[setup.kind] is not setup:
        raise ValueError(f"study kind {setup.kind!r} is registered twice ({_SETUPS[setup.kind].__qualname__} and "
                         f"{setup.__qualname__})")
    _SETUPS[setup.kind] = setup
    return setup


def kind_names() -> tuple[str, ...]:
    """The registered kinds, in registration order (the default kind first)."""
    return tuple(_SETUPS)


def setup_class(kind: str, *, unknown: Callable[[str], BadInput] | None = None) -> type[StudySetup]:
    """The setup class of `kind`; UnknownStudyKind (or what `unknown` makes of the message) listing the registered
    kinds when there is none."""
    found = _SETUPS.get(kind)
    if found is None:
        message = f"unknown study kind {kind!r}; the registered kinds are {', '.join(map(repr, kind_names()))}"
        raise (unknown or UnknownStudyKind)(message)
    return found


def default_setup() -> StudySetup:
    """A setup of the default kind with its own defaults."""
    return setup_class(DEFAULT_KIND)()
