"""The parts of a study's configuration that every kind of study has, typed, and the reader of stored ones.

A study's configuration (study_config.StudyConfig) is these shared parts plus exactly one kind's setup
(kinds.StudySetup: what only a Likert, an A/B or a best-worst study is configured with). Each part is a frozen
dataclass with its defaults in one place; `ConfigReader` turns a stored JSON value back into them, raising
StudyConfigError that names the study and the key when a value has the wrong type.

>>> Pay(per_assignment=0.6).cost(60)
43.2
>>> ConfigReader("pilot").integer({"count": "ten"}, "count", "contexts.count", None)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
empeval...StudyConfigError: study 'pilot': stored configuration contexts.count: expected an integer, got 'ten'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from empeval.server.errors import BadInput

RECRUITMENT_PLATFORMS = ("local", "prolific", "mturk")

#: How a human share's contexts are drawn (design.sampling, Likert and A/B studies): a seeded uniform sample of fixed
#: size at study creation, or a Poisson sample with probabilities from the judges' uncertainty, drawn once the judges
#: have scored every item (`empeval study sample`; analysis.stats.ppi.active).
UNIFORM_SAMPLING = "uniform"
ACTIVE_SAMPLING = "active"
SAMPLINGS = (UNIFORM_SAMPLING, ACTIVE_SAMPLING)


class StudyConfigError(BadInput):
    """A stored study configuration does not validate; says which study and which key."""

    def __init__(self, study: str, key: str, reason: str):
        self.study, self.key, self.reason = study, key, reason
        super().__init__(f"study {study!r}: stored configuration {key}: {reason}")


@dataclass(frozen=True)
class Criterion:
    key: str
    label: str
    question: str
    definition: str = ""


@dataclass(frozen=True)
class ContextSelection:
    """Which dialogue contexts are rated: `count` drawn at random (seeded), or the listed `ids`."""

    dataset: str = "empatheticdialogues"
    split: str = "test"
    count: int | None = None
    ids: tuple[str, ...] = ()
    emotions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Design:
    """How work is cut into assignments, whatever the kind: what one assignment holds at most (controls included;
    an item, a pair or a tuple, as the kind hands out), the share of it that is controls, and how long a rater has
    before an unsubmitted assignment expires, and whether a rater may leave a comment under each unit (stored in
    `item_comment`, server/store/item_comment_tables.py). How many raters see each unit is the kind's (its setup)."""

    items_per_assignment: int = 10  # at most, controls included
    control_rate: float = 0.1
    assignment_minutes: int = 30  # an unsubmitted assignment expires after this
    item_comments: bool = False  # an optional comment box under each item (Likert and A/B studies)


@dataclass(frozen=True)
class Pay:
    """What a crowd worker is paid per assignment, and the platform's fee as a share of it."""

    per_assignment: float | None = None
    currency: str = "USD"
    platform_fee: float = 0.2

    def cost(self, assignments: int, *, reward: float | None = None, fee_rate: float | None = None) -> float | None:
        """What `assignments` cost with the platform's fee: assignments x reward x (1 + fee), rounded to
        cents; None when no reward is known. The one place crowd cost is computed.

        >>> Pay(per_assignment=0.6).cost(60, fee_rate=0.0), Pay().cost(60)
        (36.0, None)
        """
        reward = self.per_assignment if reward is None else reward
        if reward is None:
            return None
        fee = self.platform_fee if fee_rate is None else fee_rate
        return round(assignments * reward * (1 + fee), 2)


# New Prolific participants let in per client address and minute (Recruitment.admissions_per_minute): Prolific sends
# each participant from her own device, so even a busy study rarely sees two new ones from one address in a minute.
DEFAULT_ADMISSIONS_PER_MINUTE = 5


