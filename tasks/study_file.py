"""Study files (TOML): what a researcher writes to define a Likert study, validated field by field.

    name = "ed-likert-pilot"
    seed = 7
    [contexts]                       # which dialogue contexts get rated
    dataset = "empatheticdialogues"
    split = "test"
    count = 60                       # drawn at random (seeded) ...
    # ids = ["hit:0_conv:0#1", ...]  # ... or listed as conv_id#n_turns
    # emotions = ["sad", "lonely"]   # optional filter
    [systems]
    names = ["gold", "moel", "mime", "kemp", "retrieval"]
    controls = ["control-generic", "control-mismatched", "control-scrambled"]
    [design]
    ratings_per_response = 3         # k distinct annotators per response
    items_per_assignment = 10        # at most, including controls (contexts are cut into near-equal blocks)
    control_rate = 0.1               # share of each assignment that is a control item
    assignment_minutes = 30          # after this an unsubmitted assignment expires
    # human_share = 0.25             # optional (model-assisted evaluation): people rate a seeded uniform sample of
    # human_share_seed = 11          # a quarter of the contexts (every system's response on each), judges score
                                     # every item (`empeval judge`); the seed defaults to the study's
    [pay]                            # for crowd runs; shown in the report's methods paragraph
    per_assignment = 0.60
    currency = "USD"
    [recruitment]                    # optional: how raters are recruited; the report's methods paragraph says so
    platform = "prolific"            # "local" (volunteers, the default), "prolific" or "mturk"
    prolific_study_id = "5f0c..."    # Prolific's study id (24 hex characters): the study link only admits it
    completion_code = "C1A2B3C4"     # given to a participant after a valid submit (letters and digits)
    [[criteria]]                     # optional: defaults to the paper's Empathy, Relevance, Fluency
    key = "empathy"; label = "Empathy"; question = "..."; definition = "..."
    [scale]                          # optional: defaults to 1-5 with every point labelled
    min = 1; max = 5; labels = ["1 - Not at all", ..., "5 - Completely"]

A pairwise (A/B) study, as in the human A/B tests of MoEL and MIME: a rater sees one context with the
responses of two systems and picks the better one per criterion, or a tie. It differs only in:

    kind = "pairwise"                # top level; "likert" is the default
    compare_with = "demo"            # optional: a study (of either kind) the report shows beside this one;
                                     # it must exist when this one is created
    [systems]
    names = ["moel", "gold", "mime"]
    anchor = "moel"                  # moel against each other name ("ours vs each baseline") ...
    # pairs = [["moel", "gold"], ["mime", "gold"]]   # ... or the pairs listed; all pairs when neither is given
    controls = ["control-generic"]   # a control pair: a control against a real system, built to lose
    [design]
    judgments_per_pair = 3           # k distinct annotators per (context, pair); replaces ratings_per_response
    ties = true                      # whether "tie" is an answer
    items_per_assignment = 11        # pairs per assignment, controls included; the real ones (here 10) must
                                     # be even, so that each rater sees every pair's two orders equally often
                                     # (by default 10, or 11 when one of them is a control)

Its default criteria ask the paper's three questions as a choice ("Which response shows more understanding
of the feelings ...?"); a [[criteria]] question is shown as written, so write it as a choice. A pairwise
study has no [scale]. The first system of a listed pair (or the anchor) is the one whose wins the report counts.

Every error names the file and the field, e.g. `study.toml: design.ratings_per_response: must be an
integer >= 1, got 0`.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

from empeval.server.backend.controls import CONTROL_TARGETS
from empeval.server.errors import BadInput
from empeval.server.store.storable import text_problem
from empeval.server.store.study_config import (
    DEFAULT_CRITERIA,
    DEFAULT_PAIRWISE_CRITERIA,
    RECRUITMENT_PLATFORMS,
    STUDY_KINDS,
    ContextSelection,
    Criterion,
    Design,
    Pair,
    PairwiseSetup,
    Pay,
    Recruitment,
    Scale,
    StudyConfig,
)
from empeval.tasks.design import human_share_problem
from empeval.tasks.pairwise_design import pair_slots

# The study files that ship with empeval (the demo's among them).
STUDIES_DIR = Path(__file__).resolve().parent / "studies"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
PROLIFIC_ID_PATTERN = re.compile(r"[0-9a-f]{24}")  # Prolific's ids (study, participant, session)
COMPLETION_CODE_PATTERN = re.compile(r"[A-Za-z0-9]{1,40}")


class StudyFileError(BadInput):
    def __init__(self, source: str, field_path: str, reason: str):
        self.source, self.field_path, self.reason = source, field_path, reason
        super().__init__(f"{source}: {field_path}: {reason}")


class _Reader:
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


def parse_study(data: dict[str, Any], source: str = "<study>") -> StudyConfig:
    """Validate a parsed study file (see module docstring) and return the typed StudyConfig."""
    r = _Reader(source)
    known_top = {"name", "seed", "title", "instructions", "contexts", "systems", "design", "pay", "criteria", "scale",
                 "kind", "compare_with", "recruitment"}
    unknown = sorted(set(data) - known_top)
    if unknown:
        raise r.error(unknown[0], f"unknown field; expected one of {', '.join(sorted(known_top))}")
    name = r.string(data, "name", "name")
    if not NAME_PATTERN.fullmatch(name):
        raise r.error("name", f"{name!r} must be 1-100 letters, digits, '.', '_' or '-'")
    kind = r.string(data, "kind", "kind", "likert")
    if kind not in STUDY_KINDS:
        raise r.error("kind", f"unknown study kind {kind!r}; expected {' or '.join(STUDY_KINDS)}")
    pairwise = kind == "pairwise"
    compare_with = ""
    if "compare_with" in data:
        compare_with = r.string(data, "compare_with", "compare_with")
        if not NAME_PATTERN.fullmatch(compare_with):
            raise r.error("compare_with", f"{compare_with!r} is not a study name (1-100 letters, digits, '.', '_' "
                          "or '-')")
        if compare_with == name:
            raise r.error("compare_with", "names this study itself; name the study to compare with")
    seed = r.integer(data, "seed", "seed", 0, minimum=0)
    for key in ("title", "instructions"):
        if isinstance(data.get(key), str) and (problem := text_problem(data[key])):
            raise r.error(key, problem)

    c = r.table(data, "contexts", "contexts", {"dataset", "split", "count", "ids", "emotions"})
    split = c.get("split", "test")
    if split not in ("train", "valid", "test"):
        raise r.error("contexts.split", f"unknown split {split!r}; expected train, valid or test")
    count = r.integer(c, "count", "contexts.count", None, minimum=1)
    ids = r.strings(c, "ids", "contexts.ids")
    for i, context_id in enumerate(ids):
        if "#" not in context_id or not context_id.rsplit("#", 1)[1].isdigit():
            raise r.error(f"contexts.ids[{i}]", f"{context_id!r} must be conv_id#n_turns, e.g. hit:0_conv:0#1")
    if (count is None) == (not ids):
        raise r.error("contexts", "give exactly one of count (random contexts) or ids (listed contexts)")
    contexts = ContextSelection(dataset=r.string(c, "dataset", "contexts.dataset", "empatheticdialogues"),
                                split=split, count=count, ids=ids,
                                emotions=r.strings(c, "emotions", "contexts.emotions"))

    s = r.table(data, "systems", "systems", {"names", "controls", "pairs", "anchor"})
    if "names" not in s:
        raise r.error("systems.names", "is required: the systems whose responses are rated")
    systems = r.strings(s, "names", "systems.names")
    if not systems:
        raise r.error("systems.names", "must name at least one system")
    if not pairwise:
        for key in ("pairs", "anchor"):
            if key in s:
                raise r.error(f"systems.{key}", 'is for pairwise studies only (kind = "pairwise")')
    pairs = _pairs(r, s, systems) if pairwise else ()
    controls = r.strings(s, "controls", "systems.controls")
    for i, control in enumerate(controls):
        if control not in CONTROL_TARGETS:
            raise r.error(f"systems.controls[{i}]", f"unknown control {control!r}; expected one of "
                          f"{', '.join(CONTROL_TARGETS)}")
    overlap = set(systems) & set(controls)
    if overlap:
        raise r.error("systems.names", f"{sorted(overlap)[0]!r} is a control; list it under systems.controls")

    d = r.table(data, "design", "design", {"ratings_per_response", "items_per_assignment", "control_rate",
                                           "assignment_minutes", "judgments_per_pair", "ties", "human_share",
                                           "human_share_seed"})
    if pairwise and "ratings_per_response" in d:
        raise r.error("design.ratings_per_response", "a pairwise study counts judgments per (context, pair): "
                      "use design.judgments_per_pair")
    if not pairwise:
        for key in ("judgments_per_pair", "ties"):
            if key in d:
                raise r.error(f"design.{key}", 'is for pairwise studies only (kind = "pairwise")')
    design = Design(
        ratings_per_response=r.integer(d, "ratings_per_response", "design.ratings_per_response",
                                       Design.ratings_per_response, minimum=1, maximum=50),
        items_per_assignment=r.integer(d, "items_per_assignment", "design.items_per_assignment",
                                       Design.items_per_assignment, minimum=1, maximum=200),
        control_rate=r.number(d, "control_rate", "design.control_rate", Design.control_rate if controls else 0.0,
                              minimum=0.0, maximum=0.5),
        assignment_minutes=r.integer(d, "assignment_minutes", "design.assignment_minutes",
                                     Design.assignment_minutes, minimum=1, maximum=24 * 60),
    )
    design = _human_share(r, d, design, n_contexts=count if count is not None else len(ids), seed=seed or 0,
                          pairwise=pairwise)
    if design.control_rate > 0 and not controls:
        raise r.error("design.control_rate", "is above 0 but systems.controls lists no control")
    if controls and round(design.items_per_assignment * design.control_rate) >= design.items_per_assignment:
        raise r.error("design.control_rate", "leaves no room for real items in an assignment")
    if pairwise:
        design = _even_pair_slots(r, design, given="items_per_assignment" in d, with_controls=bool(controls))

    p = r.table(data, "pay", "pay", {"per_assignment", "currency", "platform_fee"})
    pay = Pay()
    if "per_assignment" in p:
        pay = Pay(per_assignment=r.number(p, "per_assignment", "pay.per_assignment", 0.0, minimum=0.0, maximum=1000.0),
                  currency=r.string(p, "currency", "pay.currency", Pay.currency),
                  platform_fee=r.number(p, "platform_fee", "pay.platform_fee", Pay.platform_fee, minimum=0.0,
                                        maximum=1.0))

    setup = None
    if pairwise:
        ties = d.get("ties", PairwiseSetup.ties)
        if not isinstance(ties, bool):
            raise r.error("design.ties", f"must be true or false, got {ties!r}")
        setup = PairwiseSetup(pairs=pairs, anchor=s.get("anchor", ""), ties=ties,
                              judgments_per_pair=r.integer(d, "judgments_per_pair", "design.judgments_per_pair",
                                                           PairwiseSetup.judgments_per_pair, minimum=1,
                                                           maximum=50))

    criteria = DEFAULT_PAIRWISE_CRITERIA if pairwise else DEFAULT_CRITERIA
    if "criteria" in data:
        raw = data["criteria"]
        if not isinstance(raw, list) or not raw:
            raise r.error("criteria", "must be a non-empty array of tables ([[criteria]])")
        parsed = []
        for i, entry in enumerate(raw):
            path = f"criteria[{i}]"
            if not isinstance(entry, dict):
                raise r.error(path, "must be a table with key, label, question, definition")
            unknown = sorted(set(entry) - {"key", "label", "question", "definition"})
            if unknown:
                raise r.error(f"{path}.{unknown[0]}", "unknown field; expected key, label, question, definition")
            key = r.string(entry, "key", f"{path}.key")
            if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", key):
                raise r.error(f"{path}.key", f"{key!r} must be lower-case letters, digits or _ (at most 32)")
            parsed.append(Criterion(key=key, label=r.string(entry, "label", f"{path}.label"),
                                    question=r.string(entry, "question", f"{path}.question"),
                                    definition=r.string(entry, "definition", f"{path}.definition", "")
                                    if entry.get("definition") else ""))
        if len({c.key for c in parsed}) != len(parsed):
            raise r.error("criteria", "two criteria share a key")
        criteria = tuple(parsed)

    scale = Scale()
    if pairwise and "scale" in data:
        raise r.error("scale", "a pairwise study has no scale: raters choose A, B (or a tie)")
    if "scale" in data:
        sc = r.table(data, "scale", "scale", {"min", "max", "labels"})
        low = r.integer(sc, "min", "scale.min", 1, minimum=0)
        high = r.integer(sc, "max", "scale.max", 5, minimum=low + 1, maximum=low + 10)
        labels = r.strings(sc, "labels", "scale.labels")
        if len(labels) != high - low + 1:
            raise r.error("scale.labels", f"must label every point: {high - low + 1} labels for {low}..{high}, "
                          f"got {len(labels)}")
        scale = Scale(min=low, max=high, labels=labels)

    return StudyConfig(name=name, seed=seed, contexts=contexts, systems=systems, controls=controls, design=design,
                       criteria=criteria, scale=scale, pay=pay,
                       title=data.get("title", "") if isinstance(data.get("title", ""), str) else "",
                       instructions=data.get("instructions", "") if isinstance(data.get("instructions", ""), str)
                       else "",
                       control_targets={c: CONTROL_TARGETS[c] for c in controls},
                       kind=kind, pairwise=setup, compare_with=compare_with, recruitment=_recruitment(r, data))


def _human_share(r: _Reader, d: dict, design: Design, *, n_contexts: int, seed: int, pairwise: bool) -> Design:
    """design.human_share and design.human_share_seed (model-assisted evaluation): people rate a seeded uniform
    sample of round(share x contexts) contexts, judges score every item. The share must be a number strictly
    between 0 and 1 that samples at least two contexts and not all of them (tasks.design.human_share_problem);
    the seed defaults to the study's and is stored resolved, so the stored configuration reproduces the draw."""
    if "human_share" not in d:
        if "human_share_seed" in d:
            raise r.error("design.human_share_seed", "is the seed of design.human_share's sample; set "
                          "design.human_share too, or remove it")
        return design
    if pairwise:
        raise r.error("design.human_share", "is for Likert studies only: judges score the items of a Likert "
                      "study, not pairs")
    share = d["human_share"]
    if problem := human_share_problem(share, n_contexts):
        raise r.error("design.human_share", problem)
    sample_seed = r.integer(d, "human_share_seed", "design.human_share_seed", seed, minimum=0)
    return replace(design, human_share=float(share), human_share_seed=sample_seed)


