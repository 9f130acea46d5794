"""Routes of a chat study's live conversation: a rater's turn (answered by the system the conversation is with) and
ending a conversation; and, for a crowd unit, the assignment as it stands. Authenticated as the other annotate
routes are (the invite cookie with X-Requested-With, or the invite token as Bearer), or, from a crowd platform's task
page, by the unit's token (server.web.crowd_live: cross-origin, her first turn claims the unit for her).

A turn is taken in three steps (server.annotation.kinds.chat_turns): the rater's utterance is stored, the system
is asked outside any transaction (the backend's LiveReplies: micro-batched per system, a timeout per attempt,
bounded retries), and its reply, or the conversation's failure, is stored. The answer is held back until
`chat.min_reply_seconds` have passed since the request arrived, so that a fast system and a slow one are not told
apart by how soon they answer (a slower system still shows: the floor hides speed below it, not above). The page
learns only the reply's text: no system name, no latency, no provenance.
"""
from __future__ import annotations

import atexit
import threading
import time
from typing import Any

from flask import Blueprint, current_app, request

from empeval.server.annotation.handout import assignment_payload
from empeval.server.annotation.kinds.chat_turns import begin_turn, end_conversation, record_reply, stored_reply
from empeval.server.backend.base import ContextTurn, DialogueContext
from empeval.server.backend.live import LiveReplies
from empeval.server.backend.registry import Registry
from empeval.server.web import openapi
from empeval.server.web.backend_api import registry
from empeval.server.web.crowd_live import allow_unit_requests_across_origins, live_annotator

blueprint = Blueprint("chat_api", __name__)
allow_unit_requests_across_origins(blueprint)


def live_replies(systems_config: str = "") -> LiveReplies:
    """The app's live reply service over the backend registry of `systems_config` (a chat study's own systems
    file; "": the app's registry, BACKEND_CONFIG or the built-in one), started at the first turn that needs it."""
    app = current_app
    key = "empeval.live" + (f":{systems_config}" if systems_config else "")
    live = app.extensions.get(key)
    if live is None:
        with app.extensions.setdefault("empeval.live.lock", threading.Lock()):
            live = app.extensions.get(key)
            if live is None:
                backend = registry()
                if systems_config:
                    backend = Registry.from_config(systems_config, backend.resources)
                live = app.extensions[key] = LiveReplies(backend)
                # Its threads are daemons; closing at exit lets a model call in flight end as a failure, not mid-air.
                atexit.register(live.close)
    return live


def close_live_replies(app: Any) -> None:
    """Stop every live reply service the app started (tests and embedders that stop what they start)."""
    for key in [k for k in app.extensions if k == "empeval.live" or k.startswith("empeval.live:")]:
        app.extensions.pop(key).close()


def _body() -> Any:
    return request.get_json(silent=True)


@blueprint.post("/api/assignments/<int:assignment_id>/conversations/<int:position>/turns")
def take_turn(assignment_id: int, position: int):
    started = time.monotonic()
    annotator_id, study = live_annotator(assignment_id, on_open="claim")
    engine = current_app.extensions["empeval.engine"]
    pending = begin_turn(engine, assignment_id, position, annotator_id, study, _body())
    setup = pending.conversation.setup
    if pending.reply is not None:
        result = stored_reply(pending)
    else:
        context = DialogueContext(turns=tuple(ContextTurn(role, text) for role, text in pending.history))
        reply = live_replies(setup.systems_config).reply(
            pending.conversation.system, context, timeout=setup.turn_timeout_seconds, retries=setup.turn_retries)
        result = record_reply(engine, pending, text=reply.text, provenance=reply.provenance,
                              failure=None if reply.text is not None else (reply.error or "no reply"))
    wait = setup.min_reply_seconds - (time.monotonic() - started)
    if wait > 0:
        time.sleep(wait)
    return result.as_json()


