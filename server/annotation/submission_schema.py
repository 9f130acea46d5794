"""The rules of a submission body, declared once: the validators (the envelope here, each kind's entries in its
annotation part) and the OpenAPI `Submission` schemas both read them, and the drift tests
(tests/annotation/test_request_schemas.py, test_pairwise_submit.py) fail when the two disagree.

A body is the same envelope for every kind of study,
    {"submission_id": "3f2c…", "comment": "optional", "<entries>": [...]}
where `<entries>` is what the kind lists its answers under ("ratings" for Likert, "judgments" for A/B, ...), one
entry per unit of the assignment, each `{"item_id": ..., <the kind's answer fields>, "seconds": ...}`.

Direction: the hand validator stays the judge at runtime and the JSON schema is generated from the same
declarations, not the other way round, because
- its messages say, in the annotator's terms, which item and criterion was wrong and what the scale is; a
  JSON-schema library reports a keyword and a JSON pointer, and translating those back is a second copy;
- the rules that matter most are about one assignment (each of *its* items answered exactly once, on *its*
  study's criteria), which the generic document cannot know;
- jsonschema is not a dependency of the app (it comes with the dev tool schemathesis).
`submission_schema(kind, expected)` still says everything the validator checks for one assignment, including
"each item exactly once" (with `contains`/`minContains`/`maxContains`), so the drift tests can compare the
two sides on that assignment; without an assignment it is the generic schema the OpenAPI document serves.

Two choices keep both sides saying the same thing:
- "integer" is JSON Schema's: a number with no fractional part, so 4.0 is the integer 4 and `true` is not
  an integer (`json_integer`);
- patterns are matched as the standard's ECMA-262 regexes are: anchored at the very end of the string (Python's
  `$` would also match before a final newline, so the validator uses `fullmatch`).
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from empeval.server.errors import BadInput
from empeval.server.store.storable import text_problem

if TYPE_CHECKING:
    from empeval.server.annotation.kinds import AnnotationKind

SUBMISSION_ID_PATTERN = "^[A-Za-z0-9_.:-]{8,100}$"
SUBMISSION_ID = re.compile(SUBMISSION_ID_PATTERN.removeprefix("^").removesuffix("$"))
SUBMISSION_ID_RULE = "a string of 8-100 letters, digits, '_', '.', ':' or '-'"
MAX_COMMENT = 2000
# Text the store can hold (server.store.storable): no NUL. The other half of that rule, no unpaired surrogate,
# has no pattern both regex dialects read alike (ECMA-262 sees the two halves of every emoji as surrogates),
# so the schema states it in words and only the validator checks it.
STORABLE_TEXT_PATTERN = "^[^\\u0000]*$"
STORABLE_TEXT_RULE = "no NUL character and no unpaired surrogate"
MAX_SECONDS = 24 * 3600


class Envelope(NamedTuple):
    """A submission body's envelope, checked: its id, its comment (None when none) and its entries, unchecked."""

    submission_id: str
    comment: str | None
    entries: Any


def envelope_fields(kind: AnnotationKind) -> dict[str, bool]:
    """Field name -> required, for a body of this kind. A field not listed is refused, so a misspelt "coment" is
    not silently dropped."""
    return {"submission_id": True, kind.entries: True, "comment": False}


def refuse_unknown_fields(value: dict, fields: dict[str, bool], where: str) -> None:
    """BadInput naming the first field of `value` that `fields` does not declare."""
    unknown = sorted(set(value) - set(fields), key=str)
    if unknown:
        raise BadInput(f"{where}unknown field {unknown[0]!r}; expected {', '.join(fields)}")


def validate_envelope(payload: Any, kind: AnnotationKind) -> Envelope:
    """The body's submission id and comment checked, and its entries as sent (the kind checks those); BadInput
    saying what was wrong."""
    if not isinstance(payload, dict):
        raise BadInput(f"body must be a JSON object with submission_id and {kind.entries}")
    refuse_unknown_fields(payload, envelope_fields(kind), "")
    submission_id = payload.get("submission_id")
    if not isinstance(submission_id, str) or not SUBMISSION_ID.fullmatch(submission_id):
        raise BadInput(f"submission_id must be {SUBMISSION_ID_RULE}")
    comment = payload.get("comment")
    if comment is not None and (not isinstance(comment, str) or len(comment) > MAX_COMMENT):
        raise BadInput(f"comment must be a string of at most {MAX_COMMENT} characters")
    if comment is not None and (problem := text_problem(comment)):
        raise BadInput(f"comment {problem}")
    return Envelope(submission_id, comment, payload.get(kind.entries))


