"""Routes annotators use: the task page, exchanging the invite token for a cookie, their next assignment, and
submitting it.

An invite link is `/annotate#<token>`: browsers never send the part after `#`, so the token reaches no
access log. The page posts it once to /api/annotate/session (as `Authorization: Bearer`), gets an HttpOnly,
SameSite=Strict cookie back and removes the token from the address bar. Old links, `/annotate/<token>`, get
the same page and the same exchange.
"""
from __future__ import annotations

from pathlib import Path

from flask import Blueprint, current_app, jsonify, request, send_from_directory
from werkzeug.exceptions import BadRequest, NotFound, Unauthorized, UnsupportedMediaType

from empeval.server.annotation.handout import (
    SubmittedOnProlific,
    current_assignment_payload,
    decline,
    next_assignment_payload,
)
from empeval.server.annotation.kinds import annotation_kinds
from empeval.server.annotation.prolific import PROVIDER, completion_after_submit
from empeval.server.annotation.submission import submit_assignment
from empeval.server.annotation.submission_schema import submission_schema
from empeval.server.web import openapi
from empeval.server.web.auth import INVITE_COOKIE, bearer_token, check_invite, current_annotator, set_invite_cookie

blueprint = Blueprint("annotate", __name__)


def _engine():
    return current_app.extensions["empeval.engine"]


def _ui_dir() -> Path:
    """The task UI bundle's folder, handed down as configuration (TASK_UI_DIR) by whoever builds the app."""
    folder = current_app.config.get("TASK_UI_DIR")
    if not folder:
        raise NotFound("this app was started without a task UI (TASK_UI_DIR is not configured)")
    return Path(folder)


@blueprint.get("/annotate")
@blueprint.get("/annotate/<path:token>")
def task_page(token: str | None = None):
    """The task page; its script takes the token from the address (after `#`, or the old path form), trades it
    for a cookie at /api/annotate/session and talks to the API below."""
    index = _ui_dir() / "index.html"
    if not index.is_file():
        raise NotFound(f"the task UI is not built ({index} missing): run `make ui`")
    return send_from_directory(_ui_dir(), "index.html", max_age=0)


@blueprint.post("/api/annotate/session")
def start_session():
    """Trade the invite token (`Authorization: Bearer`) for the invite cookie. Taking the token from a header,
    never from a form, means another site cannot plant its own invite in a rater's browser."""
    token = bearer_token()
    if token is None:
        raise Unauthorized("send the invite token as `Authorization: Bearer <token>`")
    _annotator_id, study = check_invite(token)
    response = jsonify(study=study)
    set_invite_cookie(response, token)
    return response


@blueprint.get("/task-ui/<path:filename>")
def task_assets(filename: str):
    return send_from_directory(_ui_dir(), filename, max_age=300)


@blueprint.get("/api/annotate/next")
def next_for_me():
    """Her assignment: the one she holds, else one claimed for her now; with `?claim=no` only the one she holds
    (null when none, with the study's name, title and kind), so the task page can ask for her consent before
    anything is claimed, and claims once she accepts."""
    annotator_id, study = current_annotator()
    claim = request.args.get("claim", "yes")
    if claim not in ("yes", "no"):
        raise BadRequest(f"claim must be yes or no, got {claim[:40]!r}")
    try:
        if claim == "no":
            view, held = current_assignment_payload(_engine(), study, annotator_id)
            return {"assignment": held,
                    "study": {"name": view.name, "title": view.config.title, "kind": view.config.kind}}
        assignment = next_assignment_payload(_engine(), study, annotator_id)
    except SubmittedOnProlific as done:
        return _completed(done)
    if assignment is None:
        return {"assignment": None,
                "message": "There is no assignment left for you in this study. Thank you for your help!"}
    return {"assignment": assignment}


@blueprint.post("/api/annotate/decline")
def decline_for_me():
    """She declined the study's consent: whatever she holds of the study goes back to the pool (nothing, when the
    page asked before claiming: `next?claim=no`), so declining leaves nothing behind."""
    annotator_id, study = current_annotator()
    return {"released": decline(_engine(), study, annotator_id)}


def _completed(done: SubmittedOnProlific) -> dict:
    """`next`'s answer to a Prolific participant who has submitted already: her completion code again, no work."""
    return {"assignment": None, "message": done.message, **completion_after_submit(done.recruitment, PROVIDER)}


@blueprint.post("/api/assignments/<int:assignment_id>/submit")
def submit(assignment_id: int):
    annotator_id, study = current_annotator()
    if not request.is_json:
        raise UnsupportedMediaType("send the ratings as JSON (Content-Type: application/json)")
    payload = request.get_json(silent=True)
    if payload is None:
        raise BadRequest("the body is not valid JSON")
    receipt = submit_assignment(_engine(), assignment_id, annotator_id, payload, study=study)
    # Stored: a look at the study's decisions may close its claims (in the background, at a bounded cost).
    current_app.extensions["empeval.decisions_watch"].after_submission(_engine(), study)
    return receipt


_ERR = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def _schema_name(kind) -> str:
    """The OpenAPI schema name of a kind's submission body: LikertSubmission, PairwiseSubmission, ..."""
    return "".join(part.capitalize() for part in kind.name.replace("-", "_").split("_")) + "Submission"


