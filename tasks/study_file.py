"""Study files (TOML): what a researcher writes to define a study, validated field by field.

Every kind of study has these fields:

    name = "ed-likert-pilot"
    seed = 7                         # 0 to 2**31 - 1 (what the store holds on every backend)
    kind = "likert"                  # optional: the default; tasks/kinds/ lists the others ("pairwise", ...)
    compare_with = "demo"            # optional: a study the report shows beside this one (it must exist when this
                                     # one is created); an annotator sees a context at most once across the two
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
    items_per_assignment = 10        # at most, including controls (contexts are cut into near-equal blocks)
    control_rate = 0.1               # share of each assignment that is a control item
    assignment_minutes = 30          # after this an unsubmitted assignment expires
    item_comments = false            # optional: a comment box under each item (Likert and A/B), exported with it
    [pay]                            # for crowd runs; shown in the report's methods paragraph
    per_assignment = 0.60
    currency = "USD"
    [recruitment]                    # optional: how raters are recruited; the report's methods paragraph says so
    platform = "prolific"            # "local" (volunteers, the default), "prolific" or "mturk"
    prolific_study_id = "5f0c..."    # Prolific's study id (24 hex characters): the study link only admits it
    completion_code = "C1A2B3C4"     # given to a participant after a valid submit (letters and digits)
    screened_out_code = "S0C1D2E3"   # optional: given to a participant who fails the qualification ...
    failed_checks_code = "F4A5B6C7"  # ... or this one (qualification.code_on_failure = "failed_checks")
    places = 46                      # optional: the Prolific study's places; at most this many participants hold or
                                     # have submitted work at once (made-up participant ids cannot take more)
    admissions_per_minute = 5        # optional: new participants let in per client address and minute
    [qualification]                  # optional: a training of gold items a rater passes before real work
    min_correct = 3; attempts = 1    # (tasks/qualification.py; each gold item's fields are the kind's)
    [[criteria]]                     # optional: defaults to the paper's Empathy, Relevance, Fluency, asked as
    key = "empathy"; label = "Empathy"; question = "..."; definition = "..."   # the kind asks them
    [decisions]                      # optional: pre-registered comparisons, monitored anytime-validly
    comparisons = ["gold vs moel"]   # (tasks/decisions_file.py: margin, alpha, stop_when_decided, budget)

and what the study's kind adds, documented in its tasks part (tasks/kinds/likert.py: k ratings per response, the
scale, the human share of model-assisted evaluation; tasks/kinds/pairwise.py: the pairs, ties, k judgments per pair;
...). A field of another kind is refused by saying whose it is, an unknown kind by listing the registered ones.

Every error names the file and the field, e.g. `study.toml: design.ratings_per_response: must be an
integer >= 1, got 0`.
"""
from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from empeval.server.backend.controls import CONTROL_TARGETS
from empeval.server.store.kinds import DEFAULT_KIND
from empeval.server.store.storable import MAX_INTEGER, text_problem
from empeval.server.store.study_config import StudyConfig
from empeval.server.store.study_parts import (
    RECRUITMENT_PLATFORMS,
    ContextSelection,
    Criterion,
    Design,
    Pay,
    Recruitment,
)
from empeval.tasks.decisions_file import parse_decisions
from empeval.tasks.kind_parts import StudyFileError, StudyFileParts, StudyFileReader
from empeval.tasks.kinds import TaskKind, task_kind, task_kinds
from empeval.tasks.qualification import parse_qualification

# The study files that ship with empeval (the demo's among them).
STUDIES_DIR = Path(__file__).resolve().parent / "studies"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
PROLIFIC_ID_PATTERN = re.compile(r"[0-9a-f]{24}")  # Prolific's ids (study, participant, session)
COMPLETION_CODE_PATTERN = re.compile(r"[A-Za-z0-9]{1,40}")
# A Prolific study's completion codes: after a valid submit (required), and for a participant screened out or failing
# the checks (optional; one is given to whoever fails the study's qualification).
PROLIFIC_CODES = ("completion_code", "screened_out_code", "failed_checks_code")
PROLIFIC_LIMITS = ("places", "admissions_per_minute")


