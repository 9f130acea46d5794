"""A study's configuration, typed: one definition with the defaults in one place.

Written by the study-file parser (tasks.study_file), stored as JSON in the study row (the raw column is the
store's own business), and read by attribute everywhere else: hand-out, submission, the dashboard, crowd
jobs, the report. A stored row that does not validate raises StudyConfigError naming the study and the key.

>>> config = StudyConfig(name="pilot", systems=("gold", "moel"))
>>> config.design.ratings_per_response, config.scale.max, config.criterion_keys
(3, 5, ('empathy', 'relevance', 'fluency'))
>>> StudyConfig.from_json(config.to_json(), study="pilot") == config
True
>>> ab = StudyConfig(name="ab", kind="pairwise", systems=("moel", "gold"), criteria=DEFAULT_PAIRWISE_CRITERIA,
...                  pairwise=PairwiseSetup(pairs=(Pair("moel", "gold"),), anchor="moel"))
>>> ab.pairwise.pairs[0].label, ab.pairwise.judgments_per_pair, ab.pairwise.ties
('gold|moel', 3, True)
>>> StudyConfig.from_json(ab.to_json(), study="ab") == ab, "pairwise" in config.to_json()
(True, False)
>>> StudyConfig.from_json({"design": {"ratings_per_response": "three"}}, study="pilot")
... # doctest: +ELLIPSIS
Traceback (most recent call last):
...
empeval.server.store.study_config.StudyConfigError: study 'pilot': stored configuration design.ratings_per_response: ...
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from empeval.server.errors import BadInput

# The criteria of Rashkin et al. (ACL 2019), in the wording shown to raters.
DEFAULT_CRITERIA: tuple[Criterion, ...]
# The same three criteria asked as a choice between two responses (the A/B tests of MoEL and MIME).
DEFAULT_PAIRWISE_CRITERIA: tuple[Criterion, ...]
STUDY_KINDS = ("likert", "pairwise")
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
    # Model-assisted evaluation: people rate a seeded uniform sample of this share of the contexts (every
    # system's item on each), judges score all items; None = people rate every context.
    human_share: float | None = None
    human_share_seed: int | None = None  # the sample's seed (the study file's default: the study's seed)


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


@dataclass(frozen=True)
class PairwiseSetup:
    """What only a pairwise (A/B) study has.

    `pairs` is always the explicit list (the study file's `anchor` or all-pairs default is expanded when it is
    read); `judgments_per_pair` is k, the distinct annotators who judge each (context, pair); `ties` says
    whether a rater may answer "tie". In a pairwise study `design.ratings_per_response` is not used.
    """

    pairs: tuple[Pair, ...] = ()
    anchor: str = ""  # the system every pair holds, when the study file named one
    ties: bool = True
    judgments_per_pair: int = 3


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

# Rashkin et al.'s questions turned into a choice between responses A and B, as the A/B tests of MoEL
# (Lin et al., 2019) and MIME (Majumder et al., 2020) put them: which response is better on the criterion,
# or a tie. The definitions are the Likert ones.
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


RECRUITMENT_PLATFORMS = ("local", "prolific", "mturk")


@dataclass(frozen=True)
class Recruitment:
    """How raters were recruited: "local" volunteers (the default), "prolific" or "mturk". A Prolific study
    names Prolific's study id (24 hex characters), which its study link is bound to, and the completion code
    a participant is given after a valid submit."""

    platform: str = "local"
    prolific_study_id: str | None = None
    completion_code: str | None = None


@dataclass(frozen=True)
class StudyConfig:
    """Everything a study is configured with; `control_targets` maps each control to the criterion it is
    built to fail (declared by the control systems themselves).

    `kind` is "likert" (one response rated on the scale) or "pairwise" (two responses to one context, one
    chosen per criterion; `pairwise` holds what only such a study has). `compare_with` names another study
    the report shows beside this one; an annotator sees a context at most once across the two.
    """

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
    kind: str = "likert"
    pairwise: PairwiseSetup | None = None
    compare_with: str = ""
    recruitment: Recruitment = field(default_factory=Recruitment)

    @property
    def criterion_keys(self) -> tuple[str, ...]:
        return tuple(c.key for c in self.criteria)

    @property
    def is_pairwise(self) -> bool:
        return self.kind == "pairwise"

    def to_json(self) -> dict[str, Any]:
        """The JSON the store keeps (lists for tuples). The keys added with pairwise studies (and the
        recruitment section) are written only when they differ from their defaults, so a Likert study's stored
        JSON is what it always was."""
        stored = _jsonable(asdict(self))
        for key, default in _LATER_KEYS.items():
            if stored[key] == default:
                del stored[key]
        for key in _LATER_DESIGN_KEYS:
            if stored["design"][key] is None:
                del stored["design"][key]
        return stored

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
        recruitment = reader.mapping(top.get("recruitment", {}), "recruitment")
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
                                                  d_design.assignment_minutes),
                human_share=reader.number(design, "human_share", "design.human_share", None),
                human_share_seed=reader.integer(design, "human_share_seed", "design.human_share_seed", None)),
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
            kind=reader.text(top, "kind", "kind", "likert"),
            pairwise=None if top.get("pairwise") is None else reader.pairwise(top["pairwise"]),
            compare_with=reader.text(top, "compare_with", "compare_with", ""),
            recruitment=Recruitment(
                platform=reader.text(recruitment, "platform", "recruitment.platform", Recruitment.platform),
                prolific_study_id=reader.optional_text(recruitment, "prolific_study_id",
                                                       "recruitment.prolific_study_id"),
                completion_code=reader.optional_text(recruitment, "completion_code", "recruitment.completion_code")),
        )


# Keys StudyConfig gained after studies were first stored, with the defaults to_json leaves out.
_LATER_KEYS: dict[str, Any] = {"kind": "likert", "pairwise": None, "compare_with": "",
                               "recruitment": asdict(Recruitment())}
# Design keys added later (the human share of model-assisted evaluation), left out of the JSON while None.
_LATER_DESIGN_KEYS = ("human_share", "human_share_seed")


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

    def pairwise(self, value: Any) -> PairwiseSetup:
        setup = self.mapping(value, "pairwise")
        raw_pairs = setup.get("pairs", [])
        if not isinstance(raw_pairs, list):
            raise self.fail("pairwise.pairs", f"expected a list, got {raw_pairs!r}")
        pairs = []
        for i, entry in enumerate(raw_pairs):
            entry = self.mapping(entry, f"pairwise.pairs[{i}]")
            pairs.append(Pair(first=self.text(entry, "first", f"pairwise.pairs[{i}].first", ""),
                              second=self.text(entry, "second", f"pairwise.pairs[{i}].second", "")))
        defaults = PairwiseSetup()
        return PairwiseSetup(
            pairs=tuple(pairs), anchor=self.text(setup, "anchor", "pairwise.anchor", defaults.anchor),
            ties=self.boolean(setup, "ties", "pairwise.ties", defaults.ties),
            judgments_per_pair=self.integer(setup, "judgments_per_pair", "pairwise.judgments_per_pair",
                                            defaults.judgments_per_pair))

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
