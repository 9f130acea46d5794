"""The backend's JSON API: list systems, respond to one context or a batch.

Input is validated here, at the edge (400 with a message for anything malformed, never a 500); the work
is done by plain functions of server.backend that know nothing of Flask. Systems are built lazily, once
per process, and reused across requests (the retrieval index is loaded at the first request that needs it).
App config: BACKEND_CONFIG (systems file; default the built-in systems.toml), BACKEND_DATASET
(default empatheticdialogues), BACKEND_CACHE_DIR (default $EMPEVAL_CACHE_DIR or ~/.cache/empeval).
"""
from __future__ import annotations

import threading
from typing import Any

from flask import Blueprint, current_app, jsonify, request
from werkzeug.exceptions import BadRequest, NotFound

from server.backend.base import ROLES, ContextTurn, DialogueContext
from server.backend.contexts import ED_DATASET, load_contexts
from server.backend.registry import ConfigError, Registry
from server.backend.resources import BackendResources, default_cache_dir
from server.store.engine import unit_of_work
from server.web import openapi

blueprint = Blueprint("backend_api", __name__, url_prefix="/api")

MAX_BATCH = 256
MAX_TURNS = 64
MAX_TEXT = 5000
MAX_ID = 2**63 - 1  # the store's integer keys are 64-bit; larger ids cannot exist


def registry() -> Registry:
    """The app's registry, created at first use (one per app, shared by every request)."""
    app = current_app
    backend = app.extensions.get("empeval.backend")
    if backend is None:
        with app.extensions.setdefault("empeval.backend.lock", threading.Lock()):
            backend = app.extensions.get("empeval.backend")
            if backend is None:
                cache = app.config.get("BACKEND_CACHE_DIR")
                resources = BackendResources(engine=app.extensions["empeval.engine"],
                                             dataset=app.config.get("BACKEND_DATASET", ED_DATASET),
                                             cache_dir=cache or default_cache_dir(), show_progress=False)
                backend = Registry.from_config(app.config.get("BACKEND_CONFIG"), resources)
                app.extensions["empeval.backend"] = backend
    return backend


def _json_body() -> dict[str, Any]:
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object (Content-Type: application/json)")
    return body


def _system_name(body: dict[str, Any]) -> str:
    name = body.get("system")
    if not isinstance(name, str) or not name:
        raise BadRequest('"system" is required: the name of a system (GET /api/systems lists them)')
    if name not in registry().names:
        raise NotFound(f"unknown system {name!r}; configured: {', '.join(registry().names)}")
    return name


def _raw_context(value: Any, where: str) -> DialogueContext:
    if not isinstance(value, dict):
        raise BadRequest(f'{where}: "context" must be an object with "turns"')
    turns = value.get("turns")
    if not isinstance(turns, list) or not 1 <= len(turns) <= MAX_TURNS:
        raise BadRequest(f'{where}: "context.turns" must be a list of 1 to {MAX_TURNS} turns')
    parsed = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or turn.get("role") not in ROLES:
            raise BadRequest(f'{where}: turn {i} needs "role": "speaker" or "listener"')
        text = turn.get("text")
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
            raise BadRequest(f'{where}: turn {i} needs a non-empty "text" of at most {MAX_TEXT} characters')
        parsed.append(ContextTurn(turn["role"], text))
    for key in ("emotion", "situation"):
        if value.get(key) is not None and not isinstance(value.get(key), str):
            raise BadRequest(f'{where}: "context.{key}" must be a string or null')
    return DialogueContext(turns=tuple(parsed), emotion=value.get("emotion"), situation=value.get("situation"))


def _context_requests(items: list[Any]) -> list[DialogueContext]:
    """Each item is {"context_id": int} (a stored context) or {"context": {...}} (raw turns)."""
    ids: dict[int, list[int]] = {}
    contexts: list[DialogueContext | None] = []
    for position, item in enumerate(items):
        where = f"item {position}" if len(items) > 1 else "request"
        if not isinstance(item, dict):
            raise BadRequest(f"{where}: expected an object with \"context_id\" or \"context\"")
        if ("context_id" in item) == ("context" in item):
            raise BadRequest(f'{where}: give exactly one of "context_id" (a stored context) or "context" (raw turns)')
        if "context_id" in item:
            context_id = item["context_id"]
            if not isinstance(context_id, int) or isinstance(context_id, bool) or not 1 <= context_id <= MAX_ID:
                raise BadRequest(f'{where}: "context_id" must be a positive integer (at most {MAX_ID})')
            ids.setdefault(context_id, []).append(position)
            contexts.append(None)
        else:
            contexts.append(_raw_context(item["context"], where))
    if ids:
        with unit_of_work(current_app.extensions["empeval.engine"]) as session:
            found = {c.context_id: c for c in load_contexts(session, dataset=None, context_ids=list(ids))}
        missing = sorted(set(ids) - set(found))
        if missing:
            raise NotFound(f"no stored context with id {', '.join(map(str, missing[:10]))}")
        for context_id, positions in ids.items():
            for position in positions:
                contexts[position] = found[context_id]
    return contexts  # type: ignore[return-value]


def _model(name: str):
    try:
        return registry().get(name)
    except ConfigError as error:
        raise BadRequest(str(error)) from None


def _outcome_json(model, outcome) -> dict[str, Any]:
    if outcome.ok:
        return {"response": outcome.text, "provenance": outcome.provenance, "latency_ms": outcome.latency_ms}
    return {"error": outcome.error, "error_kind": outcome.error_kind, "provenance": outcome.provenance}