def parse_study(data: dict[str, Any], source: str = "<study>") -> StudyConfig:
    """Validate a parsed study file (see module docstring) and return the typed StudyConfig: the shared fields here,
    the kind's own (its setup) by the kind's tasks part (tasks/kinds/)."""
    r = StudyFileReader(source)
    kind_name = r.string(data, "kind", "kind", DEFAULT_KIND) if isinstance(data, dict) else DEFAULT_KIND
    kind = task_kind(kind_name, unknown=lambda message: r.error("kind", message))
    others = [other for other in task_kinds() if other is not kind]
    known_top = SHARED_FIELDS[""] | kind.sections
    unknown = sorted(set(data) - known_top)
    if unknown:
        raise _foreign(r, unknown[0], unknown[0], known_top, kind, others)
    name = r.string(data, "name", "name")
    if not NAME_PATTERN.fullmatch(name):
        raise r.error("name", f"{name!r} must be 1-100 letters, digits, '.', '_' or '-'")
    compare_with = ""
    if "compare_with" in data:
        compare_with = r.string(data, "compare_with", "compare_with")
        if not NAME_PATTERN.fullmatch(compare_with):
            raise r.error("compare_with", f"{compare_with!r} is not a study name (1-100 letters, digits, '.', '_' "
                          "or '-')")
        if compare_with == name:
            raise r.error("compare_with", "names this study itself; name the study to compare with")
    seed = r.integer(data, "seed", "seed", 0, minimum=0, maximum=MAX_INTEGER)  # what study.seed holds everywhere
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
    if (count is None) == (not ids) and not (kind.own_contexts and count is None):
        raise r.error("contexts", "give exactly one of count (random contexts) or ids (listed contexts)"
                      + (", or neither (all of the study's)" if kind.own_contexts else ""))
    contexts = ContextSelection(dataset=r.string(c, "dataset", "contexts.dataset", "empatheticdialogues"),
                                split=split, count=count, ids=ids,
                                emotions=r.strings(c, "emotions", "contexts.emotions"))

    s = _section(r, data, "systems", kind, others)
    if "names" not in s:
        raise r.error("systems.names", "is required: the systems whose responses are rated")
    systems = r.strings(s, "names", "systems.names")
    if not systems:
        raise r.error("systems.names", "must name at least one system")
    controls = r.strings(s, "controls", "systems.controls")
    for i, control in enumerate(controls):
        if control not in CONTROL_TARGETS:
            raise r.error(f"systems.controls[{i}]", f"unknown control {control!r}; expected one of "
                          f"{', '.join(CONTROL_TARGETS)}")
    overlap = set(systems) & set(controls)
    if overlap:
        raise r.error("systems.names", f"{sorted(overlap)[0]!r} is a control; list it under systems.controls")

    d = _section(r, data, "design", kind, others)
    design = Design(
        items_per_assignment=r.integer(d, "items_per_assignment", "design.items_per_assignment",
                                       Design.items_per_assignment, minimum=1, maximum=200),
        control_rate=r.number(d, "control_rate", "design.control_rate", Design.control_rate if controls else 0.0,
                              minimum=0.0, maximum=0.5),
        assignment_minutes=r.integer(d, "assignment_minutes", "design.assignment_minutes",
                                     Design.assignment_minutes, minimum=1, maximum=24 * 60),
        item_comments=_item_comments(r, d, kind),
    )
    if design.control_rate > 0 and not controls:
        raise r.error("design.control_rate", "is above 0 but systems.controls lists no control")
    if controls and round(design.items_per_assignment * design.control_rate) >= design.items_per_assignment:
        raise r.error("design.control_rate", "leaves no room for real items in an assignment")

    p = r.table(data, "pay", "pay", {"per_assignment", "currency", "platform_fee"})
    pay = Pay()
    if "per_assignment" in p:
        pay = Pay(per_assignment=r.number(p, "per_assignment", "pay.per_assignment", 0.0, minimum=0.0, maximum=1000.0),
                  currency=r.string(p, "currency", "pay.currency", Pay.currency),
                  platform_fee=r.number(p, "platform_fee", "pay.platform_fee", Pay.platform_fee, minimum=0.0,
                                        maximum=1.0))

    parts = StudyFileParts(name=name, seed=seed, n_contexts=count if count is not None else len(ids),
                           systems=systems, controls=controls, design=design, design_given=frozenset(d))
    setup, design = kind.parse(r, data, parts)
    compare_with = compare_with or kind.linked_study(setup)
    criteria = _criteria(r, data) if "criteria" in data else kind.criteria_asked(setup)
    recruitment = _recruitment(r, data)
    qualification = parse_qualification(r, data, kind, setup, criteria, controls, recruitment)
    terms = kind.decision_terms(setup, systems)
    if "decisions" in data and terms is None:
        # Their monitoring (server/annotation/decisions.py) reads Likert ratings and A/B judgments: a table another
        # kind accepted would never close the study nor show a state.
        raise r.error("decisions", f"is for Likert and pairwise (A/B) studies only (this study's kind is "
                                   f"{kind.name!r}): remove the [decisions] table")
    decisions = parse_decisions(r, data, systems=systems, criteria=tuple(c.key for c in criteria), terms=terms)
    return StudyConfig(name=name, seed=seed, contexts=contexts, systems=systems, controls=controls, design=design,
                       criteria=criteria, setup=setup, pay=pay, qualification=qualification,
                       title=data.get("title", "") if isinstance(data.get("title", ""), str) else "",
                       instructions=data.get("instructions", "") if isinstance(data.get("instructions", ""), str)
                       else "",
                       control_targets={c: CONTROL_TARGETS[c] for c in controls},
                       compare_with=compare_with, recruitment=recruitment, decisions=decisions)