def _recruitment(r: _Reader, data: dict) -> Recruitment:
    """The [recruitment] section: the platform, and for Prolific the study id the link is bound to and the
    completion code; the Prolific fields are refused on other platforms so a wrong platform is not missed."""
    section = r.table(data, "recruitment", "recruitment", {"platform", "prolific_study_id", "completion_code"})
    platform = r.string(section, "platform", "recruitment.platform", Recruitment.platform)
    if platform not in RECRUITMENT_PLATFORMS:
        raise r.error("recruitment.platform", f"unknown platform {platform!r}; expected one of "
                      f"{', '.join(RECRUITMENT_PLATFORMS)}")
    if platform != "prolific":
        for key in ("prolific_study_id", "completion_code"):
            if key in section:
                raise r.error(f"recruitment.{key}", f'is for Prolific studies only (platform = "prolific"), '
                              f"this study's platform is {platform!r}")
        return Recruitment(platform=platform)
    if "prolific_study_id" not in section:
        raise r.error("recruitment.prolific_study_id", "is required on Prolific: copy the study id from the "
                      "study's page on Prolific (24 characters 0-9, a-f)")
    study_id = r.string(section, "prolific_study_id", "recruitment.prolific_study_id")
    if not PROLIFIC_ID_PATTERN.fullmatch(study_id):
        raise r.error("recruitment.prolific_study_id", f"{study_id!r} is not a Prolific study id: expected 24 "
                      "lower-case hexadecimal characters (0-9, a-f)")
    if "completion_code" not in section:
        raise r.error("recruitment.completion_code", "is required on Prolific: copy the completion code from "
                      "the study's page on Prolific")
    code = r.string(section, "completion_code", "recruitment.completion_code")
    if not COMPLETION_CODE_PATTERN.fullmatch(code):
        raise r.error("recruitment.completion_code", f"{code!r} must be 1-40 letters or digits, as Prolific's "
                      "completion codes are")
    return Recruitment(platform=platform, prolific_study_id=study_id, completion_code=code)


