"""The backend API's request bodies (POST /api/respond and /api/respond/batch), declared once: the parsers here
check them and the JSON schemas in the OpenAPI document are generated from the same declarations.
tests/backend/test_request_schemas.py fails when the two disagree.

The direction is the submission's (see server.annotation.submission_schema): the parsers stay the judges and
say in the caller's terms what was wrong and where ("item 3: turn 0 needs a non-empty text ..."); the schemas
follow from the same constants. The parsers are pure: whether a system or a stored context exists is the
route's business (404), not the body's shape (400).
"""
from __future__ import annotations

import re
from typing import Any

from empeval.server.annotation.submission_schema import STORABLE_TEXT_PATTERN, STORABLE_TEXT_RULE, json_integer
from empeval.server.backend.base import ROLES, ContextTurn, DialogueContext
from empeval.server.errors import BadInput
from empeval.server.store.storable import MAX_ROW_ID, text_problem

MAX_BATCH = 256
MAX_TURNS = 64
MAX_TEXT = 5000
MAX_ID = MAX_ROW_ID  # the store's integer keys (32-bit on PostgreSQL): a larger id names no stored context

# A turn's text must have a character that is not blank. "Blank" is whitespace to Python's str.isspace or to
# ECMA-262's \s (what a JSON Schema pattern means by it), spelt out so that both regex engines read one set.
NOT_BLANK_PATTERN = r"[^ \t\n\v\f\r\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
NOT_BLANK = re.compile(NOT_BLANK_PATTERN)

# Field name -> required; fields not listed are refused.
CONTEXT_REF_FIELDS = {"context_id": False, "context": False}  # exactly one of them: a stored context, or raw turns
RESPOND_FIELDS = {"system": True, **CONTEXT_REF_FIELDS}
BATCH_FIELDS = {"system": True, "contexts": True}
RAW_CONTEXT_FIELDS = {"turns": True, "emotion": False, "situation": False}
TURN_FIELDS = {"role": True, "text": True}

ContextRequest = int | DialogueContext  # a stored context's id, or raw turns

_ROLES_SAID = " or ".join(f'"{role}"' for role in ROLES)


def _refuse_unknown_fields(value: dict, fields: dict[str, bool], where: str) -> None:
    unknown = sorted(set(value) - set(fields), key=str)
    if unknown:
        raise BadInput(f"{where}unknown field {unknown[0]!r}; expected {', '.join(fields)}")


def _body(body: Any, fields: dict[str, bool]) -> tuple[str, dict[str, Any]]:
    if not isinstance(body, dict):
        raise BadInput("the request body must be a JSON object (Content-Type: application/json)")
    _refuse_unknown_fields(body, fields, "")
    name = body.get("system")
    if not isinstance(name, str) or not name:
        raise BadInput('"system" is required: the name of a system (GET /api/systems lists them)')
    return name, body


def respond_request(body: Any) -> tuple[str, ContextRequest]:
    """The system named and the one context asked for by a POST /api/respond body."""
    name, body = _body(body, RESPOND_FIELDS)
    return name, _context_request({k: v for k, v in body.items() if k != "system"}, "request")


def batch_request(body: Any) -> tuple[str, list[ContextRequest]]:
    """The system named and the contexts asked for, in order, by a POST /api/respond/batch body."""
    name, body = _body(body, BATCH_FIELDS)
    items = body.get("contexts")
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_BATCH:
        raise BadInput(f'"contexts" must be a list of 1 to {MAX_BATCH} items, each {{"context_id": N}} '
                       f'or {{"context": {{"turns": [...]}}}}')
    return name, [_context_request(item, f"item {i}" if len(items) > 1 else "request") for i, item in enumerate(items)]


def _context_request(item: Any, where: str) -> ContextRequest:
    if not isinstance(item, dict):
        raise BadInput(f'{where}: expected an object with "context_id" or "context"')
    _refuse_unknown_fields(item, CONTEXT_REF_FIELDS, f"{where}: ")
    if ("context_id" in item) == ("context" in item):
        raise BadInput(f'{where}: give exactly one of "context_id" (a stored context) or "context" (raw turns)')
    if "context_id" in item:
        context_id = json_integer(item["context_id"])
        if context_id is None or not 1 <= context_id <= MAX_ID:
            raise BadInput(f'{where}: "context_id" must be a positive integer (at most {MAX_ID})')
        return context_id
    return _raw_context(item["context"], where)


