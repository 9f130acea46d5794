"""The rules of a submission body, declared once: submit.py's validator and the OpenAPI `Submission` schema
both read them, and tests/annotation/test_request_schemas.py fails when the two disagree.

Direction: the hand validator stays the judge at runtime and the JSON schema is generated from the same
declarations, not the other way round, because
- its messages say, in the annotator's terms, which item and criterion was wrong and what the scale is; a
  JSON-schema library reports a keyword and a JSON pointer, and translating those back is a second copy;
- the rules that matter most are about one assignment (each of *its* items rated exactly once, on *its*
  study's criteria and scale), which the generic document cannot know;
- jsonschema is not a dependency of the app (it comes with the dev tool schemathesis).
`submission_schema(expected)` still says everything the validator checks for one assignment, including
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
from dataclasses import dataclass
from typing import Any

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

# Field name -> required. A field not listed is refused, so a misspelt "coment" is not silently dropped.
SUBMISSION_FIELDS = {"submission_id": True, "ratings": True, "comment": False}
ENTRY_FIELDS = {"item_id": True, "scores": True, "seconds": False}


@dataclass(frozen=True)
class ExpectedRatings:
    """What one assignment's submission must contain: one entry per item, one score per criterion, each an
    integer from `low` to `high` (the study's scale)."""

    item_ids: tuple[int, ...]
    criteria: tuple[str, ...]
    low: int
    high: int


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


def submission_schema(expected: ExpectedRatings | None = None) -> dict[str, Any]:
    """The JSON schema (draft 2020-12, as OpenAPI 3.1 uses) of a submission body: for one assignment when
    `expected` is given, else the generic one in the OpenAPI document (any item ids and criteria, integer
    scores within the study's scale, which the assignment payload states)."""
    if expected is None:
        item_id: dict[str, Any] = {"type": "integer", "description": "an item of this assignment"}
        scores: dict[str, Any] = {
            "type": "object", "additionalProperties": {"type": "integer"},
            "description": "one integer score per criterion of the study, within its scale (the assignment says both)"}
    else:
        item_id = {"enum": list(expected.item_ids)}
        score = {"type": "integer", "minimum": expected.low, "maximum": expected.high}
        scores = {"type": "object", "required": list(expected.criteria), "additionalProperties": False,
                  "properties": {criterion: score for criterion in expected.criteria}}
    entry_fields = {
        "item_id": item_id,
        "scores": scores,
        "seconds": {"type": ["number", "null"], "minimum": 0, "maximum": MAX_SECONDS,
                    "description": "seconds spent on the item"},
    }
    entry = _closed_object(ENTRY_FIELDS, entry_fields)
    ratings: dict[str, Any] = {"type": "array", "items": entry,
                               "description": "exactly one entry per item of the assignment"}
    if expected is not None:
        # Each item exactly once: as many entries as items, and each item in exactly one of them.
        ratings.update(minItems=len(expected.item_ids), maxItems=len(expected.item_ids))
        ratings["allOf"] = [{"contains": {"required": ["item_id"], "properties": {"item_id": {"const": item}}},
                              "minContains": 1, "maxContains": 1}
                            for item in expected.item_ids]
    return _closed_object(SUBMISSION_FIELDS, {
        "submission_id": {"type": "string", "pattern": SUBMISSION_ID_PATTERN,
                          "description": f"{SUBMISSION_ID_RULE}, the same for every retry of one submission"},
        "comment": {"type": ["string", "null"], "maxLength": MAX_COMMENT, "pattern": STORABLE_TEXT_PATTERN,
                    "description": STORABLE_TEXT_RULE},
        "ratings": ratings,
    })


def _closed_object(fields: dict[str, bool], schemas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """An object with exactly the declared fields (a KeyError here means a field was declared without a schema)."""
    return {"type": "object", "additionalProperties": False,
            "required": [name for name, required in fields.items() if required],
            "properties": {name: schemas[name] for name in fields}}
