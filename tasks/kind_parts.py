"""The shapes the tasks room's shared code and the study kinds' tasks parts exchange: reading a study file (its
error, its reader, the shared parts a kind's `parse` reads beside its own fields) and creating a study (its error,
the contexts a kind's `create` designs over, and what it wrote). Below both: the shared modules (study_file,
study_create) and the kinds (tasks/kinds/) import it, it imports neither."""
from __future__ import annotations

from dataclasses import dataclass

from empeval.server.errors import BadInput
from empeval.server.store.models import System
from empeval.server.store.storable import text_problem
from empeval.server.store.study_parts import Design


class StudyFileError(BadInput):
    def __init__(self, source: str, field_path: str, reason: str):
        self.source, self.field_path, self.reason = source, field_path, reason
        super().__init__(f"{source}: {field_path}: {reason}")


class StudyFileReader:
    """Pulls typed values out of the parsed TOML, raising StudyFileError with the field's dotted path."""

    def __init__(self, source: str):
        self.source = source

    def error(self, path: str, reason: str) -> StudyFileError:
        return StudyFileError(self.source, path, reason)

    def table(self, data: dict, key: str, path: str, known: set[str]) -> dict:
        value = data.get(key, {})
        if not isinstance(value, dict):
            raise self.error(path, f"must be a table ([{path}]), got {type(value).__name__}")
        unknown = sorted(set(value) - known)
        if unknown:
            raise self.error(f"{path}.{unknown[0]}", f"unknown field; expected one of {', '.join(sorted(known))}")
        return value

    def integer(self, data: dict, key: str, path: str, default: int | None, *, minimum: int | None = None,
                maximum: int | None = None) -> int | None:
        value = data.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(path, f"must be an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(path, f"must be an integer >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise self.error(path, f"must be an integer <= {maximum}, got {value}")
        return value

    def number(self, data: dict, key: str, path: str, default: float, *, minimum: float, maximum: float) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(path, f"must be a number, got {value!r}")
        if not minimum <= value <= maximum:
            raise self.error(path, f"must be between {minimum} and {maximum}, got {value}")
        return float(value)

    def string(self, data: dict, key: str, path: str, default: str | None = None) -> str:
        value = data.get(key, default)
        if not isinstance(value, str) or not value.strip():
            raise self.error(path, "is required and must be a non-empty string" if value is None
                             else f"must be a non-empty string, got {value!r}")
        if problem := text_problem(value):
            raise self.error(path, problem)
        return value

    def strings(self, data: dict, key: str, path: str, default=()) -> tuple[str, ...]:
        value = data.get(key, list(default))
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise self.error(path, f"must be a list of non-empty strings, got {value!r}")
        if len(set(value)) != len(value):
            raise self.error(path, "lists a value twice")
        for i, item in enumerate(value):
            if problem := text_problem(item):
                raise self.error(f"{path}[{i}]", problem)
        return tuple(value)


@dataclass(frozen=True)
class StudyFileParts:
    """What every study file says, validated, as a kind's `parse` reads it beside its own fields: the name and
    seed, how many contexts the study draws or lists, the systems and controls, and the design's shared fields
    (`design_given`: the [design] fields the file set, not left to their defaults)."""

    name: str
    seed: int
    n_contexts: int
    systems: tuple[str, ...]
    controls: tuple[str, ...]
    design: Design
    design_given: frozenset[str]


class StudySetupError(BadInput):
    """The store does not hold what the study file asks for; the message says what to run."""


@dataclass
class StudySummary:
    """What `create_study` wrote: counts every kind has, and `sentence`, the kind's own description of its design
    (units, k, what is expected)."""

    name: str
    kind: str
    contexts: int
    systems: list[str]
    items: int  # real units (items, pairs, tuples)
    control_items: int
    assignments: int
    per_unit: int  # k: distinct annotators who answer each unit
    expected_answers: int
    cost: float | None
    currency: str | None
    sentence: str
    human_contexts: int | None = None  # Likert with design.human_share: the contexts people rate
    platform: str = "local"  # the study file's recruitment.platform (set by create_study)
    platform_fee: float = 0.0  # pay.platform_fee, the share `cost` adds on a crowd platform

    def describe(self) -> str:
        """The kind's sentence and, when the study file gives pay per assignment, what the raters cost: on a local
        study no platform takes a fee (what `crowd launch` would cost beside it), elsewhere the fee is included.

        >>> summary = StudySummary("s", "likert", 3, ["a"], 9, 0, 10, 3, 30, 12.0, "GBP", "10 assignments",
        ...                        platform_fee=0.2)
        >>> summary.describe()
        '10 assignments; pay 10.00 GBP (local raters: no platform fee; 12.00 GBP on a crowd platform with its 20% fee)'
        >>> summary.platform = "prolific"
        >>> summary.describe()
        '10 assignments; cost 12.00 GBP including the platform fee (20%)'
        """
        text = self.sentence
        if self.cost is None:
            return text
        fee = f"{self.platform_fee:.0%}"
        if self.platform == "local":
            paid = self.cost / (1 + self.platform_fee)
            return (text + f"; pay {paid:.2f} {self.currency} (local raters: no platform fee; {self.cost:.2f} "
                    f"{self.currency} on a crowd platform with its {fee} fee)")
        return text + f"; cost {self.cost:.2f} {self.currency} including the platform fee ({fee})"

    def next_steps(self) -> str:
        """What the researcher runs next to collect answers, by where the raters come from."""
        if self.platform == "prolific":
            collect = (f"`empeval prolific link {self.name}` (the study URL to paste into Prolific), then "
                       "`empeval serve` at the address Prolific sends participants to")
        else:
            collect = f"`empeval annotators invite NAME --study {self.name}`, then `empeval serve`"
        if self.human_contexts is not None:
            return f"next: `empeval judge {self.name} --judges NAME` (every item), and {collect} (the sample)"
        return f"next: {collect}"


@dataclass(frozen=True)
class ChosenContexts:
    """What a kind's `create` designs over: the contexts chosen (ids, and keys `conv_id#n_turns` in the order drawn),
    the systems and controls by name (their latest version) and every response of theirs by (context id, system
    id)."""

    ids: list[int]
    keys: list[str]
    key_to_id: dict[str, int]
    systems: dict[str, System]
    responses: dict[tuple[int, int], int]

    def response(self, context_id: int, system: str) -> int | None:
        return self.responses.get((context_id, self.systems[system].id))


