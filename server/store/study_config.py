"""A study's configuration, typed: one definition with the defaults in one place.

Written by the study-file parser (tasks.study_file), stored as JSON in the study row (the raw column is the
store's own business), and read by attribute everywhere else: hand-out, submission, the dashboard, crowd
jobs, the report. It is the parts every study has (study_parts) and exactly one kind's setup (`setup`, a
kinds.StudySetup: a Likert study's k and scale, an A/B study's pairs, ...); `kind` is the setup's. A stored row
that does not validate raises StudyConfigError naming the study and the key; one of a kind no module registers,
UnknownStudyKind listing the registered kinds.

>>> config = StudyConfig(name="pilot", systems=("gold", "moel"))
>>> config.kind, config.setup.ratings_per_response, config.setup.scale.max, config.criterion_keys
('likert', 3, 5, ('empathy', 'relevance', 'fluency'))
>>> StudyConfig.from_json(config.to_json(), study="pilot") == config, "kind" in config.to_json()
(True, False)
>>> StudyConfig.from_json({"design": {"ratings_per_response": "three"}}, study="pilot")
... # doctest: +ELLIPSIS
Traceback (most recent call last):
...
empeval.server.store.study_parts.StudyConfigError: study 'pilot': stored configuration design.ratings_per_response: ...
>>> StudyConfig.from_json({"kind": "ranking"}, study="pilot")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
empeval...UnknownStudyKind: study 'pilot': unknown study kind 'ranking'; the registered kinds are 'likert', ...
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from empeval.server.store.kinds import DEFAULT_KIND, StudySetup, UnknownStudyKind, default_setup, setup_class
from empeval.server.store.qualification import Qualification
from empeval.server.store.study_decisions import Decisions
from empeval.server.store.study_parts import (
    DEFAULT_CRITERIA,
    ConfigReader,
    ContextSelection,
    Criterion,
    Design,
    Pay,
    Recruitment,
)


@dataclass(frozen=True)
class StudyConfig:
    """Everything a study is configured with; `control_targets` maps each control to the criterion it is
    built to fail (declared by the control systems themselves).

    `setup` holds what only a study of its kind has (see server/store/kinds/). `compare_with` names another study
    the report shows beside this one; an annotator sees a context at most once across the two.
    """

    name: str = ""
    seed: int = 0
    contexts: ContextSelection = field(default_factory=ContextSelection)
    systems: tuple[str, ...] = ()
    controls: tuple[str, ...] = ()
    design: Design = field(default_factory=Design)
    criteria: tuple[Criterion, ...] = DEFAULT_CRITERIA
    setup: StudySetup = field(default_factory=default_setup)
    pay: Pay = field(default_factory=Pay)
    title: str = ""
    instructions: str = ""
    control_targets: dict[str, str] = field(default_factory=dict)
    compare_with: str = ""
    recruitment: Recruitment = field(default_factory=Recruitment)
    # The training a rater passes before her first real assignment (server/store/qualification.py), if any.
    qualification: Qualification | None = None
    # The pre-registered comparisons, and whether the study stops once they are decided (store/study_decisions.py).
    decisions: Decisions | None = None

    @property
    def kind(self) -> str:
        """The study's kind, as its setup names it ("likert", "pairwise", ...)."""
        return self.setup.kind

    @property
    def criterion_keys(self) -> tuple[str, ...]:
        return tuple(c.key for c in self.criteria)

    def to_json(self) -> dict[str, Any]:
        """The JSON the store keeps (lists for tuples): the shared parts, the setup's own keys merged in (see
        StudySetup.stored) and `kind` unless it is the default. The keys added after studies were first stored
        are written only when they differ from their defaults, so a Likert study's stored JSON is what it always
        was."""
        shared = asdict(self)
        del shared["setup"]
        stored = _jsonable(shared)
        if self.decisions is not None:
            stored["decisions"] = self.decisions.stored()
        for key, default in _LATER_KEYS.items():
            if stored[key] == default:
                del stored[key]
        if not self.design.item_comments:  # added later too: written only when on
            del stored["design"]["item_comments"]
        for key, value in self.setup.stored().items():
            if isinstance(value, dict) and isinstance(stored.get(key), dict):
                stored[key] = {**stored[key], **value}
            else:
                stored[key] = value
        if self.kind != DEFAULT_KIND:
            stored["kind"] = self.kind
        return stored

    @classmethod
    def from_json(cls, data: Any, *, study: str) -> StudyConfig:
        """Read a stored configuration; keys it lacks take their defaults (rows written by older versions load),
        a value of the wrong type raises StudyConfigError, a kind no module registered UnknownStudyKind."""
        reader = ConfigReader(study)
        top = reader.mapping(data, "(configuration)")
        contexts = reader.mapping(top.get("contexts", {}), "contexts")
        design = reader.mapping(top.get("design", {}), "design")
        pay = reader.mapping(top.get("pay", {}) or {}, "pay")
        criteria = top.get("criteria")
        recruitment = reader.mapping(top.get("recruitment", {}), "recruitment")
        kind = reader.text(top, "kind", "kind", DEFAULT_KIND)
        setup = setup_class(kind, unknown=lambda message: UnknownStudyKind(f"study {study!r}: {message}"))
        d_design, d_pay, d_contexts = Design(), Pay(), ContextSelection()
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
                items_per_assignment=reader.integer(design, "items_per_assignment", "design.items_per_assignment",
                                                    d_design.items_per_assignment),
                control_rate=reader.number(design, "control_rate", "design.control_rate", d_design.control_rate),
                assignment_minutes=reader.integer(design, "assignment_minutes", "design.assignment_minutes",
                                                  d_design.assignment_minutes),
                item_comments=reader.boolean(design, "item_comments", "design.item_comments",
                                             d_design.item_comments)),
            criteria=DEFAULT_CRITERIA if criteria is None else reader.criteria(criteria),
            setup=setup.from_stored(reader, top),
            pay=Pay(per_assignment=reader.number(pay, "per_assignment", "pay.per_assignment", None),
                    currency=reader.text(pay, "currency", "pay.currency", d_pay.currency),
                    platform_fee=reader.number(pay, "platform_fee", "pay.platform_fee", d_pay.platform_fee)),
            title=reader.text(top, "title", "title", ""),
            instructions=reader.text(top, "instructions", "instructions", ""),
            control_targets={str(k): str(v) for k, v in
                             reader.mapping(top.get("control_targets", {}), "control_targets").items()},
            compare_with=reader.text(top, "compare_with", "compare_with", ""),
            recruitment=Recruitment(
                platform=reader.text(recruitment, "platform", "recruitment.platform", Recruitment.platform),
                prolific_study_id=reader.optional_text(recruitment, "prolific_study_id",
                                                       "recruitment.prolific_study_id"),
                completion_code=reader.optional_text(recruitment, "completion_code", "recruitment.completion_code"),
                screened_out_code=reader.optional_text(recruitment, "screened_out_code",
                                                       "recruitment.screened_out_code"),
                failed_checks_code=reader.optional_text(recruitment, "failed_checks_code",
                                                        "recruitment.failed_checks_code"),
                places=reader.integer(recruitment, "places", "recruitment.places", None),
                admissions_per_minute=reader.integer(recruitment, "admissions_per_minute",
                                                     "recruitment.admissions_per_minute",
                                                     Recruitment.admissions_per_minute)),
            qualification=None if top.get("qualification") is None
            else Qualification.from_stored(reader, top["qualification"]),
            decisions=None if top.get("decisions") is None
            else Decisions.from_stored(reader, top["decisions"]),
        )


# Keys StudyConfig gained after studies were first stored, with the defaults to_json leaves out.
_LATER_KEYS: dict[str, Any] = {"compare_with": "", "recruitment": asdict(Recruitment()), "qualification": None,
                               "decisions": None}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