_BEARER: list[dict[str, list[str]]] = [{"inviteToken": []}, {"inviteCookie": []}]
_LIMITED = {"429": {"description": "too many failed token checks from this address (see Retry-After)", **_ERR}}


def _json(schema: dict) -> dict:
    return {"content": {"application/json": {"schema": schema}}}


openapi.register_paths(
    {
        "/api/annotate/next": {"get": {
            "summary": "The caller's current or next assignment (claims one if needed; with claim=no never: the "
                       "task page asks so first, and claims once the rater accepts the consent)",
            "security": _BEARER,
            "parameters": [{"name": "claim", "in": "query", "required": False,
                            "schema": {"enum": ["yes", "no"], "default": "yes"}}],
            "responses": {"200": {"description": "assignment, or null with a message when none is left (with "
                                                 "claim=no: null when she holds none, and the study's name, title "
                                                 "and kind); a Prolific participant who has submitted already gets "
                                                 "her completion code again and no assignment",
                                  **_json({"$ref": "#/components/schemas/NextAssignment"})},
                          "400": {"description": "claim neither yes nor no", **_ERR},
                          "401": {"description": "no token", **_ERR}, "403": {"description": "invalid token", **_ERR},
                          "404": {"description": "study gone", **_ERR}, **_LIMITED}}},
        "/api/annotate/decline": {"post": {
            "summary": "The caller declined the study's consent: any assignment of the study she holds goes back to "
                       "the pool, with nothing of it kept",
            "security": _BEARER,
            "responses": {"200": {"description": "the ids released (empty when she held nothing)",
                                  **_json({"type": "object", "properties": {
                                      "released": {"type": "array", "items": {"type": "integer"}}}})},
                          "401": {"description": "no token", **_ERR}, "403": {"description": "invalid token", **_ERR},
                          "404": {"description": "study gone", **_ERR}, **_LIMITED}}},
        "/api/assignments/{assignment_id}/submit": {"post": {
            "summary": "Submit every answer of an assignment (ratings of a Likert study, choices of an A/B one, ...; "
                       "idempotent per submission_id)",
            "security": _BEARER,
            "parameters": [{"name": "assignment_id", "in": "path", "required": True, "schema": {"type": "integer"}}],
            "requestBody": {"required": True, **_json({"$ref": "#/components/schemas/Submission"})},
            "responses": {"200": {"description": "stored (or already stored by the same submission)",
                                  **_json({"$ref": "#/components/schemas/Receipt"})},
                          "400": {"description": "invalid ratings", **_ERR}, "401": {"description": "no token", **_ERR},
                          "403": {"description": "invalid token, revoked rater or closed study", **_ERR},
                          "404": {"description": "no such assignment of yours in this study", **_ERR},
                          "409": {"description": "already submitted with another submission id", **_ERR},
                          "413": {"description": "body too large", **_ERR},
                          "415": {"description": "not JSON", **_ERR}, **_LIMITED}}},
        "/api/annotate/session": {"post": {
            "summary": f"Trade the invite token for the {INVITE_COOKIE} cookie (HttpOnly, SameSite=Strict), which "
                       "the task page then uses; requests it authenticates must carry X-Requested-With",
            "security": [{"inviteToken": []}],
            "responses": {"200": {"description": "cookie set", **_json({"type": "object", "properties": {
                              "study": {"type": "string"}}})},
                          "401": {"description": "no token", **_ERR}, "403": {"description": "invalid token", **_ERR},
                          **_LIMITED}}},
    },
    {
        "NextAssignment": {"type": "object", "properties": {
            "assignment": {"type": ["object", "null"]}, "message": {"type": "string"},
            "study": {"type": "object", "description": "with claim=no: the study she is invited to",
                      "properties": {"name": {"type": "string"}, "title": {"type": "string"},
                                     "kind": {"type": "string"}}},
            "completion": {"type": "object", "description": "a Prolific participant who has submitted already: her "
                           "completion code again (and no assignment)",
                           "properties": {"code": {"type": "string"}, "url": {"type": "string"}}}}},
        # Generated from the rules the submission validates with (the envelope, server.annotation.submission_schema,
        # and each kind's entries, its annotation part), not copied; the assignment's study decides which applies.
        "Submission": {"oneOf": [{"$ref": f"#/components/schemas/{_schema_name(kind)}"}
                                 for kind in annotation_kinds()]},
        **{_schema_name(kind): submission_schema(kind) for kind in annotation_kinds()},
        "Receipt": {"type": "object", "properties": {
            "status": {"type": "string"}, "assignment_id": {"type": "integer"}, "submission_id": {"type": "string"},
            **{kind.counted: {"type": "integer", "description": f"{kind.counted} stored (a {kind.name} study)"}
               for kind in annotation_kinds()},
            "late": {"type": "boolean"}, "submitted_at": {"type": "string"},
            "completion": {"type": "object", "description": "a Prolific participant's completion code and the URL "
                           "that reports it to Prolific; only in the receipt of an accepted submit of a Prolific "
                           "participant", "properties": {"code": {"type": "string"}, "url": {"type": "string"}},
                           "required": ["code", "url"]}}},
    },
)