@dataclass(frozen=True)
class Recruitment:
    """How raters were recruited: "local" volunteers (the default), "prolific" or "mturk". A Prolific study
    names Prolific's study id (24 hex characters), which its study link is bound to, and its completion codes:
    the one a participant is given after a valid submit, and optionally the screened-out and failed-checks codes
    (a participant who fails the study's qualification is given one of them, as its code_on_failure says).

    Two limits keep one client from taking a Prolific study's work with made-up participant ids
    (server/annotation/prolific.py): `places`, the places the Prolific study has (None: not given, no limit of its
    own), bounds the Prolific participants holding or having submitted its work at once; `admissions_per_minute`
    bounds the participants new to the installation let in per client address and minute."""

    platform: str = "local"
    prolific_study_id: str | None = None
    completion_code: str | None = None
    screened_out_code: str | None = None
    failed_checks_code: str | None = None
    places: int | None = None
    admissions_per_minute: int = DEFAULT_ADMISSIONS_PER_MINUTE

    def code_for(self, outcome: str) -> str | None:
        """The completion code for `outcome`: "completed", "screened_out" or "failed_checks" (None when the study
        file gives none)."""
        return {"completed": self.completion_code, "screened_out": self.screened_out_code,
                "failed_checks": self.failed_checks_code}[outcome]


# The criteria of Rashkin et al. (ACL 2019), in the wording shown to raters of one response (a kind that asks them
# another way, as a choice or as best and worst, words its questions itself and keeps these definitions).
DEFAULT_CRITERIA = (
    Criterion("empathy", "Empathy",
              "Did the response show understanding of the feelings of the person talking about their experience?",
              "Empathy/Sympathy: the response acknowledges how the speaker feels and responds to it "
              "with understanding, not only to the facts."),
    Criterion("relevance", "Relevance",
              "Did the response seem appropriate to the conversation? Was it on-topic?",
              "Relevance: the response fits this conversation and follows from what was said, "
              "rather than being generic or about something else."),
    Criterion("fluency", "Fluency",
              "Could you understand the response? Did the language seem accurate?",
              "Fluency: the response is understandable, grammatical English, whatever its content."),
)


class ConfigReader:
    """Reads typed values out of a stored configuration (parsed JSON), raising StudyConfigError with the dotted
    key when a value has the wrong type; a missing key takes the default given."""

    def __init__(self, study: str):
        self.study = study

    def fail(self, key: str, reason: str) -> StudyConfigError:
        return StudyConfigError(self.study, key, reason)

    def mapping(self, value: Any, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, f"expected an object, got {value!r}")
        return value

    def integer(self, data: dict, key: str, path: str, default: Any) -> Any:
        value = data.get(key, default)
        if value is None and default is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer, got {value!r}")
        return value

    def number(self, data: dict, key: str, path: str, default: Any) -> Any:
        value = data.get(key, default)
        if value is None and default is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(path, f"expected a number, got {value!r}")
        return float(value)

    def text(self, data: dict, key: str, path: str, default: str) -> str:
        value = data.get(key, default)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {value!r}")
        return value

    def optional_text(self, data: dict, key: str, path: str) -> str | None:
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise self.fail(path, f"expected a string or null, got {value!r}")
        return value

    def texts(self, data: dict, key: str, path: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        value = data.get(key, list(default))
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise self.fail(path, f"expected a list of strings, got {value!r}")
        return tuple(value)

    def boolean(self, data: dict, key: str, path: str, default: bool) -> bool:
        value = data.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {value!r}")
        return value

    def criteria(self, value: Any) -> tuple[Criterion, ...]:
        if not isinstance(value, list):
            raise self.fail("criteria", f"expected a list, got {value!r}")
        parsed = []
        for i, entry in enumerate(value):
            entry = self.mapping(entry, f"criteria[{i}]")
            parsed.append(Criterion(key=self.text(entry, "key", f"criteria[{i}].key", ""),
                                    label=self.text(entry, "label", f"criteria[{i}].label", ""),
                                    question=self.text(entry, "question", f"criteria[{i}].question", ""),
                                    definition=self.text(entry, "definition", f"criteria[{i}].definition", "")))
            if not parsed[-1].key:
                raise self.fail(f"criteria[{i}].key", "is required")
        return tuple(parsed)
