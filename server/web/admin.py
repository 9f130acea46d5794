"""The researcher's side: study progress (dashboard and JSON), a study's page (raters, comments, item browser), the
task preview, the tidy export, and signing in to /admin.

The dashboard is reached by signing in: the form at /admin, or `/admin#<admin token>` (the part after `#`
never reaches the server; the page's script posts it to /admin/session and cleans the address bar). Either
way the token is traded for the admin session cookie (see server.web.auth). The old `/admin?token=...` still
signs in, then redirects to /admin; scripts send `Authorization: Bearer <admin token>`.
"""
from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, current_app, jsonify, redirect, render_template, request, send_from_directory
from sqlalchemy import select
from sqlalchemy.orm import Session
from werkzeug.exceptions import BadRequest, Forbidden, NotFound, TooManyRequests

from empeval.server.annotation.export import export_text
from empeval.server.annotation.item_browser import BrowserQuery, browse, browsed_systems, parse_query, view_csv
from empeval.server.annotation.kinds import annotation_kind
from empeval.server.annotation.preview import preview_payload
from empeval.server.annotation.rater_table import rater_table, study_comments
from empeval.server.annotation.study_log import EXPORT, record_release, study_log
from empeval.server.errors import BadInput
from empeval.server.store.kinds.likert import LikertSetup
from empeval.server.store.models import Study
from empeval.server.store.queries import assignment_counts, study_by_name
from empeval.server.store.statuses import StudyStatus
from empeval.server.web import openapi
from empeval.server.web.auth import (
    admin_required,
    bearer_token,
    check_admin_token,
    clear_admin_cookie,
    end_admin_session,
    has_admin_session,
    require_admin,
    set_admin_cookie,
)
from empeval.server.web.decisions_watch import look

blueprint = Blueprint("admin", __name__, template_folder="templates")

def _engine():
    return current_app.extensions["empeval.engine"]


def _flagged_pseudonyms(engine, name: str) -> set[str] | None:
    """The study's flagged raters (server/annotation/kinds/rater_flags.py, imported at the first study page: it runs
    the report's analysis, with pandas, which a server that only answers raters never loads)."""
    from empeval.server.annotation.kinds.rater_flags import flagged_pseudonyms

    return flagged_pseudonyms(engine, name)


def study_progress(name: str) -> dict:
    """Whether it is open or closed, assignments by status, and what the study's kind counts (its annotation part's
    progress: answers in all and per annotator, units covered, k, alpha so far for a Likert study), with the words
    the pages use for its units. Counted in SQL, not from the export."""
    with Session(_engine()) as session:
        study = study_by_name(session, name)
        kind = annotation_kind(study.config.kind)
        return {"study": name, "kind": kind.name, "status": study.status,
                "is_closed": study.status == StudyStatus.CLOSED, "assignments": assignment_counts(session, study.id),
                **kind.progress(session, study),
                "words": {"unit": kind.unit, "units": kind.units, "answered": kind.answered,
                          "per_annotator": kind.per_annotator}}


@blueprint.get("/admin")
def dashboard():
    if bearer_token() is None and not has_admin_session():
        legacy = request.args.get("token")
        if not legacy:
            return render_template("admin_login.html")
        return _sign_in(legacy, by_form=True)  # an old /admin?token= link: sign in, then drop it from the address
    require_admin()
    with Session(_engine()) as session:
        names = session.scalars(select(Study.name).order_by(Study.created_at)).all()
    studies = [study_progress(name) for name in names]
    return render_template("admin.html", studies=studies)