@blueprint.get("/systems")
def list_systems():
    systems = []
    for name in registry().names:
        spec = registry().specs[name]
        entry = {"name": name, "kind": spec.kind,
                 "parameters": {k: v for k, v in spec.parameters.items() if k != "headers"}}
        try:
            entry.update(_model(name).describe())
        except Exception as error:  # noqa: BLE001 — one broken system must not hide the others
            entry["error"] = f"{error.__class__.__name__}: {error}"
        systems.append(entry)
    return {"systems": systems}


@blueprint.post("/respond")
def respond():
    body = _json_body()
    name = _system_name(body)
    contexts = _context_requests([{k: v for k, v in body.items() if k != "system"}])
    model = _model(name)
    try:
        outcome = model.respond_batch(contexts)[0]
    except RuntimeError as error:  # e.g. retrieval with no train data imported
        return jsonify(error="Service Unavailable", message=str(error)), 503
    result = {"system": name, "kind": model.kind, "version": model.version, **_outcome_json(model, outcome)}
    if outcome.ok:
        return result
    status = 502 if outcome.error_kind == "upstream" else 422
    return jsonify(error="Bad Gateway" if status == 502 else "Unprocessable Content", message=outcome.error,
                   provenance=outcome.provenance), status


@blueprint.post("/respond/batch")
def respond_batch():
    body = _json_body()
    name = _system_name(body)
    items = body.get("contexts")
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_BATCH:
        raise BadRequest(f'"contexts" must be a list of 1 to {MAX_BATCH} items, each {{"context_id": N}} '
                         f'or {{"context": {{"turns": [...]}}}}')
    contexts = _context_requests(items)
    model = _model(name)
    try:
        outcomes = model.respond_batch(contexts)
    except RuntimeError as error:
        return jsonify(error="Service Unavailable", message=str(error)), 503
    return {"system": name, "kind": model.kind, "version": model.version,
            "results": [_outcome_json(model, o) for o in outcomes]}


_TURN = {"type": "object", "required": ["role", "text"],
         "properties": {"role": {"enum": list(ROLES)}, "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT}}}
_RAW_CONTEXT = {"type": "object", "required": ["turns"], "properties": {
    "turns": {"type": "array", "items": _TURN, "minItems": 1, "maxItems": MAX_TURNS},
    "emotion": {"type": ["string", "null"]}, "situation": {"type": ["string", "null"]}}}
_CONTEXT_REF = {"oneOf": [
    {"type": "object", "required": ["context_id"], "properties": {"context_id": {"type": "integer", "minimum": 1, "maximum": MAX_ID}}},
    {"type": "object", "required": ["context"], "properties": {"context": _RAW_CONTEXT}}]}
_ERROR = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}

openapi.register_paths(
    {
        "/api/systems": {"get": {
            "summary": "List the configured systems with kind, version and parameters",
            "responses": {"200": {"description": "systems", "content": {"application/json": {"schema": {
                "type": "object", "properties": {"systems": {"type": "array", "items": {
                    "$ref": "#/components/schemas/SystemDescription"}}}}}}}}}},
        "/api/respond": {"post": {
            "summary": "One system's response to one context (a stored context id, or raw turns)",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "allOf": [{"type": "object", "required": ["system"], "properties": {"system": {"type": "string"}}},
                          _CONTEXT_REF]}}}},
            "responses": {
                "200": {"description": "the response with its provenance", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/SystemResponse"}}}},
                "400": {"description": "malformed request", **_ERROR},
                "404": {"description": "unknown system or context id", **_ERROR},
                "422": {"description": "the system cannot answer this context (e.g. gold without a stored reference)", **_ERROR},
                "502": {"description": "the remote model failed (after retries)", **_ERROR},
                "503": {"description": "the system's data is not in the store", **_ERROR}}}},
        "/api/respond/batch": {"post": {
            "summary": f"One system's responses to up to {MAX_BATCH} contexts; per-context errors are reported in place",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["system", "contexts"], "properties": {
                    "system": {"type": "string"},
                    "contexts": {"type": "array", "items": _CONTEXT_REF, "minItems": 1, "maxItems": MAX_BATCH}}}}}},
            "responses": {
                "200": {"description": "one result per context, in order: a response or an error", "content": {
                    "application/json": {"schema": {"type": "object", "properties": {
                        "system": {"type": "string"}, "kind": {"type": "string"}, "version": {"type": "string"},
                        "results": {"type": "array", "items": {"$ref": "#/components/schemas/ContextResult"}}}}}}},
                "400": {"description": "malformed request", **_ERROR},
                "404": {"description": "unknown system or context id", **_ERROR},
                "503": {"description": "the system's data is not in the store", **_ERROR}}}},
    },
    {
        "SystemDescription": {"type": "object", "required": ["name", "kind"], "properties": {
            "name": {"type": "string"}, "kind": {"type": "string"}, "version": {"type": "string"},
            "parameters": {"type": "object"}, "error": {"type": "string"}}},
        "SystemResponse": {"type": "object", "required": ["system", "response", "provenance"], "properties": {
            "system": {"type": "string"}, "kind": {"type": "string"}, "version": {"type": "string"},
            "response": {"type": "string"}, "provenance": {"type": "object"}, "latency_ms": {"type": "number"}}},
        "ContextResult": {"type": "object", "properties": {
            "response": {"type": "string"}, "error": {"type": "string"}, "error_kind": {"type": "string"},
            "provenance": {"type": "object"}, "latency_ms": {"type": "number"}}},
    },
)
