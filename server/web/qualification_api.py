"""Routes of a rater's qualification (server/annotation/qualification.py): her state in the study her invite is for,
and her answer to one practice item. Authenticated as the other annotate routes are (the invite cookie with
X-Requested-With, or the invite token as Bearer). The hand-out refuses real work to a rater who has not passed
(GET /api/annotate/next answers 403 saying so); the task page asks here first.
"""
from __future__ import annotations

from flask import Blueprint, current_app, request
from werkzeug.exceptions import BadRequest, UnsupportedMediaType

from empeval.server.annotation.qualification import answer_body_schema, answer_gold_item, qualification_state
from empeval.server.store.statuses import QualificationStatus
from empeval.server.web import openapi
from empeval.server.web.auth import current_annotator

blueprint = Blueprint("qualification_api", __name__)


def _engine():
    return current_app.extensions["empeval.engine"]


@blueprint.get("/api/annotate/qualification")
def my_qualification():
    annotator_id, study = current_annotator()
    return qualification_state(_engine(), study, annotator_id)


@blueprint.post("/api/annotate/qualification/answers")
def answer():
    annotator_id, study = current_annotator()
    if not request.is_json:
        raise UnsupportedMediaType("send the answer as JSON (Content-Type: application/json)")
    body = request.get_json(silent=True)
    if body is None:
        raise BadRequest("the body is not valid JSON")
    return answer_gold_item(_engine(), study, annotator_id, body)


_ERR = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
_BEARER: list[dict[str, list[str]]] = [{"inviteToken": []}, {"inviteCookie": []}]


def _json(schema: dict) -> dict:
    return {"content": {"application/json": {"schema": schema}}}


_ANSWER_VALUE = {"oneOf": [{"type": "integer"}, {"type": "string"}]}

openapi.register_paths(
    {
        "/api/annotate/qualification": {"get": {
            "summary": "The caller's qualification in her study: its practice items, what she has answered and "
                       "whether she passed ({\"required\": false} for a study without one)",
            "security": _BEARER,
            "responses": {"200": {"description": "her qualification", **_json({
                              "$ref": "#/components/schemas/QualificationState"})},
                          "401": {"description": "no token", **_ERR},
                          "403": {"description": "invalid token, revoked rater or closed study", **_ERR},
                          "404": {"description": "study gone", **_ERR}}}},
        "/api/annotate/qualification/answers": {"post": {
            "summary": "Answer one practice item of the qualification (idempotent: the same answer again gets the "
                       "same reply); the reply carries its feedback and the state after it",
            "security": _BEARER,
            "requestBody": {"required": True, **_json({"$ref": "#/components/schemas/QualificationAnswer"})},
            "responses": {"200": {"description": "stored (or stored already), with its feedback", **_json({
                              "type": "object", "properties": {
                                  "item": {"type": "integer"}, "attempt": {"type": "integer"},
                                  "answer": {"type": "object", "additionalProperties": _ANSWER_VALUE},
                                  "correct": {"type": "boolean"},
                                  "right": {"type": "object", "additionalProperties": {"type": "array"}},
                                  "feedback": {"type": "string"},
                                  "state": {"$ref": "#/components/schemas/QualificationState"}}})},
                          "400": {"description": "an answer that does not fit the study", **_ERR},
                          "401": {"description": "no token", **_ERR},
                          "403": {"description": "invalid token, revoked rater or closed study", **_ERR},
                          "409": {"description": "answered already with another answer, an attempt not under way, "
                                                 "or the qualification decided already", **_ERR},
                          "415": {"description": "not JSON", **_ERR}}}},
    },
    {
        # Generated from the declarations the answer is checked with (server.annotation.qualification), not copied.
        "QualificationAnswer": answer_body_schema(),
        "QualificationState": {"type": "object", "required": ["required"], "properties": {
            "required": {"type": "boolean"},
            "status": {"enum": [status.value for status in QualificationStatus]},
            "attempt": {"type": "integer"}, "attempts": {"type": "integer"}, "min_correct": {"type": "integer"},
            "items": {"type": "array"}, "answered": {"type": "array"}, "choices": {"type": "array"},
            "completion": {"type": "object", "description": "a failed Prolific participant's completion code (the "
                           "study's screened-out or failed-checks code) and the URL that reports it"}}},
    },
)
