"""The backend's JSON API: list systems, respond to one context or a batch. For the researcher only.

Every route takes the admin token (`Authorization: Bearer`, or the admin session cookie): a rater who could
call it could re-run the systems on the context they are rating and learn which system wrote the reply, read
the gold reply, or keep the CPU busy. An invite token gets 403. A batch is bounded: at most MAX_BATCH contexts
(400 beyond) in a body of at most MAX_CONTENT_LENGTH bytes (413 beyond).

Input is validated at the edge, by server.web.request_schemas (400 with a message for anything malformed,
never a 500; the same declarations generate the OpenAPI request schemas); the work is done by plain
functions of server.backend that know nothing of Flask. Systems are built lazily, once
per process, and reused across requests (the retrieval index is loaded at the first request that needs it).
App config: BACKEND_CONFIG (systems file; default the built-in systems.toml), BACKEND_DATASET
(default empatheticdialogues), BACKEND_CACHE_DIR (default $EMPEVAL_CACHE_DIR or ~/.cache/empeval).
"""
from __future__ import annotations

import threading
from typing import Any

from flask import Blueprint, current_app, jsonify, request

from empeval.server.backend.base import DialogueContext
from empeval.server.backend.contexts import ED_DATASET, load_contexts
from empeval.server.backend.registry import Registry
from empeval.server.backend.resources import BackendResources, default_cache_dir
from empeval.server.errors import NotFound
from empeval.server.store.engine import unit_of_work
from empeval.server.web import openapi
from empeval.server.web.auth import require_admin
from empeval.server.web.request_schemas import (
    MAX_BATCH,
    ContextRequest,
    batch_request,
    batch_schema,
    respond_request,
    respond_schema,
)

blueprint = Blueprint("backend_api", __name__, url_prefix="/api")
blueprint.before_request(require_admin)


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


def _json_body() -> Any:
    # Not JSON (or the wrong content type) reads as None, which the parsers refuse as "not a JSON object".
    return request.get_json(silent=True)


def _known_system(name: str) -> str:
    if name not in registry().names:
        raise NotFound(f"unknown system {name!r}; configured: {', '.join(registry().names)}")
    return name


def _contexts(requests: list[ContextRequest]) -> list[DialogueContext]:
    """The contexts asked for, in order: raw ones as sent, stored ones loaded by id (404 for any missing)."""
    ids = sorted({r for r in requests if isinstance(r, int)})
    found: dict[int, DialogueContext] = {}
    if ids:
        with unit_of_work(current_app.extensions["empeval.engine"]) as session:
            found = {c.context_id: c for c in load_contexts(session, dataset=None, context_ids=ids)
                     if c.context_id is not None}
        missing = [i for i in ids if i not in found]
        if missing:
            raise NotFound(f"no stored context with id {', '.join(map(str, missing[:10]))}")
    return [found[r] if isinstance(r, int) else r for r in requests]


def _model(name: str):
    return registry().get(name)  # a ConfigError (a BadInput) answers 400 with its message


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
    name, context = respond_request(_json_body())
    model = _model(_known_system(name))
    contexts = _contexts([context])
    try:
        outcome = model.respond_batch(contexts)[0]
    except RuntimeError as error:  # e.g. retrieval with no train data imported
        return jsonify(error="Service Unavailable", message=str(error)), 503
    result = {"system": name, "kind": model.kind, "version": model.version, **_outcome_json(model, outcome)}
    if outcome.ok:
        return result
    status = 502 if outcome.upstream_failed else 422
    return jsonify(error="Bad Gateway" if status == 502 else "Unprocessable Content", message=outcome.error,
                   provenance=outcome.provenance), status


@blueprint.post("/respond/batch")
def respond_batch():
    name, requests = batch_request(_json_body())
    model = _model(_known_system(name))
    contexts = _contexts(requests)
    try:
        outcomes = model.respond_batch(contexts)
    except RuntimeError as error:
        return jsonify(error="Service Unavailable", message=str(error)), 503
    return {"system": name, "kind": model.kind, "version": model.version,
            "results": [_outcome_json(model, o) for o in outcomes]}


_ERROR = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
_ADMIN: list[dict[str, list[str]]] = [{"adminToken": []}, {"adminCookie": []}]
_GUARDED = {"401": {"description": "no admin token", **_ERROR},
            "403": {"description": "not the admin token (an invite token is refused too)", **_ERROR},
            "429": {"description": "too many failed token checks from this address (see Retry-After)", **_ERROR}}

openapi.register_paths(
    {
        "/api/systems": {"get": {
            "summary": "List the configured systems with kind, version and parameters",
            "security": _ADMIN,
            "responses": {"200": {"description": "systems", "content": {"application/json": {"schema": {
                "type": "object", "properties": {"systems": {"type": "array", "items": {
                    "$ref": "#/components/schemas/SystemDescription"}}}}}}}, **_GUARDED}}},
        "/api/respond": {"post": {
            "summary": "One system's response to one context (a stored context id, or raw turns)",
            "security": _ADMIN,
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "$ref": "#/components/schemas/RespondRequest"}}}},
            "responses": {
                "200": {"description": "the response with its provenance", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/SystemResponse"}}}},
                "400": {"description": "malformed request", **_ERROR},
                "404": {"description": "unknown system or context id", **_ERROR},
                "422": {"description": "the system cannot answer this context (e.g. gold without a stored reference)",
                        **_ERROR},
                "413": {"description": "body larger than the app's MAX_CONTENT_LENGTH", **_ERROR},
                "502": {"description": "the remote model failed (after retries)", **_ERROR},
                "503": {"description": "the system's data is not in the store", **_ERROR}, **_GUARDED}}},
        "/api/respond/batch": {"post": {
            "summary": f"One system's responses to up to {MAX_BATCH} contexts; per-context errors are reported "
                       "in place",
            "security": _ADMIN,
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "$ref": "#/components/schemas/BatchRequest"}}}},
            "responses": {
                "200": {"description": "one result per context, in order: a response or an error", "content": {
                    "application/json": {"schema": {"type": "object", "properties": {
                        "system": {"type": "string"}, "kind": {"type": "string"}, "version": {"type": "string"},
                        "results": {"type": "array", "items": {"$ref": "#/components/schemas/ContextResult"}}}}}}},
                "400": {"description": "malformed request", **_ERROR},
                "404": {"description": "unknown system or context id", **_ERROR},
                "413": {"description": "body larger than the app's MAX_CONTENT_LENGTH", **_ERROR},
                "503": {"description": "the system's data is not in the store", **_ERROR}, **_GUARDED}}},
    },
    {
        # Generated from the parsers' declarations (server.web.request_schemas), not copied.
        "RespondRequest": respond_schema(),
        "BatchRequest": batch_schema(),
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