# The fields every kind's study file has, per section ("" is the top level).
SHARED_FIELDS: dict[str, frozenset[str]] = {
    "": frozenset({"name", "seed", "title", "instructions", "contexts", "systems", "design", "pay", "criteria", "kind",
                   "compare_with", "recruitment", "qualification", "decisions"}),
    "systems": frozenset({"names", "controls"}),
    "design": frozenset({"items_per_assignment", "control_rate", "assignment_minutes", "item_comments"}),
}
# The kinds whose rater page has a comment box under each item (design.item_comments).
ITEM_COMMENT_KINDS = ("likert", "pairwise")


def _item_comments(r: StudyFileReader, design: dict, kind: TaskKind) -> bool:
    """design.item_comments: true or false (the default), and true only for a kind whose page shows the box."""
    value = design.get("item_comments", False)
    if not isinstance(value, bool):
        raise r.error("design.item_comments", f"must be true or false, got {value!r}")
    if value and kind.name not in ITEM_COMMENT_KINDS:
        raise r.error("design.item_comments", f"is for Likert and A/B studies only (kind = \"likert\" or "
                      f"\"pairwise\"), this study's kind is {kind.name!r}")
    return value


def _section(r: StudyFileReader, data: dict, section: str, kind: TaskKind, others: list[TaskKind]) -> dict:
    """A shared section's table with the fields of the study's kind; a field of another kind is refused by saying
    whose it is."""
    known = SHARED_FIELDS[section] | kind.fields.get(section, frozenset())
    value = data.get(section, {})
    if isinstance(value, dict):
        unknown = sorted(set(value) - known)
        if unknown:
            raise _foreign(r, f"{section}.{unknown[0]}", unknown[0], known, kind, others, section=section)
    return r.table(data, section, section, set(known))


def _foreign(r: StudyFileReader, path: str, field: str, known: frozenset[str] | set[str], kind: TaskKind,
             others: list[TaskKind], *, section: str = "") -> StudyFileError:
    """The error for a field the study's kind does not read: whose it is when another kind reads it, with that
    kind's hint for studies of the other kinds where it has one; else the fields expected here."""
    readers = [other.name for other in others
               if field in (other.fields.get(section, frozenset()) if section else other.sections)]
    if readers:
        kinds = " or ".join(f'"{name}"' for name in readers)
        return r.error(path, kind.foreign_hints.get(path, f"is for {' and '.join(readers)} studies only (kind = "
                                                    f"{kinds})"))
    return r.error(path, f"unknown field; expected one of {', '.join(sorted(known))}")


def _criteria(r: StudyFileReader, data: dict) -> tuple[Criterion, ...]:
    """The [[criteria]] tables, each with a key, a label, a question and an optional definition."""
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
    return tuple(parsed)


def _recruitment(r: StudyFileReader, data: dict) -> Recruitment:
    """The [recruitment] section: the platform, and for Prolific the study id the link is bound to and the
    completion codes (the one for a valid submit, required; the screened-out and failed-checks ones, which a
    participant who fails the study's qualification is given); the Prolific fields are refused on other platforms
    so a wrong platform is not missed."""
    section = r.table(data, "recruitment", "recruitment", {"platform", "prolific_study_id", *PROLIFIC_CODES,
                                                           *PROLIFIC_LIMITS})
    platform = r.string(section, "platform", "recruitment.platform", Recruitment.platform)
    if platform not in RECRUITMENT_PLATFORMS:
        raise r.error("recruitment.platform", f"unknown platform {platform!r}; expected one of "
                      f"{', '.join(RECRUITMENT_PLATFORMS)}")
    if platform != "prolific":
        for key in ("prolific_study_id", *PROLIFIC_CODES, *PROLIFIC_LIMITS):
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
    codes: dict[str, str | None] = dict.fromkeys(PROLIFIC_CODES)
    for key in PROLIFIC_CODES:
        if key not in section:
            continue
        code = r.string(section, key, f"recruitment.{key}")
        if not COMPLETION_CODE_PATTERN.fullmatch(code):
            raise r.error(f"recruitment.{key}", f"{code!r} must be 1-40 letters or digits, as Prolific's completion "
                          "codes are")
        if code in (given := [value for other, value in codes.items() if other != key and value]):
            raise r.error(f"recruitment.{key}", f"{code!r} is given for another outcome too ({', '.join(given)}): "
                          "each outcome needs its own code, or Prolific cannot tell them apart")
        codes[key] = code
    # Prolific never has more than `places` participants taking part at once, so a limit at places refuses only
    # claims no participant Prolific sent could make (server/annotation/prolific.py).
    places = r.integer(section, "places", "recruitment.places", None, minimum=1, maximum=1_000_000)
    per_minute = r.integer(section, "admissions_per_minute", "recruitment.admissions_per_minute",
                           Recruitment.admissions_per_minute, minimum=1, maximum=10_000)
    assert per_minute is not None  # it has a default
    return Recruitment(platform=platform, prolific_study_id=study_id, **codes, places=places,
                       admissions_per_minute=per_minute)


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