@blueprint.get("/admin/studies/<name>")
@admin_required
def study_page(name: str):
    """One study for the researcher: progress, export links, the task preview, the per-rater table, the raters'
    comments, the study's log (withdrawals) and the item browser (`?page=N`, 1-based; `&rated=only` for the items
    rated at least once; for a Likert study also search, filters and sort: server.annotation.item_browser)."""
    engine = _engine()
    query, criteria, systems = _browser_query(name)
    progress = study_progress(name)
    view = browse(engine, name, query, flagged=lambda: _flagged_pseudonyms(engine, name))
    return render_template("admin_study.html", s=progress, criteria=criteria, items=view.items, view=view,
                           systems=systems, decisions=_decisions(name),
                           raters=rater_table(engine, name), comments=study_comments(engine, name),
                           log=study_log(engine, name))


def _browser_query(name: str) -> tuple[BrowserQuery, tuple[str, ...], tuple[str, ...]]:
    """The item browser's arguments, checked against the study (its systems, criteria and scale): a 400 naming
    the argument otherwise. With the study's criteria and systems, for the filter form."""
    with Session(_engine()) as session:
        study = study_by_name(session, name)
        config = study.config
        systems = browsed_systems(session, study)
    setup = config.setup
    scale = (setup.scale.min, setup.scale.max) if isinstance(setup, LikertSetup) else None
    return (parse_query(request.args, systems=systems, criteria=config.criterion_keys, scale=scale),
            config.criterion_keys, systems)


@blueprint.get("/admin/studies/<name>/items.csv")
@admin_required
def items_csv(name: str):
    """The item browser's current view (the study page's arguments, every page of it) as CSV, one row per item and
    rater; its first line, a comment, names the filters. Likert studies (another kind: its export)."""
    engine = _engine()
    query, _, _ = _browser_query(name)
    text = view_csv(engine, name, query, flagged=lambda: _flagged_pseudonyms(engine, name))
    return Response(text, mimetype="text/csv",
                    headers={"Content-Disposition": f'attachment; filename="{name}-items.csv"'})


def _decisions(name: str) -> dict | None:
    """The study's pre-registered decisions now (server/annotation/decisions.py), model-assisted with the judge that
    scored it most recently, if any; None for a study without [decisions]. Shown only: claims close after
    submissions (server/web/decisions_watch.py) or on `empeval study status`, never on a GET."""
    try:
        status = look(_engine(), name, close=False)
    except BadInput:  # a study of another kind (decisions are computed for Likert and pairwise studies)
        return None
    return None if status is None else status.as_dict()


@blueprint.get("/admin/studies/<name>/preview")
@admin_required
def preview_page(name: str):
    """The task page as a rater sees it, for the researcher; its script reads /api/studies/<name>/preview (a payload
    marked `preview: true`: the page shows a banner and never posts). Nothing is claimed or written."""
    with Session(_engine()) as session:
        study_by_name(session, name)  # an unknown study is a 404 here, not a page that fails to load
    folder = current_app.config.get("TASK_UI_DIR")
    if not folder or not (Path(folder) / "index.html").is_file():
        raise NotFound("the task UI is not built or not configured (TASK_UI_DIR): run `make ui`")
    return send_from_directory(folder, "index.html", max_age=0)


@blueprint.get("/api/studies/<name>/preview")
@admin_required
def preview(name: str):
    """The preview payload (server.annotation.preview): the study's first assignment as the task page shows it,
    marked `preview: true`, with assignment id 0 so that no submit can store anything. Writes nothing."""
    return {"assignment": preview_payload(_engine(), name)}


@blueprint.post("/admin/session")
def sign_in():
    """Trade the admin token for the admin session cookie: from the sign-in form (field `token`), or from the
    page's script as `Authorization: Bearer` (the `/admin#<token>` form)."""
    token = bearer_token()
    if token is not None:
        return _sign_in(token, by_form=False)
    return _sign_in(request.form.get("token", "").strip(), by_form=True)


def _sign_in(token: str, *, by_form: bool):
    try:
        if not token:
            raise Forbidden("enter the admin token (`empeval admin-token` prints it)")
        check_admin_token(token)
    except (Forbidden, TooManyRequests) as error:
        if not by_form:
            raise
        headers = [(k, v) for k, v in error.get_headers() if k.lower() != "content-type"]  # Retry-After of a 429
        return render_template("admin_login.html", error=error.description), error.code, headers
    response = redirect("/admin", code=303) if by_form else jsonify(status="signed in")
    set_admin_cookie(response)
    return response