def json_integer(value: Any) -> int | None:
    """The value as an int if JSON Schema calls it an integer (4 and 4.0, never `true`), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def json_number(value: Any) -> float | None:
    """The value as a float if it is a finite JSON number (never `true`), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer literal too large for a float is no number of seconds anyway
        return None
    return number if math.isfinite(number) else None


def entry_item(entry: Any, where: str, fields: dict[str, bool], item_ids: Sequence[int], taken: set[int], *,
               verb: str) -> int:
    """An entry's unit id, checked: the entry is an object of the declared `fields`, its item_id an integer, a
    unit of this assignment (`item_ids`), not answered by an earlier entry (`taken`, to which it is added; `verb`
    says how, "rated twice"). BadInput naming the entry otherwise."""
    if not isinstance(entry, dict):
        required = " and ".join(name for name, needed in fields.items() if needed)
        raise BadInput(f"{where} must be an object with {required}")
    refuse_unknown_fields(entry, fields, f"{where}: ")
    item_id = json_integer(entry.get("item_id"))
    if item_id is None:
        raise BadInput(f"{where}.item_id must be an integer")
    if item_id not in item_ids:
        raise BadInput(f"{where}: item {item_id} is not part of this assignment")
    if item_id in taken:
        raise BadInput(f"{where}: item {item_id} is {verb}")
    taken.add(item_id)
    return item_id


def entry_seconds(entry: dict, where: str) -> float | None:
    """The seconds spent on a unit, when sent: a number from 0 to MAX_SECONDS, else BadInput."""
    seconds = entry.get("seconds")
    if seconds is None:
        return None
    seconds = json_number(seconds)
    if seconds is None or not 0 <= seconds <= MAX_SECONDS:
        raise BadInput(f"{where}.seconds must be a number from 0 to {MAX_SECONDS}")
    return seconds


def refuse_missing_units(item_ids: Sequence[int], answered: dict[int, Any], *, what: str, units: str) -> None:
    """BadInput naming the first unit of the assignment with no entry ("has no rating"; `units`: "items")."""
    missing = [item for item in item_ids if item not in answered]
    if missing:
        raise BadInput(f"item {missing[0]} of this assignment has no {what} "
                       f"({len(missing)} of {len(item_ids)} {units} missing)")


def entries_schema(entry_fields: dict[str, bool], properties: dict[str, dict[str, Any]], item_ids: Sequence[int] | None,
                   *, unit: str) -> dict[str, Any]:
    """The JSON schema of an entries list whose entries have `properties` (item_id and seconds added here): for
    one assignment, exactly one entry per unit of `item_ids`; without them, the generic list."""
    item_id: dict[str, Any] = ({"type": "integer", "description": f"a {unit} of this assignment"}
                               if item_ids is None else {"enum": list(item_ids)})
    entry = closed_object(entry_fields, {
        "item_id": item_id, **properties,
        "seconds": {"type": ["number", "null"], "minimum": 0, "maximum": MAX_SECONDS,
                    "description": f"seconds spent on the {unit}"},
    })
    listed: dict[str, Any] = {"type": "array", "items": entry,
                              "description": f"exactly one entry per {unit} of the assignment"}
    if item_ids is not None:
        # Each unit exactly once: as many entries as units, and each unit in exactly one of them.
        listed.update(minItems=len(item_ids), maxItems=len(item_ids))
        listed["allOf"] = [{"contains": {"required": ["item_id"], "properties": {"item_id": {"const": item}}},
                            "minContains": 1, "maxContains": 1}
                           for item in item_ids]
    return listed


def submission_schema(kind: AnnotationKind, expected: Any | None = None) -> dict[str, Any]:
    """The JSON schema (draft 2020-12, as OpenAPI 3.1 uses) of a submission body of this kind: for one assignment
    when `expected` is given, else the generic one in the OpenAPI document."""
    return closed_object(envelope_fields(kind), {
        "submission_id": {"type": "string", "pattern": SUBMISSION_ID_PATTERN,
                          "description": f"{SUBMISSION_ID_RULE}, the same for every retry of one submission"},
        "comment": {"type": ["string", "null"], "maxLength": MAX_COMMENT, "pattern": STORABLE_TEXT_PATTERN,
                    "description": STORABLE_TEXT_RULE},
        kind.entries: kind.entries_schema(expected),
    })


def closed_object(fields: dict[str, bool], schemas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """An object with exactly the declared fields (a KeyError here means a field was declared without a schema)."""
    return {"type": "object", "additionalProperties": False,
            "required": [name for name, required in fields.items() if required],
            "properties": {name: schemas[name] for name in fields}}