def _even_pair_slots(r: _Reader, design: Design, *, given: bool, with_controls: bool) -> Design:
    """The pairwise design with an even number of real pairs per assignment (items less controls), as
    tasks.pairwise_design needs to keep each rater's left/right orders balanced: a size left to its default
    grows to the next one that fits (11 with one control); a size given that does not fit is refused."""
    size, rate = design.items_per_assignment, design.control_rate

    def fits(n: int) -> bool:
        slots = pair_slots(n, rate, with_controls=with_controls)
        return slots > 0 and slots % 2 == 0

    if fits(size):
        return design
    if not given:
        return replace(design, items_per_assignment=next(n for n in range(size + 1, 201) if fits(n)))
    n_real = pair_slots(size, rate, with_controls=with_controls)
    n_controls = size - n_real
    near = [n for n in (next((n for n in range(size - 1, 0, -1) if fits(n)), None),
                        next((n for n in range(size + 1, 201) if fits(n)), None)) if n is not None]
    if with_controls:
        controls = f"{n_controls} control{'' if n_controls == 1 else 's'} (design.control_rate = {rate})"
        change = f"use {' or '.join(map(str, near))} items (or another design.control_rate)"
    else:
        controls, change = "no control", f"use {' or '.join(map(str, near))} items"
    raise r.error("design.items_per_assignment",
                  f"{size} items with {controls} leave {n_real} pair judgments per assignment, an odd number; "
                  f"{change} so that each rater sees every pair's two orders equally often")


