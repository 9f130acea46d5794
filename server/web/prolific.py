"""The Prolific study link: `GET /prolific/<study token>?PROLIFIC_PID=...&STUDY_ID=...&SESSION_ID=...`.

Prolific sends each participant there with her three ids filled in. The route checks the link's signature (403,
counted by the failure limiter like a wrong invite token), the three ids' format (400 naming the parameter), that
STUDY_ID is the study's Prolific study (403, counted too), that the study is open and she is not revoked (403, as
for an invite), and, for a participant new to the installation, that her address has not had the study's
recruitment.admissions_per_minute new ones in the last minute (429 with Retry-After: one client with made-up ids
cannot take a study's work; see server.annotation.prolific); then it lets her in (server.annotation.prolific.admit:
her annotator is found, or created on her first visit, by the keyed hash of her Prolific id), sets the invite cookie
the invite flow sets (auth.set_invite_cookie) and sends her to the task page (303 to /annotate), holding nothing: the
page claims her assignment once she accepts the consent. A participant who has submitted her
assignment already gets her completion code again (200, a page or JSON), not more work; one who failed the study's
qualification gets its screened-out (or failed-checks) code the same way. A browser is answered
with a short page saying what was wrong and what to do; anything else with the app's JSON error.

The link is a GET that sets a cookie, as any link from another site must be: whoever knows the study link can
send a browser to it with a participant id of their choosing, as they could with an invite link.
"""
from __future__ import annotations

from flask import Blueprint, current_app, redirect, render_template, request
from werkzeug.exceptions import HTTPException, TooManyRequests

from empeval.server.annotation.prolific import (
    AdmissionLimiter,
    InvalidStudyLink,
    TooManyNewcomers,
    WrongProlificStudy,
    admit,
    limit_newcomers,
    read_study_token,
    read_visit,
)
from empeval.server.errors import EmpevalError
from empeval.server.store.qualification import CODES_ON_FAILURE
from empeval.server.web import openapi
from empeval.server.web.auth import limited_token_check, set_invite_cookie, signing_secret

blueprint = Blueprint("prolific", __name__)


@blueprint.get("/prolific/<path:token>")
def study_link(token: str):
    """Let a Prolific participant in and send her to the task page (see the module docstring)."""
    try:
        return _let_in(token)
    except (EmpevalError, HTTPException) as error:
        if not _wants_a_page():
            raise  # the app's JSON error
        return _refusal_page(error)


def _wants_a_page() -> bool:
    return request.accept_mimetypes.best_match(["application/json", "text/html"]) == "text/html"


def _let_in(token: str):
    secret = signing_secret()
    with limited_token_check(InvalidStudyLink):
        study = read_study_token(secret, token)
    visit = read_visit(request.args.to_dict(flat=False))
    limiter = current_app.extensions.setdefault("empeval.prolific_admissions", AdmissionLimiter())
    try:
        with limited_token_check(WrongProlificStudy):
            admission = admit(current_app.extensions["empeval.engine"], secret, study, visit,
                              newcomer=limit_newcomers(limiter, request.remote_addr or "unknown"))
    except TooManyNewcomers as refused:
        raise TooManyRequests(refused.message, retry_after=refused.retry_after) from None
    if admission.completion is not None:  # she has done her assignment, or failed the qualification: a code, no work
        completion = admission.completion["completion"]
        if _wants_a_page():
            return render_template("prolific_completed.html", code=completion["code"], url=completion["url"],
                                   outcome=admission.outcome)
        return {"status": admission.outcome, **admission.completion}
    response = redirect("/annotate", code=303)
    set_invite_cookie(response, admission.invite)
    return response


def _refusal_page(error: EmpevalError | HTTPException):
    """The refusal as a page a participant reads: the same message and status as the JSON error."""
    if isinstance(error, EmpevalError):
        return render_template("prolific_refused.html", message=error.message), error.http_status
    headers = [(k, v) for k, v in error.get_headers() if k.lower() != "content-type"]  # Retry-After of a 429
    return render_template("prolific_refused.html", message=error.description), error.code or 400, headers


_ERR = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}},
                    "text/html": {"schema": {"type": "string"}}}}
_ID = {"type": "string", "pattern": "^[0-9a-f]{24}$"}

openapi.register_paths({
    "/prolific/{token}": {"get": {
        "summary": "The Prolific study link (`empeval prolific link STUDY`): lets a participant in and sends her to "
                   "the task page with the invite cookie set",
        "parameters": [{"name": "token", "in": "path", "required": True, "schema": {"type": "string"}},
                       *({"name": name, "in": "query", "required": True, "schema": _ID}
                         for name in ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID"))],
        "responses": {"303": {"description": "admitted: the invite cookie is set, Location is /annotate"},
                      "200": {"description": "she submitted her assignment already (her completion code again), or "
                                             "failed the qualification (its screened-out or failed-checks code)",
                              "content": {"application/json": {"schema": {"type": "object", "properties": {
                                  "status": {"enum": ["completed", *CODES_ON_FAILURE]},
                                  "completion": {"type": "object", "properties": {
                                      "code": {"type": "string"}, "url": {"type": "string"}}}}}},
                                          "text/html": {"schema": {"type": "string"}}}},
                      "400": {"description": "a Prolific id missing, repeated or malformed", **_ERR},
                      "403": {"description": "altered link, another Prolific study, closed study or revoked "
                                             "participant", **_ERR},
                      "404": {"description": "the study is gone", **_ERR},
                      "429": {"description": "too many failed link checks, or new participants, from this address",
                              **_ERR}}}},
})
