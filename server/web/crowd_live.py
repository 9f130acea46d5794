"""Who is at a chat's live routes, and the cross-origin answers a crowd task page needs.

A local or Prolific rater is an invite (server.web.auth.current_annotator). A crowd worker's page is served by the
platform's router at another origin (Mephisto's, e.g. http://127.0.0.1:3000 or the job's public URL), so it calls
this server cross-origin with the unit's token (`X-Empeval-Unit`) and her platform id (`X-Empeval-Worker`), never
with a cookie (server.annotation.crowd_units says what the token allows).

Cross-origin answers (CORS) are granted only to requests that authenticate by that header: a preflight asking for
it, and the requests carrying it. They allow any origin but never credentials, and never the X-Requested-With
header, so the cookie routes keep their CSRF rule (no preflight with X-Requested-With is ever granted). A
library such as flask-cors grants per route and origin; what decides here is which header authenticates the
request, so the few lines are written out.
"""
from __future__ import annotations

from flask import Blueprint, current_app, request
from werkzeug.exceptions import Unauthorized
from werkzeug.wrappers import Response

from empeval.server.annotation.crowd_units import InvalidUnit, OnOpen, read_unit_token, unit_annotator
from empeval.server.web.auth import current_annotator, limited_token_check, signing_secret

UNIT_HEADER = "X-Empeval-Unit"
WORKER_HEADER = "X-Empeval-Worker"
ALLOWED_HEADERS = ("Content-Type", UNIT_HEADER, WORKER_HEADER)
PREFLIGHT_SECONDS = 600


def live_annotator(assignment_id: int, *, on_open: OnOpen = "refuse", units_only: bool = False) -> tuple[int, str]:
    """(annotator_id, study) of whoever calls a chat's live route: the crowd worker of the unit token in
    X-Empeval-Unit (`on_open` says what her call does to a unit nobody holds yet: crowd_units.unit_annotator), else,
    unless `units_only`, the invite of a local or Prolific rater. A bad unit token counts as a failed token check
    (429 after too many from one address)."""
    token = request.headers.get(UNIT_HEADER)
    if token is None:
        if units_only:
            raise Unauthorized(f"this route serves crowd task pages: send the unit's token as {UNIT_HEADER} (a local "
                               "rater's page reads its assignment from /api/annotate/next)")
        return current_annotator()
    with limited_token_check(InvalidUnit):
        unit = read_unit_token(signing_secret(), token.strip())
        worker = request.headers.get(WORKER_HEADER)
        return unit_annotator(current_app.extensions["empeval.engine"], signing_secret(), unit, assignment_id,
                              worker or "", on_open=on_open)


def allow_unit_requests_across_origins(blueprint: Blueprint) -> None:
    """Answer the blueprint's cross-origin requests that authenticate by a unit token (see the module docstring)."""

    @blueprint.after_request
    def unit_cors(response: Response) -> Response:
        if not request.headers.get("Origin"):
            return response
        asked = {h.strip().lower() for h in request.headers.get("Access-Control-Request-Headers", "").split(",")}
        preflight = request.method == "OPTIONS" and UNIT_HEADER.lower() in asked
        if preflight and asked <= {h.lower() for h in ALLOWED_HEADERS}:
            response.headers["Access-Control-Allow-Origin"] = "*"
            response.headers["Access-Control-Allow-Methods"] = "GET, POST"
            response.headers["Access-Control-Allow-Headers"] = ", ".join(ALLOWED_HEADERS)
            response.headers["Access-Control-Max-Age"] = str(PREFLIGHT_SECONDS)
        elif UNIT_HEADER in request.headers:
            response.headers["Access-Control-Allow-Origin"] = "*"
        return response
