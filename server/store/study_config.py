"""A study's configuration, typed: one definition with the defaults in one place.

Written by the study-file parser (tasks.study_file), stored as JSON in the study row (the raw column is the
store's own business), and read by attribute everywhere else: hand-out, submission, the dashboard, crowd
jobs, the report. A stored row that does not validate raises StudyConfigError naming the study and the key.

>>> config = StudyConfig(name="pilot", systems=("gold", "moel"))
>>> config.design.ratings_per_response, config.scale.max, config.criterion_keys
(3, 5, ('empathy', 'relevance', 'fluency'))
>>> StudyConfig.from_json(config.to_json(), study="pilot") == config
True
>>> StudyConfig.from_json({"design": {"ratings_per_response": "three"}}, study="pilot")
... # doctest: +ELLIPSIS
Traceback (most recent call last):
...
server.store.study_config.StudyConfigError: study 'pilot': stored configuration design.ratings_per_response: ...
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from server.errors import BadInput

# The criteria of Rashkin et al. (ACL 2019), in the wording shown to raters.
DEFAULT_CRITERIA: tuple[Criterion, ...]
DEFAULT_SCALE_LABELS = ("1 - Not at all", "2 - Slightly", "3 - Moderately", "4 - Mostly", "5 - Completely")


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
class Scale:
    min: int = 1
    max: int = 5
    labels: tuple[str, ...] = DEFAULT_SCALE_LABELS


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
    ratings_per_response: int = 3  # k distinct annotators per response
    items_per_assignment: int = 10  # at most, controls included
    control_rate: float = 0.1
    assignment_minutes: int = 30  # an unsubmitted assignment expires after this


@dataclass(frozen=True)
class Pay:
    """What a crowd worker is paid per assignment, and the platform's fee as a share of it."""

    per_assignment: float | None = None
    currency: str = "USD"
    platform_fee: float = 0.2

    def cost(self, assignments: int, *, reward: float | None = None, fee_rate: float | None = None) -> float | None:
        """What `assignments` cost with the platform's fee: assignments x reward x (1 + fee), rounded to
        cents; None when no reward is known. The one place crowd cost is computed.

        >>> Pay(per_assignment=0.6).cost(60)
        43.2
        >>> Pay(per_assignment=0.6).cost(60, fee_rate=0.0), Pay().cost(60)
        (36.0, None)
        """
        reward = self.per_assignment if reward is None else reward
        if reward is None:
            return None
        fee = self.platform_fee if fee_rate is None else fee_rate
        return round(assignments * reward * (1 + fee), 2)


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


@dataclass(frozen=True)
class StudyConfig:
    """Everything a study is configured with; `control_targets` maps each control to the criterion it is
    built to fail (declared by the control systems themselves)."""

    name: str = ""
    seed: int = 0
    contexts: ContextSelection = field(default_factory=ContextSelection)
    systems: tuple[str, ...] = ()
    controls: tuple[str, ...] = ()
    design: Design = field(default_factory=Design)
    criteria: tuple[Criterion, ...] = DEFAULT_CRITERIA
    scale: Scale = field(default_factory=Scale)
    pay: Pay = field(default_factory=Pay)
    title: str = ""
    instructions: str = ""
    control_targets: dict[str, str] = field(default_factory=dict)

    @property
    def criterion_keys(self) -> tuple[str, ...]:
        return tuple(c.key for c in self.criteria)

    def to_json(self) -> dict[str, Any]:
        """The JSON the store keeps (lists for tuples)."""
        return _jsonable(asdict(self))

    @classmethod
    def from_json(cls, data: Any, *, study: str) -> StudyConfig:
        """Read a stored configuration; keys it lacks take their defaults (rows written by older versions load),
        a value of the wrong type raises StudyConfigError."""
        reader = _Reader(study)
        top = reader.mapping(data, "(configuration)")
        contexts = reader.mapping(top.get("contexts", {}), "contexts")
        design = reader.mapping(top.get("design", {}), "design")
        scale = reader.mapping(top.get("scale", {}), "scale")
        pay = reader.mapping(top.get("pay", {}) or {}, "pay")
        criteria = top.get("criteria")
        d_design, d_scale, d_pay, d_contexts = Design(), Scale(), Pay(), ContextSelection()
        return cls(
            name=reader.text(top, "name", "name", ""),
            seed=reader.integer(top, "seed", "seed", 0),
            contexts=ContextSelection(
                dataset=reader.text(contexts, "dataset", "contexts.dataset", d_contexts.dataset),
                split=reader.text(contexts, "split", "contexts.split", d_contexts.split),
                count=reader.integer(contexts, "count", "contexts.count", None),
                ids=reader.texts(contexts, "ids", "contexts.ids"),
                emotions=reader.texts(contexts, "emotions", "contexts.emotions")),
            systems=reader.texts(top, "systems", "systems"),
            controls=reader.texts(top, "controls", "controls"),
            design=Design(
                ratings_per_response=reader.integer(design, "ratings_per_response", "design.ratings_per_response",
                                                    d_design.ratings_per_response),
                items_per_assignment=reader.integer(design, "items_per_assignment", "design.items_per_assignment",
                                                    d_design.items_per_assignment),
                control_rate=reader.number(design, "control_rate", "design.control_rate", d_design.control_rate),
                assignment_minutes=reader.integer(design, "assignment_minutes", "design.assignment_minutes",
                                                  d_design.assignment_minutes)),
            criteria=DEFAULT_CRITERIA if criteria is None else reader.criteria(criteria),
            scale=Scale(min=reader.integer(scale, "min", "scale.min", d_scale.min),
                        max=reader.integer(scale, "max", "scale.max", d_scale.max),
                        labels=reader.texts(scale, "labels", "scale.labels", d_scale.labels)),
            pay=Pay(per_assignment=reader.number(pay, "per_assignment", "pay.per_assignment", None),
                    currency=reader.text(pay, "currency", "pay.currency", d_pay.currency),
                    platform_fee=reader.number(pay, "platform_fee", "pay.platform_fee", d_pay.platform_fee)),
            title=reader.text(top, "title", "title", ""),
            instructions=reader.text(top, "instructions", "instructions", ""),
            control_targets={str(k): str(v) for k, v in
                             reader.mapping(top.get("control_targets", {}), "control_targets").items()},
        )


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


class _Reader:
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

    def texts(self, data: dict, key: str, path: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        value = data.get(key, list(default))
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise self.fail(path, f"expected a list of strings, got {value!r}")
        return tuple(value)

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
