"""What the app refuses before any route runs, and how it answers when the store fails; installed by create_app
with one call, `install_input_guards(app)`.

- a request body nested deeper than json_limits.MAX_JSON_DEPTH: 400 (the app's JSON provider refuses it);
- a NUL character anywhere in the URL (path or query, names or values): 400; no route takes one, and
  PostgreSQL cannot even compare a text with one (the study name in /api/studies/<name>/progress);
- an integer in the path beyond the store's integer keys (storable.MAX_ROW_ID): 404 before any query, as
  SQLite (past 2**63 - 1) and PostgreSQL (past 2**31 - 1) would otherwise fail differently, both with a 500;
- a storage failure (a full disk, a read-only or unreachable database): 503 with a one-line message, and the
  next request tries again (storage_errors).
Text fields of the bodies (a comment, a turn's text) are the validators' business: they name the field.
"""
from __future__ import annotations

from flask import Flask, request
from sqlalchemy.exc import DBAPIError
from werkzeug.exceptions import BadRequest

from empeval.server.errors import NotFound
from empeval.server.store.storable import MAX_ROW_ID
from empeval.server.web.json_limits import LimitedJSONProvider
from empeval.server.web.storage_errors import storage_error_as_json

_INSTALLED = "empeval.input_guards"


def install_input_guards(app: Flask) -> None:
    """Install everything in the module docstring on `app` (a second call changes nothing)."""
    if app.extensions.get(_INSTALLED):
        return
    app.json = LimitedJSONProvider(app)
    app.before_request(refuse_unusable_urls)
    app.register_error_handler(DBAPIError, storage_error_as_json)
    app.extensions[_INSTALLED] = True


def refuse_unusable_urls() -> None:
    """400 for a NUL anywhere in the URL; 404 for a path integer that no row of the store can have."""
    if "\x00" in request.path:
        raise BadRequest("the URL path contains a NUL character (%00), which no name or id can hold")
    for key, value in request.args.items(multi=True):
        if "\x00" in key or "\x00" in value:
            raise BadRequest(f"the query parameter {key!r} contains a NUL character (%00), which no value can hold")
    for name, value in (request.view_args or {}).items():
        if isinstance(value, int) and not -MAX_ROW_ID <= value <= MAX_ROW_ID:
            raise NotFound(f"no {name.removesuffix('_id')} {value} (ids are at most {MAX_ROW_ID})")