@blueprint.post("/api/assignments/<int:assignment_id>/conversations/<int:position>/end")
def end(assignment_id: int, position: int):
    annotator_id, study = live_annotator(assignment_id)
    return end_conversation(current_app.extensions["empeval.engine"], assignment_id, position, annotator_id, study)


@blueprint.get("/api/assignments/<int:assignment_id>/live")
def live_state(assignment_id: int):
    """A crowd unit's assignment as it stands (its conversations' turns and states), for the platform's page, whose
    own copy of the unit was written before any turn: 200 while it is open or hers, 409 once another worker holds
    it. A local rater has /api/annotate/next."""
    live_annotator(assignment_id, on_open="show", units_only=True)
    return {"assignment": assignment_payload(current_app.extensions["empeval.engine"], assignment_id)}


_ERR = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
_BEARER: list[dict[str, list[str]]] = [{"inviteToken": []}, {"inviteCookie": []}, {"crowdUnit": []}]
_PATH = [{"name": "assignment_id", "in": "path", "required": True, "schema": {"type": "integer"}},
         {"name": "position", "in": "path", "required": True, "schema": {"type": "integer"}}]
_REFUSALS = {"400": {"description": "a malformed turn (empty, too long, control characters, an odd index)", **_ERR},
             "401": {"description": "no token", **_ERR},
             "403": {"description": "invalid token, revoked rater or closed study", **_ERR},
             "404": {"description": "no such assignment of yours, or no conversation at that position", **_ERR},
             "409": {"description": "out of order, after the end, beyond the study's length, another text at a "
                                    "taken index, or an assignment no longer active", **_ERR},
             "429": {"description": "too many failed token checks from this address", **_ERR}}

openapi.register_paths(
    {
        "/api/assignments/{assignment_id}/conversations/{position}/turns": {"post": {
            "summary": "Send the rater's next utterance in a chat study's conversation and get the partner's reply "
                       "(a resend of the same utterance is answered from the store)",
            "security": _BEARER, "parameters": _PATH,
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "additionalProperties": False, "required": ["index", "text"],
                "properties": {"index": {"type": "integer", "minimum": 0, "multipleOf": 2},
                               "text": {"type": "string", "minLength": 1}}}}}},
            "responses": {"200": {"description": "the partner's reply, or that the partner failed", "content": {
                                  "application/json": {"schema": {"$ref": "#/components/schemas/ChatReply"}}}},
                          **_REFUSALS}}},
        "/api/assignments/{assignment_id}/conversations/{position}/end": {"post": {
            "summary": "End a chat study's conversation (idempotent) once it is long enough and the partner spoke "
                       "last",
            "security": _BEARER, "parameters": _PATH,
            "responses": {"200": {"description": "ended", "content": {"application/json": {"schema": {
                "type": "object", "properties": {"state": {"const": "ended"}}}}}}, **_REFUSALS}}},
        "/api/assignments/{assignment_id}/live": {"get": {
            "summary": "A crowd chat unit's assignment as it stands (its conversations' turns and states), for the "
                       "platform's task page; cross-origin, authenticated by the unit's token",
            "security": [{"crowdUnit": []}], "parameters": _PATH[:1],
            "responses": {"200": {"description": "the assignment, as /api/annotate/next gives a local rater hers",
                                  "content": {"application/json": {"schema": {"type": "object"}}}},
                          "401": {"description": "no unit token", **_ERR},
                          "403": {"description": "invalid or expired unit token, revoked worker or closed study",
                                  **_ERR},
                          "404": {"description": "no such assignment in the unit's study", **_ERR},
                          "409": {"description": "another worker holds the unit, or it is finished", **_ERR},
                          "429": _REFUSALS["429"]}}},
    },
    {"ChatReply": {"type": "object", "properties": {
        "index": {"type": "integer"}, "text": {"type": "string"}, "utterances": {"type": "integer"},
        "can_end": {"type": "boolean"}, "must_end": {"type": "boolean"}, "failed": {"type": "boolean"},
        "message": {"type": "string"}}}},
)
