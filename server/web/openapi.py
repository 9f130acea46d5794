"""The app's OpenAPI 3.1 document, assembled from the path fragments each blueprint registers."""
from __future__ import annotations

from typing import Any

from flask import Blueprint

blueprint = Blueprint("openapi", __name__)

_paths: dict[str, dict[str, Any]] = {}
_schemas: dict[str, dict[str, Any]] = {}

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error", "message"],
    "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
}


def register_paths(paths: dict[str, dict[str, Any]], schemas: dict[str, dict[str, Any]] | None = None) -> None:
    """Add path items (OpenAPI `paths` entries) and component schemas; called by blueprint modules at import."""
    for path, item in paths.items():
        _paths.setdefault(path, {}).update(item)
    _schemas.update(schemas or {})


def document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "empeval", "version": "1", "description": "Human evaluation of empathetic dialogue models."},
        "paths": {"/healthz": {"get": {"summary": "Liveness", "responses": {"200": {"description": "ok"}}}}, **_paths},
        "components": {
            "schemas": {"Error": ERROR_SCHEMA, **_schemas},
            "securitySchemes": {
                "inviteToken": {"type": "http", "scheme": "bearer", "description": "an annotator's invite token"},
                "inviteCookie": {"type": "apiKey", "in": "cookie", "name": "empeval_invite",
                                 "description": "set by POST /api/annotate/session; a POST it authenticates must "
                                                "also carry the X-Requested-With header"},
                "crowdUnit": {"type": "apiKey", "in": "header", "name": "X-Empeval-Unit",
                              "description": "a crowd chat unit's token (from the job's items.jsonl), sent by the "
                                             "platform's task page with the worker's platform id in "
                                             "X-Empeval-Worker; it also authenticates that unit's turns and end"},
                "adminToken": {"type": "http", "scheme": "bearer", "description": "`empeval admin-token`"},
                "adminCookie": {"type": "apiKey", "in": "cookie", "name": "empeval_admin",
                                "description": "the session set by signing in at /admin (12 hours)"},
            },
        },
    }


@blueprint.get("/openapi.json")
def openapi_json():
    return document()