@blueprint.post("/admin/logout")
def sign_out():
    """Sign out: the session ends in the store, not only in this browser, so a copy of the cookie is refused by
    every server process from now on; being the one researcher's session, every admin session ends with it (sign
    out anywhere, signed out everywhere). A script ends them all with the admin token as a bearer. A request with
    neither (another site's form: the SameSite=Strict cookie stays behind) ends nothing and only clears the
    cookie."""
    token = bearer_token()
    if token is not None:
        check_admin_token(token)
        end_admin_session()
        return jsonify(status="every admin session ended")
    if has_admin_session():
        end_admin_session()
    response = redirect("/admin", code=303)
    clear_admin_cookie(response)
    return response


@blueprint.get("/api/studies/<name>/progress")
@admin_required
def progress(name: str):
    return study_progress(name)


@blueprint.get("/api/studies/<name>/export")
@admin_required
def export(name: str):
    fmt = request.args.get("format", "csv")
    if fmt not in ("csv", "jsonl"):
        raise BadRequest(f"format must be csv or jsonl, got {fmt!r}")
    text, _, _ = export_text(_engine(), name, fmt)
    # Logged with whose answers it held: a later withdrawal names this download (study_log).
    record_release(_engine(), name, EXPORT, where=f"a {fmt} download from the dashboard or the export API")
    if fmt == "csv":
        return Response(text, mimetype="text/csv",
                        headers={"Content-Disposition": f'attachment; filename="{name}.csv"'})
    return Response(text, mimetype="application/x-ndjson")


_ERR = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
_ADMIN: list[dict[str, list[str]]] = [{"adminToken": []}, {"adminCookie": []}]
_LIMITED = {"429": {"description": "too many failed token checks from this address (see Retry-After)", **_ERR}}
_NAME = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
openapi.register_paths({
    "/api/studies/{name}/progress": {"get": {
        "summary": "Progress of a study: assignments by status, ratings per annotator, alpha so far",
        "security": _ADMIN, "parameters": _NAME,
        "responses": {"200": {"description": "progress",
                              "content": {"application/json": {"schema": {"type": "object"}}}},
                      "401": {"description": "no token", **_ERR}, "403": {"description": "wrong token", **_ERR},
                      "404": {"description": "no such study", **_ERR}, **_LIMITED}}},
    "/api/studies/{name}/preview": {"get": {
        "summary": "The study's first assignment as the task page shows it, marked preview: true (assignment id 0, "
                   "so no submit can store it); nothing is claimed or written",
        "security": _ADMIN, "parameters": _NAME,
        "responses": {"200": {"description": "the preview payload",
                              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/"
                                                                                   "NextAssignment"}}}},
                      "401": {"description": "no token", **_ERR}, "403": {"description": "wrong token", **_ERR},
                      "404": {"description": "no such study, or no assignment in it", **_ERR}, **_LIMITED}}},
    "/api/studies/{name}/export": {"get": {
        "summary": "All ratings of a study, one row per rating (tidy long CSV or JSONL); for a pairwise study "
                   "its judgment table, one row per choice and criterion",
        "security": _ADMIN,
        "parameters": _NAME + [{"name": "format", "in": "query",
                                "schema": {"type": "string", "enum": ["csv", "jsonl"]}}],
        "responses": {"200": {"description": "the export",
                              "content": {"text/csv": {"schema": {"type": "string"}},
                                          "application/x-ndjson": {"schema": {"type": "string"}}}},
                      "400": {"description": "bad format", **_ERR}, "401": {"description": "no token", **_ERR},
                      "403": {"description": "wrong token", **_ERR}, "404": {"description": "no such study", **_ERR},
                      **_LIMITED}}},
})
