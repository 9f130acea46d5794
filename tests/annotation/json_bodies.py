"""JSON bodies drawn from a JSON schema, and the reference judge of whether a body fits one; shared by the drift
tests of the request schemas (tests/annotation and tests/backend).

Bodies come from schemathesis' generator (the one that fuzzes the app), fed a one-operation OpenAPI document:
"positive" bodies fit the schema, "negative" ones are mutated not to (checked again here). The judge is
jsonschema_rs, which matches `pattern` as ECMA-262 regexes, as JSON Schema specifies; the pure-Python jsonschema
uses `re.search`, whose `$` also matches before a final newline, and would let "abcdefgh\\n" pass as an id.
"""
from __future__ import annotations

from typing import Any

import jsonschema_rs
import schemathesis
from hypothesis import strategies as st
from schemathesis.generation.modes import GenerationMode


def bodies(schema: dict[str, Any], *, fitting: bool = True) -> st.SearchStrategy[Any]:
    """Bodies that fit `schema` (or, with fitting=False, JSON bodies that do not)."""
    document = {"openapi": "3.1.0", "info": {"title": "drift", "version": "1"}, "paths": {"/body": {"post": {
        "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}},
        "responses": {"200": {"description": "ok"}}}}}}
    operation = schemathesis.openapi.from_dict(document)["/body"]["POST"]
    mode = GenerationMode.POSITIVE if fitting else GenerationMode.NEGATIVE
    drawn = operation.as_strategy(generation_mode=mode).map(lambda case: case.body)
    if fitting:
        return drawn
    judge = jsonschema_rs.validator_for(schema)
    # Negative generation may also send raw bytes (not JSON at all) or, rarely, a body that still fits.
    return drawn.filter(lambda body: not isinstance(body, (bytes, bytearray)) and not judge.is_valid(body))


def fits(schema: dict[str, Any], body: Any) -> bool:
    return jsonschema_rs.validator_for(schema).is_valid(body)


def why_not(schema: dict[str, Any], body: Any) -> str:
    return "; ".join(f"{'/'.join(map(str, error.instance_path))}: {shown(error.message)}"
                     for error in jsonschema_rs.validator_for(schema).iter_errors(body))


def shown(value: Any, limit: int = 300) -> str:
    """A body or message short enough to read in a failure (a 2,001-character comment is not)."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"