def _pairs(r: _Reader, s: dict, systems: tuple[str, ...]) -> tuple[Pair, ...]:
    """The pairs a pairwise study compares: systems.pairs as listed, or the anchor against each other name,
    or every pair of names (in the order they are named); every name must be in some pair."""
    if "pairs" in s and "anchor" in s:
        raise r.error("systems", "give pairs or anchor, not both")
    if len(systems) < 2:
        raise r.error("systems.names", "a pairwise study compares at least two systems")
    if "anchor" in s:
        anchor = r.string(s, "anchor", "systems.anchor")
        if anchor not in systems:
            raise r.error("systems.anchor", f"{anchor!r} is not among systems.names ({', '.join(systems)})")
        return tuple(Pair(anchor, other) for other in systems if other != anchor)
    if "pairs" not in s:
        return tuple(Pair(a, b) for i, a in enumerate(systems) for b in systems[i + 1:])
    raw = s["pairs"]
    if not isinstance(raw, list) or not raw:
        raise r.error("systems.pairs", f'must be a non-empty list of pairs like [["moel", "gold"]], got {raw!r}')
    pairs: list[Pair] = []
    seen: dict[frozenset[str], int] = {}
    for i, entry in enumerate(raw):
        path = f"systems.pairs[{i}]"
        if not isinstance(entry, list) or len(entry) != 2 or not all(isinstance(v, str) for v in entry):
            raise r.error(path, f'must be two system names like ["moel", "gold"], got {entry!r}')
        for name in entry:
            if name not in systems:
                raise r.error(path, f"{name!r} is not among systems.names ({', '.join(systems)})")
        if entry[0] == entry[1]:
            raise r.error(path, f"pairs {entry[0]!r} with itself; a pair is two different systems")
        key = frozenset(entry)
        if key in seen:
            raise r.error(path, f"repeats systems.pairs[{seen[key]}] (a pair is the same in either order)")
        seen[key] = i
        pairs.append(Pair(entry[0], entry[1]))
    paired = {name for pair in pairs for name in (pair.first, pair.second)}
    unpaired = [name for name in systems if name not in paired]
    if unpaired:
        raise r.error("systems.names", f"{unpaired[0]!r} is in no pair of systems.pairs; pair it or remove it")
    return tuple(pairs)


def load_study_file(path: Path) -> StudyConfig:
    """Read and validate a study TOML file."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StudyFileError(str(path), "(file)", "no such file") from None
    except UnicodeDecodeError:
        raise StudyFileError(str(path), "(file)", "not UTF-8") from None
    except tomllib.TOMLDecodeError as error:
        raise StudyFileError(str(path), "(syntax)", str(error)) from None
    except RecursionError:
        raise StudyFileError(str(path), "(syntax)", "nested too deeply to read") from None
    return parse_study(data, str(path))