def _raw_context(value: Any, where: str) -> DialogueContext:
    if not isinstance(value, dict):
        raise BadInput(f'{where}: "context" must be an object with "turns"')
    _refuse_unknown_fields(value, RAW_CONTEXT_FIELDS, f'{where}: "context" has ')
    turns = value.get("turns")
    if not isinstance(turns, list) or not 1 <= len(turns) <= MAX_TURNS:
        raise BadInput(f'{where}: "context.turns" must be a list of 1 to {MAX_TURNS} turns')
    parsed = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or turn.get("role") not in ROLES:
            raise BadInput(f'{where}: turn {i} needs "role": {_ROLES_SAID}')
        _refuse_unknown_fields(turn, TURN_FIELDS, f"{where}: turn {i} has ")
        text = turn.get("text")
        if not isinstance(text, str) or not NOT_BLANK.search(text) or len(text) > MAX_TEXT:
            raise BadInput(f'{where}: turn {i} needs a non-empty "text" of at most {MAX_TEXT} characters')
        # Systems hash, encode and tokenize the text: a NUL or an unpaired surrogate would fail there, as a 500.
        if problem := text_problem(text):
            raise BadInput(f'{where}: turn {i}: "text" {problem}')
        parsed.append(ContextTurn(turn["role"], text))
    for key in ("emotion", "situation"):
        if value.get(key) is not None and not isinstance(value.get(key), str):
            raise BadInput(f'{where}: "context.{key}" must be a string or null')
        if isinstance(value.get(key), str) and (problem := text_problem(value[key])):
            raise BadInput(f'{where}: "context.{key}" {problem}')
    return DialogueContext(turns=tuple(parsed), emotion=value.get("emotion"), situation=value.get("situation"))


# The JSON schemas, from the declarations above.

def _closed_object(fields: dict[str, bool], schemas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """An object with exactly the declared fields (a KeyError here means a field was declared without a schema)."""
    return {"type": "object", "additionalProperties": False,
            "required": [name for name, required in fields.items() if required],
            "properties": {name: schemas[name] for name in fields}}


_SYSTEM = {"type": "string", "minLength": 1, "description": "a system's name (GET /api/systems lists them)"}


def _context_ref_fields() -> dict[str, dict[str, Any]]:
    turn = _closed_object(TURN_FIELDS, {
        "role": {"enum": list(ROLES)},
        "text": {"type": "string", "maxLength": MAX_TEXT, "pattern": NOT_BLANK_PATTERN,
                 "allOf": [{"pattern": STORABLE_TEXT_PATTERN}],
                 "description": f"not empty, nor only whitespace; {STORABLE_TEXT_RULE}"}})
    optional_text = {"type": ["string", "null"], "pattern": STORABLE_TEXT_PATTERN, "description": STORABLE_TEXT_RULE}
    raw_context = _closed_object(RAW_CONTEXT_FIELDS, {
        "turns": {"type": "array", "items": turn, "minItems": 1, "maxItems": MAX_TURNS},
        "emotion": optional_text, "situation": optional_text})
    return {"context_id": {"type": "integer", "minimum": 1, "maximum": MAX_ID, "description": "a stored context"},
            "context": raw_context}


def _one_context_ref(fields: dict[str, bool], schemas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The declared fields plus exactly one way of naming a context: a closed object for each way."""
    refs = _context_ref_fields()
    return {"oneOf": [_closed_object({**fields, chosen: True}, {**schemas, chosen: refs[chosen]})
                      for chosen in CONTEXT_REF_FIELDS]}


def respond_schema() -> dict[str, Any]:
    """The JSON schema of a POST /api/respond body."""
    others = {name: required for name, required in RESPOND_FIELDS.items() if name not in CONTEXT_REF_FIELDS}
    return _one_context_ref(others, {"system": _SYSTEM})


def batch_schema() -> dict[str, Any]:
    """The JSON schema of a POST /api/respond/batch body."""
    return _closed_object(BATCH_FIELDS, {
        "system": _SYSTEM,
        "contexts": {"type": "array", "items": _one_context_ref({}, {}),
                     "minItems": 1, "maxItems": MAX_BATCH}})
